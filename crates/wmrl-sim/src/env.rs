//! The environment: `reset(task, initial_state)` and `step(action)` over the
//! rapier world, with sanitised actions, 12 physics substeps per 20 Hz control
//! step, goal checking after every step, instability detection (an execution
//! error, distinct from failing the task) and camera observations.

use std::sync::Arc;

use nalgebra::{Isometry3, Vector3};

use crate::api::{Action, ExecutionError, Observation, Proprio, StepOutcome};
use crate::control::{ControlParams, Controller};
use crate::error::{Result, SimError};
use crate::init_states::{INIT_SEED, NUM_INIT_STATES, generate_state};
use crate::physics::{SimState, SimWorld, WorldParams};
use crate::predicates::goal_reached;
use crate::render::{CameraConfig, MeshSet, Rasterizer, agent_camera, wrist_camera};
use crate::robot::RobotModel;
use crate::scene::Scene;
use crate::tasks::{MAX_EPISODE_STEPS, NUM_TASKS, TaskSpec, libero_long_tasks};

/// Environment settings.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvConfig {
    /// Cameras (default: both at 128×128).
    pub camera: CameraConfig,
    /// Episode length in control steps (default: 520, LIBERO-Long's).
    pub max_steps: usize,
    /// Physics settings.
    pub world: WorldParams,
    /// Controller settings.
    pub control: ControlParams,
    /// Seed of the fixed initial states (default: [`INIT_SEED`]).
    pub init_seed: u64,
}

impl Default for EnvConfig {
    fn default() -> Self {
        EnvConfig {
            camera: CameraConfig::default(),
            max_steps: MAX_EPISODE_STEPS,
            world: WorldParams::from_env(),
            control: ControlParams::default(),
            init_seed: INIT_SEED,
        }
    }
}

/// Counters of sanitised input.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ActionStats {
    /// Action components that were NaN or infinite (replaced by 0 or clamped).
    pub non_finite: u64,
    /// Finite components outside [-1, 1] (clamped).
    pub out_of_range: u64,
}

struct TaskData {
    spec: TaskSpec,
    template: Arc<SimWorld>,
    meshes: MeshSet,
    init_states: Vec<Option<Arc<SimState>>>,
}

/// A simulated LIBERO-Long environment (one world at a time; `Send`).
pub struct SimEnv {
    config: EnvConfig,
    robot: Arc<RobotModel>,
    tasks: Vec<Option<TaskData>>,
    current: usize,
    world: Option<SimWorld>,
    controller: Controller,
    agent_raster: Rasterizer,
    wrist_raster: Rasterizer,
    steps: usize,
    success: bool,
    error: Option<ExecutionError>,
    peak_speed: f32,
    /// Sanitised-action counters since construction.
    pub action_stats: ActionStats,
}

/// Replaces NaN by 0 and clamps to [-1, 1], counting both.
pub fn sanitize_action(action: &Action, stats: &mut ActionStats) -> Action {
    let mut out = *action;
    for v in &mut out {
        if !v.is_finite() {
            stats.non_finite += 1;
            *v = if v.is_nan() { 0.0 } else { v.signum() };
        } else if v.abs() > 1.0 {
            stats.out_of_range += 1;
            *v = v.clamp(-1.0, 1.0);
        }
    }
    out
}

impl SimEnv {
    /// An environment with the built-in Panda.
    pub fn new(config: EnvConfig) -> SimEnv {
        SimEnv::with_robot(config, RobotModel::panda())
    }

    /// An environment with another robot.
    pub fn with_robot(config: EnvConfig, robot: RobotModel) -> SimEnv {
        let (w, h) = (config.camera.width, config.camera.height);
        let home = robot.spec.home.clone();
        SimEnv {
            controller: Controller::new(
                config.control.clone(),
                &home,
                robot.spec.finger_start,
                robot.finger_upper,
            ),
            config,
            robot: Arc::new(robot),
            tasks: (0..NUM_TASKS).map(|_| None).collect(),
            current: 0,
            world: None,
            // The agent view's camera stays put: keep its fixed scenery.
            agent_raster: Rasterizer::new(w, h).with_static_cache(),
            wrist_raster: Rasterizer::new(w, h),
            steps: 0,
            success: false,
            error: None,
            peak_speed: 0.0,
            action_stats: ActionStats::default(),
        }
    }

