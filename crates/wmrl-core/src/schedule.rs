//! Anchor scheduling: which groups of a step are executed for real.
//!
//! A step has G groups, each with a task (its stratum). At least
//! K = ⌈ρ·G⌉ groups become anchors, chosen uniformly at random and
//! stratified over tasks, deterministically for (seed, step):
//!
//! 1. Task t with nₜ groups gets ⌊K·nₜ/G⌋ anchors for sure, plus one more
//!    with probability frac(K·nₜ/G). The extra anchors are placed by
//!    systematic sampling over the tasks, in integer arithmetic, so exactly
//!    K anchors are drawn and task t receives K·nₜ/G of them in expectation.
//! 2. Within a task its anchors are a uniform random subset of its groups.
//!
//! **Rotation across steps.** The systematic sample's task order is drawn
//! once per run, and its start advances by G/φ each step (a Weyl sequence,
//! `start = frac(u₀ + step/φ)·G` with u₀ uniform per run) instead of being
//! drawn afresh each step. Each step's start is still uniform, so the
//! inclusion probabilities below are unchanged; but the extra anchors now
//! visit the tasks in turn. With 5 tasks of 4 groups and
//! one anchor group per step, independent draws leave a task without an
//! anchor for 15 steps in 3.5% of the windows (0.8¹⁵); the rotating start
//! returns to every task within 8 steps. A task whose world-model scores
//! have drifted is thus checked against real executions within a bounded
//! number of steps.
//!
//! Every group is therefore an anchor with probability exactly πᵍ = K/G,
//! whatever its task; the plan records πᵍ per group. Estimators weight the
//! anchor stream by 1/πᵍ (Horvitz–Thompson / Hájek), which reduces to equal
//! weights here and stays unbiased if a later scheduler selects non-uniformly
//! (e.g. prioritising tasks whose calibration is uncertain).

use std::collections::BTreeMap;

use rand::Rng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};

use crate::rng::{derive_seed, purpose, rng_for};
use crate::{Error, Result};

/// Identifier of a task: the stratum of anchor scheduling.
pub type TaskId = u32;

/// The anchors of one step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnchorPlan {
    /// Per group: executed for real?
    pub is_anchor: Vec<bool>,
    /// Per group: the probability πᵍ that it was selected as an anchor.
    pub inclusion_probability: Vec<f64>,
}

impl AnchorPlan {
    /// Indices of the anchor groups, ascending.
    pub fn anchors(&self) -> Vec<usize> {
        self.is_anchor
            .iter()
            .enumerate()
            .filter(|(_, a)| **a)
            .map(|(i, _)| i)
            .collect()
    }

    /// Number of anchor groups.
    pub fn anchor_count(&self) -> usize {
        self.is_anchor.iter().filter(|a| **a).count()
    }

    /// Every group an anchor (mode `real`).
    pub fn all(groups: usize) -> Self {
        Self {
            is_anchor: vec![true; groups],
            inclusion_probability: vec![1.0; groups],
        }
    }

    /// No anchors (mode `wm-only`).
    pub fn none(groups: usize) -> Self {
        Self {
            is_anchor: vec![false; groups],
            inclusion_probability: vec![0.0; groups],
        }
    }
}

/// K = ⌈ρ·G⌉, computed so that ρ·G that is an integer up to rounding error
/// (0.1·30) is not rounded up to the next integer.
pub fn anchor_count(ratio: f64, groups: usize) -> usize {
    let k = (ratio * groups as f64 - 1e-9).ceil().max(0.0) as usize;
    k.min(groups)
}

/// Checks that an anchor ratio is a probability.
pub fn validate_ratio(ratio: f64) -> Result<()> {
    if ratio.is_finite() && (0.0..=1.0).contains(&ratio) {
        Ok(())
    } else {
        Err(Error::InvalidConfig {
            field: "anchor_ratio",
            value: ratio.to_string(),
            expected: "a number in [0, 1]",
        })
    }
}

