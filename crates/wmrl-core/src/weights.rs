//! Stream weights and PPI's λ for the estimator the core actually forms,
//! derived for its mean squared error to the true policy gradient.
//!
//! # The estimator as formed
//! A step has groups g of n rollouts each; group g's prompt is fixed and
//! its rollouts τᵢ are i.i.d. from the current policy. Write ψᵢ = ∇log π(τᵢ),
//! E ψᵢ = 0, Φ = E‖ψ‖². A stream s ∈ {A, W} (anchors, world model) forms
//!
//! ```text
//! ĝₛ = Σ_{i ∈ s} hᵢ Aᵢ(y) ψᵢ,     Σ_{i ∈ s} hᵢ = 1   (Hájek weights, 1/Nₛ when uniform)
//! ```
//!
//! with Aᵢ(y) the group-relative advantage of the stream's reward y: the
//! real reward r on anchors, the calibrated score f̂(ŝ) (or raw ŝ) on
//! world-model samples. The two streams use disjoint groups, so given the
//! policy (and f̂, fitted on anchor pairs only) they are independent:
//! Cov(ĝ_A, ĝ_W) = 0. The learner receives u_A ĝ_A + u_W ĝ_W.
//!
//! **Unscaled advantages**, Aᵢ = yᵢ − ȳ: E[(yᵢ − ȳ) ψᵢ] = (1 − 1/n) E[y ψ],
//! because ψᵢ is independent of yⱼ (j ≠ i) and has mean zero. So
//! E ĝ_A = (1 − 1/n) ∇J = ḡ, the true gradient up to a constant. Within
//! groups write y against r by its least-squares line, y = β r + η with
//! Cov(r, η) = 0, from the pooled within-group moments v_r = Var r,
//! v_y = Var y, c = Cov(r, y) of the anchor window ([`crate::denoise`]):
//! β = c / v_r, Var η = v_y − c²/v_r, ρ² = c² / (v_r v_y). Then
//!
//! ```text
//! E ĝ_W = β ḡ + (1 − 1/n) E[η ψ]          Var ĝ_A ≈ (1 − 1/n) v_r Φ / N_A,   Var ĝ_W ≈ (1 − 1/n) v_y Φ / N_W.
//! ```
//!
//! The world-model stream points along the true gradient but is **shrunk by
//! β**. A calibrated score (y = E[r | ŝ]) has c = v_y, so β = v_y / v_r = ρ²:
//! the less it knows, the shorter its gradient. The term E[η ψ] is a bias
//! only if η has an action-dependent part uncorrelated with r (an
//! over-rated action); per-sample moments cannot tell it from noise, so the
//! rule below treats η as noise and `wmrl bench fusion` measures what that
//! costs.
//!
//! **Std-scaled advantages**, Aᵢ = (yᵢ − ȳ)/σ_y (the default, the VLA's):
//! every group's advantages have unit root mean square, so
//! Var ĝₛ ≈ Φ / Nₛ in both streams, and
//! (y − ȳ)/σ_y ≈ (β σ_r/σ_y)(r − r̄)/σ_r + η/σ_y with β σ_r/σ_y = ρ:
//! E ĝ_W ≈ ρ ḡ, where ḡ = E ĝ_A is the std-scaled GRPO gradient the
//! anchors estimate.
//!
//! # The least-error weights (`weights = "mse"`)
//! Among fusions whose expectation is the anchors', u_A + β u_W = 1 (the
//! learning rate then means what it means in mode `real`), the mean squared
//! error E‖u_A ĝ_A + u_W ĝ_W − ḡ‖² = u_A² Var ĝ_A + u_W² Var ĝ_W is least at
//!
//! ```text
//! u_A = N_A / (N_A + ρ² N_W)                        (both scalings)
//! u_W = (c / v_y) · N_W / (N_A + ρ² N_W)            (unscaled)
//! u_W =      ρ    · N_W / (N_A + ρ² N_W)            (std-scaled)
//! ```
//!
//! i.e. u_W = w_W / β with w_W the paper's weight below: the inverse-variance
//! weight of the world-model gradient *rescaled to the anchors' expectation*,
//! ĝ_W / β. As a share of the total, u_W / (u_A + u_W): unscaled,
//! γ N_W / (N_A + γ N_W) with γ = c / v_y the slope of r on y, which is 1
//! for a calibrated score, so calibrated world-model samples count as much as
//! anchors whatever ρ; std-scaled, ρ N_W / (N_A + ρ N_W). The weights do not
//! sum to one: the fused gradient has the anchor gradient's length.
//!
//! The paper's weight (`weights = "paper"`), w_A = N_A / (N_A + ρ² N_W),
//! w_W = 1 − w_A, is the same inverse-variance split applied to ĝ_W without
//! the 1/β: its expectation is (w_A + β w_W) ḡ and its direction is not the
//! least-error one (it over-weights the anchors).
//!
//! Binary rewards: r = q + ε with outcome noise ε. The sample-level β
//! then underestimates the gradient-level one (Cov(h, q)/Var q, h = E[y | τ]),
//! since Var r includes Var ε; the rule then under-weights the world model,
//! on the safe side.
//!
//! # PPI++ (mode `ppi`)
//! ĝ = ĝ_A(r) − λ ĝ_A(f̂) + λ ĝ_W(f̂): the two f̂ terms have the same
//! expectation when the world-model groups follow the anchors' distribution
//! (same policy and prompts, anchors a random subset) and f̂ does not depend
//! on the current anchors, so ĝ is unbiased for ḡ for every λ. Its variance:
//!
//! ```text
//! unscaled:   [v_r − 2λc + λ² v_y] Φ/N_A + λ² v_y Φ/N_W    ⇒ λ* = c / ((1 + N_A/N_W) v_y)
//! std-scaled: [1 − 2λρ + λ²] Φ/N_A + λ² Φ/N_W              ⇒ λ* = ρ / (1 + N_A/N_W)
//! ```
//!
//! clipped to [0, 1] (the variance is convex in λ, so the clipped λ* is the
//! least on [0, 1] and never worse than λ = 0). The moments are cross-fitted
//! on the anchor window *before* this step's anchors join it, so λ is
//! independent of the anchors it corrects.
//!
//! # Edges
//! Degenerate windows keep finite weights, and [`StreamWeights::fallback`]
//! says which rule applied ([`Fallback`]): no anchors or no world-model
//! samples this step; no estimate yet; anchor reward variance below the
//! floor (ρ not measurable: counts); a world model uncorrelated with r
//! (c ≤ 0) or constant within groups (world model silenced, λ = 0);
//! non-finite moments (counts); a gain 1/β above `max_gain` (capped).

