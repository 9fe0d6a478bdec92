//! The VLA as the core's learner: a clipped-surrogate GRPO step on the
//! action tokens, with the core's per-sample advantages and stream weights.
//!
//! For every chunk c of every rollout i with a non-zero loss weight wᵢ in an
//! informative group (see [`rows`]), the learner re-evaluates the policy on
//! the chunk's input (the imagined latent for world-model rollouts, the
//! encoded recorded observation for executed ones), and minimises
//!
//! ```text
//! L = Σᵢ (wᵢ / Kᵢ) Σ_c [ s_c(Aᵢ) − β_H H_c + β_KL KL_c ]
//! ```
//!
//! over the Kᵢ chunks of rollout i, where s_c is the clipped surrogate of the
//! configured ratio kind and H_c, KL_c the entropy and the KL to the frozen
//! SFT policy, each a per-token mean over the tokens of the chunk's executed
//! actions ([`loss`]: the terms keep one scale whatever the chunk length or
//! re-planning stride; the KL is computed only when β_KL > 0). The policy
//! optimised is the one that sampled the rollouts: π(· | input) =
//! softmax(logits / T) at the sampling temperature T
//! ([`VlaLearner::with_sampling_temperature`], 1 by default), so ratios are
//! exact importance ratios whatever T the executor used. The observation
//! encoder is frozen: the world model lives in its latent space; with
//! `latent_adapter` the head reads that latent through a trainable adapter
//! ([`crate::model::adapter`]), the part of perception that adapts. One call to
//! `learn` takes `epochs` optimiser steps on the same batch, each over all
//! its chunks (gradients accumulated over minibatches); from the second on,
//! ρ differs from 1 and the clip bounds how far the batch moves the policy
//! (PPO's reuse of a batch).

mod config;
pub mod loss;
pub mod rows;

pub use config::{GrpoConfig, RatioKind};

use serde::{Deserialize, Serialize};
use std::path::Path;

use tch::{Kind, Tensor};
use wmrl_core::fuse::SampleOut;
use wmrl_core::seams::{Batch, Policy};
use wmrl_tch::{AdamW, AdamWConfig};

use crate::distribution::ActionDistribution;
use crate::inference::{ActionChunk, PolicyInput};
use crate::model::{ENCODER_PREFIXES, VlaPolicy};
use crate::rollout::{AsVlaPolicy, ClosedLoopActor, EpisodeRecord, TaskPrompt, VlaAdapter};
use crate::{Error, Result};
use loss::{TermInputs, Terms};
use rows::Minibatch;

/// What the last step did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LearnStats {
    /// Chunks in the loss.
    pub chunks: usize,
    /// Rollouts in the loss (non-zero weight, informative group).
    pub rollouts: usize,
    /// Groups left out of the loss because all their advantages were zero.
    #[serde(default)]
    pub uninformative_groups: usize,
    /// The batch's groups per task, and how many of them were informative.
    #[serde(default)]
    pub tasks: Vec<TaskGroups>,
    /// Surrogate loss (weighted).
    pub surrogate: f64,
    /// Mean entropy per executed token (nats), over the chunks.
    pub entropy: f64,
    /// Mean KL to the reference per executed token (0 when disabled).
    pub kl: f64,
    /// Fraction of ratios (of [`GrpoConfig::ratio`]'s kind) that were clipped.
    pub clip_fraction: f64,
    /// Mean |log ρ| of those ratios (how far the policy moved from the one that sampled).
    pub mean_abs_log_ratio: f64,
    /// Gradient norm before clipping.
    pub grad_norm: f64,
    /// Learning rate the optimiser stepped with ([`GrpoConfig::lr_at`]).
    #[serde(default)]
    pub lr: f64,
}

/// One task's groups in a batch: how many there were, and how many carried a
/// learning signal (some advantage non-zero).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskGroups {
    /// Task index in the suite.
    pub task: usize,
    /// Groups of this task in the batch.
    pub groups: usize,
    /// Of those, groups with some non-zero advantage.
    pub informative: usize,
}

