//! Runs untrusted programs (AutoResearch solutions) each in a fresh folder,
//! isolated from the host, under resource limits and a wall clock.
//!
//! - [`Sandbox`]: the runner (bounded concurrency, per-run jail, kill of
//!   everything a run left behind); [`SandboxConfig`] and [`Limits`] set it up.
//! - [`isolation`]: what this machine allows (root / user namespace / bare) and
//!   the jail plan of a run; `jail` and `jail_fs`:
//!   the child's set-up between `fork` and `exec`; `seccomp`:
//!   its system-call filter.
//! - [`cgroup`]: a cgroup per run (memory, processes, CPU of the run as a
//!   whole); [`uids`]: the per-run uids of root mode and their sweep.
//! - [`RunReport`]: how a run ended ([`Termination`], [`LimitKind`]), its
//!   captured output ([`Captured`]) and the files it produced; `evidence`:
//!   the limit hit, read off the kernel's counters and the run's folders,
//!   never off the program's output.
//!
//! Nothing here knows about tasks or scores: `wmrl-research` validates and
//! scores what a run leaves behind.

pub mod capture;
pub mod cgroup;
mod evidence;
mod files;
pub mod isolation;
mod jail;
mod jail_fs;
pub mod limits;
pub mod report;
mod run;
pub mod sandbox;
mod seccomp;
pub mod uids;

pub use capture::{Captured, printable};
pub use cgroup::CgroupSupport;
pub use isolation::Isolation;
pub use limits::Limits;
pub use report::{LimitKind, RunReport, Termination};
pub use sandbox::{Job, JobFile, Sandbox, SandboxConfig};

use std::path::PathBuf;

/// Errors of this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file or folder of the sandbox's own could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The program to run does not exist.
    #[error("sandbox program {program} does not exist or is not a file")]
    MissingProgram {
        /// The configured program.
        program: PathBuf,
    },
    /// A path that cannot be used (NUL byte, or a job file name with `/`).
    #[error(
        "unusable path `{path}`: expected a plain file name or an absolute path without NUL bytes"
    )]
    BadPath {
        /// The path.
        path: PathBuf,
    },
    /// The program could not be started (including a failed jail set-up).
    #[error("cannot start {program}: {source}")]
    Spawn {
        /// What was started.
        program: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A folder the sandbox relies on is not safe to use.
    #[error("{path} is not safe to use: expected {expected}")]
    UnsafeFolder {
        /// The folder.
        path: PathBuf,
        /// What it should be.
        expected: &'static str,
    },
    /// The start-up probe of an isolation mode failed.
    #[error("isolation probe failed: {detail}")]
    ProbeFailed {
        /// What happened.
        detail: String,
    },
    /// Isolation was required but this machine allows none.
    #[error(
        "sandbox isolation is required but unavailable here: {reason} (run as root, enable user \
         namespaces, or opt out explicitly with require_isolation = false / --allow-unisolated)"
    )]
    NoIsolation {
        /// Why each mode failed.
        reason: String,
    },
    /// The sandbox is shutting down.
    #[error("the sandbox is closed")]
    Closed,
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;
