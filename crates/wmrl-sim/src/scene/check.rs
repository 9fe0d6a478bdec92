//! `wmrl scene check`: parse a scene (TOML or BDDL) and report what it holds,
//! with warnings for object types the simulator does not model yet.

use std::path::Path;

use serde::Serialize;

use super::{Catalog, Scene};
use crate::error::Result;

/// What a scene file holds, for people (`Display`) and machines (`Serialize`).
#[derive(Debug, Clone, Serialize)]
pub struct SceneReport {
    /// The file checked.
    pub file: String,
    /// `toml` or `bddl`.
    pub format: String,
    /// Scene name.
    pub name: String,
    /// BDDL problem class.
    pub problem: String,
    /// Table layout, when modelled.
    pub layout: Option<String>,
    /// Instruction.
    pub language: String,
    /// `name: type` of each fixture.
    pub fixtures: Vec<String>,
    /// `name: type` of each object.
    pub objects: Vec<String>,
    /// Full region names.
    pub regions: Vec<String>,
    /// Initial predicates.
    pub init: Vec<String>,
    /// Goal predicates.
    pub goal: Vec<String>,
    /// Types the simulator does not model, and other things it cannot simulate.
    pub warnings: Vec<String>,
    /// Whether the simulator can run this scene as is.
    pub simulable: bool,
}

/// Parses `path` and builds its report; `Err` only when the file does not parse.
pub fn check_file(path: &Path) -> Result<SceneReport> {
    let scene = Scene::load(path)?;
    let format = if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("bddl"))
    {
        "bddl"
    } else {
        "toml"
    };
    Ok(report(&scene, &path.display().to_string(), format))
}

fn report(scene: &Scene, file: &str, format: &str) -> SceneReport {
    let mut catalog = Catalog::builtin();
    catalog.extend(scene.object_types.iter().cloned());
    let mut warnings = Vec::new();
    let mut unknown: Vec<&str> = Vec::new();
    for e in scene.entities() {
        if !catalog.knows(&e.kind) && !unknown.contains(&e.kind.as_str()) {
            unknown.push(&e.kind);
        }
    }
    if !unknown.is_empty() {
        warnings.push(format!(
            "object type(s) not modelled yet: {}; known types: {}",
            unknown.join(", "),
            catalog.known_names().join(", ")
        ));
    }
    if scene.layout().is_none() {
        warnings.push(format!(
            "problem class `{}` has no table layout (known: kitchen, living_room, study)",
            scene.problem
        ));
    }
    for p in scene.init.iter().chain(scene.goal.iter()) {
        if let super::Predicate::Other { name, .. } = p {
            warnings.push(format!("predicate `{name}` is parsed but not evaluated"));
        }
    }
    let named = |v: &[super::Entity]| {
        v.iter()
            .map(|e| format!("{}: {}", e.name, e.kind))
            .collect()
    };
    SceneReport {
        file: file.to_string(),
        format: format.to_string(),
        name: scene.name.clone(),
        problem: scene.problem.clone(),
        layout: scene.layout().map(|l| format!("{l:?}")),
        language: scene.language.clone(),
        fixtures: named(&scene.fixtures),
        objects: named(&scene.objects),
        regions: scene.regions.iter().map(super::Region::full_name).collect(),
        init: scene.init.iter().map(ToString::to_string).collect(),
        goal: scene.goal.iter().map(ToString::to_string).collect(),
        simulable: warnings.is_empty(),
        warnings,
    }
}

impl std::fmt::Display for SceneReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "{} ({}): {}", self.file, self.format, self.name)?;
        writeln!(
            f,
            "  problem:  {} (layout {})",
            self.problem,
            self.layout.as_deref().unwrap_or("unknown")
        )?;
        writeln!(f, "  language: {}", self.language)?;
        writeln!(f, "  fixtures: {}", self.fixtures.join(", "))?;
        writeln!(f, "  objects:  {}", self.objects.join(", "))?;
        writeln!(f, "  regions:  {}", self.regions.join(", "))?;
        writeln!(f, "  init:     {}", self.init.join("; "))?;
        writeln!(f, "  goal:     {}", self.goal.join("; "))?;
        for w in &self.warnings {
            writeln!(f, "  warning:  {w}")?;
        }
        Ok(())
    }
}
