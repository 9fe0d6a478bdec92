//! One run, host side: stage the job's files, create the run's cgroups,
//! spawn the jailed child, enforce the wall clock, kill whatever is left,
//! gather the kernel's evidence of the limits hit, read the outputs back
//! through the work folder's descriptor, and clean up.

use std::collections::BTreeMap;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::time::{Duration, Instant};

use tracing::{debug, warn};

use crate::capture::{Captured, capture};
use crate::cgroup::RunCgroup;
use crate::evidence::Evidence;
use crate::isolation::{self, INSIDE_ID, Isolation, PlanInput};
use crate::jail::JailMode;
use crate::jail_fs::receive_fds;
use crate::report::{RunReport, Termination};
use crate::sandbox::{Inner, Job};
use crate::{Error, Result, files, uids};

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.to_path_buf();
    move |source| Error::Io { path, source }
}

fn spawn_err(program: &Path) -> impl FnOnce(std::io::Error) -> Error {
    let program = program.display().to_string();
    move |source| Error::Spawn { program, source }
}

/// A connected pair of unix sockets (close-on-exec): parent end, child end.
fn socket_pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: socketpair fills two descriptors that we then own.
    unsafe {
        if libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
        Ok((OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])))
    }
}

/// Opens the host folder `dir` without following a link at its place.
fn open_dir(dir: &Path) -> Result<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(dir)
        .map(OwnedFd::from)
        .map_err(io_err(dir))
}

/// Waits, without reaping it, until process `pid` has exited: while it is a
/// zombie its pid (and process group id) cannot be reused.
async fn exited(pid: i32) {
    let _ = tokio::task::spawn_blocking(move || {
        loop {
            // SAFETY: waitid fills a zeroed siginfo; WNOWAIT leaves the child unreaped.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            let ret = unsafe {
                libc::waitid(
                    libc::P_PID,
                    pid as libc::id_t,
                    &mut info,
                    libc::WEXITED | libc::WNOWAIT,
                )
            };
            if ret == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                break;
            }
        }
    })
    .await;
}

/// A run's host folder, removed whatever way the run ends.
struct RunDir(std::path::PathBuf);

impl Drop for RunDir {
    fn drop(&mut self) {
        if let Err(err) = std::fs::remove_dir_all(&self.0) {
            warn!(dir = %self.0.display(), %err, "could not remove a run folder");
        }
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

/// Runs `job` with `program` as run `id` (uid `uid` in root mode).
pub(crate) async fn run_as(
    inner: &Inner,
    program: &Path,
    job: Job,
    uid: u32,
    id: u64,
) -> Result<RunReport> {
    let config = &inner.config;
    let limits = job.limits.clone().unwrap_or_else(|| config.limits.clone());
    let mode = match inner.isolation {
        Isolation::Root => JailMode::Root { uid, gid: uid },
        Isolation::UserNamespace => JailMode::UserNamespace {
            uid: INSIDE_ID,
            gid: INSIDE_ID,
        },
        Isolation::Bare => JailMode::Bare,
    };
    let isolated = mode != JailMode::Bare;
    let name = format!("run-{}-{id}", std::process::id());
    let run_dir = config.scratch.join(&name);
    let work = run_dir.join(if isolated { "in" } else { "work" });
    let new_root = run_dir.join("root");
    if std::fs::symlink_metadata(&run_dir).is_ok() {
        std::fs::remove_dir_all(&run_dir).map_err(io_err(&run_dir))?;
    }
    files::fresh_dir(&run_dir)?;
    let _remove = RunDir(run_dir.clone());
    files::fresh_dir(&work)?;
    files::fresh_dir(&new_root)?;
    let mut inputs = Vec::new();
    for (file, source) in &job.files {
        if file.contains('/') || file.is_empty() || file == "." || file == ".." {
            return Err(Error::BadPath { path: file.into() });
        }
        files::stage(&work.join(file), source)?;
        inputs.push(file.clone());
    }
    let cgroup = RunCgroup::create(&inner.cgroups, &name, &limits)?;
    let (parent_end, child_end) = socket_pair().map_err(io_err(&run_dir))?;
    let plan = isolation::plan(PlanInput {
        mode,
        read_only: &inner.read_only,
        work: &work,
        inputs: &inputs,
        new_root: &new_root,
        limits: &limits,
        cgroup_procs: cgroup
            .as_ref()
            .map(RunCgroup::procs_fds)
            .unwrap_or_default(),
        socket: child_end.as_raw_fd(),
    })?;

    let mut command = tokio::process::Command::new(program);
    command
        .args(&job.args)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env(
            "HOME",
            if isolated {
                isolation::INSIDE_WORKDIR.as_ref()
            } else {
                work.as_os_str()
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
    let mut child = command.spawn().map_err(spawn_err(program))?;
    drop(child_end);
    let pid = child.id().expect("running child has a pid") as i32;
    let keep = limits.output_bytes;
    let stdout = tokio::spawn(capture(child.stdout.take().expect("piped"), keep));
    let stderr = tokio::spawn(capture(child.stderr.take().expect("piped"), keep));
    // The work folder first, then (isolated) the private /tmp and /dev/shm.
    let folders = if isolated {
        // Sent by the child before it exec'd, so they are there once `spawn` returned.
        receive_fds(parent_end.as_raw_fd()).map_err(io_err(&work))
    } else {
        open_dir(&work).map(|fd| vec![fd])
    };

    let timed_out = tokio::time::timeout(limits.wall_time(), exited(pid))
        .await
        .is_err();
    // Whatever happened, nothing of the run may outlive it. The child is not
    // reaped yet, so its process group id still names the run's group.
    // SAFETY: signalling a process group we created.
    unsafe { libc::kill(-pid, libc::SIGKILL) };
    let status = child.wait().await.map_err(spawn_err(program))?;
    let wall_time = started.elapsed();
    if let JailMode::Root { uid, .. } = mode {
        let rounds = tokio::task::spawn_blocking(move || uids::sweep_uid(uid))
            .await
            .expect("sweeper")?;
        if rounds > 0 {
            debug!(uid, rounds, "killed leftover processes of the run's uid");
        }
    }
    let folders = folders?;
    let evidence = match cgroup {
        Some(group) => tokio::task::spawn_blocking(move || {
            let evidence = group.evidence();
            drop(group);
            evidence
        })
        .await
        .expect("cgroup removal"),
        None => Evidence::default(),
    };
    let borrowed: Vec<_> = folders.iter().map(AsFd::as_fd).collect();
    let evidence = evidence.with_folders(&borrowed, isolated, limits.file_size);
    let drain = Duration::from_secs(2);
    let stdout = join_capture(stdout, drain).await;
    let stderr = join_capture(stderr, drain).await;

    let termination = Termination::from_status(status, timed_out);
    let max = if job.collect_max_bytes == 0 {
        64 << 20
    } else {
        job.collect_max_bytes
    };
    let mut outputs = BTreeMap::new();
    for file in &job.collect {
        if let Some(bytes) = files::read_regular_at(borrowed[0], file, max) {
            outputs.insert(file.clone(), bytes);
        }
    }
    drop(borrowed);
    drop(folders);
    let uid = match mode {
        JailMode::Root { uid, .. } => Some(uid),
        _ => None,
    };
    Ok(RunReport::new(
        termination,
        wall_time,
        stdout,
        stderr,
        outputs,
        inner.isolation,
        uid,
        &limits,
        evidence,
    ))
}
