//! `wmrl train`: WMRL post-training of a VLA on LIBERO-Long in the embedded
//! simulator, in any mode of the core.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use wmrl_train::{TrainConfig, VlaTrainer};

use crate::cli::GlobalArgs;

/// Arguments of `wmrl train`.
#[derive(Debug, Args)]
pub struct TrainArgs {
    /// SFT policy checkpoint folder to post-train.
    #[arg(long)]
    pub policy: PathBuf,
    /// World-model checkpoint trained on this policy's encoder (`wmrl wm train`).
    #[arg(long)]
    pub wm: PathBuf,
    /// Run config (TOML, or JSON5 for `.json` / `.json5`); defaults when omitted.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Override one config value, e.g. `--set core.mode="real"` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// Run folder: config.json, metrics.jsonl, plots, checkpoint/.
    #[arg(long)]
    pub out: PathBuf,
}

pub fn run(global: &GlobalArgs, args: TrainArgs) -> anyhow::Result<()> {
    let config = TrainConfig::load(args.config.as_deref(), &args.overrides)?;
    let device = wmrl_tch::select_device(global.device).context("selecting the compute device")?;
    let iterations = config.iterations;
    let mode = config.core.mode;
    let mut trainer = VlaTrainer::new(config, &args.policy, &args.wm, &args.out, device)
        .with_context(|| format!("setting up the run in {}", args.out.display()))?;
    let bar = ProgressBar::new(iterations);
    bar.set_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} iterations (eta {eta}) {msg}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    let summary = trainer.run(&mut |iteration, eval| {
        bar.set_position(iteration);
        if let Some(e) = eval {
            bar.set_message(format!(
                "success {:.1}% (iteration {})",
                100.0 * e.success,
                e.iteration
            ));
        }
    })?;
    bar.finish_and_clear();
    if global.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        let first = summary.evaluations.first();
        let last = summary.evaluations.last();
        if let (Some(a), Some(b)) = (first, last) {
            println!(
                "mode {mode}: greedy success {:.1}% -> {:.1}% after {} iterations",
                100.0 * a.success,
                100.0 * b.success,
                b.iteration
            );
        }
        println!(
            "real environment steps {}, real episodes {}, imagined episodes {}, {:.0} s of training",
            summary.env_steps, summary.executions, summary.imagined, summary.train_seconds
        );
        println!(
            "run folder {}: metrics.jsonl, success_vs_env_steps.png, success_vs_wallclock.png, checkpoint/",
            summary.run_dir.display()
        );
    }
    Ok(())
}
