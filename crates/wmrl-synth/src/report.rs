//! Output of the benchmark: the text table, a JSON summary, per-step
//! metrics (JSONL) and PNG plots of true reward against real executions
//! and against steps, all written through `wmrl-report`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::json;
use wmrl_report::{LinePlot, MetricsSink, Series, SeriesStyle, write_json_atomic};

use crate::Result;
use crate::runner::{BenchmarkResult, RunResult};

/// Files written for one scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Outputs {
    /// Per-step metrics of every run (JSONL).
    pub metrics: PathBuf,
    /// The summary (JSON).
    pub summary: PathBuf,
    /// True reward against real executions (PNG).
    pub reward_vs_executions: PathBuf,
    /// True reward against training steps (PNG).
    pub reward_vs_steps: PathBuf,
}

impl Outputs {
    /// The files of a scenario written under `dir`.
    pub fn in_dir(dir: &Path) -> Self {
        Self {
            metrics: dir.join("metrics.jsonl"),
            summary: dir.join("summary.json"),
            reward_vs_executions: dir.join("reward_vs_executions.png"),
            reward_vs_steps: dir.join("reward_vs_steps.png"),
        }
    }
}

/// Opens a fresh metrics file (an earlier file at that path is replaced).
pub fn metrics_sink(path: &Path) -> Result<MetricsSink> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(wmrl_report::Error::Io {
                path: path.to_path_buf(),
                source: e,
            }
            .into());
        }
        _ => {}
    }
    Ok(MetricsSink::append(path)?)
}

/// Appends one row per step of `run` to `sink`.
pub fn write_run(sink: &mut MetricsSink, scenario: &str, run: &RunResult) -> Result<()> {
    for r in &run.records {
        sink.write(&json!({
            "scenario": scenario,
            "mode": run.mode,
            "seed": run.seed,
            "step": r.step,
            "true_reward": r.true_reward,
            "overrated_mass": r.overrated_mass,
            "executions": r.executions,
            "cost": r.cost,
            "diagnostics": r.diagnostics,
        }))?;
    }
    Ok(())
}

fn fmt_opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "—".into(), |x| format!("{x:.digits$}"))
}

/// The results as a text table.
pub fn table(result: &BenchmarkResult) -> String {
    let s = &result.scenario;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "scenario `{}`: {}\n{} prompts × {} actions, {} groups × {} rollouts per step, anchors {:.0}%, {} steps, {} seeds; \
         initial true reward {:.3}, optimum {:.3}; target ({:.0}% of real's improvement) = {}",
        s.name,
        s.description,
        s.prompts,
        s.actions,
        s.core.groups,
        s.core.group_size,
        s.core.anchor_ratio * 100.0,
        s.steps,
        s.seeds,
        result.initial_true_reward,
        result.optimal_true_reward,
        result.target_fraction * 100.0,
        fmt_opt(result.target, 3),
    );
    let _ = writeln!(
        out,
        "{:<16} {:>16} {:>10} {:>10} {:>11} {:>12} {:>9}",
        "mode", "final reward", "overrated", "real exec", "cost", "exec→target", "savings"
    );
    for m in &result.modes {
        let _ = writeln!(
            out,
            "{:<16} {:>9.3} ± {:.3} {:>10.3} {:>10.0} {:>11.1} {:>12} {:>9}",
            m.mode.name(),
            m.final_true_reward,
            m.final_true_reward_se,
            m.overrated_mass + 0.0, // no negative zero
            m.real_executions,
            m.cost,
            fmt_opt(m.executions_to_target, 0),
            m.savings_vs_real
                .map_or_else(|| "—".into(), |x| format!("{x:.1}×")),
        );
    }
    out
}

/// Writes the summary JSON and both plots.
pub fn write_summary_and_plots(outputs: &Outputs, result: &BenchmarkResult) -> Result<()> {
    write_json_atomic(&outputs.summary, result)?;
    let title = format!(
        "synthetic benchmark `{}`: true reward",
        result.scenario.name
    );
    let mut by_exec = Vec::new();
    let mut by_step = Vec::new();
    for c in &result.curves {
        by_exec.push(Series::line(
            c.mode.name(),
            c.points.iter().map(|p| (p.1, p.3)).collect(),
        ));
        by_step.push(Series::line(
            c.mode.name(),
            c.points.iter().map(|p| (p.0 as f64, p.3)).collect(),
        ));
    }
    if let Some(t) = result.target {
        let max_exec = result
            .curves
            .iter()
            .flat_map(|c| c.points.iter().map(|p| p.1))
            .fold(0.0, f64::max);
        by_exec.push(
            Series::line("target", vec![(0.0, t), (max_exec, t)])
                .with_style(SeriesStyle::Reference),
        );
        by_step.push(
            Series::line("target", vec![(0.0, t), (result.scenario.steps as f64, t)])
                .with_style(SeriesStyle::Reference),
        );
    }
    LinePlot {
        title: title.clone(),
        x_label: "real executions".into(),
        y_label: "true reward (mean over seeds)".into(),
        series: by_exec,
        ..Default::default()
    }
    .write_png(&outputs.reward_vs_executions)?;
    LinePlot {
        title,
        x_label: "training step".into(),
        y_label: "true reward (mean over seeds)".into(),
        series: by_step,
        ..Default::default()
    }
    .write_png(&outputs.reward_vs_steps)?;
    Ok(())
}
