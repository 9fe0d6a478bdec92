//! The training run: set-up, the iteration loop, evaluation, artefacts.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use wmrl_core::{Core, StepReport};
use wmrl_report::{LinePlot, MetricsSink, Series, SeriesStyle};
use wmrl_vla::eval::{self, EvalOptions};
use wmrl_vla::grpo::{LearnStats, VlaLearner};
use wmrl_vla::rollout::{TaskPrompt, VlaAdapter};
use wmrl_vla::sim::{self, SimExecutor, SimExecutorOptions};
use wmrl_wm::{Dims, SimStarts, VlaWorldModel};

use crate::config::TrainConfig;
use crate::timed::Timed;
use crate::{Error, Result};

/// One greedy evaluation on the fixed initial states.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    /// Iteration after which it ran (0 = before training).
    pub iteration: u64,
    /// Real environment steps of training so far.
    pub env_steps: u64,
    /// Wall-clock seconds of training so far (evaluations excluded).
    pub train_seconds: f64,
    /// Average success over tasks.
    pub success: f64,
    /// Success per task, in `tasks` order.
    pub per_task: Vec<f64>,
}

/// One row of `metrics.jsonl`.
#[derive(Debug, Clone, Serialize)]
pub struct IterationRow {
    /// Iteration (1-based).
    pub iteration: u64,
    /// Mode.
    pub mode: String,
    /// The core's report (diagnostics, executions, imagined, scored).
    pub core: StepReport,
    /// The learner's statistics.
    pub learner: LearnStats,
    /// Mean real reward (success) of the anchor episodes of this iteration.
    pub anchor_success: Option<f64>,
    /// Real environment steps so far.
    pub env_steps: u64,
    /// Seconds in the simulator so far.
    pub simulator_seconds: f64,
    /// Seconds in the world model so far (imagine, score, observe, refresh).
    pub world_model_seconds: f64,
    /// Seconds in the learner so far.
    pub learner_seconds: f64,
    /// Wall-clock seconds of training so far.
    pub train_seconds: f64,
    /// Mean loss of a world-model refresh in this iteration.
    pub world_model_refresh_loss: Option<f64>,
    /// Episodes in the world model's replay buffer.
    pub replay_episodes: usize,
    /// The evaluation after this iteration, if one ran.
    pub eval: Option<Evaluation>,
}

/// What a run produced.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrainSummary {
    /// Mode.
    pub mode: String,
    /// Seed.
    pub seed: u64,
    /// Evaluations in order.
    pub evaluations: Vec<Evaluation>,
    /// Real environment steps of training.
    pub env_steps: u64,
    /// Real episodes executed by training.
    pub executions: u64,
    /// Imagined episodes.
    pub imagined: u64,
    /// Wall-clock seconds of training (evaluations excluded).
    pub train_seconds: f64,
    /// Episodes the world model's replay buffer started with (its training data).
    pub replay_seeded: usize,
    /// The run folder.
    pub run_dir: PathBuf,
}

/// A training run.
pub struct VlaTrainer {
    config: TrainConfig,
    core: Core,
    adapter: VlaAdapter,
    learner: Timed<VlaLearner>,
    world_model: Timed<VlaWorldModel>,
    executor: Timed<SimExecutor>,
    evaluator: SimExecutor,
    eval_prompts: Vec<TaskPrompt>,
    metrics: MetricsSink,
    run_dir: PathBuf,
    evaluations: Vec<Evaluation>,
    executions: u64,
    imagined: u64,
    train_seconds: f64,
    replay_seeded: usize,
}

impl std::fmt::Debug for VlaTrainer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VlaTrainer")
            .field("config", &self.config)
            .field("run_dir", &self.run_dir)
            .finish()
    }
}

