//! Command-line definition (clap derive) and logging set-up.

use clap::{Args, Parser, Subcommand};
use tracing_subscriber::EnvFilter;

use crate::commands;

/// WMRL post-trains robot policies with reinforcement learning, replacing most
/// real executions with a learned world model and correcting its errors with a
/// small anchor stream of real executions.
#[derive(Debug, Parser)]
#[command(name = "wmrl", version, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Flags shared by every subcommand.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// More log output (-v info, -vv debug, -vvv trace); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Print machine-readable JSON instead of tables (commands that report figures).
    #[arg(long, global = true)]
    pub json: bool,
    /// Compute device for neural networks: auto, cpu, cuda or cuda:N.
    #[arg(long, global = true, default_value = "auto")]
    pub device: wmrl_tch::DeviceChoice,
}

/// Subcommands, in the order a user meets them: the demo, data, behaviour
/// cloning, the world model, post-training, evaluation, robots, research,
/// tools.
#[derive(Debug, Subcommand)]
#[command(after_help = PIPELINE)]
pub enum Command {
    /// Run the main job on the embedded default (what `cargo xtask demo` runs).
    Demo(commands::demo::DemoArgs),
    /// The Rapier LIBERO-Long simulator: render, record, run the scripted experts.
    Sim(commands::sim::SimArgs),
    /// Scene files (TOML or BDDL): check what they hold, or convert them.
    Scene(commands::scene::SceneArgs),
    /// Demonstrations: collect them with the scripted experts, or check a folder of them.
    #[command(alias = "demos")]
    Data(commands::demos::DemosArgs),
    /// Behaviour cloning of demonstrations into a policy checkpoint.
    Sft(commands::sft::SftArgs),
    /// World model: record policy rollouts, train, evaluate score quality.
    Wm(commands::wm::WmArgs),
    /// WMRL post-training of a VLA on LIBERO-Long in the embedded simulator (any core mode).
    Train(commands::train::TrainArgs),
    /// Runs the core's modes side by side (same config and seeds) and writes the ablation table.
    Experiment(commands::experiment::ExperimentArgs),
    /// Per-task success of a policy checkpoint on the fixed initial states.
    Eval(commands::eval::EvalArgs),
    /// Robot network: serve an arm, certificates and configs, a router, emergency stop, discovery.
    Robots(commands::robots::RobotsArgs),
    /// Deprecated spelling of `wmrl robots serve` (kept for one release).
    #[command(hide = true)]
    Robotd(commands::robots::RobotdArgs),
    /// AutoResearch: ML tasks, sandboxed solution runs, WMRL training of solution writers.
    Research(commands::research::ResearchArgs),
    /// Synthetic benchmark: every WMRL mode on a softmax policy and a biased, noisy world model.
    Synth(commands::synth::SynthArgs),
    /// The shipped configs: list them, or print one with its defaults resolved.
    Config(commands::config::ConfigArgs),
    /// Fit the isotonic calibrator to anchor pairs (CSV) and plot its reliability.
    Calibrate(commands::calibrate::CalibrateArgs),
    /// Whole-system benchmarks; figures as JSON with --json.
    Bench(commands::bench::BenchArgs),
    /// Show the compute device that would be used and what libtorch sees.
    Device,
}

/// The pipeline, printed under the command list.
const PIPELINE: &str = "\
The pipeline, in order:
  demo                     the whole job on the embedded default
  sim, scene, data         simulator, scenes, demonstrations
  sft                      behaviour cloning
  wm                       world model
  train, experiment        post-training (one run; modes side by side)
  eval                     success on the fixed initial states
  robots                   real arms over zenoh (`robots serve` on each arm)
  research, synth          AutoResearch; the synthetic benchmark
  config, calibrate, bench, device   tools";

/// A deprecation note for an old spelling on the command line, if any.
pub fn deprecation(args: &[String]) -> Option<&'static str> {
    // The first word that is neither a flag nor the value of `--device`.
    let mut words = args.iter().skip(1).map(String::as_str);
    let mut command = None;
    while let Some(word) = words.next() {
        if word == "--device" {
            words.next();
        } else if !word.starts_with('-') {
            command = Some(word);
            break;
        }
    }
    match command {
        Some("demos") => {
            Some("`wmrl demos` is now `wmrl data`; the old spelling goes in the next release")
        }
        Some("robotd") => Some(
            "`wmrl robotd` is now `wmrl robots serve`; the old spelling goes in the next release",
        ),
        _ => None,
    }
}

/// Installs the stderr subscriber: RUST_LOG if set, else a level from -v.
pub fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn old_spellings_get_a_note_and_new_ones_do_not() {
        assert!(deprecation(&words("wmrl demos collect")).is_some());
        assert!(deprecation(&words("wmrl -v --device cpu robotd --id a")).is_some());
        assert!(deprecation(&words("wmrl data collect")).is_none());
        assert!(deprecation(&words("wmrl robots serve --id a")).is_none());
        assert!(deprecation(&words("wmrl eval --tasks demos")).is_none());
    }

    #[test]
    fn the_old_and_new_spellings_parse_to_the_same_command() {
        let old = Cli::try_parse_from(words("wmrl demos check x")).unwrap();
        let new = Cli::try_parse_from(words("wmrl data check x")).unwrap();
        assert_eq!(format!("{:?}", old.command), format!("{:?}", new.command));
    }
}
