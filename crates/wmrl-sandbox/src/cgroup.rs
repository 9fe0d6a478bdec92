//! A cgroup per run, so that limits hold for the run as a whole (all its
//! processes together) rather than per process: `memory.max` (with swap off
//! and `memory.oom.group`), `pids.max` and `cpu.max` on cgroup v2, or the
//! memory, pids and cpu controllers of cgroup v1 (hybrid hosts).
//!
//! Where the cgroups come from ([`CgroupSupport::detect`]):
//! - v2: a parent group `<mount>/wmrl-sandbox` (as root) or the
//!   [`crate::SandboxConfig::cgroup_parent`] given (a delegated group whose
//!   `cgroup.subtree_control` enables `memory pids cpu`);
//! - v1: `wmrl-sandbox` under this process's own group in each controller's
//!   hierarchy (so the runs stay inside whatever limits this process has).
//!
//! The child joins the run's groups itself (it writes `0` to the
//! `cgroup.procs` descriptors the parent opened) before it creates anything,
//! so no process of the run ever lives outside them.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};

use crate::evidence::Evidence;
use crate::{Error, Limits, Result};

/// Which cgroups this machine offers the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CgroupSupport {
    /// cgroup v2: runs are children of this group.
    V2 {
        /// The parent group of the runs.
        parent: PathBuf,
    },
    /// cgroup v1: runs are children of these groups (cpu optional).
    V1 {
        /// Parent group in the memory hierarchy.
        memory: PathBuf,
        /// Parent group in the pids hierarchy.
        pids: PathBuf,
        /// Parent group in the cpu hierarchy, when mounted.
        cpu: Option<PathBuf>,
    },
    /// No usable cgroups: only the per-process rlimits apply.
    Unavailable {
        /// Why.
        reason: String,
    },
}

/// Mount points of cgroup v2 and of the v1 controllers, from `/proc/self/mountinfo`.
fn mounts() -> (Option<PathBuf>, Vec<(String, PathBuf)>) {
    parse_mounts(&std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default())
}

/// [`mounts`] from the text of a `mountinfo` file.
fn parse_mounts(info: &str) -> (Option<PathBuf>, Vec<(String, PathBuf)>) {
    let (mut v2, mut v1) = (None, Vec::new());
    for line in info.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(sep) = fields.iter().position(|f| *f == "-") else {
            continue;
        };
        let (Some(point), Some(fstype), Some(opts)) =
            (fields.get(4), fields.get(sep + 1), fields.get(sep + 3))
        else {
            continue;
        };
        match *fstype {
            "cgroup2" if v2.is_none() => v2 = Some(PathBuf::from(point)),
            "cgroup" => {
                for c in opts.split(',') {
                    if matches!(c, "memory" | "pids" | "cpu") {
                        v1.push((c.to_string(), PathBuf::from(point)));
                    }
                }
            }
            _ => {}
        }
    }
    (v2, v1)
}

/// This process's group in the hierarchy named `controller` ("" for v2).
fn own_group(controller: &str) -> Option<PathBuf> {
    parse_own_group(
        &std::fs::read_to_string("/proc/self/cgroup").ok()?,
        controller,
    )
}

/// [`own_group`] from the text of a `/proc/<pid>/cgroup` file.
fn parse_own_group(text: &str, controller: &str) -> Option<PathBuf> {
    text.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, list, path) = (parts.next()?, parts.next()?, parts.next()?);
        let hit = if controller.is_empty() {
            list.is_empty()
        } else {
            list.split(',').any(|c| c == controller)
        };
        hit.then(|| PathBuf::from(path.trim_start_matches('/')))
    })
}

fn write(path: &Path, value: &str) -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)?
        .write_all(value.as_bytes())
}

fn mkdir(path: &Path) -> std::io::Result<()> {
    match std::fs::create_dir(path) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(e),
        _ => Ok(()),
    }
}

/// Whether this process can create (and remove) a child group of `parent`.
fn can_create_in(parent: &Path) -> std::result::Result<(), String> {
    let probe = parent.join(format!("probe-{}", std::process::id()));
    mkdir(&probe).map_err(|e| format!("cannot create groups in {}: {e}", parent.display()))?;
    let _ = std::fs::remove_dir(&probe);
    Ok(())
}

