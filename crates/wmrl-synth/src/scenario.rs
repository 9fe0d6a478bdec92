//! Scenarios: the synthetic world, its world model, costs and training
//! budget, as one serde config, with the presets the benchmark reports.
//!
//! True rewards: prompt x has `actions` discrete actions with quality
//! q(x, a) = u^γ, u ~ U(0, 1) (γ = `reward_skew`: most actions poor, a few
//! good). A rollout is one sampled action; its real reward is q
//! (continuous) or a Bernoulli(q) success.
//!
//! The world model scores an action with
//!
//! ```text
//! ŝ = m(q̃ + e(x, a)) + ξ,      m(u) = tanh(κ u) / tanh(κ)   (κ = saturation; κ → 0: m(u) = u)
//! ```
//!
//! where q̃ = q except for an over-rated subset of poor actions, for which
//! q̃ = `overrated_quality` (the world model believes a bad action is good:
//! the policy can exploit it); e is a fixed per-action error (a bias that is
//! not a function of the score), and ξ ~ N(0, `noise_sd`²) is fresh on every
//! query. m is monotone and saturating: high-quality actions get nearly
//! equal scores, so groups of good rollouts lose their score variance.

use serde::{Deserialize, Serialize};
use wmrl_core::CoreConfig;

use crate::{Error, Result};

/// How real rewards are drawn from an action's quality q.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RewardKind {
    /// r = q.
    Continuous,
    /// r ~ Bernoulli(q): success or failure.
    Bernoulli,
}

/// The synthetic world model's errors (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorldModelSpec {
    /// κ of the saturating miscalibration m; 0 means none (default: 2.0).
    pub saturation: f64,
    /// Fraction of all actions that are poor (q below the prompt's median)
    /// yet over-rated (default: 0.03).
    pub overrated_fraction: f64,
    /// Quality the world model believes over-rated actions have (default: 0.9).
    pub overrated_quality: f64,
    /// Standard deviation of the fixed per-action error e (default: 0.0).
    pub action_error_sd: f64,
    /// Standard deviation of the per-query noise ξ (default: 0.05).
    pub noise_sd: f64,
}

impl Default for WorldModelSpec {
    fn default() -> Self {
        Self { saturation: 2.0, overrated_fraction: 0.03, overrated_quality: 0.9, action_error_sd: 0.0, noise_sd: 0.05 }
    }
}

/// What rollouts cost.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CostModel {
    /// Cost of one real execution (default: 1).
    pub execution: f64,
    /// Cost of one world-model score or imagined rollout (default: 0.01).
    pub world_model: f64,
}

impl Default for CostModel {
    fn default() -> Self {
        Self { execution: 1.0, world_model: 0.01 }
    }
}

/// A complete synthetic experiment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Scenario {
    /// Short name (default: "paper").
    pub name: String,
    /// What the scenario is built to show.
    pub description: String,
    /// Prompts (tasks) (default: 8).
    pub prompts: usize,
    /// Discrete actions per prompt (default: 100).
    pub actions: usize,
    /// Real reward kind (default: continuous).
    pub reward: RewardKind,
    /// γ in q = u^γ (default: 3).
    pub reward_skew: f64,
    /// The world model's errors.
    pub world_model: WorldModelSpec,
    /// Probability that a real execution fails for infrastructure reasons and
    /// is re-queued (default: 0).
    pub execution_failure_rate: f64,
    /// Costs.
    pub cost: CostModel,
    /// Training steps per run (default: 150).
    pub steps: u64,
    /// Policy learning rate on the softmax logits (default: 40).
    pub learning_rate: f64,
    /// Seeds (repetitions) per mode (default: 5).
    pub seeds: u64,
    /// The core's settings (mode is set per run; default: 32 groups × 8 rollouts, 10% anchors).
    pub core: CoreConfig,
}

impl Default for Scenario {
    fn default() -> Self {
        Self {
            name: "paper".into(),
            description: "a cheap, biased and noisy world model; anchors are 10% of groups".into(),
            prompts: 8,
            actions: 100,
            reward: RewardKind::Continuous,
            reward_skew: 3.0,
            world_model: WorldModelSpec::default(),
            execution_failure_rate: 0.0,
            cost: CostModel::default(),
            steps: 150,
            learning_rate: 40.0,
            seeds: 5,
            core: CoreConfig { groups: 32, group_size: 8, ..CoreConfig::default() },
        }
    }
}

