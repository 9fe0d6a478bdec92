//! `wmrl synth` and `wmrl demo` end to end: the table, JSON, metrics JSONL
//! and PNGs; bad settings are named.

use std::process::{Command, Output};

fn wmrl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wmrl"))
        .args(args)
        .output()
        .expect("wmrl runs")
}

const SMALL: [&str; 10] = [
    "--seeds",
    "2",
    "--steps",
    "20",
    "--set",
    "prompts=4",
    "--set",
    "core.groups=16",
    "--set",
    "actions=20",
];

#[test]
fn synth_writes_json_metrics_and_plots_for_every_mode() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().to_str().unwrap();
    let mut args = vec![
        "synth",
        "--json",
        "--scenario",
        "paper",
        "--scenario",
        "debias",
        "--out",
        out_dir,
    ];
    args.extend(SMALL);
    let out = wmrl(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let scenarios = v["scenarios"].as_array().unwrap();
    assert_eq!(scenarios.len(), 2);
    for s in scenarios {
        let modes = s["modes"].as_array().unwrap();
        assert_eq!(modes.len(), 6);
        assert!(
            modes
                .iter()
                .all(|m| m["final_true_reward"].as_f64().unwrap().is_finite())
        );
        assert_eq!(s["scenario"]["steps"], 20);
        let files = &s["files"];
        for key in ["reward_vs_executions", "reward_vs_steps"] {
            let png = files[key].as_str().unwrap();
            assert!(std::fs::metadata(png).unwrap().len() > 10_000, "{png}");
        }
        let metrics = std::fs::read_to_string(files["metrics"].as_str().unwrap()).unwrap();
        assert_eq!(metrics.lines().count(), 6 * 2 * 21);
    }
    assert!(dir.path().join("debias/summary.json").exists());

    // A second run into the same folder replaces the metrics instead of appending.
    let out = wmrl(&args);
    assert!(out.status.success());
    let metrics = std::fs::read_to_string(dir.path().join("paper/metrics.jsonl")).unwrap();
    assert_eq!(metrics.lines().count(), 6 * 2 * 21);
}

#[test]
fn synth_prints_a_table() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec![
        "synth",
        "--scenario",
        "denoise",
        "--mode",
        "wmrl",
        "--mode",
        "real",
        "--out",
        dir.path().to_str().unwrap(),
    ];
    args.extend(SMALL);
    let out = wmrl(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("scenario `denoise`") && text.contains("savings"),
        "{text}"
    );
    assert!(
        text.contains("\nreal ") && text.contains("\nwmrl "),
        "{text}"
    );
    assert!(
        text.contains("reward_vs_executions.png") && text.contains("metrics.jsonl"),
        "{text}"
    );
}

#[test]
fn synth_names_bad_settings() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().to_str().unwrap();
    let cases: [(&[&str], &str); 4] = [
        (&["--set", "world_model.nosie_sd=1"], "world_model.nosie_sd"),
        (&["--set", "core.anchor_ratio=2"], "anchor_ratio"),
        (&["--scenario", "nope"], "paper, binary, debias, denoise"),
        (&["--mode", "fast"], "wmrl-no-debias"),
    ];
    for (extra, expected) in cases {
        let mut args = vec!["synth", "--out", out_dir];
        args.extend(extra);
        let out = wmrl(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(expected),
            "{extra:?}: {err}"
        );
    }
}
