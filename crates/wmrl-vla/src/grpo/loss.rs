//! The per-chunk loss terms of the GRPO learner, on one scale.
//!
//! A chunk's executed actions carry M tokens (M = executed actions ×
//! action_dim; the mask selects them). Every term is a per-token mean over
//! those M tokens, so its gradient on the shared weights does not grow with
//! M, whatever the ratio kind, the chunk length or the executor's re-planning
//! stride:
//!
//! ```text
//! chunk:      s = −min(ρ A, clip(ρ) A) / M,            ρ = Π_t ρ_t
//! token-mean: s = −min(ρ̄ A, clip(ρ̄) A),                ρ̄ = (Π_t ρ_t)^(1/M)
//! token:      s = (1/M) Σ_t −min(ρ_t A, clip(ρ_t) A)
//! entropy:    H = (1/M) Σ_t H_t        KL = (1/M) Σ_t KL_t(π ‖ π_ref)
//! ```
//!
//! with ρ_t = π(token_t) / π_old(token_t) and clip(x) = clamp(x, 1 − low,
//! 1 + high). At ρ = 1 the three surrogates have the same gradient,
//! −A · (1/M) Σ_t ∇ log π(token_t).

use tch::{Kind, Tensor};

use super::config::RatioKind;

/// One minibatch's terms, one value per chunk (`[B]`).
pub(crate) struct Terms {
    /// The clipped surrogate s.
    pub surrogate: Tensor,
    /// The same without clipping (the policy-gradient term, for measuring it).
    pub unclipped: Tensor,
    /// Mean entropy of the executed tokens.
    pub entropy: Tensor,
    /// Mean KL of the executed tokens to the reference, when one is given.
    pub kl: Option<Tensor>,
    /// Fraction of the chunk's clipped ratios that left the clip range
    /// (0 or 1 for a whole-chunk ratio).
    pub clipped: Tensor,
    /// Mean |log ratio| of the clipped ratios (how far the policy moved).
    pub moved: Tensor,
}

/// The inputs of [`terms`], all on one device.
pub(crate) struct TermInputs<'a> {
    /// Per-token log-probabilities under the current policy `[B, C, D]`.
    pub log_probs: &'a Tensor,
    /// Per-token log-probabilities under the sampling policy `[B, C, D]`.
    pub old_log_probs: &'a Tensor,
    /// 1 for executed tokens, 0 otherwise (`f32 [B, C, D]`).
    pub mask: &'a Tensor,
    /// The chunk's advantage `[B]`.
    pub advantage: &'a Tensor,
    /// Per-token entropies `[B, C, D]`.
    pub entropy: &'a Tensor,
    /// Per-token KL to the reference `[B, C, D]`, if computed.
    pub kl: Option<&'a Tensor>,
}

/// Sum over the token dimensions `[B, C, D] → [B]`.
fn token_sum(t: &Tensor) -> Tensor {
    t.sum_dim_intlist([1i64, 2].as_slice(), false, Kind::Float)
}

