//! `cargo xtask`: the project's task runner.
//!
//! It finds or installs libtorch (see [`libtorch`]), then runs cargo with
//! `LIBTORCH` and `LD_LIBRARY_PATH` set so that everything links and runs
//! without a manual step. A second run reuses the venv and starts in seconds.
//! Commands that run `wmrl` build it first with cargo's progress shown, and
//! print one `xtask:` line per stage with its time, so a first build (many
//! minutes on a small machine) does not look like a hang.

mod libtorch;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, ExitStatus};
use std::time::Instant;

const USAGE: &str = "\
cargo xtask <COMMAND> [ARGS...]

Commands:
  demo  [ARGS]   run the main job on the embedded default (`wmrl demo ARGS`)
  test  [ARGS]   build and run every test in the workspace (`cargo test --workspace ARGS`)
  bench [ARGS]   whole-system benchmarks, release build (`wmrl bench ARGS`, default: all --json)
  env            print the shell exports to use `cargo` or `target/*/wmrl` directly
  wmrl  [ARGS]   run the wmrl binary (release) with libtorch set up
  cargo [ARGS]   run any cargo command with libtorch set up

libtorch comes from $LIBTORCH when set (it must be PyTorch 2.11.0), else from
the project-local .venv/, created on first use with `python3 -m venv` and
`pip install -r xtask/python-requirements.txt`.";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the repository root")
        .to_path_buf()
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(command) = args.next() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let rest: Vec<String> = args.collect();
    // The wmrl profile to build first (with progress), if any, and the cargo command.
    let (build, cargo_args): (Option<Profile>, Vec<String>) = match command.as_str() {
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        "test" => (None, strings(&["test", "--workspace"], rest)),
        "demo" => (
            Some(Profile::Debug),
            wmrl_run(Profile::Debug, &["demo"], rest),
        ),
        "bench" => {
            let rest = if rest.is_empty() {
                vec!["all".into(), "--json".into()]
            } else {
                rest
            };
            let run = wmrl_run(Profile::Release, &["bench"], rest);
            (Some(Profile::Release), run)
        }
        "wmrl" => (
            Some(Profile::Release),
            wmrl_run(Profile::Release, &[], rest),
        ),
        "cargo" => (None, rest),
        "env" => (None, Vec::new()),
        other => {
            eprintln!("xtask: unknown command `{other}`\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };

    let repo = repo_root();
    let started = Instant::now();
    let torch = match libtorch::locate(&repo) {
        Ok(torch) => torch,
        Err(err) => {
            eprintln!("xtask: error: {err}");
            return ExitCode::FAILURE;
        }
    };
    let env = torch.env();
    if command == "env" {
        println!("# libtorch {} ({:?})", torch.version, torch.source);
        println!("export LIBTORCH='{}'", torch.dir.display());
        println!(
            "export LD_LIBRARY_PATH='{}'${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}",
            torch.dir.join("lib").display()
        );
        println!("unset LIBTORCH_USE_PYTORCH");
        return ExitCode::SUCCESS;
    }
    eprintln!(
        "xtask: libtorch {} ready at {} ({:.1}s)",
        torch.version,
        torch.dir.display(),
        started.elapsed().as_secs_f64()
    );

    if let Some(profile) = build {
        let name = profile.name();
        eprintln!("xtask: building wmrl ({name}; a first build takes minutes)");
        let started = Instant::now();
        let build_args = strings(&["build", "--bin", "wmrl"], profile.flag());
        match cargo(&repo, &env, &build_args) {
            Ok(status) if status.success() => {}
            other => return exit_code(other),
        }
        eprintln!(
            "xtask: wmrl ({name}) built in {:.0}s",
            started.elapsed().as_secs_f64()
        );
    }
    exit_code(cargo(&repo, &env, &cargo_args))
}

/// The build profile of the `wmrl` binary.
#[derive(Clone, Copy)]
enum Profile {
    Debug,
    Release,
}

impl Profile {
    fn name(self) -> &'static str {
        match self {
            Profile::Debug => "debug",
            Profile::Release => "release",
        }
    }

    /// The cargo flag selecting this profile.
    fn flag(self) -> Vec<String> {
        match self {
            Profile::Debug => Vec::new(),
            Profile::Release => vec!["--release".into()],
        }
    }
}

/// `head` followed by `rest`, as owned strings.
fn strings(head: &[&str], rest: Vec<String>) -> Vec<String> {
    head.iter().map(|s| s.to_string()).chain(rest).collect()
}

/// `cargo run [profile] --quiet --bin wmrl -- <sub> <rest>`: quiet because the
/// build step before it has already shown cargo's output.
fn wmrl_run(profile: Profile, sub: &[&str], rest: Vec<String>) -> Vec<String> {
    let mut args = strings(&["run"], profile.flag());
    args.extend(strings(&["--quiet", "--bin", "wmrl", "--"], Vec::new()));
    args.extend(strings(sub, rest));
    args
}

/// Runs cargo in the repository with libtorch's environment.
fn cargo(repo: &Path, env: &[(String, OsString)], args: &[String]) -> std::io::Result<ExitStatus> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(args)
        .current_dir(repo)
        .env_remove("LIBTORCH_USE_PYTORCH");
    for (key, value) in env {
        cmd.env(key, value);
    }
    cmd.status()
}

/// The process exit code for cargo's outcome.
fn exit_code(status: std::io::Result<ExitStatus>) -> ExitCode {
    match status {
        Ok(status) if status.success() => ExitCode::SUCCESS,
        Ok(status) => ExitCode::from(
            status
                .code()
                .and_then(|c| u8::try_from(c).ok())
                .unwrap_or(1),
        ),
        Err(err) => {
            eprintln!("xtask: cannot run cargo: {err}");
            ExitCode::FAILURE
        }
    }
}
