//! Learning curves summarised over seeds: the seed-mean curve, where a
//! curve first reaches a level (the "executions to target" of an experiment),
//! and the mean ± standard error of a figure over seeds.
//!
//! A curve is a list of `(x, y)` evaluations in training order: `x` is the
//! budget spent so far (real environment steps, sandbox executions, seconds),
//! `y` the score there. Both experiments (VLA and AutoResearch) read their
//! to-target figures from the seed-mean curve, interpolated between
//! evaluations, so that one lucky evaluation of one seed does not decide the
//! figure and coarse evaluation spacing does not quantise it.

/// Mean and standard error over seeds.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MeanSe {
    /// Mean.
    pub mean: f64,
    /// Standard error of the mean (0 with one value).
    pub se: f64,
    /// Values averaged.
    pub n: usize,
}

impl MeanSe {
    /// Of `values`; `None` when empty.
    pub fn of(values: &[f64]) -> Option<Self> {
        let n = values.len();
        if n == 0 {
            return None;
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        let se = if n > 1 {
            let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            (var / n as f64).sqrt()
        } else {
            0.0
        };
        Some(Self { mean, se, n })
    }
}

/// The pointwise mean of `curves` (the i-th point is the mean of every
/// curve's i-th point), cut to the shortest curve; empty without curves.
pub fn seed_mean(curves: &[Vec<(f64, f64)>]) -> Vec<(f64, f64)> {
    seed_mean_se(curves)
        .into_iter()
        .map(|(x, y)| (x, y.mean))
        .collect()
}

/// [`seed_mean`] with each point's spread: the mean `x` and the mean ±
/// standard error of `y` over the curves.
pub fn seed_mean_se(curves: &[Vec<(f64, f64)>]) -> Vec<(f64, MeanSe)> {
    let len = curves.iter().map(Vec::len).min().unwrap_or(0);
    let n = curves.len() as f64;
    (0..len)
        .filter_map(|i| {
            let x = curves.iter().map(|c| c[i].0).sum::<f64>() / n;
            let ys: Vec<f64> = curves.iter().map(|c| c[i].1).collect();
            MeanSe::of(&ys).map(|y| (x, y))
        })
        .collect()
}

/// Whether `score` reaches `level`: scores within 1e-12 below it count (means
/// of equal rates differ in the last bit).
pub fn reaches(score: f64, level: f64) -> bool {
    score >= level - 1e-12
}

/// The first `x` at which `curve` reaches `level` ([`reaches`]), linearly
/// interpolated between the two evaluations around the crossing; the first
/// point's `x` when it already reaches it; `None` when it never does.
pub fn first_crossing(curve: &[(f64, f64)], level: f64) -> Option<f64> {
    let reaches = |y: f64| reaches(y, level);
    let first = curve.first()?;
    if reaches(first.1) {
        return Some(first.0);
    }
    curve.windows(2).find_map(|w| {
        let ((x0, y0), (x1, y1)) = (w[0], w[1]);
        (reaches(y1) && !reaches(y0)).then(|| x0 + (x1 - x0) * ((level - y0) / (y1 - y0)).min(1.0))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_standard_error_over_seeds() {
        let m = MeanSe::of(&[1.0, 2.0, 3.0]).unwrap();
        assert_eq!((m.mean, m.n), (2.0, 3));
        assert!((m.se - (1.0f64 / 3.0).sqrt()).abs() < 1e-12);
        assert_eq!(MeanSe::of(&[0.4]).unwrap().se, 0.0);
        assert!(MeanSe::of(&[]).is_none());
    }

    #[test]
    fn first_crossing_interpolates_between_evaluations() {
        let curve = [
            (0.0, 0.4),
            (40.0, 0.6),
            (80.0, 0.8),
            (120.0, 0.7),
            (160.0, 0.9),
        ];
        // Halfway between 0.6 at 40 and 0.8 at 80.
        let x = first_crossing(&curve, 0.7).expect("crosses");
        assert!((x - 60.0).abs() < 1e-9, "{x}");
        // The first crossing counts, not a later one after a dip.
        assert_eq!(first_crossing(&curve, 0.8), Some(80.0));
        assert_eq!(first_crossing(&curve, 0.3), Some(0.0));
        assert_eq!(first_crossing(&curve, 0.95), None);
        assert_eq!(first_crossing(&[], 0.5), None);
    }

    #[test]
    fn seed_mean_averages_pointwise_and_cuts_to_the_shortest() {
        let curves = vec![
            vec![(0.0, 0.2), (10.0, 0.4), (20.0, 0.6)],
            vec![(0.0, 0.4), (30.0, 0.8)],
        ];
        let mean = seed_mean(&curves);
        assert_eq!(mean.len(), 2);
        assert!((mean[0].0 - 0.0).abs() < 1e-12 && (mean[0].1 - 0.3).abs() < 1e-12);
        assert!((mean[1].0 - 20.0).abs() < 1e-12 && (mean[1].1 - 0.6).abs() < 1e-12);
        assert!(seed_mean(&[]).is_empty());
        // The spread of the second point: 0.4 and 0.8, sd 0.283, se 0.2.
        let spread = seed_mean_se(&curves);
        assert_eq!(spread[1].1.n, 2);
        assert!((spread[1].1.mean - 0.6).abs() < 1e-12 && (spread[1].1.se - 0.2).abs() < 1e-12);
    }
}
