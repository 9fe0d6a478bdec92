//! Motion primitives as waypoint state machines. Each phase yields a waypoint
//! (end-effector position and orientation, gripper command, speed, tolerance,
//! timeout); the expert servos to it and advances when it is reached or timed out.
//! Targets are recomputed from the current state every step (closed loop).

use nalgebra::{Point3, UnitQuaternion, Vector3};

use super::{
    Expert, current_yaw, down_orientation, forward_orientation, nearest_equivalent_yaw, servo,
};
use crate::api::Action;
use crate::env::SimEnv;
use crate::physics::SimWorld;
use crate::predicates::{RegionRef, resolve_region, site_frame};

/// Retries of a grasp (missed, lost while carrying, or blocked on the way down).
const MAX_GRASP_RETRIES: f64 = 2.0;

/// A top grasp whose descent stops this far above the grasp point (m) landed
/// on the object instead of around it.
const DESCENT_BLOCKED: f64 = 0.015;

/// Height of the pre-grasp point above the grasp point (m).
const PRE_GRASP_HEIGHT: f64 = 0.10;

/// Position tolerance above the object before descending (m).
const PRE_GRASP_TOL: f64 = 0.015;

/// Speed of the final descent onto an object (fraction of full scale).
pub(super) const DESCENT_SPEED: f64 = 0.5;

/// Speed of a careful descent (see [`Grasp::Top`]'s `careful`).
pub(super) const CAREFUL_DESCENT_SPEED: f64 = 0.3;

/// Speed of the descent onto an upright can: task 0's expert solves 100% of
/// its 50 states at this speed, 80% at [`DESCENT_SPEED`]. (Not for every
/// grasp: at this speed the mug tasks 4 and 6, whose mugs were then grasped
/// around the whole body, fell from 24% and 58% to 10% and 24%.)
pub(super) const SLOW_DESCENT_SPEED: f64 = 0.25;

/// Horizontal distance (m) from the pre-grasp point beyond which an approach
/// stays above the rim of the container the previous skill filled (the
/// per-axis speed limit would otherwise drop the hand first and drag it
/// through the rim).
const TRANSIT_XY: f64 = 0.10;

/// Height of the fingertips above a container's rim while leaving it (m).
const TRANSIT_CLEARANCE: f64 = 0.03;

/// Height above the grasp point at which a side grasp's hand turns horizontal
/// and travels to its approach line (m); lower, the turning hand sweeps
/// through the object and knocks it over.
const SIDE_APPROACH_HEIGHT: f64 = 0.25;

/// Distance from the tool centre point up to the bottom of the hand body (m).
const HAND_ABOVE_TCP: f64 = 0.043;

/// Speed of a drawer push (fraction of full scale).
const PUSH_SPEED: f64 = 0.5;

/// Control steps a drawer push may take before it counts as stalled.
const PUSH_TIMEOUT: usize = 40;

/// Further pushes after a stalled one.
const PUSH_RETRIES: f64 = 3.0;

/// Tilt of the fingers towards the push direction once a drawer is shut (rad):
/// the fingertips then lead the hand, which would otherwise hit the drawer above
/// before this one is closed.
const PUSH_TILT: f64 = 0.6;

/// How to grasp an object.
#[derive(Debug, Clone, PartialEq)]
pub enum Grasp {
    /// From above, centred; TCP `height` above the object's bottom; fingers closing
    /// along the object's yaw plus `yaw` (`None`: keep the current gripper yaw).
    Top {
        /// TCP height above the bottom (m).
        height: f64,
        /// Closing direction relative to the object's yaw (rad).
        yaw: Option<f64>,
        /// Speed of the final descent (fraction of full scale).
        descent: f64,
        /// For tall objects whose top the open fingers clear by only a few
        /// millimetres per side: back off and retry if the fingers land on top
        /// (with a slow `descent`: a fast one swings the hand off the object's axis).
        careful: bool,
    },
    /// From above on a ring wall at `radius`, closing radially, on the side facing the robot.
    Rim {
        /// TCP height above the bottom (m).
        height: f64,
        /// Wall radius (m).
        radius: f64,
    },
    /// Horizontally, approaching along world `dir`, fingers closing horizontally.
    Side {
        /// TCP height above the bottom (m).
        height: f64,
        /// Approach direction (x, y).
        dir: [f64; 2],
    },
}

