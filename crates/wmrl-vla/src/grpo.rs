//! The VLA as the core's learner: a clipped-surrogate GRPO step on the
//! action tokens, with the core's per-sample advantages and stream weights.
//!
//! For every chunk c of every rollout i with a non-zero loss weight wᵢ, the
//! learner re-evaluates the policy on the chunk's input (the imagined
//! latent for world-model rollouts, the encoded recorded observation for
//! executed ones), and minimises
//!
//! ```text
//! L = Σᵢ wᵢ · mean_c [ −min(ρ_c Aᵢ, clip(ρ_c, 1−ε, 1+ε) Aᵢ) − β_H H_c + β_KL KL(π‖π_ref)_c ]
//! ρ_c = exp(log π(tokens_c | input_c) − log π_old(tokens_c))
//! ```
//!
//! (log-probabilities and entropies are exact sums over the chunk's tokens;
//! the KL term to the frozen SFT policy is exact over the bins and is
//! computed only when β_KL > 0). The policy optimised is the one that
//! sampled the rollouts: π(· | input) = softmax(logits / T) at the sampling
//! temperature T ([`VlaLearner::with_sampling_temperature`], 1 by default),
//! so ρ is an exact importance ratio whatever T the executor used. The
//! observation encoder is frozen: the world model lives in its latent space.
//! One call to `learn` takes `epochs` optimiser steps on the same batch, each
//! over all its chunks (gradients accumulated over minibatches); from the
//! second on, ρ differs from 1 and the clip bounds how far the batch moves
//! the policy (PPO's reuse of a batch).
//!
//! With [`RatioKind::TokenMean`] the ratio clipped is the chunk's ratio
//! normalised by its K tokens, ρ_c^(1/K) (the geometric mean of the token
//! ratios, GSPO's sequence ratio: Zheng et al. 2025, "Group Sequence Policy
//! Optimization"). The exact chunk ratio is a product of K = chunk_len ×
//! action_dim factors (56 for 8 × 7), so after one step on a batch most
//! chunks leave [1−ε, 1+ε] and further epochs learn from few of them; the
//! normalised ratio moves like one token's and ε keeps its per-token meaning.

use serde::{Deserialize, Serialize};
use std::path::Path;

use tch::{Device, Kind, Tensor};
use wmrl_core::fuse::SampleOut;
use wmrl_core::seams::{Batch, Policy};
use wmrl_tch::{AdamW, AdamWConfig};

use crate::distribution::ActionDistribution;
use crate::inference::{ActionChunk, PolicyInput};
use crate::model::{ENCODER_PREFIXES, VlaPolicy};
use crate::rollout::{AsVlaPolicy, ClosedLoopActor, EpisodeRecord, TaskPrompt, VlaAdapter};
use crate::{Error, Result};

/// Settings of the GRPO learner (every field has a default).
///
/// The defaults are the settings measured to learn on the shipped
/// LIBERO-Long tasks with this crate's policies (the `demo` run config,
/// `crates/wmrl-train/README.md`): four optimiser steps per batch at
/// lr 1e-4 on the token-mean ratio, with a KL penalty of 0.01. With one
/// step per batch on the exact chunk ratio at lr 1e-5 (sampling at T = 1)
/// greedy success stayed within the evaluation noise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GrpoConfig {
    /// AdamW learning rate.
    pub lr: f64,
    /// AdamW weight decay.
    pub weight_decay: f64,
    /// Clip range ε of the probability ratio.
    pub clip_eps: f64,
    /// Entropy bonus β_H (per chunk, summed over tokens).
    pub entropy_coef: f64,
    /// KL penalty β_KL to the frozen initial (SFT) policy; 0 disables it.
    pub kl_coef: f64,
    /// Gradient-norm clip.
    pub grad_clip: f64,
    /// Chunks per forward pass (gradients are accumulated).
    pub minibatch_chunks: usize,
    /// Optimiser steps per batch (each over the whole batch, ratios against
    /// the sampling policy, clipped).
    pub epochs: usize,
    /// Which ratio is clipped: `token-mean` (the chunk ratio's K-th root over
    /// its K tokens, GSPO; default) or `chunk` (the exact chunk ratio).
    pub ratio: RatioKind,
}

