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
//!
//! Training: every preset uses unscaled group-relative advantages
//! (Aᵢ = rᵢ − mean, "Dr. GRPO", Liu et al. 2025). With std-scaled GRPO the
//! per-group standardisation re-inflates the differences a saturating
//! world model compresses, so debiasing changes much less there (see the
//! crate README); `--set core.advantage.scale_by_std=true --set
//! learning_rate=10` runs that variant.

use serde::{Deserialize, Serialize};
use wmrl_core::{AdvantageOptions, CoreConfig};

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
    /// Standard deviation of the per-query noise ξ (default: 0.02).
    pub noise_sd: f64,
}

impl Default for WorldModelSpec {
    fn default() -> Self {
        Self {
            saturation: 2.0,
            overrated_fraction: 0.03,
            overrated_quality: 0.9,
            action_error_sd: 0.0,
            noise_sd: 0.02,
        }
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
        Self {
            execution: 1.0,
            world_model: 0.01,
        }
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
    /// Prompts (tasks) (default: 16).
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
    /// Training steps per run (default: 300).
    pub steps: u64,
    /// Policy learning rate on the softmax logits (default: 30).
    pub learning_rate: f64,
    /// Seeds (repetitions) per mode (default: 5).
    pub seeds: u64,
    /// The core's settings (mode is set per run; default: 64 groups × 8
    /// rollouts, 10% anchors, unscaled group-relative advantages).
    pub core: CoreConfig,
}

impl Default for Scenario {
    fn default() -> Self {
        Self {
            name: "paper".into(),
            description: "a cheap world model: saturating miscalibration, 3% of actions over-rated, noise sd 0.02"
                .into(),
            prompts: 16,
            actions: 100,
            reward: RewardKind::Continuous,
            reward_skew: 3.0,
            world_model: WorldModelSpec::default(),
            execution_failure_rate: 0.0,
            cost: CostModel::default(),
            steps: 300,
            learning_rate: 30.0,
            seeds: 5,
            core: CoreConfig {
                groups: 64,
                group_size: 8,
                advantage: AdvantageOptions { scale_by_std: false, ..AdvantageOptions::default() },
                ..CoreConfig::default()
            },
        }
    }
}

/// Names of the presets, in report order.
pub const PRESETS: [&str; 4] = ["paper", "binary", "debias", "denoise"];

impl Scenario {
    /// A named preset (see the crate README for what each shows):
    /// - `paper`: the default world above;
    /// - `binary`: the same with binary success rewards r ~ Bernoulli(q), as in LIBERO;
    /// - `debias`: an over-confident world model that ranks actions almost
    ///   perfectly (noise sd 0.002) but saturates hard (κ = 3): built to show debiasing;
    /// - `denoise`: a very noisy world model (noise sd 0.5): built to show denoising.
    pub fn preset(name: &str) -> Result<Self> {
        let base = Scenario::default();
        match name {
            "paper" => Ok(base),
            "binary" => Ok(Scenario {
                name: "binary".into(),
                description: "the paper world with binary success rewards r ~ Bernoulli(q)".into(),
                reward: RewardKind::Bernoulli,
                ..base
            }),
            "debias" => Ok(Scenario {
                name: "debias".into(),
                description: "an over-confident world model: ranks well (noise sd 0.002) but saturates hard (κ = 3)"
                    .into(),
                world_model: WorldModelSpec {
                    saturation: 3.0,
                    overrated_fraction: 0.0,
                    noise_sd: 0.002,
                    ..base.world_model
                },
                ..base
            }),
            "denoise" => Ok(Scenario {
                name: "denoise".into(),
                description: "a very noisy world model (noise sd 0.5), no over-rated actions".into(),
                world_model: WorldModelSpec { overrated_fraction: 0.0, noise_sd: 0.5, ..base.world_model },
                ..base
            }),
            other => Err(Error::UnknownPreset { name: other.into(), known: PRESETS.join(", ") }),
        }
    }

