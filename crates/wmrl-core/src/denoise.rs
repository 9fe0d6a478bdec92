//! Denoising: how much the world model's scores agree with real rewards,
//! measured out of sample on the anchor window, and the stream weights
//! built from it ([`crate::weights`], which derives them).
//!
//! # What is estimated
//! Only anchors carry both ŝ and r. Write y = f̂(ŝ) for the world-model
//! reward (ŝ itself without debiasing). The weights need, within groups
//! (errors constant within a group cancel in group-relative advantages):
//! v_r = Var r, v_y = Var y and c = Cov(r, y), and from them ρ = c/√(v_r v_y),
//! the slope β = c/v_r of y on r and γ = c/v_y of r on y. A world-model
//! sample is worth ρ² of an anchor sample, once its gradient is rescaled by
//! 1/β to the anchors' expectation.
//!
//! In terms of the residual noise σ²_ξ = Var(r − y), c = (v_r + v_y − σ²_ξ)/2:
//! - if the world model's error is independent of r (y = r + ξ), 1/ρ² − 1 = σ²_ξ / v_r;
//! - if y is a calibrated prediction (y = E[r | ŝ], what isotonic debiasing
//!   aims at), its error is *anti*-correlated with r (Cov(y, r − y) = 0),
//!   1/ρ² − 1 = σ²_ξ / (v_r − σ²_ξ), and its gradient is shrunk by β = ρ².
//!   The correlation form covers both cases and is what is computed.
//!
//! # Estimation
//! The statistics are estimated **out of sample** by K-fold cross-fitting
//! over anchor *groups* in the calibrator's window: f̂ is refitted without
//! fold k and applied to fold k, so isotonic over-fitting (which interpolates
//! its own training pairs) cannot make the world model look better than it
//! is. v_r, v_y, c and σ²_ξ are *pooled within-group* (co)variances
//! (Σ SS_g / Σ df_g, weights as reliability weights). The total
//! Var(r − f̂(ŝ)) is reported too.
//!
//! # With branched imagination
//! When the world model imagines only the rest of an episode from the real
//! state s_k after k executed chunks (`imagine_prefix_chunks` in
//! `wmrl-train`), its score estimates V(s_k) = E[r | s_k], and world-model
//! samples are trained on their executed chunks only. For those chunks the
//! sample-level moments are conservative: r = V(s_k) + ε with ε the outcome
//! noise of the later chunks, so a perfect y = V(s_k) is a *less* noisy
//! reward for the prefix than r (Rao–Blackwell), yet it counts as noise the
//! part of r that y cannot see (as binary rewards' outcome noise does, see
//! [`crate::weights`]). The weights are per rollout, so the chunks after
//! the prefix, which only anchors train, are held at u_A too.
//!
//! # Edges
//! - fewer than two anchor groups with two samples: no estimate;
//! - anchor groups without reward variance (v_r below `reward_variance_floor`,
//!   e.g. all-equal binary groups early in training): ρ is not measured and
//!   the weights fall back to counts rather than silencing the world-model
//!   stream on no evidence;
//! - a world model uncorrelated or anti-correlated with r (c ≤ 0), or
//!   constant within groups: the world model is silenced (the paper's rule:
//!   κ = `max_noise_ratio`), so weights stay finite.
//!
//! Every fallback is named in [`crate::StreamWeights::fallback`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::calibrator::OnlineCalibrator;
use crate::isotonic::IsotonicFit;
pub use crate::weights::{
    Fallback, StreamWeights, WeightRule, count_weights, ppi_lambda, stream_weights,
};
use crate::{Error, Result};

/// Denoising settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DenoiseConfig {
    /// Cross-fitting folds over anchor groups (default: 5).
    pub folds: usize,
    /// Below this within-group reward variance v_r on anchors, the world
    /// model's informativeness is not estimated (κ = 0) (default: 1e-4).
    pub reward_variance_floor: f64,
    /// Upper bound on κ = 1/ρ² − 1 (default: 1e4).
    pub max_noise_ratio: f64,
    /// Stream-weight rule of modes `wmrl` and `wmrl-no-debias`:
    /// `mse` (least error to the true gradient) or `paper` (default: `mse`).
    pub weights: WeightRule,
    /// Upper bound on the gain 1/β the `mse` rule applies to the
    /// world-model stream (default: 100).
    pub max_gain: f64,
}

