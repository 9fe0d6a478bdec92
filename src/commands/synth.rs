//! `wmrl synth`: the synthetic benchmark (crates/wmrl-synth). Runs every
//! mode of the core on the chosen scenarios from the same seeds, prints the
//! table (or JSON), and writes per scenario a metrics JSONL, a summary JSON
//! and PNGs of true reward against real executions and against steps.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use wmrl_core::Mode;
use wmrl_synth::report::{self, Outputs};
use wmrl_synth::{BenchmarkResult, PRESETS, Scenario};

use crate::cli::GlobalArgs;

/// Arguments of `wmrl synth`.
#[derive(Debug, Args)]
pub struct SynthArgs {
    /// Scenario preset to run: paper, binary, debias, denoise (repeatable; default: all).
    #[arg(long = "scenario", value_name = "NAME")]
    pub scenarios: Vec<String>,
    /// Mode to run: real, wm-only, wmrl, wmrl-no-debias, wmrl-no-denoise, ppi (repeatable; default: all).
    #[arg(long = "mode", value_name = "MODE")]
    pub modes: Vec<Mode>,
    /// Override a scenario setting, e.g. `--set world_model.noise_sd=0.1` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Seeds (repetitions) per mode (default: the scenario's, 5).
    #[arg(long)]
    pub seeds: Option<u64>,
    /// Training steps per run (default: the scenario's, 300).
    #[arg(long)]
    pub steps: Option<u64>,
    /// Fraction of `real`'s improvement that counts as reaching it.
    #[arg(long, default_value_t = 0.95)]
    pub target: f64,
    /// Output folder; each scenario writes into its own subfolder.
    #[arg(long, default_value = "runs/synth")]
    pub out: PathBuf,
}

/// Resolves the scenarios the arguments ask for.
pub fn scenarios(args: &SynthArgs) -> anyhow::Result<Vec<Scenario>> {
    let names: Vec<String> = if args.scenarios.is_empty() {
        PRESETS.iter().map(|s| s.to_string()).collect()
    } else {
        args.scenarios.clone()
    };
    names
        .iter()
        .map(|name| {
            let mut s = Scenario::preset(name)?;
            for assignment in &args.set {
                s.apply_override(assignment)?;
            }
            if let Some(seeds) = args.seeds {
                s.apply_override(&format!("seeds={seeds}"))?;
            }
            if let Some(steps) = args.steps {
                s.apply_override(&format!("steps={steps}"))?;
            }
            Ok(s)
        })
        .collect()
}

/// Runs `scenarios` × `modes`, writing outputs under `out`; returns the results and their files.
pub fn run_benchmark(
    scenarios: &[Scenario],
    modes: &[Mode],
    target: f64,
    out: &Path,
) -> anyhow::Result<Vec<(BenchmarkResult, Outputs)>> {
    let total: u64 = scenarios.iter().map(|s| s.seeds * modes.len() as u64).sum();
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg:<28} [{bar:30}] {pos}/{len} runs, {elapsed}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    let mut results = Vec::new();
    for scenario in scenarios {
        let outputs = Outputs::in_dir(&out.join(&scenario.name));
        let mut sink = report::metrics_sink(&outputs.metrics)?;
        let mut write_error = None;
        let result = wmrl_synth::benchmark(scenario, modes, target, |run| {
            bar.set_message(format!(
                "{} / {} / seed {}",
                scenario.name, run.mode, run.seed
            ));
            bar.inc(1);
            if let Err(e) = report::write_run(&mut sink, &scenario.name, run) {
                write_error.get_or_insert(e);
            }
        })
        .with_context(|| format!("scenario `{}`", scenario.name))?;
        if let Some(e) = write_error {
            return Err(e.into());
        }
        report::write_summary_and_plots(&outputs, &result)?;
        results.push((result, outputs));
    }
    bar.finish_and_clear();
    Ok(results)
}

/// Prints tables (or one JSON document without the curves) and the files written.
pub fn print_results(
    global: &GlobalArgs,
    results: &[(BenchmarkResult, Outputs)],
) -> anyhow::Result<()> {
    if global.json {
        let docs: Vec<serde_json::Value> = results
            .iter()
            .map(|(r, o)| {
                let mut v = serde_json::to_value(r)?;
                if let Some(obj) = v.as_object_mut() {
                    obj.remove("curves");
                    obj.insert(
                        "files".into(),
                        serde_json::json!({
                            "metrics": o.metrics,
                            "summary": o.summary,
                            "reward_vs_executions": o.reward_vs_executions,
                            "reward_vs_steps": o.reward_vs_steps,
                        }),
                    );
                }
                Ok(v)
            })
            .collect::<anyhow::Result<_>>()?;
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "scenarios": docs }))?
        );
        return Ok(());
    }
    for (result, outputs) in results {
        println!("{}", report::table(result));
        println!("  plot:    {}", outputs.reward_vs_executions.display());
        println!("  plot:    {}", outputs.reward_vs_steps.display());
        println!("  metrics: {}", outputs.metrics.display());
        println!("  summary: {}\n", outputs.summary.display());
    }
    Ok(())
}

pub fn run(global: &GlobalArgs, args: SynthArgs) -> anyhow::Result<()> {
    let scenarios = scenarios(&args)?;
    let modes = if args.modes.is_empty() {
        Mode::ALL.to_vec()
    } else {
        args.modes.clone()
    };
    let results = run_benchmark(&scenarios, &modes, args.target, &args.out)?;
    print_results(global, &results)
}
