//! The rapier world of one task: the robot multibody from its URDF, the table,
//! fixtures (fixed roots with jointed links) and free objects, built from a
//! [`Scene`](crate::scene::Scene); state capture/restore; contact queries.

mod build;
pub mod convert;
mod state;

pub use build::{ColliderInfo, EntityBodies, LinkBodies, RobotBodies, SimWorld, WorldParams};
pub use state::{EntityState, SimState};