use serde::{Deserialize, Serialize};

use crate::denoise::{DenoiseConfig, NoiseEstimate};

/// Which stream-weight rule `wmrl` and `wmrl-no-debias` use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WeightRule {
    /// Least mean squared error to the true gradient (see the module docs).
    #[default]
    Mse,
    /// The paper's inverse-variance weight w_A = N_A / (N_A + ρ² N_W), summing to one.
    Paper,
}

impl WeightRule {
    /// The name used in config files.
    pub fn name(self) -> &'static str {
        match self {
            Self::Mse => "mse",
            Self::Paper => "paper",
        }
    }
}

/// Why the weights did not come from the estimated moments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fallback {
    /// No anchor samples this step: the world-model stream alone.
    NoAnchors,
    /// No world-model samples this step: the anchor stream alone.
    NoWorldModel,
    /// Neither stream has samples.
    Empty,
    /// No noise estimate yet (too few anchor groups): weights ∝ counts, λ = 0.
    NoEstimate,
    /// Anchor reward variance below `reward_variance_floor`: ρ not measurable,
    /// weights ∝ counts, λ = 0.
    RewardVarianceFloor,
    /// The world model is uncorrelated or anti-correlated with real rewards,
    /// or constant within groups: it gets (almost) no weight, λ = 0.
    Uninformative,
    /// A moment was not finite: weights ∝ counts, λ = 0.
    NonFinite,
    /// The gain 1/β of the `mse` rule exceeded `max_gain` and was capped.
    GainCapped,
}

/// Weights the learner multiplies into each stream's mean loss.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StreamWeights {
    /// u_A, for the anchor stream.
    pub anchor: f64,
    /// u_W, for the world-model stream (in `ppi`: λ).
    pub world_model: f64,
    /// κ = 1/ρ² − 1 used (0 without an estimate).
    pub noise_ratio: f64,
    /// β̂: the world-model stream's expected gradient relative to the
    /// anchors' (c/v_r unscaled, ρ std-scaled; 1 when not estimated).
    #[serde(default = "one")]
    pub world_model_scale: f64,
    /// The fallback rule used, if any.
    #[serde(default)]
    pub fallback: Option<Fallback>,
}

fn one() -> f64 {
    1.0
}

impl StreamWeights {
    /// Fixed weights, no estimate involved.
    pub fn fixed(anchor: f64, world_model: f64) -> Self {
        Self {
            anchor,
            world_model,
            noise_ratio: 0.0,
            world_model_scale: 1.0,
            fallback: None,
        }
    }

    /// The world model's share of the total weight, u_W / (u_A + u_W) (0 when both are 0).
    pub fn world_model_share(&self) -> f64 {
        let total = self.anchor + self.world_model;
        if total > 0.0 {
            self.world_model / total
        } else {
            0.0
        }
    }
}

/// The moments the rules use, or the fallback that applies.
fn moments(
    estimate: Option<&NoiseEstimate>,
    config: &DenoiseConfig,
) -> Result<(f64, f64, f64), Fallback> {
    let e = estimate.ok_or(Fallback::NoEstimate)?;
    let (v_r, v_y, c) = (e.reward_variance, e.calibrated_variance, e.covariance);
    if !(v_r.is_finite() && v_y.is_finite() && c.is_finite()) {
        return Err(Fallback::NonFinite);
    }
    if v_r < config.reward_variance_floor {
        return Err(Fallback::RewardVarianceFloor);
    }
    if c <= 0.0 || v_y <= 0.0 {
        return Err(Fallback::Uninformative);
    }
    Ok((v_r, v_y, c))
}

