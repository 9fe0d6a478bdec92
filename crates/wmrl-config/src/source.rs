//! Where a config's text comes from, and parsing it into a typed config.

use std::path::Path;

use serde::de::DeserializeOwned;

use crate::{Error, ParseError, Result, apply_override};

/// The syntax of a config's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// TOML (shipped configs, `.toml` files).
    Toml,
    /// JSON5 (`.json` and `.json5` files).
    Json5,
}

/// A config's text and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// The text.
    pub text: String,
    /// Where it came from, for errors: "`demo` (shipped)" or the path.
    pub origin: String,
    /// Its syntax.
    pub format: Format,
}

impl Source {
    /// A shipped config of `name`, or else the file at `name`.
    /// `shipped` lists `(name, text)`. A folder whose name is a shipped
    /// config's (the demo's `runs/demo`, say) does not hide that config.
    pub fn find(name: &str, shipped: &[(&str, &str)]) -> Result<Self> {
        let path = Path::new(name);
        if !path.is_file()
            && let Some((_, text)) = shipped.iter().find(|(n, _)| *n == name)
        {
            return Ok(Self::text(text, format!("`{name}` (shipped)")));
        }
        Self::file(path).map_err(|err| match err {
            Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                Error::NotFound {
                    name: name.into(),
                    known: shipped
                        .iter()
                        .map(|(n, _)| *n)
                        .collect::<Vec<_>>()
                        .join(", "),
                }
            }
            other => other,
        })
    }

    /// The file at `path`: JSON5 if it ends in `.json` or `.json5`, else TOML.
    pub fn file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: path.into(),
            source,
        })?;
        let json = path
            .extension()
            .is_some_and(|e| e == "json" || e == "json5");
        Ok(Self {
            text,
            origin: path.display().to_string(),
            format: if json { Format::Json5 } else { Format::Toml },
        })
    }

    /// TOML text from `origin`.
    pub fn text(text: &str, origin: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            origin: origin.into(),
            format: Format::Toml,
        }
    }

    /// The text as a table, before overrides.
    pub fn table(&self) -> Result<toml::Table> {
        let parse = |source: ParseError| Error::Parse {
            origin: self.origin.clone(),
            source,
        };
        match self.format {
            Format::Toml => toml::from_str(&self.text).map_err(|e| parse(e.into())),
            Format::Json5 => {
                let value: serde_json::Value =
                    json5::from_str(&self.text).map_err(|e| parse(e.into()))?;
                toml::Table::try_from(value).map_err(|e| parse(e.into()))
            }
        }
    }
}

/// Parses `source` with `overrides` applied into `T` (strictly, if `T`
/// denies unknown fields). Range checks are `T`'s own, after this.
pub fn parse<T: DeserializeOwned>(source: &Source, overrides: &[String]) -> Result<T> {
    let mut table = source.table()?;
    for set in overrides {
        apply_override(&mut table, set)?;
    }
    table.try_into().map_err(|e: toml::de::Error| Error::Parse {
        origin: source.origin.clone(),
        source: e.into(),
    })
}

/// [`Source::find`] then [`parse`].
pub fn load<T: DeserializeOwned>(
    name: &str,
    shipped: &[(&str, &str)],
    overrides: &[String],
) -> Result<T> {
    parse(&Source::find(name, shipped)?, overrides)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct C {
        steps: u32,
        #[serde(default)]
        name: String,
    }

    const SHIPPED: &[(&str, &str)] = &[("short", "steps = 3"), ("long", "steps = 300")];

    #[test]
    fn shipped_names_files_and_json5_load() {
        assert_eq!(load::<C>("long", SHIPPED, &[]).unwrap().steps, 300);
        let dir = tempfile::tempdir().unwrap();
        let toml_file = dir.path().join("c.toml");
        std::fs::write(&toml_file, "steps = 7\nname = \"x\"\n").unwrap();
        let c: C = load(toml_file.to_str().unwrap(), SHIPPED, &[]).unwrap();
        assert_eq!((c.steps, c.name.as_str()), (7, "x"));
        let json_file = dir.path().join("c.json5");
        std::fs::write(&json_file, "{ steps: 9, // a comment\n }").unwrap();
        let c: C = load(json_file.to_str().unwrap(), SHIPPED, &["name=y".into()]).unwrap();
        assert_eq!((c.steps, c.name.as_str()), (9, "y"));
    }

    #[test]
    fn errors_name_the_origin_and_keep_the_cause() {
        let err = load::<C>("nothing-here", SHIPPED, &[]).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("nothing-here") && text.contains("short, long"),
            "{text}"
        );

        let err = load::<C>("short", SHIPPED, &["stepz=1".into()]).unwrap_err();
        assert!(matches!(err, Error::Parse { .. }));
        let text = crate::chain(&err);
        assert!(text.starts_with("config `short` (shipped): "), "{text}");
        assert!(text.contains("stepz"), "{text}");

        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("bad.toml");
        std::fs::write(&bad, "steps = \n").unwrap();
        let err = load::<C>(bad.to_str().unwrap(), SHIPPED, &[]).unwrap_err();
        let text = crate::chain(&err);
        assert!(
            text.contains("bad.toml") && text.contains("line 1"),
            "{text}"
        );
    }
}