    fn task_data(&mut self, task: usize) -> Result<&mut TaskData> {
        if task >= NUM_TASKS {
            return Err(SimError::UnknownTask {
                index: task,
                count: NUM_TASKS,
            });
        }
        if self.tasks[task].is_none() {
            let spec = libero_long_tasks().swap_remove(task);
            let template = SimWorld::build(&spec.scene, &self.robot, self.config.world.clone())?;
            let meshes = MeshSet::build(&template);
            self.tasks[task] = Some(TaskData {
                spec,
                template: Arc::new(template),
                meshes,
                init_states: vec![None; NUM_INIT_STATES],
            });
        }
        Ok(self.tasks[task].as_mut().expect("just built"))
    }

    /// The fixed initial state `index` of `task` (generated on first use, then cached).
    pub fn initial_state(&mut self, task: usize, index: usize) -> Result<Arc<SimState>> {
        if index >= NUM_INIT_STATES {
            return Err(SimError::UnknownInitialState {
                index,
                count: NUM_INIT_STATES,
            });
        }
        let seed = self.config.init_seed;
        let robot = self.robot.clone();
        let data = self.task_data(task)?;
        if let Some(s) = &data.init_states[index] {
            return Ok(s.clone());
        }
        let _span = tracing::debug_span!("initial_state", task, index).entered();
        let state = Arc::new(generate_state(
            &data.spec.scene,
            &data.template,
            &robot,
            seed,
            index,
        )?);
        data.init_states[index] = Some(state.clone());
        Ok(state)
    }

    /// Starts an episode of `task` from its fixed initial state `initial_state_index`.
    pub fn reset(&mut self, task: usize, initial_state_index: usize) -> Result<Observation> {
        let state = self.initial_state(task, initial_state_index)?;
        self.reset_to_state(task, &state)
    }

    /// Starts an episode of `task` from any saved state.
    pub fn reset_to_state(&mut self, task: usize, state: &SimState) -> Result<Observation> {
        let _span = tracing::debug_span!("reset", task).entered();
        let data = self.task_data(task)?;
        let mut world = (*data.template).clone();
        world.restore(state)?;
        let q: Vec<f64> = state.arm_q.iter().map(|&v| v as f64).collect();
        self.controller = Controller::new(
            self.config.control.clone(),
            &q,
            state.fingers[0] as f64,
            self.robot.finger_upper,
        );
        self.world = Some(world);
        self.current = task;
        self.steps = 0;
        self.success = false;
        self.error = None;
        self.peak_speed = 0.0;
        Ok(self.observe())
    }

    /// Physics substeps per control step.
    pub fn substeps(&self) -> usize {
        (self.config.world.physics_hz / self.config.control.control_hz)
            .round()
            .max(1.0) as usize
    }

    /// Applies one action (sanitised first) and advances one control step.
    pub fn step(&mut self, action: &Action) -> StepOutcome {
        let before = self.action_stats;
        let clean = sanitize_action(action, &mut self.action_stats);
        if self.action_stats != before {
            tracing::warn!(?action, ?clean, stats = ?self.action_stats, "action sanitised (NaN or outside [-1, 1])");
        }
        let n = self.substeps();
        if self.error.is_none() {
            let robot = self.robot.clone();
            let world = self.world.as_mut().expect("reset() before step()");
            self.controller.plan(world, &robot, &clean);
            for k in 0..n {
                self.controller.apply_substep(world, &robot, k, n);
                world.step();
            }
            self.error = check_stability(world, &mut self.peak_speed);
            if let Some(error) = &self.error {
                tracing::warn!(%error, "execution error");
            } else {
                let scene = &self.tasks[self.current]
                    .as_ref()
                    .expect("task built")
                    .spec
                    .scene;
                self.success = goal_reached(scene, world);
            }
        }
        self.steps += 1;
        StepOutcome {
            observation: self.observe(),
            success: self.success,
            done: self.success || self.error.is_some() || self.steps >= self.config.max_steps,
            execution_error: self.error.clone(),
        }
    }

    /// Current proprioception.
    pub fn proprio(&self) -> Proprio {
        let world = self.world();
        let q = Controller::measure(world);
        let ee = self.ee_pose();
        let mut joints = [0.0f32; 7];
        for (j, v) in joints.iter_mut().zip(&q) {
            *j = *v as f32;
        }
        let t = ee.translation.vector;
        let r = ee.rotation.quaternion();
        Proprio {
            joint_positions: joints,
            eef_position: [t.x as f32, t.y as f32, t.z as f32],
            eef_quat_xyzw: [r.i as f32, r.j as f32, r.k as f32, r.w as f32],
            gripper_width: self.gripper_width() as f32,
        }
    }