    /// Checks every range; the error names the field.
    pub fn validate(&self) -> Result<()> {
        let bad = |field: &'static str, value: String, expected: &'static str| {
            Err(Error::InvalidScenario {
                field,
                value,
                expected,
            })
        };
        if self.prompts == 0 || self.prompts > u32::MAX as usize {
            return bad("prompts", self.prompts.to_string(), "at least 1");
        }
        if self.actions < 2 || self.actions > u32::MAX as usize {
            return bad("actions", self.actions.to_string(), "at least 2");
        }
        if !(self.reward_skew.is_finite() && self.reward_skew > 0.0) {
            return bad(
                "reward_skew",
                self.reward_skew.to_string(),
                "a finite number > 0",
            );
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
            return bad(
                "world_model.overrated_fraction",
                wm.overrated_fraction.to_string(),
                "a number in [0, 0.5]",
            );
        }
        if !wm.overrated_quality.is_finite() {
            return bad(
                "world_model.overrated_quality",
                wm.overrated_quality.to_string(),
                "a finite number",
            );
        }
        if !(0.0..1.0).contains(&self.execution_failure_rate) {
            return bad(
                "execution_failure_rate",
                self.execution_failure_rate.to_string(),
                "a number in [0, 1)",
            );
        }
        if !(self.cost.execution.is_finite() && self.cost.execution >= 0.0) {
            return bad(
                "cost.execution",
                self.cost.execution.to_string(),
                "a finite number ≥ 0",
            );
        }
        if !(self.cost.world_model.is_finite() && self.cost.world_model >= 0.0) {
            return bad(
                "cost.world_model",
                self.cost.world_model.to_string(),
                "a finite number ≥ 0",
            );
        }
        if self.steps == 0 {
            return bad("steps", "0".into(), "at least 1");
        }
        if self.seeds == 0 {
            return bad("seeds", "0".into(), "at least 1");
        }
        if !(self.learning_rate.is_finite() && self.learning_rate > 0.0) {
            return bad(
                "learning_rate",
                self.learning_rate.to_string(),
                "a finite number > 0",
            );
        }
        self.core.validate().map_err(Error::Core)
    }
}

impl Scenario {
    /// Applies `key=value` to the scenario: `key` is a dotted path into its
    /// serialised form (`world_model.noise_sd`, `core.anchor_ratio`), `value`
    /// is JSON (`0.5`, `true`, `"bernoulli"`, `{"kind": …}`) or a bare
    /// string. Unknown keys and ill-typed values are errors naming the key.
    pub fn apply_override(&mut self, assignment: &str) -> Result<()> {
        let bad = |key: &str, message: String| Error::InvalidOverride {
            key: key.to_string(),
            message,
        };
        let (key, raw) = assignment
            .split_once('=')
            .ok_or_else(|| bad(assignment, "expected key=value".into()))?;
        let key = key.trim();
        let value: serde_json::Value = serde_json::from_str(raw.trim())
            .unwrap_or_else(|_| serde_json::Value::String(raw.trim().to_string()));
        let mut tree = serde_json::to_value(&*self).map_err(|e| bad(key, e.to_string()))?;
        let mut node = &mut tree;
        for part in key.split('.') {
            node = node
                .as_object_mut()
                .and_then(|o| o.get_mut(part))
                .ok_or_else(|| bad(key, format!("no such setting `{part}`")))?;
        }
        *node = value;
        let updated: Scenario =
            serde_json::from_value(tree).map_err(|e| bad(key, e.to_string()))?;
        updated.validate()?;
        *self = updated;
        Ok(())
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
        assert!(
            Scenario::preset("nope")
                .unwrap_err()
                .to_string()
                .contains("paper, binary, debias, denoise")
        );
    }

    #[test]
    fn overrides_set_nested_values_and_name_bad_keys() {
        let mut s = Scenario::default();
        s.apply_override("world_model.noise_sd=0.3").unwrap();
        s.apply_override("reward=bernoulli").unwrap();
        s.apply_override("core.mode=\"ppi\"").unwrap();
        assert_eq!(
            (s.world_model.noise_sd, s.reward, s.core.mode),
            (0.3, RewardKind::Bernoulli, wmrl_core::Mode::Ppi)
        );
        let err = s
            .apply_override("world_model.noise=1")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("world_model.noise") && err.contains("no such setting"),
            "{err}"
        );
        assert!(
            s.apply_override("steps=many")
                .unwrap_err()
                .to_string()
                .contains("steps")
        );
        assert!(s.apply_override("steps=0").is_err());
        assert_eq!(
            s.world_model.noise_sd, 0.3,
            "a failed override changes nothing"
        );
    }

    #[test]
    fn unknown_field_is_rejected() {
        let err = serde_json::from_str::<Scenario>(r#"{"world_model": {"noise": 1}}"#).unwrap_err();
        assert!(err.to_string().contains("noise"), "{err}");
    }
}
