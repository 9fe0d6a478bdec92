//! A Rapier tabletop simulator for LIBERO-Long-style manipulation: a URDF Panda
//! arm on a multibody driven through joint motors by a damped-least-squares IK
//! controller at 20 Hz (physics 240 Hz), the ten LIBERO-Long task scenes (TOML or
//! BDDL), goal predicates, fixed seeded initial states, a CPU rasteriser for the
//! agent-view and wrist cameras, scripted experts and a rayon-vectorised wrapper.

pub mod api;
pub mod bench;
pub mod control;
pub mod env;
pub mod error;
pub mod expert;
pub mod init_states;
pub mod physics;
pub mod predicates;
pub mod render;
pub mod robot;
pub mod rollout;
pub mod scene;
pub mod tasks;
pub mod vec_env;

pub use api::{
    ACTION_DIM, Action, ExecutionError, NOOP_ACTION, Observation, PROPRIO_DIM, Proprio, StepOutcome,
};
pub use env::{ActionStats, EnvConfig, SimEnv};
pub use error::{Result, SimError};
pub use init_states::{INIT_SEED, InitStateSet, NUM_INIT_STATES};
pub use physics::SimState;
pub use tasks::{MAX_EPISODE_STEPS, NUM_TASKS, TaskSpec, libero_long_tasks, task};
pub use vec_env::VecEnv;
