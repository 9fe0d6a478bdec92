//! Weighted isotonic regression by the pool-adjacent-violators algorithm.
//!
//! Given pairs (sᵢ, rᵢ) with weights wᵢ > 0, the fit is the non-decreasing
//! function f minimising Σ wᵢ (rᵢ − f(sᵢ))² (Barlow et al., 1972; Ayer et
//! al., 1955). Pairs with equal scores are first pooled into one point, so f
//! is a function of the score. The solution is a sequence of blocks of
//! consecutive distinct scores, each taking the weighted mean reward of its
//! pairs, with block values strictly increasing. PAVA builds it in one pass
//! over the sorted points with a stack, merging the top two blocks while they
//! violate monotonicity: O(n log n) for the sort plus O(n) for the pass.
//!
//! Prediction (the map f̂ the core applies to world-model scores):
//! - inside a block's score range `[lo, hi]`: the block's value;
//! - between two adjacent blocks: linear between `(hiₖ, vₖ)` and `(loₖ₊₁, vₖ₊₁)`;
//! - below the first block or above the last: clamped to the end values.
//!
//! Pairs are sorted by (score, reward, weight) before the pass, so the
//! result is bit-for-bit identical whatever the input order.

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// One constant piece of the fitted map.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Block {
    /// Smallest score in the block.
    pub lo: f64,
    /// Largest score in the block.
    pub hi: f64,
    /// The block's value: the weighted mean reward of its pairs.
    pub value: f64,
    /// Total weight of its pairs.
    pub weight: f64,
    /// Number of pairs pooled into it.
    pub count: u64,
}

/// A fitted non-decreasing map from scores to rewards.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IsotonicFit {
    blocks: Vec<Block>,
}

#[derive(Clone, Copy)]
struct Acc {
    lo: f64,
    hi: f64,
    w: f64,
    wy: f64,
    count: u64,
}

impl Acc {
    fn mean(&self) -> f64 {
        self.wy / self.w
    }
}

/// Checks one pair; `index` is for the error message.
pub fn validate_pair(index: usize, score: f64, reward: f64, weight: f64) -> Result<()> {
    if !score.is_finite() {
        return Err(Error::InvalidPair {
            index,
            field: "score",
            value: score,
            expected: "a finite number",
        });
    }
    if !reward.is_finite() {
        return Err(Error::InvalidPair {
            index,
            field: "reward",
            value: reward,
            expected: "a finite number",
        });
    }
    if !(weight.is_finite() && weight >= 0.0) {
        return Err(Error::InvalidPair {
            index,
            field: "weight",
            value: weight,
            expected: "a finite number ≥ 0",
        });
    }
    Ok(())
}

impl IsotonicFit {
    /// Fits scores to rewards, with optional weights (default 1). Pairs of
    /// zero weight are ignored; NaN, infinite or negative values are errors
    /// naming the pair.
    ///
    /// # Panics
    /// If `rewards` or `weights` differ in length from `scores` (a caller bug).
    pub fn fit(scores: &[f64], rewards: &[f64], weights: Option<&[f64]>) -> Result<Self> {
        assert_eq!(
            scores.len(),
            rewards.len(),
            "scores and rewards differ in length"
        );
        if let Some(w) = weights {
            assert_eq!(w.len(), scores.len(), "weights and scores differ in length");
        }
        let mut points = Vec::with_capacity(scores.len());
        for i in 0..scores.len() {
            let w = weights.map_or(1.0, |w| w[i]);
            validate_pair(i, scores[i], rewards[i], w)?;
            if w > 0.0 {
                points.push((scores[i], rewards[i], w));
            }
        }
        Self::fit_points(points)
    }

    /// Fits already validated `(score, reward, weight)` triples (weights > 0).
    pub(crate) fn fit_points(mut points: Vec<(f64, f64, f64)>) -> Result<Self> {
        if points.is_empty() {
            return Err(Error::NoPairs {
                what: "anchor pairs",
            });
        }
        points.sort_unstable_by(|a, b| {
            a.0.total_cmp(&b.0)
                .then(a.1.total_cmp(&b.1))
                .then(a.2.total_cmp(&b.2))
        });
        let mut stack: Vec<Acc> = Vec::with_capacity(points.len().min(4096));
        let mut i = 0;
        while i < points.len() {
            // Pool equal scores into one point.
            let s = points[i].0;
            let mut cur = Acc {
                lo: s,
                hi: s,
                w: 0.0,
                wy: 0.0,
                count: 0,
            };
            while i < points.len() && points[i].0 == s {
                cur.w += points[i].2;
                cur.wy += points[i].2 * points[i].1;
                cur.count += 1;
                i += 1;
            }
            // Merge while the previous block is not strictly below.
            while let Some(prev) = stack.last() {
                if prev.mean() >= cur.mean() {
                    let prev = stack.pop().expect("non-empty");
                    cur = Acc {
                        lo: prev.lo,
                        hi: cur.hi,
                        w: prev.w + cur.w,
                        wy: prev.wy + cur.wy,
                        count: prev.count + cur.count,
                    };
                } else {
                    break;
                }
            }
            stack.push(cur);
        }
        let blocks = stack
            .into_iter()
            .map(|a| Block {
                lo: a.lo,
                hi: a.hi,
                value: a.mean(),
                weight: a.w,
                count: a.count,
            })
            .collect();
        Ok(Self { blocks })
    }

