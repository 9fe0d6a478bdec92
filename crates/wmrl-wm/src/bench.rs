//! `wmrl bench wm`: imagined episodes per second against simulated episodes
//! per second, with the same policy, prompts and sampling, on the same
//! machine and in the same run, so the ratio is what the world-model stream
//! saves per episode.

use std::time::Instant;

use serde::Serialize;
use wmrl_core::seams::{AnchorExecutor, EpisodeRequest, Execution};
use wmrl_vla::VlaPolicy;
use wmrl_vla::rollout::TaskPrompt;
use wmrl_vla::sim::{SimExecutor, SimExecutorOptions};

use crate::Result;
use crate::imagine::VlaWorldModel;

/// What was measured.
#[derive(Debug, Clone, Serialize)]
pub struct WmBenchReport {
    /// Simulated episodes run.
    pub simulated_episodes: usize,
    /// Control steps they took.
    pub simulated_steps: usize,
    /// Seconds.
    pub simulated_seconds: f64,
    /// Simulated episodes per second.
    pub simulated_episodes_per_s: f64,
    /// Imagined episodes.
    pub imagined_episodes: usize,
    /// Control steps they covered (chunks × chunk length).
    pub imagined_steps: usize,
    /// Seconds.
    pub imagined_seconds: f64,
    /// Imagined episodes per second.
    pub imagined_episodes_per_s: f64,
    /// Imagined ÷ simulated episodes per second.
    pub episode_ratio: f64,
    /// Imagined ÷ simulated control steps per second.
    pub step_ratio: f64,
    /// Environments stepped in parallel by the simulator.
    pub envs: usize,
    /// Imagined episodes per batched forward loop.
    pub imagine_batch: usize,
}

/// Runs `simulated` episodes in the simulator and `imagined` in the world
/// model over the same prompts (cycled) at the same temperature.
pub fn bench_world_model(
    policy: &VlaPolicy,
    world_model: &mut VlaWorldModel,
    sim_options: &SimExecutorOptions,
    envs: usize,
    prompts: &[TaskPrompt],
    simulated: usize,
    imagined: usize,
) -> Result<WmBenchReport> {
    let request = |i: usize| EpisodeRequest {
        group: i,
        sample: 0,
        prompt: &prompts[i % prompts.len()],
        seed: 1000 + i as u64,
        attempt: 0,
    };
    // Warm-up: render and encode the start observations once (cached afterwards).
    let warm: Vec<(&TaskPrompt, u64)> = prompts.iter().map(|p| (p, 0)).collect();
    world_model.imagine_prompts(policy, &warm)?;
    let mut executor = SimExecutor::new(envs, sim_options.clone());
    let requests: Vec<_> = (0..simulated).map(request).collect();
    let start = Instant::now();
    let executions = executor.execute(policy, &requests)?;
    let simulated_seconds = start.elapsed().as_secs_f64();
    let simulated_steps: usize = executions
        .iter()
        .map(|e| match e {
            Execution::Completed { rollout, .. } => rollout.steps,
            Execution::Failed { .. } => 0,
        })
        .sum();
    let dream_requests: Vec<(&TaskPrompt, u64)> = (0..imagined)
        .map(|i| (&prompts[i % prompts.len()], 1000 + i as u64))
        .collect();
    let start = Instant::now();
    let dreams = world_model.imagine_prompts(policy, &dream_requests)?;
    let imagined_seconds = start.elapsed().as_secs_f64();
    let imagined_steps: usize = dreams.iter().map(|d| d.rollout.steps).sum();
    let sim_eps = simulated as f64 / simulated_seconds.max(1e-9);
    let img_eps = imagined as f64 / imagined_seconds.max(1e-9);
    let sim_sps = simulated_steps as f64 / simulated_seconds.max(1e-9);
    let img_sps = imagined_steps as f64 / imagined_seconds.max(1e-9);
    Ok(WmBenchReport {
        simulated_episodes: simulated,
        simulated_steps,
        simulated_seconds,
        simulated_episodes_per_s: sim_eps,
        imagined_episodes: imagined,
        imagined_steps,
        imagined_seconds,
        imagined_episodes_per_s: img_eps,
        episode_ratio: img_eps / sim_eps.max(1e-12),
        step_ratio: img_sps / sim_sps.max(1e-12),
        envs,
        imagine_batch: world_model.model().config().imagine.batch,
    })
}
