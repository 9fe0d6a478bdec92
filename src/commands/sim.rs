//! `wmrl sim …`: the Rapier LIBERO-Long simulator: render an initial state,
//! record an expert episode as a GIF, sweep the scripted experts over the fixed
//! initial states (as scripted, or disturbed to stress the physics), and save
//! the initial states to a file.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use wmrl_sim::rollout::{
    EpisodeSummary, Perturbation, run_expert, run_perturbed_expert, task_rates,
};
use wmrl_sim::{EnvConfig, InitStateSet, NUM_INIT_STATES, NUM_TASKS, SimEnv};

use crate::cli::GlobalArgs;

/// Arguments of `wmrl sim`.
#[derive(Debug, Args)]
pub struct SimArgs {
    #[command(subcommand)]
    pub command: SimCommand,
}

/// Simulator subcommands.
#[derive(Debug, Subcommand)]
pub enum SimCommand {
    /// Write the agent-view and wrist images of an initial state as PNGs.
    Render {
        /// Task index (0..10).
        #[arg(long, default_value_t = 0)]
        task: usize,
        /// Initial-state index (0..50).
        #[arg(long, default_value_t = 0)]
        state: usize,
        /// Image side in pixels.
        #[arg(long, default_value_t = 128)]
        size: u32,
        /// Output directory.
        #[arg(long, default_value = "runs/sim")]
        out: PathBuf,
    },
    /// Record the scripted expert's episode as an animated GIF (agent view | wrist).
    Video {
        /// Task index (0..10).
        #[arg(long, default_value_t = 0)]
        task: usize,
        /// Initial-state index (0..50).
        #[arg(long, default_value_t = 0)]
        state: usize,
        /// Image side in pixels.
        #[arg(long, default_value_t = 128)]
        size: u32,
        /// Keep every n-th frame.
        #[arg(long, default_value_t = 2)]
        every: usize,
        /// Output GIF.
        #[arg(long, default_value = "runs/sim/episode.gif")]
        out: PathBuf,
    },
    /// Run the scripted experts on the fixed initial states; per-task success rates.
    Experts {
        /// Tasks (comma-separated); all ten by default.
        #[arg(long, value_delimiter = ',')]
        tasks: Vec<usize>,
        /// Initial states 0..N per task.
        #[arg(long, default_value_t = NUM_INIT_STATES)]
        states: usize,
        /// Directory for metrics.jsonl and summary.json (both replaced by each sweep).
        #[arg(long, default_value = "runs/sim/experts")]
        out: PathBuf,
    },
    /// Stress the physics: run the experts with their actions disturbed the way
    /// an exploring policy's are (arm noise, gripper command flips) and count the
    /// episodes that end in an execution error (an unstable simulation).
    Stress {
        /// Tasks (comma-separated); all ten by default.
        #[arg(long, value_delimiter = ',')]
        tasks: Vec<usize>,
        /// Initial states 0..N per task.
        #[arg(long, default_value_t = 20)]
        states: usize,
        /// Half-width of the uniform noise added to the six arm action dimensions.
        #[arg(long, default_value_t = 0.3)]
        arm_noise: f32,
        /// Probability per control step that the gripper command is inverted.
        #[arg(long, default_value_t = 0.3)]
        gripper_flip: f64,
        /// Seed of the disturbances.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Directory for metrics.jsonl and summary.json (both replaced by each sweep).
        #[arg(long, default_value = "runs/sim/stress")]
        out: PathBuf,
    },
    /// Generate a task's fixed initial states and save them as JSON.
    InitStates {
        /// Task index (0..10).
        #[arg(long, default_value_t = 0)]
        task: usize,
        /// Output file.
        #[arg(long)]
        out: PathBuf,
    },
}

pub fn run(global: &GlobalArgs, args: SimArgs) -> anyhow::Result<()> {
    match args.command {
        SimCommand::Render {
            task,
            state,
            size,
            out,
        } => {
            let mut env = SimEnv::new(config(size));
            let obs = env.reset(task, state)?;
            std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
            let agent = out.join(format!("task{task}_state{state}_agentview.png"));
            let wrist = out.join(format!("task{task}_state{state}_wrist.png"));
            obs.agent_view
                .save(&agent)
                .with_context(|| format!("writing {}", agent.display()))?;
            obs.wrist_view
                .save(&wrist)
                .with_context(|| format!("writing {}", wrist.display()))?;
            let info = serde_json::json!({
                "task": task, "state": state, "instruction": env.task().instruction,
                "agent_view": agent, "wrist_view": wrist, "proprio": obs.proprio.to_vec(),
            });
            print_value(global, &info)
        }
        SimCommand::Video {
            task,
            state,
            size,
            every,
            out,
        } => {
            let (frames, summary) = record_expert_gif(task, state, size, every, &out)?;
            let info = serde_json::json!({ "gif": out, "frames": frames, "episode": summary });
            print_value(global, &info)
        }
        SimCommand::Experts { tasks, states, out } => experts(global, tasks, states, None, out),
        SimCommand::Stress {
            tasks,
            states,
            arm_noise,
            gripper_flip,
            seed,
            out,
        } => {
            anyhow::ensure!(
                arm_noise.is_finite() && (0.0..=2.0).contains(&arm_noise),
                "--arm-noise must be in [0, 2] (action units), got {arm_noise}"
            );
            anyhow::ensure!(
                (0.0..=1.0).contains(&gripper_flip),
                "--gripper-flip must be a probability in [0, 1], got {gripper_flip}"
            );
            let perturbation = Perturbation {
                arm_noise,
                gripper_flip,
                seed,
            };
            experts(global, tasks, states, Some(perturbation), out)
        }
        SimCommand::InitStates { task, out } => {
            let mut env = SimEnv::new(config(128));
            let bar = progress(NUM_INIT_STATES as u64, "initial states");
            let mut list = Vec::new();
            for k in 0..NUM_INIT_STATES {
                list.push((*env.initial_state(task, k)?).clone());
                bar.inc(1);
            }
            bar.finish_and_clear();
            let set = InitStateSet {
                task: wmrl_sim::task(task)?.name,
                seed: env.config().init_seed,
                states: list,
            };
            set.save(&out)?;
            print_value(
                global,
                &serde_json::json!({ "task": task, "states": set.states.len(), "file": out }),
            )
        }
    }
}