    /// Renders both cameras (if enabled) and reads proprioception.
    pub fn observe(&mut self) -> Observation {
        let proprio = self.proprio();
        if !self.config.camera.enabled {
            return Observation {
                agent_view: image::RgbImage::new(0, 0),
                wrist_view: image::RgbImage::new(0, 0),
                proprio,
            };
        }
        let world = self.world.as_ref().expect("reset() first");
        let meshes = &self.tasks[self.current]
            .as_ref()
            .expect("task built")
            .meshes;
        let agent = agent_camera(&world.layout.agent_camera());
        let wrist = wrist_camera(world, &self.robot);
        Observation {
            agent_view: self.agent_raster.render(world, meshes, &agent),
            wrist_view: self.wrist_raster.render(world, meshes, &wrist),
            proprio,
        }
    }

    /// The current world (after a reset).
    pub fn world(&self) -> &SimWorld {
        self.world
            .as_ref()
            .expect("reset() before querying the world")
    }

    /// The robot model.
    pub fn robot(&self) -> &RobotModel {
        &self.robot
    }

    /// The current task.
    pub fn task(&self) -> &TaskSpec {
        &self.tasks[self.current]
            .as_ref()
            .expect("reset() first")
            .spec
    }

    /// The current task's scene.
    pub fn scene(&self) -> &Scene {
        &self.task().scene
    }

    /// The current task's index.
    pub fn task_index(&self) -> usize {
        self.current
    }

    /// The highest speed (m/s) any robot link or object reached at the end of a
    /// control step since the reset: how close the episode came to the
    /// execution-error threshold (15 m/s).
    pub fn peak_speed(&self) -> f32 {
        self.peak_speed
    }

    /// Control steps since the reset.
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// Whether the goal held after the last step.
    pub fn success(&self) -> bool {
        self.success
    }

    /// End-effector pose in the world.
    pub fn ee_pose(&self) -> Isometry3<f64> {
        let world = self.world();
        Controller::ee_pose(world, &self.robot, &Controller::measure(world))
    }

    /// Distance between the fingers (m).
    pub fn gripper_width(&self) -> f64 {
        let w = self.world();
        w.joint_position(w.robot.fingers[0]) + w.joint_position(w.robot.fingers[1])
    }

    /// Gripper command in [-1, 1].
    pub fn gripper_command(&self) -> f64 {
        self.controller.gripper
    }

    /// Captures the current state.
    pub fn state(&self) -> SimState {
        self.world().capture(&self.task().name)
    }

    /// The controller (gripper command, joint goal).
    pub fn controller(&self) -> &Controller {
        &self.controller
    }

    /// Settings.
    pub fn config(&self) -> &EnvConfig {
        &self.config
    }
}

/// Checks for NaN state, bodies far from the table (beyond 30 m) or moving
/// implausibly fast (over 15 m/s), and raises `peak_speed` to the fastest
/// finite speed (m/s) of a robot link or object it looked at.
pub fn check_stability(world: &SimWorld, peak_speed: &mut f32) -> Option<ExecutionError> {
    let centre = Vector3::new(0.0, 0.0, world.table_top);
    let named = world
        .entities
        .iter()
        .map(|e| (e.name.as_str(), e.root))
        .chain(world.robot.links.iter().map(|&b| ("robot", b)));
    for (name, body) in named {
        let rb = &world.world.bodies[body];
        let p = rb.translation();
        let v = rb.linvel();
        if !(p.is_finite() && v.is_finite() && rb.angvel().is_finite()) {
            return Some(ExecutionError::NonFiniteState {
                body: name.to_string(),
            });
        }
        let d = (Vector3::new(p.x as f64, p.y as f64, p.z as f64) - centre).norm();
        let speed = v.length();
        *peak_speed = peak_speed.max(speed);
        // Objects knocked off the table roll on the floor (a task failure);
        // only bodies far beyond the room, or implausibly fast, are unstable.
        if d > 30.0 || speed > 15.0 {
            return Some(ExecutionError::Unstable {
                body: name.to_string(),
                distance: d as f32,
                speed,
            });
        }
    }
    None
}
