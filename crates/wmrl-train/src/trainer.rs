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
use wmrl_wm::{Dims, SimPrefixes, SimStarts, VlaWorldModel};

use crate::anchors::AnchorStream;
use crate::checkpoint::{self, CHECKPOINTS_DIR, REFERENCE_POLICY_DIR, RunState};
use crate::config::TrainConfig;
use crate::gradient::{GradientProbe, StreamGradients};
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

impl Evaluation {
    /// The binomial standard error of [`Evaluation::success`] when each task
    /// was evaluated on `states` fixed initial states:
    /// √(Σₜ pₜ(1 − pₜ)/states) / tasks (NaN without tasks or states).
    pub fn standard_error(&self, states: usize) -> f64 {
        if self.per_task.is_empty() || states == 0 {
            return f64::NAN;
        }
        let variance: f64 = self
            .per_task
            .iter()
            .map(|p| p * (1.0 - p) / states as f64)
            .sum();
        variance.sqrt() / self.per_task.len() as f64
    }
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
    /// Real environment steps so far (anchors, and the prefixes of
    /// branched imagination).
    pub env_steps: u64,
    /// Of those, the steps of branched imagination's executed prefixes.
    #[serde(default)]
    pub prefix_env_steps: u64,
    /// Seconds in the simulator so far (prefixes included).
    pub simulator_seconds: f64,
    /// Seconds in the world model so far (imagine, score, observe, refresh;
    /// prefix execution excluded).
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
    /// Real environment steps of training (anchors and prefixes).
    pub env_steps: u64,
    /// Of those, the steps of branched imagination's executed prefixes.
    #[serde(default)]
    pub prefix_env_steps: u64,
    /// Real episodes executed by training (anchors; prefixes not included).
    pub executions: u64,
    /// Imagined episodes of the training groups (anchors' imagined twins not included).
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
    /// The anchor stream: the simulator unless replaced
    /// ([`VlaTrainer::set_anchor_executor`]).
    executor: Timed<AnchorStream>,
    /// Evaluation always runs in the simulator, on the fixed initial states.
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
    /// model trained on that policy's encoder, and writes its first
    /// checkpoint (iteration 0). Refuses a folder that holds a run.
    pub fn new(
        config: TrainConfig,
        policy_dir: &Path,
        world_model_dir: &Path,
        run_dir: &Path,
        device: tch::Device,
    ) -> Result<Self> {
        config.validate()?;
        if run_dir.join("metrics.jsonl").exists() || run_dir.join(CHECKPOINTS_DIR).exists() {
            return Err(Error::Config {
                origin: run_dir.display().to_string(),
                message: "already holds a training run; choose another folder, or continue it with `wmrl train --resume`"
                    .into(),
            });
        }
        std::fs::create_dir_all(run_dir).map_err(|source| Error::Io {
            path: run_dir.into(),
            source,
        })?;
        let policy = wmrl_vla::checkpoint::load(policy_dir, device)?;
        let model = wmrl_wm::checkpoint::load(
            world_model_dir,
            &Dims::of(&policy),
            Some(&policy.encoder_fingerprint()),
            device,
        )?;
        wmrl_vla::checkpoint::save(
            &policy,
            &run_dir.join(REFERENCE_POLICY_DIR),
            serde_json::json!({ "source": policy_dir }),
        )?;
        wmrl_report::write_json_atomic(&run_dir.join("config.json"), &config)?;
        let mut trainer = Self::assemble(config, policy, model, run_dir)?;
        // Seed the replay buffer with the world model's own training episodes
        // (demonstrations, earlier rollouts) when `wmrl wm train` left them.
        let data = world_model_dir.join(wmrl_wm::checkpoint::TRAINING_DATA_FILE);
        if data.exists() {
            let world_model = &mut trainer.world_model.inner;
            let dims = world_model.model().dims();
            let episodes =
                wmrl_wm::episodes::read(&data, &dims, Some(world_model.model().encoder()))?;
            tracing::info!(episodes = episodes.len(), file = %data.display(), "replay buffer seeded");
            world_model.extend_replay(episodes);
        }
        trainer.replay_seeded = trainer.world_model.inner.replay().len();
        trainer.save_checkpoint()?;
        Ok(trainer)
    }

