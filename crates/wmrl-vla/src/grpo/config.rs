//! The GRPO learner's settings: optimiser, clipping, ratio kind, loss
//! coefficients, each validated with the field named.

use serde::{Deserialize, Serialize};

use crate::Result;

/// Settings of the GRPO learner (every field has a default).
///
/// The defaults follow the recipe that climbs for VLA GRPO (SimpleVLA-RL,
/// RLinf: `docs/design/vla-rl-recipes.md`): no KL penalty, no entropy
/// bonus, decoupled clipping 0.2 / 0.28 ("clip-higher"), every loss term a
/// per-token mean over the executed actions' tokens; here with four
/// optimiser steps per batch at lr 1e-4 on GSPO's length-normalised ratio.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GrpoConfig {
    /// AdamW learning rate (default 1e-4); with `lr_final` set, the rate
    /// of the first learner update.
    pub lr: f64,
    /// When set, the learning rate follows a cosine from `lr` down to this
    /// value over `lr_decay_updates` learner updates (one per iteration),
    /// then stays there: late updates, taken where gradient noise dominates
    /// the signal, move the policy less (default unset: constant `lr`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lr_final: Option<f64>,
    /// Learner updates over which the rate decays to `lr_final` (required,
    /// ≥ 1, when `lr_final` is set; usually the run's `iterations`).
    #[serde(skip_serializing_if = "is_zero")]
    pub lr_decay_updates: u64,
    /// AdamW weight decay (default 0).
    pub weight_decay: f64,
    /// Lower clip range: ratios below 1 − `clip_low` are clipped (default 0.2).
    pub clip_low: f64,
    /// Upper clip range: ratios above 1 + `clip_high` are clipped (default
    /// 0.28: a wider upper bound lets unlikely, rewarded tokens grow, DAPO's
    /// clip-higher).
    pub clip_high: f64,
    /// Symmetric clip range ε: when set, both `clip_low` and `clip_high`
    /// are ε (runs configured before the two were decoupled).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clip_eps: Option<f64>,
    /// Entropy bonus β_H, on the per-token mean entropy (default 0).
    pub entropy_coef: f64,
    /// KL penalty β_KL to the frozen initial (SFT) policy, on the per-token
    /// mean KL; 0 disables it (default 0).
    pub kl_coef: f64,
    /// Gradient-norm clip (default 1).
    pub grad_clip: f64,
    /// Chunks per forward pass (gradients are accumulated; default 1024).
    pub minibatch_chunks: usize,
    /// Optimiser steps per batch (each over the whole batch, ratios against
    /// the sampling policy, clipped; default 4).
    pub epochs: usize,
    /// Which ratio is clipped: `token-mean` (default), `chunk` or `token`
    /// (see [`RatioKind`]).
    pub ratio: RatioKind,
    /// Perception that adapts: give the policy a trainable adapter of this
    /// width on its frozen observation latent ([`crate::model::adapter`]),
    /// trained by both streams while the world model's latent space stays
    /// the SFT encoder's (default 0: none, the head reads the latent as is).
    #[serde(skip_serializing_if = "is_zero")]
    pub latent_adapter: i64,
}

fn is_zero<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

/// The probability ratio the clipped surrogate uses for a chunk whose
/// executed actions carry M tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RatioKind {
    /// ρ = π(tokens) / π_old(tokens), the product of the M token ratios;
    /// the surrogate is divided by M so that its gradient has a per-token
    /// scale.
    Chunk,
    /// ρ^(1/M): the geometric mean of the token ratios (GSPO's sequence
    /// ratio, Zheng et al. 2025).
    #[default]
    TokenMean,
    /// One ratio per token, each clipped on its own, the surrogate the mean
    /// over the M tokens (PPO per token, as SimpleVLA-RL and RLinf do).
    Token,
}

impl Default for GrpoConfig {
    fn default() -> Self {
        Self {
            lr: 1e-4,
            lr_final: None,
            lr_decay_updates: 0,
            weight_decay: 0.0,
            clip_low: 0.2,
            clip_high: 0.28,
            clip_eps: None,
            entropy_coef: 0.0,
            kl_coef: 0.0,
            grad_clip: 1.0,
            minibatch_chunks: 1024,
            epochs: 4,
            ratio: RatioKind::TokenMean,
            latent_adapter: 0,
        }
    }
}

impl GrpoConfig {
    /// The clip range (1 − low, 1 + high) as (low, high).
    pub fn clip_bounds(&self) -> (f64, f64) {
        match self.clip_eps {
            Some(eps) => (eps, eps),
            None => (self.clip_low, self.clip_high),
        }
    }