/// Where to put an object.
#[derive(Debug, Clone, PartialEq)]
pub enum Place {
    /// Over a region (site or table rectangle), `offset` (world xy, m) from its
    /// centre, released with the object's bottom `drop` above the region's floor
    /// and the hand above `rim` (height of the container's rim over that floor).
    Region {
        /// Region full name.
        region: String,
        /// World-frame xy offset from the region centre.
        offset: [f64; 2],
        /// Release height of the object's bottom above the floor.
        drop: f64,
        /// Rim height above the floor that the hand must clear.
        rim: f64,
    },
    /// On top of another object (e.g. a plate), centred.
    OnObject {
        /// The object below.
        entity: String,
    },
}

/// A motion primitive.
#[derive(Debug, Clone, PartialEq)]
pub enum Skill {
    /// Approach, grasp, lift, transport, place, release, retreat.
    PickPlace {
        /// Object to move.
        object: String,
        /// How to hold it.
        grasp: Grasp,
        /// Where it goes.
        place: Place,
        /// Gripper yaw while placing, relative to the yaw of the place region's owner.
        place_yaw: Option<f64>,
    },
    /// Push a drawer shut along its axis (+y of the fixture).
    PushDrawer {
        /// Fixture.
        fixture: String,
        /// Drawer link name.
        link: String,
    },
    /// Swing a revolute door shut by pushing its outer face.
    CloseDoor {
        /// Fixture.
        fixture: String,
        /// Door link name.
        link: String,
    },
    /// Open the gripper and rise straight up until the TCP is `height` above
    /// the table (at once if it already is): where an expert taking over
    /// from a policy starts, so that its first approach does not sweep
    /// through the objects the policy left the hand among.
    Retreat {
        /// TCP height above the table top (m).
        height: f64,
    },
    /// Grasp a knob's fin and turn it to `target` (rad).
    TurnKnob {
        /// Fixture.
        fixture: String,
        /// Knob link name.
        link: String,
        /// Joint position to reach.
        target: f64,
    },
}

struct Waypoint {
    pos: Vector3<f64>,
    rot: UnitQuaternion<f64>,
    gripper: f32,
    speed: f64,
    tol: f64,
    timeout: usize,
    hold: usize,
    /// An extra completion test (e.g. a joint reached its goal).
    done: bool,
}

impl Waypoint {
    fn new(pos: Vector3<f64>, rot: UnitQuaternion<f64>, gripper: f32) -> Waypoint {
        Waypoint {
            pos,
            rot,
            gripper,
            speed: 0.6,
            tol: 0.012,
            timeout: 60,
            hold: 0,
            done: false,
        }
    }
    fn speed(mut self, s: f64) -> Self {
        self.speed = s;
        self
    }
    fn tol(mut self, t: f64) -> Self {
        self.tol = t;
        self
    }
    fn timeout(mut self, t: usize) -> Self {
        self.timeout = t;
        self
    }
    fn hold(mut self, h: usize) -> Self {
        self.hold = h;
        self.tol = f64::INFINITY;
        self
    }
}

fn entity_pose(world: &SimWorld, name: &str) -> Option<nalgebra::Isometry3<f64>> {
    world
        .entity_index(name)
        .map(|i| world.body_pose(world.entities[i].root))
}

fn yaw_of(iso: &nalgebra::Isometry3<f64>) -> f64 {
    let x = iso.rotation * Vector3::x();
    x.y.atan2(x.x)
}

/// Region centre (world), floor height, and the yaw of its owner.
fn region_target(env: &SimEnv, name: &str) -> Option<(Vector3<f64>, f64, f64)> {
    let world = env.world();
    match resolve_region(env.scene(), world, name)? {
        RegionRef::Site { entity, link, site } => {
            let f = site_frame(world, entity, link, &site);
            let c = f.translation.vector;
            let owner = world.body_pose(world.entities[entity].root);
            Some((c, c.z - site.half[2], yaw_of(&owner)))
        }
        RegionRef::Table { ranges } => {
            let r = ranges.first()?;
            Some((
                Vector3::new((r[0] + r[2]) / 2.0, (r[1] + r[3]) / 2.0, world.table_top),
                world.table_top,
                0.0,
            ))
        }
    }
}

