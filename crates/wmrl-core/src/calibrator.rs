//! The online calibrator f̂: world-model score → expected real reward.
//!
//! Anchor rollouts carry both a world-model score ŝ and a real reward r.
//! Every step the calibrator appends that step's anchor pairs, forgets old
//! ones, and refits a weighted isotonic regression ([`crate::isotonic`]) on
//! what remains. Forgetting matters because the policy drifts, and with it
//! the distribution of rollouts behind each score. Two schemes:
//!
//! - sliding window: pairs from the last `steps` steps, weight 1;
//! - exponential: a pair from step t has weight w·2^(−(now − t)/half_life);
//!   pairs whose weight fell below 2⁻¹⁶ of their original are dropped.
//!
//! Either way at most `max_pairs` pairs are kept (oldest dropped first).
//! While fewer than `min_pairs` pairs are held, f̂ is the identity: an
//! isotonic map of a handful of points would be a step function that erases
//! the world model's ranking. Each such period is logged once: at `info`
//! while the calibrator warms up at the start of a run (expected), as a
//! warning when a fitted map is lost because old pairs were forgotten
//! faster than new ones arrived (a window too short for the anchor rate).
//!
//! The whole state (configuration, pairs, current step, fitted blocks)
//! serialises with serde; with serde_json's `float_roundtrip` feature (set
//! in the workspace) a checkpoint round trip is bit-exact, and restoring
//! validates the state instead of trusting the file.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::isotonic::{IsotonicFit, validate_pair};
use crate::{Error, Result};

/// How old anchor pairs are forgotten.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind", deny_unknown_fields)]
pub enum Forgetting {
    /// Keep the pairs of the last `steps` steps (the current one included), all at full weight.
    SlidingWindow {
        /// Window length in steps.
        steps: u64,
    },
    /// Halve a pair's weight every `half_life_steps` steps.
    Exponential {
        /// Half-life in steps.
        half_life_steps: f64,
    },
}

impl Default for Forgetting {
    fn default() -> Self {
        Forgetting::SlidingWindow { steps: 16 }
    }
}

/// Calibrator settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CalibratorConfig {
    /// Below this many pairs f̂ is the identity (default: 32).
    pub min_pairs: usize,
    /// Forgetting scheme (default: sliding window of 16 steps).
    pub forgetting: Forgetting,
    /// Hard cap on the pairs kept, oldest dropped first (default: 200 000).
    pub max_pairs: usize,
}

impl Default for CalibratorConfig {
    fn default() -> Self {
        Self {
            min_pairs: 32,
            forgetting: Forgetting::default(),
            max_pairs: 200_000,
        }
    }
}

/// Exponential forgetting drops pairs whose decay factor is below this (2⁻¹⁶).
const MIN_DECAY: f64 = 1.0 / 65536.0;

impl CalibratorConfig {
    /// Checks the ranges of the settings.
    pub fn validate(&self) -> Result<()> {
        let bad = |field, value: String, expected| {
            Err(Error::InvalidConfig {
                field,
                value,
                expected,
            })
        };
        if self.min_pairs == 0 {
            return bad("calibrator.min_pairs", "0".into(), "at least 1");
        }
        if self.max_pairs < self.min_pairs {
            return bad(
                "calibrator.max_pairs",
                self.max_pairs.to_string(),
                "at least calibrator.min_pairs",
            );
        }
        match self.forgetting {
            Forgetting::SlidingWindow { steps: 0 } => {
                bad("calibrator.forgetting.steps", "0".into(), "at least 1")
            }
            Forgetting::Exponential { half_life_steps: h } if !(h.is_finite() && h > 0.0) => bad(
                "calibrator.forgetting.half_life_steps",
                h.to_string(),
                "a finite number > 0",
            ),
            _ => Ok(()),
        }
    }

    /// Weight factor of a pair recorded at `pair_step` seen from `now`; `None` once forgotten.
    pub fn decay(&self, pair_step: u64, now: u64) -> Option<f64> {
        let age = now.saturating_sub(pair_step);
        match self.forgetting {
            Forgetting::SlidingWindow { steps } => (age < steps).then_some(1.0),
            Forgetting::Exponential { half_life_steps } => {
                let f = (-(age as f64) / half_life_steps).exp2();
                (f >= MIN_DECAY).then_some(f)
            }
        }
    }
}

/// One anchor rollout: its world-model score, real reward and provenance.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnchorPair {
    /// World-model score ŝ.
    pub score: f64,
    /// Real reward r.
    pub reward: f64,
    /// Base weight before forgetting (normally 1, or 1/π for non-uniform anchor selection).
    pub weight: f64,
    /// Training step it was executed in.
    pub step: u64,
    /// Group index within that step (cross-fitting keeps a group's rollouts together).
    pub group: u32,
}

