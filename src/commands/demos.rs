//! `wmrl data …`: collect scripted-expert demonstrations, check a folder.

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use wmrl_vla::demos::{dataset, format};
use wmrl_vla::sim::{self, CollectOptions};

use crate::cli::GlobalArgs;

/// Arguments of `wmrl data`.
#[derive(Debug, Args)]
pub struct DemosArgs {
    #[command(subcommand)]
    pub command: DemosCommand,
}

/// Demonstration subcommands.
#[derive(Debug, Subcommand)]
pub enum DemosCommand {
    /// Run the scripted experts (with noise injection) and write `.demo` files.
    Collect(CollectArgs),
    /// Read and verify every `.demo` file of a folder; list counts per task.
    Check(CheckArgs),
}

/// Arguments of `wmrl data collect`.
#[derive(Debug, Args)]
pub struct CollectArgs {
    /// Task suite (only `libero-long`).
    #[arg(long, default_value = sim::SUITE)]
    pub suite: String,
    /// Episodes per task.
    #[arg(long, default_value_t = 50)]
    pub per_task: usize,
    /// Task indices, comma-separated (default: all ten).
    #[arg(long, value_delimiter = ',')]
    pub tasks: Vec<usize>,
    /// Std of the Gaussian noise added to the executed motion dimensions (labels stay clean).
    #[arg(long, default_value_t = 0.1)]
    pub noise: f32,
    /// Seed of the noise and of the (non-evaluation) initial states.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Probability per step that a perturbation burst starts (0 = none): a
    /// constant offset added to the executed translation for a few steps,
    /// so the expert demonstrates recoveries (labels stay clean).
    #[arg(long, default_value_t = sim::Perturbations::default().rate)]
    pub perturb_rate: f32,
    /// Longest perturbation burst in control steps (each lasts 1..=N).
    #[arg(long, default_value_t = sim::Perturbations::default().max_steps)]
    pub perturb_steps: usize,
    /// Length of a burst's translation offset in action units (1 = 5 cm per step).
    #[arg(long, default_value_t = sim::Perturbations::default().size)]
    pub perturb_size: f32,
    /// Camera image side in pixels.
    #[arg(long, default_value_t = 128)]
    pub image_size: u32,
    /// Do not write the episodes the expert failed.
    #[arg(long)]
    pub successes_only: bool,
    /// Policy checkpoint to drive each episode first: the expert takes over
    /// from the state the policy reached (DAgger-style recovery data) and
    /// only its part is written.
    #[arg(long, value_name = "CHECKPOINT")]
    pub takeover: Option<PathBuf>,
    /// With `--takeover`: the hand-over step is drawn uniformly from MIN..MAX (inclusive).
    #[arg(long, value_name = "MIN..MAX", default_value = "20..300", value_parser = parse_step_range)]
    pub takeover_steps: std::ops::RangeInclusive<usize>,
    /// With `--takeover`: actions of each policy chunk executed before re-planning.
    #[arg(long, default_value_t = 2)]
    pub execute_steps: usize,
    /// With `--takeover`: policy sampling temperature (0 = greedy).
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f64,
    /// Output folder.
    #[arg(long)]
    pub out: PathBuf,
}

/// Arguments of `wmrl data check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Demonstration folder.
    pub dir: PathBuf,
}

/// Parses `MIN..MAX` (both inclusive, MIN ≤ MAX).
fn parse_step_range(text: &str) -> Result<std::ops::RangeInclusive<usize>, String> {
    let expected = || format!("`{text}`: expected MIN..MAX, e.g. 20..300");
    let (min, max) = text.split_once("..").ok_or_else(expected)?;
    let max = max.strip_prefix('=').unwrap_or(max);
    let min: usize = min.trim().parse().map_err(|_| expected())?;
    let max: usize = max.trim().parse().map_err(|_| expected())?;
    if min > max {
        return Err(format!("`{text}`: MIN is larger than MAX"));
    }
    Ok(min..=max)
}

pub fn check_suite(suite: &str) -> anyhow::Result<()> {
    if suite != sim::SUITE {
        bail!(
            "unknown suite `{suite}`: the simulator implements `{}`",
            sim::SUITE
        );
    }
    Ok(())
}

pub fn run(global: &GlobalArgs, args: DemosArgs) -> anyhow::Result<()> {
    match args.command {
        DemosCommand::Collect(args) => collect(global, args),
        DemosCommand::Check(args) => check(global, args),
    }
}