fn link_info(env: &SimEnv, fixture: &str, link: &str) -> Option<(usize, usize, f64)> {
    let world = env.world();
    let e = world.entity_index(fixture)?;
    let l = world.entities[e]
        .links
        .iter()
        .position(|x| x.name == link)?;
    Some((e, l, world.joint_position(world.entities[e].links[l].joint)))
}

/// The action of `skill` for the current state, or `None` once it is finished.
pub(super) fn step(skill: &Skill, ex: &mut Expert, env: &SimEnv) -> Option<Action> {
    let ee = env.ee_pose();
    loop {
        let wp = waypoint(skill, ex, env)?;
        let err = (wp.pos - ee.translation.vector).norm();
        let rot_err = (wp.rot * ee.rotation.inverse()).angle();
        let reached = wp.done || (err < wp.tol && rot_err < 0.1 && ex.timer >= wp.hold);
        if reached || ex.timer >= wp.timeout {
            ex.next_phase();
            continue;
        }
        return Some(servo(&ee, &wp.pos, &wp.rot, wp.speed, wp.gripper));
    }
}

fn waypoint(skill: &Skill, ex: &mut Expert, env: &SimEnv) -> Option<Waypoint> {
    match skill {
        Skill::PickPlace {
            object,
            grasp,
            place,
            place_yaw,
        } => pick_place(ex, env, object, grasp, place, *place_yaw),
        Skill::PushDrawer { fixture, link } => push_drawer(ex, env, fixture, link),
        Skill::CloseDoor { fixture, link } => close_door(ex, env, fixture, link),
        Skill::TurnKnob {
            fixture,
            link,
            target,
        } => turn_knob(ex, env, fixture, link, *target),
        Skill::Retreat { height } => retreat(ex, env, *height),
    }
}

fn retreat(ex: &mut Expert, env: &SimEnv, height: f64) -> Option<Waypoint> {
    let ee = env.ee_pose();
    let top = env.world().table_top + height;
    if ex.phase > 0 || (ex.anchor.is_none() && ee.translation.vector.z >= top) {
        return None;
    }
    let start = *ex.anchor.get_or_insert(ee.translation.vector);
    Some(
        Waypoint::new(Vector3::new(start.x, start.y, top), ee.rotation, -1.0)
            .speed(0.6)
            .tol(0.02)
            .timeout(40),
    )
}

