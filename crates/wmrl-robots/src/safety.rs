//! Robot-side safety limits: every action is clamped to a workspace box and a
//! speed limit before it reaches the driver, whatever the trainer sent.
//!
//! Actions are LIBERO's: position deltas of 1.0 = [`POSITION_SCALE`] metres,
//! rotation deltas of 1.0 = [`ROTATION_SCALE`] radians, per 20 Hz control step.

use serde::{Deserialize, Serialize};

/// Metres of end-effector motion per unit of action (LIBERO's 5 cm).
pub const POSITION_SCALE: f32 = 0.05;

/// Radians of end-effector rotation per unit of action (LIBERO's 0.5 rad).
pub const ROTATION_SCALE: f32 = 0.5;

/// Limits the daemon enforces on every action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SafetyLimits {
    /// Lowest allowed end-effector position (world frame, m) (default: (-1, -1, 0.3)).
    pub workspace_min: [f32; 3],
    /// Highest allowed end-effector position (m) (default: (1, 1, 1.8)).
    pub workspace_max: [f32; 3],
    /// Largest end-effector translation per control step (m) (default: 0.05, a full-scale action).
    pub max_step_translation: f32,
    /// Largest end-effector rotation per control step (rad) (default: 0.5, a full-scale action).
    pub max_step_rotation: f32,
}

impl Default for SafetyLimits {
    fn default() -> Self {
        SafetyLimits {
            workspace_min: [-1.0, -1.0, 0.3],
            workspace_max: [1.0, 1.0, 1.8],
            max_step_translation: POSITION_SCALE,
            max_step_rotation: ROTATION_SCALE,
        }
    }
}

impl SafetyLimits {
    /// Checks that the box is non-empty and the limits positive.
    pub fn validate(&self) -> Result<(), String> {
        for axis in 0..3 {
            let non_empty = self.workspace_min[axis] < self.workspace_max[axis];
            if !non_empty {
                return Err(format!(
                    "workspace_min[{axis}] = {} must be below workspace_max[{axis}] = {}",
                    self.workspace_min[axis], self.workspace_max[axis]
                ));
            }
        }
        let positive = self.max_step_translation > 0.0 && self.max_step_rotation > 0.0;
        if !positive {
            return Err("max_step_translation and max_step_rotation must be positive".into());
        }
        Ok(())
    }

    /// Clamps one 7-D action (components already finite) for an end effector
    /// at `eef_position`. Returns the safe action and whether it changed.
    ///
    /// Order: components into [-1, 1]; translation norm to the speed limit;
    /// each axis so the commanded target stays inside the workspace (an axis
    /// already outside may only move back in); rotation norm to its limit.
    pub fn clamp(&self, action: &[f32; 7], eef_position: [f32; 3]) -> ([f32; 7], bool) {
        let mut out = action.map(|x| x.clamp(-1.0, 1.0));
        let translation = [out[0], out[1], out[2]].map(|x| x * POSITION_SCALE);
        let mut delta = translation;
        let norm = delta.iter().map(|d| d * d).sum::<f32>().sqrt();
        if norm > self.max_step_translation {
            let s = self.max_step_translation / norm;
            delta.iter_mut().for_each(|d| *d *= s);
        }
        for axis in 0..3 {
            let p = eef_position[axis];
            let low = (self.workspace_min[axis] - p).min(0.0);
            let high = (self.workspace_max[axis] - p).max(0.0);
            delta[axis] = delta[axis].clamp(low, high);
            // Rescale only what changed, so in-bounds actions pass bit for bit.
            if delta[axis] != translation[axis] {
                out[axis] = delta[axis] / POSITION_SCALE;
            }
        }
        let rotation = [out[3], out[4], out[5]].map(|r| r * ROTATION_SCALE);
        let angle = rotation.iter().map(|r| r * r).sum::<f32>().sqrt();
        if angle > self.max_step_rotation {
            let s = self.max_step_rotation / angle;
            for axis in 0..3 {
                out[3 + axis] = rotation[axis] * s / ROTATION_SCALE;
            }
        }
        let changed = out.iter().zip(action).any(|(a, b)| (a - b).abs() > 1e-6);
        (out, changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inside_the_box_actions_pass_unchanged() {
        let limits = SafetyLimits::default();
        let action = [0.2, -0.3, 0.1, 0.05, 0.0, -0.1, 1.0];
        assert_eq!(limits.clamp(&action, [0.0, 0.0, 1.0]), (action, false));
    }

    #[test]
    fn targets_outside_the_workspace_are_clamped_to_its_face() {
        let limits = SafetyLimits {
            workspace_max: [1.0, 1.0, 1.01],
            ..Default::default()
        };
        let (safe, changed) = limits.clamp(&[0.0, 0.0, 1.0, 0.0, 0.0, 0.0, -1.0], [0.0, 0.0, 1.0]);
        assert!(changed);
        assert!((safe[2] * POSITION_SCALE - 0.01).abs() < 1e-6, "{safe:?}");
        // Already above the ceiling: may only come down.
        let (safe, _) = limits.clamp(&[0.0, 0.0, 0.5, 0.0, 0.0, 0.0, -1.0], [0.0, 0.0, 1.2]);
        assert_eq!(safe[2], 0.0);
        let (safe, _) = limits.clamp(&[0.0, 0.0, -0.5, 0.0, 0.0, 0.0, -1.0], [0.0, 0.0, 1.2]);
        assert_eq!(safe[2], -0.5);
    }

    #[test]
    fn speed_limits_scale_translation_and_rotation() {
        let limits = SafetyLimits {
            max_step_translation: 0.01,
            max_step_rotation: 0.1,
            ..Default::default()
        };
        let (safe, changed) = limits.clamp(&[1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 1.0]);
        assert!(changed);
        assert!((safe[0] * POSITION_SCALE - 0.01).abs() < 1e-6);
        assert!((safe[5] * ROTATION_SCALE - 0.1).abs() < 1e-6);
        let (safe, _) = limits.clamp(&[3.0, 0.0, 0.0, 0.0, 0.0, 0.0, 5.0], [0.0, 0.0, 1.0]);
        assert_eq!(safe[6], 1.0);
    }

    #[test]
    fn empty_boxes_are_rejected() {
        let limits = SafetyLimits {
            workspace_min: [0.0, 0.0, 2.0],
            ..Default::default()
        };
        assert!(limits.validate().unwrap_err().contains("workspace_min[2]"));
    }
}