/// The probability ratio the clipped surrogate uses for a chunk of K tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RatioKind {
    /// ρ = π(tokens) / π_old(tokens), the product of the K token ratios.
    Chunk,
    /// ρ^(1/K): the geometric mean of the token ratios (GSPO).
    #[default]
    TokenMean,
}

impl RatioKind {
    /// The log of the clipped ratio, from the chunks' exact log-ratios over
    /// `tokens_per_chunk` tokens each.
    pub fn log_ratio(self, chunk_log_ratio: &Tensor, tokens_per_chunk: i64) -> Tensor {
        match self {
            RatioKind::Chunk => chunk_log_ratio.shallow_clone(),
            RatioKind::TokenMean => chunk_log_ratio / tokens_per_chunk.max(1) as f64,
        }
    }
}

impl Default for GrpoConfig {
    fn default() -> Self {
        Self {
            lr: 1e-4,
            weight_decay: 0.0,
            clip_eps: 0.2,
            entropy_coef: 0.0,
            kl_coef: 0.01,
            grad_clip: 1.0,
            minibatch_chunks: 1024,
            epochs: 4,
            ratio: RatioKind::TokenMean,
        }
    }
}

impl GrpoConfig {
    /// Checks every value.
    pub fn validate(&self) -> Result<()> {
        let bad = |field: &str, expected: &str, found: f64| {
            Err(Error::Config {
                origin: format!("GRPO field `{field}`"),
                message: format!("expected {expected}, found {found}"),
            })
        };
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return bad("lr", "a finite number > 0", self.lr);
        }
        if !(self.clip_eps.is_finite() && self.clip_eps > 0.0) {
            return bad("clip_eps", "a finite number > 0", self.clip_eps);
        }
        for (field, v) in [
            ("weight_decay", self.weight_decay),
            ("entropy_coef", self.entropy_coef),
            ("kl_coef", self.kl_coef),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return bad(field, "a finite number ≥ 0", v);
            }
        }
        if !(self.grad_clip.is_finite() && self.grad_clip > 0.0) {
            return bad("grad_clip", "a finite number > 0", self.grad_clip);
        }
        if self.epochs == 0 {
            return bad("epochs", "≥ 1", 0.0);
        }
        if self.minibatch_chunks == 0 {
            return bad("minibatch_chunks", "≥ 1", 0.0);
        }
        Ok(())
    }
}