fn pick_place(
    ex: &mut Expert,
    env: &SimEnv,
    object: &str,
    grasp: &Grasp,
    place: &Place,
    place_yaw: Option<f64>,
) -> Option<Waypoint> {
    let world = env.world();
    let ee = env.ee_pose();
    let tcp = ee.translation.vector;
    let obj = entity_pose(world, object)?;
    let o = obj.translation.vector;
    let table = world.table_top;
    let (grasp_pos, height, side) = match grasp {
        Grasp::Top { height, yaw, .. } => {
            let yaw = *ex.yaw.get_or_insert_with(|| match yaw {
                Some(off) => nearest_equivalent_yaw(yaw_of(&obj) + off, current_yaw(&ee)),
                None => clear_yaw(world, object, &o, *height, current_yaw(&ee)),
            });
            let _ = yaw;
            (Vector3::new(o.x, o.y, o.z + height), *height, None)
        }
        Grasp::Rim { height, radius } => {
            let base = env.world().robot.base.translation.vector;
            let toward = Vector3::new(base.x - o.x, base.y - o.y, 0.0).normalize();
            let yaw = *ex.yaw.get_or_insert_with(|| {
                nearest_equivalent_yaw(toward.y.atan2(toward.x), current_yaw(&ee))
            });
            let _ = yaw;
            (
                Vector3::new(
                    o.x + toward.x * radius,
                    o.y + toward.y * radius,
                    o.z + height,
                ),
                *height,
                None,
            )
        }
        Grasp::Side { height, dir } => {
            let d = Vector3::new(dir[0], dir[1], 0.0).normalize();
            (Vector3::new(o.x, o.y, o.z + height), *height, Some(d))
        }
    };
    // Once the fingers close, targets stop following the object (it moves with the hand).
    let closing = if side.is_some() { 3 } else { 2 };
    // The descent ended on top of the object (fingers on its rim, not around it):
    // back up and approach again rather than close and knock it over.
    if matches!(grasp, Grasp::Top { careful: true, .. })
        && ex.phase == closing
        && ex.timer == 0
        && tcp.z > grasp_pos.z + DESCENT_BLOCKED
        && ex.memo < MAX_GRASP_RETRIES
    {
        ex.memo += 1.0;
        ex.phase = 0;
    }
    if ex.phase < closing {
        ex.anchor = None;
    }
    let grasp_pos = if ex.phase >= closing {
        *ex.anchor.get_or_insert(grasp_pos)
    } else {
        grasp_pos
    };
    let grasp_rot = match side {
        Some(d) => forward_orientation(d),
        None => down_orientation(ex.yaw.unwrap_or(0.0)),
    };
    // Where the object's bottom is relative to the TCP now (valid once grasped).
    let held = Vector3::new(o.x - tcp.x, o.y - tcp.y, o.z - tcp.z);
    let carry = table + 0.22 + height;
    let (goal_xy, floor, release_tcp, owner_yaw) = match place {
        Place::Region {
            region,
            offset,
            drop,
            rim,
        } => {
            let (c, floor, owner_yaw) = region_target(env, region)?;
            let release = (floor + drop + height).max(floor + rim + 0.01 - HAND_ABOVE_TCP);
            // Leaving a container: the next approach must keep the fingers above its rim.
            if *rim > 0.0 && ex.phase >= 6 {
                ex.transit_z = floor + rim + TRANSIT_CLEARANCE;
            }
            (
                Vector3::new(c.x + offset[0], c.y + offset[1], 0.0),
                floor,
                release,
                owner_yaw,
            )
        }
        Place::OnObject { entity } => {
            let under = entity_pose(world, entity)?;
            let i = world.entity_index(entity)?;
            let top = under.translation.vector.z
                + world.entities[i]
                    .spec
                    .parts
                    .iter()
                    .map(|p| p.aabb().1[2])
                    .fold(0.0, f64::max);
            (
                Vector3::new(under.translation.vector.x, under.translation.vector.y, 0.0),
                top,
                top + 0.008 + height,
                yaw_of(&under),
            )
        }
    };
    let _ = floor;
    let carry_rot = match (side, place_yaw) {
        (Some(d), _) => forward_orientation(d),
        (None, Some(py)) => down_orientation(nearest_equivalent_yaw(
            owner_yaw + py,
            ex.yaw.unwrap_or(0.0),
        )),
        (None, None) => grasp_rot,
    };
    let over_goal = Vector3::new(goal_xy.x - held.x, goal_xy.y - held.y, carry);
    // A missed or lost grasp: start the skill again (at most twice).
    let carrying_phases = if side.is_some() { 4..7 } else { 3..6 };
    if carrying_phases.contains(&ex.phase) && ex.timer > 2 {
        let lost = env.gripper_width() < 0.004 || held.xy().norm() > 0.08;
        if lost && ex.memo < MAX_GRASP_RETRIES {
            ex.memo += 1.0;
            ex.phase = 0;
            ex.timer = 0;
            ex.yaw = None;
            ex.anchor = None;
        }
    }
    Some(match (side, ex.phase) {
        // Top and rim grasps.
        (None, 0) => {
            let mut above = grasp_pos + Vector3::new(0.0, 0.0, PRE_GRASP_HEIGHT);
            if (above.xy() - tcp.xy()).norm() > TRANSIT_XY {
                above.z = above.z.max(ex.transit_z);
            }
            Waypoint::new(above, grasp_rot, -1.0)
                .tol(PRE_GRASP_TOL)
                .timeout(80)
        }
        (None, 1) => Waypoint::new(grasp_pos, grasp_rot, -1.0)
            .speed(match grasp {
                Grasp::Top { descent, .. } => *descent,
                _ => DESCENT_SPEED,
            })
            .tol(0.006)
            .timeout(60),
        (None, 2) => Waypoint::new(grasp_pos, grasp_rot, 1.0)
            .hold(10)
            .timeout(12),
        (None, 3) => Waypoint::new(
            Vector3::new(grasp_pos.x, grasp_pos.y, carry),
            grasp_rot,
            1.0,
        )
        .speed(0.6)
        .tol(0.02)
        .timeout(50),
        (None, 4) => Waypoint::new(over_goal, carry_rot, 1.0)
            .tol(0.01)
            .timeout(90),
        (None, 5) => Waypoint::new(
            Vector3::new(over_goal.x, over_goal.y, release_tcp),
            carry_rot,
            1.0,
        )
        .speed(0.4)
        .tol(0.008)
        .timeout(50),
        (None, 6) => Waypoint::new(
            *ex.release_at
                .get_or_insert(Vector3::new(tcp.x, tcp.y, release_tcp)),
            carry_rot,
            -1.0,
        )
        .hold(8)
        .timeout(10),
        (None, 7) => Waypoint::new(
            Vector3::new(tcp.x, tcp.y, release_tcp + 0.12),
            carry_rot,
            -1.0,
        )
        .tol(0.03)
        .timeout(30),
        // Side grasp (into a cavity): approach high, descend, advance, close, lift, insert.
        (Some(d), p) => {
            let pre = grasp_pos - d * 0.12;
            let lift_z = floor + 0.015 + height;
            let inside = Vector3::new(goal_xy.x - held.x, goal_xy.y - held.y, lift_z);
            let before = inside - d * 0.10;
            match p {
                // High above the approach line: the hand turns horizontal
                // there, clear of the object and anything beside it.
                0 => Waypoint::new(
                    Vector3::new(pre.x, pre.y, grasp_pos.z + SIDE_APPROACH_HEIGHT),
                    grasp_rot,
                    -1.0,
                )
                .tol(0.02)
                .timeout(80),
                1 => Waypoint::new(pre, grasp_rot, -1.0)
                    .speed(0.5)
                    .tol(0.01)
                    .timeout(50),
                2 => Waypoint::new(grasp_pos, grasp_rot, -1.0)
                    .speed(0.4)
                    .tol(0.006)
                    .timeout(40),
                3 => Waypoint::new(grasp_pos, grasp_rot, 1.0)
                    .hold(10)
                    .timeout(12),
                4 => Waypoint::new(
                    Vector3::new(grasp_pos.x, grasp_pos.y, lift_z + 0.02),
                    grasp_rot,
                    1.0,
                )
                .speed(0.5)
                .tol(0.01)
                .timeout(40),
                5 => Waypoint::new(
                    Vector3::new(before.x, before.y, lift_z + 0.02),
                    grasp_rot,
                    1.0,
                )
                .tol(0.01)
                .timeout(80),
                6 => Waypoint::new(inside, grasp_rot, 1.0)
                    .speed(0.4)
                    .tol(0.008)
                    .timeout(60),
                // Released, `inside` (which follows the mug) no longer
                // says where the hand is: the release holds the hand where it
                // stopped, the retreats start from where the hand is.
                7 => Waypoint::new(*ex.release_at.get_or_insert(tcp), grasp_rot, -1.0)
                    .hold(8)
                    .timeout(10),
                8 => Waypoint::new(
                    *ex.release_at.get_or_insert(tcp) - d * 0.15,
                    grasp_rot,
                    -1.0,
                )
                .speed(0.6)
                .tol(0.015)
                .timeout(40),
                9 => Waypoint::new(
                    *ex.release_at.get_or_insert(tcp) + Vector3::new(0.0, 0.0, 0.12),
                    down_orientation(0.0),
                    -1.0,
                )
                .tol(0.03)
                .timeout(40),
                _ => return None,
            }
        }
        _ => return None,
    })
}

