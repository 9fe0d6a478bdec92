//! Gradient probe: how closely each stream's policy gradient, and their
//! fusion at any weight, points along the gradient that real execution
//! gives, at one fixed policy.
//!
//! Final success rates compare fusion rules only through whole runs, and
//! the seed-to-seed spread of a run hides differences of a point or two.
//! The quantity the weight rules optimise is the gradient's error itself,
//! and that can be measured directly:
//!
//! 1. [`VlaTrainer::measure_gradients`](crate::VlaTrainer::measure_gradients)
//!    runs a training step whose learner measures instead of learning: the
//!    anchors are executed, the rest imagined, the core calibrates and
//!    weights the streams as in a run, and each stream's policy gradient
//!    ([`wmrl_vla::grpo::VlaLearner::policy_gradient`]) comes back, divided
//!    by the stream's weight so that it is that stream's estimate alone.
//!    The policy does not move, so the steps are draws of the same
//!    estimators (only the calibrator's window moves, as in training).
//! 2. A reference gradient is the mean of many such steps of mode `real`
//!    (every group executed) at the same policy, with another seed, so that
//!    it shares no episode with the probed steps
//!    ([`ReferenceGradient`]).
//! 3. For each probed step, the fused estimate at world-model weight w is
//!    (1 − w)·g_A + w·g_W. Its squared norm and its cosine with the
//!    reference are functions of six dot products ([`StreamProducts`]),
//!    so every w is scored on the same draws: w = 0 is the anchor stream
//!    alone, w = 1 the world model's, the core's own w its rule's share
//!    u_W / (u_A + u_W), N_W / N its count weights (mode `wmrl-no-denoise`).
//!
//! Each estimator is scored by its error against the reference's
//! expectation with the reference's own noise subtracted through its two
//! halves ([`summarise`], see its module); the reference's noise lowers
//! every cosine by the same factor, so cosines compare between rows, and the
//! split-half cosine of the reference says how much.

mod summary;

pub use summary::{GradientRow, GradientSummary, summarise};
use wmrl_core::StreamWeights;
use wmrl_core::advantage::Stream;
use wmrl_core::seams::{Adapter, Batch, Policy};
use wmrl_vla::grpo::VlaLearner;
use wmrl_vla::rollout::{AsVlaPolicy, ClosedLoopActor, VlaAdapter};

/// Each stream's policy-gradient estimate from one step, on its own: the
/// stream's loss-weighted gradient divided by the stream's weight.
#[derive(Debug, Clone)]
pub struct StreamGradients {
    /// The anchor stream's estimate g_A (`None` without anchors).
    pub anchor: Option<Vec<f32>>,
    /// The world-model stream's estimate g_W (`None` without imagined groups).
    pub world_model: Option<Vec<f32>>,
    /// The weights the core gave the streams in this step.
    pub weights: StreamWeights,
    /// Anchor rollouts of the step.
    pub anchor_samples: usize,
    /// Imagined rollouts of the step.
    pub world_model_samples: usize,
}

impl StreamGradients {
    /// The world-model weight of count weighting, N_W / (N_A + N_W).
    pub fn count_weight(&self) -> f64 {
        let n = self.anchor_samples + self.world_model_samples;
        if n == 0 {
            0.0
        } else {
            self.world_model_samples as f64 / n as f64
        }
    }
}

/// The learner of a measuring step: acts like the wrapped learner and, when
/// asked to learn, records each stream's gradient instead.
pub(crate) struct GradientProbe<'a> {
    learner: &'a mut VlaLearner,
    measured: Option<StreamGradients>,
}

impl<'a> GradientProbe<'a> {
    pub(crate) fn new(learner: &'a mut VlaLearner) -> Self {
        Self {
            learner,
            measured: None,
        }
    }

    /// What the step's `learn` call measured.
    pub(crate) fn into_measured(self) -> Option<StreamGradients> {
        self.measured
    }
}

impl Policy<VlaAdapter> for GradientProbe<'_> {
    type Error = wmrl_vla::Error;

    fn learn(
        &mut self,
        batch: Batch<<VlaAdapter as Adapter>::Prompt, <VlaAdapter as Adapter>::Rollout>,
    ) -> wmrl_vla::Result<()> {
        let _span = tracing::info_span!("measure_gradients", step = batch.step).entered();
        let weights = batch.diagnostics.stream_weights;
        let mut alone = |stream: Stream, weight: f64| -> wmrl_vla::Result<Option<Vec<f32>>> {
            if weight <= 0.0 {
                return Ok(None);
            }
            let gradient = self
                .learner
                .policy_gradient(&batch, &|s| s.stream == stream)?;
            Ok(gradient.map(|mut g| {
                g.iter_mut()
                    .for_each(|x| *x = (f64::from(*x) / weight) as f32);
                g
            }))
        };
        let anchor = alone(Stream::Anchor, weights.anchor)?;
        let world_model = alone(Stream::WorldModel, weights.world_model)?;
        self.measured = Some(StreamGradients {
            anchor,
            world_model,
            weights,
            anchor_samples: batch.diagnostics.anchor_samples,
            world_model_samples: batch.diagnostics.world_model_samples,
        });
        Ok(())
    }
}