impl Default for DenoiseConfig {
    fn default() -> Self {
        Self {
            folds: 5,
            reward_variance_floor: 1e-4,
            max_noise_ratio: 1e4,
            weights: WeightRule::Mse,
            max_gain: 100.0,
        }
    }
}

impl DenoiseConfig {
    /// Checks the ranges of the settings.
    pub fn validate(&self) -> Result<()> {
        if self.folds < 2 {
            return Err(Error::InvalidConfig {
                field: "denoise.folds",
                value: self.folds.to_string(),
                expected: "at least 2",
            });
        }
        if !(self.reward_variance_floor.is_finite() && self.reward_variance_floor > 0.0) {
            return Err(Error::InvalidConfig {
                field: "denoise.reward_variance_floor",
                value: self.reward_variance_floor.to_string(),
                expected: "a finite number > 0",
            });
        }
        if !(self.max_noise_ratio.is_finite() && self.max_noise_ratio > 0.0) {
            return Err(Error::InvalidConfig {
                field: "denoise.max_noise_ratio",
                value: self.max_noise_ratio.to_string(),
                expected: "a finite number > 0",
            });
        }
        if !(self.max_gain.is_finite() && self.max_gain > 0.0) {
            return Err(Error::InvalidConfig {
                field: "denoise.max_gain",
                value: self.max_gain.to_string(),
                expected: "a finite number > 0",
            });
        }
        Ok(())
    }
}

/// Out-of-sample statistics of anchor pairs (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct NoiseEstimate {
    /// σ²_ξ: pooled within-group variance of r − f̂₋ₖ(ŝ).
    pub residual_variance: f64,
    /// Var(r − f̂₋ₖ(ŝ)) over all pairs (between-group errors included).
    pub total_residual_variance: f64,
    /// Weighted mean of r − f̂₋ₖ(ŝ): the out-of-sample bias, reward minus prediction.
    pub residual_mean: f64,
    /// v_r: pooled within-group variance of real rewards (before the floor).
    pub reward_variance: f64,
    /// v_y: pooled within-group variance of f̂₋ₖ(ŝ).
    pub calibrated_variance: f64,
    /// c: pooled within-group covariance of r and f̂₋ₖ(ŝ).
    pub covariance: f64,
    /// ρ = c / √(v_r v_y), 0 when undefined.
    pub correlation: f64,
    /// Anchor groups used.
    pub groups: usize,
    /// Anchor pairs used.
    pub pairs: usize,
}

/// Weighted running sums of one group.
#[derive(Default, Clone, Copy)]
struct Moments {
    w: f64,
    w2: f64,
    we: f64,
    wr: f64,
    wf: f64,
    n: usize,
}

