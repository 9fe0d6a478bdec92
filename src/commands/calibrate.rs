//! `wmrl calibrate --pairs FILE.csv`: fits the isotonic calibrator to a
//! run's anchor pairs (world-model score, real reward, optional weight),
//! prints the map (`--json` for machine use) and writes a reliability plot.
//!
//! The CSV has columns `score,reward[,weight]`. A header row is optional;
//! with one, columns are found by name and other columns (step, group, …)
//! are ignored. Lines starting with `#` are comments.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::Args;
use serde::Serialize;
use wmrl_core::IsotonicFit;
use wmrl_core::isotonic::Block;
use wmrl_report::{LinePlot, Series, SeriesStyle};

use crate::cli::GlobalArgs;

/// Arguments of `wmrl calibrate`.
#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// CSV of anchor pairs: score, reward and optionally weight per line.
    #[arg(long, value_name = "FILE.csv")]
    pub pairs: PathBuf,
    /// Reliability plot to write (default: FILE.reliability.png beside the CSV).
    #[arg(long, value_name = "OUT.png")]
    pub plot: Option<PathBuf>,
    /// Equal-width score bins of the reliability plot.
    #[arg(long, default_value_t = 10)]
    pub bins: usize,
}

/// The anchor pairs of a file.
#[derive(Debug, Default)]
struct Pairs {
    scores: Vec<f64>,
    rewards: Vec<f64>,
    weights: Vec<f64>,
}

/// Reads `score,reward[,weight]` lines; errors name the file, line and column.
fn read_pairs(path: &Path) -> anyhow::Result<Pairs> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .comment(Some(b'#'))
        .from_path(path)
        .with_context(|| format!("cannot read pairs file {}", path.display()))?;
    let mut pairs = Pairs::default();
    // Column indices of score, reward and (optionally) weight.
    let mut columns: Option<(usize, usize, Option<usize>)> = None;
    for record in reader.records() {
        let record = record.map_err(|e| {
            let line = e.position().map_or(0, |p| p.line());
            anyhow::anyhow!("{}:{line}: {e}", path.display())
        })?;
        let line = record.position().map_or(0, |p| p.line());
        let at = |msg: String| anyhow::anyhow!("{}:{line}: {msg}", path.display());
        if record.iter().all(str::is_empty) {
            continue;
        }
        let (s, r, w) = match columns {
            Some(c) => c,
            None => {
                let first = record.get(0).unwrap_or_default();
                let c = if first.parse::<f64>().is_ok() {
                    (0, 1, (record.len() > 2).then_some(2))
                } else {
                    let find =
                        |name: &str| record.iter().position(|h| h.eq_ignore_ascii_case(name));
                    let (Some(s), Some(r)) = (find("score"), find("reward")) else {
                        return Err(at(format!(
                            "header must name columns `score` and `reward` (and optionally `weight`), got `{}`",
                            record.iter().collect::<Vec<_>>().join(",")
                        )));
                    };
                    columns = Some((s, r, find("weight")));
                    continue;
                };
                columns = Some(c);
                c
            }
        };
        let field = |i: usize, name: &str| -> anyhow::Result<f64> {
            let raw = record
                .get(i)
                .ok_or_else(|| at(format!("missing column `{name}` (column {})", i + 1)))?;
            let v: f64 = raw
                .parse()
                .map_err(|_| at(format!("column `{name}`: expected a number, got `{raw}`")))?;
            if !v.is_finite() {
                return Err(at(format!("column `{name}`: {v} is not a finite number")));
            }
            Ok(v)
        };
        let score = field(s, "score")?;
        let reward = field(r, "reward")?;
        let weight = match w {
            Some(i) if record.get(i).is_some_and(|x| !x.is_empty()) => field(i, "weight")?,
            _ => 1.0,
        };
        if weight < 0.0 {
            return Err(at(format!("column `weight`: {weight} is negative")));
        }
        pairs.scores.push(score);
        pairs.rewards.push(reward);
        pairs.weights.push(weight);
    }
    if pairs.weights.iter().all(|&w| w == 0.0) {
        bail!("{}: no anchor pairs with positive weight", path.display());
    }
    Ok(pairs)
}