/// Weights for `anchor_samples` and `world_model_samples` under
/// `config.weights` (see the module docs); `scale_by_std` is the
/// advantages' scaling. `None` means no noise estimate yet.
pub fn stream_weights(
    anchor_samples: usize,
    world_model_samples: usize,
    estimate: Option<&NoiseEstimate>,
    config: &DenoiseConfig,
    scale_by_std: bool,
) -> StreamWeights {
    let (na, nw) = (anchor_samples as f64, world_model_samples as f64);
    let edge = |anchor, world_model, fallback| StreamWeights {
        fallback: Some(fallback),
        ..StreamWeights::fixed(anchor, world_model)
    };
    match (anchor_samples, world_model_samples) {
        (0, 0) => return edge(0.5, 0.5, Fallback::Empty),
        (0, _) => return edge(0.0, 1.0, Fallback::NoAnchors),
        (_, 0) => return edge(1.0, 0.0, Fallback::NoWorldModel),
        _ => {}
    }
    let counts = |fallback| edge(na / (na + nw), nw / (na + nw), fallback);
    let (v_r, v_y, c) = match moments(estimate, config) {
        Ok(m) => m,
        Err(Fallback::Uninformative) => {
            // κ at its cap: the paper's rule keeps a sliver, the MSE rule none.
            let kappa = config.max_noise_ratio;
            let a = na / (na + nw / (1.0 + kappa));
            let world_model = match config.weights {
                WeightRule::Paper => 1.0 - a,
                WeightRule::Mse => 0.0,
            };
            return StreamWeights {
                anchor: if config.weights == WeightRule::Mse {
                    1.0
                } else {
                    a
                },
                world_model,
                noise_ratio: kappa,
                world_model_scale: 0.0,
                fallback: Some(Fallback::Uninformative),
            };
        }
        Err(f) => return counts(f),
    };
    let rho2 = (c * c / (v_r * v_y)).clamp(0.0, 1.0);
    let kappa = if rho2 > 0.0 {
        (1.0 / rho2 - 1.0).min(config.max_noise_ratio)
    } else {
        config.max_noise_ratio
    };
    let rho2 = 1.0 / (1.0 + kappa);
    let anchor = na / (na + rho2 * nw);
    // β: the world-model gradient's expectation relative to the anchors'.
    let mut scale = if scale_by_std { rho2.sqrt() } else { c / v_r };
    let mut fallback = None;
    let world_model = match config.weights {
        WeightRule::Paper => 1.0 - anchor,
        WeightRule::Mse => {
            if scale * config.max_gain < 1.0 {
                scale = 1.0 / config.max_gain;
                fallback = Some(Fallback::GainCapped);
            }
            // u_W = w_W / β, so that u_A + β u_W = 1.
            (1.0 - anchor) / scale
        }
    };
    if !(anchor.is_finite() && world_model.is_finite()) {
        return counts(Fallback::NonFinite);
    }
    StreamWeights {
        anchor,
        world_model,
        noise_ratio: kappa,
        world_model_scale: scale,
        fallback,
    }
}

/// Weights proportional to sample counts (mode `wmrl-no-denoise`).
pub fn count_weights(anchor_samples: usize, world_model_samples: usize) -> StreamWeights {
    let w = stream_weights(
        anchor_samples,
        world_model_samples,
        None,
        &DenoiseConfig::default(),
        false,
    );
    StreamWeights {
        fallback: w.fallback.filter(|f| *f != Fallback::NoEstimate),
        ..w
    }
}

/// The power-tuned PPI coefficient λ* ∈ [0, 1] for the advantages'
/// scaling, and the fallback used when it is 0 for lack of evidence.
pub fn ppi_lambda(
    estimate: Option<&NoiseEstimate>,
    anchor_samples: usize,
    world_model_samples: usize,
    config: &DenoiseConfig,
    scale_by_std: bool,
) -> (f64, Option<Fallback>) {
    if world_model_samples == 0 {
        return (0.0, Some(Fallback::NoWorldModel));
    }
    if anchor_samples == 0 {
        return (0.0, Some(Fallback::NoAnchors));
    }
    let (v_r, v_y, c) = match moments(estimate, config) {
        Ok(m) => m,
        Err(f) => return (0.0, Some(f)),
    };
    let ratio = anchor_samples as f64 / world_model_samples as f64;
    let lambda = if scale_by_std {
        (c / (v_r * v_y).sqrt()).min(1.0) / (1.0 + ratio)
    } else {
        c / ((1.0 + ratio) * v_y)
    };
    if lambda.is_finite() {
        (lambda.clamp(0.0, 1.0), None)
    } else {
        (0.0, Some(Fallback::NonFinite))
    }
}

#[cfg(test)]
mod tests;
