//! Training the world model on executed episodes, and scoring them.
//!
//! Each optimiser step draws `batch_size` episodes and minimises
//!
//! - **one-step dynamics**: mean squared error of `(z_{t+1}, p̄_{t+1})`
//!   predicted from the real `(z_t, p̄_t, a_t)`, over every chunk;
//! - **multi-step (open-loop) dynamics**: the same error along `window`
//!   chunks rolled out from a random start on the model's own predictions;
//! - **success on real latents**: class-balanced binary cross-entropy of the
//!   per-boundary "goal reached" logit (positive only at the last boundary of
//!   a successful episode);
//! - **success on replayed latents**: class-balanced binary cross-entropy of
//!   the episode score computed, as for anchors and imagined episodes, on
//!   the open-loop replay of the episode's actions from its first latent
//!   (dynamics detached: the dynamics learn only from their own losses).
//!
//! A batch whose loss is not finite is dropped and logged with its tasks
//! and seeds; training goes on.

use rand::Rng;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use tch::nn;
use tch::{Device, Kind, Tensor};
use wmrl_tch::{AdamW, AdamWConfig};

use crate::model::{LatentWorldModel, episode_logits};
use crate::trajectory::LatentTrajectory;
use crate::{Error, Result};

/// Episodes padded into tensors.
pub struct PaddedBatch {
    /// Latents `[B, T+1, D]` (zero past each episode's end).
    pub latents: Tensor,
    /// Normalised proprioception `[B, T+1, P]`.
    pub proprio: Tensor,
    /// Actions `[B, T, C·A]`.
    pub actions: Tensor,
    /// Chunks of each episode `[B]` (int64).
    pub chunks: Tensor,
    /// Task ids `[B]` (int64).
    pub tasks: Tensor,
    /// Real success `[B]` (float 0/1).
    pub success: Tensor,
}

impl PaddedBatch {
    /// Pads `episodes` for `model` (proprioception normalised with its statistics).
    pub fn new(model: &LatentWorldModel, episodes: &[&LatentTrajectory]) -> Result<Self> {
        let dims = model.dims();
        let device = model.device();
        let t = episodes.iter().map(|e| e.chunks(&dims)).max().unwrap_or(0);
        if t == 0 {
            return Err(Error::Empty {
                what: "world-model batch".into(),
            });
        }
        let b = episodes.len();
        let mut z = vec![0f32; b * (t + 1) * dims.latent];
        let mut p = vec![0f32; b * (t + 1) * dims.proprio];
        let mut a = vec![0f32; b * t * dims.chunk()];
        for (i, e) in episodes.iter().enumerate() {
            model.check_task(e.task_index)?;
            let zo = i * (t + 1) * dims.latent;
            z[zo..zo + e.latents.len()].copy_from_slice(&e.latents);
            let po = i * (t + 1) * dims.proprio;
            p[po..po + e.proprio.len()].copy_from_slice(&e.proprio);
            // Rows past the end repeat the last proprioception (keeps normalisation tame).
            let last = &e.proprio[e.proprio.len() - dims.proprio..];
            for row in e.chunks(&dims) + 1..=t {
                p[po + row * dims.proprio..po + (row + 1) * dims.proprio].copy_from_slice(last);
            }
            let ao = i * t * dims.chunk();
            a[ao..ao + e.actions.len()].copy_from_slice(&e.actions);
        }
        let (b, t) = (b as i64, t as i64);
        let proprio = Tensor::from_slice(&p)
            .view([b, t + 1, dims.proprio as i64])
            .to_device(device);
        Ok(Self {
            latents: Tensor::from_slice(&z)
                .view([b, t + 1, dims.latent as i64])
                .to_device(device),
            proprio: model.normalise_proprio(&proprio),
            actions: Tensor::from_slice(&a)
                .view([b, t, dims.chunk() as i64])
                .to_device(device),
            chunks: Tensor::from_slice(
                &episodes
                    .iter()
                    .map(|e| e.chunks(&dims) as i64)
                    .collect::<Vec<_>>(),
            )
            .to_device(device),
            tasks: Tensor::from_slice(
                &episodes
                    .iter()
                    .map(|e| e.task_index as i64)
                    .collect::<Vec<_>>(),
            )
            .to_device(device),
            success: Tensor::from_slice(
                &episodes
                    .iter()
                    .map(|e| f32::from(u8::from(e.success)))
                    .collect::<Vec<_>>(),
            )
            .to_device(device),
        })
    }
}

