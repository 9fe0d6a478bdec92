//! The jail on this machine: what a program inside sees and cannot do.
//! (Hostile solutions, case by case: `hostile_limits.rs` and
//! `hostile_escape.rs`; end to end through the research executor: the root
//! package's `tests/research_sandbox.rs`.)

use std::path::PathBuf;

use wmrl_sandbox::{Job, JobFile, Limits, Sandbox, SandboxConfig, Termination};

fn python() -> PathBuf {
    let root = std::fs::canonicalize(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).unwrap();
    let venv = root.join(".venv/bin/python");
    if venv.exists() {
        venv
    } else {
        PathBuf::from("/usr/bin/python3")
    }
}

fn python_prefixes(python: &PathBuf) -> Vec<PathBuf> {
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

/// A sandbox around Python and its scratch folder (removed with it). It may
/// be unisolated: an explicit opt-out, said on stderr, since this test also
/// checks the bare mode (machines without namespaces) where that is all
/// there is.
async fn sandbox(limits: Limits) -> (Sandbox, tempfile::TempDir) {
    let python = python();
    let scratch = tempfile::tempdir().unwrap();
    let config = SandboxConfig {
        read_only: python_prefixes(&python),
        scratch: scratch.path().join("scratch"),
        limits,
        require_isolation: false,
        ..SandboxConfig::new(python)
    };
    let sandbox = Sandbox::new(config).await.expect("sandbox starts");
    if !sandbox.isolation().is_isolated() {
        eprintln!(
            "SANDBOX NOT ISOLATED (explicit opt-out of this test): no namespaces here; only the \
             bare mode's fresh folder is checked"
        );
    }
    (sandbox, scratch)
}

fn script(code: &str) -> Job {
    Job {
        args: vec!["main.py".into()],
        files: vec![("main.py".into(), JobFile::Bytes(code.as_bytes().into()))],
        collect: vec!["out.txt".into()],
        ..Job::default()
    }
}

#[tokio::test]
async fn runs_in_a_fresh_folder_and_returns_its_files() {
    let (sandbox, _scratch) = sandbox(Limits {
        wall_time_s: 20.0,
        ..Limits::default()
    })
    .await;
    eprintln!("isolation: {}", sandbox.isolation());
    let report = sandbox
        .run(script(
            "import os\nprint(sorted(os.listdir('.')))\nopen('out.txt','w').write('hi')\nprint(os.getuid(), os.getcwd())",
        ))
        .await
        .unwrap();
    assert_eq!(
        report.termination,
        Termination::Exited { code: 0 },
        "{}",
        report.stderr.text
    );
    assert!(
        report.stdout.text.contains("['main.py']"),
        "{}",
        report.stdout.text
    );
    assert_eq!(
        report.files.get("out.txt").map(Vec::as_slice),
        Some(&b"hi"[..])
    );
    if sandbox.isolation().is_isolated() {
        assert!(
            report.stdout.text.contains("/sandbox"),
            "{}",
            report.stdout.text
        );
        // The repository (where tasks and their hidden answers live) is not there.
        let manifest_dir = env!("CARGO_MANIFEST_DIR");
        let probe = format!(
            "import os\nprint(os.path.exists({manifest_dir:?}), os.path.exists('/root/.ssh'), os.path.exists('/proc/1'))"
        );
        let report = sandbox.run(script(&probe)).await.unwrap();
        assert_eq!(
            report.stdout.text.trim(),
            "False False False",
            "{}",
            report.stderr.text
        );
    }
}
