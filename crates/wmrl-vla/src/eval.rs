//! Policy evaluation through any anchor executor: per-task success on fixed
//! initial states, a JSON-ready report, and GIFs of a few failures.
//!
//! The evaluator only needs `AnchorExecutor<VlaAdapter, P>`, so the same code
//! evaluates on the simulator now and on robots later. Episodes that end in an
//! execution error (the simulation went unstable, a robot dropped out) are
//! re-run with a fresh seed up to `max_attempts` times and never counted as
//! task failures; those that still fail are reported separately.

use std::path::{Path, PathBuf};
use std::time::Instant;

use image::codecs::gif::{GifEncoder, Repeat};
use image::{Delay, Frame, RgbImage};
use serde::Serialize;
use wmrl_core::seams::{AnchorExecutor, EpisodeRequest, Execution};

use crate::rollout::{EpisodeRecord, TaskPrompt, VlaAdapter};
use crate::{Error, Result};

/// Evaluation settings.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalOptions {
    /// Episodes handed to the executor per call (default: 50).
    pub wave: usize,
    /// Tries per episode when execution fails (default: 3).
    pub max_attempts: u32,
    /// Failure GIFs to write (default: 3).
    pub gifs: usize,
    /// GIF frame delay in milliseconds (default: 100).
    pub gif_frame_ms: u32,
    /// Seed of the episodes' randomness (default: 0).
    pub seed: u64,
}

impl Default for EvalOptions {
    fn default() -> Self {
        Self {
            wave: 50,
            max_attempts: 3,
            gifs: 3,
            gif_frame_ms: 100,
            seed: 0,
        }
    }
}

/// One task's results.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskResult {
    /// Task index.
    pub task_index: usize,
    /// Instruction.
    pub instruction: String,
    /// Episodes that ran to their end.
    pub episodes: usize,
    /// Successful episodes.
    pub successes: usize,
    /// `successes / episodes`.
    pub success_rate: f64,
    /// Binomial standard error of the rate.
    pub std_error: f64,
    /// Mean control steps of the successful episodes.
    pub mean_success_steps: f64,
    /// Episodes that hit an execution error on every attempt (excluded above).
    pub execution_errors: usize,
    /// Initial states that failed.
    pub failed_states: Vec<usize>,
}

/// The whole evaluation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvalReport {
    /// Per task, in the order first seen.
    pub tasks: Vec<TaskResult>,
    /// Mean of the per-task success rates.
    pub average_success: f64,
    /// Completed episodes.
    pub episodes: usize,
    /// Control steps executed (completed episodes).
    pub env_steps: usize,
    /// Execution errors, counting every failed attempt.
    pub execution_error_attempts: usize,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// GIFs written.
    pub gifs: Vec<PathBuf>,
}

fn seed_of(base: u64, index: usize, attempt: u32) -> u64 {
    base.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ ((index as u64) << 8) ^ attempt as u64
}

/// Encodes frames as a looping GIF and writes it atomically.
pub fn write_gif(path: &Path, frames: &[RgbImage], frame_ms: u32) -> Result<()> {
    let mut bytes = Vec::new();
    {
        let mut encoder = GifEncoder::new_with_speed(&mut bytes, 10);
        let gif_err = |e: image::ImageError| {
            Error::mismatch(format!("GIF {}", path.display()), "encodable frames", e)
        };
        encoder.set_repeat(Repeat::Infinite).map_err(gif_err)?;
        let frames = frames.iter().map(|f| {
            let rgba = image::DynamicImage::ImageRgb8(f.clone()).to_rgba8();
            Frame::from_parts(rgba, 0, 0, Delay::from_numer_denom_ms(frame_ms, 1))
        });
        encoder.encode_frames(frames).map_err(gif_err)?;
    }
    wmrl_report::write_atomic(path, &bytes)?;
    Ok(())
}

