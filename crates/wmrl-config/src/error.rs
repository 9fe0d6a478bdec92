//! The one config error type every crate wraps.

use std::path::PathBuf;

/// The result of loading or checking a config.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What is wrong with a config, and where.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The text is not valid TOML or JSON5, or does not have the expected
    /// fields and types.
    #[error("config {origin}")]
    Parse {
        /// The file, shipped name or `--set` it came from.
        origin: String,
        /// The parser's error.
        #[source]
        source: ParseError,
    },
    /// A `--set` override is not `KEY=VALUE` or names a path through a value
    /// that is not a table.
    #[error("--set {assignment}: {message}")]
    Override {
        /// The override as given.
        assignment: String,
        /// What is wrong.
        message: String,
    },
    /// Neither a file nor a shipped config of that name.
    #[error("config `{name}`: no such file, and not a shipped config name ({known})")]
    NotFound {
        /// The name or path given.
        name: String,
        /// The shipped names, comma-separated.
        known: String,
    },
    /// The file could not be read.
    #[error("reading config {}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A value parsed but is out of its range or inconsistent with another.
    #[error("config {origin}: {message}")]
    Invalid {
        /// Where: the file, and the field.
        origin: String,
        /// What is wrong and what was expected.
        message: String,
    },
}

impl Error {
    /// A value out of range: `origin` names the file or field, `message`
    /// what was expected.
    pub fn invalid(origin: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid {
            origin: origin.into(),
            message: message.into(),
        }
    }
}

/// The parser behind an [`Error::Parse`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    /// TOML syntax, or fields and types.
    #[error(transparent)]
    Toml(#[from] toml::de::Error),
    /// JSON5 syntax.
    #[error(transparent)]
    Json5(#[from] json5::Error),
    /// JSON fields and types (a resolved config, or JSON5 turned to a table).
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// A table that TOML cannot hold (from JSON5: a null, say).
    #[error(transparent)]
    TomlValue(#[from] toml::ser::Error),
}

/// `err` and its sources, joined with `: ` (what `anyhow`'s `{:#}` prints).
pub fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut next = err.source();
    while let Some(cause) = next {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        next = cause.source();
    }
    text
}
