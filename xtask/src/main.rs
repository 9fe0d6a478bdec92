//! `cargo xtask`: the project's task runner.
//!
//! It finds or installs libtorch (see [`libtorch`]), then runs cargo with
//! `LIBTORCH` and `LD_LIBRARY_PATH` set so that everything links and runs
//! without a manual step. A second run reuses the venv and starts in seconds.

mod libtorch;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
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
    let cargo_args: Vec<String> = match command.as_str() {
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        "test" => ["test", "--workspace"]
            .iter()
            .map(|s| s.to_string())
            .chain(rest)
            .collect(),
        "demo" => wmrl_run(&[], "demo", rest),
        "bench" => {
            let rest = if rest.is_empty() {
                vec!["all".into(), "--json".into()]
            } else {
                rest
            };
            wmrl_run(&["--release"], "bench", rest)
        }
        "wmrl" => {
            let mut args = vec![
                "run".into(),
                "--release".into(),
                "--quiet".into(),
                "--bin".into(),
                "wmrl".into(),
                "--".into(),
            ];
            args.extend(rest);
            args
        }
        "cargo" => rest,
        "env" => Vec::new(),
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
        "xtask: libtorch {} at {} ({:.1}s)",
        torch.version,
        torch.dir.display(),
        started.elapsed().as_secs_f64()
    );

    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(&cargo_args)
        .current_dir(&repo)
        .env_remove("LIBTORCH_USE_PYTORCH");
    for (key, value) in env {
        cmd.env(key, value);
    }
    match cmd.status() {
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

/// `cargo run [profile] --bin wmrl -- <sub> <rest>`.
fn wmrl_run(profile: &[&str], sub: &str, rest: Vec<String>) -> Vec<String> {
    let mut args: Vec<String> = vec!["run".into()];
    args.extend(profile.iter().map(|s| s.to_string()));
    args.extend(
        ["--quiet", "--bin", "wmrl", "--", sub]
            .iter()
            .map(|s| s.to_string()),
    );
    args.extend(rest);
    args
}
