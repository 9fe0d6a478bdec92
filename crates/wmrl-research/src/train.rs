//! The AutoResearch trainer: the in-process plan policy post-trained through
//! the core's generic step (`wmrl_core::step`) with the sandbox as anchor
//! executor and the tch text model as world model, in any core mode.
//!
//! Each step: the core schedules anchors, the sandbox executes anchor groups
//! (reward = leaderboard percentile), the text model scores anchors and
//! imagines the rest, the core calibrates, fuses and computes advantages,
//! and the policy takes a clipped-surrogate step. Every `eval_every` steps the
//! policy is evaluated by executing `eval_samples` sampled solutions per task
//! with fixed seeds (common random numbers across evaluations); these
//! executions are counted apart from training's.
//!
//! The world model is the tch text model by default. It starts from the
//! executions that built the leaderboards (the reference solutions and
//! their percentiles): no sandbox run beyond task construction. With
//! [`ResearchConfig::judge`] set, an LLM judge behind an OpenAI-compatible
//! endpoint scores the solutions instead ([`crate::judge`]); the core
//! calibrates and denoises its scores exactly as the text model's. Either
//! scorer sits behind [`crate::recall::Recall`]: a solution the run has
//! executed (or a reference solution) is answered with its real reward.
//! Artefacts in the run folder: `config.json`,
//! `metrics.jsonl` (one row per step), `anchors.jsonl` (every real
//! execution), `percentile.png`, `checkpoint/{policy,world_model}.safetensors`,
//! `checkpoint/state.json` and `checkpoint/MANIFEST.json` (written last).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use wmrl_core::rng::derive_seed;
use wmrl_core::{Core, CoreConfig, StepReport};

use crate::adapter::{
    ResearchAdapter, SandboxExecutor, SolutionSampler, TextScorer, TextWorldModel,
};
use crate::executor::SolutionRunner;
use crate::judge::{JudgeConfig, LlmJudge};
use crate::policy::{PlanPolicy, PlanPolicyConfig};
use crate::recall::{Recall, RecallStats};
use crate::suite::references;
use crate::task::Task;
use crate::textmodel::{TextModel, TextModelConfig};
use crate::{Error, Result};

/// Settings of a training run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ResearchConfig {
    /// The core: mode, groups, group size, anchor ratio, seed (default: groups 10, size 8, ρ = 0.1, min 8 calibration pairs).
    pub core: CoreConfig,
    /// Training steps (default: 20).
    pub steps: u64,
    /// Evaluate every this many steps, and at the start and end (default: 2).
    pub eval_every: u64,
    /// Sampled solutions per task per evaluation (default: 8).
    pub eval_samples: usize,
    /// The policy.
    pub policy: PlanPolicyConfig,
    /// The text world model.
    pub world_model: TextModelConfig,
    /// Pre-train the world model on the reference solutions' outcomes (default: true).
    pub pretrain_on_references: bool,
    /// Answer solutions this run has executed (and, with
    /// `pretrain_on_references`, the reference solutions) with their real
    /// reward instead of a prediction ([`crate::recall`]; default: true).
    pub recall_executed: bool,
    /// Score with an LLM judge instead of the text model (default: none).
    /// A relative `pending_path` is taken inside the run folder.
    pub judge: Option<JudgeConfig>,
}

impl Default for ResearchConfig {
    fn default() -> Self {
        let mut core = CoreConfig {
            groups: 10,
            group_size: 8,
            ..CoreConfig::default()
        };
        core.calibrator.min_pairs = 8;
        Self {
            core,
            steps: 20,
            eval_every: 2,
            eval_samples: 8,
            policy: PlanPolicyConfig::default(),
            world_model: TextModelConfig::default(),
            pretrain_on_references: true,
            recall_executed: true,
            judge: None,
        }
    }
}

/// One evaluation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ResearchEvaluation {
    /// Step after which it ran.
    pub step: u64,
    /// Real training executions so far (logical: cache hits count).
    pub executions: u64,
    /// Of those, distinct solutions (each counted once).
    #[serde(default)]
    pub distinct_executions: u64,
    /// Mean leaderboard percentile over tasks of sampled solutions, in [0, 1].
    pub mean_percentile: f64,
    /// Per task, in task order.
    pub per_task: Vec<f64>,
}

