//! The trainer's tests: every mode end to end on a tiny policy and world
//! model, resume bit for bit, refusals, lost episodes, extension.

mod damage;
use super::*;
use wmrl_core::Mode;
use wmrl_core::seams::{AnchorExecutor, EpisodeRequest, Execution};
use wmrl_vla::rollout::{ClosedLoopActor, EpisodeRecord};

/// A run config from TOML text (test settings, no overrides).
fn test_config(text: &str) -> TrainConfig {
    TrainConfig::parse(text, "test", false, &[]).unwrap()
}

/// A tiny random policy and a tiny world model on its encoder, saved.
fn checkpoints(dir: &Path) -> (PathBuf, PathBuf) {
    checkpoints_of("tiny", &[], dir)
}

/// A random policy of architecture `vla_config` (with `overrides`) and a
/// tiny world model on its encoder, saved in `dir`.
fn checkpoints_of(vla_config: &str, overrides: &[String], dir: &Path) -> (PathBuf, PathBuf) {
    tch::manual_seed(0);
    let config = wmrl_vla::VlaConfig::load(vla_config, overrides).unwrap();
    let tasks = sim::suite_tasks();
    let tokenizer = wmrl_vla::Tokenizer::from_instructions(tasks.iter().map(|(_, t)| t.as_str()));
    let policy = wmrl_vla::VlaPolicy::new(config.model, tokenizer, tch::Device::Cpu).unwrap();
    let (p, w) = (dir.join("policy"), dir.join("wm"));
    wmrl_vla::checkpoint::save(&policy, &p, serde_json::Value::Null).unwrap();
    // Refresh every iteration, so that the world model's optimiser,
    // sampler RNG and replay buffer are exercised by every run (and
    // across a stop and resume).
    let mut wm_config = wmrl_wm::WmConfig::load("tiny", &[]).unwrap();
    wm_config.replay.refresh_every = 1;
    wm_config.replay.refresh_steps = 2;
    let model = wmrl_wm::LatentWorldModel::new(
        wm_config,
        Dims::of(&policy),
        policy.encoder_fingerprint(),
        tch::Device::Cpu,
    )
    .unwrap();
    wmrl_wm::checkpoint::save(&model, &w, serde_json::Value::Null).unwrap();
    (p, w)
}

/// The plots' band: the binomial standard error of a task's success
/// over its initial states, averaged over tasks as independent estimates.
#[test]
fn evaluation_standard_error_is_binomial_per_task() {
    let evaluation = |per_task: Vec<f64>| Evaluation {
        iteration: 0,
        env_steps: 0,
        train_seconds: 0.0,
        success: per_task.iter().sum::<f64>() / per_task.len().max(1) as f64,
        per_task,
    };
    let one = evaluation(vec![0.5]);
    assert!((one.standard_error(50) - (0.25f64 / 50.0).sqrt()).abs() < 1e-12);
    // A task at 0% adds no variance; the mean of two tasks halves the error.
    let two = evaluation(vec![0.5, 0.0]);
    assert!((two.standard_error(50) - (0.25f64 / 50.0).sqrt() / 2.0).abs() < 1e-12);
    assert!(evaluation(vec![]).standard_error(50).is_nan());
    assert!(one.standard_error(0).is_nan());
}

