//! The action-chunk distribution defined by the head's logits.
//!
//! For logits `ℓ ∈ R^{B×C×D×K}` (chunk length C, action dimensions D, K bins)
//! the policy is the product of independent categoricals, one per token:
//! `π(a | o) = Π_{c,d} softmax(ℓ_{c,d} / τ)[a_{c,d}]`. Hence, exactly,
//!
//! - `log π(a | o) = Σ_{c,d} log_softmax(ℓ_{c,d} / τ)[a_{c,d}]`,
//! - `H(π) = Σ_{c,d} −Σ_k p_{c,d,k} log p_{c,d,k}`,
//!
//! which is what a policy-gradient update (GRPO's clipped ratio, an entropy
//! bonus, a KL to the SFT policy) needs. Sampling at temperature `τ > 0` draws
//! each token from `softmax(ℓ / τ)`; greedy decoding takes the arg-max (τ → 0).

use tch::{Kind, Tensor};

/// How to turn logits into tokens.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Decoding {
    /// Arg-max token in every slot (default).
    #[default]
    Greedy,
    /// Sample from `softmax(logits / temperature)`; a temperature ≤ 0 means greedy.
    Sample {
        /// Softmax temperature.
        temperature: f64,
    },
}

/// A batch of action-chunk distributions.
#[derive(Debug)]
pub struct ActionDistribution {
    /// Log-probabilities `[B, C, D, K]` at the distribution's temperature.
    log_probs: Tensor,
}

impl ActionDistribution {
    /// The distribution of `logits` (`[B, C, D, K]`) at temperature 1.
    pub fn new(logits: &Tensor) -> Self {
        Self {
            log_probs: logits.log_softmax(-1, Kind::Float),
        }
    }

    /// The distribution of `logits / temperature` (temperature > 0).
    pub fn with_temperature(logits: &Tensor, temperature: f64) -> Self {
        Self {
            log_probs: (logits / temperature.max(1e-6)).log_softmax(-1, Kind::Float),
        }
    }

    /// Per-token log-probabilities `[B, C, D]` of the given tokens (i64 `[B, C, D]`).
    pub fn token_log_probs(&self, tokens: &Tensor) -> Tensor {
        self.log_probs
            .gather(-1, &tokens.unsqueeze(-1), false)
            .squeeze_dim(-1)
    }

    /// Log-probability `[B]` of whole chunks: the sum over tokens.
    pub fn log_prob(&self, tokens: &Tensor) -> Tensor {
        self.token_log_probs(tokens)
            .sum_dim_intlist([1i64, 2].as_slice(), false, Kind::Float)
    }

    /// Per-token entropies `[B, C, D]` (nats).
    pub fn token_entropy(&self) -> Tensor {
        -(self.log_probs.exp() * &self.log_probs).sum_dim_intlist(-1, false, Kind::Float)
    }

    /// Entropy `[B]` of whole chunks (nats): the sum over tokens.
    pub fn entropy(&self) -> Tensor {
        self.token_entropy()
            .sum_dim_intlist([1i64, 2].as_slice(), false, Kind::Float)
    }

    /// Arg-max tokens `[B, C, D]`.
    pub fn greedy(&self) -> Tensor {
        self.log_probs.argmax(-1, false)
    }

    /// Tokens `[B, C, D]` drawn from the distribution (tch's global RNG).
    pub fn sample(&self) -> Tensor {
        let dims = self.log_probs.size();
        let k = dims[dims.len() - 1];
        let flat = self.log_probs.exp().view([-1, k]);
        flat.multinomial(1, true).view(&dims[..dims.len() - 1])
    }

    /// Tokens `[B, C, D]` by inverse-CDF sampling with the given uniforms
    /// (`f32 [B, C, D]` in `[0, 1)`): token = #{k : CDF(k) ≤ u}. With uniforms
    /// drawn from a per-episode RNG, a sample does not depend on what else is
    /// in the batch or on tch's global RNG.
    pub fn sample_with_uniforms(&self, uniforms: &Tensor) -> Tensor {
        let k = *self
            .log_probs
            .size()
            .last()
            .expect("logits have a bin dimension");
        let cdf = self.log_probs.exp().cumsum(-1, Kind::Float);
        let below = cdf.le_tensor(&uniforms.to_kind(Kind::Float).unsqueeze(-1));
        below
            .sum_dim_intlist(-1, false, Kind::Int64)
            .clamp_max(k - 1)
    }

