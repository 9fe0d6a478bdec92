//! Goal predicates evaluated on the simulator state, following LIBERO's
//! semantics (`envs/predicates/base_predicates.py`, shared/reference/libero-long.md §1)
//! with each object's root at its bottom centre:
//! - `On A B` (B an object): B.z ≤ A.z, A touches B, and the roots are < 3 cm apart in xy.
//! - `On A R` (R a site of B): A's root in R's frame has |dx| < hx, |dy| < hy and
//!   hz − 0.005 < dz < hz + 0.10, and A touches B.
//! - `On A R` (R a table region): A's root inside one of R's rectangles, within 10 cm above the table.
//! - `In A R`: A's root strictly inside R's box, lower z bound lowered by 1 cm.
//! - `Open`/`Close`/`TurnOn`/`TurnOff X`: joint position(s) inside the link's
//!   `open`/`closed`/`on` interval (TurnOff: outside `on`); X a fixture means any
//!   link for Open/TurnOn and all links for Close/TurnOff; X a site means the link carrying it.

use nalgebra::{Isometry3, Point3, Vector3};

use crate::physics::SimWorld;
use crate::scene::{Predicate, Scene, Site};

/// A region resolved against the world.
#[derive(Debug, Clone)]
pub enum RegionRef {
    /// A site on an entity's root (`link = None`) or on one of its links.
    Site {
        /// Entity index.
        entity: usize,
        /// Link index within the entity.
        link: Option<usize>,
        /// The site.
        site: Site,
    },
    /// Rectangles on the table, world xy (m).
    Table {
        /// (x_min, y_min, x_max, y_max) in world coordinates.
        ranges: Vec<[f64; 4]>,
    },
}

/// Resolves `name` (an entity or a region full name).
pub fn resolve_region(scene: &Scene, world: &SimWorld, name: &str) -> Option<RegionRef> {
    if let Some(region) = scene.region(name) {
        if let Some(ei) = world.entity_index(&region.target) {
            let spec = &world.entities[ei].spec;
            if let Some(site) = spec.sites.iter().find(|s| s.name == region.name) {
                return Some(RegionRef::Site {
                    entity: ei,
                    link: None,
                    site: site.clone(),
                });
            }
            for (li, l) in spec.links.iter().enumerate() {
                if let Some(site) = l.sites.iter().find(|s| s.name == region.name) {
                    return Some(RegionRef::Site {
                        entity: ei,
                        link: Some(li),
                        site: site.clone(),
                    });
                }
            }
            return None;
        }
        let off = world.layout.workspace_offset();
        return Some(RegionRef::Table {
            ranges: region
                .ranges
                .iter()
                .map(|r| [r[0] + off[0], r[1] + off[1], r[2] + off[0], r[3] + off[1]])
                .collect(),
        });
    }
    None
}

/// World frame of a site (its centre) for the current state.
pub fn site_frame(
    world: &SimWorld,
    entity: usize,
    link: Option<usize>,
    site: &Site,
) -> Isometry3<f64> {
    let e = &world.entities[entity];
    let body = link.map_or(e.root, |l| e.links[l].body);
    world.body_pose(body) * Isometry3::translation(site.pos[0], site.pos[1], site.pos[2])
}

fn root(world: &SimWorld, i: usize) -> Vector3<f64> {
    world.body_pose(world.entities[i].root).translation.vector
}

/// Whether entity `a`'s root is inside `region` (LIBERO `In`).
pub fn inside(world: &SimWorld, a: usize, region: &RegionRef) -> bool {
    let p = root(world, a);
    match region {
        RegionRef::Site { entity, link, site } => {
            let local =
                site_frame(world, *entity, *link, site).inverse_transform_point(&Point3::from(p));
            let h = site.half;
            local.x.abs() < h[0] && local.y.abs() < h[1] && local.z > -h[2] - 0.01 && local.z < h[2]
        }
        RegionRef::Table { ranges } => ranges.iter().any(|r| {
            p.x > r[0] && p.x < r[2] && p.y > r[1] && p.y < r[3] && p.z > world.table_top - 0.01
        }),
    }
}