/// Serialised form of [`OnlineCalibrator`], validated on restore.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CalibratorState {
    config: CalibratorConfig,
    step: u64,
    pairs: VecDeque<AnchorPair>,
    fit: Option<IsotonicFit>,
}

/// The online isotonic calibrator (see the module docs). Equality compares
/// the saved state (configuration, step, pairs, fit), not the log flag.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(try_from = "CalibratorState", into = "CalibratorState")]
pub struct OnlineCalibrator {
    config: CalibratorConfig,
    step: u64,
    pairs: VecDeque<AnchorPair>,
    fit: Option<IsotonicFit>,
    identity_logged: bool,
}

impl PartialEq for OnlineCalibrator {
    fn eq(&self, other: &Self) -> bool {
        self.config == other.config
            && self.step == other.step
            && self.pairs == other.pairs
            && self.fit == other.fit
    }
}

impl TryFrom<CalibratorState> for OnlineCalibrator {
    type Error = Error;

    fn try_from(s: CalibratorState) -> Result<Self> {
        s.config.validate()?;
        for (i, p) in s.pairs.iter().enumerate() {
            validate_pair(i, p.score, p.reward, p.weight).map_err(|e| Error::InvalidState {
                message: e.to_string(),
            })?;
            if p.step > s.step {
                return Err(Error::InvalidState {
                    message: format!("pair {i} is from step {} after {}", p.step, s.step),
                });
            }
        }
        let fit = match s.fit {
            Some(fit) => Some(IsotonicFit::from_blocks(fit.blocks().to_vec())?),
            None => None,
        };
        Ok(Self {
            config: s.config,
            step: s.step,
            pairs: s.pairs,
            fit,
            identity_logged: false,
        })
    }
}

impl From<OnlineCalibrator> for CalibratorState {
    fn from(c: OnlineCalibrator) -> Self {
        Self {
            config: c.config,
            step: c.step,
            pairs: c.pairs,
            fit: c.fit,
        }
    }
}

impl OnlineCalibrator {
    /// An empty calibrator (identity until `min_pairs` pairs arrive).
    pub fn new(config: CalibratorConfig) -> Result<Self> {
        config.validate()?;
        Ok(Self {
            config,
            step: 0,
            pairs: VecDeque::new(),
            fit: None,
            identity_logged: false,
        })
    }

    /// The settings.
    pub fn config(&self) -> &CalibratorConfig {
        &self.config
    }

    /// The step of the last update.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// Adds the anchor pairs of `step` (their `step` field is set to it),
    /// forgets old pairs and refits. Invalid pairs are rejected before
    /// anything changes.
    pub fn update(&mut self, step: u64, pairs: &[AnchorPair]) -> Result<()> {
        for (i, p) in pairs.iter().enumerate() {
            validate_pair(i, p.score, p.reward, p.weight)?;
        }
        self.step = self.step.max(step);
        self.pairs
            .extend(pairs.iter().map(|p| AnchorPair { step, ..*p }));
        let (config, now) = (self.config, self.step);
        self.pairs.retain(|p| config.decay(p.step, now).is_some());
        while self.pairs.len() > self.config.max_pairs {
            self.pairs.pop_front();
        }
        self.refit()
    }

    fn refit(&mut self) -> Result<()> {
        let _span = tracing::debug_span!("calibrator_refit", pairs = self.pairs.len()).entered();
        let points = self.weighted_points();
        if points.len() < self.config.min_pairs {
            if !self.identity_logged {
                if self.fit.is_some() {
                    tracing::warn!(
                        pairs = points.len(),
                        min_pairs = self.config.min_pairs,
                        "anchor pairs fell below calibrator.min_pairs as old ones were forgotten: \
                         world-model scores are used uncalibrated (identity map) until enough arrive"
                    );
                } else {
                    tracing::info!(
                        pairs = points.len(),
                        min_pairs = self.config.min_pairs,
                        "calibrator warming up: world-model scores are used uncalibrated (identity map) \
                         until calibrator.min_pairs anchor pairs have arrived"
                    );
                }
                self.identity_logged = true;
            }
            self.fit = None;
            return Ok(());
        }
        self.identity_logged = false;
        self.fit = Some(IsotonicFit::fit_points(points)?);
        Ok(())
    }