/// Class-balanced BCE with logits over the entries where `mask` is true:
/// positives and negatives each carry half the weight.
fn balanced_bce(logits: &Tensor, labels: &Tensor, mask: &Tensor) -> Tensor {
    let mask = mask.to_kind(Kind::Float);
    let n = mask.sum(Kind::Float).clamp_min(1.0);
    let pos = (labels * &mask).sum(Kind::Float);
    let neg = &n - &pos;
    let w_pos = (&n / (pos.clamp_min(1.0) * 2.0)).detach();
    let w_neg = (&n / (neg.clamp_min(1.0) * 2.0)).detach();
    let weights = (labels * w_pos + (labels.ones_like() - labels) * w_neg) * &mask;
    logits.binary_cross_entropy_with_logits::<Tensor>(
        labels,
        Some(weights),
        None,
        tch::Reduction::Sum,
    ) / n
}

/// The losses of one step.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Losses {
    /// One-step dynamics MSE.
    pub one_step: f64,
    /// Multi-step (open-loop) dynamics MSE.
    pub multi_step: f64,
    /// Success BCE on real latents (per boundary).
    pub success_real: f64,
    /// Success BCE on replayed latents (per episode).
    pub success_replay: f64,
    /// Their sum.
    pub total: f64,
}

/// Computes the losses of a padded batch (with gradients).
pub fn losses(
    model: &LatentWorldModel,
    batch: &PaddedBatch,
    window: usize,
    rng: &mut ChaCha8Rng,
) -> (Tensor, [Tensor; 4]) {
    let device = model.device();
    let size = batch.actions.size();
    let (b, t) = (size[0], size[1]);
    let chunks: Vec<i64> = Vec::try_from(batch.chunks.to_device(Device::Cpu)).unwrap_or_default();
    // One step, every transition.
    let (zn, pn) = model.step(
        &batch.latents.narrow(1, 0, t),
        &batch.proprio.narrow(1, 0, t),
        &batch.actions,
    );
    let steps = Tensor::arange(t, (Kind::Int64, device)).unsqueeze(0);
    let valid = steps
        .lt_tensor(&batch.chunks.unsqueeze(1))
        .to_kind(Kind::Float);
    let err = |pred_z: &Tensor, pred_p: &Tensor, z: &Tensor, p: &Tensor| {
        (pred_z - z).square().mean_dim(-1, false, Kind::Float)
            + (pred_p - p).square().mean_dim(-1, false, Kind::Float)
    };
    let one = err(
        &zn,
        &pn,
        &batch.latents.narrow(1, 1, t),
        &batch.proprio.narrow(1, 1, t),
    );
    let one_step = (one * &valid).sum(Kind::Float) / valid.sum(Kind::Float).clamp_min(1.0);
    // Multi step, open loop from a random start.
    let starts: Vec<i64> = chunks
        .iter()
        .map(|&k| rng.random_range(0..k.max(1)))
        .collect();
    let rows = Tensor::arange(b, (Kind::Int64, device));
    let at = |x: &Tensor, idx: &[i64]| {
        let idx = Tensor::from_slice(idx).to_device(device);
        x.index(&[Some(rows.shallow_clone()), Some(idx)])
    };
    let (mut z, mut p) = (at(&batch.latents, &starts), at(&batch.proprio, &starts));
    let mut multi = Tensor::zeros([], (Kind::Float, device));
    let mut count = Tensor::zeros([], (Kind::Float, device));
    for h in 0..window as i64 {
        let idx: Vec<i64> = starts.iter().map(|s| (s + h).min(t - 1)).collect();
        let next: Vec<i64> = starts.iter().map(|s| (s + h + 1).min(t)).collect();
        let live: Vec<f32> = starts
            .iter()
            .zip(&chunks)
            .map(|(s, k)| f32::from(u8::from(s + h < *k)))
            .collect();
        let live = Tensor::from_slice(&live).to_device(device);
        let (zn, pn) = model.step(&z, &p, &at(&batch.actions, &idx));
        multi += (err(
            &zn,
            &pn,
            &at(&batch.latents, &next),
            &at(&batch.proprio, &next),
        ) * &live)
            .sum(Kind::Float);
        count += live.sum(Kind::Float);
        (z, p) = (zn, pn);
    }
    let multi_step = multi / count.clamp_min(1.0);
    // Success on real latents, every boundary.
    let logits_real =
        model.boundary_logits(&batch.latents, &batch.proprio, &batch.actions, &batch.tasks);
    let bound = Tensor::arange(t + 1, (Kind::Int64, device)).unsqueeze(0);
    let last = bound
        .eq_tensor(&batch.chunks.unsqueeze(1))
        .to_kind(Kind::Float);
    let labels = last * batch.success.unsqueeze(1);
    let mask = bound.le_tensor(&batch.chunks.unsqueeze(1));
    let success_real = balanced_bce(&logits_real, &labels, &mask);
    // Success on the open-loop replay (dynamics detached).
    let (zr, pr) = tch::no_grad(|| {
        model.rollout(
            &batch.latents.select(1, 0),
            &batch.proprio.select(1, 0),
            &batch.actions,
        )
    });
    let logits_replay = episode_logits(
        &model.boundary_logits(&zr, &pr, &batch.actions, &batch.tasks),
        &batch.chunks,
    );
    let all = batch.success.ones_like().to_kind(Kind::Bool);
    let success_replay = balanced_bce(&logits_replay, &batch.success, &all);
    let total = &one_step + &multi_step + &success_real + &success_replay;
    (total, [one_step, multi_step, success_real, success_replay])
}