    /// Rebuilds a fit from saved blocks, checking they form a valid map.
    pub fn from_blocks(blocks: Vec<Block>) -> Result<Self> {
        let bad = |message: String| Err(Error::InvalidState { message });
        if blocks.is_empty() {
            return bad("an isotonic fit needs at least one block".into());
        }
        for (i, b) in blocks.iter().enumerate() {
            let finite = [b.lo, b.hi, b.value, b.weight]
                .iter()
                .all(|x| x.is_finite());
            if !finite || b.lo > b.hi || b.weight <= 0.0 {
                return bad(format!(
                    "block {i} is not a finite range with positive weight: {b:?}"
                ));
            }
            if i > 0 && (blocks[i - 1].hi >= b.lo || blocks[i - 1].value > b.value) {
                return bad(format!(
                    "block {i} does not follow block {} in score and value",
                    i - 1
                ));
            }
        }
        Ok(Self { blocks })
    }

    /// The blocks, in increasing score order.
    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// f̂(s): see the module docs for the interpolation and clamping rules. NaN gives NaN.
    pub fn predict(&self, s: f64) -> f64 {
        if s.is_nan() {
            return f64::NAN;
        }
        let b = &self.blocks;
        // First block whose lo exceeds s.
        let idx = b.partition_point(|blk| blk.lo <= s);
        if idx == 0 {
            return b[0].value;
        }
        let cur = &b[idx - 1];
        if s <= cur.hi || idx == b.len() {
            return cur.value;
        }
        let next = &b[idx];
        let t = (s - cur.hi) / (next.lo - cur.hi);
        cur.value + t * (next.value - cur.value)
    }

    /// Weighted squared error of the fitted values at the training points.
    pub fn weighted_sse(&self, scores: &[f64], rewards: &[f64], weights: Option<&[f64]>) -> f64 {
        scores
            .iter()
            .zip(rewards)
            .enumerate()
            .map(|(i, (&s, &r))| {
                let w = weights.map_or(1.0, |w| w[i]);
                let e = r - self.predict(s);
                w * e * e
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_violators_into_weighted_means() {
        let fit = IsotonicFit::fit(
            &[1.0, 2.0, 3.0, 4.0],
            &[1.0, 3.0, 2.0, 4.0],
            Some(&[1.0, 1.0, 3.0, 1.0]),
        )
        .unwrap();
        let v: Vec<f64> = fit.blocks().iter().map(|b| b.value).collect();
        assert_eq!(v, vec![1.0, 2.25, 4.0]);
        assert_eq!((fit.blocks()[1].lo, fit.blocks()[1].hi), (2.0, 3.0));
    }

    #[test]
    fn prediction_rules() {
        let fit = IsotonicFit::fit(&[0.0, 1.0, 3.0, 4.0], &[0.0, 0.0, 1.0, 1.0], None).unwrap();
        assert_eq!(fit.blocks().len(), 2);
        assert_eq!(fit.predict(-5.0), 0.0); // clamped below
        assert_eq!(fit.predict(0.5), 0.0); // inside a block
        assert_eq!(fit.predict(2.0), 0.5); // linear between blocks
        assert_eq!(fit.predict(1.5), 0.25);
        assert_eq!(fit.predict(3.5), 1.0);
        assert_eq!(fit.predict(9.0), 1.0); // clamped above
        assert!(fit.predict(f64::NAN).is_nan());
    }

    #[test]
    fn equal_scores_are_one_point() {
        let fit = IsotonicFit::fit(&[1.0, 1.0, 2.0], &[0.0, 1.0, 0.2], None).unwrap();
        // (1, 0.5) and (2, 0.2) violate: one block of mean 0.4.
        assert_eq!(fit.blocks().len(), 1);
        assert!((fit.predict(1.0) - 0.4).abs() < 1e-15);
    }

    #[test]
    fn rejects_bad_values_naming_the_pair() {
        let err = IsotonicFit::fit(&[0.0, f64::NAN], &[0.0, 1.0], None).unwrap_err();
        assert!(err.to_string().contains("pair 1: score is NaN"), "{err}");
        let err = IsotonicFit::fit(&[0.0, 1.0], &[0.0, 1.0], Some(&[1.0, -1.0])).unwrap_err();
        assert!(err.to_string().contains("pair 1: weight"), "{err}");
        assert!(IsotonicFit::fit(&[0.0], &[1.0], Some(&[0.0])).is_err());
    }
}