/// For a free-yaw top grasp: the closing direction whose hand (20 cm along the
/// closing axis) keeps farthest from taller neighbours, preferring `current`.
fn clear_yaw(world: &SimWorld, object: &str, o: &Vector3<f64>, height: f64, current: f64) -> f64 {
    let neighbours: Vec<(Vector3<f64>, f64)> = world
        .entities
        .iter()
        .filter(|e| e.name != object)
        .filter_map(|e| {
            let p = world.body_pose(e.root).translation.vector;
            let top = e
                .spec
                .parts
                .iter()
                .map(|q| q.aabb().1[2])
                .fold(0.0, f64::max);
            (p.z + top > o.z + height + 0.03).then_some((p, e.spec.footprint_radius()))
        })
        .collect();
    let score = |yaw: f64| {
        let axis = Vector3::new(yaw.cos(), yaw.sin(), 0.0);
        neighbours
            .iter()
            .map(|(p, r)| {
                let d = Vector3::new(p.x - o.x, p.y - o.y, 0.0);
                let along = d.dot(&axis).clamp(-0.1, 0.1);
                (d - axis * along).norm() - r
            })
            .fold(f64::INFINITY, f64::min)
    };
    let mut best = current;
    let mut best_score = score(current) + 0.01;
    for i in 0..12 {
        let yaw = current + i as f64 * std::f64::consts::PI / 12.0;
        let s = score(yaw);
        if s > best_score + 1e-9 {
            best = nearest_equivalent_yaw(yaw, current);
            best_score = s;
        }
    }
    best
}

