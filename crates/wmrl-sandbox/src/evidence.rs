//! Which limit a run ran into, from what the kernel shows, never from what
//! the program says.
//!
//! [`Evidence`] gathers the kernel's side of a run: the counters of its
//! cgroups (OOM kills, refused forks) and the state of its tmpfs folders
//! after the run (the work folder, `/tmp` and `/dev/shm`, whose descriptors
//! the jail sent back): a folder with no space or no inode left, a file that
//! reached `RLIMIT_FSIZE`. [`limit_hit`] reads a limit off the signal and
//! this evidence only.
//!
//! What the program printed (`MemoryError`, `[Errno 27] File too large`, …)
//! can be faked by a solution, so it never decides [`limit_hit`]: where the
//! kernel left no evidence (an allocation refused by `RLIMIT_AS`, a fork
//! refused by `RLIMIT_NPROC`), [`limit_claimed`] reports the program's own
//! claim, as such.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::report::{LimitKind, Termination};

/// Free bytes below which a tmpfs counts as full (a page or so is left
/// over when the last write did not fit).
const FULL_BELOW_BYTES: u64 = 64 << 10;
/// Most entries looked at per folder when looking for a file at the size limit.
const MAX_ENTRIES: usize = 16_384;

/// What the kernel counted or shows for one run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Evidence {
    /// Processes the OOM killer killed (the run's cgroup memory limit).
    pub oom_kills: u64,
    /// Forks refused by the cgroup's `pids.max`.
    pub pids_refused: u64,
    /// A tmpfs of the run (work folder, `/tmp`, `/dev/shm`) has no space or
    /// no inode left.
    pub folder_full: bool,
    /// A file in one of those folders is as large as `RLIMIT_FSIZE` allows.
    pub file_at_size_limit: bool,
}

impl Evidence {
    /// Adds what the run's folders (open descriptors of them) show;
    /// `tmpfs` says whether they are the run's own tmpfs (isolated modes)
    /// rather than a host folder, whose fullness is not the run's limit.
    pub(crate) fn with_folders(
        mut self,
        folders: &[BorrowedFd<'_>],
        tmpfs: bool,
        file_size: u64,
    ) -> Self {
        for fd in folders {
            if tmpfs && is_full(*fd) {
                self.folder_full = true;
            }
            let root = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
            let mut budget = MAX_ENTRIES;
            if has_file_of(&root, file_size, 8, &mut budget) {
                self.file_at_size_limit = true;
            }
        }
        self
    }
}

/// Whether the filesystem of `fd` has (almost) no space or no inode left.
fn is_full(fd: BorrowedFd<'_>) -> bool {
    // SAFETY: fstatvfs fills a zeroed struct from a valid descriptor.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatvfs(fd.as_raw_fd(), &mut st) } != 0 {
        return false;
    }
    let free = (st.f_bavail as u64).saturating_mul(st.f_frsize as u64);
    (st.f_blocks > 0 && free < FULL_BELOW_BYTES) || (st.f_files > 0 && st.f_favail == 0)
}

/// Whether `dir` holds (at most `depth` folders down) a regular file of at
/// least `size` bytes; links are not followed.
fn has_file_of(dir: &Path, size: u64, depth: u32, budget: &mut usize) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    for entry in entries.flatten() {
        if *budget == 0 {
            return false;
        }
        *budget -= 1;
        let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
            continue;
        };
        if meta.is_file() && meta.size() >= size {
            return true;
        }
        if meta.is_dir() && depth > 0 && has_file_of(&entry.path(), size, depth - 1, budget) {
            return true;
        }
    }
    false
}

/// The limit the signal or the kernel's evidence shows (see the module docs).
pub(crate) fn limit_hit(termination: Termination, evidence: Evidence) -> Option<LimitKind> {
    match termination {
        Termination::Signaled { signal } if signal == libc::SIGXCPU => Some(LimitKind::CpuTime),
        Termination::Signaled { signal } if signal == libc::SIGXFSZ => Some(LimitKind::FileSize),
        Termination::Exited { code: 0 } | Termination::TimedOut => None,
        _ if evidence.oom_kills > 0 => Some(LimitKind::Memory),
        _ if evidence.pids_refused > 0 => Some(LimitKind::Processes),
        _ if evidence.folder_full => Some(LimitKind::Disk),
        _ if evidence.file_at_size_limit => Some(LimitKind::FileSize),
        _ => None,
    }
}

