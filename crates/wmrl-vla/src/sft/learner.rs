//! One behaviour-cloning learner: the policy, its AdamW optimiser and the
//! random state of batch sampling and augmentation.
//!
//! Loss: the mean token cross-entropy over the valid slots of each target
//! chunk, `L = −(1/|M|) Σ_{(b,c,d)∈M} log softmax(ℓ_{b,c,d})[a*_{b,c,d}]`,
//! which is the negative log-likelihood of the expert chunk under the
//! factorised policy of [`crate::distribution`].
//!
//! With `label_sigma_bins = σ > 0` training uses the ordinal soft targets of
//! the "HL-Gauss" classification loss (Farebrother et al., 2024) instead:
//! each expert token `a*` becomes the distribution `q_k ∝ exp(−(k − a*)²/2σ²)`
//! over the bins and the loss is `−Σ_k q_k log p_k`, so that a prediction one
//! bin off costs less than one a hundred bins off. Validation always reports
//! the plain negative log-likelihood.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use tch::nn::{self, OptimizerConfig};
use tch::{Device, Kind, Tensor};

use crate::config::SftConfig;
use crate::demos::Split;
use crate::model::VlaPolicy;
use crate::sft::augment::random_shift;
use crate::sft::schedule::learning_rate;
use crate::{Error, Result};

/// Figures of one optimiser step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepStats {
    /// Step index (0-based).
    pub step: u64,
    /// Mean token cross-entropy of the batch (nats), against the soft targets
    /// when `label_sigma_bins > 0`.
    pub loss: f64,
    /// Share of valid target tokens predicted exactly by arg-max.
    pub accuracy: f64,
    /// Learning rate used.
    pub lr: f64,
    /// Global gradient L2 norm before clipping.
    pub grad_norm: f64,
}

/// Figures of a pass over held-out frames.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvalStats {
    /// Mean token cross-entropy (nats).
    pub loss: f64,
    /// Exact-token accuracy of greedy decoding.
    pub accuracy: f64,
    /// Mean |greedy action − expert action| over valid values (both as bin centres).
    pub action_l1: f64,
    /// Frames evaluated.
    pub frames: i64,
}

/// Masked cross-entropy and accuracy of `logits [B,C,D,K]` against `tokens [B,C,D]`.
pub fn bc_loss(logits: &Tensor, tokens: &Tensor, mask: &Tensor) -> (Tensor, Tensor) {
    let log_probs = logits.log_softmax(-1, Kind::Float);
    let nll = -log_probs
        .gather(-1, &tokens.unsqueeze(-1), false)
        .squeeze_dim(-1);
    let weights = mask.unsqueeze(-1).expand_as(&nll);
    let total = weights.sum(Kind::Float).clamp_min(1.0);
    let loss = (&nll * &weights).sum(Kind::Float) / &total;
    let hits = logits
        .argmax(-1, false)
        .eq_tensor(tokens)
        .to_kind(Kind::Float);
    let accuracy = (hits * &weights).sum(Kind::Float) / total;
    (loss, accuracy)
}

/// Cross-entropy of `logits [B,C,D,K]` against Gaussian soft targets of
/// width `sigma_bins` centred on `tokens [B,C,D]`, averaged over `mask`.
pub fn soft_target_loss(
    logits: &Tensor,
    tokens: &Tensor,
    mask: &Tensor,
    sigma_bins: f64,
) -> Tensor {
    let bins = logits.size()[logits.dim() - 1];
    let centres = Tensor::arange(bins, (Kind::Float, logits.device()));
    let offset = centres - tokens.to_kind(Kind::Float).unsqueeze(-1);
    let targets = (-(&offset * &offset) / (2.0 * sigma_bins * sigma_bins)).softmax(-1, Kind::Float);
    let nll =
        -(targets * logits.log_softmax(-1, Kind::Float)).sum_dim_intlist(-1, false, Kind::Float);
    let weights = mask.unsqueeze(-1).expand_as(&nll);
    (&nll * &weights).sum(Kind::Float) / weights.sum(Kind::Float).clamp_min(1.0)
}