/// A measuring step executes and imagines but does not learn: the
/// imagined stream has a non-zero gradient over the trainable
/// parameters, the core's step advances, and the policy's weights and
/// the learner's counters are unchanged.
#[test]
fn measuring_gradients_runs_a_step_without_learning() {
    let dir = tempfile::tempdir().unwrap();
    let (policy, wm) = checkpoints(dir.path());
    let config = test_config(
        r#"
        tasks = [5]
        iterations = 2
        eval_every = 2
        eval_states = 1
        [core]
        # Raw scores: the imagined groups have reward variance even
        # though a random policy never succeeds in 16 steps.
        mode = "wmrl-no-debias"
        groups = 4
        group_size = 2
        anchor_ratio = 0.5
        [executor]
        envs = 4
        max_steps = 16
        "#,
    );
    let mut trainer = VlaTrainer::new(
        config,
        &policy,
        &wm,
        &dir.path().join("run"),
        tch::Device::Cpu,
    )
    .unwrap();
    let weights = |trainer: &VlaTrainer, name: &str| {
        let out = dir.path().join(name);
        wmrl_vla::checkpoint::save(trainer.learner().policy(), &out, serde_json::Value::Null)
            .unwrap();
        std::fs::read(out.join(wmrl_vla::checkpoint::WEIGHTS_FILE)).unwrap()
    };
    let before = weights(&trainer, "before");
    for step in 1..=2 {
        let measured = trainer.measure_gradients().unwrap();
        assert_eq!(
            (measured.anchor_samples, measured.world_model_samples),
            (4, 4)
        );
        let imagined = measured.world_model.expect("an imagined gradient");
        assert!(imagined.iter().any(|g| *g != 0.0));
        if let Some(anchor) = &measured.anchor {
            assert_eq!(anchor.len(), imagined.len());
        }
        assert_eq!(trainer.completed_iterations(), step);
    }
    assert_eq!(weights(&trainer, "after"), before);
    assert_eq!(trainer.learner().steps, 0);
}

#[test]
fn every_mode_runs_end_to_end_and_executes_anchors_at_the_configured_ratio() {
    let dir = tempfile::tempdir().unwrap();
    let (policy, wm) = checkpoints(dir.path());
    for mode in Mode::ALL {
        let mut config = test_config(
            r#"
            tasks = [5]
            iterations = 2
            eval_every = 2
            eval_states = 1
            [core]
            groups = 4
            group_size = 2
            anchor_ratio = 0.25
            [core.calibrator]
            min_pairs = 2
            [executor]
            envs = 4
            max_steps = 16
            "#,
        );
        config.core.mode = mode;
        let run = dir.path().join(mode.name());
        let mut trainer = VlaTrainer::new(config, &policy, &wm, &run, tch::Device::Cpu).unwrap();
        let summary = trainer.run(&mut |_, _| {}).unwrap();
        assert_eq!(summary.evaluations.len(), 2, "{mode}");
        let rows = wmrl_report::metrics::read_rows(&run.join("metrics.jsonl")).unwrap();
        assert_eq!(rows.len(), 2);
        let expected_anchor_groups = match mode {
            Mode::Real => 4,
            Mode::WmOnly => 0,
            _ => 1, // ceil(0.25 · 4)
        };
        for row in &rows {
            let core = &row["core"];
            assert_eq!(
                core["diagnostics"]["anchor_groups"], expected_anchor_groups,
                "{mode}: {row}"
            );
            assert_eq!(
                core["executions"],
                expected_anchor_groups * 2,
                "{mode}: {row}"
            );
            let imagined = if mode.uses_world_model() {
                (4 - expected_anchor_groups) * 2
            } else {
                0
            };
            assert_eq!(core["imagined"], imagined, "{mode}: {row}");
            assert!(
                row["learner"]["grad_norm"].as_f64().unwrap().is_finite(),
                "{mode}: {row}"
            );
        }
        // Every executed step was counted: at most 16 steps per anchor episode.
        let steps = summary.env_steps;
        assert!(
            steps <= 2 * expected_anchor_groups as u64 * 2 * 16
                && (steps > 0) == (expected_anchor_groups > 0),
            "{mode}: {steps}"
        );
        for file in [
            "config.json",
            "success_vs_env_steps.png",
            "success_vs_wallclock.png",
            "policy/model.safetensors",
            "reference_policy/model.safetensors",
            "checkpoints/iter-000002/MANIFEST.json",
            "checkpoints/iter-000002/learner/optimizer.safetensors",
            "checkpoints/iter-000002/world_model/replay.wmlat",
            "checkpoints/iter-000002/state.json",
        ] {
            assert!(run.join(file).exists(), "{mode}: {file}");
        }
        assert!(
            run.join("checkpoints/iter-000001/MANIFEST.json").exists()
                && !run.join("checkpoints/iter-000000").exists(),
            "{mode}: the newest two checkpoints are kept, older ones removed"
        );
        // A run folder is never reused.
        let again = VlaTrainer::new(TrainConfig::default(), &policy, &wm, &run, tch::Device::Cpu);
        assert!(
            again
                .unwrap_err()
                .to_string()
                .contains("already holds a training run")
        );
    }
}