/// The limit a failed program's last lines on stderr name (Python's
/// `MemoryError`, `[Errno 27]`, `[Errno 11]` from `fork`, `Too many open
/// files`, `[Errno 28]`): the program's claim, which it could fake.
pub(crate) fn limit_claimed(termination: Termination, stderr: &str) -> Option<LimitKind> {
    if !matches!(termination, Termination::Exited { code } if code != 0) {
        return None;
    }
    let lines: Vec<&str> = stderr.lines().rev().take(6).collect();
    let tail = lines.join("\n");
    let says = |needles: &[&str]| needles.iter().any(|n| tail.contains(n));
    if says(&["MemoryError", "Cannot allocate memory", "std::bad_alloc"]) {
        Some(LimitKind::Memory)
    } else if says(&["File too large", "[Errno 27]"]) {
        Some(LimitKind::FileSize)
    } else if says(&["[Errno 11]", "Resource temporarily unavailable"]) {
        Some(LimitKind::Processes)
    } else if says(&["Too many open files"]) {
        Some(LimitKind::OpenFiles)
    } else if says(&["No space left on device", "[Errno 28]"]) {
        Some(LimitKind::Disk)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NONE: Evidence = Evidence {
        oom_kills: 0,
        pids_refused: 0,
        folder_full: false,
        file_at_size_limit: false,
    };

    #[test]
    fn limits_are_read_off_signals_and_the_kernels_counters_only() {
        let sig = |signal| Termination::Signaled { signal };
        let exit1 = Termination::Exited { code: 1 };
        assert_eq!(
            limit_hit(sig(libc::SIGXCPU), NONE),
            Some(LimitKind::CpuTime)
        );
        assert_eq!(
            limit_hit(sig(libc::SIGXFSZ), NONE),
            Some(LimitKind::FileSize)
        );
        assert_eq!(limit_hit(exit1, NONE), None);
        let oom = Evidence {
            oom_kills: 1,
            ..NONE
        };
        assert_eq!(limit_hit(sig(libc::SIGKILL), oom), Some(LimitKind::Memory));
        let full = Evidence {
            folder_full: true,
            ..NONE
        };
        assert_eq!(limit_hit(exit1, full), Some(LimitKind::Disk));
        let big = Evidence {
            file_at_size_limit: true,
            ..NONE
        };
        assert_eq!(limit_hit(exit1, big), Some(LimitKind::FileSize));
        // A run that succeeded or ran out of time hit no limit that matters.
        assert_eq!(limit_hit(Termination::Exited { code: 0 }, full), None);
        assert_eq!(limit_hit(Termination::TimedOut, oom), None);
    }

    #[test]
    fn what_a_program_prints_is_only_a_claim() {
        let exit1 = Termination::Exited { code: 1 };
        assert_eq!(
            limit_claimed(exit1, "Traceback...\nMemoryError"),
            Some(LimitKind::Memory)
        );
        assert_eq!(
            limit_claimed(exit1, "OSError: [Errno 27] File too large"),
            Some(LimitKind::FileSize)
        );
        assert_eq!(
            limit_claimed(
                exit1,
                "BlockingIOError: [Errno 11] Resource temporarily unavailable"
            ),
            Some(LimitKind::Processes)
        );
        assert_eq!(
            limit_claimed(exit1, "OSError: [Errno 28] No space left on device"),
            Some(LimitKind::Disk)
        );
        assert_eq!(limit_claimed(exit1, "ValueError: bad"), None);
        assert_eq!(
            limit_claimed(Termination::Exited { code: 0 }, "MemoryError"),
            None
        );
        let killed = Termination::Signaled {
            signal: libc::SIGKILL,
        };
        assert_eq!(limit_claimed(killed, "MemoryError"), None);
    }

    #[test]
    fn a_full_folder_and_a_file_at_the_size_limit_are_seen() {
        use std::os::fd::AsFd;
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/big"), vec![0u8; 4096]).unwrap();
        std::fs::write(dir.path().join("small"), b"x").unwrap();
        let folder = std::fs::File::open(dir.path()).unwrap();
        let seen = NONE.with_folders(&[folder.as_fd()], false, 4096);
        assert!(seen.file_at_size_limit && !seen.folder_full);
        let seen = NONE.with_folders(&[folder.as_fd()], false, 4097);
        assert!(!seen.file_at_size_limit);
    }
}
