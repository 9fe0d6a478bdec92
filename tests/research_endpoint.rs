//! The OpenAI-compatible clients (LLM judge and LLM policy) against a real
//! HTTP server started here on 127.0.0.1: malformed replies, server errors
//! retried with back-off, an endpoint that is down, and batches never lost.

mod common;

use std::net::TcpListener;
use std::path::Path;

use common::serve;

use wmrl_research::Task;
use wmrl_research::adapter::{ResearchAdapter, TextScorer};
use wmrl_research::judge::{JudgeConfig, LlmJudge};
use wmrl_research::openai::EndpointConfig;

fn endpoint(base_url: &str) -> EndpointConfig {
    EndpointConfig {
        base_url: base_url.into(),
        model: "test-model".into(),
        retries: 3,
        backoff_s: 0.01,
        backoff_max_s: 0.05,
        timeout_s: 5.0,
        concurrency: 1,
        ..EndpointConfig::default()
    }
}

fn tiny_task(dir: &Path) -> Task {
    let w = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    w(
        "task.toml",
        "id = \"tiny\"\ntitle = \"Tiny\"\nmetric = \"rmse\"\ndirection = \"lower\"\n",
    );
    w("description.md", "Predict y.\n");
    w("public/train.csv", "id,f0,target\n1,0.0,0.0\n2,1.0,1.0\n");
    w("public/test.csv", "id,f0\n3,0.5\n");
    w("public/sample_submission.csv", "id,target\n3,0.5\n");
    w("hidden/answers.csv", "id,target\n3,0.5\n");
    w("leaderboard.csv", "name,score\nbad,1.0\ngood,0.1\n");
    Task::load(dir).unwrap()
}

#[test]
fn the_judge_retries_server_errors_and_handles_malformed_replies() {
    let dir = tempfile::tempdir().unwrap();
    let task = tiny_task(&dir.path().join("tiny"));
    let server = serve(vec![
        (500, "overloaded".into()),
        (200, "{\"percentile\": 80}".into()),
        (200, "I cannot tell.".into()),
        (200, "still no number".into()),
        (200, "Sure: {\"percentile\": 25.5}".into()),
    ]);
    let mut judge = LlmJudge::new(JudgeConfig {
        endpoint: endpoint(&server.base_url),
        pending_path: dir.path().join("pending.jsonl"),
        ..JudgeConfig::default()
    });
    let scores = judge
        .score(&[
            (&task, "print('a')"),
            (&task, "print('b')"),
            (&task, "print('c')"),
        ])
        .unwrap();
    // 500 retried → 0.8; two malformed replies → fallback 0.5; then 0.255.
    assert_eq!(scores, vec![0.8, 0.5, 0.255]);
    assert_eq!(judge.malformed(), 1);
    let bodies = server.bodies.lock().unwrap();
    assert_eq!(bodies.len(), 5);
    let first: serde_json::Value = serde_json::from_str(&bodies[0]).unwrap();
    assert_eq!(first["model"], "test-model");
    let prompt = first["messages"][1]["content"].as_str().unwrap();
    assert!(
        prompt.contains("Predict y.")
            && prompt.contains("print('a')")
            && prompt.contains("rmse (lower is better)")
    );
}

#[test]
fn a_down_endpoint_is_reported_and_the_batch_is_saved() {
    let dir = tempfile::tempdir().unwrap();
    let task = tiny_task(&dir.path().join("tiny"));
    // A port nobody listens on: bind, read the port, close.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let pending = dir.path().join("pending.jsonl");
    let mut judge = LlmJudge::new(JudgeConfig {
        endpoint: endpoint(&format!("http://127.0.0.1:{port}/v1")),
        pending_path: pending.clone(),
        ..JudgeConfig::default()
    });
    let err = judge
        .score(&[(&task, "print('x')"), (&task, "print('y')")])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("after 4 attempts") && err.contains("pending.jsonl"),
        "{err}"
    );
    let saved = std::fs::read_to_string(&pending).unwrap();
    assert_eq!(saved.lines().count(), 2);
    assert!(saved.contains("print('y')"));
}

#[test]
fn the_llm_policy_samples_solutions_and_exports_the_batch() {
    use wmrl_core::seams::{Adapter, Policy};
    let dir = tempfile::tempdir().unwrap();
    let task = tiny_task(&dir.path().join("tiny"));
    let code = "import shutil\nshutil.copy('sample_submission.csv', 'submission.csv')";
    let server = serve(vec![(
        200,
        format!("Here you go:\n```python\n{code}\n```\n"),
    )]);
    let mut adapter = ResearchAdapter::new(vec![task]).unwrap();
    let export = dir.path().join("batches.jsonl");
    let mut policy =
        wmrl_research::sampler::EndpointPolicy::new(endpoint(&server.base_url), &export, &adapter);
    let prompts = adapter.prompts(0, 1).unwrap();
    let tasks = adapter.tasks().clone();
    let solutions =
        wmrl_research::adapter::SolutionSampler::sample_many(&policy, &tasks, &[(0, 1), (0, 2)])
            .unwrap();
    assert_eq!(solutions[0].text, format!("{code}\n"));
    // The learning signal comes from the core itself (mode real: anchors only).
    let mut core = wmrl_core::Core::new(wmrl_core::CoreConfig {
        mode: wmrl_core::Mode::Real,
        groups: 1,
        group_size: 2,
        ..Default::default()
    })
    .unwrap();
    let rewards = [1.0, 0.0];
    let out = core
        .process(&[wmrl_core::GroupInput {
            task: 0,
            stream: wmrl_core::Stream::Anchor,
            rewards: Some(&rewards),
            scores: None,
            inclusion_probability: 1.0,
        }])
        .unwrap();
    let batch = wmrl_core::seams::Batch {
        step: 3,
        prompts,
        samples: out
            .samples
            .into_iter()
            .zip(solutions)
            .map(|(signal, rollout)| wmrl_core::seams::BatchSample { signal, rollout })
            .collect(),
        diagnostics: out.diagnostics,
    };
    policy.learn(batch).unwrap();
    let rows: Vec<serde_json::Value> = std::fs::read_to_string(&export)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["task"], "tiny");
    assert_eq!(rows[0]["stream"], "anchor");
    assert!(
        rows[0]["advantage"].as_f64().unwrap() > 0.0
            && rows[1]["advantage"].as_f64().unwrap() < 0.0
    );
    assert_eq!(rows[0]["reward"], 1.0);
    assert_eq!(rows[0]["step"], 3);
    assert!(
        rows[0]["completion"]
            .as_str()
            .unwrap()
            .contains("```python")
    );
    assert!(rows[0]["prompt"].as_str().unwrap().contains("Predict y."));
}