    /// Continues the run in `run_dir` from its newest checkpoint, with the
    /// config saved in the folder. At most the iteration in flight when the
    /// run stopped is lost (its metrics row, if written, is dropped).
    pub fn resume(run_dir: &Path, device: tch::Device) -> Result<Self> {
        let config_path = run_dir.join("config.json");
        if !config_path.exists() {
            return Err(Error::Checkpoint {
                path: run_dir.into(),
                message: "is not a training run folder (no config.json)".into(),
            });
        }
        let config = TrainConfig::read_resolved(&config_path)?;
        let checkpoint = checkpoint::latest(run_dir)?.ok_or_else(|| Error::Checkpoint {
            path: run_dir.join(CHECKPOINTS_DIR),
            message: "holds no complete checkpoint; start the run again with `wmrl train`".into(),
        })?;
        let state = checkpoint::read_state(&checkpoint)?;
        if state.mode != config.core.mode.name() {
            return Err(Error::Checkpoint {
                path: checkpoint.join(checkpoint::STATE_FILE),
                message: format!(
                    "was written by a `{}` run but config.json says mode `{}`",
                    state.mode,
                    config.core.mode.name()
                ),
            });
        }
        if *state.core.config() != config.core {
            return Err(Error::Checkpoint {
                path: checkpoint.join(checkpoint::STATE_FILE),
                message: "the core settings differ from config.json".into(),
            });
        }
        let policy = wmrl_vla::checkpoint::load(&run_dir.join(REFERENCE_POLICY_DIR), device)?;
        let model = wmrl_wm::checkpoint::load(
            &checkpoint.join("world_model").join("world_model"),
            &Dims::of(&policy),
            Some(&policy.encoder_fingerprint()),
            device,
        )?;
        let mut trainer = Self::assemble(config, policy, model, run_dir)?;
        trainer
            .learner
            .inner
            .load_state(&checkpoint.join("learner"))?;
        wmrl_wm::run_state::load(
            &mut trainer.world_model.inner,
            &checkpoint.join("world_model"),
        )?;
        trainer.core = state.core;
        trainer.executions = state.executions;
        trainer.imagined = state.imagined;
        trainer.train_seconds = state.train_seconds;
        trainer.executor.clock = state.simulator;
        trainer.world_model.clock = state.world_model;
        trainer.learner.clock = state.learner;
        trainer.evaluations = state.evaluations;
        trainer.replay_seeded = state.replay_seeded;
        // Only now that everything has loaded is the folder touched, so a
        // refused resume leaves it as it was: the rows of the iteration in
        // flight go, and the sink reopens the rewritten file.
        let metrics_path = run_dir.join("metrics.jsonl");
        checkpoint::truncate_metrics(&metrics_path, state.iteration)?;
        trainer.metrics = MetricsSink::append(&metrics_path)?;
        let name = checkpoint
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        checkpoint::remove_others(&run_dir.join(CHECKPOINTS_DIR), &name);
        tracing::info!(iteration = state.iteration, checkpoint = %checkpoint.display(), "run resumed");
        Ok(trainer)
    }

    /// The simulator executor the anchors run on unless replaced: the run's
    /// environments, step limit and sampling temperature, recording the
    /// observation at every chunk boundary (for the learner and the world
    /// model).
    pub fn simulator_executor(config: &TrainConfig) -> SimExecutor {
        SimExecutor::new(config.executor.envs, anchor_sim_options(config))
    }

    /// Executes the anchor stream with `anchors` from the next iteration on
    /// (a pool of robots, or a test's fault injector) instead of the
    /// simulator. It is not part of a checkpoint: a resumed run executes
    /// in the simulator unless given another executor again, and only the
    /// simulator gives a bit-for-bit resume.
    pub fn set_anchor_executor(&mut self, anchors: AnchorStream) {
        tracing::info!(executor = anchors.name(), "anchor executor replaced");
        self.executor.inner = anchors;
    }

