//! Which isolation this machine allows, the jail plan for one run, and the
//! sweep that kills every process left behind by a run's uid.
//!
//! - **root** (the normal case on CI and the dev machines): mount, network, IPC
//!   and UTS namespaces, a pivot into a minimal read-only root, then `setuid`
//!   to a uid of the run's own (`uid_base + slot`), so `RLIMIT_NPROC` is
//!   enforced per run and a leftover process of the run can be found and killed
//!   by uid.
//! - **user namespace** (unprivileged caller, kernel allows it): the same
//!   filesystem and network isolation inside a user namespace; processes keep
//!   the caller's uid, so `RLIMIT_NPROC` counts the caller's processes too.
//! - **bare** (neither works): only setsid, the wall clock and rlimits. The
//!   solution then sees the host's files and network: this is reported loudly.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::jail::{JailMode, JailPlan, Step};
use crate::{Error, Limits, Result};

/// The isolation a [`crate::Sandbox`] provides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Isolation {
    /// Namespaces + pivot_root + an unprivileged uid per run (started as root).
    Root,
    /// Namespaces + pivot_root inside a user namespace (started unprivileged).
    UserNamespace,
    /// rlimits, process group and wall clock only: no filesystem or network isolation.
    Bare,
}

impl Isolation {
    /// Whether solutions are cut off from the host's files and network.
    pub fn is_isolated(self) -> bool {
        !matches!(self, Isolation::Bare)
    }
}

impl std::fmt::Display for Isolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Isolation::Root => "root (namespaces, pivot_root, per-run uid)",
            Isolation::UserNamespace => "user namespace (namespaces, pivot_root)",
            Isolation::Bare => "bare (rlimits only: NO filesystem or network isolation)",
        })
    }
}

/// Where the sandbox's work folder appears inside the jail.
pub const INSIDE_WORKDIR: &str = "/sandbox";

/// System folders bound read-only when they exist (symlinks are recreated).
pub const SYSTEM_PATHS: [&str; 7] = ["/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/etc"];

/// Device nodes bound into the jail's `/dev`.
const DEVICES: [&str; 4] = ["/dev/null", "/dev/zero", "/dev/urandom", "/dev/random"];

fn cstring(path: &Path) -> Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| Error::BadPath {
        path: path.to_path_buf(),
    })
}

/// Folders of the new root that must exist before `path` can be mounted there.
fn ancestors_to_create(path: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = path
        .ancestors()
        .skip(1)
        .filter(|p| p.parent().is_some())
        .map(Path::to_path_buf)
        .collect();
    out.reverse();
    out
}

