//! `wmrl experiment`: the modes of the core side by side on one config and
//! the same seeds, summarised as the paper's ablation table (final success
//! per task and on average; real environment steps and training compute to
//! reach a target success rate, relative to `real`).
//!
//! Each (mode, seed) is an ordinary run folder `<mode>-seed<k>/` under the
//! experiment folder, with its own metrics, plots and checkpoints. A run that
//! finished leaves `summary.json` and is not run again; a run that was
//! interrupted is resumed from its checkpoint. So an experiment killed at any
//! moment continues where it stopped when started again with the same
//! arguments. Started again with more `iterations` (and nothing else
//! changed), it extends its runs ([`VlaTrainer::extend_to`]) instead of
//! starting them over; a run folder of another config is refused by name.
//!
//! The target: `--target` when given, otherwise the mean final success of
//! `real` (WMRL must reach `real`'s gain). "Steps to target" is where the
//! mode's seed-mean curve of greedy success against real environment steps
//! first reaches the target, linearly interpolated between the evaluations
//! around the crossing ([`wmrl_report::first_crossing`], the definition the
//! AutoResearch experiment uses too); compute is the same crossing on the
//! curve against training wall-clock (evaluations excluded). The table also
//! counts the seeds whose own curve reaches the target. A target that is not
//! above the success before training (`real` ended no better than the SFT
//! policy) leaves no gain to reach: the table says so instead of reporting
//! a crossing at the first evaluation.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};
use wmrl_core::Mode;
use wmrl_report::{LinePlot, Series, SeriesStyle};

use crate::checkpoint::{self, CHECKPOINTS_DIR};
use crate::config::TrainConfig;
use crate::trainer::{Evaluation, TrainSummary, VlaTrainer};
use crate::{Error, Result};

/// File a finished run leaves in its folder.
pub const SUMMARY_FILE: &str = "summary.json";

/// What to run.
#[derive(Debug, Clone)]
pub struct ExperimentPlan {
    /// The shared config (its mode and seed are replaced per run).
    pub config: TrainConfig,
    /// Modes, in table order.
    pub modes: Vec<Mode>,
    /// Seeds (the core's seed: prompts, anchor schedule, sampling).
    pub seeds: Vec<u64>,
    /// Target success rate; `None`: the mean final success of `real`.
    pub target: Option<f64>,
}

pub use wmrl_report::MeanSe;

/// One mode's row of the table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModeRow {
    /// Mode.
    pub mode: String,
    /// Seeds run.
    pub seeds: usize,
    /// Success before training (the SFT policy).
    pub initial_success: MeanSe,
    /// Final greedy success, averaged over tasks.
    pub final_success: MeanSe,
    /// Final success per task, in `tasks` order.
    pub final_per_task: Vec<MeanSe>,
    /// Real environment steps of the whole run.
    pub env_steps: MeanSe,
    /// Of those, branched imagination's executed prefixes.
    #[serde(default)]
    pub prefix_env_steps: MeanSe,
    /// Training wall-clock seconds of the whole run.
    pub train_seconds: MeanSe,
    /// Real environment steps at which the seed-mean curve reaches the target.
    pub steps_to_target: Option<f64>,
    /// Training seconds at which the seed-mean curve reaches the target.
    pub seconds_to_target: Option<f64>,
    /// Seeds whose own curve reaches the target.
    pub reached: usize,
    /// `real`'s steps to target ÷ this mode's (× fewer real steps).
    pub steps_saving: Option<f64>,
    /// `real`'s seconds to target ÷ this mode's (× less compute).
    pub compute_saving: Option<f64>,
}

/// The experiment's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExperimentReport {
    /// Tasks trained and evaluated.
    pub tasks: Vec<usize>,
    /// Seeds.
    pub seeds: Vec<u64>,
    /// Iterations per run.
    pub iterations: u64,
    /// The target success rate used.
    pub target: Option<f64>,
    /// Success before training (seed-mean over every run; all start from
    /// the same policy).
    #[serde(default)]
    pub start_success: Option<f64>,
    /// One row per mode, in plan order.
    pub rows: Vec<ModeRow>,
}

/// The seed-mean curve of `runs`, success (mean ± SE over seeds) against
/// `x` of each evaluation.
fn seed_curve(runs: &[&TrainSummary], x: impl Fn(&Evaluation) -> f64) -> Vec<(f64, MeanSe)> {
    wmrl_report::seed_mean_se(
        &runs
            .iter()
            .map(|r| r.evaluations.iter().map(|e| (x(e), e.success)).collect())
            .collect::<Vec<_>>(),
    )
}

