//! A short training run through the core on a tiny task: every artefact is
//! written, executions are counted per mode, and the checkpoint reloads.
//! (The learning claim itself is the `wmrl research experiment` benchmark;
//! the policy's and world model's learning are unit-tested in their crate.)

mod common;
mod sandbox_support;

use std::path::Path;
use std::sync::Arc;

use sandbox_support::{say_if_unisolated, test_isolation, venv_python};
use wmrl_core::Mode;
use wmrl_research::train::{ResearchConfig, Trainer};
use wmrl_research::{SolutionRunner, Task};
use wmrl_sandbox::Limits;

/// Regression task: y = 2·f0 + noise; rmse.
fn tiny_task(dir: &Path) -> Task {
    let w = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    w(
        "task.toml",
        "id = \"line\"\ntitle = \"Line\"\nmetric = \"rmse\"\ndirection = \"lower\"\n",
    );
    w("description.md", "Predict target from f0.\n");
    let mut train = String::from("id,f0,f1,target\n");
    for i in 0..40 {
        let x = i as f64 / 10.0;
        train.push_str(&format!(
            "{i},{x},{},{}\n",
            (i * 7 % 5) as f64,
            2.0 * x + ((i * 3 % 7) as f64 - 3.0) / 10.0
        ));
    }
    w("public/train.csv", &train);
    let (mut test, mut sample, mut answers) = (
        String::from("id,f0,f1\n"),
        String::from("id,target\n"),
        String::from("id,target\n"),
    );
    for i in 0..10 {
        let x = i as f64 / 2.5 + 0.05;
        test.push_str(&format!("{},{x},{}\n", 100 + i, (i * 3 % 5) as f64));
        sample.push_str(&format!("{},4.0\n", 100 + i));
        answers.push_str(&format!("{},{}\n", 100 + i, 2.0 * x));
    }
    w("public/test.csv", &test);
    w("public/sample_submission.csv", &sample);
    w("hidden/answers.csv", &answers);
    w(
        "leaderboard.csv",
        "name,score\nconstant,2.5\nok,1.0\ngood,0.3\n",
    );
    Task::load(dir).unwrap()
}

#[test]
fn a_short_wmrl_run_writes_metrics_plots_and_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let task = tiny_task(&dir.path().join("line"));
    let limits = Limits {
        wall_time_s: 60.0,
        ..Limits::default()
    };
    let cache = wmrl_research::ExecutionCache::open(&dir.path().join("cache.jsonl")).unwrap();
    let (rt, runner) = sandboxed_runner(limits, Some(cache));

    let mut config = ResearchConfig {
        steps: 2,
        eval_every: 2,
        eval_samples: 1,
        ..ResearchConfig::default()
    };
    config.core.mode = Mode::Wmrl;
    config.core.groups = 2;
    config.core.group_size = 2;
    config.core.anchor_ratio = 0.5;
    config.world_model.buckets = 4096;
    config.world_model.steps_per_observe = 5;
    let run_dir = dir.path().join("run");
    let mut trainer = Trainer::new(
        config,
        vec![task],
        runner.clone(),
        rt.clone(),
        tch::Device::Cpu,
        &run_dir,
    )
    .unwrap();
    let mut seen = Vec::new();
    let summary = trainer.run(&mut |step, _| seen.push(step)).unwrap();
    assert_eq!(seen, [1, 2]);
    // ρ = 0.5 of 2 groups → 1 anchor group of 2 solutions per step.
    assert_eq!(summary.executions, 4);
    assert_eq!(
        summary.world_model_calls, 8,
        "2 imagined + 2 anchors scored, per step"
    );
    assert_eq!(summary.evaluations.len(), 2);
    assert!((1..=4).contains(&summary.distinct_executions));
    assert_eq!(
        summary.evaluations[1].distinct_executions,
        summary.distinct_executions
    );
    // Every world-model score went through the memory of executed solutions.
    assert_eq!(summary.recall.queries, 8);
    assert!(summary.recall.remembered >= summary.distinct_executions as usize);
    let stats = runner.stats();
    assert_eq!(
        stats.requested,
        4 + 2,
        "anchors plus one evaluation sample at steps 0 and 2"
    );
    assert_eq!(stats.sandbox_runs + stats.cache_hits, stats.requested);

    let rows = wmrl_report::metrics::read_rows(&run_dir.join("metrics.jsonl")).unwrap();
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[2]["executions"], 4);
    assert_eq!(rows[2]["recall_queries"], 8);
    assert_eq!(rows[2]["recall_hits"], summary.recall.hits);
    assert!(rows[2]["stream_weights"].is_object());
    assert!(rows[2]["eval_mean_percentile"].as_f64().is_some());
    let anchors = wmrl_report::metrics::read_rows(&run_dir.join("anchors.jsonl")).unwrap();
    assert_eq!(anchors.len(), 4);
    assert!(anchors[0]["record"]["outcome"]["outcome"].is_string());
    for file in [
        "config.json",
        "percentile.png",
        "checkpoint/policy.safetensors",
        "checkpoint/world_model.safetensors",
        "checkpoint/state.json",
    ] {
        assert!(run_dir.join(file).is_file(), "{file} missing");
    }
    let manifest = wmrl_report::manifest::verify(&run_dir.join("checkpoint")).unwrap();
    assert_eq!(manifest.files.len(), 3, "policy, world model, state");
    let mut policy =
        wmrl_research::policy::PlanPolicy::new(1, Default::default(), tch::Device::Cpu).unwrap();
    policy
        .load(&run_dir.join("checkpoint/policy.safetensors"))
        .unwrap();
}

