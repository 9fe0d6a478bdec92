//! The scripted experts solve fixed initial states in this physics (the full
//! 50-state sweep is `wmrl sim experts`; these are the states pinned as regressions).

use wmrl_sim::rollout::{Perturbation, run_expert, run_perturbed_expert};
use wmrl_sim::{EnvConfig, SimEnv};

fn solves(task: usize, state: usize) {
    let mut c = EnvConfig::default();
    c.camera.enabled = false;
    let mut env = SimEnv::new(c);
    let summary = run_expert(&mut env, task, state, |_| {}).unwrap();
    assert!(summary.execution_error.is_none(), "{summary:?}");
    assert!(
        summary.success,
        "expert fails task {task} state {state}: {summary:?}"
    );
    assert!(summary.steps <= wmrl_sim::MAX_EPISODE_STEPS);
    assert!(summary.unmet_goals.is_empty(), "{summary:?}");
}

/// An episode cut short reports every goal predicate it did not reach,
/// named as in the scene file.
#[test]
fn an_unfinished_episode_names_its_unmet_goals() {
    let mut c = EnvConfig::default();
    c.camera.enabled = false;
    c.max_steps = 5;
    let mut env = SimEnv::new(c);
    let summary = run_expert(&mut env, 1, 12, |_| {}).unwrap();
    assert!(!summary.success);
    assert_eq!(summary.steps, 5);
    assert_eq!(
        summary.unmet_goals,
        [
            "In cream_cheese_1 basket_1_contain_region",
            "In butter_1 basket_1_contain_region"
        ]
    );
}

#[test]
fn mug_on_plate_and_pudding_beside_it() {
    solves(6, 1);
}

/// Grasped 1.8 cm up its 2.7 cm height, the pudding rolled between the
/// closing fingers and slipped out on the way up in this state; 1.2 cm up,
/// the finger pads cover its middle.
#[test]
fn the_pudding_is_grasped_low() {
    solves(6, 8);
}

#[test]
fn both_moka_pots_on_the_stove() {
    solves(8, 0);
}

#[test]
fn soup_and_cream_cheese_in_the_basket() {
    solves(7, 1);
}

#[test]
fn two_mugs_on_two_plates() {
    solves(4, 2);
}

#[test]
fn stove_on_and_moka_pot_on_it() {
    solves(2, 0);
}

#[test]
fn book_in_the_caddy_back_compartment() {
    solves(5, 0);
}

#[test]
fn bowl_in_the_bottom_drawer_and_drawer_shut() {
    solves(3, 0);
}

/// State 12 failed with the flat boxes grasped 1.1 cm up their 1.8 cm
/// (the cream cheese rolled in the fingers and fell off the table); they are
/// now grasped with the fingertips at the table.
#[test]
fn cream_cheese_and_butter_in_the_basket() {
    solves(1, 12);
}

#[test]
fn yellow_and_white_mug_in_the_microwave_and_door_shut() {
    solves(9, 2);
}

/// Task 8 state 4: the descent onto the far moka pot stalled 3 cm above the
/// grasp while rapier recycled a stale contact (a fingertip "resting" on the
/// pot's rim that it had already passed); fresh contacts every substep.
#[test]
fn the_fingers_pass_beside_the_moka_pot_rim() {
    solves(8, 4);
}

/// Task 9 state 1: the released mug was dragged over by fingers retreating
/// towards a target that followed it, and the door push ran the wrist into
/// its limit.
#[test]
fn the_mug_stays_upright_in_the_microwave_and_the_door_shuts() {
    solves(9, 1);
}

