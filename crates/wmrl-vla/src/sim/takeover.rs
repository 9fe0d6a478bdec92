//! `wmrl data collect --takeover CHECKPOINT`: expert demonstrations from the
//! states a policy drives itself into.
//!
//! Behaviour cloning compounds its own errors: a cloned policy drifts to
//! states the expert never visited and has no label for. DAgger (Ross et al.
//! 2011) fixes this by labelling the policy's own states with the expert;
//! a scripted expert here is a state machine over skills, so instead of
//! relabelling single states it *takes over* (as in HG-DAgger, Kelly et al.
//! 2019): the policy runs from a demonstration initial state for a random
//! number of steps, then a fresh expert ([`Expert::resume`], which skips the
//! skills whose goal already holds) finishes the episode from there within
//! the same step limit. Only the expert's part is recorded (source
//! `takeover`, `start_step` = the hand-over step), so the labels stay the
//! expert's while the states come from the policy's distribution.
//!
//! The policy runs batched over one environment per initial state of a block
//! (greedy by default, as in evaluation); the environments step in parallel
//! (rayon). Initial states come from the demonstration seeds, never the 50
//! evaluation states.

use std::ops::RangeInclusive;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::Serialize;
use wmrl_sim::expert::Expert;
use wmrl_sim::{Action, NUM_INIT_STATES, Observation, SimEnv};

use super::collect::{
    CollectOptions, CollectSummary, ExpertRecording, Recorded, check_collection, demo_init_seed,
    episode_seed, manifest_tasks,
};
use super::executor::act_in_sim;
use crate::demos::{MANIFEST_FILE, Manifest, write_episode};
use crate::inference::PolicyInput;
use crate::rollout::ClosedLoopActor;
use crate::sim::SUITE;
use crate::{Error, Result};

/// What to collect and how the policy drives before the expert takes over.
#[derive(Debug, Clone, PartialEq)]
pub struct TakeoverOptions {
    /// Tasks, episodes per task, noise on the expert's part, seed, environment.
    pub collect: CollectOptions,
    /// The hand-over step, drawn uniformly per episode (default 20..=300).
    pub steps: RangeInclusive<usize>,
    /// Actions of each policy chunk executed before re-planning (default 2).
    pub execute_steps: usize,
    /// Policy sampling temperature (≤ 0: greedy, the default).
    pub temperature: f64,
}

impl Default for TakeoverOptions {
    fn default() -> Self {
        Self {
            collect: CollectOptions::default(),
            steps: 20..=300,
            execute_steps: 2,
            temperature: 0.0,
        }
    }
}

/// Counts of a takeover collection beyond those of [`CollectSummary`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TakeoverSummary {
    /// Per-task counts, execution errors, steps and time.
    #[serde(flatten)]
    pub collect: CollectSummary,
    /// Episodes the policy finished (success or step limit) before its hand-over step (not written).
    pub policy_finished: usize,
    /// Control steps the policy drove.
    pub policy_steps: usize,
}

/// One environment of a block while the policy drives it.
struct Driving {
    env: SimEnv,
    observation: Observation,
    state: usize,
    hand_over: usize,
    rng: ChaCha8Rng,
    /// The episode ended under the policy (success, step limit or execution error).
    finished: bool,
}