#[test]
fn a_run_can_score_with_the_llm_judge_instead_of_the_text_model() {
    let dir = tempfile::tempdir().unwrap();
    let task = tiny_task(&dir.path().join("line"));
    let (rt, runner) = sandboxed_runner(Limits::default(), None);
    let server = common::serve(vec![(200, "{\"percentile\": 70}".into())]);
    let mut config = ResearchConfig {
        steps: 1,
        eval_every: 1,
        eval_samples: 1,
        ..ResearchConfig::default()
    };
    config.core.mode = Mode::Wmrl;
    config.core.groups = 2;
    config.core.group_size = 2;
    config.core.anchor_ratio = 0.5;
    let mut judge = wmrl_research::judge::JudgeConfig::default();
    judge.endpoint.base_url = server.base_url.clone();
    judge.endpoint.retries = 0;
    config.judge = Some(judge);
    // The judge alone: no solution answered from the memory of executed ones
    // (the `constant` reference plan renders one text whatever its levels).
    config.recall_executed = false;
    let run_dir = dir.path().join("run");
    let mut trainer =
        Trainer::new(config, vec![task], runner, rt, tch::Device::Cpu, &run_dir).unwrap();
    let summary = trainer.run(&mut |_, _| {}).unwrap();
    // One anchor group of 2 scored + one imagined group of 2, one request each.
    assert_eq!(summary.world_model_calls, 4);
    assert_eq!(server.bodies.lock().unwrap().len(), 4);
    let state: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(run_dir.join("checkpoint/state.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(state["judge"]["calls"], 4);
    assert_eq!(state["recall"]["hits"], 0);
    assert_eq!(state["judge"]["malformed"], 0);
    assert!(!run_dir.join("checkpoint/world_model.safetensors").exists());
    let rows = wmrl_report::metrics::read_rows(&run_dir.join("metrics.jsonl")).unwrap();
    // Every imagined score is the judge's 70th percentile.
    assert!((rows[1]["world_model_score_mean"].as_f64().unwrap() - 0.7).abs() < 1e-9);
}

/// A tokio runtime and a sandboxed runner on the project venv's python.
fn sandboxed_runner(
    limits: Limits,
    cache: Option<wmrl_research::ExecutionCache>,
) -> (Arc<tokio::runtime::Runtime>, SolutionRunner) {
    let python = wmrl_research::python::find_python(venv_python().as_deref()).unwrap();
    let rt = Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap(),
    );
    let sandbox = rt
        .block_on(wmrl_research::python::sandbox(
            &python,
            limits,
            2,
            test_isolation(),
        ))
        .unwrap();
    say_if_unisolated(&sandbox);
    (rt, SolutionRunner::new(sandbox, cache))
}
