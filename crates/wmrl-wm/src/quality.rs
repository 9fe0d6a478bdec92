//! How good a score is as a predictor of real success: AUROC, Brier score,
//! expected calibration error, and the bias and noise of ŝ against r (the
//! paper's ŝ = r + b + ξ), plus a reliability plot.

use std::path::Path;

use serde::Serialize;
use wmrl_report::plot::{LinePlot, Series, SeriesStyle};

use crate::Result;

/// Figures of a set of (score, outcome) pairs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScoreQuality {
    /// Episodes.
    pub episodes: usize,
    /// Real success rate.
    pub success_rate: f64,
    /// Mean score.
    pub mean_score: f64,
    /// Area under the ROC curve (ties count half); `None` with one class only.
    pub auroc: Option<f64>,
    /// Mean squared error of the score as a probability.
    pub brier: f64,
    /// Expected calibration error over `bins` equal-width bins.
    pub ece: f64,
    /// Bias: mean(ŝ − r).
    pub bias: f64,
    /// Noise: standard deviation of ŝ − r around the bias.
    pub noise: f64,
    /// Reliability curve: (mean score, success rate, count) per non-empty bin.
    pub reliability: Vec<(f64, f64, usize)>,
}

/// AUROC by the rank statistic (Mann–Whitney U), ties counted half.
pub fn auroc(scores: &[f64], outcomes: &[bool]) -> Option<f64> {
    let mut pairs: Vec<(f64, bool)> = scores
        .iter()
        .copied()
        .zip(outcomes.iter().copied())
        .collect();
    pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let positives = outcomes.iter().filter(|&&o| o).count();
    let negatives = outcomes.len() - positives;
    if positives == 0 || negatives == 0 {
        return None;
    }
    let mut rank_sum = 0.0;
    let mut i = 0;
    while i < pairs.len() {
        let mut j = i;
        while j < pairs.len() && pairs[j].0 == pairs[i].0 {
            j += 1;
        }
        let mid_rank = (i + 1 + j) as f64 / 2.0;
        rank_sum += mid_rank * pairs[i..j].iter().filter(|p| p.1).count() as f64;
        i = j;
    }
    let u = rank_sum - (positives * (positives + 1)) as f64 / 2.0;
    Some(u / (positives * negatives) as f64)
}

/// Every figure for scores in [0, 1] against binary outcomes.
pub fn score_quality(scores: &[f64], outcomes: &[bool], bins: usize) -> ScoreQuality {
    let n = scores.len().max(1) as f64;
    let r: Vec<f64> = outcomes.iter().map(|&o| f64::from(u8::from(o))).collect();
    let residual: Vec<f64> = scores.iter().zip(&r).map(|(s, r)| s - r).collect();
    let bias = residual.iter().sum::<f64>() / n;
    let noise = (residual.iter().map(|e| (e - bias).powi(2)).sum::<f64>() / n).sqrt();
    let brier = residual.iter().map(|e| e * e).sum::<f64>() / n;
    let bins = bins.max(1);
    let mut acc = vec![(0.0, 0.0, 0usize); bins];
    for (s, r) in scores.iter().zip(&r) {
        let b = ((s * bins as f64) as usize).min(bins - 1);
        acc[b].0 += s;
        acc[b].1 += r;
        acc[b].2 += 1;
    }
    let reliability: Vec<(f64, f64, usize)> = acc
        .iter()
        .filter(|b| b.2 > 0)
        .map(|b| (b.0 / b.2 as f64, b.1 / b.2 as f64, b.2))
        .collect();
    let ece = reliability
        .iter()
        .map(|(s, r, c)| (s - r).abs() * *c as f64)
        .sum::<f64>()
        / n;
    ScoreQuality {
        episodes: scores.len(),
        success_rate: r.iter().sum::<f64>() / n,
        mean_score: scores.iter().sum::<f64>() / n,
        auroc: auroc(scores, outcomes),
        brier,
        ece,
        bias,
        noise,
        reliability,
    }
}

