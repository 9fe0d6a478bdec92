//! Inverse-variance denoising: how much to trust each stream's gradient.
//!
//! # Model
//! A stream s ∈ {A (anchors), W (world model)} estimates the policy gradient
//! from its Nₛ samples, ĝₛ = (1/Nₛ) Σᵢ Aᵢ ∇log π(τᵢ), with Aᵢ the
//! group-relative advantage of the stream's reward y. Anchors use the real
//! reward, y = r. World-model samples use y = f̂(ŝ) (ŝ without
//! debiasing). Within a group, write y against r by its best linear fit,
//!
//! ```text
//! y = α r + η,     Cov(r, η) = 0,  Var(η) = s²,
//! ```
//!
//! and let v_r be the within-group variance of r, Φ = E‖∇log π‖². To first
//! order (advantages independent of the score function's magnitude, equal
//! group sizes, constants common to both streams dropped), ĝ_W/α is a
//! gradient estimate with rewards r + η/α, so
//!
//! ```text
//! Var(ĝ_A) ∝ v_r Φ / N_A           Var(ĝ_W / α) ∝ (v_r + s²/α²) Φ / N_W = (1 + κ) v_r Φ / N_W
//! κ = s² / (α² v_r) = 1/ρ² − 1,     ρ = Corr(r, y) within groups.
//! ```
//!
//! The least-variance combination w_A ĝ_A + w_W ĝ_W with w_A + w_W = 1
//! has wₛ ∝ 1/Var:
//!
//! ```text
//! w_A = N_A / (N_A + N_W/(1 + κ)) = N_A / (N_A + ρ² N_W),     w_W = 1 − w_A,
//! ```
//!
//! i.e. a world-model sample is worth ρ² of an anchor sample. The learner
//! multiplies each stream's mean loss by its weight (the core hands
//! per-sample loss weights wₛ/Nₛ). The weights sum to one and the world
//! model's stream is not rescaled by 1/α: its expected gradient is α times
//! the anchors' (std-scaled advantages: ρ times), so the fused direction is
//! right and only its length shrinks, which the learning rate absorbs.
//!
//! In terms of the residual noise σ²_ξ = Var(r − y) (within groups), with
//! v_y = Var(y) and c = Cov(r, y) = (v_r + v_y − σ²_ξ)/2, ρ² = c²/(v_r v_y):
//! - if the world model's error is independent of r (y = r + ξ), κ = σ²_ξ / v_r:
//!   the error adds σ²_ξ to the within-group reward variance;
//! - if y is a calibrated prediction (y = E[r | ŝ], what isotonic debiasing
//!   aims at), its error is *anti*-correlated with r (Cov(y, r − y) = 0) and
//!   κ = σ²_ξ / (v_r − σ²_ξ). Plugging σ²_ξ into the additive formula would
//!   then cap κ at 1 however useless the world model, because a calibrated
//!   but uninformative prediction is nearly constant and σ²_ξ ≈ v_r. The
//!   correlation form covers both cases and is what is computed.
//!
//! # With branched imagination
//! When the world model imagines only the rest of an episode, from the
//! real state s_k after k executed chunks (`imagine_prefix_chunks` in
//! `wmrl-train`), its score estimates V(s_k) = E[r | s_k]. World-model
//! samples are then trained on their executed chunks only. For those
//! chunks the model above is conservative:
//! - r = V(s_k) + ε, where ε is the outcome noise of the later chunks and
//!   does not depend on the prefix's actions;
//! - so a perfect y = V(s_k) is a *less* noisy reward for the prefix than r
//!   (Rao–Blackwell);
//! - yet it counts as noise the part of r that y cannot see, and discounts
//!   each sample by ρ² = Var V / v_r < 1.
//!
//! If y were V + η, with an error η independent of everything, the
//! statistics above would identify the parts. Var V = c, Var η = v_y − c,
//! Var ε = v_r − c, and the prefix gradients' variances would be ∝ v_r/N_A
//! and v_y/N_W.
//!
//! Neither model holds exactly. Calibration shrinks y towards the group
//! mean, and a shrunk y is biased towards no gradient, which v_y alone
//! cannot see. The correlation form is kept because it never trusts the
//! world model beyond its measured agreement with real outcomes.
//!
//! In the demo configuration (N_A = 8, N_W = 56; ρ ≈ 0.69 averaged over
//! 173 steps of six seeds), the world-model stream's weight is:
//! - about 76% from the correlation form;
//! - 87.5% from sample counts;
//! - about 91% from the independent-error form.
//!
//! `wmrl experiment`'s `wmrl-no-denoise` row measures the count-weighted
//! alternative. Over twelve seeds it ended level with the correlation form
//! (52.5 ± 1.3% against 51.3 ± 1.7%, `crates/wmrl-train/README.md`).
//! `wmrl bench gradient` measures the gradients themselves at the demo's SFT
//! policy: over w_W, the fused gradient's second moment is least near 0.70
//! (a third of the anchor stream's alone), the correlation form chose 0.716
//! on average, and count weights have 15% more. The rule finds the
//! least-variance weight; at this world model's ρ the gain over count
//! weights is small.
//!
//! The weights are per rollout, so the chunks after the prefix, which only
//! anchors train, are held at w_A too. Fusing per chunk instead (an
//! anchor's later chunks at the anchor stream's weight alone) ended lower
//! over the same six seeds (46.7 ± 1.2%): eight anchors a step are a noisy
//! gradient for those chunks by themselves.
//!
//! # Estimation
//! Only anchors carry both ŝ and r. The statistics are estimated **out of
//! sample** by K-fold cross-fitting over anchor *groups* in the
//! calibrator's window: f̂ is refitted without fold k and applied to fold k,
//! so isotonic over-fitting (which interpolates its own training pairs)
//! cannot make the world model look better than it is. Errors constant
//! within a group cancel in group-relative advantages, so v_r, v_y, c and
//! σ²_ξ are *pooled within-group* (co)variances (Σ SS_g / Σ df_g, weights
//! as reliability weights). The total Var(r − f̂(ŝ)) is reported too.
//!
//! # Edges
//! - no anchor stream (N_A = 0): w = (0, 1); no world-model stream: w = (1, 0);
//!   neither: (½, ½), an arbitrary split of an empty batch;
//! - no estimate yet (fewer than two anchor groups with two samples): κ = 0,
//!   weights proportional to sample counts;
//! - zero residual (y = r): ρ = 1, κ = 0, the same;
//! - anchor groups without reward variance (v_r below `reward_variance_floor`,
//!   e.g. all-equal binary groups early in training): ρ cannot be measured,
//!   so κ = 0 again rather than silencing the world-model stream on no evidence;
//! - a world model uncorrelated or anti-correlated with r (c ≤ 0), or
//!   constant within groups: κ = `max_noise_ratio`, so weights stay finite.
//!
//! # Prediction-powered gradients (mode `ppi`)
//! ĝ = λ ĝ_W(f̂) + ĝ_A(r) − λ ĝ_A(f̂) is unbiased for every λ when anchors
//! are a uniform random subset and f̂ does not depend on the current
//! anchors, even if the world model's bias is not monotone in its score
//! (Angelopoulos et al., 2023, "Prediction-powered inference"). Its
//! variance ∝ Var(r − λf̂)/N_A + λ² Var(f̂)/N_W is least at
//! λ* = Cov(r, f̂) / ((1 + N_A/N_W) Var(f̂)) ("PPI++", Angelopoulos et al.,
//! 2023), estimated on anchors with the out-of-fold f̂ and clipped to [0, 1].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::calibrator::OnlineCalibrator;
use crate::isotonic::IsotonicFit;
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
    /// Upper bound on κ = σ²_ξ / v_r (default: 1e4).
    pub max_noise_ratio: f64,
}