fn link_states(world: &SimWorld, entity: usize, link: Option<usize>, state: &str) -> Vec<bool> {
    let e = &world.entities[entity];
    e.links
        .iter()
        .enumerate()
        .filter(|(i, _)| link.is_none_or(|l| l == *i))
        .filter_map(|(i, l)| {
            let interval = e.spec.links[i].states.get(state)?;
            let q = world.joint_position(l.joint);
            Some(q >= interval[0] - 1e-6 && q <= interval[1] + 1e-6)
        })
        .collect()
}

fn articulation(scene: &Scene, world: &SimWorld, x: &str) -> Option<(usize, Option<usize>)> {
    if let Some(i) = world.entity_index(x) {
        return Some((i, None));
    }
    match resolve_region(scene, world, x)? {
        RegionRef::Site { entity, link, .. } => Some((entity, link)),
        RegionRef::Table { .. } => None,
    }
}

/// Evaluates one predicate; `None` when it cannot be evaluated (unknown names, `Other`).
pub fn evaluate(scene: &Scene, world: &SimWorld, p: &Predicate) -> Option<bool> {
    match p {
        Predicate::On(a, b) => {
            let ai = world.entity_index(a)?;
            if let Some(bi) = world.entity_index(b) {
                let (pa, pb) = (root(world, ai), root(world, bi));
                let touching =
                    world.in_contact(&world.entity_colliders(ai), &world.entity_colliders(bi));
                let xy = ((pa.x - pb.x).powi(2) + (pa.y - pb.y).powi(2)).sqrt();
                return Some(pb.z <= pa.z && touching && xy < 0.03);
            }
            match resolve_region(scene, world, b)? {
                RegionRef::Site { entity, link, site } => {
                    let frame = site_frame(world, entity, link, &site);
                    let local = frame.inverse_transform_point(&Point3::from(root(world, ai)));
                    let h = site.half;
                    let within = local.x.abs() < h[0]
                        && local.y.abs() < h[1]
                        && local.z > h[2] - 0.005 - 2.0 * h[2]
                        && local.z < h[2] + 0.10;
                    let touching = world
                        .in_contact(&world.entity_colliders(ai), &world.entity_colliders(entity));
                    Some(within && touching)
                }
                RegionRef::Table { ranges } => {
                    let pa = root(world, ai);
                    Some(
                        ranges
                            .iter()
                            .any(|r| pa.x > r[0] && pa.x < r[2] && pa.y > r[1] && pa.y < r[3])
                            && pa.z > world.table_top - 0.005
                            && pa.z < world.table_top + 0.10,
                    )
                }
            }
        }
        Predicate::In(a, r) => {
            let ai = world.entity_index(a)?;
            let region = resolve_region(scene, world, r)?;
            Some(inside(world, ai, &region))
        }
        Predicate::Open(x) | Predicate::TurnOn(x) => {
            let (e, l) = articulation(scene, world, x)?;
            let state = if matches!(p, Predicate::Open(_)) {
                "open"
            } else {
                "on"
            };
            let v = link_states(world, e, l, state);
            Some(!v.is_empty() && v.iter().any(|&b| b))
        }
        Predicate::Close(x) => {
            let (e, l) = articulation(scene, world, x)?;
            let v = link_states(world, e, l, "closed");
            Some(!v.is_empty() && v.iter().all(|&b| b))
        }
        Predicate::TurnOff(x) => {
            let (e, l) = articulation(scene, world, x)?;
            let v = link_states(world, e, l, "on");
            Some(!v.is_empty() && v.iter().all(|&b| !b))
        }
        Predicate::Other { .. } => None,
    }
}

/// The goal predicates that do not hold (or cannot be evaluated), in scene order.
pub fn unmet_goals<'a>(
    scene: &'a Scene,
    world: &'a SimWorld,
) -> impl Iterator<Item = &'a Predicate> + 'a {
    scene
        .goal
        .iter()
        .filter(move |p| evaluate(scene, world, p) != Some(true))
}

/// Whether every goal predicate holds.
pub fn goal_reached(scene: &Scene, world: &SimWorld) -> bool {
    unmet_goals(scene, world).next().is_none()
}