/// Pearson correlation of `x` and `y` after centring both on their group's
/// mean (`groups[i]` is item i's group): how well `x` ranks items *within*
/// groups, which is what group-relative advantages use. One group for all
/// items gives the plain correlation. `None` when either centred series has
/// no variance (e.g. no group with two items).
pub fn within_group_correlation<G: Eq + std::hash::Hash>(
    x: &[f64],
    y: &[f64],
    groups: &[G],
) -> Option<f64> {
    let mut sums: std::collections::HashMap<&G, (f64, f64, usize)> =
        std::collections::HashMap::new();
    for ((x, y), g) in x.iter().zip(y).zip(groups) {
        let s = sums.entry(g).or_default();
        s.0 += x;
        s.1 += y;
        s.2 += 1;
    }
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for ((x, y), g) in x.iter().zip(y).zip(groups) {
        let (gx, gy, n) = sums[g];
        let dx = x - gx / n as f64;
        let dy = y - gy / n as f64;
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    (sxx > 1e-12 && syy > 1e-12).then(|| sxy / (sxx * syy).sqrt())
}

/// Writes a reliability plot (success rate against mean score per bin, and
/// the diagonal) of one or more named score sets.
pub fn reliability_plot(path: &Path, title: &str, sets: &[(&str, &ScoreQuality)]) -> Result<()> {
    let mut series = vec![
        Series::line("perfect calibration", vec![(0.0, 0.0), (1.0, 1.0)])
            .with_style(SeriesStyle::Reference),
    ];
    for (name, q) in sets {
        series.push(
            Series::line(
                format!(
                    "{name} (AUROC {}, ECE {:.3})",
                    q.auroc.map_or("n/a".into(), |a| format!("{a:.3}")),
                    q.ece
                ),
                q.reliability.iter().map(|(s, r, _)| (*s, *r)).collect(),
            )
            .with_style(SeriesStyle::LineWithMarkers),
        );
    }
    LinePlot {
        title: title.into(),
        x_label: "world-model score ŝ (bin mean)".into(),
        y_label: "real success rate".into(),
        series,
        y_range: Some((0.0, 1.0)),
        ..Default::default()
    }
    .write_png(path)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn within_group_correlation_ignores_differences_between_groups() {
        // x ranks the groups apart and each group's items the wrong way
        // round: the plain correlation barely sees it, the within-group one
        // is exactly -1.
        let x = [0.9, 0.8, 0.2, 0.1];
        let y = [0.0, 1.0, 0.0, 1.0];
        let plain = within_group_correlation(&x, &y, &[0, 0, 0, 0]).unwrap();
        assert!((plain + 0.1414).abs() < 1e-3, "plain {plain}");
        let within = within_group_correlation(&x, &y, &["a", "a", "b", "b"]).unwrap();
        assert!((within + 1.0).abs() < 1e-12, "within {within}");
        let same = within_group_correlation(&y, &y, &["a", "a", "b", "b"]).unwrap();
        assert!((same - 1.0).abs() < 1e-12);
        // Singleton groups carry no within-group variance.
        assert_eq!(within_group_correlation(&x, &y, &[0, 1, 2, 3]), None);
    }

    #[test]
    fn auroc_matches_hand_computed_values() {
        assert_eq!(
            auroc(&[0.1, 0.4, 0.35, 0.8], &[false, false, true, true]),
            Some(0.75)
        );
        assert_eq!(auroc(&[0.5, 0.5], &[false, true]), Some(0.5));
        assert_eq!(auroc(&[0.2, 0.3], &[true, true]), None);
    }

    #[test]
    fn a_perfectly_calibrated_constant_has_no_bias_and_known_brier() {
        let scores = vec![0.5; 4];
        let q = score_quality(&scores, &[true, false, true, false], 10);
        assert!(q.bias.abs() < 1e-12 && (q.brier - 0.25).abs() < 1e-12 && q.ece < 1e-12);
        assert!((q.noise - 0.5).abs() < 1e-12);
    }
}
