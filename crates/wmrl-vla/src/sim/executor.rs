//! Runs a closed-loop policy in simulated environments, stepped in parallel
//! (rayon): the simulator's implementation of the core's `AnchorExecutor`.
//!
//! Per wave of at most `envs` episodes: reset every environment to its
//! (task, initial state); then, until all are done, encode the active
//! environments' observations in one batch, decode one action chunk each, and
//! let every environment execute its chunk (`execute_steps` actions, default
//! the whole chunk) in parallel, stopping at success, the step limit (520 by
//! default) or an execution error. An execution error ends the episode as
//! `Execution::Failed`, never as a task failure.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use wmrl_core::seams::{AnchorExecutor, EpisodeRequest, Execution};
use wmrl_sim::{ACTION_DIM, Action, EnvConfig, Observation, SimEnv};

use crate::ensemble::TemporalEnsemble;
use crate::inference::{ActionChunk, PolicyInput};
use crate::rollout::{ClosedLoopActor, EpisodeRecord, RecordedObservation, TaskPrompt, VlaAdapter};
use crate::{Error, Result};

/// Executor settings.
#[derive(Debug, Clone, PartialEq)]
pub struct SimExecutorOptions {
    /// Environment settings (cameras, 520-step limit, physics).
    pub env: EnvConfig,
    /// Actions of each chunk executed before re-planning; `None` = the whole chunk (default).
    pub execute_steps: Option<usize>,
    /// Sampling temperature; 0 = greedy decoding (default: 0).
    pub temperature: f64,
    /// Temporal ensembling (evaluation only): execute the weighted mean of
    /// every chunk's prediction for a step, weights `exp(-decay · i)` from
    /// the oldest (see [`crate::ensemble`]). `None` executes the newest chunk.
    pub temporal_ensemble: Option<f32>,
    /// Record every n-th agent-view frame (0 = none, default).
    pub record_every: usize,
    /// Record the observation at every chunk boundary in
    /// `EpisodeRecord::observations` (for a world model's replay buffer).
    pub record_observations: bool,
}

impl Default for SimExecutorOptions {
    fn default() -> Self {
        Self {
            env: EnvConfig::default(),
            execute_steps: None,
            temperature: 0.0,
            temporal_ensemble: None,
            record_every: 0,
            record_observations: false,
        }
    }
}

/// A pool of simulated environments.
pub struct SimExecutor {
    envs: Vec<SimEnv>,
    options: SimExecutorOptions,
}

impl std::fmt::Debug for SimExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimExecutor")
            .field("envs", &self.envs.len())
            .field("options", &self.options)
            .finish()
    }
}

/// One running episode.
struct Running {
    observation: Observation,
    proprio: Vec<f32>,
    record: EpisodeRecord,
    rng: ChaCha8Rng,
    ensemble: Option<TemporalEnsemble>,
    done: bool,
    error: Option<String>,
}

impl SimExecutor {
    /// `envs` environments (at least 1).
    pub fn new(envs: usize, options: SimExecutorOptions) -> Self {
        Self {
            envs: (0..envs.max(1))
                .map(|_| SimEnv::new(options.env.clone()))
                .collect(),
            options,
        }
    }

    /// Settings.
    pub fn options(&self) -> &SimExecutorOptions {
        &self.options
    }

