//! Serial-chain kinematics from URDF joints, in f64 nalgebra: forward kinematics,
//! the geometric Jacobian, and damped-least-squares inverse kinematics
//! (Wampler 1986; Buss 2004, "Introduction to inverse kinematics with Jacobian
//! transpose, pseudoinverse and damped least squares methods", eq. 10):
//! Δq = Jᵀ (J Jᵀ + λ² I)⁻¹ e, with e the 6-D pose error.

use nalgebra::{Isometry3, Matrix6, Matrix6xX, Translation3, UnitQuaternion, Vector3, Vector6};
use rapier3d_urdf::urdf_rs;

/// A joint's world axis and origin, as returned by forward kinematics.
pub type JointFrame = (Vector3<f64>, Vector3<f64>);

/// One joint of the chain (fixed joints are folded into the next origin).
#[derive(Debug, Clone)]
pub struct ChainJoint {
    /// URDF joint name.
    pub name: String,
    /// Pose of the joint frame in the previous joint's moving frame.
    pub origin: Isometry3<f64>,
    /// Unit axis in the joint frame.
    pub axis: Vector3<f64>,
    /// Revolute (true) or prismatic (false).
    pub revolute: bool,
    /// Position limits.
    pub lower: f64,
    /// Position limits.
    pub upper: f64,
    /// Velocity limit (rad/s or m/s).
    pub velocity: f64,
    /// Effort limit (N·m or N).
    pub effort: f64,
    /// Viscous damping from the URDF `<dynamics>`.
    pub damping: f64,
}

/// The movable joints from the base link to the end-effector link.
#[derive(Debug, Clone)]
pub struct Chain {
    /// Movable joints, base to tip.
    pub joints: Vec<ChainJoint>,
    /// Fixed transform from the last joint's frame to the end effector.
    pub tip: Isometry3<f64>,
}

/// Pose of a URDF `<origin>`.
pub fn urdf_pose(p: &urdf_rs::Pose) -> Isometry3<f64> {
    Isometry3::from_parts(
        Translation3::new(p.xyz[0], p.xyz[1], p.xyz[2]),
        UnitQuaternion::from_euler_angles(p.rpy[0], p.rpy[1], p.rpy[2]),
    )
}

impl Chain {
    /// Walks the URDF from `ee` up to `base`.
    pub fn from_urdf(robot: &urdf_rs::Robot, base: &str, ee: &str) -> Result<Chain, String> {
        if !robot.links.iter().any(|l| l.name == base) {
            return Err(format!("base link `{base}` not found"));
        }
        let mut path = Vec::new();
        let mut link = ee.to_string();
        while link != base {
            let j = robot
                .joints
                .iter()
                .find(|j| j.child.link == link)
                .ok_or_else(|| {
                    format!("no joint leads to link `{link}` on the way from `{ee}` to `{base}`")
                })?;
            path.push(j);
            link = j.parent.link.clone();
            if path.len() > robot.joints.len() {
                return Err("the URDF joint graph has a cycle".into());
            }
        }
        path.reverse();
        let mut joints = Vec::new();
        let mut pending = Isometry3::identity();
        for j in path {
            let origin = pending * urdf_pose(&j.origin);
            match j.joint_type {
                urdf_rs::JointType::Fixed => pending = origin,
                urdf_rs::JointType::Revolute
                | urdf_rs::JointType::Continuous
                | urdf_rs::JointType::Prismatic => {
                    let axis = Vector3::new(j.axis.xyz[0], j.axis.xyz[1], j.axis.xyz[2]);
                    let norm = axis.norm();
                    if norm < 1e-9 {
                        return Err(format!("joint `{}` has a zero axis", j.name));
                    }
                    let continuous = matches!(j.joint_type, urdf_rs::JointType::Continuous);
                    joints.push(ChainJoint {
                        name: j.name.clone(),
                        origin,
                        axis: axis / norm,
                        revolute: !matches!(j.joint_type, urdf_rs::JointType::Prismatic),
                        lower: if continuous { -1e9 } else { j.limit.lower },
                        upper: if continuous { 1e9 } else { j.limit.upper },
                        velocity: if j.limit.velocity > 0.0 {
                            j.limit.velocity
                        } else {
                            2.0
                        },
                        effort: if j.limit.effort > 0.0 {
                            j.limit.effort
                        } else {
                            50.0
                        },
                        damping: j.dynamics.as_ref().map_or(0.0, |d| d.damping),
                    });
                    pending = Isometry3::identity();
                }
                _ => {
                    return Err(format!(
                        "joint `{}`: only fixed, revolute and prismatic joints are supported in the arm chain",
                        j.name
                    ));
                }
            }
        }
        if joints.is_empty() {
            return Err(format!("no movable joint between `{base}` and `{ee}`"));
        }
        Ok(Chain {
            joints,
            tip: pending,
        })
    }