/// Cross-fits the calibrator's window: out-of-fold predictions (with the
/// calibrator's own `min_pairs` rule; the identity when `debias` is false)
/// and the statistics of the module docs. `None` until two anchor groups
/// with at least two samples are held.
pub fn cross_fit(
    calibrator: &OnlineCalibrator,
    folds: usize,
    debias: bool,
) -> Result<Option<NoiseEstimate>> {
    let _span = tracing::debug_span!("cross_fit", pairs = calibrator.len(), folds).entered();
    // (score, reward, weight, group) with groups numbered in (step, group) order.
    let window: Vec<(f64, f64, f64, (u64, u32))> = calibrator
        .window()
        .filter(|(_, w)| *w > 0.0)
        .map(|(p, w)| (p.score, p.reward, w, (p.step, p.group)))
        .collect();
    let mut keys: BTreeMap<(u64, u32), usize> = window.iter().map(|p| (p.3, 0)).collect();
    for (i, v) in keys.values_mut().enumerate() {
        *v = i;
    }
    let pairs: Vec<(f64, f64, f64, usize)> =
        window.iter().map(|p| (p.0, p.1, p.2, keys[&p.3])).collect();
    let n_groups = keys.len();
    if n_groups < 2 {
        return Ok(None);
    }
    let k = folds.min(n_groups);
    let min_pairs = calibrator.config().min_pairs;

    let mut predicted = vec![0.0; pairs.len()];
    let mut train = Vec::with_capacity(pairs.len());
    for fold in 0..k {
        let fit = if debias {
            train.clear();
            train.extend(
                pairs
                    .iter()
                    .filter(|p| p.3 % k != fold)
                    .map(|p| (p.0, p.1, p.2)),
            );
            if train.len() >= min_pairs {
                Some(IsotonicFit::fit_points(std::mem::take(&mut train))?)
            } else {
                None
            }
        } else {
            None
        };
        for (pred, p) in predicted.iter_mut().zip(&pairs) {
            if p.3 % k == fold {
                *pred = fit.as_ref().map_or(p.0, |f| f.predict(p.0));
            }
        }
    }

    // First pass: per-group weighted means.
    let mut groups = vec![Moments::default(); n_groups];
    let mut all = Moments::default();
    for (p, &f) in pairs.iter().zip(&predicted) {
        let g = &mut groups[p.3];
        let (w, e) = (p.2, p.1 - f);
        for m in [&mut *g, &mut all] {
            m.w += w;
            m.w2 += w * w;
            m.we += w * e;
            m.wr += w * p.1;
            m.wf += w * f;
            m.n += 1;
        }
    }
    // Second pass: within-group sums of squares and cross-products.
    let (mut ss_e, mut ss_r, mut ss_f, mut sp_rf, mut df, mut ss_total) =
        (0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    let mean_e_all = all.we / all.w;
    for (p, &f) in pairs.iter().zip(&predicted) {
        let g = &groups[p.3];
        if g.n < 2 {
            continue;
        }
        let w = p.2;
        let (de, dr, df_) = (p.1 - f - g.we / g.w, p.1 - g.wr / g.w, f - g.wf / g.w);
        ss_e += w * de * de;
        ss_r += w * dr * dr;
        ss_f += w * df_ * df_;
        sp_rf += w * dr * df_;
    }
    for (p, &f) in pairs.iter().zip(&predicted) {
        let d = p.1 - f - mean_e_all;
        ss_total += p.2 * d * d;
    }
    let mut informative = 0;
    for g in groups.iter().filter(|g| g.n >= 2) {
        df += g.w - g.w2 / g.w;
        informative += 1;
    }
    if informative < 2 || df <= 0.0 {
        return Ok(None);
    }
    let df_total = all.w - all.w2 / all.w;
    let (v_r, v_y, c) = (ss_r / df, ss_f / df, sp_rf / df);
    let correlation = if v_r > 0.0 && v_y > 0.0 {
        (c / (v_r * v_y).sqrt()).clamp(-1.0, 1.0)
    } else {
        0.0
    };
    Ok(Some(NoiseEstimate {
        residual_variance: ss_e / df,
        total_residual_variance: if df_total > 0.0 {
            ss_total / df_total
        } else {
            0.0
        },
        residual_mean: mean_e_all,
        reward_variance: v_r,
        calibrated_variance: v_y,
        covariance: c,
        correlation,
        groups: n_groups,
        pairs: pairs.len(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibrator::{AnchorPair, CalibratorConfig};

    #[test]
    fn cross_fit_is_out_of_sample() {
        // Pure-noise rewards: an in-sample isotonic fit would chase them; the
        // cross-fitted residual variance stays near the true noise variance 1/12.
        let config = CalibratorConfig {
            min_pairs: 8,
            ..Default::default()
        };
        let mut c = OnlineCalibrator::new(config).unwrap();
        let mut x = 0.123_f64;
        let mut next = || {
            x = (x * 9301.0 + 0.49297).fract();
            x
        };
        let mut pairs = Vec::new();
        for g in 0..40 {
            for _ in 0..8 {
                pairs.push(AnchorPair {
                    score: next(),
                    reward: next(),
                    weight: 1.0,
                    step: 0,
                    group: g,
                });
            }
        }
        c.update(0, &pairs).unwrap();
        let e = cross_fit(&c, 5, true).unwrap().unwrap();
        assert_eq!((e.groups, e.pairs), (40, 320));
        assert!(e.residual_variance > 1.0 / 12.0 * 0.9, "{e:?}");
        let in_sample = pairs
            .iter()
            .map(|p| (p.reward - c.predict(p.score)).powi(2))
            .sum::<f64>()
            / 320.0;
        assert!(
            in_sample < e.residual_variance,
            "in-sample {in_sample} vs cross-fitted {}",
            e.residual_variance
        );
    }

    #[test]
    fn no_estimate_from_a_single_group() {
        let mut c = OnlineCalibrator::new(CalibratorConfig {
            min_pairs: 1,
            ..Default::default()
        })
        .unwrap();
        let pairs: Vec<_> = (0..8)
            .map(|i| AnchorPair {
                score: i as f64,
                reward: 0.0,
                weight: 1.0,
                step: 0,
                group: 0,
            })
            .collect();
        c.update(0, &pairs).unwrap();
        assert!(cross_fit(&c, 5, true).unwrap().is_none());
    }
}
