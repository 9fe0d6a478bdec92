//! The core's configuration: one serde struct a trainer embeds in its own
//! config file (unknown keys rejected, every default documented).

use serde::{Deserialize, Serialize};

use crate::advantage::AdvantageOptions;
use crate::calibrator::CalibratorConfig;
use crate::denoise::DenoiseConfig;
use crate::mode::Mode;
use crate::sampling::DynamicSampling;
use crate::{Error, Result};

/// Settings of the WMRL core.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CoreConfig {
    /// Training mode (default: `wmrl`).
    pub mode: Mode,
    /// Groups per step, G (default: 64).
    pub groups: usize,
    /// Rollouts per group, n (default: 8).
    pub group_size: usize,
    /// Fraction ρ of groups executed as anchors; at least ⌈ρ·G⌉ (default: 0.1).
    pub anchor_ratio: f64,
    /// Advantage normalisation (default: std-scaled GRPO).
    pub advantage: AdvantageOptions,
    /// Online calibrator (default: min 32 pairs, sliding window of 16 steps).
    pub calibrator: CalibratorConfig,
    /// Inverse-variance denoising (default: 5 folds).
    pub denoise: DenoiseConfig,
    /// Which world-model score an anchor is paired with (default: `replay`).
    pub anchor_scoring: AnchorScoring,
    /// Attempts per anchor episode before the step fails; execution errors
    /// (not task failures) are re-queued (default: 4).
    pub max_attempts: u32,
    /// Seed of anchor selection and episode seeds (default: 0).
    pub seed: u64,
    /// Replace groups whose values are all equal with fresh ones, within a
    /// cap of extra rollouts (default: off; see [`crate::sampling`]).
    pub dynamic_sampling: DynamicSampling,
}

impl Default for CoreConfig {
    fn default() -> Self {
        Self {
            mode: Mode::Wmrl,
            groups: 64,
            group_size: 8,
            anchor_ratio: 0.1,
            advantage: AdvantageOptions::default(),
            calibrator: CalibratorConfig::default(),
            denoise: DenoiseConfig::default(),
            anchor_scoring: AnchorScoring::Replay,
            max_attempts: 4,
            seed: 0,
            dynamic_sampling: DynamicSampling::default(),
        }
    }
}

/// Which world-model score ŝ an anchor episode is paired with, for the
/// calibrator f̂ and the denoiser's noise estimate.
///
/// The pairs should carry the errors of the scores the world-model groups
/// are trained on. Where the world model scores a rollout the policy has
/// already produced (a text adapter: the world model reads the solution),
/// scoring the executed rollout is exactly that. Where the world model
/// also *generates* the rollout (closed-loop imagination in learned
/// dynamics), a policy can learn behaviour the model over-rates only
/// inside its own dreams: scoring the executed rollout cannot see that
/// error, and an imagined twin can.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AnchorScoring {
    /// The world model scores the executed rollout (`WorldModel::score`).
    #[default]
    Replay,
    /// The world model imagines a twin of each anchor episode (same prompt,
    /// same episode seed, same policy, before it observes the real outcome)
    /// and the twin's score is paired with the executed episode's real
    /// reward. The executed rollout is still scored (and observed) as in
    /// `replay`; only the pairing changes. A twin has its anchor's
    /// first-attempt seed, also when an execution error re-queued the
    /// anchor with a fresh one. Mode `ppi` always uses `replay`:
    /// its rectifier needs the score of the rollout whose gradient it
    /// subtracts.
    Twin,
}

impl AnchorScoring {
    /// The name used in config files.
    pub fn name(self) -> &'static str {
        match self {
            Self::Replay => "replay",
            Self::Twin => "twin",
        }
    }
}

impl CoreConfig {
    /// Whether anchors are paired with imagined twins this step: twin
    /// scoring is configured and the mode mixes streams (and is not `ppi`).
    pub fn pairs_twins(&self) -> bool {
        self.anchor_scoring == AnchorScoring::Twin
            && self.mode.mixes_streams()
            && self.mode != Mode::Ppi
    }

    /// Checks every range; the error names the field.
    pub fn validate(&self) -> Result<()> {
        if self.groups == 0 {
            return Err(Error::InvalidConfig {
                field: "groups",
                value: "0".into(),
                expected: "at least 1",
            });
        }
        if self.group_size == 0 {
            return Err(Error::InvalidConfig {
                field: "group_size",
                value: "0".into(),
                expected: "at least 1",
            });
        }
        if self.max_attempts == 0 {
            return Err(Error::InvalidConfig {
                field: "max_attempts",
                value: "0".into(),
                expected: "at least 1",
            });
        }
        crate::schedule::validate_ratio(self.anchor_ratio)?;
        self.advantage.validate()?;
        self.calibrator.validate()?;
        self.dynamic_sampling.validate(self.group_size)?;
        self.denoise.validate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_are_rejected_and_defaults_fill_in() {
        let c: CoreConfig =
            serde_json::from_str(r#"{"mode": "ppi", "calibrator": {"min_pairs": 8}}"#).unwrap();
        assert_eq!(c.mode, Mode::Ppi);
        assert_eq!(c.calibrator.min_pairs, 8);
        assert_eq!(c.groups, 64);
        let err = serde_json::from_str::<CoreConfig>(r#"{"anchor_ratoi": 0.2}"#).unwrap_err();
        assert!(err.to_string().contains("anchor_ratoi"), "{err}");
        let bad = CoreConfig {
            anchor_ratio: 2.0,
            ..Default::default()
        };
        assert!(
            bad.validate()
                .unwrap_err()
                .to_string()
                .contains("anchor_ratio")
        );
    }

    #[test]
    fn the_readme_example_is_the_default() {
        let readme = include_str!("../README.md");
        let start = readme.find("{ \"mode\"").unwrap();
        let end = start + readme[start..].find("```").unwrap();
        let c: CoreConfig = serde_json::from_str(&readme[start..end]).unwrap();
        assert_eq!(c, CoreConfig::default());
        let exp: crate::Forgetting =
            serde_json::from_str(r#"{ "kind": "exponential", "half_life_steps": 8 }"#).unwrap();
        assert_eq!(
            exp,
            crate::Forgetting::Exponential {
                half_life_steps: 8.0
            }
        );
    }
}