/// Builds the jail plan of one run.
///
/// `read_only` are host paths bound read-only at the same place; `work` the
/// host folder bound read-write at [`INSIDE_WORKDIR`]; `new_root` an empty
/// host folder for the root tmpfs.
pub(crate) fn plan(
    mode: JailMode,
    read_only: &[PathBuf],
    work: &Path,
    new_root: &Path,
    limits: &Limits,
) -> Result<JailPlan> {
    let rlimits = limits.rlimits().to_vec();
    if mode == JailMode::Bare {
        return Ok(JailPlan {
            mode,
            new_root: cstring(new_root)?,
            root_opts: CString::default(),
            steps: Vec::new(),
            workdir: cstring(work)?,
            uid_map: CString::default(),
            gid_map: CString::default(),
            rlimits,
        });
    }
    let inside = |p: &Path| new_root.join(p.strip_prefix("/").unwrap_or(p));
    let mut steps = Vec::new();
    let mut made: std::collections::BTreeSet<PathBuf> = std::collections::BTreeSet::new();
    let mut mkdirs = |path: &Path, steps: &mut Vec<Step>, include_self: bool| -> Result<()> {
        let mut dirs = ancestors_to_create(path);
        if include_self {
            dirs.push(path.to_path_buf());
        }
        for dir in dirs {
            if made.insert(dir.clone()) {
                steps.push(Step::Mkdir(cstring(&inside(&dir))?));
            }
        }
        Ok(())
    };
    // The private /tmp and /dev/shm come first: read-only paths that live
    // under /tmp on the host (a checkout or venv in /tmp) are then bound
    // inside the tmpfs instead of being hidden by it.
    let tmp = Path::new("/tmp");
    mkdirs(tmp, &mut steps, true)?;
    let tmp_opts = format!("size={},mode=1777", limits.tmp_size.max(4096));
    steps.push(Step::Tmpfs {
        dst: cstring(&inside(tmp))?,
        opts: CString::new(tmp_opts.clone()).expect("no NUL"),
    });
    // /dev/shm: Python's multiprocessing and joblib need it for semaphores.
    let shm = Path::new("/dev/shm");
    mkdirs(shm, &mut steps, true)?;
    steps.push(Step::Tmpfs {
        dst: cstring(&inside(shm))?,
        opts: CString::new(tmp_opts.clone()).expect("no NUL"),
    });
    for path in read_only {
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            continue;
        };
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(path).map_err(|source| Error::Io {
                path: path.clone(),
                source,
            })?;
            mkdirs(path, &mut steps, false)?;
            steps.push(Step::Symlink {
                target: cstring(&target)?,
                link: cstring(&inside(path))?,
            });
        } else {
            mkdirs(path, &mut steps, meta.is_dir())?;
            steps.push(Step::Bind {
                src: cstring(path)?,
                dst: cstring(&inside(path))?,
                is_file: !meta.is_dir(),
                writable: false,
            });
        }
    }
    let workdir = Path::new(INSIDE_WORKDIR);
    mkdirs(workdir, &mut steps, true)?;
    steps.push(Step::Bind {
        src: cstring(work)?,
        dst: cstring(&inside(workdir))?,
        is_file: false,
        writable: true,
    });
    for dev in DEVICES {
        let dev = Path::new(dev);
        if dev.exists() {
            steps.push(Step::Bind {
                src: cstring(dev)?,
                dst: cstring(&inside(dev))?,
                is_file: true,
                writable: true,
            });
        }
    }
    let (uid_map, gid_map) = match mode {
        JailMode::UserNamespace { uid, gid } => {
            (format!("{uid} {uid} 1\n"), format!("{gid} {gid} 1\n"))
        }
        _ => (String::new(), String::new()),
    };
    Ok(JailPlan {
        mode,
        new_root: cstring(new_root)?,
        root_opts: c"size=1m,mode=0755".to_owned(),
        steps,
        workdir: CString::new(INSIDE_WORKDIR).expect("no NUL"),
        uid_map: CString::new(uid_map).expect("no NUL"),
        gid_map: CString::new(gid_map).expect("no NUL"),
        rlimits,
    })
}

/// Kills every process of `uid`: a forked child switches to `uid` and calls
/// `kill(-1, SIGKILL)` (which spares the caller) until nothing is left or about
/// a second has passed. Returns how many rounds found processes to kill.
pub(crate) fn sweep_uid(uid: u32) -> Result<u32> {
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
                libc::_exit(255);
            }
            let mut rounds = 0;
            for _ in 0..200 {
                if libc::kill(-1, libc::SIGKILL) != 0 {
                    break; // ESRCH: nothing of this uid left
                }
                rounds += 1;
                let pause = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 5_000_000,
                };
                libc::nanosleep(&pause, std::ptr::null_mut());
            }
            libc::_exit(rounds.min(250));
        }
        let mut status = 0;
        while libc::waitpid(pid, &mut status, 0) < 0 {
            if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                break;
            }
        }
        let code = if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            255
        };
        if code == 255 {
            return Err(Error::ProbeFailed {
                detail: format!("could not switch to uid {uid} to kill its processes"),
            });
        }
        Ok(code as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A venv or checkout under the host's /tmp must stay visible: the private
    /// /tmp tmpfs is mounted before the read-only binds, never over them.
    #[test]
    fn read_only_paths_under_tmp_are_bound_after_the_private_tmp() {
        let host = tempfile::tempdir().unwrap();
        let venv = host.path().join("venv");
        std::fs::create_dir_all(&venv).unwrap();
        let plan = plan(
            JailMode::Root {
                uid: 1000,
                gid: 1000,
            },
            std::slice::from_ref(&venv),
            host.path(),
            Path::new("/nonexistent-root"),
            &Limits::default(),
        )
        .unwrap();
        let tmpfs_at = plan
            .steps
            .iter()
            .position(|s| matches!(s, Step::Tmpfs { dst, .. } if dst.as_bytes().ends_with(b"/tmp")))
            .expect("a private /tmp");
        let venv_dst = CString::new(format!("/nonexistent-root{}", venv.display())).unwrap();
        let bind_at = plan
            .steps
            .iter()
            .position(|s| matches!(s, Step::Bind { dst, .. } if *dst == venv_dst))
            .expect("the venv is bound");
        assert!(tmpfs_at < bind_at, "{tmpfs_at} vs {bind_at}");
    }
}
