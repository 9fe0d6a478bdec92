//! `wmrl scene check FILE`: parse a scene (the project's TOML or LIBERO BDDL)
//! and report its fixtures, objects, regions and goal; unmodelled object types
//! are warnings. Exits non-zero only when the file does not parse.
//!
//! `wmrl scene export --format bddl|toml FILE [--out OUT]`: write a scene in
//! either format (to stdout without `--out`).

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use wmrl_sim::scene::Scene;

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
    /// Write a scene file (TOML or BDDL) in the given format.
    Export {
        /// The format to write.
        #[arg(long, value_enum)]
        format: ExportFormat,
        /// A `.toml` scene or a `.bddl` LIBERO problem.
        file: PathBuf,
        /// Where to write (default: stdout). BDDL carries no scene name: loading
        /// takes it from the file stem, so name the file `{scene name}.bddl`.
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

/// Output formats of `wmrl scene export`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ExportFormat {
    /// LIBERO's task language.
    Bddl,
    /// The project's scene format.
    Toml,
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
        SceneCommand::Export { format, file, out } => {
            let scene = Scene::load(&file)?;
            let (name, text) = match format {
                ExportFormat::Bddl => ("bddl", scene.to_bddl()?),
                ExportFormat::Toml => ("toml", scene.to_toml()),
            };
            let Some(out) = out else {
                print!("{text}");
                return Ok(());
            };
            std::fs::write(&out, text).with_context(|| format!("writing {}", out.display()))?;
            if global.json {
                let v = serde_json::json!({ "scene": scene.name, "format": name, "out": out });
                println!("{v}");
            } else {
                println!("wrote {} ({name}) from {}", out.display(), file.display());
            }
            Ok(())
        }
    }
}
