//! `wmrl data collect`: scripted-expert demonstrations with noise injection.
//!
//! Noise injection follows DART (Laskey et al. 2017, "DART: Noise Injection
//! for Robust Imitation Learning"): the environment executes the expert's
//! action plus Gaussian noise on the six motion dimensions (never the
//! gripper), while the file's `labels` keep the expert's clean action. The
//! expert is closed-loop, so it corrects the perturbation and the
//! demonstrations cover states slightly off its nominal path, which is where a
//! cloned policy drifts to.
//!
//! Per-step noise must stay small: a target chunk's later labels are the
//! expert's corrections of noise that its first observation cannot foresee.
//! Larger perturbations come as **bursts** ([`Perturbations`]): now and then
//! a constant offset is added to the executed translation for a few steps,
//! pushing the hand a few centimetres off the expert's path, and the episode
//! records which steps were perturbed (`perturbed_steps`). The expert's
//! recovery from there is what a cloned policy needs after its own errors,
//! and the dataset truncates each target chunk at the first perturbed step
//! after its observation, so the targets stay the expert's plan.
//!
//! Demonstrations start from initial states generated with other seeds than
//! the 50 fixed evaluation states (`demo_seed + block`, 50 states per block),
//! so evaluation never replays a training start.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};
use rayon::prelude::*;
use serde::Serialize;
use wmrl_sim::expert::Expert;
use wmrl_sim::{ACTION_DIM, EnvConfig, NUM_INIT_STATES, Observation, PROPRIO_DIM, SimEnv};

use crate::demos::{Episode, EpisodeMeta, MANIFEST_FILE, Manifest, ManifestTask, write_episode};
use crate::sim::{SUITE, suite_tasks};
use crate::{Error, Result};

/// What to collect.
#[derive(Debug, Clone, PartialEq)]
pub struct CollectOptions {
    /// Task indices (default: all ten).
    pub tasks: Vec<usize>,
    /// Episodes per task (default: 50).
    pub per_task: usize,
    /// Std of the Gaussian noise added to the executed motion dimensions (default: 0.1).
    pub noise_std: f32,
    /// Seed of the noise and of the demonstration initial states (default: 1).
    pub seed: u64,
    /// Perturbation bursts (default: none).
    pub perturbations: Perturbations,
    /// Write episodes the expert failed too (flagged `success: false`) (default: true).
    pub keep_failures: bool,
    /// Environment settings (cameras, step limit).
    pub env: EnvConfig,
}

impl Default for CollectOptions {
    fn default() -> Self {
        Self {
            tasks: (0..wmrl_sim::NUM_TASKS).collect(),
            per_task: 50,
            noise_std: 0.1,
            seed: 1,
            perturbations: Perturbations::default(),
            keep_failures: true,
            env: EnvConfig::default(),
        }
    }
}

/// Perturbation bursts: with probability `rate` at each unperturbed step a
/// burst starts that lasts 1 to `max_steps` steps (uniform) and adds one
/// constant offset, a uniformly random direction of length `size`, to the
/// executed translation (in action units: 1 = 5 cm per step).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Perturbations {
    /// Probability that a burst starts at a step (0 = no bursts).
    pub rate: f32,
    /// Longest burst, in control steps (at least 1).
    pub max_steps: usize,
    /// Length of the translation offset, in action units.
    pub size: f32,
}

impl Default for Perturbations {
    fn default() -> Self {
        Self {
            rate: 0.0,
            max_steps: 4,
            size: 0.3,
        }
    }
}

impl Perturbations {
    /// Checks the ranges (rate in [0, 1], at least one step, finite size).
    pub fn validate(&self) -> Result<()> {
        if !(0.0..=1.0).contains(&self.rate) {
            return Err(Error::mismatch(
                "perturbation rate",
                "a probability in [0, 1]",
                self.rate,
            ));
        }
        if self.max_steps == 0 {
            return Err(Error::mismatch(
                "perturbation burst length",
                "at least 1 step",
                0,
            ));
        }
        if !self.size.is_finite() || self.size < 0.0 {
            return Err(Error::mismatch(
                "perturbation size",
                "a finite non-negative number",
                self.size,
            ));
        }
        Ok(())
    }
}

/// The burst in progress of one episode: its offset and the steps left.
struct Burst {
    offset: [f32; 3],
    steps_left: usize,
}