/// Every file under `dir` with its bytes, by path relative to `dir`.
fn snapshot(dir: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    let mut files = std::collections::BTreeMap::new();
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                files.insert(path.strip_prefix(dir).unwrap().to_path_buf(), bytes);
            }
        }
    }
    files
}

/// The issue's bad input to a new or resumed run: a missing policy, a
/// world model or checkpoint of another architecture, a checkpoint of
/// another mode, a run without a complete checkpoint. Each is refused
/// naming the file or setting and what was expected, and a refused
/// resume leaves the run folder byte for byte as it was, the torn row
/// of the iteration in flight included.
#[test]
fn missing_or_incompatible_checkpoints_are_named_and_nothing_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let (policy, wm) = checkpoints(dir.path());
    // Another architecture: a wider latent, with its own world model.
    let (wide_policy, wide_wm) = checkpoints_of(
        "tiny",
        &["model.latent_dim=48".into()],
        &dir.path().join("wide"),
    );
    let config = test_config(
        r#"
        tasks = [5]
        iterations = 1
        eval_every = 1
        eval_states = 1
        [core]
        groups = 2
        group_size = 2
        anchor_ratio = 0.5
        [executor]
        envs = 2
        max_steps = 8
        "#,
    );
    let start = |policy: &Path, wm: &Path, run: &str| {
        let mut trainer = VlaTrainer::new(
            config.clone(),
            policy,
            wm,
            &dir.path().join(run),
            tch::Device::Cpu,
        )?;
        trainer.run(&mut |_, _| {})
    };
    let refused = |result: Result<TrainSummary>| result.map(|_| ()).unwrap_err().to_string();

    let err = refused(start(&dir.path().join("no-policy"), &wm, "r1"));
    assert!(err.contains("no-policy"), "{err}");
    let err = refused(start(&policy, &wide_wm, "r2"));
    assert!(
        err.contains("wide") && err.contains("sizes") && err.contains("48"),
        "{err}"
    );

    start(&policy, &wm, "run").unwrap();
    start(&wide_policy, &wide_wm, "wide-run").unwrap();
    let run = dir.path().join("run");
    let torn = "{\"iteration\":2,\"mo";
    {
        use std::io::Write;
        let mut metrics = std::fs::OpenOptions::new()
            .append(true)
            .open(run.join("metrics.jsonl"))
            .unwrap();
        write!(metrics, "{torn}").unwrap();
    }
    let before = snapshot(&run);
    let resume = || VlaTrainer::resume(&run, tch::Device::Cpu).map(|_| ());
    let assert_unchanged = || {
        assert!(
            snapshot(&run) == before,
            "a refused resume changed the run folder"
        )
    };

    // config.json edited to another mode than the checkpoint's.
    let config_path = run.join("config.json");
    let mut edited: serde_json::Value =
        serde_json::from_slice(&before[Path::new("config.json")]).unwrap();
    edited["core"]["mode"] = "real".into();
    std::fs::write(&config_path, edited.to_string()).unwrap();
    let err = resume().unwrap_err().to_string();
    assert!(
        err.contains("state.json") && err.contains("`wmrl` run") && err.contains("`real`"),
        "{err}"
    );
    std::fs::write(&config_path, &before[Path::new("config.json")]).unwrap();
    assert_unchanged();

    // The checkpoint's policy replaced by one of another architecture, its
    // manifests rewritten to match (an edit, not damage).
    let newest = Path::new("checkpoints/iter-000001");
    let weights = newest.join("learner/policy/model.safetensors");
    std::fs::copy(
        dir.path().join("wide-run").join(&weights),
        run.join(&weights),
    )
    .unwrap();
    wmrl_report::manifest::write_all(&run.join(newest).join("learner/policy")).unwrap();
    wmrl_report::manifest::write_all(&run.join(newest)).unwrap();
    let err = resume().unwrap_err().to_string();
    assert!(
        err.contains("model.safetensors") && err.contains("the model expects"),
        "{err}"
    );
    for file in [
        weights.clone(),
        newest.join("learner/policy/MANIFEST.json"),
        newest.join("MANIFEST.json"),
    ] {
        std::fs::write(run.join(&file), &before[&file]).unwrap();
    }
    assert_unchanged();

    // No complete checkpoint.
    std::fs::rename(run.join(CHECKPOINTS_DIR), dir.path().join("moved")).unwrap();
    let err = resume().unwrap_err().to_string();
    assert!(err.contains("no complete checkpoint"), "{err}");
    std::fs::rename(dir.path().join("moved"), run.join(CHECKPOINTS_DIR)).unwrap();
    assert_unchanged();

    // Put right, the run resumes where it stopped; the torn row goes.
    let resumed = VlaTrainer::resume(&run, tch::Device::Cpu).unwrap();
    assert_eq!(resumed.completed_iterations(), 1);
    let metrics = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
    assert_eq!(metrics.lines().count(), 1, "{metrics}");
    assert!(!metrics.contains(torn));
}

