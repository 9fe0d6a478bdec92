//! [`Sandbox`]: runs jobs (a program, its arguments and input files) each in a
//! fresh folder under the jail of [`crate::jail`], at most `max_concurrent` at
//! a time (a tokio semaphore), and reports how each ended.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use tracing::{Instrument, debug, info_span, warn};

use crate::capture::{Captured, capture};
use crate::isolation::{self, Isolation, SYSTEM_PATHS};
use crate::jail::JailMode;
use crate::report::{RunReport, Termination};
use crate::{Error, Limits, Result};

/// How a [`Sandbox`] is set up.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// The program every job runs (e.g. the venv's python); it and `read_only`
    /// must be readable by an unprivileged uid once bound (no default: required).
    pub program: PathBuf,
    /// Host paths bound read-only at the same place inside the jail, besides
    /// [`SYSTEM_PATHS`] (default: empty; add the interpreter's prefixes).
    pub read_only: Vec<PathBuf>,
    /// Folder for the runs' fresh folders (default: `$TMPDIR/wmrl-sandbox`).
    pub scratch: PathBuf,
    /// Most runs at once (default: available cores).
    pub max_concurrent: usize,
    /// Limits of each run (default: [`Limits::default`]).
    pub limits: Limits,
    /// First uid of the per-run identities in root mode (default: 64000).
    /// Each run leases a free uid in `uid_base..uid_base + 1024` through a lock
    /// file (`$TMPDIR/wmrl-sandbox-uids/<uid>.lock`, flock), so runs of any
    /// process on the machine never share a uid. They need no passwd entry.
    pub uid_base: u32,
    /// Refuse to start when only [`Isolation::Bare`] is available (default: false).
    pub require_isolation: bool,
    /// Extra environment variables for every job (default: thread counts of BLAS/OpenMP set to 1).
    pub env: Vec<(String, String)>,
}

impl SandboxConfig {
    /// A configuration with defaults for `program`.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            read_only: Vec::new(),
            scratch: std::env::temp_dir().join("wmrl-sandbox"),
            max_concurrent: std::thread::available_parallelism().map_or(1, |n| n.get()),
            limits: Limits::default(),
            uid_base: 64000,
            require_isolation: false,
            env: ["OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"]
                .iter()
                .map(|k| (k.to_string(), "1".to_string()))
                .collect(),
        }
    }
}

/// One execution: files copied into the fresh folder, arguments after the program,
/// and which files to bring back.
#[derive(Debug, Clone, Default)]
pub struct Job {
    /// Arguments after the program (e.g. `["solution.py"]`).
    pub args: Vec<OsString>,
    /// Files placed in the work folder: name (no `/`) and contents source.
    pub files: Vec<(String, JobFile)>,
    /// Names of files to read back after the run (regular files only, never followed links).
    pub collect: Vec<String>,
    /// Most bytes read back per collected file (default 0 means 64 MiB).
    pub collect_max_bytes: u64,
    /// Overrides the sandbox's limits for this job.
    pub limits: Option<Limits>,
}

/// Where a job file's contents come from.
#[derive(Debug, Clone)]
pub enum JobFile {
    /// Copied from a host file.
    Path(PathBuf),
    /// These bytes.
    Bytes(Arc<[u8]>),
}

/// Runs jobs in isolation; cheap to clone (shared state).
#[derive(Debug, Clone)]
pub struct Sandbox {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: SandboxConfig,
    isolation: Isolation,
    read_only: Vec<PathBuf>,
    permits: Semaphore,
}

/// What the uid of this process is (root can use the per-run uid mode).
fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

impl Sandbox {
    /// Creates the sandbox and finds which isolation works here by running
    /// `true` in the strongest available jail.
    pub async fn new(mut config: SandboxConfig) -> Result<Self> {
        if !config.program.is_file() {
            return Err(Error::MissingProgram {
                program: config.program.clone(),
            });
        }
        // The program is executed inside the jail by the same path, so it must be
        // spelled without `..` or symlinked folders; its own name stays as given
        // (a venv's python is a symlink that must keep its venv path).
        config.program = real_folder(&config.program)?;
        let extras: Vec<PathBuf> = config
            .read_only
            .iter()
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .collect();
        std::fs::create_dir_all(&config.scratch).map_err(|source| Error::Io {
            path: config.scratch.clone(),
            source,
        })?;
        let mut read_only: Vec<PathBuf> = SYSTEM_PATHS.iter().map(PathBuf::from).collect();
        for extra in &extras {
            if !read_only.iter().any(|p| extra.starts_with(p)) {
                read_only.push(extra.clone());
            }
        }
        let slots = config.max_concurrent.max(1);
        let candidates: &[Isolation] = if is_root() {
            &[Isolation::Root, Isolation::Bare]
        } else {
            &[Isolation::UserNamespace, Isolation::Bare]
        };
        let mut sandbox = Self {
            inner: Arc::new(Inner {
                isolation: candidates[0],
                read_only,
                permits: Semaphore::new(slots),
                config,
            }),
        };
        let mut failures = Vec::new();
        for &candidate in candidates {
            Arc::get_mut(&mut sandbox.inner)
                .expect("not shared yet")
                .isolation = candidate;
            match sandbox.probe().await {
                Ok(()) => break,
                Err(err) => failures.push(format!("{candidate:?}: {err}")),
            }
        }
        if sandbox.isolation() == Isolation::Bare {
            let why = failures.join("; ");
            if sandbox.inner.config.require_isolation {
                return Err(Error::NoIsolation { reason: why });
            }
            warn!(
                "SANDBOX NOT ISOLATED: namespaces are not available here ({why}); solutions can read \
                 every file this user can, including hidden answers, and reach the network. Only \
                 rlimits and the wall clock apply."
            );
        }
        Ok(sandbox)
    }

