//! `--set KEY=VALUE` overrides on a parsed table.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{Error, ParseError, Result};

/// Applies one `a.b.c=value` override to a parsed TOML table. The value is
/// parsed as TOML (`3`, `true`, `"token"`, `[1, 2]`), else taken as a bare
/// string; missing tables on the path are created, so a wrong key is caught
/// when the table is deserialised.
pub fn apply_override(table: &mut toml::Table, assignment: &str) -> Result<()> {
    let bad = |message: &str| Error::Override {
        assignment: assignment.to_string(),
        message: message.to_string(),
    };
    let (key, raw) = assignment
        .split_once('=')
        .ok_or_else(|| bad("expected KEY=VALUE"))?;
    let value: toml::Value = toml::from_str::<toml::Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_string()));
    let parts: Vec<&str> = key.trim().split('.').collect();
    let (last, parents) = parts.split_last().ok_or_else(|| bad("empty key"))?;
    if parts.iter().any(|p| p.is_empty()) {
        return Err(bad("empty key"));
    }
    let mut current = table;
    for part in parents {
        current = current
            .entry(part.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()))
            .as_table_mut()
            .ok_or_else(|| bad(&format!("`{part}` is not a table")))?;
    }
    current.insert(last.to_string(), value);
    Ok(())
}

/// `base` with the overrides applied, checked as strictly as a file: the
/// way to override a config that has no file, only defaults in code.
pub fn with_overrides<T: Serialize + DeserializeOwned>(
    base: &T,
    overrides: &[String],
) -> Result<T> {
    let origin = || format!("--set {}", overrides.join(" --set "));
    let mut table = toml::Table::try_from(base).map_err(|e| Error::Parse {
        origin: origin(),
        source: ParseError::TomlValue(e),
    })?;
    for set in overrides {
        apply_override(&mut table, set)?;
    }
    table.try_into().map_err(|e: toml::de::Error| Error::Parse {
        origin: origin(),
        source: e.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_toml_else_strings_and_paths_create_tables() {
        let mut t = toml::Table::new();
        apply_override(&mut t, "a.b=3").unwrap();
        apply_override(&mut t, "a.c=word").unwrap();
        apply_override(&mut t, "d=\"token\"").unwrap();
        assert_eq!(t["a"]["b"].as_integer(), Some(3));
        assert_eq!(t["a"]["c"].as_str(), Some("word"));
        assert_eq!(t["d"].as_str(), Some("token"));
        let err = apply_override(&mut t, "a.b.c=1").unwrap_err().to_string();
        assert!(err.contains("`b` is not a table"), "{err}");
        assert!(apply_override(&mut t, "novalue").is_err());
        assert!(apply_override(&mut t, "a..b=1").is_err());
    }

    #[test]
    fn overrides_of_defaults_are_checked_strictly() {
        #[derive(Debug, PartialEq, Serialize, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct C {
            steps: u32,
        }
        let c = with_overrides(&C { steps: 1 }, &["steps=4".into()]).unwrap();
        assert_eq!(c, C { steps: 4 });
        let err = with_overrides(&C { steps: 1 }, &["stepz=4".into()]).unwrap_err();
        let text = crate::chain(&err);
        assert!(
            text.contains("--set stepz=4") && text.contains("stepz"),
            "{text}"
        );
        assert!(std::error::Error::source(&err).is_some());
    }
}
