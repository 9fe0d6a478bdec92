//! Goal and initial-state predicates (BDDL's `On`, `In`, `Open`, `Close`,
//! `TurnOn`, `TurnOff`), written in TOML as strings such as `"On moka_pot_1 flat_stove_1_cook_region"`.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A predicate over scene entities and regions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Predicate {
    /// `a` rests on object `b`, or on region `b`.
    On(String, String),
    /// `a` is inside region `b`.
    In(String, String),
    /// The articulation of a fixture (or of the link owning a region) is open.
    Open(String),
    /// ... is closed.
    Close(String),
    /// A knob-like articulation is on.
    TurnOn(String),
    /// ... is off.
    TurnOff(String),
    /// A predicate the simulator does not evaluate (other LIBERO suites); parsed and reported.
    Other {
        /// The predicate's name as written.
        name: String,
        /// Its arguments.
        args: Vec<String>,
    },
}

impl Predicate {
    /// Builds a predicate from a name (case-insensitive) and arguments.
    pub fn new(name: &str, args: Vec<String>) -> Result<Predicate, String> {
        let lower = name.to_ascii_lowercase();
        let want = |n: usize| -> Result<(), String> {
            if args.len() == n {
                Ok(())
            } else {
                Err(format!(
                    "predicate `{name}` expects {n} argument(s), found {}",
                    args.len()
                ))
            }
        };
        Ok(match lower.as_str() {
            "on" | "in" => {
                want(2)?;
                let mut it = args.into_iter();
                let (a, b) = (it.next().unwrap_or_default(), it.next().unwrap_or_default());
                if lower == "on" {
                    Predicate::On(a, b)
                } else {
                    Predicate::In(a, b)
                }
            }
            "open" | "close" | "turnon" | "turnoff" => {
                want(1)?;
                let x = args.into_iter().next().unwrap_or_default();
                match lower.as_str() {
                    "open" => Predicate::Open(x),
                    "close" => Predicate::Close(x),
                    "turnon" => Predicate::TurnOn(x),
                    _ => Predicate::TurnOff(x),
                }
            }
            _ => Predicate::Other {
                name: name.to_string(),
                args,
            },
        })
    }

    /// The predicate's arguments.
    pub fn args(&self) -> Vec<&str> {
        match self {
            Predicate::On(a, b) | Predicate::In(a, b) => vec![a, b],
            Predicate::Open(x)
            | Predicate::Close(x)
            | Predicate::TurnOn(x)
            | Predicate::TurnOff(x) => vec![x],
            Predicate::Other { args, .. } => args.iter().map(String::as_str).collect(),
        }
    }

    /// The canonical name (`On`, `In`, `Open`, `Close`, `TurnOn`, `TurnOff`).
    pub fn name(&self) -> &str {
        match self {
            Predicate::On(..) => "On",
            Predicate::In(..) => "In",
            Predicate::Open(_) => "Open",
            Predicate::Close(_) => "Close",
            Predicate::TurnOn(_) => "TurnOn",
            Predicate::TurnOff(_) => "TurnOff",
            Predicate::Other { name, .. } => name,
        }
    }
}

impl fmt::Display for Predicate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.name())?;
        for a in self.args() {
            write!(f, " {a}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for Predicate {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim().trim_start_matches('(').trim_end_matches(')');
        let mut words = s.split_whitespace();
        let name = words
            .next()
            .ok_or_else(|| "empty predicate, expected e.g. \"On a b\"".to_string())?;
        Predicate::new(name, words.map(str::to_string).collect())
    }
}

impl Serialize for Predicate {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Predicate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}
