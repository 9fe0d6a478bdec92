//! What the hostile tests share: a sandbox around a shell or Python, jobs
//! from a script, and checks that the host is left as it was.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use wmrl_sandbox::{Job, JobFile, Limits, RunReport, Sandbox, SandboxConfig};

/// A Python every user can run (the project venv may live under /root).
pub fn python() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    ["/usr/bin/python3", "/usr/local/bin/python3"]
        .into_iter()
        .map(PathBuf::from)
        .chain([root.join(".venv/bin/python")])
        .find(|p| {
            std::process::Command::new(p)
                .args(["-c", "pass"])
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

fn python_prefixes(python: &Path) -> Vec<PathBuf> {
    let out = std::process::Command::new(python)
        .args([
            "-c",
            "import sys; print(sys.prefix); print(sys.base_prefix)",
        ])
        .output()
        .expect("python runs");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(PathBuf::from)
        .collect()
}

/// Small limits so that every case ends in a second or two.
pub fn small() -> Limits {
    Limits {
        wall_time_s: 10.0,
        cpu_time_s: 5,
        address_space: 1 << 30,
        file_size: 16 << 20,
        processes: 32,
        output_bytes: 16 << 10,
        tmp_size: 8 << 20,
        work_size: 16 << 20,
        inodes: 256,
        memory: 512 << 20,
        cpus: 1.0,
        ..Limits::default()
    }
}

/// A sandbox and its scratch folder (removed with it).
pub struct Jail {
    pub sandbox: Sandbox,
    _scratch: tempfile::TempDir,
}

impl std::ops::Deref for Jail {
    type Target = Sandbox;
    fn deref(&self) -> &Sandbox {
        &self.sandbox
    }
}

/// A sandbox running `program`; `None` (after saying why) when this machine
/// isolates nothing, since every hostile case needs the jail.
pub async fn sandbox(program: &Path, read_only: Vec<PathBuf>, limits: Limits) -> Option<Jail> {
    let scratch = tempfile::tempdir().unwrap();
    let config = SandboxConfig {
        read_only,
        scratch: scratch.path().join("scratch"),
        limits,
        max_concurrent: 2,
        ..SandboxConfig::new(program)
    };
    match Sandbox::new(config).await {
        Ok(sandbox) => Some(Jail {
            sandbox,
            _scratch: scratch,
        }),
        Err(wmrl_sandbox::Error::NoIsolation { reason }) => {
            eprintln!("skipped: no isolation on this machine ({reason})");
            None
        }
        Err(e) => panic!("sandbox does not start: {e}"),
    }
}

/// A sandbox around `/bin/sh`.
pub async fn shell(limits: Limits) -> Option<Jail> {
    sandbox(Path::new("/bin/sh"), Vec::new(), limits).await
}

/// A sandbox around Python; `None` (after saying why) without one.
pub async fn python_sandbox(limits: Limits) -> Option<Jail> {
    let Some(python) = python() else {
        eprintln!("skipped: no python3 on this machine");
        return None;
    };
    let prefixes = python_prefixes(&python);
    sandbox(&python, prefixes, limits).await
}

/// A name no other process or file on the machine has, to find leftovers by.
pub fn marker(case: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "wmrl-hostile-{case}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A job running `script` saved as `file` (whose name shows in the command
/// line of the processes that run it, and so can be looked for afterwards).
pub fn job(file: &str, script: &str) -> Job {
    Job {
        args: vec![file.into()],
        files: vec![(file.into(), JobFile::Bytes(script.as_bytes().into()))],
        collect: vec!["out.txt".into()],
        ..Job::default()
    }
}

/// Live processes (not zombies) whose command line contains `needle`.
pub fn processes_with(needle: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let status = std::fs::read_to_string(entry.path().join("status")).unwrap_or_default();
        let zombie = status
            .lines()
            .any(|l| l.starts_with("State:") && (l.contains("Z") || l.contains("X")));
        if !zombie && String::from_utf8_lossy(&cmdline).contains(needle) {
            out.push(pid);
        }
    }
    out
}

/// Asserts the host shows no trace of run `marker` (no process, no file in
/// the shared temporary folders) and no leftover of the run's uid or folder.
pub fn assert_host_clean(sandbox: &Sandbox, report: &RunReport, marker: &str) {
    let mut left = processes_with(marker);
    for _ in 0..100 {
        if left.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        left = processes_with(marker);
    }
    assert!(
        left.is_empty(),
        "processes of the run outlived it: {left:?}"
    );
    if let Some(uid) = report.uid {
        assert_eq!(
            wmrl_sandbox::uids::live_processes(uid),
            0,
            "processes of uid {uid} outlived the run"
        );
    }
    for dir in ["/tmp", "/dev/shm", "/var/tmp"] {
        let found = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().contains(marker));
        assert!(!found, "the run left a file in the host's {dir}");
    }
    let scratch = &sandbox.config().scratch;
    let runs: Vec<_> = std::fs::read_dir(scratch).unwrap().flatten().collect();
    assert!(runs.is_empty(), "run folders left in {}", scratch.display());
}

/// Runs `job` and returns the report (the machine's own failures panic);
/// prints one line of what happened (`--nocapture` shows them).
pub async fn run(sandbox: &Sandbox, job: Job) -> RunReport {
    let case = job.args.first().map(|a| a.to_string_lossy().into_owned());
    let report = sandbox.run(job).await.expect("the sandbox itself works");
    eprintln!(
        "outcome: {} | {:?} | limit {:?} (claimed {:?}) | {:.2} s | {:?}, cgroups {}",
        case.unwrap_or_default(),
        report.termination,
        report.limit_hit,
        report.limit_claimed,
        report.wall_time.as_secs_f64(),
        report.isolation,
        sandbox.cgroups().is_available()
    );
    report
}
