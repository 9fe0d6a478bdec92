//! The `wmrl sft`, `wmrl data` and `wmrl eval` commands end to end, and their
//! bad-input behaviour (non-zero exit, the offending file named).

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output};

use wmrl_vla::demos::write_episode;
use wmrl_vla::synthetic;

fn wmrl<S: AsRef<OsStr>>(args: &[S]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wmrl"))
        .args(args)
        .env("OMP_NUM_THREADS", "1")
        .output()
        .expect("wmrl runs")
}

/// Whether `run/checkpoints/` holds a checkpoint folder with its manifest.
fn has_complete_checkpoint(run: &std::path::Path) -> bool {
    std::fs::read_dir(run.join("checkpoints"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| e.path().join("MANIFEST.json").exists())
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn synthetic_demos(dir: &Path) {
    for (i, episode) in synthetic::episodes(6, 3, 32, 4).iter().enumerate() {
        write_episode(&dir.join(format!("{i:03}.demo")), episode).unwrap();
    }
}

/// `wmrl --device cpu sft --demos DEMOS --config tiny [EXTRA…] --out OUT`.
fn tiny_sft(demos: &Path, out: &Path, extra: &[&str]) -> Output {
    let head = [
        "--device",
        "cpu",
        "sft",
        "--demos",
        demos.to_str().unwrap(),
        "--config",
        "tiny",
    ];
    wmrl(&[&head[..], extra, &["--out", out.to_str().unwrap()]].concat())
}

/// A `tiny` checkpoint after two behaviour-cloning steps on synthetic demos.
fn tiny_checkpoint(dir: &Path) -> std::path::PathBuf {
    let (demos, run_dir) = (dir.join("demos"), dir.join("run"));
    synthetic_demos(&demos);
    let sft = tiny_sft(&demos, &run_dir, &["--set", "train.steps=2"]);
    assert!(sft.status.success(), "{}", text(&sft));
    run_dir
}

#[test]
fn sft_writes_a_checkpoint_metrics_and_plots_and_refuses_to_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let (demos, out) = (dir.path().join("demos"), dir.path().join("run"));
    synthetic_demos(&demos);
    let args = [
        "--device",
        "cpu",
        "--json",
        "sft",
        "--demos",
        demos.to_str().unwrap(),
        "--config",
        "tiny",
    ];
    let run = wmrl(
        &[
            &args[..],
            &[
                "--set",
                "train.steps=6",
                "--set",
                "train.eval_every=3",
                "--out",
                out.to_str().unwrap(),
            ],
        ]
        .concat(),
    );
    assert!(run.status.success(), "{}", text(&run));
    let summary: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(summary["steps"], 6);
    for file in [
        "config.json",
        "model.safetensors",
        "metrics.jsonl",
        "loss.png",
        "accuracy.png",
    ] {
        assert!(out.join(file).is_file(), "{file} missing");
    }
    let before = std::fs::read(out.join("model.safetensors")).unwrap();
    let again = wmrl(&[&args[..], &["--out", out.to_str().unwrap()]].concat());
    assert!(!again.status.success());
    assert!(
        text(&again).contains("already holds a checkpoint"),
        "{}",
        text(&again)
    );
    assert_eq!(
        std::fs::read(out.join("model.safetensors")).unwrap(),
        before,
        "the old checkpoint was touched"
    );
}

#[test]
fn corrupt_demonstration_is_named_and_stops_sft_and_check() {
    let dir = tempfile::tempdir().unwrap();
    let demos = dir.path().join("demos");
    synthetic_demos(&demos);
    let victim = demos.join("004.demo");
    let bytes = std::fs::read(&victim).unwrap();
    std::fs::write(&victim, &bytes[..bytes.len() / 2]).unwrap();
    let out = dir.path().join("run");
    let run = tiny_sft(&demos, &out, &[]);
    assert!(!run.status.success());
    assert!(
        text(&run).contains("004.demo") && text(&run).contains("truncated"),
        "{}",
        text(&run)
    );
    assert!(!out.join("model.safetensors").exists());
    let check = wmrl(&["data", "check", demos.to_str().unwrap()]);
    assert!(!check.status.success());
    assert!(
        text(&check).contains("004.demo") && text(&check).contains("1 of 12"),
        "{}",
        text(&check)
    );
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let run = tiny_sft(&empty, &out, &[]);
    assert!(!run.status.success());
    assert!(text(&run).contains("no demonstrations"), "{}", text(&run));
}

#[test]
fn eval_runs_a_checkpoint_in_the_simulator_and_writes_a_report_and_gif() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = tiny_checkpoint(dir.path());
    // An untrained policy on two states of task 0 for 24 steps: it fails, and a GIF is written.
    let eval = wmrl(&[
        "--device",
        "cpu",
        "--json",
        "eval",
        "--checkpoint",
        run_dir.to_str().unwrap(),
        "--suite",
        "libero-long",
        "--tasks",
        "0",
        "--states",
        "2",
        "--envs",
        "2",
        "--max-steps",
        "24",
        "--gifs",
        "1",
    ]);
    assert!(eval.status.success(), "{}", text(&eval));
    let json: serde_json::Value = serde_json::from_slice(&eval.stdout).unwrap();
    let task = &json["report"]["tasks"][0];
    assert_eq!(task["task_index"], 0);
    assert_eq!(
        task["episodes"].as_u64().unwrap() + task["execution_errors"].as_u64().unwrap(),
        2
    );
    assert_eq!(
        json["report"]["env_steps"].as_u64().unwrap(),
        24 * task["episodes"].as_u64().unwrap()
    );
    assert!(run_dir.join("eval/eval.json").is_file());
    let gif = run_dir.join("eval/failure_task0_state0.gif");
    assert!(gif.is_file(), "{}", text(&eval));
    assert!(std::fs::read(&gif).unwrap().starts_with(b"GIF89a"));
    let bad = wmrl(&[
        "eval",
        "--checkpoint",
        run_dir.to_str().unwrap(),
        "--suite",
        "libero-90",
    ]);
    assert!(
        !bad.status.success() && text(&bad).contains("unknown suite"),
        "{}",
        text(&bad)
    );
}

