//! Robot arms over zenoh as WMRL anchor executors.
//!
//! - [`protocol`]: key expressions under `wmrl/robots/<id>/…` and the
//!   versioned JSON messages (episode start, observations, action chunks,
//!   outcomes, status and operator events).
//! - [`driver`]: the [`RobotDriver`](driver::RobotDriver) seam a robot
//!   implements, and [`SimDriver`](driver::SimDriver) for the simulator.
//! - [`safety`]: workspace and speed limits the daemon applies to every action.
//! - [`daemon`]: `wmrl robots serve`, serving one robot (watchdog, emergency stop,
//!   resets, rejection of bad input).
//! - [`pool`]: the trainer's [`ZenohExecutorPool`](pool::ZenohExecutorPool),
//!   an `AnchorExecutor` over every robot it discovers.
//! - [`net`]: opening zenoh sessions from config files or explicit endpoints.
//! - [`certs`]: a private CA and certificates for TLS with access control.
//! - [`bench`]: round-trip latency and bridge throughput (`wmrl bench robots`).

pub mod bench;
pub mod certs;
pub mod daemon;
pub mod driver;
mod error;
pub mod net;
pub mod pool;
pub mod protocol;
pub mod safety;

pub use error::{Error, Result};
