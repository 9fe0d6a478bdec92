//! The rapier world of one task: the robot multibody from its URDF, the table,
//! fixtures (fixed roots with jointed links) and free objects, built from a
//! [`Scene`](crate::scene::Scene); state capture/restore; contact queries.

pub mod convert;
mod build;
mod state;

pub use build::{ColliderInfo, EntityBodies, LinkBodies, RobotBodies, SimWorld, WorldParams};
pub use state::{EntityState, SimState};
