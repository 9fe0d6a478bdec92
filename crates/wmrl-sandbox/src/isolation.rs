//! Which isolation this machine allows, and the jail plan for one run.
//!
//! - **root** (root with `CAP_SYS_ADMIN`): mount, network, IPC, UTS and PID
//!   namespaces, a pivot into a minimal read-only root, then `setuid` to a uid
//!   of the run's own (see [`crate::uids`]), so `RLIMIT_NPROC` is enforced per
//!   run and a leftover process of the run can be found and killed by uid.
//! - **user namespace** (unprivileged caller, or root without
//!   `CAP_SYS_ADMIN`, where the kernel allows user namespaces): the same
//!   namespaces inside a user namespace; the solution appears as uid
//!   [`INSIDE_ID`] (never 0 inside, so it holds no capability after `exec`)
//!   and is on the host the caller's uid, which the PID namespace keeps from
//!   signalling the caller.
//! - **bare** (neither works): only setsid, the wall clock, rlimits, cgroups
//!   and the seccomp filter. The solution sees the host's files and network,
//!   so [`crate::Sandbox::new`] refuses it unless
//!   [`crate::SandboxConfig::require_isolation`] is turned off.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::jail::{JailMode, JailPlan, Step, WorkPlan};
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
            Isolation::UserNamespace => "user namespace (namespaces, pivot_root, caller's uid)",
            Isolation::Bare => {
                "bare (rlimits, filter, wall clock: NO filesystem or network isolation)"
            }
        })
    }
}

/// Where the sandbox's work folder appears inside the jail.
pub const INSIDE_WORKDIR: &str = "/sandbox";

/// The uid and gid the solution has inside a user namespace.
pub const INSIDE_ID: u32 = 1000;

/// System folders bound read-only (recursively) when they exist (symlinks are recreated).
pub const SYSTEM_PATHS: [&str; 6] = ["/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32"];

/// The host's `/etc` entries bound read-only into the jail's otherwise
/// generated `/etc` (the dynamic linker's cache and Debian's alternatives,
/// which shared libraries such as BLAS are reached through).
pub const ETC_FROM_HOST: [&str; 5] = [
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/localtime",
];

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

/// The generated files of the jail's `/etc`: who the run's uid is, where
/// names are looked up, and `localhost`.
fn etc_files(uid: u32, gid: u32) -> [(&'static str, String); 5] {
    [
        (
            "passwd",
            format!(
                "root:x:0:0:root:/root:/usr/sbin/nologin\n\
                 sandbox:x:{uid}:{gid}:sandbox:{INSIDE_WORKDIR}:/usr/sbin/nologin\n\
                 nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
            ),
        ),
        (
            "group",
            format!("root:x:0:\nsandbox:x:{gid}:\nnogroup:x:65534:\n"),
        ),
        (
            "nsswitch.conf",
            "passwd: files\ngroup: files\nshadow: files\nhosts: files\nnetworks: files\n\
             protocols: files\nservices: files\n"
                .into(),
        ),
        (
            "hosts",
            "127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n".into(),
        ),
        ("hostname", "sandbox\n".into()),
    ]
}

/// What one run's plan is made of.
pub(crate) struct PlanInput<'a> {
    pub mode: JailMode,
    /// Host paths bound read-only at the same place.
    pub read_only: &'a [PathBuf],
    /// Bare mode: the host work folder. Isolated modes: the folder of the
    /// staged job files, copied into the work tmpfs.
    pub work: &'a Path,
    /// Names of the staged job files.
    pub inputs: &'a [String],
    /// An empty host folder for the root tmpfs.
    pub new_root: &'a Path,
    pub limits: &'a Limits,
    pub cgroup_procs: Vec<std::os::fd::RawFd>,
    /// The child's end of the socket the work folder is sent through.
    pub socket: std::os::fd::RawFd,
}

