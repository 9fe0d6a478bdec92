//! The per-run uids of root mode: a machine-wide lease of one uid per run, and
//! the sweep that kills whatever a run's uid left behind.
//!
//! **Range.** [`DEFAULT_UID_BASE`]`..+`[`UID_RANGE`] lies in the block
//! 65536–524287 that systemd never allocates (its DynamicUser range is
//! 61184–65519, its container range starts at 524288). uids that
//! `/etc/passwd`, `/etc/subuid` or `/etc/subgid` give to anyone are skipped,
//! so a run never shares a uid with a user or a rootless container.
//!
//! **Leases** are exclusive `flock`s on `<lease_dir>/<uid>.lock`. The lease
//! folder must be a real folder owned by root and writable by nobody else
//! (it is created so when missing): otherwise another user could hold locks
//! or plant links there.

use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// First per-run uid (and gid) by default.
pub const DEFAULT_UID_BASE: u32 = 500_000;
/// How many uids from the base the runs may use.
pub const UID_RANGE: u32 = 1024;
/// Where leases are taken by default.
pub const DEFAULT_LEASE_DIR: &str = "/run/wmrl-sandbox/uids";

/// uid ranges given to users and subordinate-id holders on this machine.
fn reserved() -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    for line in passwd.lines() {
        if let Some(uid) = line.split(':').nth(2).and_then(|u| u.parse().ok()) {
            out.push((uid, 1));
        }
    }
    for file in ["/etc/subuid", "/etc/subgid"] {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        for line in text.lines() {
            let mut parts = line.split(':').skip(1);
            if let (Some(Ok(start)), Some(Ok(count))) = (
                parts.next().map(str::parse::<u32>),
                parts.next().map(str::parse::<u32>),
            ) {
                out.push((start, count));
            }
        }
    }
    out
}

/// Checks (creating it when missing) that `dir` is a folder owned by root
/// and writable by nobody else, not a link, under folders only root can
/// change (see `files::checked_dir`).
pub(crate) fn root_owned_dir(dir: &Path) -> Result<()> {
    crate::files::checked_dir(
        dir,
        0,
        "a folder (not a link) owned by root, writable by root only, under folders only root can change",
    )
}

/// A uid reserved for one run, machine-wide, by an exclusive flock on its
/// lock file; released when dropped (or when the process dies).
#[derive(Debug)]
pub(crate) struct UidLease {
    pub uid: u32,
    _file: std::fs::File,
}

impl UidLease {
    /// Leases the first free uid of `base..base + UID_RANGE` in `dir`.
    pub(crate) fn acquire(base: u32, dir: &Path) -> Result<Self> {
        root_owned_dir(dir)?;
        let reserved = reserved();
        let taken = |uid: u32| {
            reserved
                .iter()
                .any(|&(start, count)| uid >= start && uid - start < count)
        };
        for uid in (base..base.saturating_add(UID_RANGE)).filter(|&u| !taken(u)) {
            let path: PathBuf = dir.join(format!("{uid}.lock"));
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&path)
                .map_err(|source| Error::Io {
                    path: path.clone(),
                    source,
                })?;
            // SAFETY: flock on a descriptor we own.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                return Ok(Self { uid, _file: file });
            }
        }
        Err(Error::NoIsolation {
            reason: format!("all {UID_RANGE} sandbox uids from {base} are in use"),
        })
    }
}

/// Live processes (not zombies) whose real uid is `uid`, from `/proc`.
pub fn live_processes(uid: u32) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut n = 0;
    for entry in entries.flatten() {
        if !entry
            .file_name()
            .as_encoded_bytes()
            .iter()
            .all(u8::is_ascii_digit)
        {
            continue;
        }
        let status = std::fs::read_to_string(entry.path().join("status")).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
        };
        let owner = field("Uid:").and_then(|u| u.parse::<u32>().ok());
        let dead = matches!(field("State:"), Some("Z" | "X"));
        if owner == Some(uid) && !dead {
            n += 1;
        }
    }
    n
}

/// One round of killing: a forked child switches to `uid` and calls
/// `kill(-1, SIGKILL)`, which reaches exactly the processes of `uid`.
fn kill_all_of(uid: u32) -> Result<()> {
    // SAFETY: the child only calls async-signal-safe functions before _exit.
    unsafe {
        let pid = libc::fork();
        if pid < 0 {
            return Err(Error::Spawn {
                program: "uid sweeper".into(),
                source: std::io::Error::last_os_error(),
            });
        }
        if pid == 0 {
            if libc::setresgid(uid, uid, uid) != 0 || libc::setresuid(uid, uid, uid) != 0 {
                libc::_exit(1);
            }
            libc::kill(-1, libc::SIGKILL);
            libc::_exit(0);
        }
        let mut status = 0;
        while libc::waitpid(pid, &mut status, 0) < 0 {
            if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                break;
            }
        }
        if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
            return Err(Error::ProbeFailed {
                detail: format!("could not switch to uid {uid} to kill its processes"),
            });
        }
    }
    Ok(())
}

/// Kills every process of `uid` until `/proc` shows none (at most about a
/// second). Returns how many rounds found processes to kill.
pub(crate) fn sweep_uid(uid: u32) -> Result<u32> {
    let mut rounds = 0;
    while live_processes(uid) > 0 && rounds < 200 {
        kill_all_of(uid)?;
        rounds += 1;
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    Ok(rounds)
}