/// AdamW over the world model's weights, and the batch sampler.
pub struct WmTrainer {
    optimizer: AdamW,
    rng: ChaCha8Rng,
    grad_clip: f64,
    window: usize,
    batch_size: usize,
    /// Optimiser steps taken.
    pub steps: u64,
    /// Batches dropped for non-finite losses.
    pub dropped_batches: u64,
}

impl WmTrainer {
    /// An optimiser for `model` with its config's settings.
    pub fn new(model: &LatentWorldModel) -> Result<Self> {
        let t = &model.config().train;
        let optimizer = AdamW::new(
            model.var_store(),
            AdamWConfig {
                lr: t.lr,
                weight_decay: t.weight_decay,
                ..Default::default()
            },
        );
        Ok(Self {
            optimizer,
            rng: ChaCha8Rng::seed_from_u64(t.seed),
            grad_clip: t.grad_clip,
            window: t.window,
            batch_size: t.batch_size,
            steps: 0,
            dropped_batches: 0,
        })
    }

    /// One optimiser step on a random batch of `episodes`. `None` when the
    /// batch was dropped for a non-finite loss.
    pub fn step(
        &mut self,
        model: &LatentWorldModel,
        episodes: &[&LatentTrajectory],
    ) -> Result<Option<Losses>> {
        if episodes.is_empty() {
            return Err(Error::Empty {
                what: "world-model training set".into(),
            });
        }
        let picked: Vec<&LatentTrajectory> = (0..self.batch_size.min(episodes.len().max(1)).max(1))
            .map(|_| episodes[self.rng.random_range(0..episodes.len())])
            .collect();
        let batch = PaddedBatch::new(model, &picked)?;
        let (total, parts) = losses(model, &batch, self.window, &mut self.rng);
        let value = total.double_value(&[]);
        if !value.is_finite() {
            self.optimizer.zero_grad();
            self.dropped_batches += 1;
            let names: Vec<String> = picked.iter().map(|e| e.describe()).collect();
            tracing::warn!(loss = value, episodes = ?names, "world-model batch dropped: non-finite loss");
            return Ok(None);
        }
        self.optimizer.zero_grad();
        total.backward();
        self.optimizer.clip_grad_norm(self.grad_clip);
        self.optimizer.step();
        self.steps += 1;
        let [one_step, multi_step, success_real, success_replay] =
            parts.map(|t| t.double_value(&[]));
        Ok(Some(Losses {
            one_step,
            multi_step,
            success_real,
            success_replay,
            total: value,
        }))
    }

    /// Sets the learning rate (for schedules).
    pub fn set_lr(&mut self, lr: f64) {
        self.optimizer.set_lr(lr);
    }

    /// The optimiser's moments, to save with the model's variable-store writer.
    pub fn optimizer_state(&self) -> &nn::VarStore {
        self.optimizer.state()
    }

    /// The optimiser's moments, to load a saved state into.
    pub fn optimizer_state_mut(&mut self) -> &mut nn::VarStore {
        self.optimizer.state_mut()
    }

    /// Counters and the sampler's RNG position.
    pub fn counters(&self) -> TrainerCounters {
        TrainerCounters {
            steps: self.steps,
            dropped_batches: self.dropped_batches,
            optimizer_steps: self.optimizer.steps(),
            lr: self.optimizer.config().lr,
            rng: RngState::of(&self.rng),
        }
    }

    /// Restores what [`Self::counters`] returned.
    pub fn set_counters(&mut self, c: &TrainerCounters) -> std::result::Result<(), String> {
        self.rng = c.rng.restore()?;
        self.steps = c.steps;
        self.dropped_batches = c.dropped_batches;
        self.optimizer.set_steps(c.optimizer_steps);
        self.optimizer.set_lr(c.lr);
        Ok(())
    }
}

