//! Resource limits of one sandboxed run and the setrlimit(2) calls that apply them.
//!
//! Wall-clock time is enforced by the parent (kill of the whole process group and
//! of every process of the run's uid); everything else by the kernel through
//! rlimits inherited by every process the solution starts:
//!
//! | limit | resource | what the solution sees |
//! |---|---|---|
//! | `cpu_time` | `RLIMIT_CPU` (soft; hard = soft + 1 s) | `SIGXCPU`, then `SIGKILL` |
//! | `address_space` | `RLIMIT_AS` | allocations fail (`MemoryError` in Python) |
//! | `file_size` | `RLIMIT_FSIZE` | writes past it fail with `EFBIG` (Python ignores `SIGXFSZ`) |
//! | `processes` | `RLIMIT_NPROC` | `fork`/thread creation fails with `EAGAIN` |
//! | `open_files` | `RLIMIT_NOFILE` | `open` fails with `EMFILE` |
//!
//! Where the machine offers cgroups (see [`crate::cgroup`]), the run as a
//! whole is also held to `memory` (all its processes together, tmpfs pages
//! included; the OOM killer ends the run), `processes` (`pids.max`) and `cpus`
//! (`cpu.max`). Its work folder, `/tmp` and `/dev/shm` are tmpfs of
//! `work_size`, `tmp_size` and `inodes` each (writes fail with `ENOSPC`).
//!
//! `RLIMIT_NPROC` counts every process and thread of the real uid, and the
//! kernel does not enforce it for a process with `CAP_SYS_RESOURCE` or
//! `CAP_SYS_ADMIN`: that is why the sandbox runs solutions under an unprivileged
//! uid of their own (see `isolation`).

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Limits of one run. Sizes are bytes, times seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Wall-clock limit in seconds; the whole process group is killed after it (default: 120).
    pub wall_time_s: f64,
    /// CPU-time limit in seconds, summed over the process's threads (default: 60).
    pub cpu_time_s: u64,
    /// Address-space limit of each process in bytes (default: 4 GiB).
    pub address_space: u64,
    /// Largest file a process may write, in bytes (default: 64 MiB).
    pub file_size: u64,
    /// Most processes and threads of the run at once: the run's uid (`RLIMIT_NPROC`)
    /// and its cgroup (`pids.max`) (default: 64).
    pub processes: u64,
    /// Most open file descriptors per process (default: 256).
    pub open_files: u64,
    /// Bytes of stdout and of stderr kept each; the rest is drained and counted (default: 64 KiB).
    pub output_bytes: usize,
    /// Size of each of the private `/tmp` and `/dev/shm` (tmpfs) in bytes (default: 64 MiB).
    pub tmp_size: u64,
    /// Size of the work folder (a tmpfs, isolated modes) in bytes (default: 256 MiB).
    pub work_size: u64,
    /// Most files and folders in each of the work folder, `/tmp` and `/dev/shm` (default: 4096).
    pub inodes: u64,
    /// Memory of the whole run, all processes and tmpfs pages together, in
    /// bytes (cgroup `memory.max`, swap off; default: 4 GiB).
    pub memory: u64,
    /// CPUs the run may use at once (cgroup `cpu.max`; 0 means no limit; default: 1).
    pub cpus: f64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            wall_time_s: 120.0,
            cpu_time_s: 60,
            address_space: 4 << 30,
            file_size: 64 << 20,
            processes: 64,
            open_files: 256,
            output_bytes: 64 << 10,
            tmp_size: 64 << 20,
            work_size: 256 << 20,
            inodes: 4096,
            memory: 4 << 30,
            cpus: 1.0,
        }
    }
}

impl Limits {
    /// The wall-clock limit as a [`Duration`].
    pub fn wall_time(&self) -> Duration {
        Duration::from_secs_f64(self.wall_time_s.max(0.0))
    }

    /// The rlimits to apply in the child, as `(resource, soft, hard)`.
    pub(crate) fn rlimits(&self) -> [(libc::__rlimit_resource_t, u64, u64); 6] {
        [
            (
                libc::RLIMIT_CPU,
                self.cpu_time_s.max(1),
                self.cpu_time_s.max(1) + 1,
            ),
            (libc::RLIMIT_AS, self.address_space, self.address_space),
            (libc::RLIMIT_FSIZE, self.file_size, self.file_size),
            (libc::RLIMIT_NPROC, self.processes, self.processes),
            (libc::RLIMIT_NOFILE, self.open_files, self.open_files),
            (libc::RLIMIT_CORE, 0, 0),
        ]
    }
}

/// Applies `limits` to the calling process. Async-signal-safe (no allocation):
/// meant for `pre_exec`.
pub(crate) fn apply(limits: &[(libc::__rlimit_resource_t, u64, u64)]) -> std::io::Result<()> {
    for &(resource, soft, hard) in limits {
        let rl = libc::rlimit {
            rlim_cur: soft as libc::rlim_t,
            rlim_max: hard as libc::rlim_t,
        };
        // SAFETY: setrlimit reads a valid, initialised struct.
        if unsafe { libc::setrlimit(resource, &rl) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
