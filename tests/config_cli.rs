//! `wmrl config list` and `wmrl config show` end to end: what `show` prints
//! loads back as the same config, and bad names and overrides fail clearly.

use std::process::{Command, Output};

fn wmrl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wmrl"))
        .args(args)
        .output()
        .expect("wmrl runs")
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

#[test]
fn list_names_every_kinds_shipped_configs() {
    let text = stdout(&wmrl(&["config", "list"]));
    assert!(text.contains("policy") && text.contains("tiny"), "{text}");
    assert!(text.contains("train") && text.contains("demo"), "{text}");
    let json: serde_json::Value =
        serde_json::from_slice(&wmrl(&["--json", "config", "list"]).stdout).unwrap();
    assert!(json["wm"].as_array().unwrap().iter().any(|n| n == "small"));
}

#[test]
fn show_prints_a_loadable_config_with_overrides_applied() {
    let dir = tempfile::tempdir().unwrap();
    let text = stdout(&wmrl(&[
        "config",
        "show",
        "train",
        "demo",
        "--set",
        "iterations=7",
    ]));
    assert!(text.contains("iterations = 7"), "{text}");
    // Defaults the shipped file leaves out are printed too.
    assert!(text.contains("starved_after"), "{text}");
    let file = dir.path().join("resolved.toml");
    std::fs::write(&file, &text).unwrap();
    let again = stdout(&wmrl(&["config", "show", "train", file.to_str().unwrap()]));
    assert_eq!(again, text, "a printed config loads back unchanged");

    let json: serde_json::Value = serde_json::from_str(&stdout(&wmrl(&[
        "config", "show", "policy", "tiny", "--format", "json",
    ])))
    .unwrap();
    assert!(json["model"].is_object() && json["train"].is_object());
}

#[test]
fn unknown_names_and_fields_are_refused_by_name() {
    let out = wmrl(&["config", "show", "wm", "no-such-config"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no-such-config") && err.contains("small"),
        "{err}"
    );

    let out = wmrl(&["config", "show", "train", "demo", "--set", "iteratoins=3"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("iteratoins"), "{err}");
}