pub(crate) fn collect(global: &GlobalArgs, args: CollectArgs) -> anyhow::Result<()> {
    check_suite(&args.suite)?;
    let mut options = CollectOptions {
        per_task: args.per_task,
        noise_std: args.noise,
        seed: args.seed,
        perturbations: sim::Perturbations {
            rate: args.perturb_rate,
            max_steps: args.perturb_steps,
            size: args.perturb_size,
        },
        keep_failures: !args.successes_only,
        ..Default::default()
    };
    if !args.tasks.is_empty() {
        options.tasks = args.tasks;
    }
    options.env.camera.width = args.image_size;
    options.env.camera.height = args.image_size;
    let bar = ProgressBar::new((options.tasks.len() * options.per_task) as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} episodes (eta {eta})",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    let progress = |done: usize, _: usize| bar.set_position(done as u64);
    let context = || format!("collecting demonstrations into {}", args.out.display());
    let (summary, takeover) = match &args.takeover {
        None => (
            sim::collect_demos(&options, &args.out, &progress).with_context(context)?,
            None,
        ),
        Some(checkpoint) => {
            let device =
                wmrl_tch::select_device(global.device).context("selecting the compute device")?;
            let policy = wmrl_vla::checkpoint::load(checkpoint, device).with_context(|| {
                format!("loading the policy checkpoint {}", checkpoint.display())
            })?;
            let takeover = sim::TakeoverOptions {
                collect: options.clone(),
                steps: args.takeover_steps.clone(),
                execute_steps: args.execute_steps,
                temperature: args.temperature,
            };
            let summary = sim::collect_takeover_demos(&policy, &takeover, &args.out, &progress)
                .with_context(context)?;
            (summary.collect.clone(), Some(summary))
        }
    };
    bar.finish_and_clear();
    if global.json {
        match &takeover {
            Some(t) => println!("{}", serde_json::to_string_pretty(t)?),
            None => println!("{}", serde_json::to_string_pretty(&summary)?),
        }
    } else {
        if let Some(t) = &takeover {
            println!(
                "the policy drove {} control steps; {} episodes ended before the hand-over (not written)",
                t.policy_steps, t.policy_finished
            );
        }
        println!("task  episodes  expert successes  instruction");
        for t in &summary.tasks {
            println!(
                "{:>4}  {:>8}  {:>16}  {}",
                t.task_index, t.episodes, t.successes, t.instruction
            );
        }
        println!(
            "{} control steps in {:.0} s; {} execution errors (not written); folder {}",
            summary.env_steps,
            summary.seconds,
            summary.execution_errors,
            summary.out_dir.display()
        );
    }
    Ok(())
}

fn check(global: &GlobalArgs, args: CheckArgs) -> anyhow::Result<()> {
    let files = dataset::episode_files(&args.dir)?;
    if files.is_empty() {
        return Err(wmrl_vla::Error::EmptyDataset {
            dir: args.dir.clone(),
        }
        .into());
    }
    let mut per_task = std::collections::BTreeMap::<usize, (String, usize, usize, usize)>::new();
    let mut bad = Vec::new();
    for path in &files {
        match format::read_episode(path) {
            Ok(e) => {
                let entry = per_task.entry(e.meta.task_index).or_insert((
                    e.meta.instruction.clone(),
                    0,
                    0,
                    0,
                ));
                entry.1 += 1;
                entry.2 += usize::from(e.meta.success);
                entry.3 += e.steps();
            }
            Err(err) => bad.push(err.to_string()),
        }
    }
    let report = serde_json::json!({
        "dir": args.dir,
        "files": files.len(),
        "bad": bad,
        "tasks": per_task.iter().map(|(t, (i, n, s, steps))| serde_json::json!({
            "task_index": t, "instruction": i, "episodes": n, "successes": s, "steps": steps,
        })).collect::<Vec<_>>(),
    });
    if global.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("task  episodes  successes  steps  instruction");
        for (t, (instruction, n, s, steps)) in &per_task {
            println!("{t:>4}  {n:>8}  {s:>9}  {steps:>5}  {instruction}");
        }
        for b in &bad {
            eprintln!("bad: {b}");
        }
    }
    if !bad.is_empty() {
        bail!(
            "{} of {} demonstration files in {} are unreadable",
            bad.len(),
            files.len(),
            args.dir.display()
        );
    }
    Ok(())
}
