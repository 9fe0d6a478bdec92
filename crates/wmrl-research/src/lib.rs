//! AutoResearch: code-writing agents on machine-learning tasks, post-trained
//! through the same WMRL core as the robot policies.
//!
//! - [`task`], [`metric`], [`leaderboard`], [`submission`]: the task format,
//!   metrics with their directions, leaderboard percentiles (the reward), and
//!   validation and scoring of submissions against hidden answers.
//! - [`suite`]: the shipped task suite, generated offline from scikit-learn's
//!   bundled data sets, with leaderboards from graded reference solutions.
//! - [`plan`]: solution plans and their rendering into Python scripts.
//! - [`executor`]: the anchor executor: runs a solution in the sandbox
//!   (`wmrl-sandbox`), validates and scores its submission, caches results by
//!   solution-text hash.
//! - [`adapter`]: the core's seams for this domain (adapter, sandbox anchor
//!   executor, text world model over a [`adapter::TextScorer`]).
//! - [`recall`]: the world model's memory: solutions already executed are
//!   answered with their real reward, new ones by the learned scorer.
//! - [`openai`]: an OpenAI-compatible chat client with retries; [`judge`]:
//!   the LLM judge world model; [`sampler`]: an LLM as policy, exporting
//!   GRPO batches as JSONL.
//! - [`train`]: the trainer (plan policy × text world model × sandbox) in
//!   every core mode.
//! - [`textmodel`] (tch): the learned text world model; [`policy`] (tch): the
//!   in-process plan policy trained by GRPO.

pub mod adapter;
pub mod executor;
pub mod judge;
pub mod leaderboard;
pub mod metric;
pub mod openai;
pub mod plan;
pub mod policy;
pub mod python;
pub mod recall;
pub mod sampler;
pub mod submission;
pub mod suite;
pub mod task;
pub mod textmodel;
pub mod train;

pub use executor::{ExecutionCache, Outcome, SolutionRunner};
pub use leaderboard::Leaderboard;
pub use metric::{Direction, Metric};
pub use plan::Plan;
pub use task::Task;

use std::path::{Path, PathBuf};

/// Errors of this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A task folder lacks a required file.
    #[error("task {task}: missing {file}")]
    MissingFile {
        /// The task folder.
        task: PathBuf,
        /// The file, relative to the task folder.
        file: String,
    },
    /// A file is malformed.
    #[error("{path}{}: {message}", if *line > 0 { format!(":{line}") } else { String::new() })]
    BadFile {
        /// The file.
        path: PathBuf,
        /// 1-based line, 0 when unknown.
        line: usize,
        /// What is wrong and what was expected.
        message: String,
    },
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The sandbox failed (not the solution: the machinery); the cause is the source.
    #[error("sandbox")]
    Sandbox(#[from] wmrl_sandbox::Error),
    /// Writing a run artefact failed.
    #[error(transparent)]
    Report(#[from] wmrl_report::Error),
    /// The task generator or a reference solution failed.
    #[error("building {what}: {message}")]
    Build {
        /// What was being built.
        what: String,
        /// What went wrong.
        message: String,
    },
    /// An HTTP endpoint kept failing.
    #[error("endpoint {url} failed after {attempts} attempts: {message}")]
    Endpoint {
        /// The URL.
        url: String,
        /// Attempts made.
        attempts: u32,
        /// The last error.
        message: String,
    },
    /// An unknown suite name.
    #[error("unknown task suite `{name}`; expected one of {known}")]
    UnknownSuite {
        /// The name given.
        name: String,
        /// The known names.
        known: String,
    },
}

impl Error {
    pub(crate) fn csv(path: &Path, err: csv::Error) -> Self {
        let line = err.position().map_or(0, |p| p.line() as usize);
        Error::BadFile {
            path: path.to_path_buf(),
            line,
            message: err.to_string(),
        }
    }
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Lower-case hex of bytes.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