impl AsVlaPolicy for GradientProbe<'_> {
    fn as_vla(&self) -> &wmrl_vla::VlaPolicy {
        self.learner.as_vla()
    }
}

impl ClosedLoopActor for GradientProbe<'_> {
    fn chunk_len(&self) -> usize {
        ClosedLoopActor::chunk_len(&*self.learner)
    }

    fn act(
        &self,
        inputs: &[wmrl_vla::PolicyInput<'_>],
        temperature: f64,
        rngs: &mut [rand_chacha::ChaCha8Rng],
    ) -> wmrl_vla::Result<Vec<wmrl_vla::ActionChunk>> {
        ClosedLoopActor::act(&*self.learner, inputs, temperature, rngs)
    }
}

fn dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum()
}

/// The mean of many gradient estimates, with the means of its two halves
/// (odd and even draws) to measure its own noise.
#[derive(Debug, Clone, Default)]
pub struct ReferenceGradient {
    halves: [Vec<f64>; 2],
    draws: [usize; 2],
}

impl ReferenceGradient {
    /// Adds one draw; every draw must have the same length.
    pub fn add(&mut self, gradient: &[f32]) {
        let half = (self.draws[0] + self.draws[1]) % 2;
        let sum = &mut self.halves[half];
        if sum.is_empty() {
            sum.resize(gradient.len(), 0.0);
        }
        assert_eq!(sum.len(), gradient.len(), "gradients of different sizes");
        for (s, g) in sum.iter_mut().zip(gradient) {
            *s += f64::from(*g);
        }
        self.draws[half] += 1;
    }

    /// Draws added.
    pub fn draws(&self) -> usize {
        self.draws[0] + self.draws[1]
    }

    /// The mean of every draw (empty before the first).
    pub fn mean(&self) -> Vec<f32> {
        let n = self.draws() as f64;
        let len = self.halves[0].len().max(self.halves[1].len());
        (0..len)
            .map(|i| {
                let s: f64 = self.halves.iter().filter_map(|h| h.get(i)).sum();
                (s / n) as f32
            })
            .collect()
    }

    /// The means of the two halves, with their draw counts (`None` while a half is empty).
    fn half_means(&self) -> Option<([Vec<f64>; 2], [f64; 2])> {
        if self.draws[0] == 0 || self.draws[1] == 0 {
            return None;
        }
        let n = [self.draws[0] as f64, self.draws[1] as f64];
        let means = [0, 1].map(|h| self.halves[h].iter().map(|s| s / n[h]).collect());
        Some((means, n))
    }

    /// h₁·h₂: an unbiased estimate of the squared norm of the reference's
    /// expectation (0 while a half is empty).
    pub fn signal(&self) -> f64 {
        self.half_means().map_or(0.0, |([a, b], _)| {
            a.iter().zip(&b).map(|(x, y)| x * y).sum()
        })
    }

    /// E‖r − ḡ‖², the reference mean's own noise, from its halves:
    /// ‖h₁ − h₂‖² / (R (1/n₁ + 1/n₂)) (0 while a half is empty).
    pub fn noise(&self) -> f64 {
        self.half_means().map_or(0.0, |([a, b], n)| {
            let d: f64 = a.iter().zip(&b).map(|(x, y)| (x - y).powi(2)).sum();
            d / ((n[0] + n[1]) * (1.0 / n[0] + 1.0 / n[1]))
        })
    }

    /// Cosine between the means of the two halves (0 with fewer than two draws).
    pub fn split_half_cosine(&self) -> f64 {
        if self.draws[0] == 0 || self.draws[1] == 0 {
            return 0.0;
        }
        let (a, b) = (&self.halves[0], &self.halves[1]);
        let ab: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        let aa: f64 = a.iter().map(|x| x * x).sum();
        let bb: f64 = b.iter().map(|x| x * x).sum();
        if aa == 0.0 || bb == 0.0 {
            0.0
        } else {
            ab / (aa * bb).sqrt()
        }
    }
}

