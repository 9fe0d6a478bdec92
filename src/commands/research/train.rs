//! `wmrl research train` and `wmrl research experiment`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use wmrl_research::train::{ResearchConfig, ResearchSummary, Trainer};
use wmrl_research::{ExecutionCache, Task, suite};

use super::{ExperimentArgs, SandboxArgs, TrainArgs, runner, runtime};
use crate::cli::GlobalArgs;

/// Loads a suite's tasks, building data and leaderboards first when missing.
fn ensure_suite(
    rt: &tokio::runtime::Runtime,
    name: &str,
    tasks_dir: Option<&Path>,
    sandbox: &SandboxArgs,
) -> anyhow::Result<Vec<Task>> {
    let suite = suite::find_suite(name)?;
    let dir = tasks_dir
        .map_or_else(|| suite::default_cache(Path::new(".")), Path::to_path_buf)
        .join(suite.name);
    let dirs: Vec<PathBuf> = suite.tasks.iter().map(|t| dir.join(t.id)).collect();
    let built = dirs.iter().all(|d| d.join("leaderboard.csv").is_file());
    if !built {
        eprintln!(
            "building task suite {} in {} (once; cached)…",
            suite.name,
            dir.display()
        );
        let python = wmrl_research::python::find_python(sandbox.python.as_deref())?;
        wmrl_research::python::check_packages(&python)?;
        suite::generate(&python, &dir, suite.tasks)?;
        rt.block_on(async {
            let runner = runner(sandbox, None).await?;
            suite::build_leaderboards(&runner, &dirs, &|t, r, o| {
                eprintln!("  {t}/{r}: {}", o.name())
            })
            .await?;
            anyhow::Ok(())
        })?;
    }
    Ok(suite::load(&dir, &suite)?)
}

fn open_cache(spec: Option<&str>) -> anyhow::Result<Option<ExecutionCache>> {
    match spec {
        Some("none") => Ok(None),
        Some(path) => Ok(Some(ExecutionCache::open(Path::new(path))?)),
        None => Ok(Some(ExecutionCache::open(Path::new(
            ".wmrl-cache/research-executions.jsonl",
        ))?)),
    }
}

fn run_one(
    global: &GlobalArgs,
    rt: &Arc<tokio::runtime::Runtime>,
    config: ResearchConfig,
    tasks: Vec<Task>,
    sandbox: &SandboxArgs,
    cache: Option<ExecutionCache>,
    out: &Path,
) -> anyhow::Result<ResearchSummary> {
    let device = wmrl_tch::select_device(global.device)?;
    let runner = rt.block_on(runner(sandbox, cache))?;
    let (steps, mode, seed) = (config.steps, config.core.mode, config.core.seed);
    let mut trainer = Trainer::new(config, tasks, runner, rt.clone(), device, out)?;
    let bar = indicatif::ProgressBar::new(steps);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{prefix} {bar:30} {pos}/{len} steps {msg}")
            .expect("template"),
    );
    bar.set_prefix(format!("{mode} seed {seed}"));
    let summary = trainer.run(&mut |_, eval| {
        bar.inc(1);
        if let Some(e) = eval {
            bar.set_message(format!(
                "percentile {:.1} after {} executions",
                100.0 * e.mean_percentile,
                e.executions
            ));
        }
    })?;
    bar.finish_and_clear();
    Ok(summary)
}

pub fn train(global: &GlobalArgs, args: TrainArgs) -> anyhow::Result<()> {
    let rt = Arc::new(runtime()?);
    let tasks = match &args.task {
        Some(dir) => vec![Task::load(dir)?],
        None => ensure_suite(
            &rt,
            args.suite.as_deref().unwrap_or("sklearn-v1"),
            args.tasks_dir.as_deref(),
            &args.sandbox,
        )?,
    };
    let mut config: ResearchConfig = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            serde_json::from_str(&text)
                .with_context(|| format!("{}: not a valid ResearchConfig", path.display()))?
        }
        None => ResearchConfig::default(),
    };
    config.core.mode = args.mode;
    config.core.seed = args.seed;
    if let Some(steps) = args.steps {
        config.steps = steps;
    }
    if let Some(base_url) = &args.judge_url {
        let mut judge = config.judge.take().unwrap_or_default();
        judge.endpoint.base_url = base_url.clone();
        if let Some(model) = &args.judge_model {
            judge.endpoint.model = model.clone();
        }
        config.judge = Some(judge);
    } else if args.judge_model.is_some() {
        anyhow::bail!("--judge-model needs --judge-url (the judge's OpenAI-compatible endpoint)");
    }
    config.core.validate()?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("runs/research-{}-{}", args.mode, args.seed)));
    let cache = open_cache(args.cache.as_deref())?;
    let summary = run_one(global, &rt, config, tasks, &args.sandbox, cache, &out)?;
    if global.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        let first = summary
            .evaluations
            .first()
            .map_or(0.0, |e| e.mean_percentile);
        let last = summary
            .evaluations
            .last()
            .map_or(0.0, |e| e.mean_percentile);
        println!(
            "mode {} seed {}: mean percentile {:.1} -> {:.1}",
            summary.mode,
            summary.seed,
            100.0 * first,
            100.0 * last
        );
        println!(
            "real executions {} (sandbox runs {}, cache hits {}), world-model calls {}",
            summary.executions, summary.sandbox_runs, summary.cache_hits, summary.world_model_calls
        );
        println!("run folder: {}", summary.run_dir.display());
    }
    Ok(())
}