/// File of the optimiser's moments in a learner state folder.
pub const OPTIMIZER_FILE: &str = "optimizer.safetensors";
/// File of the learner's counters in a learner state folder.
pub const LEARNER_FILE: &str = "learner.json";

/// The counters saved beside the weights.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct LearnerState {
    steps: u64,
    optimizer_steps: u64,
    last: LearnStats,
}

/// A VLA with its optimiser: the learner the core calls.
pub struct VlaLearner {
    policy: VlaPolicy,
    reference: Option<VlaPolicy>,
    optimizer: AdamW,
    config: GrpoConfig,
    /// Temperature T the rollouts were sampled at: the learner optimises
    /// softmax(logits / T).
    temperature: f64,
    /// Statistics of the last `learn` call.
    pub last: LearnStats,
    /// Optimiser steps taken.
    pub steps: u64,
}

impl std::fmt::Debug for VlaLearner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VlaLearner")
            .field("config", &self.config)
            .field("temperature", &self.temperature)
            .field("steps", &self.steps)
            .finish()
    }
}

impl VlaLearner {
    /// Freezes the observation encoder of `policy`, gives it the configured
    /// latent adapter unless it has one, and builds AdamW over the rest.
    pub fn new(mut policy: VlaPolicy, config: GrpoConfig) -> Result<Self> {
        config.validate()?;
        if config.latent_adapter > 0 && !policy.has_latent_adapter() {
            policy.add_latent_adapter(config.latent_adapter)?;
        }
        for (name, t) in policy.var_store_mut().variables() {
            if ENCODER_PREFIXES.iter().any(|p| name.starts_with(p)) {
                let _ = t.set_requires_grad(false);
            }
        }
        let reference = if config.kl_coef > 0.0 {
            Some(policy.try_clone()?)
        } else {
            None
        };
        let optimizer = AdamW::new(
            policy.var_store(),
            AdamWConfig {
                lr: config.lr,
                weight_decay: config.weight_decay,
                ..Default::default()
            },
        );
        Ok(Self {
            policy,
            reference,
            optimizer,
            config,
            temperature: 1.0,
            last: LearnStats::default(),
            steps: 0,
        })
    }

    /// The temperature T the rollouts it learns from are sampled at (the
    /// executor's and the world model's): ratios, entropies and the KL term
    /// are those of softmax(logits / T). Fails unless T is finite and > 0.
    pub fn with_sampling_temperature(mut self, temperature: f64) -> Result<Self> {
        if !(temperature.is_finite() && temperature > 0.0) {
            return Err(wmrl_config::Error::invalid(
                "GRPO sampling temperature",
                format!("expected a finite number > 0, found {temperature}"),
            )
            .into());
        }
        self.temperature = temperature;
        Ok(self)
    }

    /// The policy.
    pub fn policy(&self) -> &VlaPolicy {
        &self.policy
    }

    /// The settings.
    pub fn config(&self) -> &GrpoConfig {
        &self.config
    }

    /// Saves the learner's state into `dir`: the policy (`policy/`), the
    /// optimiser's moments (`optimizer.safetensors`) and the counters
    /// (`learner.json`), each file atomically. The reference policy of the KL
    /// term is the one the learner was built from and is not saved here.
    pub fn save_state(&self, dir: &Path) -> Result<()> {
        crate::checkpoint::save(&self.policy, &dir.join("policy"), serde_json::Value::Null)?;
        wmrl_report::write_atomic(
            &dir.join(OPTIMIZER_FILE),
            &crate::checkpoint::var_store_bytes(self.optimizer.state())?,
        )?;
        wmrl_report::write_json_atomic(
            &dir.join(LEARNER_FILE),
            &LearnerState {
                steps: self.steps,
                optimizer_steps: self.optimizer.steps(),
                last: self.last.clone(),
            },
        )?;
        Ok(())
    }

