//! Scripted experts: per task, a plan of motion primitives (pick-and-place,
//! push a drawer shut, swing a door shut, turn a knob), each a small state
//! machine of Cartesian waypoints servoed through the same 7-D action a policy
//! sends. They read the simulator state (object poses, joint positions) and are
//! the demonstration source for training and the proof that each task is solvable.

mod plans;
mod skills;

pub use plans::plan_for_task;
pub use skills::{Grasp, Place, Skill};

use nalgebra::{Isometry3, Matrix3, Rotation3, UnitQuaternion, Vector3};

use crate::api::Action;
use crate::env::SimEnv;
use crate::predicates;
use crate::scene::Predicate;

/// TCP height above the table an expert taking over rises to first (m): above
/// the basket's rim with a can in the hand.
const RESUME_CLEARANCE: f64 = 0.25;

/// A scripted expert for one episode.
#[derive(Debug, Clone)]
pub struct Expert {
    skills: Vec<Skill>,
    current: usize,
    phase: usize,
    timer: usize,
    /// Finger-axis yaw chosen for the current skill (kept while carrying).
    yaw: Option<f64>,
    /// Extra memory of the current skill (e.g. the start angle of a knob).
    memo: f64,
    /// Grasp point frozen when the fingers start closing (targets stop following the object).
    anchor: Option<Vector3<f64>>,
    /// Where the hand stays while the fingers open (set when a release starts):
    /// the object shifts as it is let go, and targets that followed it would
    /// drag the opening fingers through it.
    release_at: Option<Vector3<f64>>,
    /// Lowest TCP height for travelling between skills (above the last filled container's rim).
    transit_z: f64,
}

impl Expert {
    /// The expert of `env`'s current task (call after `reset`).
    pub fn new(env: &SimEnv) -> Expert {
        Expert::with_skills(plan_for_task(env.task_index()))
    }

    /// An expert that takes over `env` mid-episode (from wherever a policy
    /// left it): first a [`Skill::Retreat`] (open, rise clear of the objects),
    /// then the task's plan without the skills whose goal predicates already
    /// hold, so a placed object is not picked again.
    pub fn resume(env: &SimEnv) -> Expert {
        let pending = plan_for_task(env.task_index())
            .into_iter()
            .filter(|skill| !skill_done(skill, env));
        Expert::with_skills(
            std::iter::once(Skill::Retreat {
                height: RESUME_CLEARANCE,
            })
            .chain(pending)
            .collect(),
        )
    }

    /// An expert running the given skills in order.
    pub fn with_skills(skills: Vec<Skill>) -> Expert {
        Expert {
            skills,
            current: 0,
            phase: 0,
            timer: 0,
            yaw: None,
            memo: 0.0,
            anchor: None,
            release_at: None,
            transit_z: f64::NEG_INFINITY,
        }
    }

    /// The skills this expert runs, in order.
    pub fn skills(&self) -> &[Skill] {
        &self.skills
    }

    /// Whether every skill has finished.
    pub fn finished(&self) -> bool {
        self.current >= self.skills.len()
    }

    /// Index of the running skill and its phase (for logs).
    pub fn progress(&self) -> (usize, usize) {
        (self.current, self.phase)
    }

    /// The next action for the environment's current state.
    pub fn act(&mut self, env: &SimEnv) -> Action {
        loop {
            let Some(skill) = self.skills.get(self.current).cloned() else {
                return [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0];
            };
            match skills::step(&skill, self, env) {
                Some(a) => {
                    self.timer += 1;
                    return a;
                }
                None => {
                    self.current += 1;
                    self.phase = 0;
                    self.timer = 0;
                    self.yaw = None;
                    self.memo = 0.0;
                    self.anchor = None;
                    self.release_at = None;
                }
            }
        }
    }

    pub(crate) fn next_phase(&mut self) {
        self.phase += 1;
        self.timer = 0;
        self.release_at = None;
    }
}

/// Whether the goal predicates a skill is responsible for all hold: for a
/// pick-and-place, those whose first argument is the moved object; for an
/// articulated fixture, those naming the fixture (or one of its regions).
/// A skill no goal predicate mentions is never done.
fn skill_done(skill: &Skill, env: &SimEnv) -> bool {
    let concerns = |p: &Predicate| match (skill, p) {
        (Skill::PickPlace { object, .. }, Predicate::On(a, _) | Predicate::In(a, _)) => a == object,
        (
            Skill::PushDrawer { fixture, .. }
            | Skill::CloseDoor { fixture, .. }
            | Skill::TurnKnob { fixture, .. },
            Predicate::Open(x) | Predicate::Close(x) | Predicate::TurnOn(x) | Predicate::TurnOff(x),
        ) => x.starts_with(fixture.as_str()),
        _ => false,
    };
    let mut related = env.scene().goal.iter().filter(|p| concerns(p)).peekable();
    related.peek().is_some()
        && related.all(|p| predicates::evaluate(env.scene(), env.world(), p) == Some(true))
}

/// Gripper orientation pointing down (hand +z = world -z) with the fingers
/// closing along the horizontal direction at angle `yaw`.
pub fn down_orientation(yaw: f64) -> UnitQuaternion<f64> {
    let y = Vector3::new(yaw.cos(), yaw.sin(), 0.0);
    let z = Vector3::new(0.0, 0.0, -1.0);
    let x = y.cross(&z);
    UnitQuaternion::from_rotation_matrix(&Rotation3::from_matrix_unchecked(Matrix3::from_columns(
        &[x, y, z],
    )))
}

/// Gripper orientation pointing horizontally along `dir` (unit, horizontal),
/// fingers closing horizontally, hand +x up.
pub fn forward_orientation(dir: Vector3<f64>) -> UnitQuaternion<f64> {
    let z = dir.normalize();
    let x = Vector3::new(0.0, 0.0, 1.0);
    let y = z.cross(&x);
    UnitQuaternion::from_rotation_matrix(&Rotation3::from_matrix_unchecked(Matrix3::from_columns(
        &[x, y, z],
    )))
}

/// The closing-axis yaw of the current gripper orientation.
pub fn current_yaw(ee: &Isometry3<f64>) -> f64 {
    let y = ee.rotation * Vector3::y();
    y.y.atan2(y.x)
}

/// Of `yaw` and `yaw + π` (the same grasp), the one closest to `reference`.
pub fn nearest_equivalent_yaw(yaw: f64, reference: f64) -> f64 {
    let wrap = |a: f64| {
        (a + std::f64::consts::PI).rem_euclid(2.0 * std::f64::consts::PI) - std::f64::consts::PI
    };
    let a = reference + wrap(yaw - reference);
    let b = reference + wrap(yaw + std::f64::consts::PI - reference);
    if (a - reference).abs() <= (b - reference).abs() {
        a
    } else {
        b
    }
}

/// The action that moves the end effector towards `target` (at most `max_speed`
/// of full scale per axis) and rotates it towards `orientation`, with a gripper command.
pub fn servo(
    ee: &Isometry3<f64>,
    target: &Vector3<f64>,
    orientation: &UnitQuaternion<f64>,
    max_speed: f64,
    gripper: f32,
) -> Action {
    let dp = (target - ee.translation.vector) / 0.05;
    let dr = (orientation * ee.rotation.inverse()).scaled_axis() / 0.5;
    let c = |v: f64, m: f64| v.clamp(-m, m) as f32;
    [
        c(dp.x, max_speed),
        c(dp.y, max_speed),
        c(dp.z, max_speed),
        c(dr.x, 1.0),
        c(dr.y, 1.0),
        c(dr.z, 1.0),
        gripper,
    ]
}
