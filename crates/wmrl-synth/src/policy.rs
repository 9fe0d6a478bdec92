//! A tabular softmax policy trained by GRPO with exact gradients.
//!
//! π(a | x) = softmax(θₓ)ₐ. A rollout is one action, so the policy-gradient
//! surrogate of sample i is loss_weightᵢ · Aᵢ · log π(aᵢ | xᵢ), whose exact
//! gradient in θₓ is loss_weightᵢ · Aᵢ · (e_{aᵢ} − πₓ). The update is plain
//! gradient ascent, θ ← θ + η Σᵢ loss_weightᵢ Aᵢ (e_{aᵢ} − π_{xᵢ}), with π
//! the policy that sampled the batch (on-policy: the clipped and unclipped
//! surrogates have the same gradient there). The true reward of the policy,
//! J = mean over prompts of Σₐ π(a|x) q(x, a), is computed exactly.

use std::convert::Infallible;

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use wmrl_core::seams::{Batch, Policy};

use crate::world::{ActionSampler, Rollout, SynthAdapter, SyntheticWorld};

/// Softmax over discrete actions, one row of logits per prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct SoftmaxPolicy {
    actions: usize,
    logits: Vec<f64>,
    probs: Vec<f64>,
    cdf: Vec<f64>,
    learning_rate: f64,
}

impl SoftmaxPolicy {
    /// The uniform policy over `actions` actions for each of `prompts` prompts.
    pub fn uniform(prompts: usize, actions: usize, learning_rate: f64) -> Self {
        let mut p = Self {
            actions,
            logits: vec![0.0; prompts * actions],
            probs: vec![0.0; prompts * actions],
            cdf: vec![0.0; prompts * actions],
            learning_rate,
        };
        p.refresh();
        p
    }

    fn refresh(&mut self) {
        let k = self.actions;
        for ((logits, probs), cdf) in self
            .logits
            .chunks(k)
            .zip(self.probs.chunks_mut(k))
            .zip(self.cdf.chunks_mut(k))
        {
            let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let mut sum = 0.0;
            for (p, &l) in probs.iter_mut().zip(logits) {
                *p = (l - max).exp();
                sum += *p;
            }
            let mut acc = 0.0;
            for (p, c) in probs.iter_mut().zip(cdf.iter_mut()) {
                *p /= sum;
                acc += *p;
                *c = acc;
            }
        }
    }

    /// π(· | x).
    pub fn probs(&self, x: usize) -> &[f64] {
        &self.probs[x * self.actions..(x + 1) * self.actions]
    }

    /// The exact true reward J of the policy in `world`.
    pub fn true_reward(&self, world: &SyntheticWorld) -> f64 {
        let p = world.prompts();
        (0..p)
            .map(|x| {
                self.probs(x)
                    .iter()
                    .zip(world.quality_row(x))
                    .map(|(a, b)| a * b)
                    .sum::<f64>()
            })
            .sum::<f64>()
            / p as f64
    }

    /// Probability mass on actions the world model over-rates, averaged over prompts.
    pub fn overrated_mass(&self, world: &SyntheticWorld) -> f64 {
        let p = world.prompts();
        (0..p)
            .map(|x| {
                (0..self.actions)
                    .filter(|&a| world.is_overrated(x, a))
                    .map(|a| self.probs(x)[a])
                    .sum::<f64>()
            })
            .sum::<f64>()
            / p as f64
    }
}

impl ActionSampler for SoftmaxPolicy {
    fn sample_action(&self, x: usize, rng: &mut ChaCha8Rng) -> usize {
        let cdf = &self.cdf[x * self.actions..(x + 1) * self.actions];
        let u = rng.random::<f64>() * cdf[self.actions - 1];
        cdf.partition_point(|&c| c <= u).min(self.actions - 1)
    }
}

impl Policy<SynthAdapter> for SoftmaxPolicy {
    type Error = Infallible;

    fn learn(&mut self, batch: Batch<u32, Rollout>) -> Result<(), Infallible> {
        let k = self.actions;
        let mut grad = vec![0.0; self.logits.len()];
        for s in &batch.samples {
            let x = batch.prompts[s.signal.group] as usize;
            let c = s.signal.loss_weight * s.signal.advantage;
            if c == 0.0 {
                continue;
            }
            let row = &mut grad[x * k..(x + 1) * k];
            for (g, &p) in row.iter_mut().zip(&self.probs[x * k..(x + 1) * k]) {
                *g -= c * p;
            }
            row[s.rollout.action as usize] += c;
        }
        for (l, g) in self.logits.iter_mut().zip(&grad) {
            *l += self.learning_rate * g;
        }
        self.refresh();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn sampling_follows_the_probabilities() {
        let mut p = SoftmaxPolicy::uniform(1, 3, 1.0);
        p.logits = vec![0.0, (2.0f64).ln(), (3.0f64).ln()];
        p.refresh();
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let mut counts = [0usize; 3];
        for _ in 0..60000 {
            counts[p.sample_action(0, &mut rng)] += 1;
        }
        for (c, e) in counts.iter().zip([10000.0, 20000.0, 30000.0]) {
            assert!((*c as f64 - e).abs() < 600.0, "{counts:?}");
        }
    }
}