/// Enables `memory pids cpu` for the children of `group`.
fn enable_controllers(group: &Path) -> std::result::Result<(), String> {
    let control = group.join("cgroup.subtree_control");
    let have =
        std::fs::read_to_string(&control).map_err(|e| format!("{}: {e}", control.display()))?;
    for c in ["memory", "pids", "cpu"] {
        if !have.split_whitespace().any(|h| h == c) {
            write(&control, &format!("+{c}")).map_err(|e| {
                format!(
                    "cannot enable the {c} controller in {}: {e}",
                    control.display()
                )
            })?;
        }
    }
    Ok(())
}

impl CgroupSupport {
    /// Finds the cgroups the sandbox can use (see the module docs).
    pub fn detect(configured: Option<&Path>) -> Self {
        let (v2, v1) = mounts();
        let mut reasons = Vec::new();
        if let Some(mount) = &v2 {
            let controllers =
                std::fs::read_to_string(mount.join("cgroup.controllers")).unwrap_or_default();
            let all = ["memory", "pids", "cpu"]
                .iter()
                .all(|c| controllers.split_whitespace().any(|h| h == *c));
            let attempt = if let Some(parent) = configured {
                enable_controllers(parent)
                    .and_then(|()| can_create_in(parent))
                    .map(|()| parent.to_path_buf())
            } else if !all {
                Err(format!(
                    "cgroup v2 at {} offers `{}`, not memory, pids and cpu (they are bound to v1)",
                    mount.display(),
                    controllers.trim()
                ))
            } else {
                let parent = mount.join("wmrl-sandbox");
                enable_controllers(mount)
                    .and_then(|()| mkdir(&parent).map_err(|e| format!("{}: {e}", parent.display())))
                    .and_then(|()| enable_controllers(&parent))
                    .and_then(|()| can_create_in(&parent))
                    .map(|()| parent)
            };
            match attempt {
                Ok(parent) => return CgroupSupport::V2 { parent },
                Err(reason) => reasons.push(reason),
            }
        }
        let find = |name: &str| {
            let (_, point) = v1.iter().find(|(c, _)| c == name)?;
            let parent = point.join(own_group(name)?).join("wmrl-sandbox");
            mkdir(&parent).ok()?;
            can_create_in(&parent).ok().map(|()| parent)
        };
        match (find("memory"), find("pids")) {
            (Some(memory), Some(pids)) => {
                return CgroupSupport::V1 {
                    memory,
                    pids,
                    cpu: find("cpu"),
                };
            }
            _ if v1.is_empty() => {}
            _ => reasons.push("cgroup v1 memory and pids hierarchies are not writable here".into()),
        }
        if reasons.is_empty() {
            reasons.push("no cgroup filesystem is mounted".into());
        }
        CgroupSupport::Unavailable {
            reason: reasons.join("; "),
        }
    }

    /// Whether runs get cgroups.
    pub fn is_available(&self) -> bool {
        !matches!(self, CgroupSupport::Unavailable { .. })
    }
}

/// The cgroups of one run; removed (their processes killed) when dropped.
#[derive(Debug)]
pub(crate) struct RunCgroup {
    dirs: Vec<PathBuf>,
    v2: bool,
    procs: Vec<File>,
}

/// `key value` lines (`memory.events`, `pids.events`, `memory.oom_control`).
fn counter(path: &Path, key: &str) -> u64 {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
        .unwrap_or(0)
}

