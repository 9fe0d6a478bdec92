//! `wmrl scene check FILE`: parse a scene (the project's TOML or LIBERO BDDL)
//! and report its fixtures, objects, regions and goal; unmodelled object types
//! are warnings. Exits non-zero only when the file does not parse.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::cli::GlobalArgs;

/// Arguments of `wmrl scene`.
#[derive(Debug, Args)]
pub struct SceneArgs {
    #[command(subcommand)]
    pub command: SceneCommand,
}

/// Scene subcommands.
#[derive(Debug, Subcommand)]
pub enum SceneCommand {
    /// Parse a scene file and list what it holds.
    Check {
        /// A `.toml` scene or a `.bddl` LIBERO problem.
        file: PathBuf,
    },
}

pub fn run(global: &GlobalArgs, args: SceneArgs) -> anyhow::Result<()> {
    match args.command {
        SceneCommand::Check { file } => {
            let report = wmrl_sim::scene::check_file(&file)?;
            if global.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{report}");
            }
            for w in &report.warnings {
                tracing::warn!("{}: {w}", report.file);
            }
            Ok(())
        }
    }
}
