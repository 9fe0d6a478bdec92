//! The world model WMRL trains the VLA against: latent dynamics in the
//! policy's own latent space, a success head that predicts episode success
//! from an action trajectory, and batched imagined rollouts of the policy
//! inside the model. It replaces the simulator (or robot) for most
//! rollouts; the anchor stream corrects its errors.
//!
//! - [`model`]: the networks (dynamics, success head, episode score).
//! - [`trajectory`]: executed episodes in latent space, from demonstrations
//!   or recorded executions.
//! - [`episodes`]: the `.wmlat` file of encoded episodes (checksummed).
//! - [`train`]: losses, the optimiser, scoring executed episodes.
//! - [`fit`]: a full training run with metrics and a loss plot.
//! - [`imagine`]: [`VlaWorldModel`], the core's `WorldModel` seam: imagine
//!   (whole episodes, or branched after executed prefixes), score anchors by
//!   open-loop replay, replay buffer, refresh.
//! - [`closed_loop`]: the batched closed-loop imagination kernel, from any
//!   encoded observation at any chunk boundary.
//! - [`prefix`]: the executed prefixes of branched imagination
//!   ([`PrefixExecutor`]; `SimPrefixes` in the simulator).
//! - [`replay`]: the bounded FIFO of executed episodes.
//! - [`quality`]: AUROC, Brier, ECE, bias and noise; reliability plot.
//! - [`fidelity`]: imagination branched from real states at several depths,
//!   scored against real outcomes (how far the model can imagine).
//! - [`checkpoint`]: safetensors + JSON, strict shape checks.
//! - `collect` (feature `sim`): recorded policy rollouts in the simulator.
//! - `bench` (feature `sim`): imagined vs simulated episodes per second.
//! - [`config`]: presets `tiny`, `cpu`, `gpu`.

#[cfg(feature = "sim")]
pub mod bench;
pub mod checkpoint;
pub mod closed_loop;
#[cfg(feature = "sim")]
pub mod collect;
pub mod config;
pub mod episodes;
mod error;
pub mod fidelity;
pub mod fit;
pub mod imagine;
pub mod model;
pub mod prefix;
pub mod quality;
pub mod replay;
pub mod run_state;
pub mod train;
pub mod trajectory;

pub use closed_loop::{ImagineStart, ImaginedEpisode, imagine_from};
pub use config::WmConfig;
pub use error::{Error, Result};
#[cfg(feature = "sim")]
pub use imagine::SimStarts;
pub use imagine::{StartObservations, VlaWorldModel, WmStats};
pub use model::LatentWorldModel;
pub use prefix::PrefixExecutor;
#[cfg(feature = "sim")]
pub use prefix::SimPrefixes;
pub use replay::ReplayBuffer;
pub use trajectory::{Dims, LatentTrajectory};

#[cfg(test)]
mod tests;