/// Per mode: the seed-mean curve (executions, percentile) and derived figures.
#[derive(Debug, serde::Serialize)]
struct ModeResult {
    mode: String,
    curve: Vec<(f64, f64)>,
    initial: f64,
    last: f64,
    /// Final mean percentile over seeds, with its standard error.
    final_percentile: wmrl_report::MeanSe,
    improvement: f64,
    executions: f64,
    /// Executions at which the seed-mean curve first reaches `real`'s final
    /// gain (linear interpolation between evaluations); `None`: never.
    executions_to_reach_real: Option<f64>,
    /// `real`'s executions to its own final gain over this mode's.
    fewer_executions_than_real: Option<f64>,
    /// The same for 95% of `real`'s final gain (a plateau's last points
    /// are within evaluation noise of each other).
    executions_to_reach_95: Option<f64>,
    fewer_executions_than_real_95: Option<f64>,
    /// The seed-mean curve against distinct solutions executed (each
    /// solution counted once: what a deduplicating executor would run).
    distinct_curve: Vec<(f64, f64)>,
    /// Distinct solutions executed by the end (seed mean).
    distinct_executions: f64,
    /// Distinct executions to reach `real`'s final gain, and `real`'s own
    /// distinct executions to it over this mode's.
    distinct_to_reach_real: Option<f64>,
    fewer_distinct_than_real: Option<f64>,
}

/// Where the seed-mean curve `mine` first reaches `target`, and how many
/// times fewer executions that is than `real` needs (`None` where either
/// never reaches it).
fn crossing_ratio(
    real: &[(f64, f64)],
    mine: &[(f64, f64)],
    target: f64,
) -> (Option<f64>, Option<f64>) {
    let (a, b) = (
        wmrl_report::first_crossing(real, target),
        wmrl_report::first_crossing(mine, target),
    );
    let ratio = match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    (b, ratio)
}

/// The default research training config with `KEY=VALUE` overrides applied
/// (unknown keys and ill-typed values are rejected, naming the key).
fn config_with_overrides(overrides: &[String]) -> anyhow::Result<ResearchConfig> {
    Ok(wmrl_config::with_overrides(
        &ResearchConfig::default(),
        overrides,
    )?)
}

