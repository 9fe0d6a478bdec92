//! The crate's error type: every failure names the file, field or value involved
//! and what was expected.

use std::path::PathBuf;

/// Errors of the simulator crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A scene, BDDL, robot or state file did not parse.
    #[error("{file}:{line}:{column}: {message}")]
    Parse {
        /// The file (or `<string>` when parsed from memory).
        file: String,
        /// 1-based line of the problem (0 when unknown).
        line: usize,
        /// 1-based column of the problem (0 when unknown).
        column: usize,
        /// What was found and what was expected.
        message: String,
    },
    /// A URDF file could not be loaded.
    #[error("{file}: invalid URDF: {message}")]
    Urdf {
        /// The URDF file.
        file: String,
        /// What the parser reported or what was missing.
        message: String,
    },
    /// A scene refers to an object type the simulator does not model.
    #[error("unknown object type `{kind}` for `{name}`; known types: {known}")]
    UnknownObjectType {
        /// The entity's name.
        name: String,
        /// The unknown type.
        kind: String,
        /// Comma-separated list of known types.
        known: String,
    },
    /// A scene is well-formed but cannot be simulated (dangling reference, bad value).
    #[error("scene `{scene}`: {message}")]
    InvalidScene {
        /// The scene's name.
        scene: String,
        /// What is wrong and what was expected.
        message: String,
    },
    /// A task index outside the registry.
    #[error("task index {index} out of range (expected 0..{count})")]
    UnknownTask {
        /// The requested index.
        index: usize,
        /// Number of tasks.
        count: usize,
    },
    /// An initial-state index outside the fixed set.
    #[error("initial state {index} out of range (expected 0..{count})")]
    UnknownInitialState {
        /// The requested index.
        index: usize,
        /// Number of initial states.
        count: usize,
    },
    /// A saved state does not match the scene it is restored into.
    #[error("state does not fit task `{task}`: {message}")]
    StateMismatch {
        /// The task's name.
        task: String,
        /// What differs.
        message: String,
    },
    /// Initial-state generation could not place the objects without collisions.
    #[error(
        "task `{task}`: could not place `{object}` without collision after {attempts} attempts"
    )]
    Placement {
        /// The task's name.
        task: String,
        /// The object that did not fit.
        object: String,
        /// How many samples were rejected.
        attempts: usize,
    },
    /// An image could not be encoded.
    #[error("{path}: cannot encode image: {message}")]
    Image {
        /// The output file.
        path: PathBuf,
        /// The encoder's message.
        message: String,
    },
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, SimError>;

impl SimError {
    /// A parse error from a `toml` deserialisation failure, with line and column.
    pub(crate) fn from_toml(file: &str, text: &str, err: &toml::de::Error) -> Self {
        let (line, column) = err
            .span()
            .map(|span| line_col(text, span.start))
            .unwrap_or((0, 0));
        SimError::Parse {
            file: file.to_string(),
            line,
            column,
            message: err.message().trim().to_string(),
        }
    }
}

/// 1-based (line, column) of a byte offset in `text`.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.rfind('\n').map_or(offset, |nl| offset - nl - 1) + 1;
    (line, column)
}