/// The counters of a [`WmTrainer`], saved with a run's checkpoint.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TrainerCounters {
    /// Optimiser steps taken.
    pub steps: u64,
    /// Batches dropped for non-finite losses.
    pub dropped_batches: u64,
    /// The optimiser's own step count (bias correction).
    pub optimizer_steps: u64,
    /// Current learning rate.
    pub lr: f64,
    /// The batch sampler's RNG.
    pub rng: RngState,
}

/// The exact position of a ChaCha8 RNG (seed, stream, word position).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RngState {
    /// The 32-byte seed, hex.
    pub seed: String,
    /// Stream number.
    pub stream: u64,
    /// Word position in the stream (decimal; it is a u128).
    pub word_pos: String,
}

impl RngState {
    /// Where `rng` stands.
    pub fn of(rng: &ChaCha8Rng) -> Self {
        Self {
            seed: rng.get_seed().iter().map(|b| format!("{b:02x}")).collect(),
            stream: rng.get_stream(),
            word_pos: rng.get_word_pos().to_string(),
        }
    }

    /// An RNG at that position; an error says which field is malformed.
    pub fn restore(&self) -> std::result::Result<ChaCha8Rng, String> {
        let mut seed = [0u8; 32];
        let ok = self.seed.len() == 64
            && (0..32).all(|i| {
                u8::from_str_radix(self.seed.get(2 * i..2 * i + 2).unwrap_or("zz"), 16)
                    .map(|b| seed[i] = b)
                    .is_ok()
            });
        if !ok {
            return Err(format!(
                "rng.seed: expected 64 hex digits, found `{}`",
                self.seed
            ));
        }
        let pos = self.word_pos.parse::<u128>().map_err(|_| {
            format!(
                "rng.word_pos: expected a decimal integer, found `{}`",
                self.word_pos
            )
        })?;
        let mut rng = ChaCha8Rng::from_seed(seed);
        rng.set_stream(self.stream);
        rng.set_word_pos(pos);
        Ok(rng)
    }
}

/// Per-dimension mean and std of the proprioception of `episodes`.
pub fn proprio_stats(episodes: &[&LatentTrajectory], dim: usize) -> (Vec<f32>, Vec<f32>) {
    let mut sum = vec![0f64; dim];
    let mut sq = vec![0f64; dim];
    let mut n = 0f64;
    for e in episodes {
        for row in e.proprio.chunks(dim) {
            for (i, v) in row.iter().enumerate() {
                sum[i] += f64::from(*v);
                sq[i] += f64::from(*v) * f64::from(*v);
            }
            n += 1.0;
        }
    }
    let n = n.max(1.0);
    let mean: Vec<f32> = sum.iter().map(|s| (s / n) as f32).collect();
    let std = sq
        .iter()
        .zip(&sum)
        .map(|(q, s)| ((q / n - (s / n).powi(2)).max(0.0).sqrt()) as f32)
        .collect();
    (mean, std)
}

/// Scores of executed episodes: `(ŝ from the open-loop replay of their
/// actions, score on their real latents)`, both in [0, 1]. The first is the
/// score the calibrator sees (it carries the dynamics' error); the second is
/// a diagnostic.
pub fn score_episodes(
    model: &LatentWorldModel,
    episodes: &[&LatentTrajectory],
) -> Result<Vec<(f64, f64)>> {
    let _guard = tch::no_grad_guard();
    let mut out = Vec::with_capacity(episodes.len());
    for part in episodes.chunks(256) {
        let batch = PaddedBatch::new(model, part)?;
        let (zr, pr) = model.rollout(
            &batch.latents.select(1, 0),
            &batch.proprio.select(1, 0),
            &batch.actions,
        );
        let replay = episode_logits(
            &model.boundary_logits(&zr, &pr, &batch.actions, &batch.tasks),
            &batch.chunks,
        )
        .sigmoid();
        let real = episode_logits(
            &model.boundary_logits(&batch.latents, &batch.proprio, &batch.actions, &batch.tasks),
            &batch.chunks,
        )
        .sigmoid();
        let replay: Vec<f64> = Vec::try_from(replay.to_device(Device::Cpu).to_kind(Kind::Double))
            .map_err(Error::torch("reading scores"))?;
        let real: Vec<f64> = Vec::try_from(real.to_device(Device::Cpu).to_kind(Kind::Double))
            .map_err(Error::torch("reading scores"))?;
        out.extend(replay.into_iter().zip(real));
    }
    Ok(out)
}