/// Names of the presets, in report order.
pub const PRESETS: [&str; 3] = ["paper", "debias", "denoise"];

impl Scenario {
    /// A named preset: `paper` (the default world), `debias` (strong
    /// over-rating of bad actions: built to show debiasing), `denoise` (a very
    /// noisy world model: built to show denoising).
    pub fn preset(name: &str) -> Result<Self> {
        let base = Scenario::default();
        match name {
            "paper" => Ok(base),
            "debias" => Ok(Scenario {
                name: "debias".into(),
                description: "the world model over-rates 10% of actions, all of them poor".into(),
                world_model: WorldModelSpec { overrated_fraction: 0.10, overrated_quality: 1.0, ..base.world_model },
                ..base
            }),
            "denoise" => Ok(Scenario {
                name: "denoise".into(),
                description: "a very noisy world model (noise sd 0.5) with no over-rated actions".into(),
                world_model: WorldModelSpec { overrated_fraction: 0.0, noise_sd: 0.5, ..base.world_model },
                ..base
            }),
            other => Err(Error::UnknownPreset { name: other.into(), known: PRESETS.join(", ") }),
        }
    }

    /// Checks every range; the error names the field.
    pub fn validate(&self) -> Result<()> {
        let bad = |field: &'static str, value: String, expected: &'static str| {
            Err(Error::InvalidScenario { field, value, expected })
        };
        if self.prompts == 0 || self.prompts > u32::MAX as usize {
            return bad("prompts", self.prompts.to_string(), "at least 1");
        }
        if self.actions < 2 || self.actions > u32::MAX as usize {
            return bad("actions", self.actions.to_string(), "at least 2");
        }
        if !(self.reward_skew.is_finite() && self.reward_skew > 0.0) {
            return bad("reward_skew", self.reward_skew.to_string(), "a finite number > 0");
        }
        let wm = &self.world_model;
        for (field, v) in [
            ("world_model.saturation", wm.saturation),
            ("world_model.action_error_sd", wm.action_error_sd),
            ("world_model.noise_sd", wm.noise_sd),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return bad(field, v.to_string(), "a finite number ≥ 0");
            }
        }
        if !(0.0..=0.5).contains(&wm.overrated_fraction) {
            return bad("world_model.overrated_fraction", wm.overrated_fraction.to_string(), "a number in [0, 0.5]");
        }
        if !wm.overrated_quality.is_finite() {
            return bad("world_model.overrated_quality", wm.overrated_quality.to_string(), "a finite number");
        }
        if !(0.0..1.0).contains(&self.execution_failure_rate) {
            return bad("execution_failure_rate", self.execution_failure_rate.to_string(), "a number in [0, 1)");
        }
        if !(self.cost.execution.is_finite() && self.cost.execution >= 0.0) {
            return bad("cost.execution", self.cost.execution.to_string(), "a finite number ≥ 0");
        }
        if !(self.cost.world_model.is_finite() && self.cost.world_model >= 0.0) {
            return bad("cost.world_model", self.cost.world_model.to_string(), "a finite number ≥ 0");
        }
        if self.steps == 0 {
            return bad("steps", "0".into(), "at least 1");
        }
        if self.seeds == 0 {
            return bad("seeds", "0".into(), "at least 1");
        }
        if !(self.learning_rate.is_finite() && self.learning_rate > 0.0) {
            return bad("learning_rate", self.learning_rate.to_string(), "a finite number > 0");
        }
        self.core.validate().map_err(Error::Core)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_valid_and_round_trip() {
        for name in PRESETS {
            let s = Scenario::preset(name).unwrap();
            s.validate().unwrap();
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(serde_json::from_str::<Scenario>(&json).unwrap(), s);
        }
        assert!(Scenario::preset("nope").unwrap_err().to_string().contains("paper, debias, denoise"));
    }

    #[test]
    fn unknown_field_is_rejected() {
        let err = serde_json::from_str::<Scenario>(r#"{"world_model": {"noise": 1}}"#).unwrap_err();
        assert!(err.to_string().contains("noise"), "{err}");
    }
}