#[test]
fn takeover_collection_records_the_expert_from_the_policys_state() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = tiny_checkpoint(dir.path());
    let out = dir.path().join("takeover");
    let collect = |steps: &str| {
        wmrl(&[
            "--device",
            "cpu",
            "--json",
            "demos",
            "collect",
            "--takeover",
            run_dir.to_str().unwrap(),
            "--takeover-steps",
            steps,
            "--tasks",
            "5",
            "--per-task",
            "2",
            "--image-size",
            "32",
            "--out",
            out.to_str().unwrap(),
        ])
    };
    let bad = collect("30..10");
    assert!(
        !bad.status.success() && text(&bad).contains("MIN is larger than MAX"),
        "{}",
        text(&bad)
    );
    let run = collect("5..9");
    assert!(run.status.success(), "{}", text(&run));
    let json: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    let policy_steps = json["policy_steps"].as_u64().unwrap();
    // The untrained policy cannot finish the task in 9 steps: both episodes
    // are handed over, after 5 to 9 policy steps each.
    assert_eq!(json["policy_finished"], 0, "{json}");
    assert!((10..=18).contains(&policy_steps), "{json}");
    let files = wmrl_vla::demos::dataset::episode_files(&out).unwrap();
    assert_eq!(files.len(), 2);
    for file in &files {
        let episode = wmrl_vla::demos::format::read_episode(file).unwrap();
        assert_eq!(episode.meta.source, "takeover");
        assert!(
            (5..=9).contains(&episode.meta.start_step),
            "{:?}",
            episode.meta
        );
        // The recording is the expert's part only: it ends at the step limit
        // counted from reset, or earlier on success.
        assert!(episode.meta.start_step + episode.steps() <= wmrl_sim::MAX_EPISODE_STEPS);
        assert!(
            episode.meta.success
                || episode.meta.start_step + episode.steps() == wmrl_sim::MAX_EPISODE_STEPS
        );
        assert_eq!(episode.agent_view.len(), episode.steps() + 1);
    }
    let check = wmrl(&["data", "check", out.to_str().unwrap()]);
    assert!(check.status.success(), "{}", text(&check));
}