    /// Number of movable joints.
    pub fn dof(&self) -> usize {
        self.joints.len()
    }

    fn motion(j: &ChainJoint, q: f64) -> Isometry3<f64> {
        if j.revolute {
            Isometry3::from_parts(
                Translation3::identity(),
                UnitQuaternion::from_scaled_axis(j.axis * q),
            )
        } else {
            Isometry3::from_parts(Translation3::from(j.axis * q), UnitQuaternion::identity())
        }
    }

    /// Pose of the end effector in the base frame, and each joint's world axis and origin.
    pub fn forward(&self, q: &[f64]) -> (Isometry3<f64>, Vec<JointFrame>) {
        let mut t = Isometry3::identity();
        let mut frames = Vec::with_capacity(self.joints.len());
        for (j, &qi) in self.joints.iter().zip(q) {
            t *= j.origin;
            frames.push((t.rotation * j.axis, t.translation.vector));
            t *= Self::motion(j, qi);
        }
        (t * self.tip, frames)
    }

    /// End-effector pose in the base frame.
    pub fn ee_pose(&self, q: &[f64]) -> Isometry3<f64> {
        self.forward(q).0
    }

    /// Geometric Jacobian (linear rows 0..3, angular rows 3..6) at `q`, base frame.
    pub fn jacobian(&self, q: &[f64]) -> (Isometry3<f64>, Matrix6xX<f64>) {
        let (ee, frames) = self.forward(q);
        let p = ee.translation.vector;
        let mut jac = Matrix6xX::zeros(self.dof());
        for (i, (axis, origin)) in frames.iter().enumerate() {
            let (lin, ang) = if self.joints[i].revolute {
                (axis.cross(&(p - origin)), *axis)
            } else {
                (*axis, Vector3::zeros())
            };
            jac.fixed_view_mut::<3, 1>(0, i).copy_from(&lin);
            jac.fixed_view_mut::<3, 1>(3, i).copy_from(&ang);
        }
        (ee, jac)
    }

    /// Damped-least-squares IK towards `target` from `q` (updated in place),
    /// `iterations` Newton steps with damping `lambda`, clamped to joint limits.
    /// `weights` scale the position and orientation errors (arms with fewer than
    /// six joints trade orientation for position). Returns the final 6-D error norm.
    pub fn solve_dls(
        &self,
        q: &mut [f64],
        target: &Isometry3<f64>,
        iterations: usize,
        lambda: f64,
        weights: [f64; 2],
    ) -> f64 {
        let mut err_norm = f64::INFINITY;
        for _ in 0..iterations {
            let (ee, mut jac) = self.jacobian(q);
            let dp = target.translation.vector - ee.translation.vector;
            let dr = (target.rotation * ee.rotation.inverse()).scaled_axis();
            let mut e = Vector6::new(dp.x, dp.y, dp.z, dr.x, dr.y, dr.z);
            for r in 0..6 {
                let w = if r < 3 { weights[0] } else { weights[1] };
                e[r] *= w;
                for c in 0..jac.ncols() {
                    jac[(r, c)] *= w;
                }
            }
            err_norm = e.norm();
            if err_norm < 1e-6 {
                break;
            }
            let jjt: Matrix6<f64> =
                &jac * jac.transpose() + Matrix6::identity() * (lambda * lambda);
            let Some(inv) = jjt.try_inverse() else { break };
            let dq = jac.transpose() * (inv * e);
            for (i, j) in self.joints.iter().enumerate() {
                q[i] = (q[i] + dq[i]).clamp(j.lower, j.upper);
            }
        }
        err_norm
    }

    /// Moves `q` by `gain` of the way towards the posture `rest` inside the
    /// Jacobian's (damped) null space, Δq = (I − J⁺J) · gain · (rest − q), so
    /// the end-effector pose barely changes while the redundant joint drifts
    /// back from wherever large reorientations left it; clamped to the joint
    /// limits. (robosuite's OSC, which LIBERO uses, pulls towards the initial
    /// joint configuration in the same null space.)
    pub fn nullspace_step(&self, q: &mut [f64], rest: &[f64], gain: f64, lambda: f64) {
        let (_, jac) = self.jacobian(q);
        let jjt: Matrix6<f64> = &jac * jac.transpose() + Matrix6::identity() * (lambda * lambda);
        let Some(inv) = jjt.try_inverse() else { return };
        let pinv = jac.transpose() * inv;
        let n = q.len();
        let pull = nalgebra::DVector::from_iterator(
            n,
            q.iter().zip(rest).map(|(qi, ri)| gain * (ri - qi)),
        );
        let projector = nalgebra::DMatrix::identity(n, n) - &pinv * &jac;
        let dq = projector * pull;
        for (i, j) in self.joints.iter().enumerate() {
            q[i] = (q[i] + dq[i]).clamp(j.lower, j.upper);
        }
    }
}
