//! `wmrl eval`: per-task success of a policy checkpoint on the fixed initial
//! states, through the anchor executor (the simulator), with a JSON report and
//! GIFs of a few failures.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use wmrl_robots::pool::{PoolOptions, ZenohExecutorPool};
use wmrl_vla::eval::{self, EvalOptions};
use wmrl_vla::sim::{self, SimExecutor, SimExecutorOptions};

use crate::cli::GlobalArgs;

/// Arguments of `wmrl eval`.
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// Policy checkpoint folder (config.json + model.safetensors).
    #[arg(long)]
    pub checkpoint: PathBuf,
    /// Task suite (only `libero-long`).
    #[arg(long, default_value = sim::SUITE)]
    pub suite: String,
    /// Task indices, comma-separated (default: all ten).
    #[arg(long, value_delimiter = ',')]
    pub tasks: Vec<usize>,
    /// Fixed initial states per task, from state 0 (LIBERO evaluates all 50).
    #[arg(long, default_value_t = 50)]
    pub states: usize,
    /// Environments stepped in parallel (one policy batch).
    #[arg(long, default_value_t = 25)]
    pub envs: usize,
    /// Control steps per episode (LIBERO-Long: 520).
    #[arg(long, default_value_t = 520)]
    pub max_steps: usize,
    /// Actions of each chunk executed before re-planning (default: the whole chunk).
    #[arg(long)]
    pub execute_steps: Option<usize>,
    /// Sampling temperature; 0 decodes greedily.
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f64,
    /// Temporal ensembling as ACT does it: execute the weighted mean of every
    /// overlapping chunk's prediction for a step, weights exp(-DECAY·i) from
    /// the oldest (ACT uses 0.01). Pair with a small --execute-steps.
    #[arg(long, value_name = "DECAY")]
    pub temporal_ensemble: Option<f32>,
    /// Failure GIFs to write.
    #[arg(long, default_value_t = 3)]
    pub gifs: usize,
    /// Seed of sampling.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Output folder for eval.json and the GIFs (default: CHECKPOINT/eval).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Where episodes run: `sim` (in-process simulator) or `zenoh` (robots
    /// served by `wmrl robots serve`, reached with --connect/--listen/--zenoh-config).
    #[arg(long, default_value = "sim")]
    pub executor: String,
    #[command(flatten)]
    pub zenoh: super::robots::ZenohArgs,
}

pub fn run(global: &GlobalArgs, args: EvalArgs) -> anyhow::Result<()> {
    super::demos::check_suite(&args.suite)?;
    let device = wmrl_tch::select_device(global.device).context("selecting the compute device")?;
    let policy = wmrl_vla::checkpoint::load(&args.checkpoint, device).with_context(|| {
        format!(
            "loading the policy checkpoint {}",
            args.checkpoint.display()
        )
    })?;
    let adapter = sim::libero_adapter(&args.tasks, args.seed)?;
    let states = args.states.clamp(1, adapter.states);
    let prompts: Vec<_> = adapter
        .all_prompts()
        .into_iter()
        .filter(|p| p.state_index < states)
        .collect();
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| args.checkpoint.join("eval"));
    let executor_name = args.executor.clone();
    let mut options = SimExecutorOptions {
        execute_steps: args.execute_steps,
        temperature: args.temperature,
        temporal_ensemble: args.temporal_ensemble,
        record_every: if args.gifs > 0 { 4 } else { 0 },
        ..Default::default()
    };
    options.env.max_steps = args.max_steps;
    let bar = ProgressBar::new(prompts.len() as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} episodes (eta {eta})",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    let eval_options = EvalOptions {
        wave: args.envs,
        gifs: args.gifs,
        seed: args.seed,
        ..Default::default()
    };
    let mut progress = |done: usize, _| bar.set_position(done as u64);
    let report = match executor_name.as_str() {
        "sim" => {
            let mut executor = SimExecutor::new(args.envs, options);
            eval::evaluate(
                &mut executor,
                &policy,
                &prompts,
                &eval_options,
                Some(&out),
                &mut progress,
            )?
        }
        "zenoh" => {
            if args.temporal_ensemble.is_some() {
                anyhow::bail!(
                    "--temporal-ensemble is implemented for `--executor sim` only; \
                     the zenoh robots execute the chunks they are sent"
                );
            }
            let session = args.zenoh.net()?.open()?;
            let mut pool = ZenohExecutorPool::new(
                session,
                PoolOptions {
                    max_steps: args.max_steps,
                    temperature: args.temperature,
                    execute_steps: args.execute_steps,
                    ..Default::default()
                },
            )?;
            eval::evaluate(
                &mut pool,
                &policy,
                &prompts,
                &eval_options,
                Some(&out),
                &mut progress,
            )?
        }
        other => anyhow::bail!("unknown --executor `{other}`: expected `sim` or `zenoh`"),
    };
    bar.finish_and_clear();
    let json = serde_json::json!({
        "suite": args.suite,
        "checkpoint": args.checkpoint,
        "device": format!("{device:?}"),
        "states_per_task": states,
        "max_steps": args.max_steps,
        "temperature": args.temperature,
        "execute_steps": args.execute_steps,
        "temporal_ensemble": args.temporal_ensemble,
        "envs": args.envs,
        "executor": executor_name,
        "report": report,
    });
    wmrl_report::write_json_atomic(&out.join("eval.json"), &json)?;
    if global.json {
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        println!("task  success  episodes  exec.errors  instruction");
        for t in &report.tasks {
            println!(
                "{:>4}  {:>6.1}%  {:>8}  {:>11}  {}",
                t.task_index,
                100.0 * t.success_rate,
                t.episodes,
                t.execution_errors,
                t.instruction
            );
        }
        println!(
            "average success {:.1}% over {} episodes ({} control steps, {:.0} s)",
            100.0 * report.average_success,
            report.episodes,
            report.env_steps,
            report.seconds
        );
        println!("report: {}", out.join("eval.json").display());
        for gif in &report.gifs {
            println!("failure GIF: {}", gif.display());
        }
    }
    Ok(())
}