impl Burst {
    /// Starts a burst with `perturbations.rate`'s probability.
    fn maybe_start(perturbations: &Perturbations, rng: &mut ChaCha8Rng) -> Option<Self> {
        if perturbations.rate <= 0.0 || rng.random::<f32>() >= perturbations.rate {
            return None;
        }
        let unit = Normal::new(0.0f32, 1.0).expect("unit normal");
        let direction: [f32; 3] = std::array::from_fn(|_| unit.sample(rng));
        let norm = direction
            .iter()
            .map(|v| v * v)
            .sum::<f32>()
            .sqrt()
            .max(1e-6);
        Some(Self {
            offset: direction.map(|v| v / norm * perturbations.size),
            steps_left: rng.random_range(1..=perturbations.max_steps),
        })
    }
}

/// Per-task and total counts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CollectSummary {
    /// Folder written.
    pub out_dir: PathBuf,
    /// One entry per task.
    pub tasks: Vec<ManifestTask>,
    /// Episodes that ended in an execution error (not written).
    pub execution_errors: usize,
    /// Control steps simulated.
    pub env_steps: usize,
    /// Wall-clock seconds.
    pub seconds: f64,
}

/// Initial-state seed of block `block` (50 states each); never the evaluation seed.
pub(crate) fn demo_init_seed(seed: u64, block: usize) -> u64 {
    let s = wmrl_sim::INIT_SEED
        ^ 0xdead_beef_0000
        ^ seed.wrapping_mul(1000).wrapping_add(block as u64 + 1);
    if s == wmrl_sim::INIT_SEED { s + 1 } else { s }
}

/// Seed of episode `k` of `task` (its noise, and a takeover's hand-over step).
pub(crate) fn episode_seed(seed: u64, task: usize, k: usize) -> u64 {
    seed.wrapping_mul(0x9e37_79b9)
        .wrapping_add((task * 100_000 + k) as u64)
}

/// Refuses to overwrite a collected folder and checks the task indices;
/// returns `(task index, instruction)` of every suite task.
pub(crate) fn check_collection(
    options: &CollectOptions,
    out_dir: &Path,
) -> Result<Vec<(usize, String)>> {
    options.perturbations.validate()?;
    if out_dir.join(MANIFEST_FILE).exists() {
        return Err(Error::WouldOverwrite {
            dir: out_dir.to_path_buf(),
        });
    }
    let all = suite_tasks();
    for &t in &options.tasks {
        if !all.iter().any(|(i, _)| *i == t) {
            return Err(Error::mismatch(
                "task index",
                format!("0..{}", all.len()),
                t,
            ));
        }
    }
    Ok(all)
}

/// One expert recording's outcome, for the manifest counts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Recorded {
    pub task: usize,
    pub success: bool,
    pub steps: usize,
    pub execution_error: bool,
}

/// The manifest's per-task counts of `recorded` (execution errors are never written).
pub(crate) fn manifest_tasks(
    options: &CollectOptions,
    all: &[(usize, String)],
    recorded: &[Recorded],
) -> Vec<ManifestTask> {
    options
        .tasks
        .iter()
        .map(|&t| {
            let mine: Vec<_> = recorded
                .iter()
                .filter(|r| r.task == t && !r.execution_error)
                .collect();
            let instruction = &all.iter().find(|(i, _)| *i == t).expect("checked").1;
            ManifestTask {
                task_index: t,
                task_name: wmrl_sim::task(t).map(|s| s.name).unwrap_or_default(),
                instruction: instruction.clone(),
                episodes: mine
                    .iter()
                    .filter(|r| r.success || options.keep_failures)
                    .count(),
                successes: mine.iter().filter(|r| r.success).count(),
            }
        })
        .collect()
}

/// Runs one expert episode with noise injection.
fn expert_episode(
    env: &mut SimEnv,
    task: usize,
    state: usize,
    options: &CollectOptions,
    seed: u64,
) -> Result<(Episode, Option<String>)> {
    let observation = env.reset(task, state).map_err(|e| Error::Executor {
        message: format!("task {task} state {state}: {e}"),
    })?;
    let expert = Expert::new(env);
    let recording = ExpertRecording {
        source: "expert",
        state_index: state,
        noise_std: options.noise_std,
        seed,
        perturbations: options.perturbations,
    };
    Ok(recording.run(env, observation, expert))
}

