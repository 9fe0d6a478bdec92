//! The object-type catalog: each LIBERO object or fixture type as compound
//! primitive shapes (boxes, cylinders, spheres, capsules) with a colour, a mass,
//! named sites (goal regions) and optional articulated links (drawers on
//! prismatic joints, doors and knobs on revolute joints). The built-in catalog is
//! `scenes/objects.toml`; a scene may add `[[object_type]]` entries of its own.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Result, SimError};

/// The built-in catalog, `scenes/objects.toml`, compiled in.
const BUILTIN: &str = include_str!("../../../../scenes/objects.toml");

/// A primitive shape in its part frame (sizes in m).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Shape {
    /// Half extents (x, y, z).
    Box([f64; 3]),
    /// (radius, half height), axis along z.
    Cylinder([f64; 2]),
    /// (radius, half height of the straight segment), axis along z.
    Capsule([f64; 2]),
    /// Radius.
    Sphere(f64),
}

impl Shape {
    /// Volume (m³), used to split a type's mass over its parts.
    pub fn volume(&self) -> f64 {
        use std::f64::consts::PI;
        match *self {
            Shape::Box(h) => 8.0 * h[0] * h[1] * h[2],
            Shape::Cylinder([r, hh]) => PI * r * r * 2.0 * hh,
            Shape::Capsule([r, hh]) => PI * r * r * 2.0 * hh + 4.0 / 3.0 * PI * r * r * r,
            Shape::Sphere(r) => 4.0 / 3.0 * PI * r * r * r,
        }
    }

    /// Half extents of the shape's local bounding box.
    pub fn half_extents(&self) -> [f64; 3] {
        match *self {
            Shape::Box(h) => h,
            Shape::Cylinder([r, hh]) => [r, r, hh],
            Shape::Capsule([r, hh]) => [r, r, hh + r],
            Shape::Sphere(r) => [r, r, r],
        }
    }
}

/// One primitive of a compound body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Part {
    /// The primitive.
    pub shape: Shape,
    /// Position in the body frame (m) (default: origin).
    #[serde(default)]
    pub pos: [f64; 3],
    /// Orientation as roll, pitch, yaw (rad) (default: none).
    #[serde(default)]
    pub rpy: [f64; 3],
    /// RGB colour; the type's colour when absent.
    #[serde(default)]
    pub color: Option<[u8; 3]>,
}

/// A named box-shaped region attached to a body (a BDDL region target), axis-aligned in the body frame.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Site {
    /// Name used as `{instance}_{name}`, e.g. `contain_region`.
    pub name: String,
    /// Centre in the body frame (m).
    pub pos: [f64; 3],
    /// Half extents (m).
    pub half: [f64; 3],
}

/// Joint type of an articulated link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JointKind {
    /// Slides along the axis (m).
    Prismatic,
    /// Rotates about the axis (rad).
    Revolute,
}

/// An articulated part of a fixture, jointed to the fixture's root body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    /// Link name, e.g. `bottom_drawer`.
    pub name: String,
    /// Joint type.
    pub joint: JointKind,
    /// Joint origin in the root frame (m); the link frame at q = 0.
    pub origin: [f64; 3],
    /// Joint axis in the root frame (unit vector).
    pub axis: [f64; 3],
    /// Joint range [min, max] (m or rad).
    pub range: [f64; 2],
    /// Viscous joint damping (N·s/m or N·m·s/rad) (default: 1).
    #[serde(default = "default_damping")]
    pub damping: f64,
    /// Link mass (kg) (default: 0.5).
    #[serde(default = "default_link_mass")]
    pub mass: f64,
    /// Named joint-position intervals: `open`, `closed`, `on`, `off`.
    #[serde(default)]
    pub states: BTreeMap<String, [f64; 2]>,
    /// Shapes in the link frame.
    #[serde(default)]
    pub parts: Vec<Part>,
    /// Sites in the link frame (they move with the link).
    #[serde(default)]
    pub sites: Vec<Site>,
}

fn default_damping() -> f64 {
    1.0
}
fn default_link_mass() -> f64 {
    0.5
}
fn default_mass() -> f64 {
    0.1
}
fn default_friction() -> f64 {
    1.0
}

