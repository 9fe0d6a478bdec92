//! `wmrl sft`: behaviour cloning of demonstrations into a policy checkpoint.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use wmrl_vla::VlaConfig;
use wmrl_vla::demos::DemoDataset;
use wmrl_vla::sft::{self, Progress};

use crate::cli::GlobalArgs;

/// Arguments of `wmrl sft`.
#[derive(Debug, Args)]
pub struct SftArgs {
    /// Demonstration folder (written by `wmrl data collect`).
    #[arg(long)]
    pub demos: PathBuf,
    /// Model and training config: a shipped name (tiny, small, cpu, gpu) or a TOML file.
    #[arg(long, default_value = "cpu")]
    pub config: String,
    /// Override one config value, e.g. `--set train.steps=500` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// Output folder: checkpoint (config.json, model.safetensors), metrics.jsonl, plots.
    #[arg(long)]
    pub out: PathBuf,
}

pub fn run(global: &GlobalArgs, args: SftArgs) -> anyhow::Result<()> {
    let config = VlaConfig::load(&args.config, &args.overrides)?;
    let device = wmrl_tch::select_device(global.device).context("selecting the compute device")?;
    let dataset = DemoDataset::load(&args.demos, &sft::dataset_options(&config))
        .with_context(|| format!("loading demonstrations from {}", args.demos.display()))?;
    if !global.json {
        eprintln!(
            "{} tasks, {} training frames, {} held-out frames; device {device:?}",
            dataset.tasks.len(),
            dataset.train.len(),
            dataset.val.as_ref().map_or(0, |v| v.len())
        );
    }
    let bar = ProgressBar::new(config.train.steps);
    bar.set_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} steps ({per_sec}, eta {eta}) {msg}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    let mut last_val = String::new();
    let summary = sft::train(
        &config,
        &dataset,
        device,
        &args.out,
        &mut |event| match event {
            Progress::Step(s) => {
                bar.inc(1);
                if s.step % 10 == 0 {
                    bar.set_message(format!(
                        "loss {:.3} acc {:.3} lr {:.1e}{last_val}",
                        s.loss, s.accuracy, s.lr
                    ));
                }
            }
            Progress::Validation { stats, .. } => {
                last_val = format!(
                    " | held-out loss {:.3} acc {:.3}",
                    stats.loss, stats.accuracy
                );
            }
            Progress::Checkpoint(_) => {}
        },
    )
    .with_context(|| format!("training into {}", args.out.display()))?;
    bar.finish_and_clear();
    if global.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        println!("checkpoint     : {}", summary.out_dir.display());
        println!(
            "steps          : {} ({:.0} s, {:.0} samples/s)",
            summary.steps, summary.seconds, summary.samples_per_s
        );
        println!(
            "train loss     : {:.4} -> {:.4}",
            summary.first_loss, summary.final_loss
        );
        if let Some(val) = &summary.val {
            println!(
                "held-out       : loss {:.4}, token accuracy {:.3}, action L1 {:.4}",
                val.loss, val.accuracy, val.action_l1
            );
        }
        println!("metrics, plots : metrics.jsonl, loss.png, accuracy.png in the same folder");
    }
    Ok(())
}
