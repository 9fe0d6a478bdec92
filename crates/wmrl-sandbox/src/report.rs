//! How a run ended: [`Termination`] from the exit status and the wall clock,
//! the resource limit (if any) the kernel's evidence shows was hit
//! ([`RunReport::limit_hit`]), and apart from it the limit the program's
//! own stderr names ([`RunReport::limit_claimed`], which a solution could
//! fake). The crate's `evidence` module gathers both.

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::capture::Captured;
use crate::evidence::{self, Evidence};
use crate::{Isolation, Limits};

/// How the process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Termination {
    /// It exited with this status code.
    Exited {
        /// Exit code.
        code: i32,
    },
    /// A signal ended it (not ours).
    Signaled {
        /// Signal number.
        signal: i32,
    },
    /// The wall-clock limit passed and the sandbox killed the whole run.
    TimedOut,
}

impl Termination {
    pub(crate) fn from_status(status: std::process::ExitStatus, timed_out: bool) -> Self {
        if timed_out {
            Termination::TimedOut
        } else if let Some(code) = status.code() {
            Termination::Exited { code }
        } else {
            Termination::Signaled {
                signal: status.signal().unwrap_or(0),
            }
        }
    }
}

/// A resource limit a run ran into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LimitKind {
    /// CPU time (`SIGXCPU`/`RLIMIT_CPU`).
    CpuTime,
    /// Address space (`RLIMIT_AS`: allocation failures).
    Memory,
    /// File size (`RLIMIT_FSIZE`: `EFBIG`/`SIGXFSZ`).
    FileSize,
    /// Process count (`RLIMIT_NPROC`: `fork` failing with `EAGAIN`).
    Processes,
    /// Open files (`RLIMIT_NOFILE`).
    OpenFiles,
    /// Space or inodes of the work folder, `/tmp` or `/dev/shm` (`ENOSPC`).
    Disk,
}

/// Everything known about one run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunReport {
    /// How the process ended.
    pub termination: Termination,
    /// The limit the kernel's evidence shows the run hit: `SIGXCPU`,
    /// `SIGXFSZ`, the cgroup's OOM kills and refused forks, a work folder,
    /// `/tmp` or `/dev/shm` with no space or inode left, a file at the size
    /// limit. Never read off the program's output.
    pub limit_hit: Option<LimitKind>,
    /// Where [`Self::limit_hit`] is `None` and the program failed: the limit
    /// its last lines on stderr name (Python's `MemoryError` when `RLIMIT_AS`
    /// refused an allocation, `[Errno 11]` when `RLIMIT_NPROC` refused a
    /// fork, `Too many open files`). The program's claim, not evidence: a
    /// solution can print anything.
    #[serde(default)]
    pub limit_claimed: Option<LimitKind>,
    /// Wall-clock duration.
    pub wall_time: Duration,
    /// Standard output.
    pub stdout: Captured,
    /// Standard error.
    pub stderr: Captured,
    /// Files read back (name → bytes), as asked for by the job; absent when missing.
    pub files: BTreeMap<String, Vec<u8>>,
    /// The isolation the run had.
    pub isolation: Isolation,
    /// The uid the run had (root mode), whose leftover processes were killed.
    pub uid: Option<u32>,
    /// The limits the run had.
    pub limits: Limits,
}

impl RunReport {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        termination: Termination,
        wall_time: Duration,
        stdout: Captured,
        stderr: Captured,
        files: BTreeMap<String, Vec<u8>>,
        isolation: Isolation,
        uid: Option<u32>,
        limits: &Limits,
        evidence: Evidence,
    ) -> Self {
        let limit_hit = evidence::limit_hit(termination, evidence);
        let limit_claimed = match limit_hit {
            None => evidence::limit_claimed(termination, &stderr.text),
            Some(_) => None,
        };
        Self {
            termination,
            limit_hit,
            limit_claimed,
            wall_time,
            stdout,
            stderr,
            files,
            isolation,
            uid,
            limits: limits.clone(),
        }
    }

    /// Whether the program exited with status 0 in time.
    pub fn succeeded(&self) -> bool {
        self.termination == Termination::Exited { code: 0 }
    }
}
