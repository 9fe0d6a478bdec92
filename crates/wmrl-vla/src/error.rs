//! The crate's error type: one enum, named fields that say what was expected.

use std::path::PathBuf;

/// Errors of `wmrl-vla`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A configuration file or value is invalid.
    #[error(transparent)]
    Config(#[from] wmrl_config::Error),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A JSON file could not be parsed.
    #[error("{path}: invalid JSON: {source}")]
    Json {
        /// The file involved.
        path: PathBuf,
        /// The underlying error.
        source: serde_json::Error,
    },
    /// Writing a run artefact (atomic file, metrics, plot) failed.
    #[error(transparent)]
    Report(#[from] wmrl_report::Error),
    /// Device selection failed.
    #[error(transparent)]
    Device(#[from] wmrl_tch::Error),
    /// A libtorch operation failed.
    #[error("{context}: {source}")]
    Torch {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: tch::TchError,
    },
    /// A checkpoint lacks a tensor the model needs.
    #[error("checkpoint {path}: tensor `{name}` is missing (the model expects shape {expected:?})")]
    MissingTensor {
        /// The weights file.
        path: PathBuf,
        /// Tensor name.
        name: String,
        /// Shape the model expects.
        expected: Vec<i64>,
    },
    /// A checkpoint holds a tensor the model does not have.
    #[error(
        "checkpoint {path}: tensor `{name}` (shape {found:?}) does not exist in this model architecture"
    )]
    UnexpectedTensor {
        /// The weights file.
        path: PathBuf,
        /// Tensor name.
        name: String,
        /// Its shape in the file.
        found: Vec<i64>,
    },
    /// A checkpoint tensor has another shape than the model's.
    #[error(
        "checkpoint {path}: tensor `{name}` has shape {found:?} in the file but the model expects {expected:?}"
    )]
    ShapeMismatch {
        /// The weights file.
        path: PathBuf,
        /// Tensor name.
        name: String,
        /// Shape the model expects.
        expected: Vec<i64>,
        /// Shape found in the file.
        found: Vec<i64>,
    },
    /// A checkpoint file is not valid safetensors or has an unsupported dtype.
    #[error("checkpoint {path}: {message}")]
    BadCheckpoint {
        /// The file involved.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A demonstration file is malformed (bad magic, header, sizes or images).
    #[error("demonstration file {path} is corrupt: {reason}")]
    CorruptDemo {
        /// The file.
        path: PathBuf,
        /// What check failed.
        reason: String,
    },
    /// A demonstration file is shorter than its header says.
    #[error("demonstration file {path} is truncated: expected {expected} bytes, found {found}")]
    TruncatedDemo {
        /// The file.
        path: PathBuf,
        /// Length the header implies.
        expected: u64,
        /// Actual length.
        found: u64,
    },
    /// A section of a demonstration file fails its CRC-32 check.
    #[error(
        "demonstration file {path} is corrupt: section `{section}` fails its CRC-32 check (stored {stored:#010x}, computed {computed:#010x})"
    )]
    ChecksumMismatch {
        /// The file.
        path: PathBuf,
        /// The section (`actions`, `proprio`, `agent_view`, `wrist_view`).
        section: String,
        /// Checksum stored in the header.
        stored: u32,
        /// Checksum of the bytes read.
        computed: u32,
    },
    /// A demonstration folder holds no episodes.
    #[error("no demonstrations in {dir}: expected *.demo files (run `wmrl data collect` first)")]
    EmptyDataset {
        /// The folder searched.
        dir: PathBuf,
    },
    /// A task has demonstrations but none of them succeeded.
    #[error(
        "task {task_index} (`{instruction}`) has {episodes} demonstration(s) in {dir} but none succeeded; behaviour cloning needs at least one successful demonstration per task"
    )]
    NoSuccessfulDemo {
        /// The folder.
        dir: PathBuf,
        /// Task index in the suite.
        task_index: usize,
        /// The task's instruction.
        instruction: String,
        /// How many (failed) episodes it has.
        episodes: usize,
    },
    /// Inputs do not match what the model or dataset expects.
    #[error("{what}: expected {expected}, found {found}")]
    Mismatch {
        /// Which field or input.
        what: String,
        /// What was expected.
        expected: String,
        /// What was given.
        found: String,
    },
    /// An executor failed as a whole (not one episode).
    #[error("executor failed: {message}")]
    Executor {
        /// The executor's error.
        message: String,
    },
    /// An output folder already holds a checkpoint that would be overwritten.
    #[error("{dir} already holds a checkpoint; choose another --out folder or delete it first")]
    WouldOverwrite {
        /// The folder.
        dir: PathBuf,
    },
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// Wraps a tch error with what was being done.
    pub fn torch(context: impl Into<String>) -> impl FnOnce(tch::TchError) -> Error {
        let context = context.into();
        move |source| Error::Torch { context, source }
    }

    /// An input mismatch.
    pub fn mismatch(
        what: impl Into<String>,
        expected: impl ToString,
        found: impl ToString,
    ) -> Error {
        Error::Mismatch {
            what: what.into(),
            expected: expected.to_string(),
            found: found.to_string(),
        }
    }
}