    /// Restores a state written by [`Self::save_state`] into a learner built
    /// from the same starting policy and settings; afterwards it continues
    /// bit for bit. Checks every tensor's name and shape.
    pub fn load_state(&mut self, dir: &Path) -> Result<()> {
        crate::checkpoint::load_weights(
            &mut self.policy,
            &dir.join("policy").join(crate::checkpoint::WEIGHTS_FILE),
        )?;
        crate::checkpoint::load_var_store(self.optimizer.state_mut(), &dir.join(OPTIMIZER_FILE))?;
        let path = dir.join(LEARNER_FILE);
        let text = std::fs::read_to_string(&path).map_err(|source| Error::Io {
            path: path.clone(),
            source,
        })?;
        let state: LearnerState =
            serde_json::from_str(&text).map_err(|e| Error::BadCheckpoint {
                path: path.clone(),
                message: e.to_string(),
            })?;
        self.optimizer.set_steps(state.optimizer_steps);
        self.steps = state.steps;
        self.last = state.last;
        Ok(())
    }

    /// The gradient of the loss's policy-gradient term at the sampling
    /// policy, Σᵢ (wᵢ / Kᵢ) Σ_c s_c(Aᵢ) unclipped over the samples `keep`
    /// accepts (no entropy or KL term; at ρ = 1 the clip is inactive), flattened over the
    /// trainable parameters in update order. The policy, the optimiser and
    /// the counters are left as they were. `None` when no accepted sample has
    /// a chunk and a non-zero weight; zeros when every accepted sample is in
    /// a group whose advantages are all zero.
    ///
    /// This is what one learner step would follow before clipping and Adam's
    /// scaling: `wmrl bench gradient` compares it across streams.
    pub fn policy_gradient(
        &mut self,
        batch: &Batch<TaskPrompt, EpisodeRecord>,
        keep: &dyn Fn(&SampleOut) -> bool,
    ) -> Result<Option<Vec<f32>>> {
        let rows = self.chunk_rows(batch, keep)?;
        if rows.len() == 0 {
            // Accepted samples whose groups carry no signal: their gradient
            // is exactly zero.
            return Ok((rows.uninformative_rollouts > 0).then(|| {
                self.optimizer.zero_grad();
                self.optimizer.flat_gradient()
            }));
        }
        let ids = self.policy.tokenize(&rows.instructions);
        self.optimizer.zero_grad();
        for mb in &self.minibatches(&rows) {
            let terms = self.forward(mb, &ids, false);
            (&mb.weight * terms.unclipped).sum(Kind::Float).backward();
        }
        let gradient = self.optimizer.flat_gradient();
        self.optimizer.zero_grad();
        Ok(Some(gradient))
    }
}

impl AsVlaPolicy for VlaLearner {
    fn as_vla(&self) -> &VlaPolicy {
        &self.policy
    }
}

impl ClosedLoopActor for VlaLearner {
    fn chunk_len(&self) -> usize {
        self.policy.chunk_len()
    }

    fn act(
        &self,
        inputs: &[PolicyInput<'_>],
        temperature: f64,
        rngs: &mut [rand_chacha::ChaCha8Rng],
    ) -> Result<Vec<ActionChunk>> {
        ClosedLoopActor::act(&self.policy, inputs, temperature, rngs)
    }
}

impl Policy<VlaAdapter> for VlaLearner {
    type Error = Error;

