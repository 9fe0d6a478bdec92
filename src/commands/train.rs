//! `wmrl train`: WMRL post-training of a VLA on LIBERO-Long in the embedded
//! simulator, in any mode of the core.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use wmrl_train::{OnDamage, TrainConfig, VlaTrainer};

use crate::cli::GlobalArgs;

// The robot pool fits the trainer's anchor seam (checked when this compiles);
// the command line offers it once robots provide start observations for
// imagination (crates/wmrl-train/README.md, "Not yet").
const _: fn(wmrl_robots::pool::ZenohExecutorPool) -> wmrl_train::AnchorStream =
    |pool| wmrl_train::AnchorStream::new("robots over zenoh", pool);

/// Arguments of `wmrl train`.
#[derive(Debug, Args)]
pub struct TrainArgs {
    /// SFT policy checkpoint folder to post-train.
    #[arg(long, required_unless_present = "resume")]
    pub policy: Option<PathBuf>,
    /// World-model checkpoint trained on this policy's encoder (`wmrl wm train`).
    #[arg(long, required_unless_present = "resume")]
    pub wm: Option<PathBuf>,
    /// Run config (TOML, or JSON5 for `.json` / `.json5`); defaults when omitted.
    #[arg(long, conflicts_with = "resume")]
    pub config: Option<PathBuf>,
    /// Override one config value, e.g. `--set core.mode="real"` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE", conflicts_with = "resume")]
    pub overrides: Vec<String>,
    /// Run folder: config.json, metrics.jsonl, plots, policy/, checkpoints/.
    #[arg(long, required_unless_present = "resume")]
    pub out: Option<PathBuf>,
    /// Continue the run in this folder from its newest checkpoint (after a
    /// crash or `kill -9`), with the config saved there.
    #[arg(long, value_name = "RUN_DIR", conflicts_with_all = ["policy", "wm", "out"])]
    pub resume: Option<PathBuf>,
    /// With --resume: set the run's iteration count (saved in its
    /// config.json), e.g. raise it so a finished run goes on training;
    /// at least the iterations already completed.
    #[arg(long, requires = "resume")]
    pub iterations: Option<u64>,
    /// With --resume: refuse when the newest checkpoint is damaged instead
    /// of resuming from the newest one that verifies.
    #[arg(long, requires = "resume")]
    pub strict: bool,
}

pub fn run(global: &GlobalArgs, args: TrainArgs) -> anyhow::Result<()> {
    let device = wmrl_tch::select_device(global.device).context("selecting the compute device")?;
    let mut trainer = match (&args.resume, &args.policy, &args.wm, &args.out) {
        (Some(run), ..) => {
            let on_damage = if args.strict {
                OnDamage::Refuse
            } else {
                OnDamage::ResumeOlder
            };
            let mut trainer = VlaTrainer::resume_with(run, device, on_damage)
                .with_context(|| format!("resuming the run in {}", run.display()))?;
            if let Some(from) = trainer.resumed_from() {
                for skipped in &from.skipped {
                    eprintln!("warning: passed over {skipped}");
                }
                eprintln!(
                    "resuming from {} (iteration {})",
                    from.dir.display(),
                    from.state.iteration
                );
            }
            if let Some(iterations) = args.iterations {
                trainer.extend_to(iterations)?;
            }
            trainer
        }
        (None, Some(policy), Some(wm), Some(out)) => {
            let config = TrainConfig::load(args.config.as_deref(), &args.overrides)?;
            VlaTrainer::new(config, policy, wm, out, device)
                .with_context(|| format!("setting up the run in {}", out.display()))?
        }
        _ => anyhow::bail!("give --policy, --wm and --out for a new run, or --resume RUN_DIR"),
    };
    let mode = trainer.config().core.mode;
    let summary = run_with_progress(&mut trainer, "")?;
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
        for t in &summary.starved_tasks {
            println!(
                "task {}: no informative group (all rewards equal) in its last {} iterations \
                 ({} iterations with one): GRPO is not learning on it",
                t.task, t.iterations, t.informative_iterations
            );
        }
        println!(
            "run folder {}: metrics.jsonl, success_vs_env_steps.png, success_vs_wallclock.png, policy/ (post-trained), checkpoints/",
            summary.run_dir.display()
        );
    }
    Ok(())
}

/// A progress bar over iterations, in the style every training command uses.
pub(crate) fn iteration_bar(total: u64) -> ProgressBar {
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} iterations (eta {eta}) {msg}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    bar
}

/// Runs `trainer` to the end behind an iteration bar that shows the latest
/// evaluation; `first_message` is shown until the first iteration ends.
pub(crate) fn run_with_progress(
    trainer: &mut VlaTrainer,
    first_message: &str,
) -> anyhow::Result<wmrl_train::TrainSummary> {
    let bar = iteration_bar(trainer.config().iterations);
    bar.set_position(trainer.completed_iterations());
    bar.set_message(first_message.to_string());
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
    Ok(summary)
}