/// Whether reaching `target` from `start` (the success before training,
/// when known) is a gain.
fn is_gain(target: f64, start: Option<f64>) -> bool {
    start.is_none_or(|s| target > s + 1e-9)
}

/// [`seed_curve`] without the spread.
fn mean_curve(runs: &[&TrainSummary], x: impl Fn(&Evaluation) -> f64) -> Vec<(f64, f64)> {
    seed_curve(runs, x)
        .into_iter()
        .map(|(x, y)| (x, y.mean))
        .collect()
}

impl ExperimentReport {
    /// Builds the table from finished runs (grouped by mode, in `modes` order).
    pub fn from_runs(
        modes: &[Mode],
        runs: &[TrainSummary],
        tasks: &[usize],
        seeds: &[u64],
        iterations: u64,
        target: Option<f64>,
    ) -> Self {
        let by_mode: BTreeMap<&str, Vec<&TrainSummary>> =
            runs.iter().fold(BTreeMap::new(), |mut m, r| {
                m.entry(r.mode.as_str()).or_default().push(r);
                m
            });
        let last = |r: &TrainSummary| r.evaluations.last().cloned();
        let target = target.or_else(|| {
            let finals: Vec<f64> = by_mode
                .get(Mode::Real.name())?
                .iter()
                .filter_map(|r| last(r).map(|e| e.success))
                .collect();
            MeanSe::of(&finals).map(|m| m.mean)
        });
        let start_success = MeanSe::of(
            &runs
                .iter()
                .filter_map(|r| r.evaluations.first().map(|e| e.success))
                .collect::<Vec<_>>(),
        )
        .map(|m| m.mean);
        // Crossings are measured only towards a gain over the start.
        let gain_target = target.filter(|&t| is_gain(t, start_success));
        let zero = MeanSe {
            mean: 0.0,
            se: 0.0,
            n: 0,
        };
        let mut rows: Vec<ModeRow> = modes
            .iter()
            .filter_map(|mode| {
                let runs = by_mode.get(mode.name())?;
                let of = |f: &dyn Fn(&TrainSummary) -> Option<f64>| {
                    MeanSe::of(&runs.iter().filter_map(|r| f(r)).collect::<Vec<_>>())
                        .unwrap_or(zero)
                };
                let steps_curve = mean_curve(runs, |e| e.env_steps as f64);
                let seconds_curve = mean_curve(runs, |e| e.train_seconds);
                let crossing = |curve: &[(f64, f64)]| {
                    gain_target.and_then(|t| wmrl_report::first_crossing(curve, t))
                };
                let reached = gain_target.map_or(0, |t| {
                    runs.iter()
                        .filter(|r| {
                            r.evaluations
                                .iter()
                                .any(|e| wmrl_report::curve::reaches(e.success, t))
                        })
                        .count()
                });
                Some(ModeRow {
                    mode: mode.name().into(),
                    seeds: runs.len(),
                    initial_success: of(&|r| r.evaluations.first().map(|e| e.success)),
                    final_success: of(&|r| last(r).map(|e| e.success)),
                    final_per_task: (0..tasks.len())
                        .map(|i| of(&|r| last(r).and_then(|e| e.per_task.get(i).copied())))
                        .collect(),
                    env_steps: of(&|r| Some(r.env_steps as f64)),
                    prefix_env_steps: of(&|r| Some(r.prefix_env_steps as f64)),
                    train_seconds: of(&|r| Some(r.train_seconds)),
                    steps_to_target: crossing(&steps_curve),
                    seconds_to_target: crossing(&seconds_curve),
                    reached,
                    steps_saving: None,
                    compute_saving: None,
                })
            })
            .collect();
        let real = rows
            .iter()
            .find(|r| r.mode == Mode::Real.name())
            .map(|r| (r.steps_to_target, r.seconds_to_target));
        if let Some((real_steps, real_seconds)) = real {
            for row in &mut rows {
                let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
                    (Some(a), Some(b)) if b > 0.0 => Some(a / b),
                    _ => None,
                };
                row.steps_saving = ratio(real_steps, row.steps_to_target);
                row.compute_saving = ratio(real_seconds, row.seconds_to_target);
            }
        }
        Self {
            tasks: tasks.to_vec(),
            seeds: seeds.to_vec(),
            iterations,
            target,
            start_success,
            rows,
        }
    }

    /// Whether the target lies above the success before training, so that
    /// reaching it is a gain (otherwise no crossing is reported).
    pub fn target_is_a_gain(&self) -> bool {
        self.target.is_some_and(|t| is_gain(t, self.start_success))
    }

    /// The Markdown table (and a legend).
    pub fn markdown(&self) -> String {
        let pct = |m: &MeanSe| {
            if m.n > 1 {
                format!("{:.1} ± {:.1}", 100.0 * m.mean, 100.0 * m.se)
            } else {
                format!("{:.1}", 100.0 * m.mean)
            }
        };
        let mean_se = |m: &MeanSe| {
            if m.n > 1 {
                format!("{:.0} ± {:.0}", m.mean, m.se)
            } else {
                format!("{:.0}", m.mean)
            }
        };
        let gain = self.target_is_a_gain();
        let crossing = |x: Option<f64>, unit: &str| match x {
            Some(x) => format!("{x:.0}{unit}"),
            None if gain => "not reached".into(),
            None => "no gain".into(),
        };
        let times = |x: Option<f64>| x.map_or("–".into(), |x| format!("{x:.2}×"));
        let mut out = String::new();
        let target = match (self.target, self.start_success) {
            (None, _) => "none (no `real` run)".into(),
            (Some(t), Some(s)) if !gain => format!(
                "{:.1}%, not above the {:.1}% before training: no gain to reach, \
                 so no steps, compute or seeds to target are reported",
                100.0 * t,
                100.0 * s
            ),
            (Some(t), _) => format!("{:.1}%", 100.0 * t),
        };
        let _ = writeln!(
            out,
            "LIBERO-Long post-training, tasks {:?}, {} iterations, seeds {:?}; target success {target}.\n",
            self.tasks, self.iterations, self.seeds
        );
        let _ = write!(out, "| mode | SFT % | final % (avg) |");
        for t in &self.tasks {
            let _ = write!(out, " task {t} % |");
        }
        let _ = writeln!(
            out,
            " real env steps (run) | env steps to target | × fewer than real | train s to target | × less compute | seeds reaching |"
        );
        let _ = write!(out, "|---|---:|---:|");
        for _ in &self.tasks {
            let _ = write!(out, "---:|");
        }
        let _ = writeln!(out, "---:|---:|---:|---:|---:|---:|");
        for r in &self.rows {
            let _ = write!(
                out,
                "| {} | {} | {} |",
                r.mode,
                pct(&r.initial_success),
                pct(&r.final_success)
            );
            for t in &r.final_per_task {
                let _ = write!(out, " {} |", pct(t));
            }
            let _ = writeln!(
                out,
                " {} | {} | {} | {} | {} | {} |",
                mean_se(&r.env_steps),
                crossing(r.steps_to_target, ""),
                match (r.steps_saving, r.steps_to_target) {
                    // Reached without a single real step (wm-only).
                    (None, Some(0.0)) => "∞".into(),
                    (x, _) => times(x),
                },
                crossing(r.seconds_to_target, " s"),
                times(r.compute_saving),
                if gain {
                    format!("{}/{}", r.reached, r.seeds)
                } else {
                    "–".into()
                }
            );
        }
        let _ = writeln!(
            out,
            "\nSuccess is greedy, on the fixed initial states, mean ± standard error over seeds. \
             Steps and seconds to target: where the seed-mean curve first reaches the target, \
             interpolated between evaluations; × columns are `real`'s figure divided by the mode's; \
             seeds reaching: seeds whose own curve reaches the target."
        );
        for r in self.rows.iter().filter(|r| r.prefix_env_steps.mean > 0.0) {
            let _ = writeln!(
                out,
                "\n{}: {} of its {} real env steps are the first chunks of imagined episodes, \
                 executed before the world model imagines the rest (branched imagination).",
                r.mode,
                mean_se(&r.prefix_env_steps),
                mean_se(&r.env_steps)
            );
        }
        out
    }
}