/// Clips the global gradient norm of `vars` to `max`; returns the norm before clipping.
fn clip_gradients(vars: &[Tensor], max: f64) -> f64 {
    tch::no_grad(|| {
        let grads: Vec<Tensor> = vars
            .iter()
            .map(Tensor::grad)
            .filter(Tensor::defined)
            .collect();
        if grads.is_empty() {
            return 0.0;
        }
        let norms: Vec<Tensor> = grads.iter().map(|g| g.norm()).collect();
        let total = Tensor::stack(&norms, 0).norm().double_value(&[]);
        if total > max {
            let scale = max / (total + 1e-6);
            for mut g in grads {
                let _ = g.g_mul_scalar_(scale);
            }
        }
        total
    })
}

/// An exponential moving average of a policy's weights (Polyak averaging):
/// after step `t`, `θ̄ ← d·θ̄ + (1 − d)·θ` with `d = min(decay, (1 + t)/(10 + t))`,
/// so the early average is not dominated by the initialisation.
pub struct WeightAverage {
    /// The averaged weights, as a policy of the same architecture.
    pub policy: VlaPolicy,
    decay: f64,
    /// `(average, source)` pairs: shallow handles on the two stores' storage.
    pairs: Vec<(Tensor, Tensor)>,
}

impl WeightAverage {
    /// An average that starts at `source`'s current weights.
    pub fn new(source: &VlaPolicy, decay: f64) -> Result<Self> {
        let policy = source.try_clone()?;
        let sources = source.var_store().variables();
        let pairs = policy
            .var_store()
            .variables()
            .into_iter()
            .map(|(name, average)| {
                let source = sources.get(&name).ok_or_else(|| {
                    Error::mismatch("averaged weight", "a weight of the policy", &name)
                })?;
                Ok((average, source.shallow_clone()))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            policy,
            decay,
            pairs,
        })
    }

    /// Moves the average towards the source's weights after step `step`.
    pub fn update(&mut self, step: u64) {
        let decay = self.decay.min((1.0 + step as f64) / (10.0 + step as f64));
        tch::no_grad(|| {
            for (average, source) in &mut self.pairs {
                let _ = average.lerp_(source, 1.0 - decay);
            }
        });
    }
}

/// Policy + optimiser + sampling state.
pub struct Learner {
    /// The policy being trained.
    pub policy: VlaPolicy,
    /// The moving average of its weights, when `ema_decay > 0`.
    pub average: Option<WeightAverage>,
    config: SftConfig,
    optimizer: nn::Optimizer,
    /// Token ids `[tasks, L]` of each task's instruction, on the device.
    instruction_ids: Tensor,
    rng: ChaCha8Rng,
    step: u64,
}