    fn run_wave<P: ClosedLoopActor + ?Sized>(
        &mut self,
        policy: &P,
        wave: &[EpisodeRequest<'_, TaskPrompt>],
    ) -> Result<Vec<Execution<EpisodeRecord>>> {
        let record_every = self.options.record_every;
        let record_observations = self.options.record_observations;
        let temporal_ensemble = self.options.temporal_ensemble;
        let execute = self
            .options
            .execute_steps
            .unwrap_or(policy.chunk_len())
            .clamp(1, policy.chunk_len());
        let envs = &mut self.envs[..wave.len()];
        let mut running: Vec<std::result::Result<Running, String>> = envs
            .par_iter_mut()
            .zip(wave.par_iter())
            .map(|(env, request)| {
                let p = request.prompt;
                let observation = env
                    .reset(p.task_index, p.state_index)
                    .map_err(|e| format!("reset failed: {e}"))?;
                let mut record = EpisodeRecord {
                    task_index: p.task_index,
                    state_index: p.state_index,
                    ..Default::default()
                };
                if record_every > 0 {
                    record.frames.push(observation.agent_view.clone());
                }
                if record_observations {
                    record.observations.push(RecordedObservation {
                        agent_view: observation.agent_view.clone(),
                        wrist_view: observation.wrist_view.clone(),
                        proprio: observation.proprio.to_vec(),
                    });
                }
                Ok(Running {
                    proprio: observation.proprio.to_vec(),
                    observation,
                    record,
                    rng: ChaCha8Rng::seed_from_u64(request.seed),
                    ensemble: temporal_ensemble.map(TemporalEnsemble::new),
                    done: false,
                    error: None,
                })
            })
            .collect();
        loop {
            let mut active: Vec<(&mut SimEnv, &mut Running, &TaskPrompt)> = envs
                .iter_mut()
                .zip(running.iter_mut())
                .zip(wave)
                .filter_map(|((env, run), request)| match run {
                    Ok(run) if !run.done => Some((env, run, request.prompt)),
                    _ => None,
                })
                .collect();
            if active.is_empty() {
                break;
            }
            let inputs: Vec<PolicyInput<'_>> = active
                .iter()
                .map(|(_, run, prompt)| PolicyInput {
                    agent_view: &run.observation.agent_view,
                    wrist_view: &run.observation.wrist_view,
                    proprio: &run.proprio,
                    instruction: &prompt.instruction,
                })
                .collect();
            let mut rngs: Vec<ChaCha8Rng> =
                active.iter().map(|(_, run, _)| run.rng.clone()).collect();
            let chunks = act_in_sim(policy, &inputs, self.options.temperature, &mut rngs)?;
            drop(inputs);
            for ((_, run, _), rng) in active.iter_mut().zip(rngs) {
                run.rng = rng;
            }
            active.par_iter_mut().zip(chunks.into_par_iter()).for_each(
                |((env, run, _), mut chunk)| {
                    if let Some(ensemble) = run.ensemble.as_mut() {
                        ensemble.push(run.record.steps, chunk.clone());
                    }
                    chunk.executed = 0;
                    for step in 0..execute {
                        let ensembled = run
                            .ensemble
                            .as_mut()
                            .and_then(|e| e.action(run.record.steps));
                        let action: Action = ensembled
                            .as_deref()
                            .unwrap_or_else(|| chunk.action(step))
                            .try_into()
                            .expect("checked action dimension");
                        let outcome = env.step(&action);
                        run.record.steps += 1;
                        chunk.executed += 1;
                        if record_every > 0 && run.record.steps % record_every == 0 {
                            run.record
                                .frames
                                .push(outcome.observation.agent_view.clone());
                        }
                        run.proprio = outcome.observation.proprio.to_vec();
                        run.observation = outcome.observation;
                        if outcome.done {
                            run.done = true;
                            run.record.success = outcome.success;
                            run.error = outcome.execution_error.map(|e| e.to_string());
                            break;
                        }
                    }
                    run.record.chunks.push(chunk);
                    if record_observations {
                        run.record.observations.push(RecordedObservation {
                            agent_view: run.observation.agent_view.clone(),
                            wrist_view: run.observation.wrist_view.clone(),
                            proprio: run.proprio.clone(),
                        });
                    }
                },
            );
        }
        Ok(running
            .into_iter()
            .map(|run| match run {
                Err(reason) => Execution::Failed { reason },
                Ok(Running {
                    error: Some(reason),
                    ..
                }) => Execution::Failed { reason },
                Ok(run) => {
                    let reward = if run.record.success { 1.0 } else { 0.0 };
                    Execution::Completed {
                        rollout: run.record,
                        reward,
                    }
                }
            })
            .collect())
    }
}

/// One chunk per input from `policy`, checked to have the simulator's action
/// dimension.
pub(crate) fn act_in_sim<P: ClosedLoopActor + ?Sized>(
    policy: &P,
    inputs: &[PolicyInput<'_>],
    temperature: f64,
    rngs: &mut [ChaCha8Rng],
) -> Result<Vec<ActionChunk>> {
    let chunks = policy.act(inputs, temperature, rngs)?;
    if chunks.first().is_some_and(|c| c.action_dim != ACTION_DIM) {
        return Err(Error::mismatch(
            "policy action dimension",
            ACTION_DIM,
            chunks[0].action_dim,
        ));
    }
    Ok(chunks)
}

impl<P: ClosedLoopActor + ?Sized> AnchorExecutor<VlaAdapter, P> for SimExecutor {
    type Error = Error;

    fn execute(
        &mut self,
        policy: &P,
        episodes: &[EpisodeRequest<'_, TaskPrompt>],
    ) -> Result<Vec<Execution<EpisodeRecord>>> {
        let _span = tracing::info_span!("sim_execute", episodes = episodes.len()).entered();
        let mut out = Vec::with_capacity(episodes.len());
        for wave in episodes.chunks(self.envs.len()) {
            out.extend(self.run_wave(policy, wave)?);
        }
        Ok(out)
    }
}