    /// Builds the components around a starting policy and world model.
    fn assemble(
        config: TrainConfig,
        policy: wmrl_vla::VlaPolicy,
        mut model: wmrl_wm::LatentWorldModel,
        run_dir: &Path,
    ) -> Result<Self> {
        let encoder = policy.try_clone()?;
        let x = &config.executor;
        model.imagine_config_mut().horizon_steps = config.imagine_steps.unwrap_or(x.max_steps);
        model.imagine_config_mut().temperature = x.temperature;
        let train_options = anchor_sim_options(&config);
        let starts = Box::new(SimStarts::new(train_options.env.clone()));
        let chunk_len = policy.config().action.chunk_len as usize;
        let mut world_model = VlaWorldModel::new(model, encoder, starts)?;
        if config.imagine_prefix_chunks > 0 {
            world_model = world_model
                .with_prefixes(Box::new(SimPrefixes::new(
                    x.envs,
                    train_options.clone(),
                    config.imagine_prefix_chunks,
                    chunk_len,
                )))
                .with_imagined_chunks_trained(config.train_imagined_chunks);
        }
        let learner = VlaLearner::new(policy, config.grpo.clone())?
            .with_sampling_temperature(x.temperature)?;
        let mut eval_options = SimExecutorOptions::default();
        eval_options.env.max_steps = x.max_steps;
        let adapter = sim::libero_adapter(&config.tasks, config.core.seed)?;
        let eval_prompts = adapter
            .all_prompts()
            .into_iter()
            .filter(|p| p.state_index < config.eval_states)
            .collect();
        Ok(Self {
            core: Core::new(config.core)?,
            adapter,
            learner: Timed::new(learner),
            world_model: Timed::new(world_model),
            executor: Timed::new(AnchorStream::new(
                "simulator",
                Self::simulator_executor(&config),
            )),
            evaluator: SimExecutor::new(x.envs, eval_options),
            eval_prompts,
            metrics: MetricsSink::append(&run_dir.join("metrics.jsonl"))?,
            run_dir: run_dir.into(),
            evaluations: Vec::new(),
            executions: 0,
            imagined: 0,
            train_seconds: 0.0,
            replay_seeded: 0,
            config,
        })
    }

    /// Real environment steps so far: the anchors' and, with branched
    /// imagination, the executed prefixes'.
    pub fn real_env_steps(&self) -> u64 {
        self.executor.clock.env_steps + self.world_model.inner.stats.prefix_steps
    }

    /// Iterations completed so far.
    pub fn completed_iterations(&self) -> u64 {
        self.core.step()
    }

    /// Sets the run's iteration count to `iterations` and saves it in
    /// `config.json`: raised, a finished run (resumed with [`Self::resume`])
    /// goes on; lowered, an unfinished one ends sooner. Training does not depend on the count, only the evaluation
    /// after the last iteration does: the extended run trains exactly as one
    /// configured with `iterations` from the start, with one more
    /// evaluation at the old last iteration. Fails, changing nothing, below
    /// the iterations already completed.
    pub fn extend_to(&mut self, iterations: u64) -> Result<()> {
        let completed = self.completed_iterations();
        if iterations < completed {
            return Err(Error::Config {
                origin: "field `iterations`".into(),
                message: format!(
                    "expected at least the {completed} iterations the run in {} has completed, found {iterations}",
                    self.run_dir.display()
                ),
            });
        }
        if iterations != self.config.iterations {
            let mut config = self.config.clone();
            config.iterations = iterations;
            wmrl_report::write_json_atomic(&self.run_dir.join("config.json"), &config)?;
            tracing::info!(
                from = self.config.iterations,
                to = iterations,
                "run extended"
            );
            self.config = config;
        }
        Ok(())
    }

