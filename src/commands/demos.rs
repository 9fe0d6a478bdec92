//! `wmrl demos …`: collect scripted-expert demonstrations, check a folder.

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use wmrl_vla::demos::{dataset, format};
use wmrl_vla::sim::{self, CollectOptions};

use crate::cli::GlobalArgs;

/// Arguments of `wmrl demos`.
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

/// Arguments of `wmrl demos collect`.
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
    /// Camera image side in pixels.
    #[arg(long, default_value_t = 128)]
    pub image_size: u32,
    /// Do not write the episodes the expert failed.
    #[arg(long)]
    pub successes_only: bool,
    /// Output folder.
    #[arg(long)]
    pub out: PathBuf,
}

/// Arguments of `wmrl demos check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Demonstration folder.
    pub dir: PathBuf,
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
    let summary = sim::collect_demos(&options, &args.out, &|done, _| {
        bar.set_position(done as u64)
    })
    .with_context(|| format!("collecting demonstrations into {}", args.out.display()))?;
    bar.finish_and_clear();
    if global.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
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
