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
use crate::checkpoint::{self, CHECKPOINTS_DIR, OnDamage, REFERENCE_POLICY_DIR, RunState};
use crate::config::TrainConfig;
use crate::gradient::{GradientProbe, StreamGradients};
use crate::signal::{SignalTracker, StarvedTask};
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
    /// Tasks that trained for `starved_after` or more consecutive
    /// iterations, up to this one, without an informative group.
    pub starved_tasks: Vec<StarvedTask>,
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
    /// Tasks that ended the run `starved_after` or more iterations without
    /// an informative group.
    #[serde(default)]
    pub starved_tasks: Vec<StarvedTask>,
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
    signal: SignalTracker,
    /// Set by a resume: the checkpoint used and the newer ones passed over.
    resumed_from: Option<checkpoint::Selected>,
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
            return Err(wmrl_config::Error::invalid(
                run_dir.display().to_string(),
                "already holds a training run; choose another folder, or continue it with `wmrl train --resume`"
                    ,
            )
            .into());
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

    /// Continues the run in `run_dir` from its newest checkpoint that
    /// verifies, with the config saved in the folder; a damaged newer one is
    /// named and passed over ([`OnDamage::ResumeOlder`]). At most the
    /// iterations after that checkpoint are lost (their metrics rows are
    /// dropped).
    pub fn resume(run_dir: &Path, device: tch::Device) -> Result<Self> {
        Self::resume_with(run_dir, device, OnDamage::ResumeOlder)
    }

    /// [`Self::resume`], choosing what a damaged newest checkpoint does.
    /// Nothing in the folder changes unless the resume succeeds.
    pub fn resume_with(run_dir: &Path, device: tch::Device, on_damage: OnDamage) -> Result<Self> {
        let config_path = run_dir.join("config.json");
        if !config_path.exists() {
            return Err(Error::Checkpoint {
                path: run_dir.into(),
                message: "is not a training run folder (no config.json)".into(),
            });
        }
        let config = TrainConfig::read_resolved(&config_path)?;
        let selected =
            checkpoint::select(run_dir, on_damage)?.ok_or_else(|| Error::Checkpoint {
                path: run_dir.join(CHECKPOINTS_DIR),
                message: "holds no complete checkpoint; start the run again with `wmrl train`"
                    .into(),
            })?;
        for skipped in &selected.skipped {
            tracing::warn!(checkpoint = %skipped, "checkpoint passed over");
        }
        let checkpoint = selected.dir.clone();
        let state = selected.state.clone();
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
        trainer.signal = state.signal;
        // Only now that everything has loaded is the folder touched, so a
        // refused resume leaves it as it was: the rows of the iteration in
        // flight go, and the sink reopens the rewritten file.
        let metrics_path = run_dir.join("metrics.jsonl");
        checkpoint::truncate_metrics(&metrics_path, state.iteration)?;
        trainer.metrics = MetricsSink::append(&metrics_path)?.with_tensorboard("iteration");
        tracing::info!(iteration = state.iteration, checkpoint = %checkpoint.display(), "run resumed");
        trainer.resumed_from = Some(selected);
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
        x.check_strides(Some(policy.config().action.chunk_len as usize))?;
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
        let mut eval_options = SimExecutorOptions {
            execute_steps: x.eval_stride(),
            ..Default::default()
        };
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
            metrics: MetricsSink::append(&run_dir.join("metrics.jsonl"))?
                .with_tensorboard("iteration"),
            run_dir: run_dir.into(),
            evaluations: Vec::new(),
            executions: 0,
            imagined: 0,
            train_seconds: 0.0,
            replay_seeded: 0,
            signal: SignalTracker::default(),
            resumed_from: None,
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
            return Err(wmrl_config::Error::invalid(
                "field `iterations`",
                format!(
                    "expected at least the {completed} iterations the run in {} has completed, found {iterations}",
                    self.run_dir.display()
                ),
            )
            .into());
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
            let starved_tasks = self.record_signal(iteration);
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
                starved_tasks,
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

    /// Counts this iteration's informative groups per task; the tasks now
    /// starved, with a warning when one has just become so.
    fn record_signal(&mut self, iteration: u64) -> Vec<StarvedTask> {
        self.signal.record(&self.learner.inner.last.tasks);
        let after = self.config.starved_after;
        let starved = self.signal.starved(after);
        for t in starved.iter().filter(|t| t.iterations == after) {
            tracing::warn!(
                task = t.task,
                iteration,
                "task {} has had no informative group (all rewards equal) for {after}                  iterations: GRPO learns nothing on it",
                t.task
            );
        }
        starved
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
            starved_tasks: self.signal.starved(self.config.starved_after),
            run_dir: self.run_dir.clone(),
        })
    }

    /// Writes a checkpoint of the completed iterations and makes it the newest.
    pub fn save_checkpoint(&self) -> Result<()> {
        let iteration = self.core.step();
        let _span = tracing::info_span!("checkpoint", iteration).entered();
        let dir = checkpoint::prepare(&self.run_dir, iteration)?;
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
            signal: self.signal.clone(),
        }
        .stamp();
        wmrl_report::write_json_atomic(&dir.join(checkpoint::STATE_FILE), &state)?;
        checkpoint::commit(&self.run_dir, iteration, self.config.checkpoint_keep)
    }

    /// The checkpoint this trainer resumed from, and the newer ones it
    /// passed over as damaged or unfinished (`None` for a new run).
    pub fn resumed_from(&self) -> Option<&checkpoint::Selected> {
        self.resumed_from.as_ref()
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
        execute_steps: config.executor.execute_steps,
        record_observations: true,
        ..Default::default()
    };
    options.env.max_steps = config.executor.max_steps;
    options
}

#[cfg(test)]
mod tests;
