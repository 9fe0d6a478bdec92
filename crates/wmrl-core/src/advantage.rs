//! Group-relative advantages (GRPO).
//!
//! A group is one prompt and its n rollouts. GRPO (Shao et al., 2024,
//! "DeepSeekMath", eq. 3) replaces a learned baseline by the group mean:
//!
//! ```text
//! Aᵢ = (rᵢ − mean_g r) / (std_g r + ε)        (scale_by_std = true, the default)
//! Aᵢ =  rᵢ − mean_g r                          (scale_by_std = false, "Dr. GRPO")
//! ```
//!
//! `std_g` is the population standard deviation, so scaled advantages have
//! unit root-mean-square. Advantages sum to zero within every group. A group
//! whose rewards are all equal (range ≤ `zero_variance_tol`) carries no
//! learning signal: its advantages are exactly zero and it is counted, so a
//! trainer can see how much of a batch was wasted (the failure mode of a
//! saturating world model). The clipped surrogate that consumes the
//! advantages belongs to the learners, not to this crate.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Which stream a group belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stream {
    /// Executed for real: carries real rewards (and, in WMRL modes, world-model scores).
    Anchor,
    /// Imagined or scored by the world model only.
    WorldModel,
}

impl fmt::Display for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Stream::Anchor => "anchor",
            Stream::WorldModel => "world-model",
        })
    }
}

/// How advantages are normalised.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdvantageOptions {
    /// Divide by the group's reward standard deviation (default: true).
    pub scale_by_std: bool,
    /// Added to the standard deviation before dividing (default: 1e-6).
    pub eps: f64,
    /// A group whose reward range (max − min) is at most this is a
    /// zero-variance group and gets zero advantages (default: 1e-9).
    pub zero_variance_tol: f64,
}

impl Default for AdvantageOptions {
    fn default() -> Self {
        Self {
            scale_by_std: true,
            eps: 1e-6,
            zero_variance_tol: 1e-9,
        }
    }
}

impl AdvantageOptions {
    /// Checks the ranges of the options.
    pub fn validate(&self) -> crate::Result<()> {
        if !(self.eps.is_finite() && self.eps >= 0.0) {
            return Err(crate::Error::InvalidConfig {
                field: "advantage.eps",
                value: self.eps.to_string(),
                expected: "a finite number ≥ 0",
            });
        }
        if !(self.zero_variance_tol.is_finite() && self.zero_variance_tol >= 0.0) {
            return Err(crate::Error::InvalidConfig {
                field: "advantage.zero_variance_tol",
                value: self.zero_variance_tol.to_string(),
                expected: "a finite number ≥ 0",
            });
        }
        Ok(())
    }
}

/// Mean and population variance of `values` (0 and 0 for an empty slice).
pub fn mean_and_variance(values: &[f64]) -> (f64, f64) {
    if values.is_empty() {
        return (0.0, 0.0);
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
    (mean, var)
}

/// Writes the group-relative advantages of `rewards` into `out` (same
/// length) and returns whether the group had zero variance (then `out` is all
/// zeros). Rewards must be finite; validation happens upstream.
pub fn group_advantages_into(rewards: &[f64], options: &AdvantageOptions, out: &mut [f64]) -> bool {
    debug_assert_eq!(rewards.len(), out.len());
    let (lo, hi) = rewards
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &r| {
            (lo.min(r), hi.max(r))
        });
    if rewards.is_empty() || hi - lo <= options.zero_variance_tol {
        out.fill(0.0);
        return true;
    }
    let (mean, var) = mean_and_variance(rewards);
    let scale = if options.scale_by_std {
        1.0 / (var.sqrt() + options.eps)
    } else {
        1.0
    };
    for (a, &r) in out.iter_mut().zip(rewards) {
        *a = (r - mean) * scale;
    }
    false
}

/// The group-relative advantages of `rewards` and whether the group had zero variance.
pub fn group_advantages(rewards: &[f64], options: &AdvantageOptions) -> (Vec<f64>, bool) {
    let mut out = vec![0.0; rewards.len()];
    let zero = group_advantages_into(rewards, options, &mut out);
    (out, zero)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaled_advantages_have_unit_rms_and_zero_sum() {
        let (a, zero) = group_advantages(&[0.0, 1.0, 1.0, 0.0], &AdvantageOptions::default());
        assert!(!zero);
        assert!((a.iter().sum::<f64>()).abs() < 1e-12);
        let rms = (a.iter().map(|x| x * x).sum::<f64>() / 4.0).sqrt();
        assert!((rms - 1.0).abs() < 1e-5, "{rms}");
    }

    #[test]
    fn unscaled_advantages_are_centred_rewards() {
        let opts = AdvantageOptions {
            scale_by_std: false,
            ..Default::default()
        };
        let (a, _) = group_advantages(&[1.0, 2.0, 6.0], &opts);
        assert_eq!(a, vec![-2.0, -1.0, 3.0]);
    }

    #[test]
    fn all_equal_binary_group_is_zero_and_counted() {
        let (a, zero) = group_advantages(&[1.0; 8], &AdvantageOptions::default());
        assert!(zero);
        assert!(a.iter().all(|&x| x == 0.0));
        let (_, zero) = group_advantages(&[0.5], &AdvantageOptions::default());
        assert!(zero, "a single rollout has no group baseline");
    }
}