#[test]
fn eval_runs_through_a_robot_daemon_over_zenoh() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = tiny_checkpoint(dir.path());
    let endpoint = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("tcp/127.0.0.1:{}", listener.local_addr().unwrap().port())
    };
    let mut daemon = Command::new(env!("CARGO_BIN_EXE_wmrl"))
        .args([
            "robots",
            "serve",
            "--id",
            "eval-robot",
            "--listen",
            &endpoint,
            "--camera-size",
            "32",
        ])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let eval = wmrl(&[
        "--device",
        "cpu",
        "--json",
        "eval",
        "--checkpoint",
        run_dir.to_str().unwrap(),
        "--tasks",
        "0",
        "--states",
        "2",
        "--max-steps",
        "24",
        "--gifs",
        "0",
        "--executor",
        "zenoh",
        "--connect",
        &endpoint,
    ]);
    let _ = daemon.kill();
    let _ = daemon.wait();
    assert!(eval.status.success(), "{}", text(&eval));
    let json: serde_json::Value = serde_json::from_slice(&eval.stdout).unwrap();
    assert_eq!(json["executor"], "zenoh");
    let task = &json["report"]["tasks"][0];
    assert_eq!(
        task["episodes"].as_u64().unwrap() + task["execution_errors"].as_u64().unwrap(),
        2
    );
    assert_eq!(
        json["report"]["env_steps"].as_u64().unwrap(),
        24 * task["episodes"].as_u64().unwrap()
    );
}

