//! `wmrl experiment`: every chosen mode of the core on one config and the
//! same seeds, and the paper-style ablation table (Markdown + JSON + plot).

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use wmrl_core::Mode;
use wmrl_train::TrainConfig;
use wmrl_train::experiment::{self, ExperimentPlan};

use crate::cli::GlobalArgs;

/// Arguments of `wmrl experiment`.
#[derive(Debug, Args)]
pub struct ExperimentArgs {
    /// SFT policy checkpoint folder to post-train.
    #[arg(long)]
    pub policy: PathBuf,
    /// World-model checkpoint trained on this policy's encoder.
    #[arg(long)]
    pub wm: PathBuf,
    /// Shared run config (TOML or JSON5); its mode and seed are set per run.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Override one config value (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// Modes, comma-separated, in table order.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "real,wmrl,wm-only,wmrl-no-debias,wmrl-no-denoise"
    )]
    pub modes: Vec<Mode>,
    /// Seeds, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0")]
    pub seeds: Vec<u64>,
    /// Target success rate in [0, 1] (default: `real`'s mean final success).
    #[arg(long)]
    pub target: Option<f64>,
    /// Experiment folder: one run folder per (mode, seed), experiment.md,
    /// experiment.json, success_vs_env_steps.png. Re-running continues it.
    #[arg(long)]
    pub out: PathBuf,
}

pub fn run(global: &GlobalArgs, args: ExperimentArgs) -> anyhow::Result<()> {
    if let Some(t) = args.target
        && !(0.0..=1.0).contains(&t)
    {
        anyhow::bail!("--target {t}: expected a success rate in [0, 1]");
    }
    let config = TrainConfig::load(args.config.as_deref(), &args.overrides)?;
    let device = wmrl_tch::select_device(global.device).context("selecting the compute device")?;
    let total = config.iterations * (args.modes.len() * args.seeds.len()) as u64;
    let plan = ExperimentPlan {
        config,
        modes: args.modes,
        seeds: args.seeds,
        target: args.target,
    };
    let bar = super::train::iteration_bar(total);
    let per_run = plan.config.iterations;
    let order: Vec<String> = plan
        .seeds
        .iter()
        .flat_map(|s| {
            plan.modes
                .iter()
                .map(move |m| format!("{}-seed{s}", m.name()))
        })
        .collect();
    let report = experiment::run(
        &plan,
        &args.policy,
        &args.wm,
        &args.out,
        device,
        &mut |name, iteration, eval| {
            let index = order.iter().position(|n| n == name).unwrap_or(0) as u64;
            bar.set_position(index * per_run + iteration);
            let success = eval.map_or(String::new(), |e| {
                format!(", success {:.1}%", 100.0 * e.success)
            });
            bar.set_message(format!("{name}{success}"));
        },
    )
    .with_context(|| format!("experiment in {}", args.out.display()))?;
    bar.finish_and_clear();
    if global.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("{}", report.markdown());
        println!(
            "experiment folder {}: experiment.md, experiment.json, success_vs_env_steps.png, one run folder per mode and seed",
            args.out.display()
        );
    }
    Ok(())
}
