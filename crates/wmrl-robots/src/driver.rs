//! The robot-side seam: [`RobotDriver`] is what `wmrl robots serve` needs from an
//! arm, and [`SimDriver`] serves the project's simulator through it.
//!
//! # Adding a driver for real hardware
//! Implement [`RobotDriver`] for your arm (a vendor SDK, a ROS 2 bridge, …):
//!
//! - [`reset`](RobotDriver::reset) moves the arm home and returns
//!   [`ResetStatus::NeedsOperator`] when a person must arrange the scene;
//!   the daemon then waits for the operator's `reset_done` before the
//!   episode starts (an episode never starts without a completed reset).
//! - [`step`](RobotDriver::step) executes one action and blocks for one
//!   control period (50 ms at 20 Hz): the robot, not the trainer, sets the pace.
//!   Actions arrive already clamped by the daemon's [`SafetyLimits`](crate::safety::SafetyLimits).
//! - [`hold`](RobotDriver::hold) commands zero motion (the watchdog calls it
//!   when actions stop arriving), [`emergency_stop`](RobotDriver::emergency_stop)
//!   halts now.
//! - Report faults as [`StepReport::execution_error`]: the trainer re-queues
//!   the episode instead of counting it as a task failure.
//! - Without automatic success detection, set
//!   [`DriverInfo::automatic_success`] to false: an operator confirms each outcome.
//!
//! The trainer needs no change: it only speaks the protocol.

use std::time::{Duration, Instant};

use wmrl_sim::{EnvConfig, NUM_TASKS, Observation, SimEnv};

/// A driver's failure (hardware fault, invalid task); the daemon reports it
/// as the episode's execution error.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct DriverError(pub String);

/// What the daemon announces about its robot.
#[derive(Debug, Clone, PartialEq)]
pub struct DriverInfo {
    /// Driver kind (`sim`, a vendor name).
    pub driver: String,
    /// Control rate (Hz).
    pub control_hz: f64,
    /// Camera size (width, height); (0, 0) without cameras.
    pub camera: (u32, u32),
    /// Task suite the robot can set up.
    pub suite: String,
    /// Success is detected automatically (otherwise an operator confirms it).
    pub automatic_success: bool,
}

/// Whether an episode may start right after [`RobotDriver::reset`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetStatus {
    /// The scene is in the requested initial state.
    Ready,
    /// The arm is home; an operator must arrange the scene and send `reset_done`.
    NeedsOperator,
}

/// The result of one control step.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StepReport {
    /// The task's goal holds (always false without automatic success detection).
    pub success: bool,
    /// The step could not be executed properly (fault, instability).
    pub execution_error: Option<String>,
}

/// One robot arm (real or simulated), as the daemon drives it.
pub trait RobotDriver: Send {
    /// What the robot is.
    fn info(&self) -> DriverInfo;

    /// Brings the scene to `initial_state` of `task` (or the arm home and
    /// asks an operator to arrange the scene).
    fn reset(&mut self, task: usize, initial_state: usize) -> Result<ResetStatus, DriverError>;

    /// The current observation (cameras and proprioception).
    fn observe(&mut self) -> Result<Observation, DriverError>;

    /// Executes one (already clamped) 7-D action for one control period.
    fn step(&mut self, action: &[f32; 7]) -> Result<StepReport, DriverError>;

    /// Holds the current pose: no motion until the next step.
    fn hold(&mut self) -> Result<(), DriverError>;

    /// Halts immediately (emergency stop).
    fn emergency_stop(&mut self);

    /// End-effector position in the world frame (m), for the workspace limits.
    fn end_effector_position(&self) -> [f32; 3];
}

/// Options of the simulator-backed driver.
#[derive(Debug, Clone, PartialEq)]
pub struct SimDriverOptions {
    /// Environment settings (cameras, physics).
    pub env: EnvConfig,
    /// Pace steps at the control rate like a real arm (default: false, as fast as possible).
    pub realtime: bool,
}

impl Default for SimDriverOptions {
    fn default() -> Self {
        SimDriverOptions {
            // The daemon enforces each episode's own step limit.
            env: EnvConfig {
                max_steps: usize::MAX / 2,
                ..Default::default()
            },
            realtime: false,
        }
    }
}

/// The project's simulator behind [`RobotDriver`]: simulator workers on other
/// machines join the anchor pool this way, and the protocol is testable without hardware.
pub struct SimDriver {
    env: SimEnv,
    options: SimDriverOptions,
    last_step: Option<Instant>,
    ready: bool,
    /// Watchdog holds so far.
    pub holds: u64,
}

impl std::fmt::Debug for SimDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimDriver")
            .field("options", &self.options)
            .field("holds", &self.holds)
            .finish()
    }
}

/// LIBERO's control rate.
pub const CONTROL_HZ: f64 = 20.0;

impl SimDriver {
    /// A simulated LIBERO-Long robot.
    pub fn new(options: SimDriverOptions) -> Self {
        SimDriver {
            env: SimEnv::new(options.env.clone()),
            options,
            last_step: None,
            ready: false,
            holds: 0,
        }
    }
}

impl RobotDriver for SimDriver {
    fn info(&self) -> DriverInfo {
        let camera = &self.options.env.camera;
        DriverInfo {
            driver: "sim".into(),
            control_hz: CONTROL_HZ,
            camera: if camera.enabled {
                (camera.width, camera.height)
            } else {
                (0, 0)
            },
            suite: "libero-long".into(),
            automatic_success: true,
        }
    }

    fn reset(&mut self, task: usize, initial_state: usize) -> Result<ResetStatus, DriverError> {
        if task >= NUM_TASKS {
            return Err(DriverError(format!(
                "task {task} does not exist (libero-long has tasks 0..{NUM_TASKS})"
            )));
        }
        self.env
            .reset(task, initial_state)
            .map_err(|e| DriverError(format!("reset failed: {e}")))?;
        self.ready = true;
        self.last_step = None;
        Ok(ResetStatus::Ready)
    }

    fn observe(&mut self) -> Result<Observation, DriverError> {
        if !self.ready {
            return Err(DriverError("no reset yet".into()));
        }
        Ok(self.env.observe())
    }

    fn step(&mut self, action: &[f32; 7]) -> Result<StepReport, DriverError> {
        if !self.ready {
            return Err(DriverError("step before reset".into()));
        }
        if self.options.realtime {
            let period = Duration::from_secs_f64(1.0 / CONTROL_HZ);
            if let Some(last) = self.last_step {
                let due = last + period;
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
            }
            self.last_step = Some(Instant::now());
        }
        let outcome = self.env.step(action);
        Ok(StepReport {
            success: outcome.success,
            execution_error: outcome.execution_error.map(|e| e.to_string()),
        })
    }

    fn hold(&mut self) -> Result<(), DriverError> {
        // Simulated time only advances in `step`: holding is not stepping.
        self.holds += 1;
        self.last_step = None;
        Ok(())
    }

    fn emergency_stop(&mut self) {
        self.ready = false;
    }

    fn end_effector_position(&self) -> [f32; 3] {
        let p = self.env.ee_pose().translation.vector;
        [p.x as f32, p.y as f32, p.z as f32]
    }
}
