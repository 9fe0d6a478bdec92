//! A snapshot of everything that varies between initial states: arm and finger
//! joints, every entity's root pose and its links' joint positions. Velocities
//! are zero in a snapshot (initial states are at rest). Serialised as JSON; f32
//! values round-trip exactly, so a restored state replays bit-for-bit.

use rapier3d::prelude::*;
use serde::{Deserialize, Serialize};

use super::SimWorld;
use crate::error::{Result, SimError};

/// Pose and joint positions of one scene entity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EntityState {
    /// Instance name.
    pub name: String,
    /// Root position (m).
    pub pos: [f32; 3],
    /// Root orientation (x, y, z, w).
    pub quat_xyzw: [f32; 4],
    /// Positions of its jointed links, in type order.
    #[serde(default)]
    pub joints: Vec<f32>,
}

/// A restorable simulator state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimState {
    /// Task name the state belongs to.
    pub task: String,
    /// Arm joint positions (chain order).
    pub arm_q: Vec<f32>,
    /// Finger joint positions.
    pub fingers: [f32; 2],
    /// Entities (scene order, tables excluded).
    pub entities: Vec<EntityState>,
}

fn set_multibody_joint(world: &mut PhysicsWorld, joint: MultibodyJointHandle, q: f32) {
    let Some((mb, link_id)) = world.multibody_joints.get_mut(joint) else {
        return;
    };
    let Some(link) = mb.link(link_id) else { return };
    let c = link.joint.coords();
    let current = if link.joint.data.locked_axes.contains(JointAxesMask::LIN_X) {
        c[3]
    } else {
        c[0]
    };
    let dof = link.assembly_id();
    let mut disp = vec![0.0; mb.ndofs()];
    if dof < disp.len() {
        disp[dof] = q - current;
    }
    mb.apply_displacements(&disp);
}

fn finish_multibodies(world: &mut PhysicsWorld) {
    let handles: Vec<MultibodyJointHandle> =
        world.multibody_joints.iter().map(|(h, ..)| h).collect();
    let mut seen = Vec::new();
    for h in handles {
        let Some((mb, _)) = world.multibody_joints.get_mut(h) else {
            continue;
        };
        let root = mb.root().rigid_body_handle();
        if seen.contains(&root) {
            continue;
        }
        seen.push(root);
        mb.generalized_velocity_mut().fill(0.0);
        mb.forward_kinematics(&world.bodies, true);
        mb.update_rigid_bodies(&mut world.bodies, true);
    }
}

impl SimWorld {
    /// Captures the current state.
    pub fn capture(&self, task: &str) -> SimState {
        let entities = self
            .entities
            .iter()
            .map(|e| {
                let p = self.world.bodies[e.root].position();
                EntityState {
                    name: e.name.clone(),
                    pos: [p.translation.x, p.translation.y, p.translation.z],
                    quat_xyzw: [p.rotation.x, p.rotation.y, p.rotation.z, p.rotation.w],
                    joints: e
                        .links
                        .iter()
                        .map(|l| self.joint_position(l.joint) as f32)
                        .collect(),
                }
            })
            .collect();
        SimState {
            task: task.to_string(),
            arm_q: self
                .robot
                .arm
                .iter()
                .map(|&j| self.joint_position(j) as f32)
                .collect(),
            fingers: [
                self.joint_position(self.robot.fingers[0]) as f32,
                self.joint_position(self.robot.fingers[1]) as f32,
            ],
            entities,
        }
    }

    /// Restores a state (all velocities zero).
    pub fn restore(&mut self, state: &SimState) -> Result<()> {
        let mismatch = |message: String| SimError::StateMismatch {
            task: state.task.clone(),
            message,
        };
        if state.arm_q.len() != self.robot.arm.len() {
            return Err(mismatch(format!(
                "{} arm joints in the state, expected {}",
                state.arm_q.len(),
                self.robot.arm.len()
            )));
        }
        if state.entities.len() != self.entities.len() {
            return Err(mismatch(format!(
                "{} entities in the state, expected {}",
                state.entities.len(),
                self.entities.len()
            )));
        }
        for (s, e) in state.entities.iter().zip(&self.entities) {
            if s.name != e.name || s.joints.len() != e.links.len() {
                return Err(mismatch(format!(
                    "entity `{}` with {} joints, expected `{}` with {}",
                    s.name,
                    s.joints.len(),
                    e.name,
                    e.links.len()
                )));
            }
        }
        let arm = self.robot.arm.clone();
        for (&j, &q) in arm.iter().zip(&state.arm_q) {
            set_multibody_joint(&mut self.world, j, q);
        }
        for (&j, &q) in self.robot.fingers.clone().iter().zip(&state.fingers) {
            set_multibody_joint(&mut self.world, j, q);
        }
        for (s, e) in state.entities.iter().zip(self.entities.clone()) {
            let pose = Pose::from_parts(
                Vector::new(s.pos[0], s.pos[1], s.pos[2]),
                Rotation::from_xyzw(
                    s.quat_xyzw[0],
                    s.quat_xyzw[1],
                    s.quat_xyzw[2],
                    s.quat_xyzw[3],
                ),
            );
            let rb = &mut self.world.bodies[e.root];
            rb.set_position(pose, true);
            rb.set_linvel(Vector::ZERO, true);
            rb.set_angvel(Vector::ZERO, true);
            for (l, &q) in e.links.iter().zip(&s.joints) {
                set_multibody_joint(&mut self.world, l.joint, q);
            }
        }
        finish_multibodies(&mut self.world);
        Ok(())
    }
}