/// What the last step did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LearnStats {
    /// Chunks in the loss.
    pub chunks: usize,
    /// Rollouts in the loss (non-zero weight).
    pub rollouts: usize,
    /// Surrogate loss (weighted).
    pub surrogate: f64,
    /// Mean entropy per chunk (nats, summed over tokens).
    pub entropy: f64,
    /// Mean KL to the reference per chunk (0 when disabled).
    pub kl: f64,
    /// Fraction of chunks whose ratio (of [`GrpoConfig::ratio`]'s kind) was clipped.
    pub clip_fraction: f64,
    /// Mean |log ρ| of that ratio (how far the policy moved from the one that sampled).
    pub mean_abs_log_ratio: f64,
    /// Gradient norm before clipping.
    pub grad_norm: f64,
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
    /// Freezes the observation encoder of `policy` and builds AdamW over the rest.
    pub fn new(mut policy: VlaPolicy, config: GrpoConfig) -> Result<Self> {
        config.validate()?;
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
            return Err(Error::Config {
                origin: "GRPO sampling temperature".into(),
                message: format!("expected a finite number > 0, found {temperature}"),
            });
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

    /// Latent and raw proprioception `[K, D]`, `[K, P]` of a rollout's chunks.
    fn chunk_inputs(&self, record: &EpisodeRecord) -> Result<(Vec<f32>, Vec<f32>)> {
        let k = record.chunks.len();
        if record.inputs.len() == k {
            return Ok((
                record
                    .inputs
                    .iter()
                    .flat_map(|i| i.latent.iter().copied())
                    .collect(),
                record
                    .inputs
                    .iter()
                    .flat_map(|i| i.proprio.iter().copied())
                    .collect(),
            ));
        }
        if record.observations.len() < k {
            return Err(Error::mismatch(
                format!(
                    "rollout of task {} state {}: inputs or recorded observations per chunk",
                    record.task_index, record.state_index
                ),
                k,
                record.observations.len().max(record.inputs.len()),
            ));
        }
        let obs = &record.observations[..k];
        let agent: Vec<_> = obs.iter().map(|o| &o.agent_view).collect();
        let wrist: Vec<_> = obs.iter().map(|o| &o.wrist_view).collect();
        let device = self.policy.device();
        let _guard = tch::no_grad_guard();
        let z = self.policy.encode(
            &crate::inference::images_to_tensor(&agent, device)?,
            &crate::inference::images_to_tensor(&wrist, device)?,
        );
        let z: Vec<f32> =
            Vec::try_from(z.to_device(Device::Cpu).to_kind(Kind::Float).flatten(0, -1))
                .map_err(Error::torch("reading latents"))?;
        Ok((
            z,
            obs.iter().flat_map(|o| o.proprio.iter().copied()).collect(),
        ))
    }

    /// The gradient of the loss's policy-gradient term at the sampling
    /// policy, −Σᵢ wᵢ · mean_c ρ_c Aᵢ over the samples `keep` accepts (no
    /// entropy or KL term; at ρ = 1 the clip is inactive), flattened over the
    /// trainable parameters in update order. The policy, the optimiser and
    /// the counters are left as they were. `None` when no accepted sample has
    /// a chunk and a non-zero weight.
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
            return Ok(None);
        }
        let ids = self.policy.tokenize(&rows.instructions);
        self.optimizer.zero_grad();
        for mb in &self.minibatches(&rows) {
            let ratio = self.forward(mb, &ids).log_ratio.exp();
            (-(&mb.weight * ratio * &mb.advantage).sum(Kind::Float)).backward();
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

/// The chunks of a batch that carry a non-zero loss weight, flattened row by
/// row (one row per chunk).
#[derive(Default)]
struct ChunkRows<'a> {
    /// Encoded observations `[n · D]`.
    latents: Vec<f32>,
    /// Raw proprioception `[n · P]`.
    proprios: Vec<f32>,
    /// Action tokens `[n · chunk_len · action_dim]`.
    tokens: Vec<i64>,
    /// Log-probability of the tokens under the sampling policy.
    old_log_probs: Vec<f32>,
    /// The rollout's loss weight divided by its chunk count.
    weights: Vec<f32>,
    /// The rollout's advantage.
    advantages: Vec<f32>,
    /// Row of the chunk's instruction in `instructions`.
    instruction_rows: Vec<i64>,
    /// Distinct instructions of the batch.
    instructions: Vec<&'a str>,
    /// Rollouts that contributed chunks.
    rollouts: usize,
}

impl ChunkRows<'_> {
    fn len(&self) -> usize {
        self.old_log_probs.len()
    }
}

/// One minibatch of chunks as tensors on the policy's device: built once per
/// batch and reused by every epoch.
struct Minibatch {
    latent: Tensor,
    proprio: Tensor,
    tokens: Tensor,
    instruction_rows: Tensor,
    old_log_prob: Tensor,
    advantage: Tensor,
    weight: Tensor,
}

