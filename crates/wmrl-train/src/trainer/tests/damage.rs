//! A damaged newest checkpoint (a truncated, altered or deleted file, as a
//! full disk or a failing drive leaves it): the run resumes from the one
//! before and ends bit for bit as a straight run; `--strict` refuses; with
//! every checkpoint damaged the refusal names each and changes nothing.

use super::*;

/// Three iterations of a tiny `wmrl` run, a checkpoint after each.
const CONFIG: &str = r#"
    tasks = [5]
    iterations = 3
    eval_every = 3
    eval_states = 1
    [core]
    mode = "wmrl-no-debias"
    groups = 4
    group_size = 2
    anchor_ratio = 0.5
    [core.calibrator]
    min_pairs = 2
    [executor]
    envs = 4
    max_steps = 16
"#;

/// How a file is damaged.
#[derive(Debug, Clone, Copy)]
enum Harm {
    Truncate,
    FlipByte,
    Delete,
}

fn harm(path: &Path, how: Harm) {
    match how {
        Harm::Truncate => {
            let bytes = std::fs::read(path).unwrap();
            std::fs::write(path, &bytes[..bytes.len() / 2]).unwrap();
        }
        Harm::FlipByte => {
            let mut bytes = std::fs::read(path).unwrap();
            let i = bytes.len() / 3;
            bytes[i] ^= 0x10;
            std::fs::write(path, bytes).unwrap();
        }
        Harm::Delete => std::fs::remove_file(path).unwrap(),
    }
}

/// Copies folder `from` to `to`, recursively.
fn copy_dir(from: &Path, to: &Path) {
    for (rel, bytes) in snapshot(from) {
        let path = to.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
}

#[test]
fn a_damaged_newest_checkpoint_resumes_from_the_one_before() {
    let dir = tempfile::tempdir().unwrap();
    let (policy, wm) = checkpoints(dir.path());
    let config = test_config(CONFIG);
    assert_eq!(config.checkpoint_keep, 2, "the documented default");

    let straight = dir.path().join("straight");
    VlaTrainer::new(config.clone(), &policy, &wm, &straight, tch::Device::Cpu)
        .unwrap()
        .run(&mut |_, _| {})
        .unwrap();
    let stopped = dir.path().join("stopped");
    let mut first =
        VlaTrainer::new(config.clone(), &policy, &wm, &stopped, tch::Device::Cpu).unwrap();
    first.run_until(2, &mut |_, _| {}).unwrap();
    drop(first);
    let newest = Path::new("checkpoints/iter-000002");
    assert!(
        stopped
            .join("checkpoints/iter-000001/MANIFEST.json")
            .exists()
    );

    // Every file of the newest checkpoint, each harmed in each way in turn.
    let files: Vec<PathBuf> = snapshot(&stopped.join(newest)).into_keys().collect();
    assert!(files.len() >= 8, "{files:?}");
    for file in &files {
        for how in [Harm::Truncate, Harm::FlipByte, Harm::Delete] {
            let run = dir.path().join("case");
            let _ = std::fs::remove_dir_all(&run);
            copy_dir(&stopped, &run);
            harm(&run.join(newest).join(file), how);
            let name = file.to_string_lossy();
            let resumed = VlaTrainer::resume(&run, tch::Device::Cpu)
                .unwrap_or_else(|e| panic!("{name} {how:?}: {e}"));
            assert_eq!(resumed.completed_iterations(), 1, "{name} {how:?}");
            let from = resumed.resumed_from().unwrap();
            assert!(from.dir.ends_with("iter-000001"), "{name} {how:?}");
            let said = from.skipped.join("; ");
            // A harmed manifest makes the folder unfinished (deleted),
            // unreadable, or names the file whose checksum it now
            // misstates; any other harm is named by file.
            let named = name == wmrl_report::MANIFEST_FILE || said.contains(name.as_ref());
            assert!(
                named && said.contains("iter-000002"),
                "{name} {how:?}: {said}"
            );
        }
    }

    // One damaged run, resumed and run to the end, is the straight run bit
    // for bit (the damaged folder is replaced by the re-trained iteration).
    let run = dir.path().join("resumed");
    copy_dir(&stopped, &run);
    harm(
        &run.join(newest).join("world_model/replay.wmlat"),
        Harm::FlipByte,
    );
    let mut resumed = VlaTrainer::resume(&run, tch::Device::Cpu).unwrap();
    resumed.run(&mut |_, _| {}).unwrap();
    let bits = |run: &Path| std::fs::read(run.join("policy/model.safetensors")).unwrap();
    assert!(
        bits(&straight) == bits(&run),
        "policy differs from the straight run's"
    );
    let rows = |run: &Path| -> Vec<serde_json::Value> {
        wmrl_report::metrics::read_rows(&run.join("metrics.jsonl"))
            .unwrap()
            .iter()
            .map(deterministic_part)
            .collect()
    };
    assert_eq!(rows(&straight), rows(&run), "metrics cut back and re-run");
    assert_eq!(rows(&run).len(), 3);
    for it in [2, 3] {
        let ck = checkpoint::checkpoint_dir(&run, it);
        wmrl_report::manifest::verify(&ck).unwrap();
    }
    assert!(!checkpoint::checkpoint_dir(&run, 1).exists(), "two kept");
}

#[test]
fn strict_refuses_and_all_damaged_is_refused_naming_each() {
    let dir = tempfile::tempdir().unwrap();
    let (policy, wm) = checkpoints(dir.path());
    let config = test_config(CONFIG);
    let run = dir.path().join("run");
    let mut first = VlaTrainer::new(config, &policy, &wm, &run, tch::Device::Cpu).unwrap();
    first.run_until(2, &mut |_, _| {}).unwrap();
    drop(first);
    harm(
        &run.join("checkpoints/iter-000002/learner/optimizer.safetensors"),
        Harm::FlipByte,
    );
    let before = snapshot(&run);

    let err = VlaTrainer::resume_with(&run, tch::Device::Cpu, OnDamage::Refuse)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("iter-000002")
            && err.contains("learner/optimizer.safetensors")
            && err.contains("--strict"),
        "{err}"
    );
    assert!(snapshot(&run) == before, "a refused resume changed the run");

    harm(
        &run.join("checkpoints/iter-000001/state.json"),
        Harm::Truncate,
    );
    let before = snapshot(&run);
    let err = VlaTrainer::resume(&run, tch::Device::Cpu)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("no checkpoint verifies")
            && err.contains("iter-000002")
            && err.contains("learner/optimizer.safetensors")
            && err.contains("iter-000001")
            && err.contains("state.json is"),
        "{err}"
    );
    assert!(snapshot(&run) == before, "a refused resume changed the run");
}
