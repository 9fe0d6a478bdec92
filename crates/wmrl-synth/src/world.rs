//! The synthetic world and its implementations of the core's seams: an
//! adapter (prompts round robin), an anchor executor (true rewards) and a
//! world model (biased, saturating, noisy scores; see [`crate::scenario`]).
//!
//! Both the executor and the world model draw a rollout's action from the
//! policy with the episode's seed, so an imagined and an executed episode of
//! the same seed take the same action (common random numbers across modes);
//! the world model's noise comes from a separate stream.

use std::convert::Infallible;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use wmrl_core::TaskId;
use wmrl_core::rng::derive_seed;
use wmrl_core::seams::{
    Adapter, AnchorExecutor, EpisodeRequest, ExecutedEpisode, Execution, Imagined, WorldModel,
};

use crate::scenario::{RewardKind, Scenario, WorldModelSpec};

/// A standard normal draw (Box–Muller).
pub fn standard_normal(rng: &mut impl Rng) -> f64 {
    let u1 = 1.0 - rng.random::<f64>();
    let u2 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// The true reward table and the world model's view of it.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticWorld {
    prompts: usize,
    actions: usize,
    reward: RewardKind,
    spec: WorldModelSpec,
    /// q(x, a), row-major by prompt.
    quality: Vec<f64>,
    /// m(q̃ + e): the world model's noiseless score.
    expected_score: Vec<f64>,
    /// Whether (x, a) is over-rated.
    overrated: Vec<bool>,
}

impl SyntheticWorld {
    /// Draws a world for `scenario` from `seed`.
    pub fn generate(scenario: &Scenario, seed: u64) -> Self {
        let (p, k) = (scenario.prompts, scenario.actions);
        let spec = scenario.world_model;
        let mut rng = ChaCha8Rng::seed_from_u64(derive_seed(seed, &[0x5eed_0001]));
        let quality: Vec<f64> = (0..p * k)
            .map(|_| rng.random::<f64>().powf(scenario.reward_skew))
            .collect();
        let mut overrated = vec![false; p * k];
        let per_prompt = (spec.overrated_fraction * k as f64).round() as usize;
        for x in 0..p {
            let row = &quality[x * k..(x + 1) * k];
            let mut order: Vec<usize> = (0..k).collect();
            order.sort_by(|&a, &b| row[a].total_cmp(&row[b]));
            let mut poor: Vec<usize> = order[..k / 2].to_vec();
            poor.shuffle(&mut rng);
            for &a in poor.iter().take(per_prompt) {
                overrated[x * k + a] = true;
            }
        }
        let m = |u: f64| {
            if spec.saturation > 0.0 {
                (spec.saturation * u).tanh() / spec.saturation.tanh()
            } else {
                u
            }
        };
        let expected_score = (0..p * k)
            .map(|i| {
                let believed = if overrated[i] {
                    spec.overrated_quality
                } else {
                    quality[i]
                };
                m(believed + spec.action_error_sd * standard_normal(&mut rng))
            })
            .collect();
        Self {
            prompts: p,
            actions: k,
            reward: scenario.reward,
            spec,
            quality,
            expected_score,
            overrated,
        }
    }

    /// Number of prompts.
    pub fn prompts(&self) -> usize {
        self.prompts
    }

    /// Actions per prompt.
    pub fn actions(&self) -> usize {
        self.actions
    }

    /// The qualities of prompt `x`'s actions.
    pub fn quality_row(&self, x: usize) -> &[f64] {
        &self.quality[x * self.actions..(x + 1) * self.actions]
    }

    /// q(x, a).
    pub fn quality(&self, x: usize, a: usize) -> f64 {
        self.quality[x * self.actions + a]
    }

    /// The world model's noiseless score m(q̃ + e) of (x, a).
    pub fn expected_score(&self, x: usize, a: usize) -> f64 {
        self.expected_score[x * self.actions + a]
    }

    /// Whether the world model over-rates (x, a).
    pub fn is_overrated(&self, x: usize, a: usize) -> bool {
        self.overrated[x * self.actions + a]
    }

    /// Mean over prompts of the best action's quality: the ceiling of the true reward.
    pub fn optimal_reward(&self) -> f64 {
        (0..self.prompts)
            .map(|x| self.quality_row(x).iter().copied().fold(0.0, f64::max))
            .sum::<f64>()
            / self.prompts as f64
    }

    fn noisy_score(&self, x: usize, a: usize, rng: &mut impl Rng) -> f64 {
        self.expected_score(x, a) + self.spec.noise_sd * standard_normal(rng)
    }
}

/// A policy the synthetic executor and world model can sample from.
pub trait ActionSampler {
    /// Draws an action for prompt `x`.
    fn sample_action(&self, x: usize, rng: &mut ChaCha8Rng) -> usize;
}

/// A rollout of the synthetic benchmark: one action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rollout {
    /// The action taken.
    pub action: u32,
}

/// The synthetic domain: prompts are prompt indices, visited round robin
/// (group g of every step gets prompt g mod P).
#[derive(Debug, Clone, Copy)]
pub struct SynthAdapter {
    /// Number of prompts.
    pub prompts: usize,
}