    /// The resolved config.
    pub fn config(&self) -> &TrainConfig {
        &self.config
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
            env_steps: self.real_env_steps(),
            train_seconds: self.train_seconds,
            success: report.average_success,
            per_task: report.tasks.iter().map(|t| t.success_rate).collect(),
        })
    }

    /// Runs the remaining iterations, then writes the final policy and the
    /// plots; `progress(iteration, last evaluation)` after each iteration.
    pub fn run(
        &mut self,
        progress: &mut dyn FnMut(u64, Option<&Evaluation>),
    ) -> Result<TrainSummary> {
        self.run_until(self.config.iterations, progress)?;
        self.finish()
    }

    /// Runs iterations up to `last` (at most the configured number),
    /// evaluating and checkpointing on schedule. A run stopped here (or
    /// killed) continues with [`Self::resume`].
    pub fn run_until(
        &mut self,
        last: u64,
        progress: &mut dyn FnMut(u64, Option<&Evaluation>),
    ) -> Result<()> {
        if self.evaluations.is_empty() {
            let first = self.evaluate(0)?;
            self.evaluations.push(first);
        }
        let last = last.min(self.config.iterations);
        for iteration in self.core.step() + 1..=last {
            let started = Instant::now();
            let report = {
                let _span = tracing::info_span!("iteration", iteration).entered();
                if self.config.overlap_anchors {
                    crate::overlap::overlapped_step(
                        &mut self.core,
                        &mut self.adapter,
                        &mut self.learner,
                        &mut self.world_model,
                        &mut self.executor,
                    )?
                } else {
                    wmrl_core::step(
                        &mut self.core,
                        &mut self.adapter,
                        &mut self.learner,
                        &mut self.world_model,
                        &mut self.executor,
                    )?
                }
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
                env_steps: self.real_env_steps(),
                simulator_seconds: self.executor.clock.seconds
                    + self.world_model.inner.stats.prefix_seconds,
                world_model_seconds: self.world_model.clock.seconds
                    - self.world_model.inner.stats.prefix_seconds,
                prefix_env_steps: self.world_model.inner.stats.prefix_steps,
                learner_seconds: self.learner.clock.seconds,
                train_seconds: self.train_seconds,
                world_model_refresh_loss: refresh,
                replay_episodes: self.world_model.inner.replay().len(),
                eval,
                core: report,
            };
            self.metrics.write(&row)?;
            if iteration % self.config.checkpoint_every.max(1) == 0
                || iteration == self.config.iterations
            {
                self.save_checkpoint()?;
            }
            progress(iteration, self.evaluations.last());
        }
        Ok(())
    }

    /// One training step at the current policy whose learner measures
    /// instead of learning ([`crate::gradient`]): the anchors are executed
    /// and the rest imagined as in [`Self::run_until`], the core calibrates
    /// and weights the streams (its calibrator and step count advance), and
    /// each stream's policy gradient comes back. The policy, the optimiser
    /// and the world model (no refresh) stay as they were; nothing is
    /// written to the run folder.
    pub fn measure_gradients(&mut self) -> Result<StreamGradients> {
        let mut probe = GradientProbe::new(&mut self.learner.inner);
        wmrl_core::step(
            &mut self.core,
            &mut self.adapter,
            &mut probe,
            &mut self.world_model,
            &mut self.executor,
        )?;
        Ok(probe
            .into_measured()
            .expect("a core step always hands its learner a batch"))
    }

    /// Writes the post-trained policy (`policy/`) and the plots; the summary.
    pub fn finish(&mut self) -> Result<TrainSummary> {
        wmrl_vla::checkpoint::save(
            self.learner.inner.policy(),
            &self.run_dir.join("policy"),
            serde_json::json!({
                "iteration": self.core.step(),
                "mode": self.config.core.mode.name(),
                "env_steps": self.real_env_steps(),
            }),
        )?;
        self.plot()?;
        Ok(TrainSummary {
            mode: self.config.core.mode.name().into(),
            seed: self.config.core.seed,
            evaluations: self.evaluations.clone(),
            env_steps: self.real_env_steps(),
            prefix_env_steps: self.world_model.inner.stats.prefix_steps,
            executions: self.executions,
            imagined: self.imagined,
            train_seconds: self.train_seconds,
            replay_seeded: self.replay_seeded,
            run_dir: self.run_dir.clone(),
        })
    }

    /// Writes a checkpoint of the completed iterations and makes it the newest.
    pub fn save_checkpoint(&self) -> Result<()> {
        let iteration = self.core.step();
        let _span = tracing::info_span!("checkpoint", iteration).entered();
        let dir = checkpoint::checkpoint_dir(&self.run_dir, iteration);
        self.learner.inner.save_state(&dir.join("learner"))?;
        wmrl_wm::run_state::save(&self.world_model.inner, &dir.join("world_model"))?;
        let state = RunState {
            format: String::new(),
            version: 0,
            iteration,
            mode: self.config.core.mode.name().into(),
            core: self.core.clone(),
            executions: self.executions,
            imagined: self.imagined,
            train_seconds: self.train_seconds,
            simulator: self.executor.clock,
            world_model: self.world_model.clock,
            learner: self.learner.clock,
            evaluations: self.evaluations.clone(),
            replay_seeded: self.replay_seeded,
        }
        .stamp();
        wmrl_report::write_json_atomic(&dir.join(checkpoint::STATE_FILE), &state)?;
        checkpoint::commit(&self.run_dir, iteration)
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
            let x_of = |e: &Evaluation| {
                if x == 0 {
                    e.env_steps as f64
                } else {
                    e.train_seconds
                }
            };
            let points = self
                .evaluations
                .iter()
                .map(|e| (x_of(e), 100.0 * e.success))
                .collect();
            let band = self
                .evaluations
                .iter()
                .map(|e| {
                    let se = e.standard_error(self.config.eval_states);
                    (100.0 * (e.success - se), 100.0 * (e.success + se))
                })
                .collect();
            let name = format!(
                "{mode} (shaded: ± 1 binomial s.e. over {} initial states per task)",
                self.config.eval_states
            );
            LinePlot {
                title: format!("LIBERO-Long post-training, mode {mode}"),
                x_label: x_label.into(),
                y_label: "greedy success on the fixed initial states (%)".into(),
                series: vec![
                    Series::line(name, points)
                        .with_style(SeriesStyle::LineWithMarkers)
                        .with_band(band),
                ],
                y_range: Some((0.0, 100.0)),
                ..Default::default()
            }
            .write_png(&self.run_dir.join(file))?;
        }
        Ok(())
    }
}