/// Runs every prompt through `executor` with `policy` and aggregates per task.
/// `progress(done, total)` is called after each wave; failure GIFs go to `gif_dir`.
pub fn evaluate<E, P>(
    executor: &mut E,
    policy: &P,
    prompts: &[TaskPrompt],
    options: &EvalOptions,
    gif_dir: Option<&Path>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<EvalReport>
where
    E: AnchorExecutor<VlaAdapter, P>,
    P: ?Sized,
{
    let _span = tracing::info_span!("evaluate", episodes = prompts.len()).entered();
    let started = Instant::now();
    let mut outcomes: Vec<Option<EpisodeRecord>> = vec![None; prompts.len()];
    let mut attempts = vec![0u32; prompts.len()];
    let mut pending: Vec<usize> = (0..prompts.len()).collect();
    let (mut error_attempts, mut gifs, mut done) = (0, Vec::new(), 0);
    while !pending.is_empty() {
        let wave: Vec<usize> = pending
            .drain(..options.wave.max(1).min(pending.len()))
            .collect();
        let requests: Vec<EpisodeRequest<'_, TaskPrompt>> = wave
            .iter()
            .map(|&i| EpisodeRequest {
                group: i,
                sample: 0,
                prompt: &prompts[i],
                seed: seed_of(options.seed, i, attempts[i]),
                attempt: attempts[i],
            })
            .collect();
        let results = executor
            .execute(policy, &requests)
            .map_err(|e| Error::Executor {
                message: e.to_string(),
            })?;
        if results.len() != wave.len() {
            return Err(Error::mismatch(
                "executions returned",
                wave.len(),
                results.len(),
            ));
        }
        for (&i, result) in wave.iter().zip(results) {
            match result {
                Execution::Completed { mut rollout, .. } => {
                    if let Some(dir) = gif_dir.filter(|_| {
                        !rollout.success && gifs.len() < options.gifs && !rollout.frames.is_empty()
                    }) {
                        let path = dir.join(format!(
                            "failure_task{}_state{}.gif",
                            rollout.task_index, rollout.state_index
                        ));
                        write_gif(&path, &rollout.frames, options.gif_frame_ms)?;
                        gifs.push(path);
                    }
                    rollout.frames = Vec::new();
                    rollout.chunks = Vec::new();
                    outcomes[i] = Some(rollout);
                    done += 1;
                }
                Execution::Failed { reason } => {
                    error_attempts += 1;
                    attempts[i] += 1;
                    let p = &prompts[i];
                    tracing::warn!(task = p.task_index, state = p.state_index, attempt = attempts[i], %reason, "execution error");
                    if attempts[i] < options.max_attempts {
                        pending.push(i);
                    } else {
                        done += 1;
                    }
                }
            }
        }
        progress(done, prompts.len());
    }
    let mut tasks: Vec<TaskResult> = Vec::new();
    for (prompt, outcome) in prompts.iter().zip(&outcomes) {
        let position = match tasks.iter().position(|t| t.task_index == prompt.task_index) {
            Some(p) => p,
            None => {
                tasks.push(TaskResult {
                    task_index: prompt.task_index,
                    instruction: prompt.instruction.clone(),
                    episodes: 0,
                    successes: 0,
                    success_rate: 0.0,
                    std_error: 0.0,
                    mean_success_steps: 0.0,
                    execution_errors: 0,
                    failed_states: Vec::new(),
                });
                tasks.len() - 1
            }
        };
        let task = &mut tasks[position];
        match outcome {
            Some(record) => {
                task.episodes += 1;
                if record.success {
                    task.successes += 1;
                    task.mean_success_steps += record.steps as f64;
                } else {
                    task.failed_states.push(prompt.state_index);
                }
            }
            None => task.execution_errors += 1,
        }
    }
    for task in &mut tasks {
        let n = task.episodes.max(1) as f64;
        task.success_rate = task.successes as f64 / n;
        task.std_error = (task.success_rate * (1.0 - task.success_rate) / n).sqrt();
        task.mean_success_steps /= task.successes.max(1) as f64;
    }
    let completed: Vec<&EpisodeRecord> = outcomes.iter().flatten().collect();
    Ok(EvalReport {
        average_success: tasks.iter().map(|t| t.success_rate).sum::<f64>()
            / tasks.len().max(1) as f64,
        episodes: completed.len(),
        env_steps: completed.iter().map(|r| r.steps).sum(),
        execution_error_attempts: error_attempts,
        seconds: started.elapsed().as_secs_f64(),
        gifs,
        tasks,
    })
}