impl VlaTrainer {
    /// Sets a run up in `run_dir` from an SFT policy checkpoint and a world
    /// model trained on that policy's encoder. Refuses a folder that holds a run.
    pub fn new(
        config: TrainConfig,
        policy_dir: &Path,
        world_model_dir: &Path,
        run_dir: &Path,
        device: tch::Device,
    ) -> Result<Self> {
        config.validate()?;
        if run_dir.join("metrics.jsonl").exists() {
            return Err(Error::Config {
                origin: run_dir.display().to_string(),
                message: "already holds a training run (metrics.jsonl); choose another folder"
                    .into(),
            });
        }
        std::fs::create_dir_all(run_dir).map_err(|source| Error::Io {
            path: run_dir.into(),
            source,
        })?;
        let policy = wmrl_vla::checkpoint::load(policy_dir, device)?;
        let encoder = policy.try_clone()?;
        let dims = Dims::of(&policy);
        let mut model = wmrl_wm::checkpoint::load(
            world_model_dir,
            &dims,
            Some(&policy.encoder_fingerprint()),
            device,
        )?;
        let x = &config.executor;
        model.imagine_config_mut().horizon_steps = config.imagine_steps.unwrap_or(x.max_steps);
        model.imagine_config_mut().temperature = x.temperature;
        let mut train_options = SimExecutorOptions {
            temperature: x.temperature,
            record_observations: true,
            ..Default::default()
        };
        train_options.env.max_steps = x.max_steps;
        let starts = Box::new(SimStarts::new(train_options.env.clone()));
        let mut world_model = VlaWorldModel::new(model, encoder, starts)?;
        // Seed the replay buffer with the world model's own training episodes
        // (demonstrations, earlier rollouts) when `wmrl wm train` left them.
        let data = world_model_dir.join(wmrl_wm::checkpoint::TRAINING_DATA_FILE);
        if data.exists() {
            let episodes =
                wmrl_wm::episodes::read(&data, &dims, Some(world_model.model().encoder()))?;
            tracing::info!(episodes = episodes.len(), file = %data.display(), "replay buffer seeded");
            world_model.extend_replay(episodes);
        }
        let replay_seeded = world_model.replay().len();
        let learner = VlaLearner::new(policy, config.grpo.clone())?;
        let mut eval_options = SimExecutorOptions::default();
        eval_options.env.max_steps = x.max_steps;
        let adapter = sim::libero_adapter(&config.tasks, config.core.seed)?;
        let eval_prompts = adapter
            .all_prompts()
            .into_iter()
            .filter(|p| p.state_index < config.eval_states)
            .collect();
        wmrl_report::write_json_atomic(&run_dir.join("config.json"), &config)?;
        Ok(Self {
            core: Core::new(config.core)?,
            adapter,
            learner: Timed::new(learner),
            world_model: Timed::new(world_model),
            executor: Timed::new(SimExecutor::new(x.envs, train_options)),
            evaluator: SimExecutor::new(x.envs, eval_options),
            eval_prompts,
            metrics: MetricsSink::append(&run_dir.join("metrics.jsonl"))?,
            run_dir: run_dir.into(),
            evaluations: Vec::new(),
            executions: 0,
            imagined: 0,
            train_seconds: 0.0,
            replay_seeded,
            config,
        })
    }

    /// The learner (policy and optimiser).
    pub fn learner(&self) -> &VlaLearner {
        &self.learner.inner
    }

    /// Greedy success on the fixed initial states.
    pub fn evaluate(&mut self, iteration: u64) -> Result<Evaluation> {
        let _span = tracing::info_span!("evaluate", iteration).entered();
        let report = eval::evaluate(
            &mut self.evaluator,
            self.learner.inner.policy(),
            &self.eval_prompts,
            &EvalOptions {
                wave: self.config.executor.envs,
                gifs: 0,
                seed: self.config.core.seed,
                ..Default::default()
            },
            None,
            &mut |_, _| {},
        )?;
        Ok(Evaluation {
            iteration,
            env_steps: self.executor.clock.env_steps,
            train_seconds: self.train_seconds,
            success: report.average_success,
            per_task: report.tasks.iter().map(|t| t.success_rate).collect(),
        })
    }

    /// Runs every iteration; `progress(iteration, last evaluation)` after each.
    pub fn run(
        &mut self,
        progress: &mut dyn FnMut(u64, Option<&Evaluation>),
    ) -> Result<TrainSummary> {
        let first = self.evaluate(0)?;
        self.evaluations.push(first);
        for iteration in 1..=self.config.iterations {
            let started = Instant::now();
            let report = {
                let _span = tracing::info_span!("iteration", iteration).entered();
                wmrl_core::step(
                    &mut self.core,
                    &mut self.adapter,
                    &mut self.learner,
                    &mut self.world_model,
                    &mut self.executor,
                )?
            };
            let refresh_started = Instant::now();
            let refresh = if self.config.core.mode.uses_world_model() {
                self.world_model.inner.maybe_refresh(iteration)?
            } else {
                None
            };
            self.world_model.clock.seconds += refresh_started.elapsed().as_secs_f64();
            self.train_seconds += started.elapsed().as_secs_f64();
            self.executions += report.executions as u64;
            self.imagined += report.imagined as u64;
            let eval = if iteration % self.config.eval_every.max(1) == 0
                || iteration == self.config.iterations
            {
                let e = self.evaluate(iteration)?;
                self.evaluations.push(e.clone());
                Some(e)
            } else {
                None
            };
            let row = IterationRow {
                iteration,
                mode: self.config.core.mode.name().into(),
                anchor_success: report.diagnostics.anchor_reward_mean,
                learner: self.learner.inner.last.clone(),
                env_steps: self.executor.clock.env_steps,
                simulator_seconds: self.executor.clock.seconds,
                world_model_seconds: self.world_model.clock.seconds,
                learner_seconds: self.learner.clock.seconds,
                train_seconds: self.train_seconds,
                world_model_refresh_loss: refresh,
                replay_episodes: self.world_model.inner.replay().len(),
                eval,
                core: report,
            };
            self.metrics.write(&row)?;
            progress(iteration, self.evaluations.last());
        }
        self.checkpoint()?;
        self.plot()?;
        Ok(TrainSummary {
            mode: self.config.core.mode.name().into(),
            seed: self.config.core.seed,
            evaluations: self.evaluations.clone(),
            env_steps: self.executor.clock.env_steps,
            executions: self.executions,
            imagined: self.imagined,
            train_seconds: self.train_seconds,
            replay_seeded: self.replay_seeded,
            run_dir: self.run_dir.clone(),
        })
    }