impl RunCgroup {
    /// Creates the groups of run `name` with `limits`.
    pub(crate) fn create(
        support: &CgroupSupport,
        name: &str,
        limits: &Limits,
    ) -> Result<Option<Self>> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::Io { path, source }
        };
        let mut group = match support {
            CgroupSupport::Unavailable { .. } => return Ok(None),
            CgroupSupport::V2 { parent } => RunCgroup {
                dirs: vec![parent.join(name)],
                v2: true,
                procs: Vec::new(),
            },
            CgroupSupport::V1 { memory, pids, cpu } => RunCgroup {
                dirs: [Some(memory), Some(pids), cpu.as_ref()]
                    .into_iter()
                    .flatten()
                    .map(|p| p.join(name))
                    .collect(),
                v2: false,
                procs: Vec::new(),
            },
        };
        let memory = limits.memory.to_string();
        // The run's own starter and init count too.
        let pids = (limits.processes + 2).to_string();
        let period = 100_000u64;
        let quota = (limits.cpus * period as f64).round() as u64;
        let mut settings: Vec<(PathBuf, String, bool)> = Vec::new();
        if group.v2 {
            let d = &group.dirs[0];
            settings.push((d.join("memory.max"), memory, true));
            settings.push((d.join("memory.swap.max"), "0".into(), false));
            settings.push((d.join("memory.oom.group"), "1".into(), false));
            settings.push((d.join("pids.max"), pids, true));
            if quota > 0 {
                settings.push((d.join("cpu.max"), format!("{quota} {period}"), true));
            }
        } else {
            let d = &group.dirs;
            settings.push((d[0].join("memory.limit_in_bytes"), memory.clone(), true));
            settings.push((d[0].join("memory.memsw.limit_in_bytes"), memory, false));
            settings.push((d[1].join("pids.max"), pids, true));
            if let (Some(cpu), true) = (d.get(2), quota > 0) {
                settings.push((cpu.join("cpu.cfs_period_us"), period.to_string(), true));
                settings.push((cpu.join("cpu.cfs_quota_us"), quota.to_string(), true));
            }
        }
        for dir in &group.dirs {
            std::fs::create_dir(dir).map_err(io(dir))?;
        }
        for (path, value, required) in settings {
            if let Err(source) = write(&path, &value)
                && required
            {
                return Err(Error::Io { path, source });
            }
        }
        for dir in &group.dirs {
            let path = dir.join("cgroup.procs");
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(io(&path))?;
            group.procs.push(file);
        }
        Ok(Some(group))
    }

    /// Descriptors of `cgroup.procs` for the child to join (valid while `self` lives).
    pub(crate) fn procs_fds(&self) -> Vec<RawFd> {
        self.procs.iter().map(AsRawFd::as_raw_fd).collect()
    }

    /// What the kernel counted.
    pub(crate) fn evidence(&self) -> Evidence {
        let d = &self.dirs;
        if self.v2 {
            Evidence {
                oom_kills: counter(&d[0].join("memory.events"), "oom_kill "),
                pids_refused: counter(&d[0].join("pids.events"), "max "),
                ..Evidence::default()
            }
        } else {
            Evidence {
                oom_kills: counter(&d[0].join("memory.oom_control"), "oom_kill "),
                pids_refused: counter(&d[1].join("pids.events"), "max "),
                ..Evidence::default()
            }
        }
    }

    /// Kills whatever is left in the groups and removes them.
    fn remove(&mut self) {
        self.procs.clear();
        for dir in &self.dirs {
            if self.v2 {
                let _ = write(&dir.join("cgroup.kill"), "1");
            }
            // A killed process leaves its group a moment after the signal.
            for _ in 0..100 {
                match std::fs::remove_dir(dir) {
                    Ok(()) => break,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(5)),
                }
            }
        }
    }
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        self.remove();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unified_and_hybrid_hierarchies_are_read_off_mountinfo() {
        let unified = "35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate\n";
        assert_eq!(
            parse_mounts(unified),
            (Some(PathBuf::from("/sys/fs/cgroup")), vec![])
        );
        let hybrid = "30 25 0:26 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n\
                      31 25 0:27 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n\
                      32 25 0:28 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        let (v2, v1) = parse_mounts(hybrid);
        assert_eq!(v2, Some(PathBuf::from("/sys/fs/cgroup/unified")));
        assert_eq!(
            v1,
            vec![
                ("memory".to_string(), PathBuf::from("/sys/fs/cgroup/memory")),
                (
                    "cpu".to_string(),
                    PathBuf::from("/sys/fs/cgroup/cpu,cpuacct")
                ),
            ]
        );
    }

    #[test]
    fn the_own_group_is_read_per_hierarchy() {
        let text = "4:memory:/jobs/a\n2:cpu,cpuacct:/\n0::/user.slice/x.scope\n";
        assert_eq!(
            parse_own_group(text, "memory"),
            Some(PathBuf::from("jobs/a"))
        );
        assert_eq!(parse_own_group(text, "cpu"), Some(PathBuf::from("")));
        assert_eq!(
            parse_own_group(text, ""),
            Some(PathBuf::from("user.slice/x.scope"))
        );
        assert_eq!(parse_own_group(text, "pids"), None);
    }
}
