//! Batch assembly for the GRPO learner: the chunks that enter the loss,
//! flattened into rows (one per chunk) and cut into minibatches.
//!
//! A rollout enters when its loss weight is non-zero and its group is
//! informative: a group whose advantages are all zero (its rewards, or
//! calibrated scores, all equal) contributes no row at all, so it neither
//! costs a forward pass nor pulls the policy through the KL or entropy
//! terms. Each row keeps a mask of the tokens of the actions that were
//! executed (or imagined) before the policy re-planned.

use std::collections::BTreeMap;

use tch::{Device, Kind, Tensor};
use wmrl_core::fuse::SampleOut;
use wmrl_core::seams::Batch;

use super::VlaLearner;
use super::config::RatioKind;
use crate::rollout::{EpisodeRecord, TaskPrompt};
use crate::{Error, Result};

/// The chunks of a batch in the loss, flattened row by row.
#[derive(Default)]
pub(super) struct ChunkRows<'a> {
    /// Encoded observations `[n · D]`.
    pub latents: Vec<f32>,
    /// Raw proprioception `[n · P]`.
    pub proprios: Vec<f32>,
    /// Action tokens `[n · chunk_len · action_dim]`.
    pub tokens: Vec<i64>,
    /// Per-token log-probabilities under the sampling policy, same shape.
    pub old_log_probs: Vec<f32>,
    /// 1 for the tokens of executed actions, 0 otherwise, same shape.
    pub masks: Vec<f32>,
    /// The rollout's loss weight divided by its chunk count.
    pub weights: Vec<f32>,
    /// The rollout's advantage.
    pub advantages: Vec<f32>,
    /// Row of the chunk's instruction in `instructions`.
    pub instruction_rows: Vec<i64>,
    /// Distinct instructions of the batch.
    pub instructions: Vec<&'a str>,
    /// Rollouts that contributed chunks.
    pub rollouts: usize,
    /// Groups left out because every advantage in them was zero.
    pub uninformative_groups: usize,
    /// Rollouts otherwise in the loss that were left out with their group.
    pub uninformative_rollouts: usize,
}

impl ChunkRows<'_> {
    pub fn len(&self) -> usize {
        self.weights.len()
    }
}

/// One minibatch of rows as tensors on the policy's device: built once per
/// batch and reused by every epoch.
pub(super) struct Minibatch {
    pub latent: Tensor,
    pub proprio: Tensor,
    pub tokens: Tensor,
    pub instruction_rows: Tensor,
    pub old_log_probs: Tensor,
    pub mask: Tensor,
    pub advantage: Tensor,
    pub weight: Tensor,
}

/// The groups of `batch` per task (in task order), and how many of them are
/// informative: some sample's advantage is non-zero.
pub(super) fn task_groups(batch: &Batch<TaskPrompt, EpisodeRecord>) -> Vec<super::TaskGroups> {
    let mut informative: BTreeMap<usize, bool> = BTreeMap::new();
    for sample in &batch.samples {
        *informative.entry(sample.signal.group).or_default() |= sample.signal.advantage != 0.0;
    }
    let mut tasks: BTreeMap<usize, super::TaskGroups> = BTreeMap::new();
    for (group, informative) in informative {
        let task = batch.prompts[group].task_index;
        let entry = tasks.entry(task).or_insert(super::TaskGroups {
            task,
            ..Default::default()
        });
        entry.groups += 1;
        entry.informative += usize::from(informative);
    }
    tasks.into_values().collect()
}

/// The groups of `batch` in which every sample's advantage is zero.
fn uninformative_groups(batch: &Batch<TaskPrompt, EpisodeRecord>) -> Vec<usize> {
    let mut informative: BTreeMap<usize, bool> = BTreeMap::new();
    for sample in &batch.samples {
        *informative.entry(sample.signal.group).or_default() |= sample.signal.advantage != 0.0;
    }
    informative
        .into_iter()
        .filter(|(_, informative)| !informative)
        .map(|(group, _)| group)
        .collect()
}

impl VlaLearner {
    /// Latent and raw proprioception `[K, D]`, `[K, P]` of a rollout's chunks.
    pub(super) fn chunk_inputs(&self, record: &EpisodeRecord) -> Result<(Vec<f32>, Vec<f32>)> {
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

    /// Flattens the chunks of every rollout that `keep` accepts, that has a
    /// non-zero loss weight and whose group is informative.
    pub(super) fn chunk_rows<'a>(
        &self,
        batch: &'a Batch<TaskPrompt, EpisodeRecord>,
        keep: &dyn Fn(&SampleOut) -> bool,
    ) -> Result<ChunkRows<'a>> {
        let c = self.policy.config();
        let (d, p) = (c.latent_dim as usize, c.proprio_dim as usize);
        let per = c.tokens_per_chunk() as usize;
        let dims = c.action.action_dim as usize;
        let skipped = uninformative_groups(batch);
        let mut rows = ChunkRows {
            uninformative_groups: skipped.len(),
            ..Default::default()
        };
        for sample in &batch.samples {
            let w = sample.signal.loss_weight;
            let record = &sample.rollout;
            if w == 0.0 || record.chunks.is_empty() || !keep(&sample.signal) {
                continue;
            }
            if skipped.contains(&sample.signal.group) {
                rows.uninformative_rollouts += 1;
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
                let executed = chunk.executed.min(chunk.chunk_len) * dims;
                if chunk.token_log_probs.len() == per {
                    rows.old_log_probs.extend_from_slice(&chunk.token_log_probs);
                } else if executed == per && self.config.ratio != RatioKind::Token {
                    // Only the chunk's total is known: spread it evenly, which
                    // keeps every whole-chunk ratio exact.
                    let share = chunk.log_prob / per as f32;
                    rows.old_log_probs.extend(std::iter::repeat_n(share, per));
                } else {
                    return Err(Error::mismatch(
                        format!(
                            "per-token log-probabilities of a chunk of task {} state {} \
                             (needed for per-token ratios or partly executed chunks)",
                            record.task_index, record.state_index
                        ),
                        per,
                        chunk.token_log_probs.len(),
                    ));
                }
                rows.masks
                    .extend((0..per).map(|t| if t < executed { 1.0 } else { 0.0 }));
                rows.tokens.extend_from_slice(&chunk.tokens);
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
    pub(super) fn minibatches(&self, rows: &ChunkRows<'_>) -> Vec<Minibatch> {
        let c = self.policy.config();
        let (d, p) = (c.latent_dim, c.proprio_dim);
        let (chunk_len, action_dim) = (c.action.chunk_len, c.action.action_dim);
        let per = c.tokens_per_chunk() as usize;
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
                let per_token = |v: &[f32]| {
                    Tensor::from_slice(&v[start * per..end * per])
                        .view([m, chunk_len, action_dim])
                        .to_device(device)
                };
                let column = |v: &[f32]| Tensor::from_slice(&v[start..end]).to_device(device);
                Minibatch {
                    latent: f32s(&rows.latents, d),
                    proprio: f32s(&rows.proprios, p),
                    tokens: Tensor::from_slice(&rows.tokens[start * per..end * per])
                        .view([m, chunk_len, action_dim])
                        .to_device(device),
                    instruction_rows: Tensor::from_slice(&rows.instruction_rows[start..end])
                        .to_device(device),
                    old_log_probs: per_token(&rows.old_log_probs),
                    mask: per_token(&rows.masks),
                    advantage: column(&rows.advantages),
                    weight: column(&rows.weights),
                }
            })
            .collect()
    }
}