    /// The isolation in force.
    pub fn isolation(&self) -> Isolation {
        self.inner.isolation
    }

    /// The configuration.
    pub fn config(&self) -> &SandboxConfig {
        &self.inner.config
    }

    /// Host paths visible (read-only) inside the jail.
    pub fn visible_paths(&self) -> &[PathBuf] {
        &self.inner.read_only
    }

    /// Whether `path` can be seen from inside the jail (always true when bare).
    pub fn exposes(&self, path: &Path) -> bool {
        if !self.isolation().is_isolated() {
            return true;
        }
        let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        self.inner.read_only.iter().any(|p| {
            let p = std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
            path.starts_with(p)
        })
    }

    async fn probe(&self) -> Result<()> {
        let truth = ["/usr/bin/true", "/bin/true"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.is_file());
        let Some(truth) = truth else { return Ok(()) };
        let report = self.run_program(&truth, Job::default()).await?;
        match report.termination {
            Termination::Exited { code: 0 } => Ok(()),
            other => Err(Error::ProbeFailed {
                detail: format!("{other:?}, stderr: {}", report.stderr.text),
            }),
        }
    }

    /// Runs one job with the configured program; waits for a free slot first.
    pub async fn run(&self, job: Job) -> Result<RunReport> {
        let program = self.inner.config.program.clone();
        self.run_program(&program, job).await
    }

    async fn run_program(&self, program: &Path, job: Job) -> Result<RunReport> {
        let _permit = self
            .inner
            .permits
            .acquire()
            .await
            .map_err(|_| Error::Closed)?;
        let lease = match self.isolation() {
            Isolation::Root => Some(UidLease::acquire(self.inner.config.uid_base)?),
            _ => None,
        };
        // Unique across every sandbox of this process (run folders are named by it).
        static RUNS: AtomicU64 = AtomicU64::new(0);
        let id = RUNS.fetch_add(1, Ordering::Relaxed);
        let uid = lease.as_ref().map_or(0, |l| l.uid);
        let span = info_span!("sandbox_run", id, uid);
        self.run_as(program, job, uid, id).instrument(span).await
    }

    async fn run_as(&self, program: &Path, job: Job, uid: u32, id: u64) -> Result<RunReport> {
        let config = &self.inner.config;
        let limits = job.limits.clone().unwrap_or_else(|| config.limits.clone());
        let mode = match self.isolation() {
            Isolation::Root => JailMode::Root { uid, gid: uid },
            // SAFETY: getuid/getgid have no preconditions.
            Isolation::UserNamespace => unsafe {
                JailMode::UserNamespace {
                    uid: libc::getuid(),
                    gid: libc::getgid(),
                }
            },
            Isolation::Bare => JailMode::Bare,
        };
        let run_dir = config
            .scratch
            .join(format!("run-{}-{id}", std::process::id()));
        let work = run_dir.join("work");
        let new_root = run_dir.join("root");
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::Io { path, source }
        };
        let _ = std::fs::remove_dir_all(&run_dir);
        std::fs::create_dir_all(&work).map_err(io(&work))?;
        std::fs::create_dir_all(&new_root).map_err(io(&new_root))?;
        for (name, source) in &job.files {
            if name.contains('/') || name.is_empty() || name == ".." {
                return Err(Error::BadPath {
                    path: PathBuf::from(name),
                });
            }
            let dst = work.join(name);
            match source {
                JobFile::Path(src) => std::fs::copy(src, &dst).map(drop).map_err(io(src))?,
                JobFile::Bytes(bytes) => std::fs::write(&dst, bytes).map_err(io(&dst))?,
            }
        }
        if let JailMode::Root { uid, gid } = mode {
            chown_tree(&work, uid, gid)?;
        }
        let plan = isolation::plan(mode, &self.inner.read_only, &work, &new_root, &limits)?;