fn push_drawer(ex: &mut Expert, env: &SimEnv, fixture: &str, link: &str) -> Option<Waypoint> {
    let (e, l, q) = link_info(env, fixture, link)?;
    let world = env.world();
    let root = world.body_pose(world.entities[e].root);
    let spec = &world.entities[e].spec.links[l];
    let axis = root.rotation * Vector3::from(spec.axis);
    let origin = root * Point3::from(spec.origin);
    // Front face of the drawer at the current and the closed position.
    let front_local = spec.parts.iter().map(|p| p.aabb().0[1]).fold(0.0, f64::min);
    let front_now = origin.coords + axis * (q + front_local);
    let front_closed = origin.coords + axis * (0.008 + front_local);
    let z = origin.z + 0.035;
    // Fingers tipped towards the push as the drawer shuts, so the hand trails
    // behind them and clears the drawer above (upright while far out, where a
    // tipped wrist would swing back into whatever stands behind the robot's hand).
    let shut = ((q - spec.range[0]) / (0.0 - spec.range[0])).clamp(0.0, 1.0);
    let tip = UnitQuaternion::from_axis_angle(
        &nalgebra::Unit::new_normalize(axis.cross(&Vector3::z())),
        PUSH_TILT * shut,
    );
    let rot = tip * down_orientation(yaw_of(&root));
    let closed = spec.states.get("closed").is_some_and(|iv| q >= iv[0]);
    let tcp = env.ee_pose().translation.vector;
    // A push that stalled (e.g. the load jammed): backed off, push again.
    if ex.phase == 4 && ex.timer == 0 && !closed && ex.memo < PUSH_RETRIES {
        ex.memo += 1.0;
        ex.phase = 1;
    }
    Some(match ex.phase {
        0 => Waypoint::new(
            Vector3::new(front_now.x, front_now.y, z) - axis * 0.05 + Vector3::new(0.0, 0.0, 0.12),
            rot,
            1.0,
        )
        .tol(0.015)
        .timeout(80),
        1 => Waypoint::new(
            Vector3::new(front_now.x, front_now.y, z) - axis * 0.05,
            rot,
            1.0,
        )
        .speed(0.5)
        .tol(0.008)
        .timeout(40),
        2 => {
            let mut w = Waypoint::new(
                Vector3::new(front_closed.x, front_closed.y, z) - axis * 0.01,
                rot,
                1.0,
            )
            .speed(PUSH_SPEED)
            .timeout(PUSH_TIMEOUT);
            w.done = closed && ex.timer > 3;
            w.tol = 0.0;
            w
        }
        3 => Waypoint::new(tcp - axis * 0.06, rot, 1.0)
            .tol(0.015)
            .timeout(20),
        4 => Waypoint::new(Vector3::new(tcp.x, tcp.y, z + 0.15), rot, -1.0)
            .tol(0.03)
            .timeout(30),
        _ => return None,
    })
}

