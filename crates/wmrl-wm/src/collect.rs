//! Policy rollouts in the simulator, recorded for the world model: the
//! policy runs closed loop through the simulator executor (the anchor
//! stream's executor) with observations recorded at every chunk boundary,
//! and each episode is encoded into a [`LatentTrajectory`].

use rand::SeedableRng;
use wmrl_core::seams::{AnchorExecutor, EpisodeRequest, Execution};
use wmrl_vla::VlaPolicy;
use wmrl_vla::rollout::TaskPrompt;
use wmrl_vla::sim::{SimExecutor, SimExecutorOptions};

use crate::Result;
use crate::trajectory::{LatentTrajectory, from_record};

/// Which episodes to run.
#[derive(Debug, Clone)]
pub struct RolloutPlan {
    /// Prompts (task × initial state).
    pub prompts: Vec<TaskPrompt>,
    /// Episodes per prompt.
    pub repeats: usize,
    /// Seed of the episodes' sampling.
    pub seed: u64,
}

/// Runs every episode of `plan` and returns the executed ones as latent
/// trajectories (episodes that ended in an execution error are skipped and
/// counted). `progress(done, total)` is called after each wave.
pub fn collect_rollouts(
    policy: &VlaPolicy,
    options: &SimExecutorOptions,
    envs: usize,
    plan: &RolloutPlan,
    mut progress: impl FnMut(usize, usize),
) -> Result<(Vec<LatentTrajectory>, usize)> {
    let _span = tracing::info_span!(
        "collect_rollouts",
        prompts = plan.prompts.len(),
        repeats = plan.repeats
    )
    .entered();
    let mut options = options.clone();
    options.record_observations = true;
    let mut executor = SimExecutor::new(envs, options);
    let mut requests = Vec::new();
    let mut seeds = rand_chacha::ChaCha8Rng::seed_from_u64(plan.seed);
    for prompt in &plan.prompts {
        for sample in 0..plan.repeats {
            requests.push(EpisodeRequest {
                group: requests.len(),
                sample,
                prompt,
                seed: rand::Rng::random(&mut seeds),
                attempt: 0,
            });
        }
    }
    let total = requests.len();
    let (mut out, mut errors) = (Vec::with_capacity(total), 0);
    for wave in requests.chunks(envs.max(1)) {
        let executions = executor.execute(policy, wave)?;
        for (request, execution) in wave.iter().zip(executions) {
            match execution {
                Execution::Completed { rollout, .. } => {
                    if let Some(t) = from_record(policy, &rollout, request.seed, "policy")? {
                        out.push(t);
                    }
                }
                Execution::Failed { reason } => {
                    tracing::warn!(task = request.prompt.task_index, state = request.prompt.state_index, %reason, "rollout skipped: execution error");
                    errors += 1;
                }
            }
        }
        progress(out.len() + errors, total);
    }
    Ok((out, errors))
}