        let mut command = tokio::process::Command::new(program);
        command
            .args(&job.args)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env(
                "HOME",
                if plan.mode == JailMode::Bare {
                    work.as_os_str()
                } else {
                    isolation::INSIDE_WORKDIR.as_ref()
                },
            )
            .env("TMPDIR", "/tmp")
            .env("LANG", "C.UTF-8")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("PYTHONHASHSEED", "0")
            .envs(config.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        // Settings this machine's numerical libraries need for correct results.
        for key in ["OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"] {
            if let Some(value) = std::env::var_os(key) {
                command.env(key, value);
            }
        }
        // SAFETY: `enter` performs only system calls on data prepared above.
        unsafe {
            command.pre_exec(move || plan.enter());
        }
        let started = Instant::now();
        let mut child = command.spawn().map_err(|source| Error::Spawn {
            program: program.display().to_string(),
            source,
        })?;
        let pid = child.id().expect("running child has a pid") as i32;
        let keep = limits.output_bytes;
        let stdout = tokio::spawn(capture(child.stdout.take().expect("piped"), keep));
        let stderr = tokio::spawn(capture(child.stderr.take().expect("piped"), keep));

        let waited = tokio::time::timeout(limits.wall_time(), child.wait()).await;
        // Whatever happened, nothing of the run may outlive it: the process
        // group, then (root mode) every process of the run's uid.
        // SAFETY: signalling a process group we created.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
        let (status, timed_out) = match waited {
            Ok(status) => (
                status.map_err(|source| Error::Spawn {
                    program: program.display().to_string(),
                    source,
                })?,
                false,
            ),
            Err(_) => (
                child.wait().await.map_err(|source| Error::Spawn {
                    program: program.display().to_string(),
                    source,
                })?,
                true,
            ),
        };
        let wall_time = started.elapsed();
        if let JailMode::Root { uid, .. } = mode {
            let rounds = tokio::task::spawn_blocking(move || isolation::sweep_uid(uid))
                .await
                .expect("sweeper")?;
            if rounds > 0 {
                debug!(uid, rounds, "killed leftover processes of the run's uid");
            }
        }
        let drain = Duration::from_secs(2);
        let stdout = join_capture(stdout, drain).await;
        let stderr = join_capture(stderr, drain).await;

        let termination = Termination::from_status(status, timed_out);
        let max = if job.collect_max_bytes == 0 {
            64 << 20
        } else {
            job.collect_max_bytes
        };
        let mut files = BTreeMap::new();
        for name in &job.collect {
            if let Some(bytes) = read_regular(&work.join(name), max) {
                files.insert(name.clone(), bytes);
            }
        }
        if let Err(err) = std::fs::remove_dir_all(&run_dir) {
            warn!(dir = %run_dir.display(), %err, "could not remove a run folder");
        }
        let uid = match mode {
            JailMode::Root { uid, .. } => Some(uid),
            _ => None,
        };
        Ok(RunReport::new(
            termination,
            wall_time,
            stdout,
            stderr,
            files,
            self.isolation(),
            uid,
            &limits,
        ))
    }
}

async fn join_capture(handle: tokio::task::JoinHandle<Captured>, wait: Duration) -> Captured {
    match tokio::time::timeout(wait, handle).await {
        Ok(Ok(captured)) => captured,
        _ => Captured {
            text: String::new(),
            total_bytes: 0,
            truncated: true,
        },
    }
}

/// A uid reserved for one run, machine-wide, by an exclusive flock on its
/// lock file; released when dropped (or when the process dies).
struct UidLease {
    uid: u32,
    _file: std::fs::File,
}

impl UidLease {
    const RANGE: u32 = 1024;

    fn acquire(base: u32) -> Result<Self> {
        use std::os::fd::AsRawFd;
        let dir = std::env::temp_dir().join("wmrl-sandbox-uids");
        std::fs::create_dir_all(&dir).map_err(|source| Error::Io {
            path: dir.clone(),
            source,
        })?;
        for uid in base..base + Self::RANGE {
            let path = dir.join(format!("{uid}.lock"));
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
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
            reason: format!("all {} sandbox uids from {base} are in use", Self::RANGE),
        })
    }
}

/// `path` with its folder resolved to a real, absolute path and its file name kept.
fn real_folder(path: &Path) -> Result<PathBuf> {
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let absolute = std::path::absolute(path).map_err(io)?;
    let (Some(parent), Some(name)) = (absolute.parent(), absolute.file_name()) else {
        return Err(Error::BadPath {
            path: path.to_path_buf(),
        });
    };
    Ok(std::fs::canonicalize(parent).map_err(io)?.join(name))
}

/// Reads a file the run left, refusing symlinks and anything not a regular file.
fn read_regular(path: &Path, max: u64) -> Option<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(max).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// Hands the work folder to the run's uid.
fn chown_tree(dir: &Path, uid: u32, gid: u32) -> Result<()> {
    let io = |source| Error::Io {
        path: dir.to_path_buf(),
        source,
    };
    std::os::unix::fs::chown(dir, Some(uid), Some(gid)).map_err(io)?;
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        std::os::unix::fs::lchown(&path, Some(uid), Some(gid))
            .map_err(|source| Error::Io { path, source })?;
    }
    Ok(())
}