/// The simulator behind an executor that loses episodes after running
/// them (a robot dropping out mid-episode): on their first attempt, or
/// with `every_attempt` on every one.
struct LosesEpisodes {
    simulator: SimExecutor,
    every_attempt: bool,
}

impl<'p> AnchorExecutor<VlaAdapter, dyn ClosedLoopActor + 'p> for LosesEpisodes {
    type Error = wmrl_vla::Error;

    fn execute(
        &mut self,
        policy: &(dyn ClosedLoopActor + 'p),
        episodes: &[EpisodeRequest<'_, TaskPrompt>],
    ) -> std::result::Result<Vec<Execution<EpisodeRecord>>, wmrl_vla::Error> {
        let outcomes = self.simulator.execute(policy, episodes)?;
        Ok(outcomes
            .into_iter()
            .zip(episodes)
            .map(|(outcome, request)| match outcome {
                Execution::Completed { rollout, .. }
                    if self.every_attempt || request.attempt == 0 =>
                {
                    Execution::Failed {
                        reason: format!("robot lost after {} steps", rollout.steps),
                    }
                }
                other => other,
            })
            .collect())
    }
}

/// The issue's executor that errors mid-episode: each lost episode is
/// re-queued with a fresh seed and executed again, never recorded as a
/// task failure; an episode lost on every attempt stops the run with a
/// message naming it, and the run resumes from its last checkpoint.
#[test]
fn episodes_lost_mid_way_are_requeued_not_recorded_as_failures() {
    let dir = tempfile::tempdir().unwrap();
    let (policy, wm) = checkpoints(dir.path());
    let config = test_config(
        r#"
        tasks = [5]
        iterations = 2
        eval_every = 2
        eval_states = 1
        [core]
        groups = 4
        group_size = 2
        anchor_ratio = 0.5
        max_attempts = 2
        [executor]
        envs = 4
        max_steps = 16
        "#,
    );
    let lossy = |every_attempt: bool| {
        AnchorStream::new(
            "robots that drop out",
            LosesEpisodes {
                simulator: VlaTrainer::simulator_executor(&config),
                every_attempt,
            },
        )
    };

    let run = dir.path().join("lost-once");
    let mut trainer =
        VlaTrainer::new(config.clone(), &policy, &wm, &run, tch::Device::Cpu).unwrap();
    trainer.set_anchor_executor(lossy(false));
    let summary = trainer.run(&mut |_, _| {}).unwrap();
    // Two anchor groups of two per iteration, each episode lost once.
    assert_eq!(summary.executions, 2 * 4);
    let rows = wmrl_report::metrics::read_rows(&run.join("metrics.jsonl")).unwrap();
    assert_eq!(rows.len(), 2);
    for row in &rows {
        let core = &row["core"];
        assert_eq!(core["diagnostics"]["anchor_groups"], 2, "{row}");
        assert_eq!(core["executions"], 4, "{row}");
        assert_eq!(core["execution_failures"], 4, "{row}");
        assert!(row["anchor_success"].is_number(), "{row}");
    }

    let run = dir.path().join("lost-always");
    let mut trainer =
        VlaTrainer::new(config.clone(), &policy, &wm, &run, tch::Device::Cpu).unwrap();
    trainer.set_anchor_executor(lossy(true));
    let err = trainer.run(&mut |_, _| {}).unwrap_err().to_string();
    assert!(
        err.contains("failed to execute 2 times") && err.contains("robot lost after"),
        "{err}"
    );
    drop(trainer);
    let mut resumed = VlaTrainer::resume(&run, tch::Device::Cpu).unwrap();
    assert_eq!(resumed.completed_iterations(), 0);
    resumed.run(&mut |_, _| {}).unwrap();
    let rows = wmrl_report::metrics::read_rows(&run.join("metrics.jsonl")).unwrap();
    assert_eq!(rows.len(), 2);
}

/// Everything of a row that must not depend on a stop and resume
/// (wall-clock seconds do).
fn deterministic_part(row: &serde_json::Value) -> serde_json::Value {
    let mut row = row.clone();
    for key in [
        "simulator_seconds",
        "world_model_seconds",
        "learner_seconds",
        "train_seconds",
    ] {
        row.as_object_mut().unwrap().remove(key);
    }
    if let Some(eval) = row.get_mut("eval").and_then(|e| e.as_object_mut()) {
        eval.remove("train_seconds");
    }
    row
}

#[test]
fn overlapped_anchors_give_the_same_run_as_sequential_ones() {
    let dir = tempfile::tempdir().unwrap();
    let (policy, wm) = checkpoints(dir.path());
    let run = |overlap: bool, scoring: wmrl_core::AnchorScoring| {
        let mut config = test_config(
            r#"
            tasks = [5]
            iterations = 2
            eval_every = 2
            eval_states = 1
            [core]
            mode = "wmrl-no-debias"
            groups = 4
            group_size = 2
            anchor_ratio = 0.5
            [grpo]
            entropy_coef = 0.01
            [executor]
            envs = 4
            max_steps = 16
            "#,
        );
        config.overlap_anchors = overlap;
        config.core.anchor_scoring = scoring;
        let out = dir
            .path()
            .join(format!("overlap-{overlap}-{}", scoring.name()));
        VlaTrainer::new(config, &policy, &wm, &out, tch::Device::Cpu)
            .unwrap()
            .run(&mut |_, _| {})
            .unwrap();
        let rows: Vec<serde_json::Value> =
            wmrl_report::metrics::read_rows(&out.join("metrics.jsonl"))
                .unwrap()
                .iter()
                .map(deterministic_part)
                .collect();
        (
            std::fs::read(out.join("policy/model.safetensors")).unwrap(),
            rows,
        )
    };
    for scoring in [
        wmrl_core::AnchorScoring::Replay,
        wmrl_core::AnchorScoring::Twin,
    ] {
        let (sequential, overlapped) = (run(false, scoring), run(true, scoring));
        assert_eq!(sequential.1, overlapped.1, "{scoring:?}");
        assert!(
            sequential.0 == overlapped.0,
            "{scoring:?}: policy weights differ"
        );
        // Twins: one imagined per executed anchor episode.
        for row in &sequential.1 {
            let twins = match scoring {
                wmrl_core::AnchorScoring::Replay => 0,
                wmrl_core::AnchorScoring::Twin => row["core"]["executions"].as_u64().unwrap(),
            };
            assert_eq!(row["core"]["twins"], twins, "{scoring:?}: {row}");
        }
    }
}

/// A 4-iteration run on `config_text`, and the same run stopped after
/// iteration 2 (with the third's row half written) and resumed, give
/// the same policy, world model and metrics; returns the metrics rows.
fn assert_resumes_bit_for_bit(config_text: &str) -> Vec<serde_json::Value> {
    let dir = tempfile::tempdir().unwrap();
    let (policy, wm) = checkpoints(dir.path());
    let config = test_config(config_text);
    let mode = config.core.mode.name().to_string();
    let straight_dir = dir.path().join("straight");
    let mut straight = VlaTrainer::new(
        config.clone(),
        &policy,
        &wm,
        &straight_dir,
        tch::Device::Cpu,
    )
    .unwrap();
    straight.run(&mut |_, _| {}).unwrap();

    let stopped_dir = dir.path().join("stopped");
    let mut first =
        VlaTrainer::new(config.clone(), &policy, &wm, &stopped_dir, tch::Device::Cpu).unwrap();
    first.run_until(2, &mut |_, _| {}).unwrap();
    drop(first);
    // The iteration in flight when the process died: its row was written
    // (or half written), its checkpoint was not.
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(stopped_dir.join("metrics.jsonl"))
            .unwrap();
        writeln!(f, "{{\"iteration\":3,\"mode\":\"{mode}\"}}").unwrap();
        write!(f, "{{\"iteration\":4,\"mo").unwrap();
    }
    let mut resumed = VlaTrainer::resume(&stopped_dir, tch::Device::Cpu).unwrap();
    assert_eq!(resumed.completed_iterations(), 2);
    let summary = resumed.run(&mut |_, _| {}).unwrap();
    assert_eq!(summary.evaluations.len(), 3);

    let bits = |run: &Path| std::fs::read(run.join("policy/model.safetensors")).unwrap();
    assert!(
        bits(&straight_dir) == bits(&stopped_dir),
        "resumed policy weights differ from the uninterrupted run's"
    );
    let wm_bits = |run: &Path| {
        std::fs::read(
            run.join("checkpoints/iter-000004/world_model/world_model/world_model.safetensors"),
        )
        .unwrap()
    };
    assert!(
        wm_bits(&straight_dir) == wm_bits(&stopped_dir),
        "world model differs"
    );
    let rows = |run: &Path| -> Vec<serde_json::Value> {
        wmrl_report::metrics::read_rows(&run.join("metrics.jsonl"))
            .unwrap()
            .iter()
            .map(deterministic_part)
            .collect()
    };
    let (a, b) = (rows(&straight_dir), rows(&stopped_dir));
    assert_eq!(b.len(), 4, "one row per iteration, the lost one re-run");
    assert_eq!(a, b);
    assert!(
        a.iter().all(|r| r["world_model_refresh_loss"].is_number()),
        "the world model was refreshed every iteration"
    );
    assert!(
        a.iter()
            .all(|r| r["learner"]["grad_norm"].as_f64().unwrap() > 0.0),
        "the policy moved every iteration: {a:?}"
    );

    // A run that finished after 3 iterations, extended to 4, trains as
    // the 4-iteration run did (one more evaluation, at iteration 3).
    let extended_dir = dir.path().join("extended");
    let mut shorter = config.clone();
    shorter.iterations = 3;
    VlaTrainer::new(shorter, &policy, &wm, &extended_dir, tch::Device::Cpu)
        .unwrap()
        .run(&mut |_, _| {})
        .unwrap();
    let mut extended = VlaTrainer::resume(&extended_dir, tch::Device::Cpu).unwrap();
    let err = extended.extend_to(2).unwrap_err().to_string();
    assert!(err.contains("iterations") && err.contains('3'), "{err}");
    extended.extend_to(4).unwrap();
    let summary = extended.run(&mut |_, _| {}).unwrap();
    assert_eq!(summary.evaluations.len(), 4, "0, 2, 3 (the old last) and 4");
    assert!(
        bits(&straight_dir) == bits(&extended_dir),
        "extended policy weights differ from the 4-iteration run's"
    );
    let without_eval = |rows: Vec<serde_json::Value>| -> Vec<serde_json::Value> {
        rows.into_iter()
            .map(|mut r| {
                r.as_object_mut().unwrap().remove("eval");
                r
            })
            .collect()
    };
    assert_eq!(without_eval(rows(&extended_dir)), without_eval(a.clone()));
    let saved = TrainConfig::read_resolved(&extended_dir.join("config.json")).unwrap();
    assert_eq!(saved.iterations, 4);

    // Resuming a finished run has nothing left to do; a folder without a
    // run is refused by name.
    let err = VlaTrainer::resume(&dir.path().join("nothing"), tch::Device::Cpu).unwrap_err();
    assert!(err.to_string().contains("no config.json"), "{err}");
    a
}

#[test]
fn a_stopped_run_resumes_bit_for_bit() {
    let rows = assert_resumes_bit_for_bit(
        r#"
        tasks = [5]
        iterations = 4
        eval_every = 2
        eval_states = 1
        [core]
        # Raw world-model scores: non-zero advantages even though a
        # random policy never succeeds in 16 steps.
        mode = "wmrl-no-debias"
        groups = 4
        group_size = 2
        anchor_ratio = 0.5
        [grpo]
        entropy_coef = 0.01
        [core.calibrator]
        min_pairs = 2
        [executor]
        envs = 4
        max_steps = 16
        "#,
    );
    assert!(rows.iter().all(|r| r["prefix_env_steps"] == 0));
}

/// Branched imagination: every imagined episode (twins included)
/// executes its first chunk in the simulator; those steps are counted as
/// real ones, the learner gets the executed chunk, and the run resumes
/// bit for bit.
#[test]
fn branched_imagination_counts_its_prefixes_and_resumes_bit_for_bit() {
    let rows = assert_resumes_bit_for_bit(
        r#"
        tasks = [5]
        iterations = 4
        eval_every = 2
        eval_states = 1
        imagine_prefix_chunks = 1
        [core]
        mode = "wmrl-no-debias"
        anchor_scoring = "twin"
        groups = 4
        group_size = 2
        anchor_ratio = 0.5
        [grpo]
        entropy_coef = 0.01
        [core.calibrator]
        min_pairs = 2
        [executor]
        envs = 4
        max_steps = 16
        "#,
    );
    let (mut anchors, mut prefixes) = (0, 0);
    for row in &rows {
        let core = &row["core"];
        // Two imagined groups of two, and a twin per anchor episode: 8
        // prefixes of one 8-step chunk (or less, at a success) per iteration.
        let prefixed = core["imagined"].as_u64().unwrap() + core["twins"].as_u64().unwrap();
        assert_eq!(prefixed, 8, "{row}");
        let total = row["prefix_env_steps"].as_u64().unwrap();
        assert!(
            total > prefixes && total <= prefixes + prefixed * 8,
            "{row}"
        );
        prefixes = total;
        // Anchors run up to 16 steps each.
        let executed = core["executions"].as_u64().unwrap();
        let steps = row["env_steps"].as_u64().unwrap() - total;
        assert!(steps > anchors && steps <= anchors + executed * 16, "{row}");
        anchors = steps;
    }
}
