//! Fixed initial states: for a task and a seed, state `k` is drawn from its own
//! ChaCha8 stream (so any one state can be generated alone): the arm at home plus
//! uniform joint noise, every entity placed uniformly in its BDDL init region with
//! its yaw range, rejected while footprints overlap (2-D oriented rectangles,
//! 1 cm clearance), articulations sampled inside their initial-predicate
//! intervals, then physics runs until everything is at rest. Evaluation uses
//! states 0..50 of [`INIT_SEED`]. Sets save to and load from JSON.

use std::path::Path;

use nalgebra::UnitQuaternion;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::control::{ControlParams, Controller};
use crate::error::{Result, SimError};
use crate::physics::{EntityState, SimState, SimWorld};
use crate::predicates::{RegionRef, resolve_region};
use crate::robot::RobotModel;
use crate::scene::{ObjectType, Predicate, Scene};

/// Number of fixed initial states per task.
pub const NUM_INIT_STATES: usize = 50;
/// The seed of the evaluation initial states.
pub const INIT_SEED: u64 = 2023_0607;
/// Maximum settling time (s).
const SETTLE_SECONDS: f64 = 2.0;

/// A saved set of initial states.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InitStateSet {
    /// Task name.
    pub task: String,
    /// Seed they were generated from.
    pub seed: u64,
    /// The states, index = initial-state id.
    pub states: Vec<SimState>,
}

impl InitStateSet {
    /// Writes the set as JSON (atomically: temp file then rename).
    pub fn save(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string(self).expect("states serialise");
        let tmp = path.with_extension("json.tmp");
        let io = |source| SimError::Io {
            path: path.to_path_buf(),
            source,
        };
        std::fs::write(&tmp, text).map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }

    /// Reads a set written by [`InitStateSet::save`].
    pub fn load(path: &Path) -> Result<InitStateSet> {
        let text = std::fs::read_to_string(path).map_err(|source| SimError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|e| SimError::Parse {
            file: path.display().to_string(),
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        })
    }
}

fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// Footprint rectangles (x_min, y_min, x_max, y_max), one per part, in the type's frame.
fn footprint(spec: &ObjectType) -> Vec<[f64; 4]> {
    spec.parts
        .iter()
        .map(|p| ([0.0; 3], p))
        .chain(
            spec.links
                .iter()
                .flat_map(|l| l.parts.iter().map(move |p| (l.origin, p))),
        )
        .map(|(o, p)| {
            let (lo, hi) = p.aabb();
            [o[0] + lo[0], o[1] + lo[1], o[0] + hi[0], o[1] + hi[1]]
        })
        .collect()
}

/// Corners of a footprint placed at (x, y, yaw).
fn corners(fp: [f64; 4], x: f64, y: f64, yaw: f64, margin: f64) -> [[f64; 2]; 4] {
    let (s, c) = yaw.sin_cos();
    let pts = [
        [fp[0] - margin, fp[1] - margin],
        [fp[2] + margin, fp[1] - margin],
        [fp[2] + margin, fp[3] + margin],
        [fp[0] - margin, fp[3] + margin],
    ];
    pts.map(|[px, py]| [x + c * px - s * py, y + s * px + c * py])
}

/// Separating-axis test of two convex quadrilaterals.
fn overlap(a: &[[f64; 2]; 4], b: &[[f64; 2]; 4]) -> bool {
    for poly in [a, b] {
        for i in 0..4 {
            let p = poly[i];
            let q = poly[(i + 1) % 4];
            let n = [q[1] - p[1], p[0] - q[0]];
            let proj = |pts: &[[f64; 2]; 4]| {
                pts.iter()
                    .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
                        let d = v[0] * n[0] + v[1] * n[1];
                        (lo.min(d), hi.max(d))
                    })
            };
            let (a0, a1) = proj(a);
            let (b0, b1) = proj(b);
            if a1 < b0 || b1 < a0 {
                return false;
            }
        }
    }
    true
}

