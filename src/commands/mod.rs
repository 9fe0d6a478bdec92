//! One module per subcommand; each parses nothing itself and calls libraries.

pub mod bench;
pub mod calibrate;
pub mod config;
pub mod demo;
pub mod demos;
pub mod device;
pub mod eval;
pub mod experiment;
pub mod research;
pub mod robots;
pub mod scene;
pub mod sft;
pub mod sim;
pub mod synth;
pub mod train;
pub mod wm;

use crate::cli::{Cli, Command};

/// Dispatches a parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    let global = cli.global;
    match cli.command {
        Command::Demo(args) => demo::run(&global, args),
        Command::Device => device::run(&global),
        Command::Bench(args) => bench::run(&global, args),
        Command::Sft(args) => sft::run(&global, args),
        Command::Data(args) => demos::run(&global, args),
        Command::Eval(args) => eval::run(&global, args),
        Command::Research(args) => research::run(&global, args),
        Command::Sim(args) => sim::run(&global, args),
        Command::Wm(args) => wm::run(&global, args),
        Command::Train(args) => train::run(&global, args),
        Command::Experiment(args) => experiment::run(&global, args),
        Command::Robotd(args) => robots::robotd(&global, args),
        Command::Robots(args) => robots::robots(&global, args),
        Command::Scene(args) => scene::run(&global, args),
        Command::Calibrate(args) => calibrate::run(&global, args),
        Command::Synth(args) => synth::run(&global, args),
        Command::Config(args) => config::run(&global, args),
    }
}
