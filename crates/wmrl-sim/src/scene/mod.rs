//! Task scenes: the project's TOML format and LIBERO's BDDL, parsed into one
//! [`Scene`] structure that mirrors BDDL (fixtures, objects, named regions,
//! initial and goal predicates) and written back to either format, plus the
//! object-type catalog and table layouts that turn a scene into geometry.

mod bddl;
mod catalog;
mod check;
mod export;
mod layout;
mod predicate;

pub use bddl::parse_bddl;
pub use catalog::{Catalog, JointKind, LinkSpec, ObjectType, Part, Shape, Site};
pub use check::{SceneReport, check_file};
pub use export::ExportError;
pub use layout::{CameraPose, Layout, TABLE_TYPES};
pub use predicate::Predicate;

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Result, SimError};

/// A task scene: what is on the table, where it starts and what must become true.
///
/// Field-for-field the content of a BDDL problem, so both formats parse into it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scene {
    /// Task name (the BDDL file stem for BDDL input).
    pub name: String,
    /// BDDL problem class, e.g. `LIBERO_Kitchen_Tabletop_Manipulation`; selects the [`Layout`].
    pub problem: String,
    /// The natural-language instruction (BDDL `:language`).
    pub language: String,
    /// Initial predicates: placements (`On obj table_region`) and articulation states.
    #[serde(default)]
    pub init: Vec<Predicate>,
    /// Goal predicates, all of which must hold (BDDL `(And ...)`).
    pub goal: Vec<Predicate>,
    /// Fixtures: the table and immovable furniture (their joints still move).
    #[serde(default, rename = "fixture")]
    pub fixtures: Vec<Entity>,
    /// Movable objects.
    #[serde(default, rename = "object")]
    pub objects: Vec<Entity>,
    /// Named regions: placement rectangles on the table, or sites of a fixture/object.
    #[serde(default, rename = "region")]
    pub regions: Vec<Region>,
    /// Object types defined by this scene in addition to the built-in catalog.
    #[serde(default, rename = "object_type", skip_serializing_if = "Vec::is_empty")]
    pub object_types: Vec<ObjectType>,
}

/// A named instance of an object type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entity {
    /// Instance name, e.g. `moka_pot_1`.
    pub name: String,
    /// Object type, e.g. `moka_pot` (see the catalog).
    #[serde(rename = "type")]
    pub kind: String,
}

/// A BDDL region: either rectangles on the target (a table) or a named site of the
/// target fixture/object. Referred to as `{target}_{name}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Region {
    /// Region name, e.g. `moka_pot_init_region` or `cook_region`.
    pub name: String,
    /// The table, fixture or object the region belongs to.
    pub target: String,
    /// Rectangles `(x_min, y_min, x_max, y_max)` in the table's workspace frame (m).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranges: Vec<[f64; 4]>,
    /// Uniform yaw range `(min, max)` (rad) for what is placed here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub yaw: Option<[f64; 2]>,
}

impl Region {
    /// The name predicates use: `{target}_{name}`.
    pub fn full_name(&self) -> String {
        format!("{}_{}", self.target, self.name)
    }
}

impl Scene {
    /// Parses the project's TOML scene format; errors carry `file`, line and column.
    pub fn from_toml(text: &str, file: &str) -> Result<Scene> {
        let scene: Scene = toml::from_str(text).map_err(|e| SimError::from_toml(file, text, &e))?;
        scene.validate(file)?;
        Ok(scene)
    }

    /// Reads a scene file: BDDL if it ends in `.bddl` or starts with `(define`, TOML otherwise.
    pub fn load(path: &Path) -> Result<Scene> {
        let text = std::fs::read_to_string(path).map_err(|source| SimError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let file = path.display().to_string();
        let is_bddl = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("bddl"))
            || text.trim_start().starts_with("(define");
        if is_bddl {
            let stem = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            parse_bddl(&text, &file, &stem)
        } else {
            Scene::from_toml(&text, &file)
        }
    }

    /// Serialises to the TOML format (round-trips through [`Scene::from_toml`]).
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_default()
    }

    /// The table layout named by the problem class, if known.
    pub fn layout(&self) -> Option<Layout> {
        Layout::from_problem(&self.problem)
    }

    /// All entities, fixtures first.
    pub fn entities(&self) -> impl Iterator<Item = &Entity> {
        self.fixtures.iter().chain(self.objects.iter())
    }

    /// Looks up a region by its full name `{target}_{name}`.
    pub fn region(&self, full_name: &str) -> Option<&Region> {
        self.regions.iter().find(|r| r.full_name() == full_name)
    }

    /// Checks references: region targets and predicate arguments must name entities or regions.
    fn validate(&self, file: &str) -> Result<()> {
        let names: Vec<&str> = self.entities().map(|e| e.name.as_str()).collect();
        let fail = |message: String| SimError::Parse {
            file: file.to_string(),
            line: 0,
            column: 0,
            message,
        };
        for r in &self.regions {
            if !names.contains(&r.target.as_str()) {
                return Err(fail(format!(
                    "region `{}` targets `{}`, expected one of the fixtures or objects: {}",
                    r.name,
                    r.target,
                    names.join(", ")
                )));
            }
            for range in &r.ranges {
                if !(range[0] <= range[2] && range[1] <= range[3]) {
                    return Err(fail(format!(
                        "region `{}`: range {range:?} expected (x_min, y_min, x_max, y_max) with min <= max",
                        r.name
                    )));
                }
            }
        }
        let regions: Vec<String> = self.regions.iter().map(Region::full_name).collect();
        for p in self.init.iter().chain(self.goal.iter()) {
            for arg in p.args() {
                if !names.contains(&arg) && !regions.iter().any(|r| r == arg) {
                    return Err(fail(format!(
                        "predicate `{p}` names `{arg}`, expected a fixture, object or region name"
                    )));
                }
            }
        }
        Ok(())
    }
}
