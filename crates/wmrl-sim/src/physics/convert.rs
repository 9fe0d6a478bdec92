//! Conversions between rapier's glam types (f32) and the nalgebra f64 types the
//! controller, predicates and experts use.

use nalgebra::{Isometry3, Quaternion, Translation3, UnitQuaternion, Vector3};
use rapier3d::math::{Pose, Rotation, Vector};

/// nalgebra isometry → rapier pose.
pub fn to_pose(iso: &Isometry3<f64>) -> Pose {
    let t = iso.translation.vector;
    let q = iso.rotation.quaternion();
    Pose::from_parts(
        Vector::new(t.x as f32, t.y as f32, t.z as f32),
        Rotation::from_xyzw(q.i as f32, q.j as f32, q.k as f32, q.w as f32).normalize(),
    )
}

/// rapier pose → nalgebra isometry.
pub fn to_iso(p: &Pose) -> Isometry3<f64> {
    let t = p.translation;
    let r = p.rotation;
    Isometry3::from_parts(
        Translation3::new(t.x as f64, t.y as f64, t.z as f64),
        UnitQuaternion::new_normalize(Quaternion::new(
            r.w as f64, r.x as f64, r.y as f64, r.z as f64,
        )),
    )
}

/// glam vector → nalgebra.
pub fn to_na(v: Vector) -> Vector3<f64> {
    Vector3::new(v.x as f64, v.y as f64, v.z as f64)
}

/// nalgebra vector → glam.
pub fn to_glam(v: &Vector3<f64>) -> Vector {
    Vector::new(v.x as f32, v.y as f32, v.z as f32)
}

/// An isometry from a position and roll-pitch-yaw.
pub fn iso_xyz_rpy(pos: [f64; 3], rpy: [f64; 3]) -> Isometry3<f64> {
    Isometry3::from_parts(
        Translation3::new(pos[0], pos[1], pos[2]),
        UnitQuaternion::from_euler_angles(rpy[0], rpy[1], rpy[2]),
    )
}
