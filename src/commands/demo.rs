//! `wmrl demo`: the main job on the embedded default, small enough for a laptop.

use clap::Args;

use crate::cli::GlobalArgs;

/// Arguments of `wmrl demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Where run artefacts (metrics, plots) go.
    #[arg(long, default_value = "runs/demo")]
    pub out: std::path::PathBuf,
}

pub fn run(global: &GlobalArgs, _args: DemoArgs) -> anyhow::Result<()> {
    super::device::run(global)
}