/// What `--json` prints.
#[derive(Debug, Serialize)]
struct Report<'a> {
    file: &'a Path,
    pairs: usize,
    total_weight: f64,
    rmse: f64,
    blocks: &'a [Block],
    plot: &'a Path,
}

/// Mean score and mean reward per equal-width score bin.
fn reliability_bins(p: &Pairs, bins: usize) -> Vec<(f64, f64)> {
    let lo = p.scores.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = p.scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let width = ((hi - lo) / bins as f64).max(f64::MIN_POSITIVE);
    let mut acc = vec![(0.0, 0.0, 0.0); bins];
    for ((&s, &r), &w) in p.scores.iter().zip(&p.rewards).zip(&p.weights) {
        let b = (((s - lo) / width) as usize).min(bins - 1);
        acc[b].0 += w * s;
        acc[b].1 += w * r;
        acc[b].2 += w;
    }
    acc.into_iter()
        .filter(|a| a.2 > 0.0)
        .map(|(ws, wr, w)| (ws / w, wr / w))
        .collect()
}

pub fn run(global: &GlobalArgs, args: CalibrateArgs) -> anyhow::Result<()> {
    if args.bins == 0 {
        bail!("--bins must be at least 1");
    }
    let pairs = read_pairs(&args.pairs)?;
    let fit = IsotonicFit::fit(&pairs.scores, &pairs.rewards, Some(&pairs.weights))
        .with_context(|| format!("cannot fit {}", args.pairs.display()))?;
    let total_weight: f64 = pairs.weights.iter().sum();
    let rmse = (fit.weighted_sse(&pairs.scores, &pairs.rewards, Some(&pairs.weights))
        / total_weight)
        .sqrt();
    let plot_path = args
        .plot
        .clone()
        .unwrap_or_else(|| args.pairs.with_extension("reliability.png"));

    let blocks = fit.blocks();
    let (lo, hi) = (blocks[0].lo, blocks[blocks.len() - 1].hi);
    let map: Vec<(f64, f64)> = blocks
        .iter()
        .flat_map(|b| [(b.lo, b.value), (b.hi, b.value)])
        .collect();
    LinePlot {
        title: format!(
            "reliability of world-model scores ({} anchor pairs)",
            pairs.scores.len()
        ),
        x_label: "world-model score".into(),
        y_label: "real reward".into(),
        series: vec![
            Series::line("binned mean reward", reliability_bins(&pairs, args.bins))
                .with_style(SeriesStyle::LineWithMarkers),
            Series::line("isotonic map", map),
            Series::line("identity", vec![(lo, lo), (hi, hi)]).with_style(SeriesStyle::Reference),
        ],
        ..Default::default()
    }
    .write_png(&plot_path)?;

    if global.json {
        let report = Report {
            file: &args.pairs,
            pairs: pairs.scores.len(),
            total_weight,
            rmse,
            blocks,
            plot: &plot_path,
        };
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "{}: {} pairs (total weight {total_weight}), {} blocks, in-sample RMSE {rmse:.4}",
        args.pairs.display(),
        pairs.scores.len(),
        blocks.len()
    );
    println!(
        "{:>12} {:>12} {:>12} {:>10} {:>8}",
        "score from", "score to", "f̂ (reward)", "weight", "pairs"
    );
    for b in blocks {
        println!(
            "{:>12.5} {:>12.5} {:>12.5} {:>10.3} {:>8}",
            b.lo, b.hi, b.value, b.weight, b.count
        );
    }
    println!(
        "f̂ is constant inside a block, linear between blocks and clamped outside [{lo}, {hi}]."
    );
    println!("reliability plot: {}", plot_path.display());
    Ok(())
}
