//! One step of the core on plain numbers: groups in, per-sample advantages,
//! streams and loss weights out.
//!
//! Given the step's groups (anchors with real rewards r and world-model
//! scores ŝ; world-model groups with ŝ only), [`Core::process`]:
//!
//! 1. validates every value (NaN or ±∞ is an error naming stream, group and sample);
//! 2. adds the anchor pairs (ŝ, r) to the online calibrator and refits f̂;
//! 3. cross-fits the agreement of world-model rewards with real ones on the
//!    anchor window ([`crate::denoise`]) and sets the stream weights or PPI's
//!    λ from it ([`crate::weights`], which derives them);
//! 4. sets each sample's reward: r for anchors; f̂(ŝ) (debiasing modes) or
//!    ŝ for world-model samples;
//! 5. computes group-relative advantages ([`crate::advantage`]);
//! 6. sets loss weights: within stream s, sample i of group g gets
//!    wₛ·(1/qᵍ)/Σⱼ(1/q_g(j)), where qᵍ is the probability the group landed
//!    in that stream (πᵍ for anchors, 1 − πᵍ otherwise); this is wₛ/Nₛ for
//!    uniform anchor selection, and a Hájek estimator otherwise. The weights
//!    of a step sum to w_A + w_W.
//!
//! Modes: `real` (w = (1, 0)), `wm-only` (w = (0, 1), raw ŝ), `wmrl`
//! (least-error w, f̂; `denoise.weights = "paper"` for the paper's
//! inverse-variance w), `wmrl-no-debias` (the same w from raw ŝ, raw ŝ),
//! `wmrl-no-denoise` (w ∝ sample counts, f̂), `ppi`: anchors get advantage
//! A(r) − λ·A(f̂(ŝ)) with weight 1/N_A and world-model samples A(f̂(ŝ)) with
//! weight λ/N_W; there f̂ is the map fitted on earlier steps, and λ is
//! estimated on that window too, so that both are independent of the
//! anchors they correct. In `wmrl` the weights need not sum to one: the
//! fused gradient has the anchor gradient's expectation.
//! (For the clipped surrogate, the two anchor terms are folded into one
//! advantage; at the on-policy point the gradient is the same.)

use serde::{Deserialize, Serialize};

use crate::advantage::{Stream, group_advantages_into};
use crate::calibrator::AnchorPair;
use crate::denoise::cross_fit;
use crate::diagnostics::StepDiagnostics;
use crate::isotonic::IsotonicFit;
use crate::mode::Mode;
use crate::schedule::TaskId;
use crate::state::Core;
use crate::weights::{StreamWeights, count_weights, ppi_lambda, stream_weights};
use crate::{Error, Result};

/// One group of a step, as numbers.
#[derive(Debug, Clone, Copy)]
pub struct GroupInput<'a> {
    /// The group's task (stratum).
    pub task: TaskId,
    /// Which stream it belongs to.
    pub stream: Stream,
    /// Real rewards, one per rollout (anchors).
    pub rewards: Option<&'a [f64]>,
    /// World-model scores ŝ, one per rollout (world-model groups, and anchors in mixed modes).
    pub scores: Option<&'a [f64]>,
    /// Probability πᵍ that this group was selected as an anchor (from the [`AnchorPlan`]).
    pub inclusion_probability: f64,
}

/// What the learner gets for one rollout.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SampleOut {
    /// Group index within the step.
    pub group: usize,
    /// Rollout index within the group.
    pub sample: usize,
    /// Stream of the group.
    pub stream: Stream,
    /// Reward the advantage was computed from (r, f̂(ŝ) or ŝ).
    pub reward: f64,
    /// Advantage for the policy-gradient surrogate.
    pub advantage: f64,
    /// Weight of this sample's loss term (see the module docs).
    pub loss_weight: f64,
}

