//! A BDDL writer, the inverse of [`parse_bddl`](super::parse_bddl): it turns a
//! [`Scene`] into a LIBERO `(define (problem ...))` file laid out like LIBERO's
//! own, so that parsing the output gives back the same scene (tested for every
//! shipped scene). Used by `wmrl scene export --format bddl`.

use std::fmt::Write;

use super::{Entity, Region, Scene, TABLE_TYPES};

/// Why a scene cannot be written as BDDL without changing it.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// A name, type or instruction would not read back unchanged.
    #[error("scene `{scene}`: {field} `{value}` cannot be written as BDDL, expected {expected}")]
    Unwritable {
        /// The scene's name.
        scene: String,
        /// Which field, e.g. `object name` or `language`.
        field: String,
        /// The offending value.
        value: String,
        /// What would read back.
        expected: &'static str,
    },
    /// The scene defines object types of its own, which BDDL has no place for.
    #[error(
        "scene `{scene}`: defines object type(s) {names} inline; BDDL cannot carry them, \
         expected only types of the built-in catalog (scenes/objects.toml)"
    )]
    InlineObjectTypes {
        /// The scene's name.
        scene: String,
        /// Comma-separated names of the inline types.
        names: String,
    },
}

const ATOM: &str = "a non-empty word without whitespace, `(`, `)` or `;`";

impl Scene {
    /// Writes the scene as a LIBERO BDDL problem. The scene's name is not part of
    /// BDDL: [`Scene::load`] takes it from the file stem, so save it as `{name}.bddl`.
    pub fn to_bddl(&self) -> Result<String, ExportError> {
        self.check_writable()?;
        let mut out = String::new();
        // `fmt::Write` for `String` cannot fail, hence the ignored results below.
        let w = &mut out;
        let _ = writeln!(w, "; {}: written by `wmrl scene export`", self.name);
        let _ = writeln!(w, "(define (problem {})", self.problem);
        let _ = writeln!(w, "  (:domain robosuite)");
        let _ = writeln!(w, "  (:language {})", self.language);
        let _ = writeln!(w, "  (:regions");
        for r in &self.regions {
            write_region(w, r);
        }
        let _ = writeln!(w, "  )\n");
        write_entities(w, ":fixtures", &self.fixtures);
        write_entities(w, ":objects", &self.objects);
        // LIBERO's loader reads the objects of interest; the simulator does not.
        let _ = writeln!(w, "  (:obj_of_interest");
        for name in self.goal_entities() {
            let _ = writeln!(w, "    {name}");
        }
        let _ = writeln!(w, "  )\n");
        let _ = writeln!(w, "  (:init");
        for p in &self.init {
            let _ = writeln!(w, "    ({p})");
        }
        let _ = writeln!(w, "  )\n");
        let goal: Vec<String> = self.goal.iter().map(|p| format!("({p})")).collect();
        let _ = writeln!(w, "  (:goal\n    (And {})\n  )\n)", goal.join(" "));
        Ok(out)
    }

    /// What the goal is about, in order of first mention: the entities it names
    /// and the owners of the regions it names, tables left out (as LIBERO does).
    fn goal_entities(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for arg in self.goal.iter().flat_map(|p| p.args()) {
            let owner = self.region(arg).map_or(arg, |r| r.target.as_str());
            let entity = self.entities().find(|e| e.name == owner);
            if entity.is_some_and(|e| !TABLE_TYPES.contains(&e.kind.as_str()))
                && !names.contains(&owner)
            {
                names.push(owner);
            }
        }
        names
    }

    /// Fails on anything the BDDL reader would not give back unchanged.
    fn check_writable(&self) -> Result<(), ExportError> {
        if !self.object_types.is_empty() {
            let names: Vec<&str> = self.object_types.iter().map(|t| t.name.as_str()).collect();
            return Err(ExportError::InlineObjectTypes {
                scene: self.name.clone(),
                names: names.join(", "),
            });
        }
        let fail = |field: &str, value: &str, expected| ExportError::Unwritable {
            scene: self.name.clone(),
            field: field.to_string(),
            value: value.to_string(),
            expected,
        };
        let words: Vec<&str> = self.language.split_whitespace().collect();
        if words.join(" ") != self.language || words.iter().any(|w| !is_atom(w)) {
            return Err(fail(
                "language",
                &self.language,
                "words separated by single spaces, without `(`, `)` or `;`",
            ));
        }
        let mut atoms: Vec<(&str, &str)> = vec![("problem", self.problem.as_str())];
        for e in &self.fixtures {
            atoms.extend([
                ("fixture name", e.name.as_str()),
                ("fixture type", e.kind.as_str()),
            ]);
        }
        for e in &self.objects {
            atoms.extend([
                ("object name", e.name.as_str()),
                ("object type", e.kind.as_str()),
            ]);
        }
        for r in &self.regions {
            atoms.extend([
                ("region name", r.name.as_str()),
                ("region target", r.target.as_str()),
            ]);
            let mut numbers = r.ranges.iter().flatten().chain(r.yaw.iter().flatten());
            if let Some(x) = numbers.find(|x| !x.is_finite()) {
                return Err(fail("region number", &x.to_string(), "a finite number"));
            }
        }
        for p in self.init.iter().chain(&self.goal) {
            atoms.push(("predicate name", p.name()));
            atoms.extend(p.args().into_iter().map(|a| ("predicate argument", a)));
        }
        match atoms.into_iter().find(|(_, v)| !is_atom(v)) {
            Some((field, value)) => Err(fail(field, value, ATOM)),
            None => Ok(()),
        }
    }
}

/// Whether `s` reads back as one atom (`-` separates names from types, so it is no name).
fn is_atom(s: &str) -> bool {
    !s.is_empty()
        && s != "-"
        && !s
            .chars()
            .any(|c| c.is_whitespace() || matches!(c, '(' | ')' | ';'))
}

fn write_region(w: &mut String, r: &Region) {
    let _ = writeln!(w, "    ({}\n        (:target {})", r.name, r.target);
    if !r.ranges.is_empty() {
        let _ = writeln!(w, "        (:ranges (");
        for [a, b, c, d] in &r.ranges {
            // `{:?}` prints the shortest text that parses back to the same f64.
            let _ = writeln!(w, "            ({a:?} {b:?} {c:?} {d:?})");
        }
        let _ = writeln!(w, "          )\n        )");
    }
    if let Some([lo, hi]) = r.yaw {
        let _ = writeln!(
            w,
            "        (:yaw_rotation (\n            ({lo:?} {hi:?})\n          )\n        )"
        );
    }
    let _ = writeln!(w, "    )");
}

fn write_entities(w: &mut String, section: &str, entities: &[Entity]) {
    let _ = writeln!(w, "  ({section}");
    for e in entities {
        let _ = writeln!(w, "    {} - {}", e.name, e.kind);
    }
    let _ = writeln!(w, "  )\n");
}