/// What a run produced.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResearchSummary {
    /// The mode.
    pub mode: String,
    /// The seed.
    pub seed: u64,
    /// Evaluations in order.
    pub evaluations: Vec<ResearchEvaluation>,
    /// Real training executions (logical).
    pub executions: u64,
    /// Of those, distinct solutions.
    #[serde(default)]
    pub distinct_executions: u64,
    /// World-model scores (imagined + anchors scored).
    pub world_model_calls: u64,
    /// Sandbox runs actually made by this run (training and evaluation; the rest came from the cache).
    pub sandbox_runs: u64,
    /// Executions answered from the cache.
    pub cache_hits: u64,
    /// World-model scores answered from the memory of executed solutions.
    #[serde(default)]
    pub recall: RecallStats,
    /// The run folder.
    pub run_dir: PathBuf,
}

/// The world model's scorer: the learned text model or an LLM judge.
pub enum Scorer {
    /// The tch text model, trained online on anchor outcomes.
    Text(TextModel),
    /// An LLM judge behind an OpenAI-compatible endpoint.
    Judge(LlmJudge),
}

impl TextScorer for Scorer {
    fn score(&mut self, items: &[(&Task, &str)]) -> Result<Vec<f64>> {
        match self {
            Scorer::Text(m) => m.score(items),
            Scorer::Judge(j) => j.score(items),
        }
    }

    fn observe(&mut self, items: &[(&Task, &str, f64)]) -> Result<()> {
        match self {
            Scorer::Text(m) => m.observe(items),
            Scorer::Judge(j) => j.observe(items),
        }
    }
}

/// A training run.
pub struct Trainer {
    config: ResearchConfig,
    core: Core,
    adapter: ResearchAdapter,
    policy: PlanPolicy,
    world_model: TextWorldModel<Recall<Scorer>>,
    executor: SandboxExecutor,
    metrics: wmrl_report::MetricsSink,
    run_dir: PathBuf,
    executions: u64,
    world_model_calls: u64,
    evaluations: Vec<ResearchEvaluation>,
}

fn row_of(report: &StepReport) -> serde_json::Value {
    let d = &report.diagnostics;
    serde_json::json!({
        "anchor_reward_mean": d.anchor_reward_mean,
        "world_model_score_mean": d.world_model_score_mean,
        "world_model_reward_mean": d.world_model_reward_mean,
        "raw_bias": d.raw_bias,
        "calibrated_bias": d.calibrated_bias,
        "residual_variance": d.residual_variance,
        "stream_weights": d.stream_weights,
        "ppi_lambda": d.ppi_lambda,
        "calibrator_pairs": d.calibrator_pairs,
        "calibrator_blocks": d.calibrator_blocks,
        "zero_variance_share": d.zero_variance_share,
        "step_executions": report.executions,
        "execution_failures": report.execution_failures,
        "imagined": report.imagined,
    })
}

