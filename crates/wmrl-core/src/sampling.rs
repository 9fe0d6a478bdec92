//! Dynamic sampling: groups that carry no learning signal are replaced by
//! fresh ones, up to a cap of extra rollouts per step (DAPO's dynamic
//! sampling; SimpleVLA-RL's `filter_accuracy`, RLinf's `filter_rewards`).
//!
//! A group is *uninformative* when every one of its values is equal: the
//! executed rewards of an anchor group, the calibrated scores (the core's
//! current calibrator, raw scores in modes that do not debias) of a
//! world-model group. Group-relative advantages are then all zero, so the
//! group adds nothing to the policy gradient. With dynamic sampling on,
//! after a step's groups have been executed and imagined, each uninformative
//! group is answered by a refill group of the same stream (anchor or world
//! model, with the same inclusion probability) on a new prompt, in rounds,
//! until the step holds `groups` informative groups or the cap of extra
//! rollouts is spent. Uninformative groups stay in the batch: their anchor
//! pairs still feed the calibrator and the noise estimate, every executed
//! step of them still counts as a real environment step, and the learner
//! gives them no loss row.

use serde::{Deserialize, Serialize};

use crate::advantage::Stream;
use crate::{Error, Result};

/// Settings of dynamic sampling (off by default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DynamicSampling {
    /// Replace uninformative groups with fresh ones (default: false).
    pub enabled: bool,
    /// Extra rollouts a step may spend on refills, counted in whole groups
    /// of `group_size` (default 0; at least one group when enabled).
    pub max_extra_rollouts: usize,
}

impl DynamicSampling {
    /// Refill groups a step may add.
    pub fn max_extra_groups(&self, group_size: usize) -> usize {
        if self.enabled {
            self.max_extra_rollouts / group_size.max(1)
        } else {
            0
        }
    }

    /// Refuses a cap that cannot pay for a single refill group.
    pub fn validate(&self, group_size: usize) -> Result<()> {
        if self.enabled && self.max_extra_rollouts < group_size {
            return Err(Error::InvalidConfig {
                field: "dynamic_sampling.max_extra_rollouts",
                value: self.max_extra_rollouts.to_string(),
                expected: "at least group_size (one refill group) when dynamic sampling is enabled",
            });
        }
        Ok(())
    }
}

/// Whether a group's values are not all equal (it carries signal).
pub fn is_informative(values: &[f64]) -> bool {
    values
        .iter()
        .any(|v| (v - values[0]).abs() > 1e-12 * v.abs().max(values[0].abs()).max(1.0))
}

/// Groups dropped (uninformative) and refill groups added in one step, per stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SamplingCounts {
    /// Uninformative anchor groups (kept for calibration, no loss row).
    pub dropped_anchor: usize,
    /// Uninformative world-model groups.
    pub dropped_world_model: usize,
    /// Refill anchor groups executed.
    pub refilled_anchor: usize,
    /// Refill world-model groups imagined.
    pub refilled_world_model: usize,
    /// Informative groups the step ended with.
    pub informative: usize,
}

impl SamplingCounts {
    /// Counts one uninformative group of `stream`.
    pub fn drop(&mut self, stream: Stream) {
        match stream {
            Stream::Anchor => self.dropped_anchor += 1,
            Stream::WorldModel => self.dropped_world_model += 1,
        }
    }

    /// Counts one refill group of `stream`.
    pub fn refill(&mut self, stream: Stream) {
        match stream {
            Stream::Anchor => self.refilled_anchor += 1,
            Stream::WorldModel => self.refilled_world_model += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_values_are_uninformative_and_the_cap_is_checked() {
        assert!(!is_informative(&[1.0, 1.0, 1.0]));
        assert!(!is_informative(&[0.0; 8]));
        assert!(is_informative(&[0.0, 0.0, 1.0]));
        assert!(is_informative(&[0.3, 0.30001]));
        let on = DynamicSampling {
            enabled: true,
            max_extra_rollouts: 20,
        };
        assert_eq!(on.max_extra_groups(8), 2);
        assert!(on.validate(8).is_ok());
        let err = DynamicSampling {
            max_extra_rollouts: 7,
            ..on
        }
        .validate(8)
        .unwrap_err()
        .to_string();
        assert!(err.contains("dynamic_sampling.max_extra_rollouts"), "{err}");
        assert_eq!(DynamicSampling::default().max_extra_groups(8), 0);
        assert!(DynamicSampling::default().validate(8).is_ok());
    }
}