/// What [`VlaLearner::forward`] computes for one minibatch.
struct MinibatchForward {
    /// Logits divided by the sampling temperature.
    logits: Tensor,
    /// Their distribution over the action bins.
    dist: ActionDistribution,
    /// Log of the clipped ratio against the sampling policy.
    log_ratio: Tensor,
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
    /// Flattens the chunks of every rollout that `keep` accepts and that has
    /// a non-zero loss weight.
    fn chunk_rows<'a>(
        &self,
        batch: &'a Batch<TaskPrompt, EpisodeRecord>,
        keep: &dyn Fn(&SampleOut) -> bool,
    ) -> Result<ChunkRows<'a>> {
        let c = self.policy.config();
        let (d, p) = (c.latent_dim as usize, c.proprio_dim as usize);
        let per = c.tokens_per_chunk() as usize;
        let mut rows = ChunkRows::default();
        for sample in &batch.samples {
            let w = sample.signal.loss_weight;
            let record = &sample.rollout;
            if w == 0.0 || record.chunks.is_empty() || !keep(&sample.signal) {
                continue;
            }
            let instruction = batch.prompts[sample.signal.group].instruction.as_str();
            let row = match rows.instructions.iter().position(|s| *s == instruction) {
                Some(i) => i,
                None => {
                    rows.instructions.push(instruction);
                    rows.instructions.len() - 1
                }
            };
            let (latents, proprios) = self.chunk_inputs(record)?;
            let k = record.chunks.len();
            if latents.len() != k * d || proprios.len() != k * p {
                return Err(Error::mismatch(
                    "chunk input sizes",
                    k * (d + p),
                    latents.len() + proprios.len(),
                ));
            }
            for chunk in &record.chunks {
                if chunk.tokens.len() != per {
                    return Err(Error::mismatch("tokens per chunk", per, chunk.tokens.len()));
                }
                rows.tokens.extend_from_slice(&chunk.tokens);
                rows.old_log_probs.push(chunk.log_prob);
                rows.weights.push((w / k as f64) as f32);
                rows.advantages.push(sample.signal.advantage as f32);
                rows.instruction_rows.push(row as i64);
            }
            rows.latents.extend(latents);
            rows.proprios.extend(proprios);
            rows.rollouts += 1;
        }
        Ok(rows)
    }

    /// Cuts the rows into minibatches of `minibatch_chunks` chunks.
    fn minibatches(&self, rows: &ChunkRows<'_>) -> Vec<Minibatch> {
        let c = self.policy.config();
        let (d, p) = (c.latent_dim, c.proprio_dim);
        let per = c.tokens_per_chunk();
        let device = self.policy.device();
        let n = rows.len();
        let size = self.config.minibatch_chunks;
        (0..n)
            .step_by(size)
            .map(|start| {
                let end = (start + size).min(n);
                let m = (end - start) as i64;
                let f32s = |v: &[f32], width: i64| {
                    let w = width as usize;
                    Tensor::from_slice(&v[start * w..end * w])
                        .view([m, width])
                        .to_device(device)
                };
                let column = |v: &[f32]| Tensor::from_slice(&v[start..end]).to_device(device);
                Minibatch {
                    latent: f32s(&rows.latents, d),
                    proprio: f32s(&rows.proprios, p),
                    tokens: Tensor::from_slice(
                        &rows.tokens[start * per as usize..end * per as usize],
                    )
                    .view([m, c.action.chunk_len, c.action.action_dim])
                    .to_device(device),
                    instruction_rows: Tensor::from_slice(&rows.instruction_rows[start..end])
                        .to_device(device),
                    old_log_prob: column(&rows.old_log_probs),
                    advantage: column(&rows.advantages),
                    weight: column(&rows.weights),
                }
            })
            .collect()
    }

    /// The current policy on one minibatch: its tempered logits, their
    /// distribution, and the log of the clipped ratio (of
    /// [`GrpoConfig::ratio`]'s kind) against the sampling policy.
    fn forward(&self, mb: &Minibatch, ids: &Tensor) -> MinibatchForward {
        let instruction = self
            .policy
            .encode_instructions(ids)
            .index_select(0, &mb.instruction_rows);
        let logits = self.policy.act(&mb.latent, &mb.proprio, &instruction) / self.temperature;
        let dist = ActionDistribution::new(&logits);
        let log_ratio = self.config.ratio.log_ratio(
            &(dist.log_prob(&mb.tokens) - &mb.old_log_prob),
            self.policy.config().tokens_per_chunk(),
        );
        MinibatchForward {
            logits,
            dist,
            log_ratio,
        }
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
        let eps = self.config.clip_eps;
        let mut sums = EpochSums::default();
        self.optimizer.zero_grad();
        for mb in minibatches {
            let MinibatchForward {
                logits,
                dist,
                log_ratio,
            } = self.forward(mb, ids);
            let ratio = log_ratio.exp();
            let unclipped = &ratio * &mb.advantage;
            let clipped = ratio.clamp(1.0 - eps, 1.0 + eps) * &mb.advantage;
            let surrogate = -unclipped.minimum(&clipped);
            let entropy = dist.entropy();
            let mut loss =
                (&mb.weight * (&surrogate - self.config.entropy_coef * &entropy)).sum(Kind::Float);
            let mut kl = 0.0;
            if let Some(reference) = &self.reference {
                let reference_log_probs = tch::no_grad(|| {
                    let instruction = reference
                        .encode_instructions(ids)
                        .index_select(0, &mb.instruction_rows);
                    reference.act(&mb.latent, &mb.proprio, &instruction) / self.temperature
                })
                .log_softmax(-1, Kind::Float);
                let lp = logits.log_softmax(-1, Kind::Float);
                let kl_chunk = (lp.exp() * (&lp - reference_log_probs))
                    .sum_dim_intlist(-1, false, Kind::Float)
                    .sum_dim_intlist([1, 2].as_slice(), false, Kind::Float);
                loss += (&mb.weight * &kl_chunk).sum(Kind::Float) * self.config.kl_coef;
                kl = kl_chunk.sum(Kind::Float).double_value(&[]);
            }
            // Checked before `backward`: dropping this minibatch leaves the
            // gradients the earlier ones accumulated in place.
            if !loss.double_value(&[]).is_finite() {
                tracing::warn!(step, "GRPO minibatch dropped: non-finite loss");
                continue;
            }
            loss.backward();
            sums.kl += kl;
            sums.surrogate += (&mb.weight * &surrogate).sum(Kind::Float).double_value(&[]);
            sums.entropy += entropy.sum(Kind::Float).double_value(&[]);
            sums.clipped += ratio
                .gt(1.0 + eps)
                .logical_or(&ratio.lt(1.0 - eps))
                .sum(Kind::Float)
                .double_value(&[]);
            sums.moved += log_ratio.abs().sum(Kind::Float).double_value(&[]);
        }
        let grad_norm = self.optimizer.clip_grad_norm(self.config.grad_clip);
        self.optimizer.step();
        self.optimizer.zero_grad();
        let n = chunks as f64;
        LearnStats {
            chunks,
            rollouts: 0,
            surrogate: sums.surrogate,
            entropy: sums.entropy / n,
            kl: sums.kl / n,
            clip_fraction: sums.clipped / n,
            mean_abs_log_ratio: sums.moved / n,
            grad_norm,
        }
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
        self.last = LearnStats {
            chunks,
            rollouts: rows.rollouts,
            ..Default::default()
        };
        if chunks == 0 {
            return Ok(());
        }
        let ids = self.policy.tokenize(&rows.instructions);
        let minibatches = self.minibatches(&rows);
        // Statistics are those of the last epoch.
        for _ in 0..self.config.epochs {
            self.last = LearnStats {
                rollouts: rows.rollouts,
                ..self.epoch(&minibatches, &ids, chunks, batch.step)
            };
        }
        self.steps += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::VlaConfig;
    use crate::rollout::ChunkInput;
    use crate::tokenizer::Tokenizer;
    use rand::{Rng, SeedableRng};
    use wmrl_core::advantage::Stream;
    use wmrl_core::diagnostics::StepDiagnostics;
    use wmrl_core::fuse::SampleOut;
    use wmrl_core::seams::BatchSample;

    /// libtorch's global generator is shared by every test thread: tests of
    /// this module that seed it and draw from it take this lock.
    static TORCH_RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// Step diagnostics are not read by the learner; any valid value will do.
    fn diagnostics() -> StepDiagnostics {
        serde_json::from_value(serde_json::json!({
            "step": 0, "mode": "real", "groups": 1, "anchor_groups": 1, "world_model_groups": 0,
            "anchor_samples": 32, "world_model_samples": 0,
            "stream_weights": {"anchor": 1.0, "world_model": 0.0, "noise_ratio": 0.0},
            "calibrator_pairs": 0, "calibrator_blocks": 0, "calibrator_identity": true,
            "zero_variance_groups": 0, "zero_variance_share": 0.0
        }))
        .unwrap()
    }

    /// GRPO raises the probability of the rewarded actions: rollouts whose
    /// first action dimension is positive get reward 1, the rest 0, with
    /// group-normalised advantages; after a few steps the policy samples
    /// positive first dimensions far more often, and the encoder is untouched.
    #[test]
    fn grpo_steps_raise_the_rewarded_actions_and_leave_the_encoder_alone() {
        let _rng = TORCH_RNG.lock().unwrap_or_else(|e| e.into_inner());
        tch::manual_seed(0);
        let config = VlaConfig::load("tiny", &[]).unwrap();
        let tokenizer = Tokenizer::from_instructions(["open the drawer"]);
        let policy = VlaPolicy::new(config.model, tokenizer, Device::Cpu).unwrap();
        let encoder_before = policy.encoder_fingerprint();
        let mut learner = VlaLearner::new(
            policy,
            GrpoConfig {
                lr: 3e-3,
                kl_coef: 0.01,
                entropy_coef: 0.001,
                epochs: 1,
                ratio: RatioKind::Chunk,
                ..Default::default()
            },
        )
        .unwrap();
        let prompt = TaskPrompt {
            task_index: 0,
            state_index: 0,
            instruction: "open the drawer".into(),
        };
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let latent: Vec<f32> = (0..64).map(|_| rng.random_range(-1.0..1.0)).collect();
        let input = ChunkInput {
            latent: latent.clone(),
            proprio: vec![0.0; 15],
        };
        let sample_batch = |learner: &VlaLearner, seed: u64| -> Vec<EpisodeRecord> {
            let vla = learner.policy();
            let _g = tch::no_grad_guard();
            let z = Tensor::from_slice(&latent).view([1, 64]).repeat([32, 1]);
            let p = Tensor::zeros([32, 15], (Kind::Float, Device::Cpu));
            let instr = vla
                .encode_instructions(&vla.tokenize(&["open the drawer"]))
                .repeat([32, 1]);
            let logits = vla.act(&z, &p, &instr);
            tch::manual_seed(seed as i64);
            let dist = ActionDistribution::new(&logits);
            let toks = dist.sample();
            let lps = dist.log_prob(&toks);
            vla.chunks_from_tokens(&toks, &lps)
                .into_iter()
                .map(|chunk| EpisodeRecord {
                    chunks: vec![chunk],
                    inputs: vec![input.clone()],
                    ..Default::default()
                })
                .collect()
        };
        let positive = |r: &EpisodeRecord| r.chunks[0].actions[0] > 0.0;
        let rate = |records: &[EpisodeRecord]| {
            records.iter().filter(|r| positive(r)).count() as f64 / records.len() as f64
        };
        let before = rate(&sample_batch(&learner, 1000));
        for step in 0..40 {
            let records = sample_batch(&learner, step);
            let rewards: Vec<f64> = records
                .iter()
                .map(|r| f64::from(u8::from(positive(r))))
                .collect();
            let mean = rewards.iter().sum::<f64>() / rewards.len() as f64;
            let std = (rewards.iter().map(|r| (r - mean).powi(2)).sum::<f64>()
                / rewards.len() as f64)
                .sqrt()
                .max(1e-6);
            let samples = records
                .into_iter()
                .zip(&rewards)
                .enumerate()
                .map(|(i, (rollout, r))| BatchSample {
                    signal: SampleOut {
                        group: 0,
                        sample: i,
                        stream: Stream::Anchor,
                        reward: *r,
                        advantage: (r - mean) / std,
                        loss_weight: 1.0 / 32.0,
                    },
                    rollout,
                })
                .collect();
            learner
                .learn(Batch {
                    step,
                    prompts: vec![prompt.clone()],
                    samples,
                    diagnostics: diagnostics(),
                })
                .unwrap();
            assert!(learner.last.grad_norm.is_finite() && learner.last.chunks == 32);
        }
        let after = rate(&sample_batch(&learner, 1000));
        eprintln!("P(first dimension > 0): {before:.2} -> {after:.2}");
        assert!(
            after > before + 0.3 && after > 0.8,
            "P(first dimension > 0): {before:.2} -> {after:.2}"
        );
        assert_eq!(learner.policy().encoder_fingerprint(), encoder_before);
        assert!(learner.last.kl > 0.0);
    }

    /// `n` one-chunk rollouts sampled at `temperature` from one latent
    /// (64 wide) and zero proprioception, instruction "open the drawer".
    fn one_chunk_rollouts(
        policy: &VlaPolicy,
        latent: &[f32],
        n: i64,
        temperature: f64,
    ) -> Vec<EpisodeRecord> {
        let _g = tch::no_grad_guard();
        let z = Tensor::from_slice(latent).view([1, 64]).repeat([n, 1]);
        let p = Tensor::zeros([n, 15], (Kind::Float, Device::Cpu));
        let instr = policy
            .encode_instructions(&policy.tokenize(&["open the drawer"]))
            .repeat([n, 1]);
        let dist = ActionDistribution::with_temperature(&policy.act(&z, &p, &instr), temperature);
        let toks = dist.sample();
        let lps = dist.log_prob(&toks);
        policy
            .chunks_from_tokens(&toks, &lps)
            .into_iter()
            .map(|chunk| EpisodeRecord {
                chunks: vec![chunk],
                inputs: vec![ChunkInput {
                    latent: latent.to_vec(),
                    proprio: vec![0.0; 15],
                }],
                ..Default::default()
            })
            .collect()
    }

    /// The policy gradient is linear in the samples: the anchor stream's
    /// plus the world-model stream's is the whole batch's; measuring it
    /// changes nothing (the same call twice gives the same vector, and no
    /// step is counted).
    #[test]
    fn the_policy_gradient_splits_over_streams_and_changes_nothing() {
        let _rng = TORCH_RNG.lock().unwrap_or_else(|e| e.into_inner());
        tch::manual_seed(5);
        let config = VlaConfig::load("tiny", &[]).unwrap();
        let tokenizer = Tokenizer::from_instructions(["open the drawer"]);
        let policy = VlaPolicy::new(config.model, tokenizer, Device::Cpu).unwrap();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let latent: Vec<f32> = (0..64).map(|_| rng.random_range(-1.0..1.0)).collect();
        let records = one_chunk_rollouts(&policy, &latent, 16, 1.0);
        let mut learner = VlaLearner::new(policy, GrpoConfig::default()).unwrap();
        let batch = Batch {
            step: 0,
            prompts: vec![TaskPrompt {
                task_index: 0,
                state_index: 0,
                instruction: "open the drawer".into(),
            }],
            samples: records
                .into_iter()
                .enumerate()
                .map(|(i, rollout)| BatchSample {
                    signal: SampleOut {
                        group: 0,
                        sample: i,
                        stream: if i % 4 == 0 {
                            Stream::Anchor
                        } else {
                            Stream::WorldModel
                        },
                        reward: (i % 3) as f64,
                        advantage: (i % 3) as f64 - 1.0,
                        loss_weight: 1.0 / 16.0,
                    },
                    rollout,
                })
                .collect(),
            diagnostics: diagnostics(),
        };
        let mut gradient = |keep: &dyn Fn(&SampleOut) -> bool| {
            learner.policy_gradient(&batch, keep).unwrap().unwrap()
        };
        let all = gradient(&|_| true);
        let anchors = gradient(&|s| s.stream == Stream::Anchor);
        let imagined = gradient(&|s| s.stream == Stream::WorldModel);
        assert_eq!(gradient(&|_| true), all, "measuring changed the learner");
        let norm = all
            .iter()
            .map(|g| f64::from(*g).powi(2))
            .sum::<f64>()
            .sqrt();
        let gap = all
            .iter()
            .zip(anchors.iter().zip(&imagined))
            .map(|(a, (x, y))| f64::from(a - x - y).powi(2))
            .sum::<f64>()
            .sqrt();
        assert!(norm > 1e-3, "|g| = {norm}");
        assert!(gap < 1e-4 * norm, "|g − g_A − g_W| = {gap}, |g| = {norm}");
        assert!(
            learner
                .policy_gradient(&batch, &|_| false)
                .unwrap()
                .is_none()
        );
        assert_eq!((learner.steps, learner.optimizer.steps()), (0, 0));
    }

    /// Rollouts sampled at temperature T have ratio exactly 1 under a learner
    /// told T (the first step evaluates the policy that sampled them), and
    /// not under one that assumes T = 1; with several epochs per batch the
    /// last one sees a moved policy.
    #[test]
    fn the_ratio_is_exact_at_the_sampling_temperature() {
        let _rng = TORCH_RNG.lock().unwrap_or_else(|e| e.into_inner());
        tch::manual_seed(0);
        let config = VlaConfig::load("tiny", &[]).unwrap();
        let tokenizer = Tokenizer::from_instructions(["open the drawer"]);
        let policy = VlaPolicy::new(config.model, tokenizer, Device::Cpu).unwrap();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let latent: Vec<f32> = (0..64).map(|_| rng.random_range(-1.0..1.0)).collect();
        let temperature = 0.5;
        let records = one_chunk_rollouts(&policy, &latent, 16, temperature);
        let moved = |learner_temperature: f64, epochs: usize| {
            let config = GrpoConfig {
                epochs,
                lr: 1e-5,
                kl_coef: 0.0,
                ratio: RatioKind::Chunk,
                ..Default::default()
            };
            let mut learner = VlaLearner::new(policy.try_clone().unwrap(), config)
                .unwrap()
                .with_sampling_temperature(learner_temperature)
                .unwrap();
            let samples = records
                .iter()
                .enumerate()
                .map(|(i, rollout)| BatchSample {
                    signal: SampleOut {
                        group: 0,
                        sample: i,
                        stream: Stream::Anchor,
                        reward: (i % 2) as f64,
                        advantage: if i % 2 == 0 { -1.0 } else { 1.0 },
                        loss_weight: 1.0 / 16.0,
                    },
                    rollout: rollout.clone(),
                })
                .collect();
            learner
                .learn(Batch {
                    step: 0,
                    prompts: vec![TaskPrompt {
                        task_index: 0,
                        state_index: 0,
                        instruction: "open the drawer".into(),
                    }],
                    samples,
                    diagnostics: diagnostics(),
                })
                .unwrap();
            learner.last.mean_abs_log_ratio
        };
        let exact = moved(temperature, 1);
        let assumed_one = moved(1.0, 1);
        // Later epochs on the same batch see the policy their steps moved.
        let third_epoch = moved(temperature, 3);
        assert!(
            third_epoch > 10.0 * exact.max(1e-7),
            "{third_epoch} vs {exact}"
        );
        assert!(
            exact < 1e-4,
            "|log ratio| at the sampling temperature: {exact}"
        );
        assert!(
            assumed_one > 0.1,
            "|log ratio| assuming T = 1: {assumed_one}"
        );
        assert!(
            VlaLearner::new(policy, GrpoConfig::default())
                .unwrap()
                .with_sampling_temperature(0.0)
                .is_err()
        );
    }

    /// The token-mean ratio is the chunk ratio's K-th root; configs name it
    /// `token-mean`.
    #[test]
    fn the_token_mean_ratio_is_the_chunk_ratios_root() {
        let log_ratio = Tensor::from_slice(&[5.6f32, -2.8, 0.0]);
        let chunk = RatioKind::Chunk.log_ratio(&log_ratio, 56);
        let mean = RatioKind::TokenMean.log_ratio(&log_ratio, 56);
        assert_eq!(Vec::<f32>::try_from(chunk).unwrap(), vec![5.6, -2.8, 0.0]);
        let mean = Vec::<f32>::try_from(mean).unwrap();
        for (got, want) in mean.iter().zip([0.1f32, -0.05, 0.0]) {
            assert!((got - want).abs() < 1e-6, "{mean:?}");
        }
        let config: GrpoConfig = serde_json::from_str(r#"{"ratio": "token-mean"}"#).unwrap();
        assert_eq!(config.ratio, RatioKind::TokenMean);
        assert!(serde_json::from_str::<GrpoConfig>(r#"{"ratio": "token"}"#).is_err());
    }
}