/// The simulator settings of anchor execution (and of branched
/// imagination's executed prefixes).
fn anchor_sim_options(config: &TrainConfig) -> SimExecutorOptions {
    let mut options = SimExecutorOptions {
        temperature: config.executor.temperature,
        record_observations: true,
        ..Default::default()
    };
    options.env.max_steps = config.executor.max_steps;
    options
}

#[cfg(test)]
mod tests {
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
        let tokenizer =
            wmrl_vla::Tokenizer::from_instructions(tasks.iter().map(|(_, t)| t.as_str()));
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
                "policy/model.safetensors",
                "reference_policy/model.safetensors",
                "checkpoints/LATEST",
                "checkpoints/iter-000002/learner/optimizer.safetensors",
                "checkpoints/iter-000002/world_model/replay.wmlat",
                "checkpoints/iter-000002/state.json",
            ] {
                assert!(run.join(file).exists(), "{mode}: {file}");
            }
            assert!(
                !run.join("checkpoints/iter-000001").exists(),
                "{mode}: older checkpoints are removed"
            );
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

        // The checkpoint's policy replaced by one of another architecture.
        let weights = Path::new("checkpoints/iter-000001/learner/policy/model.safetensors");
        std::fs::copy(dir.path().join("wide-run").join(weights), run.join(weights)).unwrap();
        let err = resume().unwrap_err().to_string();
        assert!(
            err.contains("model.safetensors") && err.contains("the model expects"),
            "{err}"
        );
        std::fs::write(run.join(weights), &before[weights]).unwrap();
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
}