impl Trainer {
    /// Sets a run up in `run_dir` (created; `config.json` written).
    pub fn new(
        config: ResearchConfig,
        tasks: Vec<Task>,
        runner: SolutionRunner,
        runtime: Arc<tokio::runtime::Runtime>,
        device: tch::Device,
        run_dir: &Path,
    ) -> Result<Self> {
        std::fs::create_dir_all(run_dir).map_err(|source| Error::Io {
            path: run_dir.to_path_buf(),
            source,
        })?;
        let mut config = config;
        if let Some(judge) = config.judge.as_mut()
            && judge.pending_path.is_relative()
        {
            judge.pending_path = run_dir.join(&judge.pending_path);
        }
        wmrl_report::write_json_atomic(&run_dir.join("config.json"), &config)?;
        let core = Core::new(config.core).map_err(|e| Error::Build {
            what: "core".into(),
            message: e.to_string(),
        })?;
        let adapter = ResearchAdapter::new(tasks)?;
        let n = adapter.tasks().len();
        let policy = PlanPolicy::new(
            n,
            PlanPolicyConfig {
                seed: config.core.seed,
                ..config.policy
            },
            device,
        )?;
        let mut text = TextModel::new(
            TextModelConfig {
                seed: config.core.seed,
                ..config.world_model
            },
            device,
        )?;
        let mut examples = Vec::new();
        if config.pretrain_on_references && config.core.mode.uses_world_model() {
            for task in adapter.tasks().iter() {
                let board = task
                    .leaderboard
                    .as_ref()
                    .expect("adapter checked leaderboards");
                for (name, plan) in references() {
                    if let Some(entry) = board.entries.iter().find(|e| e.name == name) {
                        examples.push((
                            task.id().to_string(),
                            plan.render(task),
                            board.percentile(entry.score),
                        ));
                    }
                }
            }
        }
        if config.judge.is_none() && !examples.is_empty() {
            let items: Vec<(&str, &str, f64)> = examples
                .iter()
                .map(|(t, s, r)| (t.as_str(), s.as_str(), *r))
                .collect();
            text.train_on(&items);
            for _ in 0..4 {
                text.train_on(&[]);
            }
        }
        let scorer = match &config.judge {
            Some(judge) => Scorer::Judge(LlmJudge::new(judge.clone())),
            None => Scorer::Text(text),
        };
        let mut scorer = Recall::new(scorer, config.recall_executed);
        for (task, text, reward) in &examples {
            scorer.remember(task, text, *reward);
        }
        let world_model = TextWorldModel::new(&adapter, scorer);
        let anchors = wmrl_report::MetricsSink::append(&run_dir.join("anchors.jsonl"))?;
        let executor = SandboxExecutor::new(&adapter, runner, runtime, Some(anchors));
        let metrics = wmrl_report::MetricsSink::append(&run_dir.join("metrics.jsonl"))?
            .with_tensorboard("step");
        Ok(Self {
            config,
            core,
            adapter,
            policy,
            world_model,
            executor,
            metrics,
            run_dir: run_dir.to_path_buf(),
            executions: 0,
            world_model_calls: 0,
            evaluations: Vec::new(),
        })
    }

    /// Evaluates the current policy (see the module docs).
    pub fn evaluate(&mut self, step: u64) -> Result<ResearchEvaluation> {
        let _span = tracing::info_span!("evaluate", step).entered();
        let tasks = self.adapter.tasks().clone();
        let requests: Vec<(usize, u64)> = (0..tasks.len())
            .flat_map(|t| (0..self.config.eval_samples).map(move |i| (t, i as u64)))
            .map(|(t, i)| {
                (
                    t,
                    derive_seed(self.config.core.seed, &[0xE7A1, t as u64, i]),
                )
            })
            .collect();
        let solutions = self.policy.sample_many(&tasks, &requests)?;
        let records = self.executor.run_solutions(&solutions);
        let mut per_task = vec![0.0; tasks.len()];
        for (solution, record) in solutions.iter().zip(records) {
            per_task[solution.task] += record?.reward() / self.config.eval_samples as f64;
        }
        let mean_percentile = per_task.iter().sum::<f64>() / per_task.len() as f64;
        Ok(ResearchEvaluation {
            step,
            executions: self.executions,
            distinct_executions: self.executor.distinct_executions(),
            mean_percentile,
            per_task,
        })
    }