/// Mugs are hollow and carried by the wall facing the robot: while the mug
/// is in the air the tool centre point sits on its wall (about 3.2 cm from
/// its axis), not over its centre. Task 6 state 0 failed with the grasp
/// around the whole body (a finger landed on the rim and tipped the mug).
#[test]
fn a_mug_is_carried_by_its_rim() {
    use wmrl_sim::expert::Expert;
    let mut c = EnvConfig::default();
    c.camera.enabled = false;
    let mut env = SimEnv::new(c);
    env.reset(6, 0).unwrap();
    let mut expert = Expert::new(&env);
    let table = env.world().table_top;
    let mut offsets = Vec::new();
    loop {
        let action = expert.act(&env);
        let outcome = env.step(&action);
        let world = env.world();
        let mug = world.entity_index("porcelain_mug_1").unwrap();
        let mug = world.body_pose(world.entities[mug].root).translation.vector;
        if mug.z > table + 0.05 {
            offsets.push((env.ee_pose().translation.vector - mug).xy().norm());
        }
        if outcome.done {
            assert!(outcome.success, "expert fails task 6 state 0");
            break;
        }
    }
    assert!(offsets.len() > 10, "the mug was lifted: {offsets:?}");
    for d in &offsets {
        assert!(
            (0.02..0.045).contains(d),
            "tool centre {d:.3} m from the mug's axis while carrying"
        );
    }
}

/// An expert taking over mid-episode skips the skills whose goal already
/// holds: at the initial state it runs the whole plan, after the first
/// object is in the basket only the second pick, after success nothing
/// (a retreat first in every case).
#[test]
fn an_expert_resuming_mid_episode_skips_finished_skills() {
    use wmrl_sim::expert::{Expert, Skill, plan_for_task};
    let mut c = EnvConfig::default();
    c.camera.enabled = false;
    let mut env = SimEnv::new(c);
    let plan = plan_for_task(7);
    env.reset(7, 1).unwrap();
    let at_start = Expert::resume(&env);
    assert!(matches!(at_start.skills()[0], Skill::Retreat { .. }));
    assert_eq!(&at_start.skills()[1..], &plan[..]);
    let mut expert = Expert::new(&env);
    let mut resumed_after_first = None;
    loop {
        let action = expert.act(&env);
        if expert.progress().0 == 1 && resumed_after_first.is_none() {
            resumed_after_first = Some(Expert::resume(&env));
        }
        let outcome = env.step(&action);
        if outcome.done {
            assert!(outcome.success, "expert fails task 7 state 1");
            break;
        }
    }
    let resumed = resumed_after_first.expect("the expert reached its second skill");
    assert_eq!(&resumed.skills()[1..], &plan[1..]);
    assert_eq!(
        Expert::resume(&env).skills().len(),
        1,
        "only the retreat is left"
    );
}

/// The actions an exploring policy sends (a shaky arm, a gripper flipping
/// open/closed while the fingers are around an object) keep the physics
/// stable, and the disturbances are a deterministic function of the seed.
#[test]
fn a_perturbed_expert_is_stable_and_deterministic() {
    let mut c = EnvConfig::default();
    c.camera.enabled = false;
    c.max_steps = 160;
    let mut env = SimEnv::new(c);
    let shaky = Perturbation {
        arm_noise: 0.3,
        gripper_flip: 0.5,
        seed: 7,
    };
    let calm = Perturbation {
        arm_noise: 0.0,
        gripper_flip: 0.0,
        seed: 7,
    };
    let scripted = run_expert(&mut env, 5, 0, |_| {}).unwrap();
    let undisturbed = run_perturbed_expert(&mut env, 5, 0, &calm).unwrap();
    assert_eq!(
        undisturbed, scripted,
        "zero perturbation is the expert itself"
    );
    let a = run_perturbed_expert(&mut env, 5, 0, &shaky).unwrap();
    let b = run_perturbed_expert(&mut env, 5, 0, &shaky).unwrap();
    assert_eq!(a, b, "same seed, same episode");
    assert!(a.execution_error.is_none(), "{a:?}");
    assert!(a.steps <= 160);
    assert!(
        a.steps != scripted.steps || a.success != scripted.success,
        "the disturbances changed nothing: {a:?}"
    );
}
