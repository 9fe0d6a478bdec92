//! Robots: a `robot.toml` next to a URDF says which link is the end effector,
//! which joints are fingers, the home pose and the wrist camera. The URDF is
//! parsed by `urdf-rs` (through `rapier3d-urdf`) for the physics and by
//! [`kinematics`] for the controller's own forward kinematics and Jacobian,
//! so any serial arm of primitives loads without code changes.

pub mod kinematics;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use kinematics::{Chain, ChainJoint};

use crate::error::{Result, SimError};

/// The Panda's `robot.toml`, compiled in.
const PANDA_TOML: &str = include_str!("../../../../robots/panda/robot.toml");
/// The Panda URDF, compiled in.
const PANDA_URDF: &str = include_str!("../../../../robots/panda/panda.urdf");

/// Wrist-camera mount.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WristCamera {
    /// Link the camera is attached to; it looks along the link's +z.
    pub link: String,
    /// Offset in the link frame (m).
    pub pos: [f64; 3],
    /// Vertical field of view (deg).
    pub fovy_deg: f64,
}

/// The `robot.toml` description.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RobotSpec {
    /// URDF file, relative to the `robot.toml`.
    pub urdf: String,
    /// Root link (fixed to the world at the layout's robot base).
    pub base_link: String,
    /// Link whose origin is the controlled end effector.
    pub ee_link: String,
    /// The two prismatic finger joints (0 = closed, upper limit = open).
    pub finger_joints: Vec<String>,
    /// Home joint positions of the arm joints, base to tip.
    pub home: Vec<f64>,
    /// Uniform per-joint noise on `home` in the initial states (rad) (default: 0).
    #[serde(default)]
    pub home_noise: f64,
    /// Initial opening of each finger (m).
    pub finger_start: f64,
    /// Wrist camera mount.
    pub wrist_camera: WristCamera,
}

/// A loaded robot: its description, URDF text and kinematic chain.
#[derive(Debug, Clone)]
pub struct RobotModel {
    /// The `robot.toml` content.
    pub spec: RobotSpec,
    /// Where the URDF came from (for messages).
    pub urdf_file: String,
    /// The parsed URDF.
    pub urdf: rapier3d_urdf::urdf_rs::Robot,
    /// The arm chain from `base_link` to `ee_link`.
    pub chain: Chain,
    /// Finger joint limits (upper = fully open per finger, m).
    pub finger_upper: f64,
    /// Finger effort limits (N).
    pub finger_effort: f64,
}

impl RobotModel {
    /// The built-in Panda (`robots/panda/`).
    pub fn panda() -> RobotModel {
        let spec: RobotSpec =
            toml::from_str(PANDA_TOML).expect("robots/panda/robot.toml parses (tested)");
        RobotModel::from_parts(spec, PANDA_URDF, "robots/panda/panda.urdf")
            .expect("robots/panda/panda.urdf loads (tested)")
    }

    /// Loads `robot.toml` (or a directory holding one) and its URDF.
    pub fn load(path: &Path) -> Result<RobotModel> {
        let toml_path: PathBuf = if path.is_dir() {
            path.join("robot.toml")
        } else {
            path.to_path_buf()
        };
        let read = |p: &Path| {
            std::fs::read_to_string(p).map_err(|source| SimError::Io {
                path: p.to_path_buf(),
                source,
            })
        };
        let text = read(&toml_path)?;
        let file = toml_path.display().to_string();
        let spec: RobotSpec =
            toml::from_str(&text).map_err(|e| SimError::from_toml(&file, &text, &e))?;
        let urdf_path = toml_path
            .parent()
            .unwrap_or(Path::new("."))
            .join(&spec.urdf);
        let urdf_text = read(&urdf_path)?;
        RobotModel::from_parts(spec, &urdf_text, &urdf_path.display().to_string())
    }

    /// Builds a model from a spec and URDF text.
    pub fn from_parts(spec: RobotSpec, urdf_text: &str, urdf_file: &str) -> Result<RobotModel> {
        let urdf =
            rapier3d_urdf::urdf_rs::read_from_string(urdf_text).map_err(|e| SimError::Urdf {
                file: urdf_file.to_string(),
                message: e.to_string(),
            })?;
        let chain = Chain::from_urdf(&urdf, &spec.base_link, &spec.ee_link).map_err(|message| {
            SimError::Urdf {
                file: urdf_file.to_string(),
                message,
            }
        })?;
        if spec.home.len() != chain.dof() {
            return Err(SimError::Urdf {
                file: urdf_file.to_string(),
                message: format!(
                    "robot.toml `home` has {} values, expected {} (the movable joints from `{}` to `{}`)",
                    spec.home.len(),
                    chain.dof(),
                    spec.base_link,
                    spec.ee_link
                ),
            });
        }
        if spec.finger_joints.len() != 2 {
            return Err(SimError::Urdf {
                file: urdf_file.to_string(),
                message: format!(
                    "expected exactly 2 finger_joints, found {}",
                    spec.finger_joints.len()
                ),
            });
        }
        let mut finger_upper = f64::INFINITY;
        let mut finger_effort = f64::INFINITY;
        for name in &spec.finger_joints {
            let j = urdf
                .joints
                .iter()
                .find(|j| &j.name == name)
                .ok_or_else(|| SimError::Urdf {
                    file: urdf_file.to_string(),
                    message: format!("finger joint `{name}` not found in the URDF"),
                })?;
            if !matches!(j.joint_type, rapier3d_urdf::urdf_rs::JointType::Prismatic) {
                return Err(SimError::Urdf {
                    file: urdf_file.to_string(),
                    message: format!("finger joint `{name}` must be prismatic"),
                });
            }
            finger_upper = finger_upper.min(j.limit.upper);
            finger_effort = finger_effort.min(j.limit.effort.max(1.0));
        }
        if !urdf.links.iter().any(|l| l.name == spec.wrist_camera.link) {
            return Err(SimError::Urdf {
                file: urdf_file.to_string(),
                message: format!("wrist camera link `{}` not found", spec.wrist_camera.link),
            });
        }
        Ok(RobotModel {
            spec,
            urdf_file: urdf_file.to_string(),
            urdf,
            chain,
            finger_upper,
            finger_effort,
        })
    }
}