pub fn experiment(global: &GlobalArgs, args: ExperimentArgs) -> anyhow::Result<()> {
    let rt = Arc::new(runtime()?);
    let tasks = ensure_suite(&rt, &args.suite, args.tasks_dir.as_deref(), &args.sandbox)?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("runs/research-experiment"));
    let base = config_with_overrides(&args.set)?;
    let mut runs: Vec<ResearchSummary> = Vec::new();
    for &seed in &args.seeds {
        for &mode in &args.modes {
            let mut config = ResearchConfig {
                steps: args.steps,
                eval_samples: args.eval_samples,
                eval_every: args.eval_every,
                ..base.clone()
            };
            config.core.mode = mode;
            config.core.seed = seed;
            config.core.groups = match mode {
                wmrl_core::Mode::Real => args.real_groups.unwrap_or(args.groups),
                _ => args.groups,
            };
            config.core.anchor_ratio = args.anchor_ratio;
            config.core.group_size = args.group_size;
            config.core.validate()?;
            let cache = open_cache(None)?;
            let summary = run_one(
                global,
                &rt,
                config,
                tasks.clone(),
                &args.sandbox,
                cache,
                &out.join(format!("{mode}-{seed}")),
            )?;
            eprintln!(
                "{mode} seed {seed}: {:.1} -> {:.1} with {} executions",
                100.0 * summary.evaluations[0].mean_percentile,
                100.0
                    * summary
                        .evaluations
                        .last()
                        .map_or(0.0, |e| e.mean_percentile),
                summary.executions
            );
            runs.push(summary);
        }
    }
    // Seed-mean curves: evaluations happen at the same steps in every run of a mode.
    let mut results: Vec<ModeResult> = Vec::new();
    for &mode in &args.modes {
        let mine: Vec<&ResearchSummary> = runs.iter().filter(|r| r.mode == mode.name()).collect();
        let seed_mean = |x: &dyn Fn(&wmrl_research::train::ResearchEvaluation) -> u64| {
            wmrl_report::seed_mean(
                &mine
                    .iter()
                    .map(|r| {
                        r.evaluations
                            .iter()
                            .map(|e| (x(e) as f64, e.mean_percentile))
                            .collect()
                    })
                    .collect::<Vec<_>>(),
            )
        };
        let curve = seed_mean(&|e| e.executions);
        let distinct_curve = seed_mean(&|e| e.distinct_executions);
        let initial = curve.first().map_or(0.0, |p| p.1);
        let last = curve.last().map_or(0.0, |p| p.1);
        results.push(ModeResult {
            mode: mode.name().into(),
            executions: curve.last().map_or(0.0, |p| p.0),
            improvement: last - initial,
            final_percentile: wmrl_report::MeanSe::of(
                &mine
                    .iter()
                    .filter_map(|r| r.evaluations.last().map(|e| e.mean_percentile))
                    .collect::<Vec<_>>(),
            )
            .context("a mode without runs")?,
            initial,
            last,
            curve,
            executions_to_reach_real: None,
            fewer_executions_than_real: None,
            executions_to_reach_95: None,
            fewer_executions_than_real_95: None,
            distinct_executions: distinct_curve.last().map_or(0.0, |p| p.0),
            distinct_curve,
            distinct_to_reach_real: None,
            fewer_distinct_than_real: None,
        });
    }
    if let Some((initial, gain, curve, distinct_curve)) = results
        .iter()
        .find(|r| r.mode == "real")
        .map(|r| {
            (
                r.initial,
                r.improvement,
                r.curve.clone(),
                r.distinct_curve.clone(),
            )
        })
        .filter(|(_, gain, _, _)| *gain > 0.0)
    {
        let (full, near) = (initial + gain, initial + 0.95 * gain);
        for r in &mut results {
            (r.executions_to_reach_real, r.fewer_executions_than_real) =
                crossing_ratio(&curve, &r.curve, full);
            (r.executions_to_reach_95, r.fewer_executions_than_real_95) =
                crossing_ratio(&curve, &r.curve, near);
            (r.distinct_to_reach_real, r.fewer_distinct_than_real) =
                crossing_ratio(&distinct_curve, &r.distinct_curve, full);
        }
    }
    let plot = wmrl_report::LinePlot {
        title: format!(
            "AutoResearch {}: mean leaderboard percentile vs real executions ({} seeds)",
            args.suite,
            args.seeds.len()
        ),
        x_label: "real (sandbox) executions during training".into(),
        y_label: "mean leaderboard percentile".into(),
        series: results
            .iter()
            .map(|r| {
                wmrl_report::Series::line(
                    r.mode.clone(),
                    r.curve.iter().map(|&(x, y)| (x, 100.0 * y)).collect(),
                )
                .with_style(wmrl_report::SeriesStyle::LineWithMarkers)
            })
            .collect(),
        y_range: Some((0.0, 100.0)),
        ..Default::default()
    };
    plot.write_png(&out.join("experiment.png"))?;
    let report = serde_json::json!({
        "suite": args.suite,
        "seeds": args.seeds,
        "steps": args.steps,
        "groups": args.groups,
        "real_groups": args.real_groups.unwrap_or(args.groups),
        "group_size": args.group_size,
        "anchor_ratio": args.anchor_ratio,
        "modes": results,
        "runs": runs,
    });
    wmrl_report::write_json_atomic(&out.join("experiment.json"), &report)?;
    if global.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "{:<16} {:>6} {:>12} {:>6} {:>10} {:>14} {:>8} {:>14} {:>8}",
        "mode",
        "start",
        "end ± se",
        "gain",
        "executions",
        "to real's gain",
        "fewer x",
        "to 95% of it",
        "fewer x"
    );
    let count = |x: Option<f64>| x.map_or("never".into(), |x| format!("{x:.0}"));
    let times = |x: Option<f64>| x.map_or("-".into(), |x| format!("{x:.2}"));
    for r in &results {
        println!(
            "{:<16} {:>6.1} {:>12} {:>6.1} {:>10.0} {:>14} {:>8} {:>14} {:>8}",
            r.mode,
            100.0 * r.initial,
            format!(
                "{:.1} ± {:.1}",
                100.0 * r.final_percentile.mean,
                100.0 * r.final_percentile.se
            ),
            100.0 * r.improvement,
            r.executions,
            count(r.executions_to_reach_real),
            times(r.fewer_executions_than_real),
            count(r.executions_to_reach_95),
            times(r.fewer_executions_than_real_95),
        );
    }
    println!("counting each distinct solution once (what a deduplicating executor would run):");
    println!(
        "{:<16} {:>10} {:>14} {:>8}",
        "mode", "distinct", "to real's gain", "fewer x"
    );
    for r in &results {
        println!(
            "{:<16} {:>10.0} {:>14} {:>8}",
            r.mode,
            r.distinct_executions,
            count(r.distinct_to_reach_real),
            times(r.fewer_distinct_than_real),
        );
    }
    println!("plot: {}", out.join("experiment.png").display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::config_with_overrides;

    #[test]
    fn overrides_apply_to_the_research_config_and_unknown_keys_are_named() {
        let config = config_with_overrides(&["policy.entropy=0.01".into()]).unwrap();
        assert_eq!(config.policy.entropy, 0.01);
        assert_eq!(config.steps, super::ResearchConfig::default().steps);
        let error = config_with_overrides(&["policy.entropyy=0.01".into()]).unwrap_err();
        assert!(format!("{error:#}").contains("entropyy"), "{error:#}");
    }
}