/// Runs (or resumes, or skips when finished) every (mode, seed) of `plan`
/// under `out`, then writes `experiment.md`, `experiment.json` and
/// `success_vs_env_steps.png`. `progress(run name, iteration, last evaluation)`.
pub fn run(
    plan: &ExperimentPlan,
    policy_dir: &Path,
    world_model_dir: &Path,
    out: &Path,
    device: tch::Device,
    progress: &mut dyn FnMut(&str, u64, Option<&Evaluation>),
) -> Result<ExperimentReport> {
    plan.config.validate()?;
    if plan.modes.is_empty() || plan.seeds.is_empty() {
        return Err(wmrl_config::Error::invalid(
            "experiment",
            "expected at least one mode and one seed",
        )
        .into());
    }
    let mut runs = Vec::new();
    for &seed in &plan.seeds {
        for &mode in &plan.modes {
            let name = format!("{}-seed{seed}", mode.name());
            let _span = tracing::info_span!("experiment_run", run = %name).entered();
            let dir = out.join(&name);
            runs.push(run_one(
                plan,
                mode,
                seed,
                &dir,
                policy_dir,
                world_model_dir,
                device,
                &mut |i, e| progress(&name, i, e),
            )?);
        }
    }
    let report = ExperimentReport::from_runs(
        &plan.modes,
        &runs,
        &plan.config.tasks,
        &plan.seeds,
        plan.config.iterations,
        plan.target,
    );
    wmrl_report::write_atomic(&out.join("experiment.md"), report.markdown().as_bytes())?;
    wmrl_report::write_json_atomic(&out.join("experiment.json"), &report)?;
    plot(
        &plan.modes,
        &runs,
        report.target,
        &out.join("success_vs_env_steps.png"),
    )?;
    Ok(report)
}