impl Default for DenoiseConfig {
    fn default() -> Self {
        Self {
            folds: 5,
            reward_variance_floor: 1e-4,
            max_noise_ratio: 1e4,
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

/// Weights the learner multiplies into each stream's mean loss.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StreamWeights {
    /// w_A, for the anchor stream.
    pub anchor: f64,
    /// w_W, for the world-model stream.
    pub world_model: f64,
    /// κ = 1/ρ² − 1 used (0 without an estimate).
    pub noise_ratio: f64,
}

/// Inverse-variance weights for `anchor_samples` and `world_model_samples`
/// (see the module docs); `None` means no noise estimate yet.
pub fn stream_weights(
    anchor_samples: usize,
    world_model_samples: usize,
    estimate: Option<&NoiseEstimate>,
    config: &DenoiseConfig,
) -> StreamWeights {
    let kappa = match estimate {
        None => 0.0,
        Some(e)
            if e.reward_variance.is_nan() || e.reward_variance < config.reward_variance_floor =>
        {
            0.0
        }
        Some(e) if e.covariance <= 0.0 || e.calibrated_variance <= 0.0 => config.max_noise_ratio,
        Some(e) => {
            let k = e.calibrated_variance * e.reward_variance / (e.covariance * e.covariance) - 1.0;
            if k.is_finite() {
                k.clamp(0.0, config.max_noise_ratio)
            } else {
                config.max_noise_ratio
            }
        }
    };
    let (na, nw) = (anchor_samples as f64, world_model_samples as f64);
    let (anchor, world_model) = match (anchor_samples, world_model_samples) {
        (0, 0) => (0.5, 0.5),
        (0, _) => (0.0, 1.0),
        (_, 0) => (1.0, 0.0),
        _ => {
            let a = na / (na + nw / (1.0 + kappa));
            (a, 1.0 - a)
        }
    };
    StreamWeights {
        anchor,
        world_model,
        noise_ratio: kappa,
    }
}

/// Weights proportional to sample counts (mode `wmrl-no-denoise`).
pub fn count_weights(anchor_samples: usize, world_model_samples: usize) -> StreamWeights {
    let mut w = stream_weights(
        anchor_samples,
        world_model_samples,
        None,
        &DenoiseConfig::default(),
    );
    w.noise_ratio = 0.0;
    w
}

/// The power-tuned PPI coefficient λ* ∈ [0, 1] (0 without an estimate or world-model stream).
pub fn ppi_lambda(
    estimate: Option<&NoiseEstimate>,
    anchor_samples: usize,
    world_model_samples: usize,
) -> f64 {
    let Some(e) = estimate else { return 0.0 };
    if world_model_samples == 0 || e.calibrated_variance <= 0.0 {
        return 0.0;
    }
    let ratio = anchor_samples as f64 / world_model_samples as f64;
    let lambda = e.covariance / ((1.0 + ratio) * e.calibrated_variance);
    if lambda.is_finite() {
        lambda.clamp(0.0, 1.0)
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibrator::{AnchorPair, CalibratorConfig};

    /// Statistics of y = r + ξ with ξ independent of r: Var ξ = `residual`, Var r = `reward`.
    fn estimate(residual: f64, reward: f64) -> NoiseEstimate {
        let v_y = reward + residual;
        NoiseEstimate {
            residual_variance: residual,
            total_residual_variance: residual,
            residual_mean: 0.0,
            reward_variance: reward,
            calibrated_variance: v_y,
            covariance: reward,
            correlation: if reward > 0.0 {
                reward / (reward * v_y).sqrt()
            } else {
                0.0
            },
            groups: 4,
            pairs: 32,
        }
    }

    #[test]
    fn weights_at_the_edges() {
        let cfg = DenoiseConfig::default();
        let e = estimate(0.1, 0.1);
        assert_eq!(
            stream_weights(0, 100, Some(&e), &cfg),
            StreamWeights {
                anchor: 0.0,
                world_model: 1.0,
                noise_ratio: 1.0
            }
        );
        assert_eq!(stream_weights(10, 0, Some(&e), &cfg).anchor, 1.0);
        let w = stream_weights(0, 0, None, &cfg);
        assert_eq!(w.anchor + w.world_model, 1.0);
        // No estimate, or a zero residual: proportional to counts.
        assert!((stream_weights(10, 90, None, &cfg).anchor - 0.1).abs() < 1e-15);
        assert!(
            (stream_weights(10, 90, Some(&estimate(0.0, 0.2)), &cfg).anchor - 0.1).abs() < 1e-15
        );
        // Independent noise as large as the signal: κ = σ²/v_r = 1, a world-model sample counts half.
        assert!((stream_weights(10, 90, Some(&e), &cfg).anchor - 10.0 / 55.0).abs() < 1e-12);
        // A calibrated but shrunk prediction: y = E[r|ŝ] with Var y = v_r − σ² and Cov(r, y) = Var y.
        // κ = σ²/(v_r − σ²) = 3 for σ² = 0.075, v_r = 0.1, not the additive 0.75.
        let calibrated = NoiseEstimate {
            calibrated_variance: 0.025,
            covariance: 0.025,
            ..estimate(0.075, 0.1)
        };
        assert!((stream_weights(10, 90, Some(&calibrated), &cfg).noise_ratio - 3.0).abs() < 1e-9);
        // All-equal binary anchor groups: v_r = 0, ρ not measurable, weights ∝ counts.
        let w = stream_weights(10, 90, Some(&estimate(0.05, 0.0)), &cfg);
        assert_eq!(w.noise_ratio, 0.0);
        assert!((w.anchor - 0.1).abs() < 1e-15);
        // An uninformative world model (c = 0): κ capped, weights finite, world model nearly silenced.
        let useless = NoiseEstimate {
            covariance: 0.0,
            ..estimate(0.1, 0.1)
        };
        let w = stream_weights(10, 90, Some(&useless), &cfg);
        assert_eq!(w.noise_ratio, cfg.max_noise_ratio);
        assert!(w.anchor.is_finite() && w.anchor > 0.99 && w.anchor + w.world_model == 1.0);
    }

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

    #[test]
    fn lambda_is_clipped_and_zero_without_world_model() {
        let e = estimate(0.0, 0.2); // y = r: Cov = Var, λ* = 1/(1 + 10/90) = 0.9
        assert!((ppi_lambda(Some(&e), 10, 90) - 0.9).abs() < 1e-12);
        assert_eq!(ppi_lambda(Some(&e), 10, 0), 0.0);
        assert_eq!(ppi_lambda(None, 10, 90), 0.0);
        let neg = NoiseEstimate {
            covariance: -0.1,
            ..e
        };
        assert_eq!(ppi_lambda(Some(&neg), 10, 90), 0.0);
    }
}