/// Builds the jail plan of one run.
pub(crate) fn plan(input: PlanInput<'_>) -> Result<JailPlan> {
    let PlanInput {
        mode,
        read_only,
        work,
        inputs,
        new_root,
        limits,
        cgroup_procs,
        socket,
    } = input;
    let rlimits = limits.rlimits().to_vec();
    let seccomp = crate::seccomp::program();
    if mode == JailMode::Bare {
        return Ok(JailPlan {
            mode,
            new_root: cstring(new_root)?,
            root_opts: CString::default(),
            steps: Vec::new(),
            work: None,
            workdir: cstring(work)?,
            uid_map: CString::default(),
            gid_map: CString::default(),
            rlimits,
            cgroup_procs,
            seccomp,
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
    let inodes = limits.inodes.max(16);
    // The private /tmp and /dev/shm come first: read-only paths that live
    // under /tmp on the host (a checkout or venv in /tmp) are then bound
    // inside the tmpfs instead of being hidden by it. /dev/shm: Python's
    // multiprocessing and joblib need it for semaphores.
    let tmp_opts = format!(
        "size={},nr_inodes={inodes},mode=1777",
        limits.tmp_size.max(4096)
    );
    let mut scratch = Vec::new();
    for dir in ["/tmp", "/dev/shm"] {
        let dir = Path::new(dir);
        mkdirs(dir, &mut steps, true)?;
        let dst = cstring(&inside(dir))?;
        scratch.push(dst.clone());
        steps.push(Step::Tmpfs {
            dst,
            opts: CString::new(tmp_opts.clone()).expect("no NUL"),
        });
    }
    let (run_uid, run_gid) = match mode {
        JailMode::Root { uid, gid } | JailMode::UserNamespace { uid, gid } => (uid, gid),
        JailMode::Bare => unreachable!("handled above"),
    };
    let etc = Path::new("/etc");
    mkdirs(etc, &mut steps, true)?;
    for (name, contents) in etc_files(run_uid, run_gid) {
        steps.push(Step::WriteFile {
            path: cstring(&inside(&etc.join(name)))?,
            contents: contents.into_bytes(),
        });
    }
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
    let mut work_opts = format!(
        "size={},nr_inodes={inodes},mode=0755",
        limits.work_size.max(4096)
    );
    let owner = match mode {
        JailMode::Root { uid, gid } => {
            work_opts.push_str(&format!(",uid={uid},gid={gid}"));
            Some((uid, gid))
        }
        _ => None,
    };
    let work_dst = inside(workdir);
    let inputs = inputs
        .iter()
        .map(|name| Ok((cstring(&work.join(name))?, cstring(&work_dst.join(name))?)))
        .collect::<Result<Vec<_>>>()?;
    let (uid_map, gid_map) = match mode {
        JailMode::UserNamespace { uid, gid } => {
            // SAFETY: getuid/getgid have no preconditions.
            let (outside_uid, outside_gid) = unsafe { (libc::getuid(), libc::getgid()) };
            (
                format!("{uid} {outside_uid} 1\n"),
                format!("{gid} {outside_gid} 1\n"),
            )
        }
        _ => (String::new(), String::new()),
    };
    Ok(JailPlan {
        mode,
        new_root: cstring(new_root)?,
        root_opts: c"size=1m,nr_inodes=1024,mode=0755".to_owned(),
        steps,
        work: Some(WorkPlan {
            dst: cstring(&work_dst)?,
            opts: CString::new(work_opts).expect("no NUL"),
            inputs,
            owner,
            scratch,
            socket,
        }),
        workdir: CString::new(INSIDE_WORKDIR).expect("no NUL"),
        uid_map: CString::new(uid_map).expect("no NUL"),
        gid_map: CString::new(gid_map).expect("no NUL"),
        rlimits,
        cgroup_procs,
        seccomp,
    })
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
        let plan = plan(PlanInput {
            mode: JailMode::Root {
                uid: 1000,
                gid: 1000,
            },
            read_only: std::slice::from_ref(&venv),
            work: host.path(),
            inputs: &[],
            new_root: Path::new("/nonexistent-root"),
            limits: &Limits::default(),
            cgroup_procs: Vec::new(),
            socket: -1,
        })
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