/// Collects `per_task` takeover episodes of each task into `out_dir` (same
/// layout and manifest as [`super::collect_demos`]). `progress(done, total)`
/// is called after every episode.
pub fn collect_takeover_demos<P: ClosedLoopActor + ?Sized>(
    policy: &P,
    options: &TakeoverOptions,
    out_dir: &Path,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<TakeoverSummary> {
    let _span = tracing::info_span!("collect_takeover_demos", out = %out_dir.display()).entered();
    let collect = &options.collect;
    if options.steps.is_empty() || *options.steps.end() >= collect.env.max_steps {
        return Err(Error::mismatch(
            "takeover steps",
            format!("a range within 0..{}", collect.env.max_steps),
            format!("{:?}", options.steps),
        ));
    }
    let all = check_collection(collect, out_dir)?;
    let execute = options.execute_steps.clamp(1, policy.chunk_len());
    let started = Instant::now();
    let total = collect.tasks.len() * collect.per_task;
    let done = AtomicUsize::new(0);
    let mut results: Vec<Recorded> = Vec::new();
    let (mut policy_finished, mut policy_steps) = (0, 0);
    for &task in &collect.tasks {
        let instruction = &all.iter().find(|(i, _)| *i == task).expect("checked").1;
        for block in 0..collect.per_task.div_ceil(NUM_INIT_STATES) {
            let first = block * NUM_INIT_STATES;
            let last = (first + NUM_INIT_STATES).min(collect.per_task);
            let mut config = collect.env.clone();
            config.init_seed = demo_init_seed(collect.seed, block);
            let mut driving: Vec<Driving> = (first..last)
                .into_par_iter()
                .map(|k| {
                    let mut env = SimEnv::new(config.clone());
                    let state = k % NUM_INIT_STATES;
                    let observation = env.reset(task, state).map_err(|e| Error::Executor {
                        message: format!("task {task} state {state}: {e}"),
                    })?;
                    let mut rng = ChaCha8Rng::seed_from_u64(episode_seed(collect.seed, task, k));
                    let hand_over = rng.random_range(options.steps.clone());
                    Ok(Driving {
                        env,
                        observation,
                        state,
                        hand_over,
                        rng,
                        finished: false,
                    })
                })
                .collect::<Result<_>>()?;
            policy_steps += drive(policy, &mut driving, instruction, execute, options)?;
            let block_results: Vec<Recorded> = driving
                .into_par_iter()
                .enumerate()
                .filter_map(|(i, d)| {
                    if d.finished {
                        progress(done.fetch_add(1, Ordering::Relaxed) + 1, total);
                        return None;
                    }
                    let Driving {
                        mut env,
                        observation,
                        state,
                        mut rng,
                        ..
                    } = d;
                    let expert = Expert::resume(&env);
                    let recording = ExpertRecording {
                        source: "takeover",
                        state_index: state,
                        noise_std: collect.noise_std,
                        seed: rng.random(),
                        perturbations: collect.perturbations,
                    };
                    let (episode, error) = recording.run(&mut env, observation, expert);
                    let k = first + i;
                    let (success, steps) = (episode.meta.success, episode.steps());
                    let written = if let Some(reason) = &error {
                        tracing::warn!(task, episode = k, %reason, "execution error; episode not written");
                        Ok(())
                    } else if success || collect.keep_failures {
                        write_episode(&out_dir.join(format!("task{task:02}/ep{k:04}.demo")), &episode)
                    } else {
                        Ok(())
                    };
                    progress(done.fetch_add(1, Ordering::Relaxed) + 1, total);
                    Some(written.map(|()| Recorded {
                        task,
                        success,
                        steps,
                        execution_error: error.is_some(),
                    }))
                })
                .collect::<Result<_>>()?;
            policy_finished += (last - first) - block_results.len();
            results.extend(block_results);
        }
    }
    let tasks = manifest_tasks(collect, &all, &results);
    let summary = TakeoverSummary {
        collect: CollectSummary {
            out_dir: out_dir.to_path_buf(),
            tasks: tasks.clone(),
            execution_errors: results.iter().filter(|r| r.execution_error).count(),
            env_steps: policy_steps + results.iter().map(|r| r.steps).sum::<usize>(),
            seconds: started.elapsed().as_secs_f64(),
        },
        policy_finished,
        policy_steps,
    };
    let manifest = Manifest {
        format: crate::demos::manifest::FORMAT.into(),
        suite: SUITE.into(),
        tasks,
        info: serde_json::json!({
            "source": "scripted expert taking over from a policy",
            "per_task": collect.per_task,
            "noise_std": collect.noise_std,
            "seed": collect.seed,
            "keep_failures": collect.keep_failures,
            "takeover_steps": [options.steps.start(), options.steps.end()],
            "execute_steps": execute,
            "temperature": options.temperature,
            "policy_finished": policy_finished,
            "policy_steps": policy_steps,
            "image_width": collect.env.camera.width,
            "image_height": collect.env.camera.height,
            "max_steps": collect.env.max_steps,
            "execution_errors": summary.collect.execution_errors,
            "env_steps": summary.collect.env_steps,
            "seconds": summary.collect.seconds,
        }),
    };
    manifest.write(&out_dir.join(MANIFEST_FILE))?;
    Ok(summary)
}

/// Lets the policy drive every environment of `driving` up to its hand-over
/// step (or the episode's end), re-planning every `execute` actions.
/// Returns the control steps taken.
fn drive<P: ClosedLoopActor + ?Sized>(
    policy: &P,
    driving: &mut [Driving],
    instruction: &str,
    execute: usize,
    options: &TakeoverOptions,
) -> Result<usize> {
    let steps = AtomicUsize::new(0);
    loop {
        let mut active: Vec<&mut Driving> = driving
            .iter_mut()
            .filter(|d| !d.finished && d.env.steps() < d.hand_over)
            .collect();
        if active.is_empty() {
            return Ok(steps.into_inner());
        }
        let proprio: Vec<Vec<f32>> = active
            .iter()
            .map(|d| d.observation.proprio.to_vec())
            .collect();
        let inputs: Vec<PolicyInput<'_>> = active
            .iter()
            .zip(&proprio)
            .map(|(d, proprio)| PolicyInput {
                agent_view: &d.observation.agent_view,
                wrist_view: &d.observation.wrist_view,
                proprio,
                instruction,
            })
            .collect();
        let mut rngs: Vec<ChaCha8Rng> = active.iter().map(|d| d.rng.clone()).collect();
        let chunks = act_in_sim(policy, &inputs, options.temperature, &mut rngs)?;
        drop(inputs);
        for (d, rng) in active.iter_mut().zip(rngs) {
            d.rng = rng;
        }
        active
            .par_iter_mut()
            .zip(chunks.into_par_iter())
            .for_each(|(d, chunk)| {
                for step in 0..execute {
                    if d.env.steps() >= d.hand_over {
                        break;
                    }
                    let action: Action = chunk
                        .action(step)
                        .try_into()
                        .expect("checked action dimension");
                    let outcome = d.env.step(&action);
                    steps.fetch_add(1, Ordering::Relaxed);
                    d.observation = outcome.observation;
                    if outcome.done {
                        d.finished = true;
                        break;
                    }
                }
            });
    }
}
