//! `wmrl`: the command-line front end. It parses arguments, sets up logging
//! and hands each subcommand to the library crates; no algorithm lives here.

mod cli;
mod commands;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let cli = cli::Cli::parse_from(&args);
    cli::init_tracing(cli.global.verbose);
    if let Some(note) = cli::deprecation(&args) {
        eprintln!("note: {note}");
    }
    match commands::run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