    /// The held pairs with positive effective weight, as (score, reward, weight).
    fn weighted_points(&self) -> Vec<(f64, f64, f64)> {
        self.window()
            .filter(|(_, w)| *w > 0.0)
            .map(|(p, w)| (p.score, p.reward, w))
            .collect()
    }

    /// The held pairs with their effective weight (base weight × forgetting).
    pub fn window(&self) -> impl Iterator<Item = (&AnchorPair, f64)> + '_ {
        self.pairs.iter().filter_map(|p| {
            self.config
                .decay(p.step, self.step)
                .map(|d| (p, p.weight * d))
        })
    }

    /// Number of pairs held.
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    /// Whether no pair is held.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// The fitted map, or `None` while f̂ is the identity.
    pub fn fit(&self) -> Option<&IsotonicFit> {
        self.fit.as_ref()
    }

    /// Whether f̂ is currently the identity (too few pairs).
    pub fn is_identity(&self) -> bool {
        self.fit.is_none()
    }

    /// f̂(ŝ).
    pub fn predict(&self, score: f64) -> f64 {
        match &self.fit {
            Some(fit) => fit.predict(score),
            None => score,
        }
    }

    /// Number of blocks of the current map (0 for the identity).
    pub fn blocks(&self) -> usize {
        self.fit.as_ref().map_or(0, |f| f.blocks().len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(score: f64, reward: f64, group: u32) -> AnchorPair {
        AnchorPair {
            score,
            reward,
            weight: 1.0,
            step: 0,
            group,
        }
    }

    #[test]
    fn identity_until_min_pairs_then_fitted() {
        let mut c = OnlineCalibrator::new(CalibratorConfig {
            min_pairs: 4,
            ..Default::default()
        })
        .unwrap();
        c.update(0, &[pair(0.2, 0.0, 0), pair(0.8, 1.0, 0)])
            .unwrap();
        assert!(c.is_identity());
        assert_eq!(c.predict(0.3), 0.3);
        c.update(1, &[pair(0.3, 0.0, 0), pair(0.9, 1.0, 0)])
            .unwrap();
        assert!(!c.is_identity());
        assert_eq!(c.predict(0.25), 0.0);
        assert_eq!(c.predict(0.95), 1.0);
    }

    #[test]
    fn sliding_window_forgets_old_steps() {
        let config = CalibratorConfig {
            min_pairs: 1,
            forgetting: Forgetting::SlidingWindow { steps: 2 },
            ..Default::default()
        };
        let mut c = OnlineCalibrator::new(config).unwrap();
        c.update(0, &[pair(0.5, 0.0, 0)]).unwrap();
        c.update(1, &[pair(0.5, 1.0, 0)]).unwrap();
        assert_eq!(c.predict(0.5), 0.5);
        c.update(2, &[pair(0.5, 1.0, 0)]).unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(c.predict(0.5), 1.0);
    }

    #[test]
    fn exponential_forgetting_weights_recent_pairs_more() {
        let config = CalibratorConfig {
            min_pairs: 1,
            forgetting: Forgetting::Exponential {
                half_life_steps: 1.0,
            },
            ..Default::default()
        };
        let mut c = OnlineCalibrator::new(config).unwrap();
        c.update(0, &[pair(0.5, 0.0, 0)]).unwrap();
        c.update(1, &[pair(0.5, 1.0, 0)]).unwrap();
        // weights 1/2 and 1: mean 2/3.
        assert!((c.predict(0.5) - 2.0 / 3.0).abs() < 1e-15);
        for s in 2..20 {
            c.update(s, &[]).unwrap();
        }
        assert!(c.is_empty(), "pairs older than 16 half-lives are dropped");
    }

    #[test]
    fn rejects_non_finite_pairs_without_changing_state() {
        let mut c = OnlineCalibrator::new(CalibratorConfig {
            min_pairs: 1,
            ..Default::default()
        })
        .unwrap();
        c.update(0, &[pair(0.5, 1.0, 0)]).unwrap();
        let before = c.clone();
        assert!(
            c.update(1, &[pair(0.1, 0.0, 0), pair(f64::INFINITY, 0.0, 0)])
                .is_err()
        );
        assert_eq!(c, before);
    }

    #[test]
    fn invalid_config_is_rejected() {
        assert!(
            OnlineCalibrator::new(CalibratorConfig {
                min_pairs: 0,
                ..Default::default()
            })
            .is_err()
        );
        let cfg = CalibratorConfig {
            forgetting: Forgetting::Exponential {
                half_life_steps: 0.0,
            },
            ..Default::default()
        };
        assert!(OnlineCalibrator::new(cfg).is_err());
    }
}
