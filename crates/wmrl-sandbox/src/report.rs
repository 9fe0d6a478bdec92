//! How a run ended: [`Termination`] from the exit status and the wall clock,
//! and which resource limit (if any) the evidence says was hit.
//!
//! The kernel's evidence comes first: the signal (`SIGXCPU`, `SIGXFSZ`) and
//! the counters of the run's cgroup (OOM kills, refused forks). Only where
//! the kernel leaves none (an allocation refused by `RLIMIT_AS`, a full
//! tmpfs) is the program's own last words on stderr read, which a solution
//! could fake; a limit hit scores 0 either way.

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::capture::Captured;
use crate::cgroup::Evidence;
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
    /// The limit the evidence points at (signal, cgroup counters, or else the
    /// last error the program printed: Python's `MemoryError`, `[Errno 27] File
    /// too large`, `[Errno 11]` from `fork`, `Too many open files`, `[Errno 28]`).
    pub limit_hit: Option<LimitKind>,
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
        let limit_hit = infer_limit(termination, evidence, &stderr.text);
        Self {
            termination,
            limit_hit,
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

/// Reads the limit off a signal, the cgroup's counters or the last lines of stderr.
fn infer_limit(termination: Termination, evidence: Evidence, stderr: &str) -> Option<LimitKind> {
    match termination {
        Termination::Signaled { signal } if signal == libc::SIGXCPU => {
            return Some(LimitKind::CpuTime);
        }
        Termination::Signaled { signal } if signal == libc::SIGXFSZ => {
            return Some(LimitKind::FileSize);
        }
        Termination::Exited { code: 0 } | Termination::TimedOut => return None,
        _ if evidence.oom_kills > 0 => return Some(LimitKind::Memory),
        _ if evidence.pids_refused > 0 => return Some(LimitKind::Processes),
        Termination::Exited { .. } => {}
        Termination::Signaled { .. } => return None,
    }
    let tail: String = {
        let lines: Vec<&str> = stderr.lines().rev().take(6).collect();
        lines.join("\n")
    };
    if tail.contains("MemoryError")
        || tail.contains("Cannot allocate memory")
        || tail.contains("std::bad_alloc")
    {
        Some(LimitKind::Memory)
    } else if tail.contains("File too large") || tail.contains("[Errno 27]") {
        Some(LimitKind::FileSize)
    } else if tail.contains("[Errno 11]") || tail.contains("Resource temporarily unavailable") {
        Some(LimitKind::Processes)
    } else if tail.contains("Too many open files") {
        Some(LimitKind::OpenFiles)
    } else if tail.contains("No space left on device") || tail.contains("[Errno 28]") {
        Some(LimitKind::Disk)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_read_off_signals_and_python_errors() {
        let sig = |signal| Termination::Signaled { signal };
        let exit1 = Termination::Exited { code: 1 };
        let none = Evidence::default();
        assert_eq!(
            infer_limit(sig(libc::SIGXCPU), none, ""),
            Some(LimitKind::CpuTime)
        );
        assert_eq!(
            infer_limit(exit1, none, "Traceback...\nMemoryError"),
            Some(LimitKind::Memory)
        );
        assert_eq!(
            infer_limit(exit1, none, "OSError: [Errno 27] File too large"),
            Some(LimitKind::FileSize)
        );
        assert_eq!(
            infer_limit(
                exit1,
                none,
                "BlockingIOError: [Errno 11] Resource temporarily unavailable"
            ),
            Some(LimitKind::Processes)
        );
        assert_eq!(infer_limit(exit1, none, "ValueError: bad"), None);
        assert_eq!(
            infer_limit(Termination::Exited { code: 0 }, none, "MemoryError"),
            None
        );
        assert_eq!(
            infer_limit(Termination::TimedOut, none, "MemoryError"),
            None
        );
        let oom = Evidence {
            oom_kills: 1,
            pids_refused: 0,
        };
        assert_eq!(
            infer_limit(sig(libc::SIGKILL), oom, ""),
            Some(LimitKind::Memory)
        );
        assert_eq!(infer_limit(sig(libc::SIGKILL), none, "MemoryError"), None);
        assert_eq!(
            infer_limit(exit1, none, "OSError: [Errno 28] No space left on device"),
            Some(LimitKind::Disk)
        );
    }
}