    /// Runs every step; `progress(step, last evaluation)` after each.
    pub fn run(
        &mut self,
        progress: &mut dyn FnMut(u64, Option<&ResearchEvaluation>),
    ) -> Result<ResearchSummary> {
        tch::set_num_threads(1);
        let first = self.evaluate(0)?;
        self.metrics.write(&serde_json::json!({"step": 0, "executions": 0, "eval_mean_percentile": first.mean_percentile, "eval_per_task": first.per_task}))?;
        self.evaluations.push(first);
        for step in 1..=self.config.steps {
            let started = std::time::Instant::now();
            let report = wmrl_core::step(
                &mut self.core,
                &mut self.adapter,
                &mut self.policy,
                &mut self.world_model,
                &mut self.executor,
            )
            .map_err(|e| Error::Build {
                what: format!("training step {step}"),
                message: e.to_string(),
            })?;
            self.executions += report.executions as u64;
            self.world_model_calls += (report.imagined + report.scored) as u64;
            let mut row = row_of(&report);
            row["step"] = step.into();
            row["mode"] = self.config.core.mode.name().into();
            row["executions"] = self.executions.into();
            row["distinct_executions"] = self.executor.distinct_executions().into();
            row["step_seconds"] = started.elapsed().as_secs_f64().into();
            let stats = self.executor.runner().stats();
            row["sandbox_runs"] = stats.sandbox_runs.into();
            row["cache_hits"] = stats.cache_hits.into();
            let recall = self.world_model.scorer().stats();
            row["recall_queries"] = recall.queries.into();
            row["recall_hits"] = recall.hits.into();
            if step % self.config.eval_every.max(1) == 0 || step == self.config.steps {
                let eval = self.evaluate(step)?;
                row["eval_mean_percentile"] = eval.mean_percentile.into();
                row["eval_per_task"] = serde_json::json!(eval.per_task);
                self.evaluations.push(eval);
            }
            self.metrics.write(&row)?;
            progress(step, self.evaluations.last());
        }
        self.checkpoint()?;
        self.plot()?;
        let stats = self.executor.runner().stats();
        Ok(ResearchSummary {
            mode: self.config.core.mode.name().into(),
            seed: self.config.core.seed,
            evaluations: self.evaluations.clone(),
            executions: self.executions,
            distinct_executions: self.executor.distinct_executions(),
            world_model_calls: self.world_model_calls,
            sandbox_runs: stats.sandbox_runs,
            cache_hits: stats.cache_hits,
            recall: self.world_model.scorer().stats(),
            run_dir: self.run_dir.clone(),
        })
    }

    /// Writes the policy, the world model and the counters into `checkpoint/`,
    /// then its manifest (sizes and SHA-256 of each file).
    pub fn checkpoint(&self) -> Result<()> {
        let dir = self.run_dir.join("checkpoint");
        std::fs::create_dir_all(&dir).map_err(|source| Error::Io {
            path: dir.clone(),
            source,
        })?;
        // VarStore::save writes in place: save beside, then rename (atomic).
        let atomic = |name: &str, save: &dyn Fn(&Path) -> Result<()>| -> Result<()> {
            let tmp = dir.join(format!(".{name}.tmp.safetensors"));
            save(&tmp)?;
            std::fs::rename(&tmp, dir.join(name)).map_err(|source| Error::Io {
                path: dir.join(name),
                source,
            })
        };
        atomic("policy.safetensors", &|p| self.policy.save(p))?;
        let judge = match self.world_model.scorer().inner() {
            Scorer::Text(model) => {
                atomic("world_model.safetensors", &|p| model.save(p))?;
                None
            }
            Scorer::Judge(judge) => Some(serde_json::json!({
                "calls": judge.calls(),
                "malformed": judge.malformed(),
            })),
        };
        wmrl_report::write_json_atomic(
            &dir.join("state.json"),
            &serde_json::json!({
                "step": self.core.step(),
                "executions": self.executions,
                "world_model_calls": self.world_model_calls,
                "recall": self.world_model.scorer().stats(),
                "calibrator": self.core.calibrator(),
                "evaluations": self.evaluations,
                "judge": judge,
            }),
        )?;
        // Last: the manifest marks the checkpoint complete and lets a reader
        // tell a damaged file (wmrl_report::manifest::verify).
        let mut files = vec!["policy.safetensors", "state.json"];
        if judge.is_none() {
            files.push("world_model.safetensors");
        }
        wmrl_report::manifest::write(&dir, &files)?;
        Ok(())
    }

    fn plot(&self) -> Result<()> {
        let points: Vec<(f64, f64)> = self
            .evaluations
            .iter()
            .map(|e| (e.executions as f64, 100.0 * e.mean_percentile))
            .collect();
        let plot = wmrl_report::LinePlot {
            title: format!("AutoResearch, mode {}", self.config.core.mode),
            x_label: "real (sandbox) executions".into(),
            y_label: "mean leaderboard percentile".into(),
            series: vec![
                wmrl_report::Series::line(self.config.core.mode.name(), points)
                    .with_style(wmrl_report::SeriesStyle::LineWithMarkers),
            ],
            y_range: Some((0.0, 100.0)),
            ..Default::default()
        };
        plot.write_png(&self.run_dir.join("percentile.png"))?;
        Ok(())
    }
}