/// Provenance of an expert recording (the rest of [`EpisodeMeta`] comes from
/// the environment).
pub(crate) struct ExpertRecording {
    /// `expert`, or `takeover` when the expert took over from a policy.
    pub source: &'static str,
    /// Initial state the environment was reset to.
    pub state_index: usize,
    /// Std of the noise added to the executed motion dimensions.
    pub noise_std: f32,
    /// Seed of that noise.
    pub seed: u64,
    /// Perturbation bursts (drawn from their own stream of `seed`).
    pub perturbations: Perturbations,
}

impl ExpertRecording {
    /// Lets `expert` act in `env` from `observation` (the environment's
    /// current one) until the episode ends, executing its actions plus noise
    /// and recording its clean actions as labels. The episode starts at the
    /// environment's current step (`start_step`) and ends at its step limit.
    pub(crate) fn run(
        self,
        env: &mut SimEnv,
        mut observation: Observation,
        mut expert: Expert,
    ) -> (Episode, Option<String>) {
        let start_step = env.steps();
        let (task_index, task_name, instruction) = (
            env.task_index(),
            env.task().name.clone(),
            env.task().instruction.clone(),
        );
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        // A stream of its own, so that adding bursts leaves the noise unchanged.
        let mut burst_rng = ChaCha8Rng::seed_from_u64(self.seed ^ 0x6275_7273_7473);
        let noise = Normal::new(0.0f32, self.noise_std.max(0.0)).expect("finite std");
        let (mut agent, mut wrist, mut proprio) = (vec![], vec![], vec![]);
        let (mut actions, mut labels) = (vec![], vec![]);
        let mut burst: Option<Burst> = None;
        let mut perturbed_steps = Vec::new();
        loop {
            agent.push(observation.agent_view.clone());
            wrist.push(observation.wrist_view.clone());
            proprio.extend(observation.proprio.to_vec());
            let label = expert.act(env);
            let mut executed = label;
            if self.noise_std > 0.0 {
                for value in &mut executed[..6] {
                    *value = (*value + noise.sample(&mut rng)).clamp(-1.0, 1.0);
                }
            }
            if burst.is_none() {
                burst = Burst::maybe_start(&self.perturbations, &mut burst_rng);
            }
            if let Some(active) = &mut burst {
                for (value, offset) in executed[..3].iter_mut().zip(active.offset) {
                    *value = (*value + offset).clamp(-1.0, 1.0);
                }
                perturbed_steps.push(labels.len() / ACTION_DIM);
                active.steps_left -= 1;
                if active.steps_left == 0 {
                    burst = None;
                }
            }
            let outcome = env.step(&executed);
            labels.extend_from_slice(&label);
            actions.extend_from_slice(&executed);
            observation = outcome.observation;
            if outcome.done {
                agent.push(observation.agent_view.clone());
                wrist.push(observation.wrist_view.clone());
                proprio.extend(observation.proprio.to_vec());
                let episode = Episode {
                    meta: EpisodeMeta {
                        suite: SUITE.into(),
                        task_index,
                        task_name,
                        instruction,
                        state_index: self.state_index,
                        success: outcome.success,
                        source: self.source.into(),
                        noise_std: self.noise_std,
                        seed: self.seed,
                        start_step,
                        perturbed_steps,
                    },
                    agent_view: agent,
                    wrist_view: wrist,
                    proprio,
                    proprio_dim: PROPRIO_DIM,
                    actions,
                    labels,
                    action_dim: ACTION_DIM,
                };
                return (episode, outcome.execution_error.map(|e| e.to_string()));
            }
        }
    }
}

