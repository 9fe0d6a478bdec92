//! [`Sandbox`]: runs jobs (a program, its arguments and input files) each in a
//! fresh folder under the jail of `jail`, at most `max_concurrent` at
//! a time (a tokio semaphore), and reports how each ended.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Semaphore;
use tracing::{Instrument, info_span, warn};

use crate::cgroup::CgroupSupport;
use crate::files;
use crate::isolation::{ETC_FROM_HOST, Isolation, SYSTEM_PATHS};
use crate::report::{RunReport, Termination};
use crate::uids::{DEFAULT_LEASE_DIR, DEFAULT_UID_BASE, UidLease};
use crate::{Error, Limits, Result};

/// How a [`Sandbox`] is set up.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// The program every job runs (e.g. the venv's python); it and `read_only`
    /// must be readable by an unprivileged uid once bound (no default: required).
    pub program: PathBuf,
    /// Host paths bound read-only at the same place inside the jail, besides
    /// [`SYSTEM_PATHS`] and [`ETC_FROM_HOST`] (default: empty; add the
    /// interpreter's prefixes).
    pub read_only: Vec<PathBuf>,
    /// Folder for the runs' fresh folders; it must be owned by this user and
    /// writable by it only, and is created so (default: `$TMPDIR/wmrl-sandbox-<euid>`).
    pub scratch: PathBuf,
    /// Most runs at once (default: available cores).
    pub max_concurrent: usize,
    /// Limits of each run (default: [`Limits::default`]).
    pub limits: Limits,
    /// First uid of the per-run identities in root mode (default:
    /// [`DEFAULT_UID_BASE`]). Each run leases a free uid in
    /// `uid_base..uid_base + `[`UID_RANGE`](crate::uids::UID_RANGE) (see [`crate::uids`]), so runs of
    /// any process on the machine never share a uid. They need no passwd entry.
    pub uid_base: u32,
    /// Root-owned folder of the uid leases (default: [`DEFAULT_LEASE_DIR`]).
    pub lease_dir: PathBuf,
    /// Refuse to start when only [`Isolation::Bare`] is available (default:
    /// true). Turning it off is an explicit opt-out: solutions then read the
    /// host's files and reach its network, and every start says so loudly.
    pub require_isolation: bool,
    /// A delegated cgroup v2 folder to create the runs' cgroups in (default:
    /// none: `<cgroup2 mount>/wmrl-sandbox` as root, or cgroup v1; see [`crate::cgroup`]).
    pub cgroup_parent: Option<PathBuf>,
    /// Extra environment variables for every job (default: thread counts of BLAS/OpenMP set to 1).
    pub env: Vec<(String, String)>,
}

impl SandboxConfig {
    /// A configuration with defaults for `program`.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        // SAFETY: geteuid has no preconditions.
        let euid = unsafe { libc::geteuid() };
        Self {
            program: program.into(),
            read_only: Vec::new(),
            scratch: std::env::temp_dir().join(format!("wmrl-sandbox-{euid}")),
            max_concurrent: std::thread::available_parallelism().map_or(1, |n| n.get()),
            limits: Limits::default(),
            uid_base: DEFAULT_UID_BASE,
            lease_dir: PathBuf::from(DEFAULT_LEASE_DIR),
            require_isolation: true,
            cgroup_parent: None,
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
pub(crate) struct Inner {
    pub(crate) config: SandboxConfig,
    pub(crate) isolation: Isolation,
    pub(crate) read_only: Vec<PathBuf>,
    pub(crate) cgroups: CgroupSupport,
    permits: Semaphore,
}

/// What the uid of this process is (root can use the per-run uid mode).
fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

impl Sandbox {
    /// Creates the sandbox and finds which isolation works here by running
    /// `true` in the strongest available jail (root, then user namespace).
    ///
    /// Fails with [`Error::NoIsolation`] where neither works, unless
    /// `require_isolation` is off; with [`Error::UnsafeFolder`] where the
    /// scratch or lease folder could be controlled by someone else.
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
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        files::checked_dir(
            &config.scratch,
            me,
            "a folder (not a link) owned by this user, writable by it only, under folders only \
             it or root can change",
        )?;
        let mut read_only: Vec<PathBuf> = SYSTEM_PATHS
            .iter()
            .chain(ETC_FROM_HOST.iter())
            .map(PathBuf::from)
            .collect();
        for extra in &extras {
            if !read_only.iter().any(|p| extra.starts_with(p)) {
                read_only.push(extra.clone());
            }
        }
        let slots = config.max_concurrent.max(1);
        // Root without CAP_SYS_ADMIN (a container) fails the first probe and
        // gets the user-namespace mode where the kernel allows it.
        let candidates: &[Isolation] = if is_root() {
            &[Isolation::Root, Isolation::UserNamespace, Isolation::Bare]
        } else {
            &[Isolation::UserNamespace, Isolation::Bare]
        };
        let cgroups = CgroupSupport::detect(config.cgroup_parent.as_deref());
        if let CgroupSupport::Unavailable { reason } = &cgroups {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| {
                warn!(
                    "sandbox runs get no cgroup ({reason}): memory, process and CPU limits hold per \
                     process (rlimits), not per run"
                )
            });
        }
        let mut sandbox = Self {
            inner: Arc::new(Inner {
                isolation: candidates[0],
                read_only,
                cgroups,
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
                // A misconfigured folder is an error to fix, not a reason to isolate less.
                Err(err @ Error::UnsafeFolder { .. }) => return Err(err),
                Err(err) => failures.push(format!("{candidate:?}: {err}")),
            }
        }
        if sandbox.isolation() == Isolation::Bare {
            let why = failures.join("; ");
            if sandbox.inner.config.require_isolation {
                return Err(Error::NoIsolation { reason: why });
            }
            warn!(
                "SANDBOX NOT ISOLATED (require_isolation is off): namespaces are not available here \
                 ({why}); solutions can read every file this user can, including hidden answers, and \
                 reach the network. Only rlimits, cgroups, the seccomp filter and the wall clock apply."
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

    /// The cgroups runs get.
    pub fn cgroups(&self) -> &CgroupSupport {
        &self.inner.cgroups
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
            Isolation::Root => {
                let config = &self.inner.config;
                Some(UidLease::acquire(config.uid_base, &config.lease_dir)?)
            }
            _ => None,
        };
        // Unique across every sandbox of this process (run folders are named by it).
        static RUNS: AtomicU64 = AtomicU64::new(0);
        let id = RUNS.fetch_add(1, Ordering::Relaxed);
        let uid = lease.as_ref().map_or(0, |l| l.uid);
        let span = info_span!("sandbox_run", id, uid);
        crate::run::run_as(&self.inner, program, job, uid, id)
            .instrument(span)
            .await
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
