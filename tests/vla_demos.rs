//! Demonstration files: round trip, and corrupt, truncated or unusable data is
//! detected and named.

use std::path::Path;

use wmrl_vla::demos::{DemoDataset, Manifest, ManifestTask, read_episode, write_episode};
use wmrl_vla::{Error, VlaConfig, sft, synthetic};

fn options() -> wmrl_vla::demos::DatasetOptions {
    sft::dataset_options(&VlaConfig::load("tiny", &[]).unwrap())
}

#[test]
fn episode_round_trips_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let episode = synthetic::episodes(1, 5, 24, 7).remove(0);
    let path = dir.path().join("a.demo");
    write_episode(&path, &episode).unwrap();
    assert_eq!(read_episode(&path).unwrap(), episode);
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        names.len(),
        1,
        "a temporary file was left behind: {names:?}"
    );
}

#[test]
fn perturbed_steps_round_trip_and_must_lie_inside_the_episode() {
    let dir = tempfile::tempdir().unwrap();
    let mut episode = synthetic::episodes(1, 5, 24, 7).remove(0);
    episode.meta.perturbed_steps = vec![1, 2];
    let path = dir.path().join("a.demo");
    write_episode(&path, &episode).unwrap();
    assert_eq!(read_episode(&path).unwrap(), episode);
    episode.meta.perturbed_steps = vec![1, 5];
    let err = write_episode(&dir.path().join("b.demo"), &episode)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("perturbed step") && err.contains("below 5"),
        "{err}"
    );
    assert!(!dir.path().join("b.demo").exists());
}

fn written(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("task0").join("000.demo");
    write_episode(&path, &synthetic::episodes(1, 6, 24, 3).remove(0)).unwrap();
    path
}

#[test]
fn truncated_file_is_named_with_both_lengths() {
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path());
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 100]).unwrap();
    let err = read_episode(&path).unwrap_err();
    assert!(
        matches!(err, Error::TruncatedDemo { expected, found, .. } if expected == bytes.len() as u64 && found + 100 == expected)
    );
    let message = err.to_string();
    assert!(
        message.contains("000.demo") && message.contains("truncated"),
        "{message}"
    );
    // The dataset loader stops on it too, naming the file.
    let err = DemoDataset::load(dir.path(), &options())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("000.demo") && err.contains("truncated"),
        "{err}"
    );
}

#[test]
fn flipped_byte_fails_the_sections_checksum() {
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path());
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 10; // inside the last section (wrist frames)
    bytes[last] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    match read_episode(&path).unwrap_err() {
        Error::ChecksumMismatch {
            section,
            path: named,
            ..
        } => {
            assert_eq!(section, "wrist_view");
            assert_eq!(named, path);
        }
        other => panic!("expected a checksum error, got {other}"),
    }
    std::fs::write(&path, b"not a demo at all, but long enough").unwrap();
    let err = read_episode(&path).unwrap_err().to_string();
    assert!(err.contains("magic"), "{err}");
}

#[test]
fn empty_folder_stops_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let err = DemoDataset::load(dir.path(), &options()).unwrap_err();
    assert!(matches!(err, Error::EmptyDataset { .. }));
    assert!(err.to_string().contains("wmrl data collect"), "{err}");
}

#[test]
fn task_without_a_successful_demo_stops_training() {
    let dir = tempfile::tempdir().unwrap();
    let mut episodes = synthetic::episodes(2, 4, 24, 5);
    for e in episodes.iter_mut().filter(|e| e.meta.task_index == 1) {
        e.meta.success = false;
    }
    for (i, e) in episodes.iter().enumerate() {
        write_episode(&dir.path().join(format!("{i}.demo")), e).unwrap();
    }
    let err = DemoDataset::load(dir.path(), &options()).unwrap_err();
    match &err {
        Error::NoSuccessfulDemo {
            task_index,
            episodes,
            ..
        } => assert_eq!((*task_index, *episodes), (1, 2)),
        other => panic!("expected NoSuccessfulDemo, got {other}"),
    }
    assert!(
        err.to_string().contains(synthetic::INSTRUCTIONS[1]),
        "{err}"
    );

    // A task that the manifest lists but that has no files at all is caught too.
    let dir = tempfile::tempdir().unwrap();
    for (i, e) in synthetic::episodes(2, 4, 24, 5)
        .iter()
        .enumerate()
        .filter(|(_, e)| e.meta.task_index == 0)
    {
        write_episode(&dir.path().join(format!("{i}.demo")), e).unwrap();
    }
    let task = |i: usize| ManifestTask {
        task_index: i,
        task_name: format!("synthetic_{i}"),
        instruction: synthetic::INSTRUCTIONS[i].into(),
        episodes: 2,
        successes: 2,
    };
    let manifest = Manifest {
        format: "wmrl-demos".into(),
        suite: "synthetic".into(),
        tasks: vec![task(0), task(1)],
        info: serde_json::Value::Null,
    };
    manifest.write(&dir.path().join("manifest.json")).unwrap();
    let err = DemoDataset::load(dir.path(), &options()).unwrap_err();
    assert!(
        matches!(
            err,
            Error::NoSuccessfulDemo {
                task_index: 1,
                episodes: 0,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn dataset_holds_out_whole_episodes_and_masks_chunk_tails() {
    let episodes = synthetic::episodes(10, 3, 40, 9);
    let mut opts = options();
    opts.val_fraction = 0.2;
    let data = DemoDataset::from_episodes(Path::new("mem"), &episodes, None, &opts).unwrap();
    assert_eq!(data.tasks.len(), 2);
    assert!(
        data.tasks
            .iter()
            .all(|t| t.train_episodes == 8 && t.val_episodes == 2)
    );
    assert_eq!(data.train.len(), 16 * 3);
    assert_eq!(data.val.as_ref().unwrap().len(), 4 * 3);
    assert_eq!(
        data.train.agent_view.size(),
        vec![48, 3, 32, 32],
        "frames resized to the model's 32×32"
    );
    // Observation t of a 3-step episode has 3 - t valid chunk slots.
    let valid: Vec<f32> =
        Vec::try_from(data.train.mask.sum_dim_intlist(1, false, tch::Kind::Float)).unwrap();
    assert_eq!(&valid[..3], &[3.0, 2.0, 1.0]);
}
