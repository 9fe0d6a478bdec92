//! `wmrl demo`: the smallest real thing the project does end to end, small
//! enough for a laptop: the synthetic benchmark's `paper` world, every mode
//! of the WMRL core from the same 3 seeds (about a minute in a debug build,
//! seconds in release). It prints the table and where the plots and metrics
//! are, then runs one scripted-expert episode of a LIBERO-Long task in the
//! embedded rapier simulator (both cameras rendered) and writes it as a GIF.

use std::path::PathBuf;

use clap::Args;
use wmrl_core::Mode;
use wmrl_synth::Scenario;

use crate::cli::GlobalArgs;

/// The LIBERO-Long task of the demo's simulator episode (the book into the caddy).
const DEMO_TASK: usize = 5;

/// Arguments of `wmrl demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Where run artefacts (metrics, plots) go.
    #[arg(long, default_value = "runs/demo")]
    pub out: PathBuf,
}

pub fn run(global: &GlobalArgs, args: DemoArgs) -> anyhow::Result<()> {
    let scenario = Scenario {
        seeds: 3,
        ..Scenario::preset("paper")?
    };
    if !global.json {
        println!(
            "WMRL demo: GRPO on a synthetic world whose world model is cheap (1/100 of a real execution), \
             miscalibrated, over-rates 3% of bad actions and is noisy.\n\
             Every mode of the core trains the same softmax policy from the same {} seeds for {} steps; \
             anchors are {:.0}% of groups.\n",
            scenario.seeds,
            scenario.steps,
            scenario.core.anchor_ratio * 100.0
        );
    }
    let results = super::synth::run_benchmark(&[scenario], &Mode::ALL, 0.95, &args.out)?;
    super::synth::print_results(global, &results)?;
    // The embedded default executor: one expert episode in the simulator.
    let (task, state) = (DEMO_TASK, 0);
    let gif = args.out.join("sim").join("expert.gif");
    let started = std::time::Instant::now();
    let (frames, episode) = super::sim::record_expert_gif(task, state, 128, 4, &gif)?;
    let instruction = wmrl_sim::task(task)?.instruction;
    if !global.json {
        println!(
            "Read it as: `wm-only` trusts the world model and is misled; `wmrl` corrects it with a few real \
             executions and reaches `real`'s reward with far fewer of them (`savings`). \
             `wmrl synth` runs all scenarios with 5 seeds."
        );
        println!(
            "\nThe embedded simulator (rapier, 240 Hz physics, 20 Hz control, two 128×128 cameras): \
             the scripted expert on task {task} (\"{instruction}\"), initial state {state}: {} after {} control steps \
             ({:.1} s).\n  gif:     {} ({frames} frames, agent view | wrist view)",
            if episode.success {
                "success"
            } else {
                "failure"
            },
            episode.steps,
            started.elapsed().as_secs_f64(),
            gif.display(),
        );
    }
    Ok(())
}