/// `wmrl wm collect`, `wm train`, `wm eval` and `bench wm` on the tiny
/// configs: the world model trains on demonstrations (successes) and
/// recorded policy rollouts (failures), reports its score quality with a
/// reliability plot, and the benchmark reports both throughputs; bad input
/// names the file.
#[test]
fn world_model_collect_train_eval_and_bench() {
    let dir = tempfile::tempdir().unwrap();
    let checkpoint = tiny_checkpoint(dir.path());
    let ckpt = checkpoint.to_str().unwrap();
    let rollouts = dir.path().join("rollouts.wmlat");
    let collect = wmrl(&[
        "--device",
        "cpu",
        "--json",
        "wm",
        "collect",
        "--policy",
        ckpt,
        "--out",
        rollouts.to_str().unwrap(),
        "--tasks",
        "0,5",
        "--states",
        "2",
        "--max-steps",
        "16",
        "--envs",
        "4",
    ]);
    assert!(collect.status.success(), "{}", text(&collect));
    let summary: serde_json::Value = serde_json::from_slice(&collect.stdout).unwrap();
    assert_eq!(summary["episodes"], 4, "{summary}");

    let wm_dir = dir.path().join("wm");
    let train = wmrl(&[
        "--device",
        "cpu",
        "--json",
        "wm",
        "train",
        "--policy",
        ckpt,
        "--demos",
        dir.path().join("demos").to_str().unwrap(),
        "--episodes",
        rollouts.to_str().unwrap(),
        "--config",
        "tiny",
        "--set",
        "train.steps=6",
        "--set",
        "train.log_every=2",
        "--out",
        wm_dir.to_str().unwrap(),
    ]);
    assert!(train.status.success(), "{}", text(&train));
    for file in [
        "world_model.safetensors",
        "world_model.json",
        "metrics.jsonl",
        "losses.png",
        "train.wmlat",
    ] {
        assert!(wm_dir.join(file).exists(), "{file}");
    }
    let info: serde_json::Value = serde_json::from_slice(&train.stdout).unwrap();
    assert_eq!(info["fit"]["steps"], 6, "{info}");
    assert_eq!(info["fit"]["episodes"], 12 + 4, "{info}");

    let eval = wmrl(&[
        "--device",
        "cpu",
        "--json",
        "wm",
        "eval",
        "--policy",
        ckpt,
        "--wm",
        wm_dir.to_str().unwrap(),
        "--episodes",
        rollouts.to_str().unwrap(),
    ]);
    assert!(eval.status.success(), "{}", text(&eval));
    let report: serde_json::Value = serde_json::from_slice(&eval.stdout).unwrap();
    assert_eq!(report["score"]["episodes"], 4, "{report}");
    assert!(report["score"]["brier"].as_f64().unwrap() >= 0.0);
    assert!(wm_dir.join("eval/reliability.png").exists());
    assert!(wm_dir.join("eval/wm_eval.json").exists());

    let bench = wmrl(&[
        "--device",
        "cpu",
        "--json",
        "bench",
        "wm",
        "--policy",
        ckpt,
        "--wm",
        wm_dir.to_str().unwrap(),
        "--simulated",
        "2",
        "--imagined",
        "8",
        "--envs",
        "2",
        "--max-steps",
        "16",
    ]);
    assert!(bench.status.success(), "{}", text(&bench));
    let figures: serde_json::Value = serde_json::from_slice(&bench.stdout).unwrap();
    let wm = &figures["wm"];
    assert_eq!(
        (
            wm["simulated_episodes"].as_u64(),
            wm["imagined_episodes"].as_u64()
        ),
        (Some(2), Some(8))
    );
    assert!(wm["episode_ratio"].as_f64().unwrap() > 0.0, "{figures}");

    // `wmrl train` post-trains the policy against this world model (one tiny iteration).
    let run_dir = dir.path().join("train-run");
    let small = [
        "--set",
        "iterations=1",
        "--set",
        "tasks=[0]",
        "--set",
        "eval_states=1",
        "--set",
        "executor.envs=2",
        "--set",
        "executor.max_steps=16",
        "--set",
        "core.groups=2",
        "--set",
        "core.group_size=2",
        "--set",
        "core.anchor_ratio=0.5",
    ];
    let train_args = |out: &str, extra: &[&str]| -> Vec<String> {
        let head = [
            "--device",
            "cpu",
            "--json",
            "train",
            "--policy",
            ckpt,
            "--wm",
            wm_dir.to_str().unwrap(),
            "--out",
            out,
        ];
        [&head[..], &small[..], extra]
            .concat()
            .into_iter()
            .map(String::from)
            .collect()
    };
    let args = train_args(run_dir.to_str().unwrap(), &[]);
    let trained = wmrl(&args);
    assert!(trained.status.success(), "{}", text(&trained));
    let summary: serde_json::Value = serde_json::from_slice(&trained.stdout).unwrap();
    assert_eq!(summary["executions"], 2, "{summary}");
    assert_eq!(summary["imagined"], 2, "{summary}");
    // The replay buffer starts from the world model's training episodes.
    assert_eq!(summary["replay_seeded"], 16, "{summary}");
    assert!(run_dir.join("policy/model.safetensors").exists());
    assert!(
        has_complete_checkpoint(&run_dir),
        "no checkpoint with a manifest"
    );
    // An unknown config key is named; a run folder is never reused.
    let args = train_args(
        dir.path().join("r2").to_str().unwrap(),
        &["--set", "core.groupz=3"],
    );
    let bad = wmrl(&args);
    assert!(
        !bad.status.success() && text(&bad).contains("groupz"),
        "{}",
        text(&bad)
    );
    let args = train_args(run_dir.to_str().unwrap(), &[]);
    let again = wmrl(&args);
    assert!(
        !again.status.success() && text(&again).contains("already holds a training run"),
        "{}",
        text(&again)
    );

    // `kill -9` in the middle of a run, then `--resume`: the run completes
    // with one metrics row per iteration, none lost, none twice.
    let killed_dir = dir.path().join("killed-run");
    let args = train_args(
        killed_dir.to_str().unwrap(),
        &["--set", "iterations=30", "--set", "eval_every=30"],
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_wmrl"))
        .args(&args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The newest complete checkpoint: the highest iteration whose folder has its manifest.
    let newest = || -> u64 {
        std::fs::read_dir(killed_dir.join("checkpoints"))
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().join("MANIFEST.json").exists())
            .filter_map(|e| e.file_name().to_str()?.strip_prefix("iter-")?.parse().ok())
            .max()
            .unwrap_or(0)
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    while newest() < 3 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.kill().unwrap(); // SIGKILL
    let _ = child.wait();
    let before = newest();
    assert!(
        (3..30).contains(&before),
        "killed mid-run: iteration {before}"
    );
    let resumed = wmrl(&[
        "--device",
        "cpu",
        "--json",
        "train",
        "--resume",
        killed_dir.to_str().unwrap(),
    ]);
    assert!(resumed.status.success(), "{}", text(&resumed));
    let rows: Vec<u64> = std::fs::read_to_string(killed_dir.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["iteration"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(rows, (1..=30).collect::<Vec<u64>>());
    let summary: serde_json::Value = serde_json::from_slice(&resumed.stdout).unwrap();
    assert_eq!(summary["executions"], 30 * 2, "{summary}");
    // A finished run goes on with more iterations; fewer than it completed are refused.
    let extend = |iterations: &str| {
        wmrl(&[
            "--device",
            "cpu",
            "--json",
            "train",
            "--resume",
            killed_dir.to_str().unwrap(),
            "--iterations",
            iterations,
        ])
    };
    let shorter = extend("29");
    assert!(
        !shorter.status.success() && text(&shorter).contains("at least the 30 iterations"),
        "{}",
        text(&shorter)
    );
    let extended = extend("31");
    assert!(extended.status.success(), "{}", text(&extended));
    let summary: serde_json::Value = serde_json::from_slice(&extended.stdout).unwrap();
    assert_eq!(summary["executions"], 31 * 2, "{summary}");
    let rows = std::fs::read_to_string(killed_dir.join("metrics.jsonl")).unwrap();
    assert_eq!(rows.lines().count(), 31);
    // The newest checkpoint damaged: `--strict` refuses naming the file;
    // without it the run resumes from the one before and finishes again.
    let optimizer = killed_dir.join("checkpoints/iter-000031/learner/optimizer.safetensors");
    let bytes = std::fs::read(&optimizer).unwrap();
    std::fs::write(&optimizer, &bytes[..bytes.len() / 2]).unwrap();
    let resume = |strict: bool| {
        let run = killed_dir.to_str().unwrap();
        let mut args = vec!["--device", "cpu", "train", "--resume", run];
        if strict {
            args.push("--strict");
        }
        wmrl(&args)
    };
    let refused = resume(true);
    assert!(
        !refused.status.success()
            && text(&refused).contains("learner/optimizer.safetensors is")
            && text(&refused).contains("--strict"),
        "{}",
        text(&refused)
    );
    let healed = resume(false);
    assert!(
        healed.status.success()
            && text(&healed).contains("passed over")
            && text(&healed).contains("iteration 30"),
        "{}",
        text(&healed)
    );
    let rows = std::fs::read_to_string(killed_dir.join("metrics.jsonl")).unwrap();
    assert_eq!(rows.lines().count(), 31);
    // `wmrl experiment`: two modes side by side, the ablation table written.
    let exp_dir = dir.path().join("experiment");
    let head = [
        "--device",
        "cpu",
        "experiment",
        "--policy",
        ckpt,
        "--wm",
        wm_dir.to_str().unwrap(),
        "--modes",
        "real,wmrl",
        "--seeds",
        "0",
        "--out",
        exp_dir.to_str().unwrap(),
    ];
    let args = [&head[..], &small[..]].concat();
    let exp = wmrl(&args);
    assert!(exp.status.success(), "{}", text(&exp));
    let table = std::fs::read_to_string(exp_dir.join("experiment.md")).unwrap();
    assert!(
        table.contains("| real |") && table.contains("| wmrl |") && table.contains("task 0 %"),
        "{table}"
    );
    assert!(exp_dir.join("success_vs_env_steps.png").exists());
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(exp_dir.join("experiment.json")).unwrap())
            .unwrap();
    assert_eq!(report["rows"][0]["mode"], "real", "{report}");
    assert_eq!(report["rows"][0]["seeds"], 1, "{report}");
    // Run again: finished runs are reused, not repeated.
    let before = std::fs::read(exp_dir.join("wmrl-seed0/metrics.jsonl")).unwrap();
    let again = wmrl(&args);
    assert!(again.status.success(), "{}", text(&again));
    assert_eq!(
        std::fs::read(exp_dir.join("wmrl-seed0/metrics.jsonl")).unwrap(),
        before
    );
    // A finished run whose last checkpoint is damaged is not reused: it is
    // resumed from the checkpoint before and ends as it did.
    let run0 = exp_dir.join("wmrl-seed0");
    let policy_before = std::fs::read(run0.join("policy/model.safetensors")).unwrap();
    let state = run0.join("checkpoints/iter-000001/state.json");
    let mut bytes = std::fs::read(&state).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x10;
    std::fs::write(&state, bytes).unwrap();
    let healed = wmrl(&args);
    assert!(healed.status.success(), "{}", text(&healed));
    assert!(
        std::fs::read(run0.join("policy/model.safetensors")).unwrap() == policy_before,
        "the re-run's policy differs"
    );
    wmrl_report::manifest::verify(&run0.join("checkpoints/iter-000001")).unwrap();
    let before = std::fs::read(run0.join("metrics.jsonl")).unwrap();
    // Another config on the same folder is refused by name, not reused...
    let other = [&args[..], &["--set", "grpo.lr=3e-4"]].concat();
    let refused = wmrl(&other);
    assert!(
        !refused.status.success()
            && text(&refused).contains("real-seed0")
            && text(&refused).contains("another config"),
        "{}",
        text(&refused)
    );
    // ...and more iterations extend the finished runs.
    let longer = [&args[..], &["--set", "iterations=2"]].concat();
    let extended = wmrl(&longer);
    assert!(extended.status.success(), "{}", text(&extended));
    let rows = std::fs::read_to_string(exp_dir.join("wmrl-seed0/metrics.jsonl")).unwrap();
    assert!(rows.starts_with(std::str::from_utf8(&before).unwrap()));
    assert_eq!(rows.lines().count(), 2);
    let table = std::fs::read_to_string(exp_dir.join("experiment.md")).unwrap();
    assert!(table.contains("2 iterations"), "{table}");

    // `wmrl bench train`: overlapped and sequential anchors, interleaved,
    // the same policy at the end.
    let bench_train = dir.path().join("bench-train");
    let head = [
        "--device",
        "cpu",
        "--json",
        "bench",
        "train",
        "--policy",
        ckpt,
        "--wm",
        wm_dir.to_str().unwrap(),
        "--iterations",
        "2",
        "--out",
        bench_train.to_str().unwrap(),
    ];
    let args = [&head[..], &small[..]].concat();
    let bench = wmrl(&args);
    assert!(bench.status.success(), "{}", text(&bench));
    let figures: serde_json::Value = serde_json::from_slice(&bench.stdout).unwrap();
    assert_eq!(figures["train"]["identical_policies"], true, "{figures}");
    assert!(
        figures["train"]["speedup"].as_f64().unwrap() > 0.0,
        "{figures}"
    );

    // `wmrl bench gradient`: reference steps of `real`, probed steps of a
    // mixed mode, every weight scored; a mode without both streams is
    // refused by name before anything runs.
    let bench_gradient = dir.path().join("bench-gradient");
    let head = [
        "--device",
        "cpu",
        "--json",
        "bench",
        "gradient",
        "--policy",
        ckpt,
        "--wm",
        wm_dir.to_str().unwrap(),
        "--modes",
        "wmrl-no-debias",
        "--steps",
        "2",
        "--reference-steps",
        "2",
        "--warmup",
        "0",
        "--out",
        bench_gradient.to_str().unwrap(),
    ];
    let args = [&head[..], &small[..]].concat();
    let bench = wmrl(&args);
    assert!(bench.status.success(), "{}", text(&bench));
    let figures: serde_json::Value = serde_json::from_slice(&bench.stdout).unwrap();
    assert_eq!(
        figures["gradient"]["reference"]["gradients"], 2,
        "{figures}"
    );
    let probed = &figures["gradient"]["modes"][0];
    assert_eq!(probed["mode"], "wmrl-no-debias", "{figures}");
    assert_eq!(probed["steps"], 2, "{figures}");
    // The core's weights, count weights and the ten default weights.
    assert_eq!(
        probed["estimators"].as_array().unwrap().len(),
        12,
        "{figures}"
    );
    let refused = wmrl(&[
        "bench",
        "gradient",
        "--policy",
        ckpt,
        "--wm",
        wm_dir.to_str().unwrap(),
        "--modes",
        "real",
    ]);
    assert!(
        !refused.status.success() && text(&refused).contains("--modes real"),
        "{}",
        text(&refused)
    );

    // Nothing to resume: named, non-zero.
    let missing = wmrl(&[
        "train",
        "--resume",
        dir.path().join("no-such-run").to_str().unwrap(),
    ]);
    assert!(
        !missing.status.success() && text(&missing).contains("no config.json"),
        "{}",
        text(&missing)
    );

    // A truncated episode file is named, and nothing is written.
    let bytes = std::fs::read(&rollouts).unwrap();
    std::fs::write(&rollouts, &bytes[..bytes.len() / 2]).unwrap();
    let bad = wmrl(&[
        "--device",
        "cpu",
        "wm",
        "eval",
        "--policy",
        ckpt,
        "--wm",
        wm_dir.to_str().unwrap(),
        "--episodes",
        rollouts.to_str().unwrap(),
        "--out",
        dir.path().join("bad").to_str().unwrap(),
    ]);
    assert!(!bad.status.success());
    let message = text(&bad);
    assert!(
        message.contains("rollouts.wmlat") && message.contains("truncated"),
        "{message}"
    );
    assert!(!dir.path().join("bad/wm_eval.json").exists());
    // Training into a folder that holds a world model is refused; nothing changes.
    let weights = std::fs::read(wm_dir.join("world_model.safetensors")).unwrap();
    let again = wmrl(&[
        "--device",
        "cpu",
        "wm",
        "train",
        "--policy",
        ckpt,
        "--demos",
        dir.path().join("demos").to_str().unwrap(),
        "--config",
        "tiny",
        "--out",
        wm_dir.to_str().unwrap(),
    ]);
    assert!(!again.status.success());
    assert!(
        text(&again).contains("already holds a world model"),
        "{}",
        text(&again)
    );
    assert_eq!(
        std::fs::read(wm_dir.join("world_model.safetensors")).unwrap(),
        weights
    );
    // A world model without successes in its data is refused with a reason.
    let refused = wmrl(&[
        "--device",
        "cpu",
        "wm",
        "train",
        "--policy",
        ckpt,
        "--demos",
        dir.path().join("demos").to_str().unwrap(),
        "--config",
        "tiny",
        "--out",
        dir.path().join("wm2").to_str().unwrap(),
    ]);
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("both successes and failures"),
        "{}",
        text(&refused)
    );
}

#[test]
fn demo_runs_every_stage_then_reuses_its_cache() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let first = wmrl(&["--device", "cpu", "demo", "--smoke", "--out", out]);
    assert!(first.status.success(), "{}", text(&first));
    let stdout = String::from_utf8_lossy(&first.stdout);
    let run = dir.path().join("run-1");
    assert!(
        stdout.contains("(SFT) ->") && stdout.contains(run.to_str().unwrap()),
        "{stdout}"
    );
    // How much the run leaned on the world model, with the demo's twin pairing.
    assert!(
        stdout.contains("world-model stream: ") && stdout.contains("paired with imagined twins"),
        "{stdout}"
    );
    for file in [
        "success_vs_env_steps.png",
        "success_vs_wallclock.png",
        "metrics.jsonl",
        "policy/model.safetensors",
    ] {
        assert!(run.join(file).exists(), "{file}");
    }
    assert!(
        has_complete_checkpoint(&run),
        "no checkpoint with a manifest"
    );
    assert!(!stdout.contains("(cached)"), "{stdout}");
    // Second run: stages 1–4 come from the cache, the run gets a new folder.
    let second = wmrl(&["--device", "cpu", "demo", "--smoke", "--out", out]);
    assert!(second.status.success(), "{}", text(&second));
    let stdout = String::from_utf8_lossy(&second.stdout);
    assert_eq!(stdout.matches("(cached)").count(), 4, "{stdout}");
    assert!(dir.path().join("run-2/metrics.jsonl").exists());
}
