//! Robots: the Panda URDF loads into a rapier multibody whose link poses match
//! the controller's own kinematics; another URDF arm loads and moves without
//! code changes; a malformed URDF names the file.

use std::path::PathBuf;

use nalgebra::Isometry3;
use wmrl_sim::robot::RobotModel;
use wmrl_sim::{EnvConfig, SimEnv};

fn robots() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../robots"))
}

fn no_cameras() -> EnvConfig {
    let mut c = EnvConfig::default();
    c.camera.enabled = false;
    c
}

#[test]
fn panda_has_libero_limits_and_matches_rapier_kinematics() {
    let panda = RobotModel::load(&robots().join("panda")).unwrap();
    assert_eq!(panda.chain.dof(), 7);
    assert!((panda.chain.joints[3].upper - -0.0698).abs() < 1e-9);
    assert!((panda.chain.joints[5].velocity - 2.61).abs() < 1e-9);
    assert!((panda.finger_upper - 0.04).abs() < 1e-12);
    let mut env = SimEnv::with_robot(no_cameras(), panda);
    env.reset(2, 0).unwrap();
    for _ in 0..5 {
        env.step(&[0.3, -0.2, 0.1, 0.0, 0.0, 0.2, -1.0]);
    }
    let world = env.world();
    let hand = world.body_pose(world.robot.camera_body);
    let fk = env.ee_pose() * Isometry3::translation(0.0, 0.0, -0.1034);
    assert!((hand.translation.vector - fk.translation.vector).norm() < 1e-4);
    assert!(hand.rotation.angle_to(&fk.rotation) < 1e-4);
}

#[test]
fn another_urdf_arm_loads_and_follows_actions() {
    let arm = RobotModel::load(&robots().join("tiny_arm")).unwrap();
    assert_eq!(arm.chain.dof(), 4);
    let mut env = SimEnv::with_robot(no_cameras(), arm);
    env.reset(0, 0).unwrap();
    let start = env.ee_pose().translation.vector;
    for _ in 0..6 {
        let out = env.step(&[0.0, 0.0, 0.6, 0.0, 0.0, 0.0, 1.0]);
        assert!(out.execution_error.is_none());
    }
    let end = env.ee_pose().translation.vector;
    assert!(
        end.z - start.z > 0.05,
        "the tiny arm rose {:.3} m",
        end.z - start.z
    );
    assert!(env.gripper_width() < 0.03, "and closed its fingers");
}

#[test]
fn malformed_urdf_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        robots().join("panda/robot.toml"),
        dir.path().join("robot.toml"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("panda.urdf"),
        "<robot name=\"x\"><link name=\"a\"></robot>",
    )
    .unwrap();
    let msg = RobotModel::load(dir.path()).unwrap_err().to_string();
    assert!(
        msg.contains("panda.urdf") && msg.contains("invalid URDF"),
        "{msg}"
    );
}

/// The controller's posture pull works in the null space of the end-effector
/// task: the redundant Panda moves towards its home posture while each control
/// step's pull moves the end effector by well under a millimetre (the next
/// step's IK, solved from the measured joints, takes that back). With one
/// redundant joint only the null-space part of the offset can go: about 9%
/// of it in 20 steps here.
#[test]
fn the_posture_pull_keeps_the_end_effector_still() {
    let panda = RobotModel::load(&robots().join("panda")).unwrap();
    let home = panda.spec.home.clone();
    // Elbow rotated away from home, as after a large wrist reorientation.
    let mut q = home.clone();
    q[2] += 0.8;
    q[4] -= 0.6;
    let distance = |q: &[f64]| -> f64 {
        q.iter()
            .zip(&home)
            .map(|(a, b)| (a - b).powi(2))
            .sum::<f64>()
            .sqrt()
    };
    let before = distance(&q);
    for _ in 0..20 {
        let pose = panda.chain.ee_pose(&q);
        panda.chain.nullspace_step(&mut q, &home, 0.03, 0.05);
        let after = panda.chain.ee_pose(&q);
        let moved = (after.translation.vector - pose.translation.vector).norm();
        assert!(moved < 5e-4, "end effector moved {moved} m in one step");
        assert!(after.rotation.angle_to(&pose.rotation) < 2e-3);
    }
    assert!(
        distance(&q) < 0.95 * before,
        "{} -> {}",
        before,
        distance(&q)
    );
}