/// Samples (before settling) initial state `index` of `scene` for `seed`.
pub fn sample_state(
    scene: &Scene,
    world: &SimWorld,
    robot: &RobotModel,
    seed: u64,
    index: usize,
) -> Result<SimState> {
    let mut rng = ChaCha8Rng::seed_from_u64(
        seed ^ fnv(&scene.name) ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
    );
    let noise = robot.spec.home_noise;
    let arm_q: Vec<f32> = robot
        .spec
        .home
        .iter()
        .zip(&robot.chain.joints)
        .map(|(&h, j)| {
            let n = if noise > 0.0 {
                rng.random_range(-noise..noise)
            } else {
                0.0
            };
            (h + n).clamp(j.lower, j.upper) as f32
        })
        .collect();
    let mut placed: Vec<[[f64; 2]; 4]> = Vec::new();
    let mut entities = Vec::new();
    for e in &world.entities {
        let region = scene.init.iter().find_map(|p| match p {
            Predicate::On(a, r) if *a == e.name => resolve_region(scene, world, r),
            _ => None,
        });
        let yaw_range = scene
            .init
            .iter()
            .find_map(|p| match p {
                Predicate::On(a, r) if *a == e.name => scene.region(r).and_then(|r| r.yaw),
                _ => None,
            })
            .unwrap_or([0.0, 0.0]);
        let ranges = match region {
            Some(RegionRef::Table { ranges }) if !ranges.is_empty() => ranges,
            _ => {
                return Err(SimError::InvalidScene {
                    scene: scene.name.clone(),
                    message: format!(
                        "`{}` has no `On {} <table region>` initial predicate",
                        e.name, e.name
                    ),
                });
            }
        };
        let fp = footprint(&e.spec);
        let mut found = None;
        for _ in 0..500 {
            let r = ranges[rng.random_range(0..ranges.len())];
            let x = if r[2] > r[0] {
                rng.random_range(r[0]..r[2])
            } else {
                r[0]
            };
            let y = if r[3] > r[1] {
                rng.random_range(r[1]..r[3])
            } else {
                r[1]
            };
            let yaw = if yaw_range[1] > yaw_range[0] {
                rng.random_range(yaw_range[0]..yaw_range[1])
            } else {
                yaw_range[0]
            } + e.spec.yaw;
            let c: Vec<[[f64; 2]; 4]> = fp.iter().map(|r| corners(*r, x, y, yaw, 0.004)).collect();
            if !placed.iter().any(|p| c.iter().any(|q| overlap(p, q))) {
                found = Some((x, y, yaw, c));
                break;
            }
        }
        let Some((x, y, yaw, c)) = found else {
            return Err(SimError::Placement {
                task: scene.name.clone(),
                object: e.name.clone(),
                attempts: 500,
            });
        };
        placed.extend(c);
        let drop = if e.is_object { 0.002 } else { 0.0 };
        let z = world.table_top - e.spec.bottom() + drop;
        let q = UnitQuaternion::from_euler_angles(0.0, 0.0, yaw);
        let qc = q.quaternion();
        let mut joints = Vec::new();
        for link in &e.spec.links {
            let wanted = scene.init.iter().find_map(|p| {
                let (state, target) = match p {
                    Predicate::Open(t) => ("open", t),
                    Predicate::Close(t) => ("closed", t),
                    Predicate::TurnOn(t) => ("on", t),
                    Predicate::TurnOff(t) => ("off", t),
                    _ => return None,
                };
                let hits = *target == e.name
                    || scene.region(target).is_some_and(|r| {
                        r.target == e.name && link.sites.iter().any(|s| s.name == r.name)
                    });
                hits.then_some(state)
            });
            let state = wanted.or(if link.states.contains_key("closed") {
                Some("closed")
            } else {
                Some("off")
            });
            let q = match state.and_then(|s| link.states.get(s)) {
                Some(iv) if iv[1] > iv[0] => rng.random_range(iv[0]..iv[1]),
                Some(iv) => iv[0],
                None => 0.0,
            };
            joints.push(q.clamp(link.range[0], link.range[1]) as f32);
        }
        entities.push(EntityState {
            name: e.name.clone(),
            pos: [x as f32, y as f32, z as f32],
            quat_xyzw: [qc.i as f32, qc.j as f32, qc.k as f32, qc.w as f32],
            joints,
        });
    }
    Ok(SimState {
        task: scene.name.clone(),
        arm_q,
        fingers: [robot.spec.finger_start as f32; 2],
        entities,
    })
}

/// Runs physics with the arm held until all objects are at rest; returns the settled state.
pub fn settle(world: &mut SimWorld, robot: &RobotModel, task: &str) -> SimState {
    let _span = tracing::debug_span!("settle", task).entered();
    let q: Vec<f64> = Controller::measure(world);
    let finger = world.joint_position(world.robot.fingers[0]);
    let mut ctl = Controller::new(ControlParams::default(), &q, finger, robot.finger_upper);
    ctl.hold(&q);
    let steps = (SETTLE_SECONDS * world.params.physics_hz) as usize;
    for k in 0..steps {
        ctl.apply_substep(world, robot, 0, 1);
        world.step();
        if k > 24 && k % 12 == 0 {
            let moving = world.entities.iter().filter(|e| e.is_object).any(|e| {
                let rb = &world.world.bodies[e.root];
                rb.linvel().length() > 2e-3 || rb.angvel().length() > 2e-2
            });
            if !moving {
                break;
            }
        }
    }
    world.capture(task)
}

/// Initial state `index` of a task: sampled, restored into a copy of `template`, settled.
pub fn generate_state(
    scene: &Scene,
    template: &SimWorld,
    robot: &RobotModel,
    seed: u64,
    index: usize,
) -> Result<SimState> {
    let sampled = sample_state(scene, template, robot, seed, index)?;
    let mut world = template.clone();
    world.restore(&sampled)?;
    Ok(settle(&mut world, robot, &scene.name))
}
