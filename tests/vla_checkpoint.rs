//! Checkpoints round-trip exactly, and a mismatched architecture is refused
//! with the tensor's name and both shapes.

use tch::Device;
use wmrl_vla::{
    Decoding, Error, PolicyInput, Tokenizer, VlaConfig, VlaPolicy, checkpoint, synthetic,
};

fn tiny(overrides: &[&str]) -> VlaPolicy {
    let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    let config = VlaConfig::load("tiny", &overrides).unwrap();
    VlaPolicy::new(
        config.model,
        Tokenizer::from_instructions(synthetic::INSTRUCTIONS),
        Device::Cpu,
    )
    .unwrap()
}

#[test]
fn save_and_load_give_identical_logits_and_actions() {
    tch::manual_seed(11);
    let dir = tempfile::tempdir().unwrap();
    let mut policy = tiny(&[]);
    policy.set_proprio_stats(&[0.5; 15], &[2.0; 15]).unwrap();
    checkpoint::save(&policy, dir.path(), serde_json::json!({"note": "test"})).unwrap();
    let loaded = checkpoint::load(dir.path(), Device::Cpu).unwrap();
    assert_eq!(loaded.config(), policy.config());
    assert_eq!(loaded.tokenizer(), policy.tokenizer());

    let episodes = synthetic::episodes(3, 1, 48, 2);
    let inputs: Vec<PolicyInput<'_>> = episodes
        .iter()
        .map(|e| PolicyInput {
            agent_view: &e.agent_view[0],
            wrist_view: &e.wrist_view[0],
            proprio: &e.proprio[..15],
            instruction: &e.meta.instruction,
        })
        .collect();
    let (a, w, p, ids) = policy.input_tensors(&inputs).unwrap();
    let before = tch::no_grad(|| policy.logits(&a, &w, &p, &ids));
    let after = tch::no_grad(|| loaded.logits(&a, &w, &p, &ids));
    assert!(before.equal(&after), "logits differ after a round trip");
    assert_eq!(
        policy.predict(&inputs, Decoding::Greedy).unwrap(),
        loaded.predict(&inputs, Decoding::Greedy).unwrap()
    );
    let config = checkpoint::read_config(dir.path()).unwrap();
    assert_eq!(config.info["note"], "test");
    assert_eq!(config.model.action.binning.bins, 256);
}

#[test]
fn mismatched_architecture_names_the_tensor_and_both_shapes() {
    let dir = tempfile::tempdir().unwrap();
    checkpoint::save(&tiny(&[]), dir.path(), serde_json::Value::Null).unwrap();
    let weights = dir.path().join(checkpoint::WEIGHTS_FILE);

    let mut wider = tiny(&["model.latent_dim=48"]);
    let err = checkpoint::load_weights(&mut wider, &weights).unwrap_err();
    match &err {
        Error::ShapeMismatch {
            name,
            expected,
            found,
            ..
        } => {
            assert!(
                name.starts_with("latent_") || name.starts_with("trunk.in"),
                "{name}"
            );
            assert!(
                expected.contains(&48) && found.contains(&64),
                "{expected:?} vs {found:?}"
            );
        }
        other => panic!("expected a shape mismatch, got {other}"),
    }
    let message = err.to_string();
    assert!(
        message.contains("[48") || message.contains(", 48]") || message.contains("[48]"),
        "{message}"
    );
    assert!(message.contains("model.safetensors"), "{message}");

    let mut deeper = tiny(&["model.trunk_layers=2"]);
    let err = checkpoint::load_weights(&mut deeper, &weights).unwrap_err();
    assert!(
        matches!(&err, Error::MissingTensor { name, .. } if name.starts_with("trunk.block1.")),
        "{err}"
    );

    let mut shallower = tiny(&["model.trunk_layers=0"]);
    let err = checkpoint::load_weights(&mut shallower, &weights).unwrap_err();
    assert!(
        matches!(&err, Error::UnexpectedTensor { name, .. } if name.starts_with("trunk.block0.")),
        "{err}"
    );

    // A config.json edited to another architecture fails the same way on load.
    let path = dir.path().join(checkpoint::CONFIG_FILE);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
    json["model"]["vision"]["embed_dim"] = serde_json::json!(40);
    std::fs::write(&path, serde_json::to_string(&json).unwrap()).unwrap();
    // Unrecorded, the edit is damage: the manifest names the file.
    let err = checkpoint::load(dir.path(), Device::Cpu)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("config.json is") && err.contains("damaged"),
        "{err}"
    );
    // Recorded in the manifest, it is another architecture.
    wmrl_report::manifest::write(
        dir.path(),
        &[checkpoint::WEIGHTS_FILE, checkpoint::CONFIG_FILE],
    )
    .unwrap();
    let err = checkpoint::load(dir.path(), Device::Cpu)
        .unwrap_err()
        .to_string();
    assert!(err.contains("has shape") && err.contains("40"), "{err}");
}