    /// The distribution `decoding` draws from: `softmax(logits / T)` when
    /// sampling at T > 0, else (greedy) the policy at temperature 1. A
    /// rollout's recorded log-probabilities come from here, so that the
    /// learner's ratio is exact at the temperature it sampled at.
    pub fn for_decoding(logits: &Tensor, decoding: Decoding) -> Self {
        match decoding {
            Decoding::Sample { temperature } if temperature > 0.0 => {
                Self::with_temperature(logits, temperature)
            }
            _ => Self::new(logits),
        }
    }

    /// Tokens chosen by `decoding` from `logits`, drawing each sampled token
    /// with its given uniform (`[B, C, D]`), and their log-probabilities under
    /// [`Self::for_decoding`], per token (`[B, C, D]`): what a reproducible
    /// rollout records.
    pub fn decode_with_uniforms(
        logits: &Tensor,
        decoding: Decoding,
        uniforms: &Tensor,
    ) -> (Tensor, Tensor) {
        let dist = Self::for_decoding(logits, decoding);
        let tokens = match decoding {
            Decoding::Sample { temperature } if temperature > 0.0 => {
                dist.sample_with_uniforms(uniforms)
            }
            _ => logits.argmax(-1, false),
        };
        let log_probs = dist.token_log_probs(&tokens);
        (tokens, log_probs)
    }

    /// Tokens chosen by `decoding` from `logits`.
    pub fn decode(logits: &Tensor, decoding: Decoding) -> Tensor {
        match decoding {
            Decoding::Sample { temperature } if temperature > 0.0 => {
                Self::with_temperature(logits, temperature).sample()
            }
            _ => logits.argmax(-1, false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_prob_and_entropy_are_exact_sums() {
        tch::manual_seed(3);
        let logits = Tensor::randn([2, 3, 2, 5], (Kind::Float, tch::Device::Cpu));
        let dist = ActionDistribution::new(&logits);
        let tokens = dist.sample();
        assert_eq!(tokens.size(), vec![2, 3, 2]);
        let lp: Vec<f32> = Vec::try_from(dist.log_prob(&tokens)).unwrap();
        let probs: Vec<f32> =
            Vec::try_from(logits.softmax(-1, Kind::Float).flatten(0, -1)).unwrap();
        let toks: Vec<i64> = Vec::try_from(tokens.flatten(0, -1)).unwrap();
        for b in 0..2 {
            let mut expected = 0.0f64;
            let mut entropy = 0.0f64;
            for slot in 0..6 {
                let base = (b * 6 + slot) * 5;
                expected += (probs[base + toks[b * 6 + slot] as usize] as f64).ln();
                entropy -= (0..5)
                    .map(|k| probs[base + k] as f64 * (probs[base + k] as f64).ln())
                    .sum::<f64>();
            }
            assert!(
                (lp[b] as f64 - expected).abs() < 1e-4,
                "{} vs {expected}",
                lp[b]
            );
            let h: Vec<f32> = Vec::try_from(dist.entropy()).unwrap();
            assert!((h[b] as f64 - entropy).abs() < 1e-4);
        }
    }

    #[test]
    fn low_temperature_sampling_matches_greedy() {
        tch::manual_seed(4);
        let logits = Tensor::randn([4, 8, 7, 256], (Kind::Float, tch::Device::Cpu)) * 5.0;
        let greedy = ActionDistribution::decode(&logits, Decoding::Greedy);
        let cold = ActionDistribution::decode(&logits, Decoding::Sample { temperature: 1e-4 });
        assert!(greedy.equal(&cold));
        let hot = ActionDistribution::decode(&logits, Decoding::Sample { temperature: 1.0 });
        assert!(!greedy.equal(&hot));
    }

    #[test]
    fn inverse_cdf_sampling_follows_the_probabilities() {
        // Two bins with p = (0.25, 0.75): uniforms below 0.25 pick bin 0.
        let logits = Tensor::from_slice(&[0.0f32, 3.0f32.ln()]).view([1, 1, 1, 2]);
        let dist = ActionDistribution::new(&logits);
        let pick = |u: f32| {
            dist.sample_with_uniforms(&Tensor::from_slice(&[u]).view([1, 1, 1]))
                .int64_value(&[0, 0, 0])
        };
        assert_eq!(pick(0.0), 0);
        assert_eq!(pick(0.2499), 0);
        assert_eq!(pick(0.2501), 1);
        assert_eq!(pick(0.99999), 1);
    }
}