/// An object or fixture type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObjectType {
    /// Type name as used in BDDL, e.g. `akita_black_bowl`.
    pub name: String,
    /// What it is, in a few words.
    #[serde(default)]
    pub description: String,
    /// Default RGB colour of its parts.
    pub color: [u8; 3],
    /// Mass of the root body (kg) (default: 0.1), split over parts by volume.
    #[serde(default = "default_mass")]
    pub mass: f64,
    /// Coulomb friction coefficient (default: 1.0).
    #[serde(default = "default_friction")]
    pub friction: f64,
    /// Yaw (rad) added to the placement region's yaw, for LIBERO's spawn orientations (default: 0).
    #[serde(default)]
    pub yaw: f64,
    /// Shapes of the root body; the root frame's origin is the bottom centre.
    pub parts: Vec<Part>,
    /// Named regions on the root body.
    #[serde(default)]
    pub sites: Vec<Site>,
    /// Articulated links (fixtures only).
    #[serde(default)]
    pub links: Vec<LinkSpec>,
}

impl ObjectType {
    /// All parts, root body and links (links at q = 0), in the root frame.
    fn all_parts(&self) -> impl Iterator<Item = ([f64; 3], &Part)> {
        self.parts.iter().map(|p| ([0.0; 3], p)).chain(
            self.links
                .iter()
                .flat_map(|l| l.parts.iter().map(move |p| (l.origin, p))),
        )
    }

    /// Lowest z of the type's parts in its own frame (≈ 0 for bottom-centred types).
    pub fn bottom(&self) -> f64 {
        self.all_parts()
            .map(|(o, p)| o[2] + p.aabb().0[2])
            .fold(f64::INFINITY, f64::min)
    }

    /// Radius of the footprint around the origin (for placement rejection).
    pub fn footprint_radius(&self) -> f64 {
        self.all_parts()
            .map(|(o, p)| {
                let (lo, hi) = p.aabb();
                let x = (o[0] + lo[0]).abs().max((o[0] + hi[0]).abs());
                let y = (o[1] + lo[1]).abs().max((o[1] + hi[1]).abs());
                x.hypot(y)
            })
            .fold(0.0, f64::max)
    }
}

impl Part {
    /// Rotation of the part from its roll-pitch-yaw.
    pub fn rotation(&self) -> nalgebra::Rotation3<f64> {
        nalgebra::Rotation3::from_euler_angles(self.rpy[0], self.rpy[1], self.rpy[2])
    }

    /// Axis-aligned bounds (min, max) of the part in the body frame.
    pub fn aabb(&self) -> ([f64; 3], [f64; 3]) {
        let h = self.shape.half_extents();
        let r = self.rotation();
        let m = r.matrix();
        let mut lo = [0.0; 3];
        let mut hi = [0.0; 3];
        for i in 0..3 {
            let e = m[(i, 0)].abs() * h[0] + m[(i, 1)].abs() * h[1] + m[(i, 2)].abs() * h[2];
            lo[i] = self.pos[i] - e;
            hi[i] = self.pos[i] + e;
        }
        (lo, hi)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogFile {
    #[serde(rename = "object_type")]
    types: Vec<ObjectType>,
}

/// All object types the simulator knows, by name.
#[derive(Debug, Clone)]
pub struct Catalog {
    types: BTreeMap<String, ObjectType>,
}

impl Catalog {
    /// The built-in catalog (`scenes/objects.toml`).
    pub fn builtin() -> Catalog {
        Catalog::from_toml(BUILTIN, "scenes/objects.toml")
            .expect("the built-in catalog scenes/objects.toml parses (tested)")
    }

    /// Parses a catalog file with `[[object_type]]` entries.
    pub fn from_toml(text: &str, file: &str) -> Result<Catalog> {
        let parsed: CatalogFile =
            toml::from_str(text).map_err(|e| SimError::from_toml(file, text, &e))?;
        let mut catalog = Catalog {
            types: BTreeMap::new(),
        };
        catalog.extend(parsed.types);
        Ok(catalog)
    }

    /// Adds (or replaces) types, e.g. those a scene defines.
    pub fn extend(&mut self, types: impl IntoIterator<Item = ObjectType>) {
        for t in types {
            self.types.insert(t.name.clone(), t);
        }
    }

    /// Looks up a type.
    pub fn get(&self, name: &str) -> Option<&ObjectType> {
        self.types.get(name)
    }

    /// Sorted type names, tables included.
    pub fn known_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.types.keys().cloned().collect();
        v.extend(super::TABLE_TYPES.iter().map(|s| s.to_string()));
        v.sort();
        v
    }

    /// Whether `name` is a modelled type (catalog entry or a table).
    pub fn knows(&self, name: &str) -> bool {
        self.types.contains_key(name) || super::TABLE_TYPES.contains(&name)
    }
}
