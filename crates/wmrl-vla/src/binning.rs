//! Uniform action discretisation (OpenVLA-style action tokens).
//!
//! Each action dimension is a real number in `[low, high]` (LIBERO's normalised
//! action space: `[-1, 1]`). It is cut into `bins` equal-width bins of width
//! `w = (high - low) / bins`:
//!
//! - encode: `k = clamp(floor((a - low) / w), 0, bins - 1)`; values outside
//!   `[low, high]` are clipped first, so `a = high` falls in the last bin and
//!   NaN maps to the middle bin.
//! - decode: the bin centre `low + (k + 0.5) w`.
//!
//! With 256 bins on `[-1, 1]` the round-trip error is at most `w / 2 = 1/256`
//! (0.2 mm of end-effector motion per step). OpenVLA (Kim et al. 2024, §3.2)
//! also uses 256 uniform bins, but over the 1st–99th percentile of each
//! dimension and with `np.digitize` on 256 edges (so 255 used bins); here the
//! action space is already normalised and bounded, so the bins span it exactly
//! and all 256 are used. Zero is not a bin centre: the nearest are `±1/256`.

use serde::{Deserialize, Serialize};

use crate::Result;

/// Uniform bins on `[low, high]`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActionBinning {
    /// Number of bins (= logits per action dimension) (default: 256).
    pub bins: i64,
    /// Lower end of the range (default: -1).
    pub low: f32,
    /// Upper end of the range (default: 1).
    pub high: f32,
}

impl Default for ActionBinning {
    fn default() -> Self {
        Self {
            bins: 256,
            low: -1.0,
            high: 1.0,
        }
    }
}

impl ActionBinning {
    /// Checks `bins ≥ 2` and `low < high`.
    pub fn validate(&self) -> Result<()> {
        if self.bins < 2 || self.low >= self.high || !self.low.is_finite() || !self.high.is_finite()
        {
            return Err(wmrl_config::Error::invalid(
                "model.action.binning",
                format!(
                    "expected bins ≥ 2 and finite low < high, got bins {} on [{}, {}]",
                    self.bins, self.low, self.high
                ),
            )
            .into());
        }
        Ok(())
    }

    /// Bin width.
    pub fn width(&self) -> f32 {
        (self.high - self.low) / self.bins as f32
    }

    /// The token of one value.
    pub fn encode(&self, value: f32) -> i64 {
        if value.is_nan() {
            return self.bins / 2;
        }
        let clipped = value.clamp(self.low, self.high);
        (((clipped - self.low) / self.width()).floor() as i64).clamp(0, self.bins - 1)
    }

    /// The value (bin centre) of one token; tokens outside the range are clamped.
    pub fn decode(&self, token: i64) -> f32 {
        let k = token.clamp(0, self.bins - 1);
        self.low + (k as f32 + 0.5) * self.width()
    }

    /// Encodes a slice.
    pub fn encode_all(&self, values: &[f32]) -> Vec<i64> {
        values.iter().map(|&v| self.encode(v)).collect()
    }

    /// Decodes a slice.
    pub fn decode_all(&self, tokens: &[i64]) -> Vec<f32> {
        tokens.iter().map(|&t| self.decode(t)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_error_is_at_most_half_a_bin() {
        let b = ActionBinning::default();
        for i in 0..=2000 {
            let a = -1.0 + i as f32 * 0.001;
            let back = b.decode(b.encode(a));
            assert!((back - a).abs() <= b.width() / 2.0 + 1e-6, "{a} -> {back}");
        }
    }

    #[test]
    fn ends_and_bad_values() {
        let b = ActionBinning::default();
        assert_eq!(b.encode(-1.0), 0);
        assert_eq!(b.encode(1.0), 255);
        assert_eq!(b.encode(7.0), 255);
        assert_eq!(b.encode(-7.0), 0);
        assert_eq!(b.encode(f32::NAN), 128);
        assert_eq!(b.encode(0.0), 128);
        assert!((b.decode(0) + 1.0 - 1.0 / 256.0).abs() < 1e-6);
        assert!((b.decode(255) - 1.0 + 1.0 / 256.0).abs() < 1e-6);
        assert_eq!(b.decode(999), b.decode(255));
        assert!(ActionBinning { bins: 1, ..b }.validate().is_err());
    }
}