    /// The learning rate of learner update `update` (0-based): `lr`, or the
    /// cosine schedule down to `lr_final` when one is set.
    pub fn lr_at(&self, update: u64) -> f64 {
        match self.lr_final {
            Some(end) if self.lr_decay_updates > 0 => {
                let t = (update as f64 / self.lr_decay_updates as f64).min(1.0);
                end + (self.lr - end) * 0.5 * (1.0 + (std::f64::consts::PI * t).cos())
            }
            _ => self.lr,
        }
    }

    /// Checks every value.
    pub fn validate(&self) -> Result<()> {
        let bad = |field: &str, expected: &str, found: f64| {
            Err(wmrl_config::Error::invalid(
                format!("GRPO field `{field}`"),
                format!("expected {expected}, found {found}"),
            )
            .into())
        };
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return bad("lr", "a finite number > 0", self.lr);
        }
        if let Some(end) = self.lr_final {
            if !(end.is_finite() && end > 0.0 && end <= self.lr) {
                return bad("lr_final", "a finite number in (0, lr]", end);
            }
            if self.lr_decay_updates == 0 {
                return bad(
                    "lr_decay_updates",
                    "≥ 1 learner updates when `lr_final` is set",
                    0.0,
                );
            }
        }
        for (field, v) in [
            ("clip_low", self.clip_low),
            ("clip_high", self.clip_high),
            ("clip_eps", self.clip_eps.unwrap_or(0.2)),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return bad(field, "a finite number > 0", v);
            }
        }
        if self.clip_bounds().0 >= 1.0 {
            return bad(
                if self.clip_eps.is_some() {
                    "clip_eps"
                } else {
                    "clip_low"
                },
                "a number < 1 (ratios are positive)",
                self.clip_bounds().0,
            );
        }
        for (field, v) in [
            ("weight_decay", self.weight_decay),
            ("entropy_coef", self.entropy_coef),
            ("kl_coef", self.kl_coef),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return bad(field, "a finite number ≥ 0", v);
            }
        }
        if !(self.grad_clip.is_finite() && self.grad_clip > 0.0) {
            return bad("grad_clip", "a finite number > 0", self.grad_clip);
        }
        if self.epochs == 0 {
            return bad("epochs", "≥ 1", 0.0);
        }
        if self.minibatch_chunks == 0 {
            return bad("minibatch_chunks", "≥ 1", 0.0);
        }
        if self.latent_adapter < 0 {
            return bad(
                "latent_adapter",
                "a width ≥ 0 (0: no adapter)",
                self.latent_adapter as f64,
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_bounds_are_decoupled_unless_eps_is_set() {
        let config = GrpoConfig::default();
        assert_eq!(config.clip_bounds(), (0.2, 0.28));
        let legacy: GrpoConfig = serde_json::from_str(r#"{"clip_eps": 0.1}"#).unwrap();
        assert_eq!(legacy.clip_bounds(), (0.1, 0.1));
        let text = serde_json::to_string(&config).unwrap();
        assert!(!text.contains("clip_eps"), "{text}");
        let err = GrpoConfig {
            clip_low: 1.0,
            ..Default::default()
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert!(err.contains("clip_low"), "{err}");
        let err = GrpoConfig {
            clip_high: f64::NAN,
            ..Default::default()
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert!(err.contains("clip_high"), "{err}");
        let config: GrpoConfig = serde_json::from_str(r#"{"ratio": "token"}"#).unwrap();
        assert_eq!(config.ratio, RatioKind::Token);
        assert!(serde_json::from_str::<GrpoConfig>(r#"{"ratio": "tokens"}"#).is_err());
    }

    #[test]
    fn the_cosine_schedule_runs_from_lr_to_lr_final_and_stays() {
        let constant = GrpoConfig::default();
        assert_eq!(constant.lr_at(0), constant.lr);
        assert_eq!(constant.lr_at(1000), constant.lr);
        assert!(
            !serde_json::to_string(&constant)
                .unwrap()
                .contains("lr_final")
        );
        let cosine = GrpoConfig {
            lr: 1e-4,
            lr_final: Some(1e-5),
            lr_decay_updates: 10,
            ..Default::default()
        };
        cosine.validate().unwrap();
        assert!((cosine.lr_at(0) - 1e-4).abs() < 1e-12);
        assert!((cosine.lr_at(5) - 5.5e-5).abs() < 1e-12);
        assert!((cosine.lr_at(10) - 1e-5).abs() < 1e-12);
        assert!((cosine.lr_at(50) - 1e-5).abs() < 1e-12);
        assert!((1..10).all(|u| cosine.lr_at(u) < cosine.lr_at(u - 1)));
        let err = GrpoConfig {
            lr_decay_updates: 0,
            ..cosine.clone()
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert!(err.contains("lr_decay_updates"), "{err}");
        let err = GrpoConfig {
            lr_final: Some(1e-3),
            ..cosine
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert!(err.contains("lr_final"), "{err}");
    }
}