#[allow(clippy::too_many_arguments)]
fn run_one(
    plan: &ExperimentPlan,
    mode: Mode,
    seed: u64,
    dir: &Path,
    policy_dir: &Path,
    world_model_dir: &Path,
    device: tch::Device,
    progress: &mut dyn FnMut(u64, Option<&Evaluation>),
) -> Result<TrainSummary> {
    let summary_path = dir.join(SUMMARY_FILE);
    let mut config = plan.config.clone();
    config.core.mode = mode;
    config.core.seed = seed;
    let mut trainer = if summary_path.exists() || !checkpoint::list(dir)?.is_empty() {
        // A run of this folder, finished or stopped: it must be this
        // experiment's, up to a shorter iteration count, which is extended.
        let saved = check_run_config(&dir.join("config.json"), &config)?;
        if summary_path.exists() {
            if saved.iterations == config.iterations {
                match finished_summary(dir, &summary_path, config.iterations) {
                    Ok(summary) => {
                        tracing::info!(run = %dir.display(), "finished earlier; reusing its summary");
                        return Ok(summary);
                    }
                    // Re-run from the newest checkpoint that verifies: the
                    // run is deterministic, so it ends as it did.
                    Err(why) => {
                        tracing::warn!(run = %dir.display(), %why, "finished run damaged; resuming it")
                    }
                }
            }
            // Extended (or re-run) below; the summary goes first, so that a
            // stop in between resumes rather than reuses it.
            std::fs::remove_file(&summary_path).map_err(|source| Error::Io {
                path: summary_path.clone(),
                source,
            })?;
        }
        let mut trainer = VlaTrainer::resume(dir, device)?;
        trainer.extend_to(config.iterations)?;
        trainer
    } else {
        if dir.join(CHECKPOINTS_DIR).exists() || dir.join("metrics.jsonl").exists() {
            // Killed before its first checkpoint was complete: start over.
            std::fs::remove_dir_all(dir).map_err(|source| Error::Io {
                path: dir.into(),
                source,
            })?;
        }
        VlaTrainer::new(config, policy_dir, world_model_dir, dir, device)?
    };
    let summary = trainer.run(progress)?;
    wmrl_report::write_json_atomic(&summary_path, &summary)?;
    Ok(summary)
}

/// The config a run folder saved (`config_path`), if it is `wanted` up to
/// a smaller or equal iteration count; otherwise an error naming the file.
fn check_run_config(config_path: &Path, wanted: &TrainConfig) -> Result<TrainConfig> {
    let saved = TrainConfig::read_resolved(config_path)?;
    let refuse = |message: String| {
        Err(Error::Checkpoint {
            path: config_path.into(),
            message,
        })
    };
    if saved.iterations > wanted.iterations {
        return refuse(format!(
            "ran {} iterations and this experiment asks for {}; choose another --out",
            saved.iterations, wanted.iterations
        ));
    }
    let same_but_iterations = TrainConfig {
        iterations: wanted.iterations,
        ..saved.clone()
    } == *wanted;
    if !same_but_iterations {
        return refuse("belongs to an experiment with another config; choose another --out".into());
    }
    Ok(saved)
}