/// The terms of every chunk, for `kind` and clip range (`low`, `high`).
pub(crate) fn terms(kind: RatioKind, (low, high): (f64, f64), x: &TermInputs<'_>) -> Terms {
    let count = token_sum(x.mask).clamp_min(1.0);
    let mean = |t: &Tensor| token_sum(&(t * x.mask)) / &count;
    let token_log_ratio = (x.log_probs - x.old_log_probs) * x.mask;
    let clip = |ratio: &Tensor, advantage: &Tensor| {
        let unclipped = ratio * advantage;
        let clipped = ratio.clamp(1.0 - low, 1.0 + high) * advantage;
        let outside = ratio
            .gt(1.0 + high)
            .logical_or(&ratio.lt(1.0 - low))
            .to_kind(Kind::Float);
        (-unclipped.minimum(&clipped), -unclipped, outside)
    };
    let (surrogate, unclipped, clipped, moved) = match kind {
        RatioKind::Chunk | RatioKind::TokenMean => {
            let mut log_ratio = token_sum(&token_log_ratio);
            if kind == RatioKind::TokenMean {
                log_ratio /= &count;
            }
            let (s, u, outside) = clip(&log_ratio.exp(), x.advantage);
            let (s, u) = if kind == RatioKind::Chunk {
                (s / &count, u / &count)
            } else {
                (s, u)
            };
            (s, u, outside, log_ratio.abs())
        }
        RatioKind::Token => {
            let advantage = x.advantage.view([-1, 1, 1]);
            let (s, u, outside) = clip(&token_log_ratio.exp(), &advantage);
            (
                mean(&s),
                mean(&u),
                mean(&outside),
                mean(&token_log_ratio.abs()),
            )
        }
    };
    Terms {
        surrogate,
        unclipped,
        entropy: mean(x.entropy),
        kl: x.kl.map(mean),
        clipped,
        moved,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::Device;

    /// The gradient of each term on a parameter shared by every token (as
    /// every weight of the policy is) keeps its scale when the chunk holds
    /// more executed tokens: with identical tokens it is the same for M = 7,
    /// 14 and 56, for every ratio kind (summed terms would grow 8×). The
    /// sampling policy is the current one, as at a batch's first epoch.
    #[test]
    fn each_term_keeps_its_gradient_scale_across_token_counts() {
        tch::manual_seed(11);
        let row = Tensor::randn([1, 1, 1, 9], (Kind::Float, Device::Cpu));
        let reference_row = Tensor::randn([1, 1, 1, 9], (Kind::Float, Device::Cpu));
        let token = Tensor::from_slice(&[3i64]).view([1, 1, 1]);
        // (term, kind, executed actions) -> d term / d shared.
        let gradient = |kind: RatioKind, executed: i64, term: &str| -> f64 {
            let (c, d) = (8, 7);
            let shared = Tensor::zeros([1], (Kind::Float, Device::Cpu)).set_requires_grad(true);
            // The shared parameter raises one bin's logit in every token.
            let bin = Tensor::from_slice(&[0.0f32, 0.0, 0.0, 0.7, 0.0, 0.0, 0.0, 0.0, 0.0]);
            let logits = row.repeat([2, c, d, 1]) + &shared * bin;
            let lp = logits.log_softmax(-1, Kind::Float);
            let tokens = token.repeat([2, c, d]);
            let pick = |l: &Tensor| l.gather(-1, &tokens.unsqueeze(-1), false).squeeze_dim(-1);
            let old = pick(&lp).detach();
            let reference = reference_row
                .repeat([2, c, d, 1])
                .log_softmax(-1, Kind::Float);
            let entropy = -(lp.exp() * &lp).sum_dim_intlist(-1, false, Kind::Float);
            let kl = (lp.exp() * (&lp - reference)).sum_dim_intlist(-1, false, Kind::Float);
            let mask = Tensor::ones([2, executed, d], (Kind::Float, Device::Cpu));
            let mask = Tensor::cat(
                &[
                    mask,
                    Tensor::zeros([2, c - executed, d], (Kind::Float, Device::Cpu)),
                ],
                1,
            );
            let advantage = Tensor::from_slice(&[1.0f32, -0.5]);
            let t = terms(
                kind,
                (0.2, 0.28),
                &TermInputs {
                    log_probs: &pick(&lp),
                    old_log_probs: &old,
                    mask: &mask,
                    advantage: &advantage,
                    entropy: &entropy,
                    kl: Some(&kl),
                },
            );
            let value = match term {
                "surrogate" => t.unclipped,
                "entropy" => t.entropy,
                _ => t.kl.unwrap(),
            };
            value.sum(Kind::Float).backward();
            shared.grad().double_value(&[0])
        };
        for kind in [RatioKind::Chunk, RatioKind::TokenMean, RatioKind::Token] {
            for term in ["surrogate", "entropy", "kl"] {
                // One action's tokens, so that the chunk ratio stays near 1.
                let one = gradient(kind, 1, term);
                assert!(one.abs() > 1e-4, "{kind:?} {term}: {one}");
                for executed in [2, 8] {
                    let g = gradient(kind, executed, term);
                    assert!(
                        (g - one).abs() <= 1e-4 * one.abs().max(1.0),
                        "{kind:?} {term}: {one} with 7 tokens, {g} with {}",
                        executed * 7
                    );
                }
            }
        }
    }

    /// At ρ = 1 (the current policy is the sampling one) every ratio kind
    /// has the same surrogate gradient, −A times the mean token score.
    #[test]
    fn at_ratio_one_the_kinds_agree() {
        let gradient = |kind: RatioKind| -> Vec<f32> {
            // Fixed logits (the global RNG is shared by parallel tests).
            let logits = (Tensor::arange(120, (Kind::Float, Device::Cpu)) * 0.37)
                .sin()
                .view([3, 4, 2, 5]);
            let shared = Tensor::zeros([5], (Kind::Float, Device::Cpu)).set_requires_grad(true);
            let lp = (logits + &shared).log_softmax(-1, Kind::Float);
            let tokens = Tensor::from_slice(&[1i64, 4, 0, 2])
                .view([1, 4, 1])
                .repeat([3, 1, 2]);
            let token_lp = lp.gather(-1, &tokens.unsqueeze(-1), false).squeeze_dim(-1);
            let old = token_lp.detach();
            let mask = Tensor::ones([3, 4, 2], (Kind::Float, Device::Cpu));
            let _ = mask.narrow(1, 3, 1).fill_(0.0);
            let zeros = Tensor::zeros([3, 4, 2], (Kind::Float, Device::Cpu));
            let t = terms(
                kind,
                (0.2, 0.28),
                &TermInputs {
                    log_probs: &token_lp,
                    old_log_probs: &old,
                    mask: &mask,
                    advantage: &Tensor::from_slice(&[1.0f32, -2.0, 0.5]),
                    entropy: &zeros,
                    kl: None,
                },
            );
            t.surrogate.sum(Kind::Float).backward();
            Vec::try_from(shared.grad()).unwrap()
        };
        let chunk = gradient(RatioKind::Chunk);
        for kind in [RatioKind::TokenMean, RatioKind::Token] {
            let g = gradient(kind);
            for (a, b) in g.iter().zip(&chunk) {
                assert!((a - b).abs() < 1e-5, "{kind:?}: {g:?} vs {chunk:?}");
            }
        }
    }
}
