//! One behaviour-cloning learner: the policy, its AdamW optimiser and the
//! random state of batch sampling and augmentation.
//!
//! Loss: the mean token cross-entropy over the valid slots of each target
//! chunk, `L = −(1/|M|) Σ_{(b,c,d)∈M} log softmax(ℓ_{b,c,d})[a*_{b,c,d}]`,
//! which is the negative log-likelihood of the expert chunk under the
//! factorised policy of [`crate::distribution`].

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use tch::nn::{self, OptimizerConfig};
use tch::{Device, Kind, Tensor};

use crate::config::TrainConfig;
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
    /// Mean token cross-entropy of the batch (nats).
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

/// Policy + optimiser + sampling state.
pub struct Learner {
    /// The policy being trained.
    pub policy: VlaPolicy,
    config: TrainConfig,
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
    pub fn new(policy: VlaPolicy, config: TrainConfig, instructions: &[&str]) -> Result<Self> {
        let adamw = nn::AdamW {
            wd: config.weight_decay,
            ..Default::default()
        };
        let optimizer = adamw
            .build(policy.var_store(), config.lr)
            .map_err(Error::torch("building AdamW"))?;
        let instruction_ids = policy.tokenize(instructions);
        let rng = ChaCha8Rng::seed_from_u64(config.seed ^ 0x5eed_ba7c);
        Ok(Self {
            policy,
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

    /// Logits of a batch `(agent, wrist, proprio, task)`, augmenting when `augment`.
    fn forward(
        &mut self,
        agent: &Tensor,
        wrist: &Tensor,
        proprio: &Tensor,
        task: &Tensor,
        augment: bool,
    ) -> Tensor {
        let ids = self.instruction_ids.index_select(0, task);
        let (mut agent, mut wrist) = (agent.to_kind(Kind::Float), wrist.to_kind(Kind::Float));
        if augment && self.config.shift_pad > 0 {
            agent = random_shift(&agent, self.config.shift_pad, &mut self.rng);
            wrist = random_shift(&wrist, self.config.shift_pad, &mut self.rng);
        }
        self.policy.logits(&agent, &wrist, proprio, &ids)
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
        let logits = self.forward(&agent, &wrist, &proprio, &task, true);
        let (loss, accuracy) = bc_loss(&logits, &tokens, &mask);
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

    /// Loss, accuracy and action error on up to `max_frames` evenly spaced frames of `split`.
    pub fn evaluate(&mut self, split: &Split, max_frames: i64) -> EvalStats {
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
            let logits = self.forward(&agent, &wrist, &proprio, &task, false);
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
