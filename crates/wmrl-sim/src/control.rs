//! LIBERO's control interface on the rapier multibody: a 7-D action at 20 Hz
//! (end-effector delta position scaled to 5 cm, axis-angle delta rotation scaled
//! to 0.5 rad, gripper open/close) becomes a target end-effector pose relative
//! to the current one; damped-least-squares IK turns it into joint targets that
//! the multibody joint motors track over the physics substeps (linearly
//! interpolated, velocity-limited). Like robosuite's OSC, the redundant joint
//! is pulled gently towards the home posture in the null space of the
//! end-effector task, so long episodes with large reorientations do not drift
//! into joint limits. The gripper command integrates the action's
//! sign like robosuite's `PandaGripper` (a full sweep takes 8 control steps) and
//! drives both prismatic fingers with force-limited position motors.

use nalgebra::{Isometry3, Translation3, UnitQuaternion, Vector3};
use rapier3d::prelude::MotorModel;

use crate::api::Action;
use crate::physics::SimWorld;
use crate::robot::RobotModel;

/// Controller settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ControlParams {
    /// Control rate (Hz) (default: 20).
    pub control_hz: f64,
    /// Metres per unit of position action (default: 0.05).
    pub pos_scale: f64,
    /// Radians per unit of rotation action (default: 0.5).
    pub rot_scale: f64,
    /// DLS iterations per control step (default: 8).
    pub ik_iterations: usize,
    /// DLS damping λ (default: 0.05).
    pub ik_lambda: f64,
    /// Fraction of the way back to the home posture the redundant joints move
    /// per control step, in the null space of the end-effector task (default: 0.03).
    pub posture_gain: f64,
    /// Gripper command change per control step for a non-zero gripper action (default: 0.25).
    pub gripper_rate: f64,
    /// Finger motor stiffness (N/m) (default: 2500).
    pub finger_stiffness: f32,
    /// Finger motor damping (N·s/m) (default: 50).
    pub finger_damping: f32,
}

impl Default for ControlParams {
    fn default() -> Self {
        ControlParams {
            control_hz: 20.0,
            pos_scale: 0.05,
            rot_scale: 0.5,
            ik_iterations: 8,
            ik_lambda: 0.05,
            posture_gain: 0.03,
            gripper_rate: 0.25,
            finger_stiffness: 2500.0,
            finger_damping: 50.0,
        }
    }
}

/// Controller state between steps.
#[derive(Debug, Clone)]
pub struct Controller {
    /// Settings.
    pub params: ControlParams,
    /// Gripper command in [-1 (open), 1 (closed)].
    pub gripper: f64,
    q_start: Vec<f64>,
    q_goal: Vec<f64>,
    gripper_sign: f64,
}

impl Controller {
    /// A controller holding `q` with the gripper command matching `finger` opening.
    pub fn new(params: ControlParams, q: &[f64], finger: f64, finger_upper: f64) -> Controller {
        let gripper = (1.0 - 2.0 * finger / finger_upper).clamp(-1.0, 1.0);
        Controller {
            params,
            gripper,
            q_start: q.to_vec(),
            q_goal: q.to_vec(),
            gripper_sign: 0.0,
        }
    }

    /// Current arm joint positions.
    pub fn measure(world: &SimWorld) -> Vec<f64> {
        world
            .robot
            .arm
            .iter()
            .map(|&j| world.joint_position(j))
            .collect()
    }

    /// End-effector pose in the world from joint positions.
    pub fn ee_pose(world: &SimWorld, robot: &RobotModel, q: &[f64]) -> Isometry3<f64> {
        world.robot.base * robot.chain.ee_pose(q)
    }

    /// Plans one control step: IK for the action's target pose. `action` must be sanitised.
    pub fn plan(&mut self, world: &SimWorld, robot: &RobotModel, action: &Action) {
        let q = Self::measure(world);
        let ee = Self::ee_pose(world, robot, &q);
        let p = &self.params;
        let dp = Vector3::new(action[0] as f64, action[1] as f64, action[2] as f64) * p.pos_scale;
        let dr = Vector3::new(action[3] as f64, action[4] as f64, action[5] as f64) * p.rot_scale;
        let target_world = Isometry3::from_parts(
            Translation3::from(ee.translation.vector + dp),
            UnitQuaternion::from_scaled_axis(dr) * ee.rotation,
        );
        let target = world.robot.base.inverse() * target_world;
        let mut goal = q.clone();
        let weights = if robot.chain.dof() >= 6 {
            [1.0, 1.0]
        } else {
            [1.0, 0.1]
        };
        let residual =
            robot
                .chain
                .solve_dls(&mut goal, &target, p.ik_iterations, p.ik_lambda, weights);
        tracing::trace!(residual, "ik");
        if p.posture_gain > 0.0 && robot.spec.home.len() == goal.len() {
            robot
                .chain
                .nullspace_step(&mut goal, &robot.spec.home, p.posture_gain, p.ik_lambda);
        }
        // Respect joint velocity limits over one control period.
        let dt = 1.0 / p.control_hz;
        for (i, j) in robot.chain.joints.iter().enumerate() {
            let max = j.velocity * dt;
            goal[i] = q[i] + (goal[i] - q[i]).clamp(-max, max);
        }
        self.q_start = q;
        self.q_goal = goal;
        self.gripper_sign = if action[6] > 0.0 {
            1.0
        } else if action[6] < 0.0 {
            -1.0
        } else {
            0.0
        };
    }

    /// The joint goal of the current control step.
    pub fn goal(&self) -> &[f64] {
        &self.q_goal
    }

    /// Holds the arm at `q` (used while settling initial states).
    pub fn hold(&mut self, q: &[f64]) {
        self.q_start = q.to_vec();
        self.q_goal = q.to_vec();
        self.gripper_sign = 0.0;
    }

    /// Sets the motor targets for substep `k` of `n` of the current control step.
    pub fn apply_substep(&mut self, world: &mut SimWorld, robot: &RobotModel, k: usize, n: usize) {
        let frac = (k + 1) as f64 / n as f64;
        let period = 1.0 / self.params.control_hz;
        let wp = &world.params;
        let (stiff, damp) = (wp.arm_stiffness, wp.arm_damping);
        for (i, j) in robot.chain.joints.iter().enumerate() {
            let target = self.q_start[i] + (self.q_goal[i] - self.q_start[i]) * frac;
            let vel = (self.q_goal[i] - self.q_start[i]) / period;
            let handle = world.robot.arm[i];
            world.set_joint_motor(
                handle,
                target as f32,
                vel as f32,
                stiff,
                damp,
                j.effort as f32,
            );
        }
        self.gripper = (self.gripper + self.gripper_sign * self.params.gripper_rate / n as f64)
            .clamp(-1.0, 1.0);
        let open = robot.finger_upper * (1.0 - self.gripper) / 2.0;
        // Closing aims slightly past zero so a held object is squeezed with the force limit.
        let target = if self.gripper >= 1.0 { -0.005 } else { open };
        let force = world.params.gripper_force.min(robot.finger_effort as f32);
        for f in world.robot.fingers {
            world.set_joint_motor(
                f,
                target as f32,
                0.0,
                self.params.finger_stiffness,
                self.params.finger_damping,
                force,
            );
            if let Some((mb, link)) = world.world.multibody_joints.get_mut(f)
                && let Some(l) = mb.link_mut(link)
            {
                l.joint
                    .data
                    .set_motor_model(rapier3d::prelude::JointAxis::LinX, MotorModel::ForceBased);
            }
        }
    }
}