    /// Writes the policy, the world model and the run's counters into `checkpoint/`.
    pub fn checkpoint(&self) -> Result<()> {
        let dir = self.run_dir.join("checkpoint");
        let info = serde_json::json!({
            "iteration": self.core.step(),
            "mode": self.config.core.mode.name(),
            "env_steps": self.executor.clock.env_steps,
        });
        wmrl_vla::checkpoint::save(
            self.learner.inner.policy(),
            &dir.join("policy"),
            info.clone(),
        )?;
        wmrl_wm::checkpoint::save(
            self.world_model.inner.model(),
            &dir.join("world_model"),
            info,
        )?;
        wmrl_report::write_json_atomic(
            &dir.join("state.json"),
            &serde_json::json!({
                "iteration": self.core.step(),
                "env_steps": self.executor.clock.env_steps,
                "executions": self.executions,
                "imagined": self.imagined,
                "calibrator": self.core.calibrator(),
                "world_model_stats": self.world_model.inner.stats,
                "evaluations": self.evaluations,
            }),
        )?;
        Ok(())
    }

    fn plot(&self) -> Result<()> {
        let mode = self.config.core.mode.name();
        for (file, x_label, x) in [
            ("success_vs_env_steps.png", "real environment steps", 0),
            (
                "success_vs_wallclock.png",
                "wall-clock seconds of training",
                1,
            ),
        ] {
            let points = self
                .evaluations
                .iter()
                .map(|e| {
                    let xv = if x == 0 {
                        e.env_steps as f64
                    } else {
                        e.train_seconds
                    };
                    (xv, 100.0 * e.success)
                })
                .collect();
            LinePlot {
                title: format!("LIBERO-Long post-training, mode {mode}"),
                x_label: x_label.into(),
                y_label: "greedy success on the fixed initial states (%)".into(),
                series: vec![Series::line(mode, points).with_style(SeriesStyle::LineWithMarkers)],
                y_range: Some((0.0, 100.0)),
                ..Default::default()
            }
            .write_png(&self.run_dir.join(file))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wmrl_core::Mode;

    /// A tiny random policy and a tiny world model on its encoder, saved.
    fn checkpoints(dir: &Path) -> (PathBuf, PathBuf) {
        tch::manual_seed(0);
        let config = wmrl_vla::VlaConfig::load("tiny", &[]).unwrap();
        let tasks = sim::suite_tasks();
        let tokenizer =
            wmrl_vla::Tokenizer::from_instructions(tasks.iter().map(|(_, t)| t.as_str()));
        let policy = wmrl_vla::VlaPolicy::new(config.model, tokenizer, tch::Device::Cpu).unwrap();
        let (p, w) = (dir.join("policy"), dir.join("wm"));
        wmrl_vla::checkpoint::save(&policy, &p, serde_json::Value::Null).unwrap();
        let model = wmrl_wm::LatentWorldModel::new(
            wmrl_wm::WmConfig::load("tiny", &[]).unwrap(),
            Dims::of(&policy),
            policy.encoder_fingerprint(),
            tch::Device::Cpu,
        )
        .unwrap();
        wmrl_wm::checkpoint::save(&model, &w, serde_json::Value::Null).unwrap();
        (p, w)
    }

    #[test]
    fn every_mode_runs_end_to_end_and_executes_anchors_at_the_configured_ratio() {
        let dir = tempfile::tempdir().unwrap();
        let (policy, wm) = checkpoints(dir.path());
        for mode in Mode::ALL {
            let mut config = TrainConfig::parse(
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
                "test",
                false,
                &[],
            )
            .unwrap();
            config.core.mode = mode;
            let run = dir.path().join(mode.name());
            let mut trainer =
                VlaTrainer::new(config, &policy, &wm, &run, tch::Device::Cpu).unwrap();
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
                "checkpoint/policy/model.safetensors",
                "checkpoint/world_model/world_model.json",
                "checkpoint/state.json",
            ] {
                assert!(run.join(file).exists(), "{mode}: {file}");
            }
            // A run folder is never reused.
            let again =
                VlaTrainer::new(TrainConfig::default(), &policy, &wm, &run, tch::Device::Cpu);
            assert!(
                again
                    .unwrap_err()
                    .to_string()
                    .contains("already holds a training run")
            );
        }
    }
}