/// A finished run's summary, if the run is whole: `summary.json` reads and
/// its newest checkpoint verifies and is of the final iteration.
fn finished_summary(dir: &Path, summary_path: &Path, iterations: u64) -> Result<TrainSummary> {
    let summary = read_summary(summary_path)?;
    let newest = checkpoint::select(dir, checkpoint::OnDamage::Refuse)?;
    match newest {
        Some(selected) if selected.state.iteration == iterations => Ok(summary),
        Some(selected) => Err(Error::Checkpoint {
            path: selected.dir,
            message: format!(
                "is of iteration {} and the finished run has {iterations}",
                selected.state.iteration
            ),
        }),
        None => Err(Error::Checkpoint {
            path: dir.join(CHECKPOINTS_DIR),
            message: "holds no checkpoint".into(),
        }),
    }
}

/// A finished run's `summary.json`.
fn read_summary(path: &Path) -> Result<TrainSummary> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.into(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|e| Error::Checkpoint {
        path: path.into(),
        message: e.to_string(),
    })
}

/// Mean success against mean real environment steps, per mode, shaded ±
/// one standard error over seeds, with the target as a grey line.
fn plot(modes: &[Mode], runs: &[TrainSummary], target: Option<f64>, path: &Path) -> Result<()> {
    let mut series: Vec<Series> = modes
        .iter()
        .filter_map(|mode| {
            let runs: Vec<&TrainSummary> = runs.iter().filter(|r| r.mode == mode.name()).collect();
            if runs.is_empty() {
                return None;
            }
            let curve = seed_curve(&runs, |e| e.env_steps as f64);
            let points = curve.iter().map(|(x, y)| (*x, 100.0 * y.mean)).collect();
            let band = curve
                .iter()
                .map(|(_, y)| (100.0 * (y.mean - y.se), 100.0 * (y.mean + y.se)))
                .collect();
            Some(
                Series::line(mode.name(), points)
                    .with_style(SeriesStyle::LineWithMarkers)
                    .with_band(band),
            )
        })
        .collect();
    let x_max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(0.0, f64::max);
    if let Some(target) = target {
        series.push(
            Series::line(
                format!("target {:.1}%", 100.0 * target),
                vec![(0.0, 100.0 * target), (x_max, 100.0 * target)],
            )
            .with_style(SeriesStyle::Reference),
        );
    }
    LinePlot {
        title: "LIBERO-Long post-training: success against real executions".into(),
        x_label: "real environment steps".into(),
        y_label: "greedy success, mean ± SE over seeds (%)".into(),
        series,
        ..Default::default()
    }
    .write_png(path)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(mode: Mode, seed: u64, curve: &[(u64, f64, f64)]) -> TrainSummary {
        TrainSummary {
            mode: mode.name().into(),
            seed,
            evaluations: curve
                .iter()
                .enumerate()
                .map(|(i, &(steps, seconds, success))| Evaluation {
                    iteration: i as u64,
                    env_steps: steps,
                    train_seconds: seconds,
                    success,
                    per_task: vec![success],
                })
                .collect(),
            env_steps: curve.last().unwrap().0,
            prefix_env_steps: 0,
            executions: 0,
            imagined: 0,
            train_seconds: curve.last().unwrap().1,
            replay_seeded: 0,
            starved_tasks: Vec::new(),
            run_dir: std::path::PathBuf::new(),
        }
    }

    #[test]
    fn the_table_measures_steps_to_reach_reals_final_success() {
        let mut runs = vec![
            summary(
                Mode::Real,
                0,
                &[(0, 0.0, 0.3), (1000, 10.0, 0.4), (2000, 20.0, 0.5)],
            ),
            summary(
                Mode::Real,
                1,
                &[(0, 0.0, 0.3), (1000, 10.0, 0.5), (2000, 20.0, 0.5)],
            ),
            // Seed 0 reaches 0.5 after 250 real steps, seed 1 after 500.
            summary(
                Mode::Wmrl,
                0,
                &[(0, 0.0, 0.3), (250, 5.0, 0.5), (500, 10.0, 0.6)],
            ),
            summary(
                Mode::Wmrl,
                1,
                &[(0, 0.0, 0.3), (250, 5.0, 0.4), (500, 10.0, 0.5)],
            ),
            // Never reaches it.
            summary(
                Mode::WmOnly,
                0,
                &[(0, 0.0, 0.3), (0, 4.0, 0.35), (0, 8.0, 0.2)],
            ),
        ];
        // Branched imagination executed 200 of wmrl's 500 real steps.
        runs[2].prefix_env_steps = 200;
        runs[3].prefix_env_steps = 200;
        let report = ExperimentReport::from_runs(
            &[Mode::Real, Mode::Wmrl, Mode::WmOnly],
            &runs,
            &[5],
            &[0, 1],
            2,
            None,
        );
        assert_eq!(report.target, Some(0.5));
        // real's seed-mean curve: 0.3, 0.45, 0.5 at 0, 1000, 2000 steps.
        let real = &report.rows[0];
        assert!((real.steps_to_target.unwrap() - 2000.0).abs() < 1e-9);
        assert_eq!(real.reached, 2);
        // wmrl's: 0.3, 0.45, 0.55 at 0, 250, 500: crosses 0.5 halfway, at 375
        // steps and 7.5 s (real: 20 s).
        let wmrl = &report.rows[1];
        assert!((wmrl.steps_to_target.unwrap() - 375.0).abs() < 1e-9);
        assert_eq!(wmrl.reached, 2);
        assert!((wmrl.steps_saving.unwrap() - 2000.0 / 375.0).abs() < 1e-9);
        assert!((wmrl.compute_saving.unwrap() - 20.0 / 7.5).abs() < 1e-9);
        assert!((wmrl.final_success.mean - 0.55).abs() < 1e-12);
        assert!((wmrl.final_success.se - 0.05).abs() < 1e-12);
        let wm_only = &report.rows[2];
        assert_eq!((wm_only.reached, wm_only.steps_saving), (0, None));
        let md = report.markdown();
        assert!(md.contains("| wmrl | 30.0 ± 0.0 | 55.0 ± 5.0 |"), "{md}");
        assert!(md.contains("5.33×") && md.contains("not reached"), "{md}");
        assert!(md.contains("target success 50.0%"), "{md}");
        assert!(
            md.contains("wmrl: 200 ± 0 of its 500 ± 0 real env steps are the first chunks"),
            "{md}"
        );
        assert!(!md.contains("real: "), "{md}");
        assert!(report.target_is_a_gain());
    }

    /// When `real` ends no better than the SFT policy, its final success is
    /// no gain: every curve "reaches" it at the first evaluation, so no
    /// steps, compute or seeds to target are reported, and the table says why.
    #[test]
    fn a_target_not_above_the_start_is_no_gain_to_reach() {
        let runs = vec![
            summary(
                Mode::Real,
                0,
                &[(0, 0.0, 0.22), (1000, 10.0, 0.18), (2000, 20.0, 0.16)],
            ),
            summary(
                Mode::Wmrl,
                0,
                &[(0, 0.0, 0.22), (250, 5.0, 0.12), (500, 10.0, 0.20)],
            ),
        ];
        let report =
            ExperimentReport::from_runs(&[Mode::Real, Mode::Wmrl], &runs, &[3], &[0], 2, None);
        assert_eq!(report.target, Some(0.16));
        assert_eq!(report.start_success, Some(0.22));
        assert!(!report.target_is_a_gain());
        for row in &report.rows {
            assert_eq!(row.steps_to_target, None, "{}", row.mode);
            assert_eq!(row.seconds_to_target, None, "{}", row.mode);
            assert_eq!((row.reached, row.steps_saving), (0, None), "{}", row.mode);
        }
        let md = report.markdown();
        assert!(
            md.contains("16.0%, not above the 22.0% before training: no gain to reach"),
            "{md}"
        );
        assert!(md.contains("| no gain |") && !md.contains("∞"), "{md}");
        // So is an explicit `--target` below the start.
        let report =
            ExperimentReport::from_runs(&[Mode::Real, Mode::Wmrl], &runs, &[3], &[0], 2, Some(0.2));
        assert!(!report.target_is_a_gain());
        assert_eq!(report.rows[1].steps_to_target, None);
        assert!(report.markdown().contains("20.0%, not above the 22.0%"));
    }
}