/// Collects `per_task` expert episodes of each task into `out_dir`
/// (`task{TT}/ep{KKKK}.demo` and `manifest.json`), in parallel.
/// `progress(done, total)` is called after every episode.
pub fn collect_demos(
    options: &CollectOptions,
    out_dir: &Path,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<CollectSummary> {
    let _span = tracing::info_span!("collect_demos", out = %out_dir.display()).entered();
    let all = check_collection(options, out_dir)?;
    let started = Instant::now();
    // One job per (task, block of 50 initial states): each owns an environment.
    let jobs: Vec<(usize, usize)> = options
        .tasks
        .iter()
        .flat_map(|&t| (0..options.per_task.div_ceil(NUM_INIT_STATES)).map(move |b| (t, b)))
        .collect();
    let total = options.tasks.len() * options.per_task;
    let done = AtomicUsize::new(0);
    let results: Vec<Vec<Recorded>> = jobs
        .par_iter()
        .map(|&(task, block)| {
            let mut config = options.env.clone();
            config.init_seed = demo_init_seed(options.seed, block);
            let mut env = SimEnv::new(config);
            let first = block * NUM_INIT_STATES;
            let last = (first + NUM_INIT_STATES).min(options.per_task);
            (first..last)
                .map(|k| {
                    let seed = episode_seed(options.seed, task, k);
                    let (episode, error) = expert_episode(&mut env, task, k % NUM_INIT_STATES, options, seed)?;
                    let (success, steps) = (episode.meta.success, episode.steps());
                    if let Some(reason) = &error {
                        tracing::warn!(task, episode = k, %reason, "execution error; episode not written");
                    } else if success || options.keep_failures {
                        write_episode(&out_dir.join(format!("task{task:02}/ep{k:04}.demo")), &episode)?;
                    }
                    progress(done.fetch_add(1, Ordering::Relaxed) + 1, total);
                    Ok(Recorded { task, success, steps, execution_error: error.is_some() })
                })
                .collect::<Result<Vec<_>>>()
        })
        .collect::<Result<_>>()?;
    let flat: Vec<_> = results.into_iter().flatten().collect();
    let tasks = manifest_tasks(options, &all, &flat);
    let summary = CollectSummary {
        out_dir: out_dir.to_path_buf(),
        tasks: tasks.clone(),
        execution_errors: flat.iter().filter(|r| r.execution_error).count(),
        env_steps: flat.iter().map(|r| r.steps).sum(),
        seconds: started.elapsed().as_secs_f64(),
    };
    let manifest = Manifest {
        format: crate::demos::manifest::FORMAT.into(),
        suite: SUITE.into(),
        tasks,
        info: serde_json::json!({
            "source": "scripted expert",
            "per_task": options.per_task,
            "noise_std": options.noise_std,
            "perturbations": options.perturbations,
            "seed": options.seed,
            "keep_failures": options.keep_failures,
            "image_width": options.env.camera.width,
            "image_height": options.env.camera.height,
            "max_steps": options.env.max_steps,
            "execution_errors": summary.execution_errors,
            "env_steps": summary.env_steps,
            "seconds": summary.seconds,
        }),
    };
    manifest.write(&out_dir.join(MANIFEST_FILE))?;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demos::dataset::episode_files;
    use crate::demos::format::read_episode;

    fn options(perturbations: Perturbations) -> CollectOptions {
        let mut options = CollectOptions {
            tasks: vec![5],
            per_task: 1,
            noise_std: 0.0,
            seed: 4,
            perturbations,
            ..Default::default()
        };
        options.env.camera.width = 16;
        options.env.camera.height = 16;
        options
    }

    /// Bursts push the executed translation by their size at exactly the
    /// recorded steps; every other step executes the label.
    #[test]
    fn bursts_offset_the_recorded_steps_and_no_others() {
        let dir = tempfile::tempdir().unwrap();
        let perturbations = Perturbations {
            rate: 0.05,
            max_steps: 3,
            size: 0.2,
        };
        collect_demos(&options(perturbations), dir.path(), &|_, _| {}).unwrap();
        let files = episode_files(dir.path()).unwrap();
        let episode = read_episode(&files[0]).unwrap();
        let perturbed = &episode.meta.perturbed_steps;
        assert!(perturbed.len() >= 3, "{perturbed:?}");
        for t in 0..episode.steps() {
            let at = t * ACTION_DIM;
            let (executed, label) = (
                &episode.actions[at..at + ACTION_DIM],
                &episode.labels[at..at + ACTION_DIM],
            );
            assert_eq!(executed[3..], label[3..], "step {t}: rotation and gripper");
            let push: f32 = (0..3)
                .map(|i| (executed[i] - label[i]).powi(2))
                .sum::<f32>()
                .sqrt();
            if perturbed.contains(&t) {
                // Less only where the push was clamped at the action bound.
                let clamped = (0..3).any(|i| executed[i].abs() == 1.0);
                assert!((push - 0.2).abs() < 1e-4 || clamped, "step {t}: {push}");
            } else {
                assert_eq!(push, 0.0, "step {t} is not perturbed");
            }
        }
        let bad = Perturbations {
            rate: 1.5,
            ..perturbations
        };
        let error = collect_demos(&options(bad), &dir.path().join("bad"), &|_, _| {})
            .unwrap_err()
            .to_string();
        assert!(error.contains("perturbation rate"), "{error}");
    }
}
