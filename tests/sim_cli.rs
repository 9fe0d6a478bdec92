//! End-to-end tests of `wmrl scene check|export` and `wmrl sim render|video|init-states|stress`.

use std::path::PathBuf;
use std::process::Command;

fn wmrl() -> Command {
    Command::new(env!("CARGO_BIN_EXE_wmrl"))
}

/// A file of the repository, e.g. a shipped scene or a test fixture.
fn repo_file(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(path)
}

const KITCHEN_SCENE8: &str =
    "scenes/libero_long/08_kitchen_scene8_put_both_moka_pots_on_the_stove.toml";

#[test]
fn scene_check_lists_a_bddl_task_and_a_toml_scene() {
    // The BDDL is the project's own: the shipped TOML scene, exported.
    let dir = tempfile::tempdir().unwrap();
    let bddl = dir
        .path()
        .join("KITCHEN_SCENE8_put_both_moka_pots_on_the_stove.bddl");
    let out = wmrl()
        .args(["scene", "export", "--format", "bddl", "--out"])
        .arg(&bddl)
        .arg(repo_file(KITCHEN_SCENE8))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = wmrl()
        .args(["scene", "check", "--json"])
        .arg(&bddl)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["format"], "bddl");
    assert_eq!(v["name"], "KITCHEN_SCENE8_put_both_moka_pots_on_the_stove");
    assert_eq!(v["objects"][0], "moka_pot_1: moka_pot");
    assert_eq!(v["goal"][2], "TurnOn flat_stove_1");
    assert_eq!(v["simulable"], true);

    let out = wmrl()
        .args(["scene", "check"])
        .arg(repo_file(KITCHEN_SCENE8))
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("flat_stove_1_cook_region") && text.contains("goal:"),
        "{text}"
    );

    // And back: BDDL to TOML on stdout gives the shipped scene.
    let out = wmrl()
        .args(["scene", "export", "--format", "toml"])
        .arg(&bddl)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let shipped = std::fs::read_to_string(repo_file(KITCHEN_SCENE8)).unwrap();
    let (a, b) = (
        wmrl_sim::scene::Scene::from_toml(&text, "stdout").unwrap(),
        wmrl_sim::scene::Scene::from_toml(&shipped, KITCHEN_SCENE8).unwrap(),
    );
    assert_eq!(a, b);
}

#[test]
fn scene_check_warns_on_unmodelled_types_and_fails_on_bad_files() {
    let out = wmrl()
        .args(["scene", "check", "--json"])
        .arg(repo_file(
            "crates/wmrl-sim/tests/fixtures/unmodelled_types.bddl",
        ))
        .output()
        .unwrap();
    assert!(out.status.success(), "unmodelled types only warn");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["warnings"][0]
            .as_str()
            .unwrap()
            .contains("espresso_machine")
    );

    let out = wmrl()
        .args(["scene", "check"])
        .arg(repo_file(
            "crates/wmrl-sim/tests/fixtures/unclosed_define.bddl",
        ))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unclosed_define.bddl:3"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "name = \"x\"\nproblem = 3\n").unwrap();
    let out = wmrl().args(["scene", "check"]).arg(&bad).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.toml:2"), "{err}");
}

#[test]
fn sim_render_writes_both_camera_pngs() {
    let dir = tempfile::tempdir().unwrap();
    let out = wmrl()
        .args(["sim", "render", "--task", "3", "--state", "2", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for name in ["task3_state2_agentview.png", "task3_state2_wrist.png"] {
        let img = image_size(&dir.path().join(name));
        assert_eq!(img, (128, 128), "{name}");
    }
}

#[test]
fn sim_init_states_saves_fifty_states() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("states.json");
    let out = wmrl()
        .args(["sim", "init-states", "--task", "6", "--out"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(v["states"].as_array().unwrap().len(), 50);
}

fn image_size(path: &std::path::Path) -> (u32, u32) {
    // PNG IHDR: width and height are big-endian u32 at bytes 16..24.
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[1..4], b"PNG");
    let w = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
    let h = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
    (w, h)
}

#[test]
fn sim_video_writes_an_animated_gif_of_the_expert() {
    let dir = tempfile::tempdir().unwrap();
    let gif = dir.path().join("episode.gif");
    let out = wmrl()
        .args([
            "--json", "sim", "video", "--task", "5", "--state", "0", "--size", "64", "--every",
            "4", "--out",
        ])
        .arg(&gif)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["episode"]["success"], true, "{v}");
    assert!(v["frames"].as_u64().unwrap() > 5);
    let bytes = std::fs::read(&gif).unwrap();
    assert_eq!(&bytes[..6], b"GIF89a");
}

#[test]
fn sim_stress_counts_execution_errors_and_rejects_bad_rates() {
    let dir = tempfile::tempdir().unwrap();
    let out = wmrl()
        .args(["sim", "stress", "--json", "--tasks", "5", "--states", "2"])
        .args(["--arm-noise", "0.2", "--gripper-flip", "0.4", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["perturbation"]["gripper_flip"], 0.4);
    assert_eq!(v["tasks"][0]["task"], 5);
    assert_eq!(v["tasks"][0]["episodes"], 2);
    assert_eq!(v["execution_errors"], 0);
    let peak = v["tasks"][0]["peak_speed"].as_f64().unwrap();
    assert!(peak > 0.0 && peak < 15.0, "peak body speed {peak} m/s");
    let rows = std::fs::read_to_string(dir.path().join("metrics.jsonl")).unwrap();
    assert_eq!(rows.lines().count(), 2);
    // A second sweep into the same folder replaces the rows of the first.
    let again = wmrl()
        .args(["sim", "stress", "--tasks", "5", "--states", "1", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(again.status.success());
    let rows = std::fs::read_to_string(dir.path().join("metrics.jsonl")).unwrap();
    assert_eq!(rows.lines().count(), 1, "{rows}");

    let out = wmrl()
        .args(["sim", "stress", "--gripper-flip", "1.5", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--gripper-flip") && err.contains("1.5"),
        "{err}"
    );
}
