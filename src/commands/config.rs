//! `wmrl config`: the shipped configs, listed, or printed with every default
//! resolved (what a run of that config actually uses).

use clap::{Args, Subcommand, ValueEnum};
use serde::Serialize;

use crate::cli::GlobalArgs;

/// `wmrl config …`.
#[derive(Debug, Args)]
pub struct ConfigArgs {
    #[command(subcommand)]
    pub command: ConfigCommand,
}

/// What to do with configs.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// The shipped configs of each kind.
    List,
    /// A config (shipped name or file) with its defaults resolved and overrides applied.
    Show(ShowArgs),
}

/// Which stage's config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    /// A policy and its behaviour cloning (`wmrl sft --config`).
    Policy,
    /// A world model (`wmrl wm train --config`).
    Wm,
    /// A post-training run (`wmrl train --config`, `wmrl experiment --config`).
    Train,
}

impl Kind {
    const ALL: [Kind; 3] = [Kind::Policy, Kind::Wm, Kind::Train];

    fn name(self) -> &'static str {
        match self {
            Kind::Policy => "policy",
            Kind::Wm => "wm",
            Kind::Train => "train",
        }
    }

    fn shipped(self) -> Vec<&'static str> {
        let configs: &[(&str, &str)] = match self {
            Kind::Policy => &wmrl_vla::config::SHIPPED_CONFIGS,
            Kind::Wm => &wmrl_wm::config::SHIPPED_CONFIGS,
            Kind::Train => wmrl_train::TrainConfig::SHIPPED_CONFIGS,
        };
        configs.iter().map(|(name, _)| *name).collect()
    }
}

/// How `show` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ShowFormat {
    /// TOML, loadable as a config file.
    Toml,
    /// JSON.
    Json,
}

/// `wmrl config show KIND NAME`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// Which stage's config.
    pub kind: Kind,
    /// A shipped config's name (`wmrl config list`) or a file's path.
    pub name: String,
    /// `key=value` overrides, applied as the stage's command applies them.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// Output syntax (default TOML; the global --json selects JSON).
    #[arg(long, value_enum)]
    pub format: Option<ShowFormat>,
}

pub fn run(global: &GlobalArgs, args: ConfigArgs) -> anyhow::Result<()> {
    match args.command {
        ConfigCommand::List => {
            if global.json {
                let map: serde_json::Map<String, serde_json::Value> = Kind::ALL
                    .iter()
                    .map(|k| (k.name().to_string(), k.shipped().into()))
                    .collect();
                println!("{}", serde_json::to_string_pretty(&map)?);
            } else {
                for kind in Kind::ALL {
                    println!("{:<7} {}", kind.name(), kind.shipped().join(", "));
                }
            }
            Ok(())
        }
        ConfigCommand::Show(show) => {
            let format = show.format.unwrap_or(if global.json {
                ShowFormat::Json
            } else {
                ShowFormat::Toml
            });
            let (name, sets) = (show.name.as_str(), show.overrides.as_slice());
            match show.kind {
                Kind::Policy => print(&wmrl_vla::config::VlaConfig::load(name, sets)?, format),
                Kind::Wm => print(&wmrl_wm::config::WmConfig::load(name, sets)?, format),
                Kind::Train => print(
                    &wmrl_train::TrainConfig::load(Some(std::path::Path::new(name)), sets)?,
                    format,
                ),
            }
        }
    }
}

fn print<T: Serialize>(config: &T, format: ShowFormat) -> anyhow::Result<()> {
    match format {
        ShowFormat::Toml => print!("{}", toml::to_string(config)?),
        ShowFormat::Json => println!("{}", serde_json::to_string_pretty(config)?),
    }
    Ok(())
}
