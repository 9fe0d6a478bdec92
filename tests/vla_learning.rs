//! Behaviour cloning learns: on synthetic demonstrations where the expert's
//! action depends on where a coloured patch is (image), which colour the
//! instruction names (language) and a proprioceptive sign (proprio), the tiny
//! model's loss falls and its greedy actions on *unseen* scenes are right far
//! above chance. Fixed seeds; runs on the CPU in well under a minute.

use tch::Device;
use wmrl_vla::demos::{DemoDataset, write_episode};
use wmrl_vla::{Decoding, PolicyInput, VlaConfig, checkpoint, sft, synthetic};

#[test]
fn behaviour_cloning_learns_image_language_and_proprio_conditioned_actions() {
    // One intra-op thread: results do not depend on the core count, and
    // libtorch's OpenMP workers do not spin against the other test binaries.
    tch::set_num_threads(1);
    let dir = tempfile::tempdir().unwrap();
    let demos = dir.path().join("demos");
    for (i, episode) in synthetic::episodes(300, 2, 32, 1).iter().enumerate() {
        write_episode(
            &demos.join(format!("task{}/{i:04}.demo", episode.meta.task_index)),
            episode,
        )
        .unwrap();
    }
    // A failed episode with wrong actions must not be cloned.
    let mut failed = synthetic::episodes(1, 2, 32, 2).remove(0);
    failed.meta.success = false;
    failed.labels.iter_mut().for_each(|a| *a = -*a);
    write_episode(&demos.join("task0/failed.demo"), &failed).unwrap();

    let config = VlaConfig::load(
        "tiny",
        &["train.steps=400".into(), "train.eval_every=200".into()],
    )
    .unwrap();
    let dataset = DemoDataset::load(&demos, &sft::dataset_options(&config)).unwrap();
    assert_eq!(dataset.tasks.iter().map(|t| t.episodes).sum::<usize>(), 601);
    let out = dir.path().join("run");
    let mut steps = 0;
    let summary = sft::train(&config, &dataset, Device::Cpu, &out, &mut |e| {
        if let sft::Progress::Step(_) = e {
            steps += 1
        }
    })
    .unwrap();
    assert_eq!(steps, 400);
    // Chance-level cross-entropy over 256 bins is ln 256 ≈ 5.5 nats.
    assert!(
        summary.first_loss > 3.0,
        "first loss {}",
        summary.first_loss
    );
    assert!(
        summary.final_loss < 0.25 * summary.first_loss,
        "{} -> {}",
        summary.first_loss,
        summary.final_loss
    );
    let val = summary.val.clone().expect("episodes were held out");
    assert!(
        val.accuracy > 0.9,
        "held-out token accuracy {}",
        val.accuracy
    );

    for file in [
        "config.json",
        "model.safetensors",
        "metrics.jsonl",
        "loss.png",
        "accuracy.png",
        "run.json",
    ] {
        assert!(out.join(file).is_file(), "{file} missing");
    }
    let rows = wmrl_report::metrics::read_rows(&out.join("metrics.jsonl")).unwrap();
    assert!(rows.iter().filter(|r| r.get("loss").is_some()).count() >= 40);
    assert!(rows.iter().any(|r| r.get("val_accuracy").is_some()));

    // Fresh scenes never seen in training, through the checkpoint and the plain-input API.
    let policy = checkpoint::load(&out, Device::Cpu).unwrap();
    let scenes: Vec<_> = synthetic::episodes(100, 1, 32, 99);
    let inputs: Vec<PolicyInput<'_>> = scenes
        .iter()
        .map(|e| PolicyInput {
            agent_view: &e.agent_view[0],
            wrist_view: &e.wrist_view[0],
            proprio: &e.proprio[..synthetic::PROPRIO_DIM],
            instruction: &e.meta.instruction,
        })
        .collect();
    let chunks = policy.predict(&inputs, Decoding::Greedy).unwrap();
    let mut right = [0usize; 7];
    for (chunk, scene) in chunks.iter().zip(&scenes) {
        let expected = &scene.actions[..7];
        for (d, hits) in right.iter_mut().enumerate() {
            *hits += usize::from((chunk.action(0)[d] - expected[d]).abs() < 0.05);
        }
    }
    let rate = |d: usize| right[d] as f64 / scenes.len() as f64;
    eprintln!(
        "per-dimension accuracy on unseen scenes: {:?}",
        (0..7).map(rate).collect::<Vec<_>>()
    );
    // Image-and-language dimensions: 50% without looking at the image.
    assert!(
        rate(0) >= 0.9 && rate(1) >= 0.9,
        "patch direction accuracy {:.2}, {:.2}",
        rate(0),
        rate(1)
    );
    // Language-only and proprio-only dimensions.
    assert!(
        rate(2) >= 0.95,
        "instruction-dependent dimension {:.2}",
        rate(2)
    );
    assert!(rate(6) >= 0.9, "proprio-dependent gripper {:.2}", rate(6));
}