/// The output of one step.
#[derive(Debug, Clone, PartialEq)]
pub struct StepOutput {
    /// One entry per rollout, group by group.
    pub samples: Vec<SampleOut>,
    /// What the step saw and decided.
    pub diagnostics: StepDiagnostics,
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (s, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    (n > 0).then(|| s / n as f64)
}

impl Core {
    fn validate_groups(&self, groups: &[GroupInput<'_>]) -> Result<()> {
        let mode = self.config.mode;
        for (g, input) in groups.iter().enumerate() {
            let bad = |message: String| Err(Error::InvalidGroup { group: g, message });
            let needs_scores = mode.uses_world_model();
            let needs_rewards = input.stream == Stream::Anchor;
            match (mode, input.stream) {
                (Mode::Real, Stream::WorldModel) => {
                    return bad("mode real executes every group; got a world-model group".into());
                }
                (Mode::WmOnly, Stream::Anchor) => {
                    return bad("mode wm-only has no anchors; got an anchor group".into());
                }
                _ => {}
            }
            let n = match (
                needs_rewards.then_some(input.rewards),
                needs_scores.then_some(input.scores),
            ) {
                (Some(None), _) => {
                    return bad(format!("{} group without real rewards", input.stream));
                }
                (_, Some(None)) => {
                    return bad(format!(
                        "{} group without world-model scores (mode {mode})",
                        input.stream
                    ));
                }
                (Some(Some(r)), Some(Some(s))) if r.len() != s.len() => {
                    return bad(format!("{} rewards but {} scores", r.len(), s.len()));
                }
                (Some(Some(r)), _) => r.len(),
                (_, Some(Some(s))) => s.len(),
                _ => 0,
            };
            if n == 0 {
                return bad("no rollouts".into());
            }
            let pi = input.inclusion_probability;
            let pi_ok = match input.stream {
                Stream::Anchor => pi > 0.0 && pi <= 1.0,
                Stream::WorldModel => (0.0..1.0).contains(&pi),
            };
            if !pi_ok {
                return bad(format!(
                    "inclusion probability {pi} impossible for a {} group",
                    input.stream
                ));
            }
            let fields = [
                ("reward", input.rewards.filter(|_| needs_rewards)),
                ("score", input.scores.filter(|_| needs_scores)),
            ];
            for (field, values) in fields {
                if let Some((sample, &value)) = values
                    .into_iter()
                    .flatten()
                    .enumerate()
                    .find(|(_, v)| !v.is_finite())
                {
                    return Err(Error::NonFinite {
                        stream: input.stream,
                        group: g,
                        sample,
                        field,
                        value,
                    });
                }
            }
        }
        Ok(())
    }

    /// Runs one step on `groups` (see the module docs) and advances the step counter.
    /// On error nothing changes.
    pub fn process(&mut self, groups: &[GroupInput<'_>]) -> Result<StepOutput> {
        let _span =
            tracing::info_span!("core_step", step = self.step, mode = %self.config.mode).entered();
        self.validate_groups(groups)?;
        let mode = self.config.mode;

        // Calibrate on this step's anchors. The map fitted on earlier steps
        // only is kept: it is the out-of-sample one, and the one `ppi` applies.
        let prior_fit: Option<IsotonicFit> = self.calibrator.fit().cloned();
        let prior = |s: f64| prior_fit.as_ref().map_or(s, |f| f.predict(s));
        let mut calibrator = self.calibrator.clone();
        let estimate = if mode.mixes_streams() {
            calibrator.update(self.step, &anchor_pairs(groups, self.step))?;
            cross_fit(&calibrator, self.config.denoise.folds, mode.debiases())?
        } else {
            None
        };
        let wm_reward = |s: f64| match mode {
            Mode::Ppi => prior(s),
            m if m.debiases() => calibrator.predict(s),
            _ => s,
        };

        // Stream weights.
        let count = |anchor: bool| {
            groups
                .iter()
                .filter(|g| is_anchor(g) == anchor)
                .map(group_len)
                .sum::<usize>()
        };
        let (n_a, n_w) = (count(true), count(false));
        let scale_by_std = self.config.advantage.scale_by_std;
        let ppi = if mode == Mode::Ppi {
            // λ from the window before this step's anchors joined it, so that
            // it is independent of the anchors it corrects.
            let prior_estimate = cross_fit(&self.calibrator, self.config.denoise.folds, true)?;
            Some(ppi_lambda(
                prior_estimate.as_ref(),
                n_a,
                n_w,
                &self.config.denoise,
                scale_by_std,
            ))
        } else {
            None
        };
        let lambda = ppi.map(|p| p.0);
        let weights = match mode {
            Mode::Real => StreamWeights::fixed(1.0, 0.0),
            Mode::WmOnly => StreamWeights::fixed(0.0, 1.0),
            Mode::Wmrl | Mode::WmrlNoDebias => stream_weights(
                n_a,
                n_w,
                estimate.as_ref(),
                &self.config.denoise,
                scale_by_std,
            ),
            Mode::WmrlNoDenoise => count_weights(n_a, n_w),
            Mode::Ppi => StreamWeights {
                fallback: ppi.and_then(|p| p.1),
                ..StreamWeights::fixed(1.0, lambda.unwrap_or(0.0))
            },
        };
        // Hájek normalisers: Σ n_g / q_g per stream.
        let norm = |anchor: bool| {
            groups
                .iter()
                .filter(|g| is_anchor(g) == anchor)
                .map(|g| group_len(g) as f64 / stream_probability(g))
                .sum::<f64>()
        };
        let (norm_a, norm_w) = (norm(true), norm(false));

        // Rewards, advantages and loss weights, group by group.
        let mut samples = Vec::with_capacity(n_a + n_w);
        let mut zero_groups = 0;
        let (mut rewards, mut adv, mut adv_f) = (Vec::new(), Vec::new(), Vec::new());
        for (gi, g) in groups.iter().enumerate() {
            rewards.clear();
            match g.stream {
                Stream::Anchor => rewards.extend_from_slice(g.rewards.unwrap_or_default()),
                Stream::WorldModel => {
                    rewards.extend(g.scores.unwrap_or_default().iter().map(|&s| wm_reward(s)))
                }
            }
            adv.resize(rewards.len(), 0.0);
            zero_groups +=
                group_advantages_into(&rewards, &self.config.advantage, &mut adv) as usize;
            if let (Some(l), Stream::Anchor) = (lambda, g.stream) {
                // PPI's correction term −λ·A(f̂(ŝ)) on the anchors.
                let f: Vec<f64> = g
                    .scores
                    .unwrap_or_default()
                    .iter()
                    .map(|&s| prior(s))
                    .collect();
                adv_f.resize(f.len(), 0.0);
                group_advantages_into(&f, &self.config.advantage, &mut adv_f);
                for (a, af) in adv.iter_mut().zip(&adv_f) {
                    *a -= l * af;
                }
            }
            let (w, norm) = if is_anchor(g) {
                (weights.anchor, norm_a)
            } else {
                (weights.world_model, norm_w)
            };
            let loss_weight = w / stream_probability(g) / norm;
            for (i, (&reward, &advantage)) in rewards.iter().zip(&adv).enumerate() {
                samples.push(SampleOut {
                    group: gi,
                    sample: i,
                    stream: g.stream,
                    reward,
                    advantage,
                    loss_weight,
                });
            }
        }

        // Diagnostics.
        let anchor_scored = || {
            groups
                .iter()
                .filter(|g| is_anchor(g) && g.scores.is_some())
                .flat_map(|g| {
                    g.scores
                        .unwrap_or_default()
                        .iter()
                        .zip(g.rewards.unwrap_or_default())
                })
        };
        let mixed = mode.mixes_streams();
        let anchor_groups = groups.iter().filter(|g| is_anchor(g)).count();
        let diagnostics = StepDiagnostics {
            step: self.step,
            mode,
            groups: groups.len(),
            anchor_groups,
            world_model_groups: groups.len() - anchor_groups,
            anchor_samples: n_a,
            world_model_samples: n_w,
            anchor_reward_mean: mean(
                groups
                    .iter()
                    .filter(|g| is_anchor(g))
                    .flat_map(|g| g.rewards.unwrap_or_default().iter().copied()),
            ),
            world_model_score_mean: mean(
                groups
                    .iter()
                    .filter(|g| !is_anchor(g))
                    .flat_map(|g| g.scores.unwrap_or_default().iter().copied()),
            ),
            world_model_reward_mean: mean(
                samples
                    .iter()
                    .filter(|s| s.stream == Stream::WorldModel)
                    .map(|s| s.reward),
            ),
            raw_bias: mean(anchor_scored().map(|(s, r)| s - r)).filter(|_| mixed),
            calibrated_bias: mean(anchor_scored().map(|(s, r)| prior(*s) - r)).filter(|_| mixed),
            residual_variance: estimate.map(|e| e.residual_variance),
            total_residual_variance: estimate.map(|e| e.total_residual_variance),
            reward_variance: estimate.map(|e| e.reward_variance),
            reward_correlation: estimate.map(|e| e.correlation),
            stream_weights: weights,
            ppi_lambda: lambda,
            calibrator_pairs: calibrator.len(),
            calibrator_blocks: calibrator.blocks(),
            calibrator_identity: if mode == Mode::Ppi {
                prior_fit.is_none()
            } else {
                calibrator.is_identity()
            },
            zero_variance_groups: zero_groups,
            zero_variance_share: if groups.is_empty() {
                0.0
            } else {
                zero_groups as f64 / groups.len() as f64
            },
        };
        tracing::debug!(?diagnostics, "core step");
        self.calibrator = calibrator;
        self.step += 1;
        Ok(StepOutput {
            samples,
            diagnostics,
        })
    }
}

fn is_anchor(g: &GroupInput<'_>) -> bool {
    g.stream == Stream::Anchor
}

fn group_len(g: &GroupInput<'_>) -> usize {
    g.rewards.or(g.scores).map_or(0, <[f64]>::len)
}

/// Probability that the group landed in its stream: πᵍ for anchors, 1 − πᵍ otherwise.
fn stream_probability(g: &GroupInput<'_>) -> f64 {
    if is_anchor(g) {
        g.inclusion_probability
    } else {
        1.0 - g.inclusion_probability
    }
}

/// The anchor pairs (ŝ, r) of a step, weighted by 1/πᵍ normalised to mean 1.
fn anchor_pairs(groups: &[GroupInput<'_>], step: u64) -> Vec<AnchorPair> {
    let inv: Vec<f64> = groups
        .iter()
        .filter(|g| is_anchor(g))
        .map(|g| 1.0 / g.inclusion_probability)
        .collect();
    let mean_inv = inv.iter().sum::<f64>() / inv.len().max(1) as f64;
    let mut pairs = Vec::new();
    for (g, input) in groups.iter().enumerate().filter(|(_, g)| is_anchor(g)) {
        let weight = (1.0 / input.inclusion_probability) / mean_inv;
        let (r, s) = (
            input.rewards.unwrap_or_default(),
            input.scores.unwrap_or_default(),
        );
        for (&reward, &score) in r.iter().zip(s) {
            pairs.push(AnchorPair {
                score,
                reward,
                weight,
                step,
                group: g as u32,
            });
        }
    }
    pairs
}