impl Adapter for SynthAdapter {
    type Prompt = u32;
    type Rollout = Rollout;
    type Error = Infallible;

    fn prompts(&mut self, _step: u64, count: usize) -> Result<Vec<u32>, Infallible> {
        Ok((0..count).map(|g| (g % self.prompts) as u32).collect())
    }

    fn task(&self, prompt: &u32) -> TaskId {
        *prompt
    }
}

fn action_of<P: ActionSampler + ?Sized>(policy: &P, x: usize, seed: u64) -> (usize, ChaCha8Rng) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let a = policy.sample_action(x, &mut rng);
    (a, rng)
}

/// Executes episodes against the true reward table.
#[derive(Debug, Clone)]
pub struct SynthExecutor<'w> {
    world: &'w SyntheticWorld,
    failure_rate: f64,
}

impl<'w> SynthExecutor<'w> {
    /// An executor whose episodes fail to execute (and are re-queued) with probability `failure_rate`.
    pub fn new(world: &'w SyntheticWorld, failure_rate: f64) -> Self {
        Self {
            world,
            failure_rate,
        }
    }
}

impl<P: ActionSampler + ?Sized> AnchorExecutor<SynthAdapter, P> for SynthExecutor<'_> {
    type Error = Infallible;

    fn execute(
        &mut self,
        policy: &P,
        episodes: &[EpisodeRequest<'_, u32>],
    ) -> Result<Vec<Execution<Rollout>>, Infallible> {
        Ok(episodes
            .iter()
            .map(|e| {
                let x = *e.prompt as usize;
                let (a, mut rng) = action_of(policy, x, e.seed);
                let mut infra = ChaCha8Rng::seed_from_u64(derive_seed(e.seed, &[0xfa11]));
                if infra.random::<f64>() < self.failure_rate {
                    return Execution::Failed {
                        reason: "synthetic executor dropped the episode".into(),
                    };
                }
                let q = self.world.quality(x, a);
                let reward = match self.world.reward {
                    RewardKind::Continuous => q,
                    RewardKind::Bernoulli => (rng.random::<f64>() < q) as u8 as f64,
                };
                Execution::Completed {
                    rollout: Rollout { action: a as u32 },
                    reward,
                }
            })
            .collect())
    }
}

/// The synthetic world model.
#[derive(Debug, Clone)]
pub struct SynthWorldModel<'w> {
    world: &'w SyntheticWorld,
    rng: ChaCha8Rng,
}

impl<'w> SynthWorldModel<'w> {
    /// A world model over `world`; `seed` drives the noise of anchor scores.
    pub fn new(world: &'w SyntheticWorld, seed: u64) -> Self {
        Self {
            world,
            rng: ChaCha8Rng::seed_from_u64(derive_seed(seed, &[0x5c0e])),
        }
    }
}

impl<P: ActionSampler + ?Sized> WorldModel<SynthAdapter, P> for SynthWorldModel<'_> {
    type Error = Infallible;

    fn imagine(
        &mut self,
        policy: &P,
        episodes: &[EpisodeRequest<'_, u32>],
    ) -> Result<Vec<Imagined<Rollout>>, Infallible> {
        Ok(episodes
            .iter()
            .map(|e| {
                let x = *e.prompt as usize;
                let (a, _) = action_of(policy, x, e.seed);
                let mut noise = ChaCha8Rng::seed_from_u64(derive_seed(e.seed, &[0x0015e]));
                Imagined {
                    rollout: Rollout { action: a as u32 },
                    score: self.world.noisy_score(x, a, &mut noise),
                }
            })
            .collect())
    }

    fn score(
        &mut self,
        episodes: &[ExecutedEpisode<'_, u32, Rollout>],
    ) -> Result<Vec<f64>, Infallible> {
        Ok(episodes
            .iter()
            .map(|e| {
                self.world
                    .noisy_score(*e.prompt as usize, e.rollout.action as usize, &mut self.rng)
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrated_actions_are_poor_and_scored_high() {
        let s = Scenario::preset("paper").unwrap();
        let w = SyntheticWorld::generate(&s, 1);
        let mut count = 0;
        for x in 0..w.prompts() {
            let mut row = w.quality_row(x).to_vec();
            row.sort_by(f64::total_cmp);
            let median = row[row.len() / 2];
            for a in 0..w.actions() {
                if w.is_overrated(x, a) {
                    count += 1;
                    assert!(w.quality(x, a) <= median);
                    assert!(w.expected_score(x, a) > 0.95);
                }
            }
        }
        assert_eq!(count, 3 * w.prompts());
        assert_eq!(
            w,
            SyntheticWorld::generate(&s, 1),
            "deterministic for a seed"
        );
    }

    #[test]
    fn normal_draws_have_unit_variance() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let xs: Vec<f64> = (0..20000).map(|_| standard_normal(&mut rng)).collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64;
        assert!(
            mean.abs() < 0.03 && (var - 1.0).abs() < 0.05,
            "{mean} {var}"
        );
    }
}
