//! The environment's public data types: what a policy sees (observation,
//! proprioception), what it sends (a 7-D action) and what a step returns.
//! Other crates (the VLA policy, the world model, the trainer) code against these.

use serde::{Deserialize, Serialize};

/// Number of proprioceptive values in [`Proprio::to_vec`].
pub const PROPRIO_DIM: usize = 15;

/// Dimension of an [`Action`].
pub const ACTION_DIM: usize = 7;

/// A LIBERO action: end-effector delta position (x, y, z; 1.0 = 5 cm), delta
/// rotation as an axis-angle vector (1.0 = 0.5 rad), gripper (-1 open, +1 close).
/// All components in [-1, 1]; anything else is clamped (NaN becomes 0) and counted.
pub type Action = [f32; ACTION_DIM];

/// The no-op action LIBERO's evaluation scripts send while objects settle.
pub const NOOP_ACTION: Action = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0];

/// Proprioception: the robot's own state.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Proprio {
    /// Arm joint positions (rad); arms with fewer joints leave the tail at 0.
    pub joint_positions: [f32; 7],
    /// End-effector (grip site) position in the world frame (m).
    pub eef_position: [f32; 3],
    /// End-effector orientation as a unit quaternion (x, y, z, w), world frame.
    pub eef_quat_xyzw: [f32; 4],
    /// Distance between the two fingers (m), 0 (closed) to 0.08 (open).
    pub gripper_width: f32,
}

impl Proprio {
    /// The 15 values in field order: joints (7), position (3), quaternion (4), width (1).
    pub fn to_vec(&self) -> Vec<f32> {
        let mut v = Vec::with_capacity(PROPRIO_DIM);
        v.extend_from_slice(&self.joint_positions);
        v.extend_from_slice(&self.eef_position);
        v.extend_from_slice(&self.eef_quat_xyzw);
        v.push(self.gripper_width);
        v
    }
}

/// What the policy observes after a reset or a step.
#[derive(Debug, Clone)]
pub struct Observation {
    /// Third-person camera over the table (upright, as OpenVLA/openpi feed it).
    /// Empty (0×0) when cameras are disabled.
    pub agent_view: image::RgbImage,
    /// Camera on the robot's hand, looking along the gripper.
    pub wrist_view: image::RgbImage,
    /// Robot state.
    pub proprio: Proprio,
}

/// Why an episode ended without a verdict on the task: the simulation itself failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum ExecutionError {
    /// A position or velocity became NaN or infinite.
    NonFiniteState {
        /// The body whose state became non-finite.
        body: String,
    },
    /// A body left the workspace or moved implausibly fast.
    Unstable {
        /// The body that flew off.
        body: String,
        /// Its distance from the table centre (m).
        distance: f32,
        /// Its speed (m/s).
        speed: f32,
    },
}

impl std::fmt::Display for ExecutionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExecutionError::NonFiniteState { body } => {
                write!(f, "simulation unstable: non-finite state of `{body}`")
            }
            ExecutionError::Unstable {
                body,
                distance,
                speed,
            } => write!(
                f,
                "simulation unstable: `{body}` at {distance:.2} m from the table moving at {speed:.1} m/s"
            ),
        }
    }
}

/// The result of one control step.
#[derive(Debug, Clone)]
pub struct StepOutcome {
    /// Observation after the step.
    pub observation: Observation,
    /// All goal predicates hold.
    pub success: bool,
    /// The episode is over: success, the step limit, or an execution error.
    pub done: bool,
    /// Set when the simulation failed (distinct from a task failure).
    pub execution_error: Option<ExecutionError>,
}