/// The systematic sample's start at `step`, in 0..`groups`: the fractional
/// part of u₀ + step·φ⁻¹ (u₀ uniform, drawn once per run) in 64-bit fixed
/// point, scaled to the groups. Uniform at every step; consecutive steps
/// spread over [0, G) with the golden ratio's low discrepancy.
fn rotating_start(seed: u64, step: u64, groups: usize) -> usize {
    /// 2⁶⁴/φ, the fixed-point golden-ratio increment (Fibonacci hashing).
    const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;
    let fraction =
        derive_seed(seed, &[purpose::ANCHOR_ROTATION]).wrapping_add(step.wrapping_mul(GOLDEN));
    ((u128::from(fraction) * groups as u128) >> 64) as usize
}

/// Chooses ⌈ρ·G⌉ anchor groups among `tasks.len()` groups (see the module docs).
pub fn schedule_anchors(tasks: &[TaskId], ratio: f64, seed: u64, step: u64) -> Result<AnchorPlan> {
    validate_ratio(ratio)?;
    let g = tasks.len();
    let k = anchor_count(ratio, g);
    let mut plan = AnchorPlan {
        is_anchor: vec![false; g],
        inclusion_probability: vec![0.0; g],
    };
    if g == 0 || k == 0 {
        return Ok(plan);
    }
    let mut rng = rng_for(seed, &[purpose::ANCHORS, step]);
    // The step's generator makes the within-task picks. It first draws the
    // start that schedulers before the rotating one drew here, so a run's
    // picks are unchanged wherever no extra anchor is placed (one task, as
    // in the VLA demo, or integer quotas).
    let _superseded_start = rng.random_range(0..g);

    let mut strata: BTreeMap<TaskId, Vec<usize>> = BTreeMap::new();
    for (i, &t) in tasks.iter().enumerate() {
        strata.entry(t).or_default().push(i);
    }
    let task_ids: Vec<TaskId> = strata.keys().copied().collect();
    let mut strata: Vec<Vec<usize>> = strata.into_values().collect();
    // Quotas in integer arithmetic: K·nₜ = quota·G + rem.
    let mut quota: Vec<usize> = strata.iter().map(|s| k * s.len() / g).collect();
    let rem: Vec<usize> = strata.iter().map(|s| k * s.len() % g).collect();
    // Σ rem = (K − Σ quota)·G: systematic sampling with step G picks exactly
    // K − Σ quota strata, stratum t with probability remₜ/G. The order is
    // the run's, the start rotates (module docs).
    let mut order: Vec<usize> = (0..strata.len()).collect();
    let run_rank =
        |t: &usize| derive_seed(seed, &[purpose::ANCHOR_ROTATION, u64::from(task_ids[*t])]);
    order.sort_by_key(run_rank);
    let u = rotating_start(seed, step, g);
    let mut cum = 0usize;
    for &t in &order {
        let before = cum;
        cum += rem[t];
        // Is there an integer j with before ≤ u + j·G < cum?
        let first = if before <= u {
            u
        } else {
            u + (before - u).div_ceil(g) * g
        };
        if first < cum {
            quota[t] += 1;
        }
    }
    debug_assert_eq!(quota.iter().sum::<usize>(), k);

    for (members, &q) in strata.iter_mut().zip(&quota) {
        let (chosen, _) = members.partial_shuffle(&mut rng, q);
        for &i in chosen.iter() {
            plan.is_anchor[i] = true;
        }
    }
    let pi = k as f64 / g as f64;
    plan.inclusion_probability.fill(pi);
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_is_ceiling_without_rounding_up_exact_products() {
        assert_eq!(anchor_count(0.1, 30), 3);
        assert_eq!(anchor_count(0.1, 31), 4);
        assert_eq!(anchor_count(0.1, 1), 1);
        assert_eq!(anchor_count(0.0, 10), 0);
        assert_eq!(anchor_count(1.0, 10), 10);
    }

    #[test]
    fn exact_count_deterministic_and_seed_dependent() {
        let tasks: Vec<TaskId> = (0..64).map(|i| i % 10).collect();
        let a = schedule_anchors(&tasks, 0.1, 3, 5).unwrap();
        assert_eq!(a.anchor_count(), 7);
        assert_eq!(a, schedule_anchors(&tasks, 0.1, 3, 5).unwrap());
        let differ =
            (0..20).any(|s| schedule_anchors(&tasks, 0.1, 3, s).unwrap().is_anchor != a.is_anchor);
        assert!(differ);
        assert!(
            a.inclusion_probability
                .iter()
                .all(|&p| (p - 7.0 / 64.0).abs() < 1e-15)
        );
    }

    #[test]
    fn stratified_quota_and_uniform_inclusion() {
        // 3 tasks of sizes 20, 12, 8; K = 10: quotas 5, 3, 2 exactly.
        let tasks: Vec<TaskId> = [vec![0; 20], vec![1; 12], vec![2; 8]].concat();
        let mut hits = vec![0usize; tasks.len()];
        let steps = 4000;
        for step in 0..steps {
            let plan = schedule_anchors(&tasks, 0.25, 11, step).unwrap();
            let per_task = |t: TaskId| {
                tasks
                    .iter()
                    .zip(&plan.is_anchor)
                    .filter(|(x, a)| **x == t && **a)
                    .count()
            };
            assert_eq!((per_task(0), per_task(1), per_task(2)), (5, 3, 2));
            for (h, a) in hits.iter_mut().zip(&plan.is_anchor) {
                *h += *a as usize;
            }
        }
        // Each group is chosen with probability 1/4: 1000 expected, sd ≈ 27.
        for (i, &h) in hits.iter().enumerate() {
            assert!(
                (h as f64 - 1000.0).abs() < 150.0,
                "group {i} chosen {h} times"
            );
        }
    }

    #[test]
    fn fractional_quotas_give_uniform_inclusion_probability() {
        // 4 tasks of 3 groups, K = ⌈0.1·12⌉ = 2: each task gets 0.5 anchors in expectation.
        let tasks: Vec<TaskId> = (0..12).map(|i| i / 3).collect();
        let mut hits = [0usize; 12];
        for step in 0..6000 {
            let plan = schedule_anchors(&tasks, 0.1, 1, step).unwrap();
            assert_eq!(plan.anchor_count(), 2);
            for (h, a) in hits.iter_mut().zip(&plan.is_anchor) {
                *h += *a as usize;
            }
        }
        // π = 2/12: 1000 expected, sd ≈ 29.
        for (i, &h) in hits.iter().enumerate() {
            assert!(
                (h as f64 - 1000.0).abs() < 150.0,
                "group {i} chosen {h} times"
            );
        }
    }

    #[test]
    fn extra_anchors_rotate_over_tasks() {
        // 5 tasks of 4 groups, K = 1: one task gets the anchor each step.
        // Independent draws would leave some task uncovered for 15+ steps
        // within 200 steps almost surely; the rotating start returns to
        // every task within 8.
        let tasks: Vec<TaskId> = (0..20).map(|i| i / 4).collect();
        for seed in 0..50 {
            let mut last = [None::<u64>; 5];
            let mut longest = 0;
            for step in 0..200 {
                let plan = schedule_anchors(&tasks, 0.05, seed, step).unwrap();
                let anchors = plan.anchors();
                assert_eq!(anchors.len(), 1);
                let task = anchors[0] / 4;
                if let Some(previous) = last[task] {
                    longest = longest.max(step - previous);
                }
                last[task] = Some(step);
            }
            assert!(last.iter().all(Option::is_some), "seed {seed}: {last:?}");
            assert!(longest <= 8, "seed {seed}: a task waited {longest} steps");
        }
    }

    const RECORDED_ONE_TASK_PICKS: [[usize; 2]; 4] = [[0, 3], [1, 3], [2, 3], [3, 6]];

    #[test]
    fn one_task_picks_are_those_of_the_independent_scheduler() {
        // Recorded from the scheduler before rotation (no extras to place):
        // the within-task picks follow the same draws.
        let tasks = vec![0; 8];
        let picks: Vec<Vec<usize>> = (0..4)
            .map(|step| schedule_anchors(&tasks, 0.25, 0, step).unwrap().anchors())
            .collect();
        assert_eq!(picks, RECORDED_ONE_TASK_PICKS);
    }

    #[test]
    fn rejects_ratio_outside_unit_interval() {
        assert!(schedule_anchors(&[0, 1], 1.5, 0, 0).is_err());
        assert!(schedule_anchors(&[0, 1], f64::NAN, 0, 0).is_err());
    }
}