impl std::fmt::Debug for Learner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Learner")
            .field("step", &self.step)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Learner {
    /// A learner for `policy` whose task rows `i` have instruction `instructions[i]`.
    pub fn new(policy: VlaPolicy, config: SftConfig, instructions: &[&str]) -> Result<Self> {
        let adamw = nn::AdamW {
            wd: config.weight_decay,
            ..Default::default()
        };
        let optimizer = adamw
            .build(policy.var_store(), config.lr)
            .map_err(Error::torch("building AdamW"))?;
        let instruction_ids = policy.tokenize(instructions);
        let rng = ChaCha8Rng::seed_from_u64(config.seed ^ 0x5eed_ba7c);
        let average = (config.ema_decay > 0.0)
            .then(|| WeightAverage::new(&policy, config.ema_decay))
            .transpose()?;
        Ok(Self {
            policy,
            average,
            config,
            optimizer,
            instruction_ids,
            rng,
            step: 0,
        })
    }

    /// Steps taken so far.
    pub fn steps_taken(&self) -> u64 {
        self.step
    }

    fn device(&self) -> Device {
        self.policy.device()
    }

    /// Logits of a batch `(agent, wrist, proprio, task)` under the trained
    /// weights (or their average when `averaged`), augmenting when `augment`.
    fn forward(
        &mut self,
        [agent, wrist, proprio, task]: [&Tensor; 4],
        augment: bool,
        averaged: bool,
    ) -> Tensor {
        let ids = self.instruction_ids.index_select(0, task);
        let (mut agent, mut wrist) = (agent.to_kind(Kind::Float), wrist.to_kind(Kind::Float));
        if augment && self.config.shift_pad > 0 {
            agent = random_shift(&agent, self.config.shift_pad, &mut self.rng);
            wrist = random_shift(&wrist, self.config.shift_pad, &mut self.rng);
        }
        let policy = match (&self.average, averaged) {
            (Some(average), true) => &average.policy,
            _ => &self.policy,
        };
        policy.logits(&agent, &wrist, proprio, &ids)
    }

    /// One AdamW step on a random batch of `split`.
    pub fn train_step(&mut self, split: &Split) -> Result<StepStats> {
        let c = &self.config;
        let lr = learning_rate(self.step, c.steps, c.warmup_steps, c.lr, c.min_lr_ratio);
        self.optimizer.set_lr(lr);
        let n = split.len();
        let index: Vec<i64> = (0..self.config.batch_size)
            .map(|_| self.rng.random_range(0..n))
            .collect();
        let [agent, wrist, proprio, tokens, mask, task] =
            split.batch(&Tensor::from_slice(&index), self.device());
        let logits = self.forward([&agent, &wrist, &proprio, &task], true, false);
        let (mut loss, accuracy) = bc_loss(&logits, &tokens, &mask);
        if self.config.label_sigma_bins > 0.0 {
            loss = soft_target_loss(&logits, &tokens, &mask, self.config.label_sigma_bins);
        }
        let loss_value = loss.double_value(&[]);
        if !loss_value.is_finite() {
            return Err(Error::mismatch(
                format!("training loss at step {}", self.step),
                "a finite number",
                loss_value,
            ));
        }
        self.optimizer.zero_grad();
        loss.backward();
        let grad_norm = clip_gradients(
            &self.policy.var_store().trainable_variables(),
            self.config.grad_clip,
        );
        self.optimizer.step();
        if let Some(average) = &mut self.average {
            average.update(self.step);
        }
        let stats = StepStats {
            step: self.step,
            loss: loss_value,
            accuracy: accuracy.double_value(&[]),
            lr,
            grad_norm,
        };
        self.step += 1;
        Ok(stats)
    }

    /// Loss, accuracy and action error on up to `max_frames` evenly spaced
    /// frames of `split`, under the weights the checkpoint holds (the average
    /// when there is one) or, when `raw`, under the last step's.
    pub fn evaluate(&mut self, split: &Split, max_frames: i64, raw: bool) -> EvalStats {
        let _guard = tch::no_grad_guard();
        let n = split.len();
        let take = n.min(max_frames.max(1));
        let stride = (n as f64 / take as f64).max(1.0);
        let all: Vec<i64> = (0..take)
            .map(|i| ((i as f64 * stride) as i64).min(n - 1))
            .collect();
        let binning = self.policy.config().action.binning;
        let (mut loss_sum, mut hit_sum, mut l1_sum, mut weight_sum) = (0.0, 0.0, 0.0, 0.0);
        for chunk in all.chunks(self.config.batch_size.max(1) as usize) {
            let [agent, wrist, proprio, tokens, mask, task] =
                split.batch(&Tensor::from_slice(chunk), self.device());
            let logits = self.forward([&agent, &wrist, &proprio, &task], false, !raw);
            let (loss, accuracy) = bc_loss(&logits, &tokens, &mask);
            let weights = mask
                .unsqueeze(-1)
                .expand_as(&tokens.to_kind(Kind::Float))
                .to_kind(Kind::Float);
            let weight = weights.sum(Kind::Float).double_value(&[]);
            let width = binning.width() as f64;
            let token_gap = (logits.argmax(-1, false) - &tokens)
                .abs()
                .to_kind(Kind::Float);
            l1_sum += (token_gap * &weights).sum(Kind::Float).double_value(&[]) * width;
            loss_sum += loss.double_value(&[]) * weight;
            hit_sum += accuracy.double_value(&[]) * weight;
            weight_sum += weight;
        }
        let w = weight_sum.max(1.0);
        EvalStats {
            loss: loss_sum / w,
            accuracy: hit_sum / w,
            action_l1: l1_sum / w,
            frames: take,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::config::VlaConfig;
    use crate::tokenizer::Tokenizer;

    fn snapshot(policy: &VlaPolicy) -> HashMap<String, Tensor> {
        policy
            .var_store()
            .variables()
            .into_iter()
            .map(|(name, t)| (name, t.detach().copy()))
            .collect()
    }

    fn largest_gap(a: &HashMap<String, Tensor>, b: &HashMap<String, Tensor>) -> f64 {
        a.iter()
            .map(|(name, t)| (t - &b[name]).abs().max().double_value(&[]))
            .fold(0.0, f64::max)
    }

    /// Logits `[1,1,1,K]` that put probability `p` on bin `peak`, the rest spread evenly.
    fn peaked(bins: i64, peak: i64, p: f64) -> Tensor {
        let rest = (1.0 - p) / (bins - 1) as f64;
        let mut probs = vec![rest as f32; bins as usize];
        probs[peak as usize] = p as f32;
        Tensor::from_slice(&probs).log().view([1, 1, 1, bins])
    }

    #[test]
    fn soft_targets_reduce_to_cross_entropy_and_prefer_near_misses() {
        let tokens = Tensor::from_slice(&[100i64]).view([1, 1, 1]);
        let mask = Tensor::ones([1, 1], (Kind::Float, Device::Cpu));
        let exact = peaked(256, 100, 0.9);
        let (hard, _) = bc_loss(&exact, &tokens, &mask);
        let narrow = soft_target_loss(&exact, &tokens, &mask, 0.05);
        assert!((hard.double_value(&[]) - narrow.double_value(&[])).abs() < 1e-4);
        // One bin off against a hundred bins off: the same under the hard
        // loss, far apart under soft targets of width 2.
        let near = peaked(256, 101, 0.9);
        let far = peaked(256, 200, 0.9);
        let hard_gap = bc_loss(&far, &tokens, &mask).0 - bc_loss(&near, &tokens, &mask).0;
        assert!(hard_gap.double_value(&[]).abs() < 1e-4);
        let soft = |l: &Tensor| soft_target_loss(l, &tokens, &mask, 2.0).double_value(&[]);
        assert!(soft(&exact) < soft(&near) && soft(&near) + 1.0 < soft(&far));
    }

    #[test]
    fn the_average_follows_polyak_updates_with_a_short_early_horizon() {
        tch::manual_seed(0);
        let model = VlaConfig::load("tiny", &[]).unwrap().model;
        let tokenizer = Tokenizer::from_instructions(["put the bowl on the plate"]);
        let policy = VlaPolicy::new(model, tokenizer, Device::Cpu).unwrap();
        let mut average = WeightAverage::new(&policy, 0.9).unwrap();
        let start = snapshot(&policy);
        assert_eq!(largest_gap(&snapshot(&average.policy), &start), 0.0);

        // Every trainable weight of the policy moves by +1.
        tch::no_grad(|| {
            for mut v in policy.var_store().trainable_variables() {
                let _ = v.g_add_scalar_(1.0);
            }
        });
        let trainable: Vec<String> = policy
            .var_store()
            .variables()
            .into_iter()
            .filter(|(_, t)| t.requires_grad())
            .map(|(name, _)| name)
            .collect();
        assert!(!trainable.is_empty());

        // Late in training the decay is the configured 0.9: a tenth of the way.
        average.update(10_000);
        let after = snapshot(&average.policy);
        for name in &trainable {
            let moved = (&after[name] - &start[name])
                .mean(Kind::Float)
                .double_value(&[]);
            assert!((moved - 0.1).abs() < 1e-5, "{name} moved {moved}");
        }
        // At step 0 the decay is 1/10: nine tenths of the remaining gap.
        average.update(0);
        let after = snapshot(&average.policy);
        for name in &trainable {
            let moved = (&after[name] - &start[name])
                .mean(Kind::Float)
                .double_value(&[]);
            assert!(
                (moved - (0.1 + 0.9 * 0.9)).abs() < 1e-5,
                "{name} moved {moved}"
            );
        }
    }
}