    fn learn(&mut self, batch: Batch<TaskPrompt, EpisodeRecord>) -> Result<()> {
        let _span = tracing::info_span!(
            "grpo_learn",
            step = batch.step,
            rollouts = batch.samples.len()
        )
        .entered();
        let rows = self.chunk_rows(&batch, &|_| true)?;
        let chunks = rows.len();
        let tasks = rows::task_groups(&batch);
        self.last = LearnStats {
            chunks,
            rollouts: rows.rollouts,
            uninformative_groups: rows.uninformative_groups,
            tasks: tasks.clone(),
            ..Default::default()
        };
        if chunks == 0 {
            return Ok(());
        }
        let ids = self.policy.tokenize(&rows.instructions);
        let minibatches = self.minibatches(&rows);
        self.optimizer.set_lr(self.config.lr_at(self.steps));
        // Statistics are those of the last epoch.
        for _ in 0..self.config.epochs {
            self.last = LearnStats {
                rollouts: rows.rollouts,
                uninformative_groups: rows.uninformative_groups,
                tasks: tasks.clone(),
                ..self.epoch(&minibatches, &ids, chunks, batch.step)
            };
        }
        self.steps += 1;
        Ok(())
    }
}

/// Sums over one pass's minibatches (divided by the chunk count at the end).
#[derive(Default)]
struct EpochSums {
    surrogate: f64,
    entropy: f64,
    kl: f64,
    clipped: f64,
    moved: f64,
}

impl VlaLearner {
    /// The current policy's loss terms on one minibatch (with the KL term
    /// when `with_kl` and a reference exists).
    fn forward(&self, mb: &Minibatch, ids: &Tensor, with_kl: bool) -> Terms {
        let instruction = self
            .policy
            .encode_instructions(ids)
            .index_select(0, &mb.instruction_rows);
        let logits = self.policy.act(&mb.latent, &mb.proprio, &instruction) / self.temperature;
        let dist = ActionDistribution::new(&logits);
        let kl = match (&self.reference, with_kl) {
            (Some(reference), true) => {
                let reference_log_probs = tch::no_grad(|| {
                    let instruction = reference
                        .encode_instructions(ids)
                        .index_select(0, &mb.instruction_rows);
                    reference.act(&mb.latent, &mb.proprio, &instruction) / self.temperature
                })
                .log_softmax(-1, Kind::Float);
                let lp = logits.log_softmax(-1, Kind::Float);
                Some((lp.exp() * (&lp - reference_log_probs)).sum_dim_intlist(
                    -1,
                    false,
                    Kind::Float,
                ))
            }
            _ => None,
        };
        loss::terms(
            self.config.ratio,
            self.config.clip_bounds(),
            &TermInputs {
                log_probs: &dist.token_log_probs(&mb.tokens),
                old_log_probs: &mb.old_log_probs,
                mask: &mb.mask,
                advantage: &mb.advantage,
                entropy: &dist.token_entropy(),
                kl: kl.as_ref(),
            },
        )
    }

    /// One optimiser step over every minibatch (gradients accumulated);
    /// returns the pass's statistics. A minibatch whose loss is not finite is
    /// dropped with a warning.
    fn epoch(
        &mut self,
        minibatches: &[Minibatch],
        ids: &Tensor,
        chunks: usize,
        step: u64,
    ) -> LearnStats {
        let mut sums = EpochSums::default();
        self.optimizer.zero_grad();
        let value = |t: &Tensor| t.sum(Kind::Float).double_value(&[]);
        for mb in minibatches {
            let terms = self.forward(mb, ids, self.config.kl_coef > 0.0);
            let mut loss = (&mb.weight
                * (&terms.surrogate - self.config.entropy_coef * &terms.entropy))
                .sum(Kind::Float);
            if let Some(kl) = &terms.kl {
                loss += (&mb.weight * kl).sum(Kind::Float) * self.config.kl_coef;
            }
            // Checked before `backward`: dropping this minibatch leaves the
            // gradients the earlier ones accumulated in place.
            if !loss.double_value(&[]).is_finite() {
                tracing::warn!(step, "GRPO minibatch dropped: non-finite loss");
                continue;
            }
            loss.backward();
            sums.kl += terms.kl.as_ref().map_or(0.0, value);
            sums.surrogate += value(&(&mb.weight * &terms.surrogate));
            sums.entropy += value(&terms.entropy);
            sums.clipped += value(&terms.clipped);
            sums.moved += value(&terms.moved);
        }
        let grad_norm = self.optimizer.clip_grad_norm(self.config.grad_clip);
        self.optimizer.step();
        self.optimizer.zero_grad();
        let n = chunks as f64;
        LearnStats {
            chunks,
            rollouts: 0,
            uninformative_groups: 0,
            tasks: Vec::new(),
            surrogate: sums.surrogate,
            entropy: sums.entropy / n,
            kl: sums.kl / n,
            clip_fraction: sums.clipped / n,
            mean_abs_log_ratio: sums.moved / n,
            grad_norm,
            lr: self.optimizer.config().lr,
        }
    }
}

#[cfg(test)]
mod tests;