fn close_door(ex: &mut Expert, env: &SimEnv, fixture: &str, link: &str) -> Option<Waypoint> {
    let (e, l, q) = link_info(env, fixture, link)?;
    let world = env.world();
    let root = world.body_pose(world.entities[e].root);
    let spec = &world.entities[e].spec.links[l];
    let hinge = root * Point3::from(spec.origin);
    let root_yaw = yaw_of(&root);
    let z = hinge.z + 0.09;
    // Door direction (hinge → free edge) and outward normal at angle `a`.
    let point = |a: f64, along: f64, out: f64| {
        let t = root_yaw + a;
        let d = Vector3::new(t.cos(), t.sin(), 0.0);
        let n = Vector3::new(t.sin(), -t.cos(), 0.0);
        Vector3::new(hinge.x, hinge.y, z) + d * along + n * out
    };
    let closed = spec.states.get("closed").is_some_and(|iv| q >= iv[0]);
    // The hand lies along the door and turns with it. Of the two equivalent
    // yaws (hand turned by π), the one that puts the middle of the door's
    // swing nearest the hand's yaw when the skill starts, so the wrist turns
    // about as far each way: turned the far way (up to 2 rad), the wrist ran
    // into its limit and the arm swung round behind its base.
    let flip = *ex.yaw.get_or_insert_with(|| {
        let mid = root_yaw + q / 2.0;
        nearest_equivalent_yaw(mid, current_yaw(&env.ee_pose())) - mid
    });
    let rot = down_orientation(root_yaw + q + flip);
    let tcp = env.ee_pose().translation.vector;
    Some(match ex.phase {
        0 => Waypoint::new(point(q, 0.2, 0.07) + Vector3::new(0.0, 0.0, 0.14), rot, 1.0)
            .tol(0.02)
            .timeout(80),
        1 => Waypoint::new(point(q, 0.2, 0.07), rot, 1.0)
            .speed(0.5)
            .tol(0.01)
            .timeout(40),
        2 => {
            let ahead = (q + 0.35).min(0.05);
            let mut w = Waypoint::new(
                point(ahead, 0.2, 0.025),
                down_orientation(root_yaw + ahead + flip),
                1.0,
            )
            .speed(0.5)
            .timeout(120);
            w.done = closed && ex.timer > 3;
            w.tol = 0.0;
            w
        }
        3 => Waypoint::new(tcp + point(0.0, 0.0, 0.1) - point(0.0, 0.0, 0.0), rot, 1.0)
            .tol(0.02)
            .timeout(20),
        _ => return None,
    })
}

fn turn_knob(
    ex: &mut Expert,
    env: &SimEnv,
    fixture: &str,
    link: &str,
    target: f64,
) -> Option<Waypoint> {
    let (e, l, q) = link_info(env, fixture, link)?;
    let world = env.world();
    let root = world.body_pose(world.entities[e].root);
    let spec = &world.entities[e].spec.links[l];
    let knob = root * Point3::from(spec.origin);
    let top = spec.parts.iter().map(|p| p.aabb().1[2]).fold(0.0, f64::max);
    let fin_z = knob.z + top - 0.008;
    let base_yaw = yaw_of(&root) + std::f64::consts::FRAC_PI_2;
    let ee = env.ee_pose();
    if ex.phase == 0 && ex.timer == 0 {
        ex.yaw = Some(nearest_equivalent_yaw(base_yaw + q, current_yaw(&ee)));
        ex.memo = q;
    }
    let yaw = ex.yaw.unwrap_or(base_yaw);
    let at = Vector3::new(knob.x, knob.y, fin_z);
    Some(match ex.phase {
        0 => Waypoint::new(
            at + Vector3::new(0.0, 0.0, 0.10),
            down_orientation(yaw),
            -1.0,
        )
        .tol(0.012)
        .timeout(80),
        1 => Waypoint::new(at, down_orientation(yaw), -1.0)
            .speed(0.4)
            .tol(0.005)
            .timeout(40),
        2 => Waypoint::new(at, down_orientation(yaw), 1.0)
            .hold(10)
            .timeout(12),
        3 => {
            let turned = (q - ex.memo).max(0.0);
            let goal = yaw + (target - ex.memo) + 0.2;
            let next = (yaw + turned + 0.4).min(goal);
            let mut w = Waypoint::new(at, down_orientation(next), 1.0).timeout(60);
            w.done = q >= target;
            w.tol = 0.0;
            w
        }
        4 => Waypoint::new(at, ee.rotation, -1.0).hold(8).timeout(10),
        5 => Waypoint::new(at + Vector3::new(0.0, 0.0, 0.12), ee.rotation, -1.0)
            .tol(0.03)
            .timeout(30),
        _ => return None,
    })
}