/// Runs the scripted expert of `task` from fixed initial state `state` with
/// both cameras at `size` pixels and writes every `every`-th frame (agent
/// view beside wrist view) as an animated GIF to `out`. Returns the frame
/// count and the episode's summary.
pub(crate) fn record_expert_gif(
    task: usize,
    state: usize,
    size: u32,
    every: usize,
    out: &std::path::Path,
) -> anyhow::Result<(usize, EpisodeSummary)> {
    let mut env = SimEnv::new(config(size));
    let mut frames = Vec::new();
    let mut n = 0usize;
    let summary = run_expert(&mut env, task, state, |obs| {
        if n.is_multiple_of(every.max(1)) {
            frames.push(wmrl_sim::render::side_by_side(
                &obs.agent_view,
                &obs.wrist_view,
            ));
        }
        n += 1;
    })?;
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    wmrl_sim::render::save_gif(&frames, (50 * every.max(1)) as u32, out)?;
    Ok((frames.len(), summary))
}

fn config(size: u32) -> EnvConfig {
    let mut c = EnvConfig::default();
    c.camera.width = size;
    c.camera.height = size;
    c
}

fn progress(len: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} {elapsed_precise} eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message(what.to_string());
    bar
}

fn print_value(global: &GlobalArgs, v: &serde_json::Value) -> anyhow::Result<()> {
    if global.json {
        println!("{}", serde_json::to_string_pretty(v)?);
    } else {
        println!("{v:#}");
    }
    Ok(())
}

/// Sweeps the experts (disturbed by `perturbation` when given) and prints or
/// writes per-task success and execution-error counts.
fn experts(
    global: &GlobalArgs,
    tasks: Vec<usize>,
    states: usize,
    perturbation: Option<Perturbation>,
    out: PathBuf,
) -> anyhow::Result<()> {
    use rayon::prelude::*;
    let tasks = if tasks.is_empty() {
        (0..NUM_TASKS).collect()
    } else {
        tasks
    };
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let bar = progress((tasks.len() * states) as u64, "expert episodes");
    let mut cfg = EnvConfig::default();
    cfg.camera.enabled = false;
    let episodes: Vec<EpisodeSummary> = tasks
        .par_iter()
        .flat_map(|&task| {
            let mut env = SimEnv::new(cfg.clone());
            (0..states)
                .map(|k| {
                    let r = match &perturbation {
                        Some(p) => run_perturbed_expert(&mut env, task, k, p),
                        None => run_expert(&mut env, task, k, |_| {}),
                    };
                    bar.inc(1);
                    r
                })
                .collect::<Vec<_>>()
        })
        .collect::<wmrl_sim::Result<Vec<_>>>()?;
    bar.finish_and_clear();
    // One row per episode, replacing the rows of an earlier sweep into the
    // same folder (as summary.json is): rows of two sweeps mixed in one file
    // would read as one sweep with twice the episodes.
    wmrl_report::write_jsonl_atomic(&out.join("metrics.jsonl"), &episodes)?;
    let rates = task_rates(&episodes);
    let errors: usize = rates.iter().map(|r| r.execution_errors).sum();
    let summary = serde_json::json!({
        "states_per_task": states,
        "perturbation": perturbation,
        "execution_errors": errors,
        "tasks": rates,
    });
    wmrl_report::write_json_atomic(&out.join("summary.json"), &summary)?;
    if global.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        println!("task  success  rate   errors  mean steps  fast  peak m/s");
        for r in &rates {
            println!(
                "{:>4}  {:>3}/{:<3}  {:>5.1}%  {:>6}  {:>10.0}  {:>4}  {:>8.1}",
                r.task,
                r.successes,
                r.episodes,
                100.0 * r.success_rate,
                r.execution_errors,
                r.mean_success_steps,
                r.fast_episodes,
                r.peak_speed
            );
        }
        println!(
            "(fast: episodes with a body above {} m/s; errors end at 15 m/s)",
            wmrl_sim::rollout::FAST_BODY_SPEED
        );
        // Under a perturbation task failures are expected; only execution errors matter.
        let failed: Vec<&EpisodeSummary> = episodes
            .iter()
            .filter(|e| match perturbation {
                Some(_) => e.execution_error.is_some(),
                None => !e.success,
            })
            .collect();
        if perturbation.is_some() {
            println!("execution errors: {errors} of {} episodes", episodes.len());
        } else if !failed.is_empty() {
            println!(
                "failed states (goals not met at the end; trace one with WMRL_EXPERT_TRACE=1):"
            );
        }
        for e in failed {
            let why = match &e.execution_error {
                Some(err) => format!("execution error: {err}"),
                None => e.unmet_goals.join(", "),
            };
            println!("  task {} state {:>2}: {why}", e.task, e.init_state);
        }
    }
    Ok(())
}
