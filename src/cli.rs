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

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the main job on the embedded default (what `cargo xtask demo` runs).
    Demo(commands::demo::DemoArgs),
    /// Show the compute device that would be used and what libtorch sees.
    Device,
    /// Whole-system benchmarks; figures as JSON with --json.
    Bench(commands::bench::BenchArgs),
    /// Behaviour cloning of demonstrations into a policy checkpoint.
    Sft(commands::sft::SftArgs),
    /// Collect or check demonstrations (scripted experts in the simulator).
    Demos(commands::demos::DemosArgs),
    /// WMRL post-training of a VLA on LIBERO-Long in the embedded simulator (any core mode).
    Train(commands::train::TrainArgs),
    /// Runs the core's modes side by side (same config and seeds) and writes the ablation table.
    Experiment(commands::experiment::ExperimentArgs),
    /// World model: record policy rollouts, train, evaluate score quality.
    Wm(commands::wm::WmArgs),
    /// Per-task success of a policy checkpoint on the fixed initial states.
    Eval(commands::eval::EvalArgs),
    /// AutoResearch: ML tasks, sandboxed solution runs, WMRL training of solution writers.
    Research(commands::research::ResearchArgs),
    /// The Rapier LIBERO-Long simulator: render, record, run the scripted experts.
    Sim(commands::sim::SimArgs),
    /// Serve one robot over zenoh (the simulator driver is built in).
    Robotd(commands::robots::RobotdArgs),
    /// Robot network: TLS certificates and configs, a router, emergency stop, discovery.
    Robots(commands::robots::RobotsArgs),
    /// Scene files (TOML or BDDL): check what they hold, or convert them.
    Scene(commands::scene::SceneArgs),
    /// Fit the isotonic calibrator to anchor pairs (CSV) and plot its reliability.
    Calibrate(commands::calibrate::CalibrateArgs),
    /// Synthetic benchmark: every WMRL mode on a softmax policy and a biased, noisy world model.
    Synth(commands::synth::SynthArgs),
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