/// The dot products that fix the cosine of (1 − w)·a + w·b with a reference
/// r for every w.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StreamProducts {
    /// a·r
    pub anchor_reference: f64,
    /// b·r
    pub world_model_reference: f64,
    /// a·a
    pub anchor_anchor: f64,
    /// b·b
    pub world_model_world_model: f64,
    /// a·b
    pub anchor_world_model: f64,
    /// r·r
    pub reference_reference: f64,
}

impl StreamProducts {
    /// Products of an anchor estimate `a`, a world-model estimate `b` and the
    /// reference `r` (all the same length).
    pub fn new(a: &[f32], b: &[f32], r: &[f32]) -> Self {
        assert!(
            a.len() == b.len() && b.len() == r.len(),
            "gradients of different sizes"
        );
        Self {
            anchor_reference: dot(a, r),
            world_model_reference: dot(b, r),
            anchor_anchor: dot(a, a),
            world_model_world_model: dot(b, b),
            anchor_world_model: dot(a, b),
            reference_reference: dot(r, r),
        }
    }

    /// Squared norm of (1 − w)·a + w·b.
    pub fn squared_norm_at(&self, w: f64) -> f64 {
        let v = 1.0 - w;
        (v * v * self.anchor_anchor
            + 2.0 * v * w * self.anchor_world_model
            + w * w * self.world_model_world_model)
            .max(0.0)
    }

    /// ((1 − w)·a + w·b)·r.
    pub fn along_at(&self, w: f64) -> f64 {
        (1.0 - w) * self.anchor_reference + w * self.world_model_reference
    }

    /// ‖(1 − w)·a + w·b − r‖².
    pub fn distance_squared_at(&self, w: f64) -> f64 {
        (self.squared_norm_at(w) - 2.0 * self.along_at(w) + self.reference_reference).max(0.0)
    }

    /// Cosine between (1 − w)·a + w·b and r; 0 when either is zero.
    pub fn cosine_at(&self, w: f64) -> f64 {
        let along = (1.0 - w) * self.anchor_reference + w * self.world_model_reference;
        let denominator = (self.squared_norm_at(w) * self.reference_reference).sqrt();
        if denominator == 0.0 {
            0.0
        } else {
            along / denominator
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cosine(a: &[f32], b: &[f32]) -> f64 {
        dot(a, b) / (dot(a, a) * dot(b, b)).sqrt()
    }

    #[test]
    fn the_products_give_the_blends_cosine_at_every_weight() {
        let a = [1.0f32, -2.0, 0.5, 3.0];
        let b = [0.2f32, 1.0, -1.5, 2.0];
        let r = [0.7f32, 0.1, -0.3, 1.2];
        let products = StreamProducts::new(&a, &b, &r);
        for w in [0.0, 0.25, 0.5, 0.8, 1.0] {
            let blend: Vec<f32> = a
                .iter()
                .zip(&b)
                .map(|(x, y)| ((1.0 - w) * f64::from(*x) + w * f64::from(*y)) as f32)
                .collect();
            let expected = cosine(&blend, &r);
            assert!((products.squared_norm_at(w) - dot(&blend, &blend)).abs() < 1e-5);
            assert!(
                (products.cosine_at(w) - expected).abs() < 1e-6,
                "w = {w}: {} vs {expected}",
                products.cosine_at(w)
            );
        }
        assert_eq!(
            StreamProducts::new(&[0.0; 4], &[0.0; 4], &r).cosine_at(0.5),
            0.0
        );
    }

    #[test]
    fn the_reference_is_the_mean_and_its_halves_alternate() {
        let mut reference = ReferenceGradient::default();
        assert_eq!(reference.split_half_cosine(), 0.0);
        for g in [[1.0f32, 0.0], [3.0, 2.0], [1.0, 0.0], [3.0, 2.0]] {
            reference.add(&g);
        }
        assert_eq!(reference.draws(), 4);
        assert_eq!(reference.mean(), vec![2.0, 1.0]);
        // Halves: mean (1, 0) from draws 1 and 3, (3, 2) from 2 and 4.
        let expected = 3.0 / 13f64.sqrt();
        assert!((reference.split_half_cosine() - expected).abs() < 1e-12);
        // h₁·h₂ = 3; ‖h₁ − h₂‖² = 8 over R (1/2 + 1/2) = 4: noise 2.
        assert!((reference.signal() - 3.0).abs() < 1e-12);
        assert!((reference.noise() - 2.0).abs() < 1e-12);
    }
}
