//! The world model's networks, in the policy's latent space.
//!
//! ```text
//! latent dynamics   [z_t, p̄_t, a_t] ─ MLP (residual) ─ [Δz, Δp̄]   z_{t+1} = z_t + Δz
//! success head      [z_t, p̄_t, a_{t-1}, task, t/T] ─ MLP ─ logit of "goal reached at t"
//! episode score     ŝ = σ(max_t logit_t)  over the chunk boundaries of the episode
//! ```
//!
//! `z` is the policy's latent ([`wmrl_vla::VlaPolicy::encode`]), `p̄` the
//! normalised proprioception, `a` a whole action chunk. One dynamics step is
//! one chunk (8 control steps), so a 520-step LIBERO-Long episode is 65
//! steps. The success head is trained on every chunk boundary of executed
//! episodes (only the last boundary of a successful episode is positive:
//! episodes stop at success) and on open-loop replays of their actions, so
//! it scores imagined latents, whose errors compound, as well as real ones.
//! An episode's score is the max over its boundaries, which does not depend
//! on how long an episode went on after reaching its goal.

use tch::nn::{self, Module};
use tch::{Device, Kind, Tensor};
use wmrl_vla::model::ResidualBlock;

use crate::config::WmConfig;
use crate::trajectory::Dims;
use crate::{Error, Result};

/// Latent dynamics and success head, with their own [`nn::VarStore`].
#[derive(Debug)]
pub struct LatentWorldModel {
    config: WmConfig,
    dims: Dims,
    encoder: String,
    vs: nn::VarStore,
    proprio_mean: Tensor,
    proprio_std: Tensor,
    dyn_in: nn::Linear,
    dyn_blocks: Vec<ResidualBlock>,
    dyn_norm: nn::LayerNorm,
    dyn_out: nn::Linear,
    task_embed: nn::Embedding,
    success_fc1: nn::Linear,
    success_fc2: nn::Linear,
    success_out: nn::Linear,
}

impl LatentWorldModel {
    /// A freshly initialised model for a policy of sizes `dims` whose
    /// encoder has fingerprint `encoder` (tch's global RNG: seed it first).
    pub fn new(config: WmConfig, dims: Dims, encoder: String, device: Device) -> Result<Self> {
        config.validate()?;
        let vs = nn::VarStore::new(device);
        let root = vs.root();
        let m = &config.model;
        let (d, p, a) = (dims.latent as i64, dims.proprio as i64, dims.chunk() as i64);
        let stats = &root / "proprio";
        let proprio_mean = stats.zeros_no_train("mean", &[p]);
        let proprio_std = stats.ones_no_train("std", &[p]);
        let dynamics = &root / "dynamics";
        let dyn_in = nn::linear(&dynamics / "in", d + p + a, m.hidden, Default::default());
        let dyn_blocks = (0..m.layers)
            .map(|i| ResidualBlock::new(&(&dynamics / format!("block{i}")), m.hidden))
            .collect();
        let dyn_norm = nn::layer_norm(&dynamics / "norm", vec![m.hidden], Default::default());
        // Zero-initialised output: a fresh model predicts "nothing changes".
        let dyn_out = nn::linear(
            &dynamics / "out",
            m.hidden,
            d + p,
            nn::LinearConfig {
                ws_init: nn::Init::Const(0.0),
                ..Default::default()
            },
        );
        let success = &root / "success";
        let task_embed = nn::embedding(
            &success / "task",
            m.max_tasks,
            m.task_embed,
            Default::default(),
        );
        let success_fc1 = nn::linear(
            &success / "fc1",
            d + p + a + m.task_embed + 1,
            m.success_hidden,
            Default::default(),
        );
        let success_fc2 = nn::linear(
            &success / "fc2",
            m.success_hidden,
            m.success_hidden,
            Default::default(),
        );
        let success_out = nn::linear(&success / "out", m.success_hidden, 1, Default::default());
        Ok(Self {
            config,
            dims,
            encoder,
            vs,
            proprio_mean,
            proprio_std,
            dyn_in,
            dyn_blocks,
            dyn_norm,
            dyn_out,
            task_embed,
            success_fc1,
            success_fc2,
            success_out,
        })
    }

    /// The config.
    pub fn config(&self) -> &WmConfig {
        &self.config
    }

    /// Imagination settings (may be changed between calls).
    pub fn imagine_config_mut(&mut self) -> &mut crate::config::ImagineConfig {
        &mut self.config.imagine
    }

    /// Sizes shared with the policy.
    pub fn dims(&self) -> Dims {
        self.dims
    }

    /// Fingerprint of the observation encoder the model was built for.
    pub fn encoder(&self) -> &str {
        &self.encoder
    }

    /// The weights.
    pub fn var_store(&self) -> &nn::VarStore {
        &self.vs
    }

    /// Mutable weights (loading).
    pub fn var_store_mut(&mut self) -> &mut nn::VarStore {
        &mut self.vs
    }

    /// Where the weights live.
    pub fn device(&self) -> Device {
        self.vs.device()
    }

    /// Trainable scalars.
    pub fn parameter_count(&self) -> i64 {
        self.vs
            .trainable_variables()
            .iter()
            .map(Tensor::numel)
            .sum::<usize>() as i64
    }

    /// Chunks of an imagined episode (`horizon_steps / chunk_len`, rounded up).
    pub fn horizon_chunks(&self) -> usize {
        self.config
            .imagine
            .horizon_steps
            .div_ceil(self.dims.chunk_len)
    }

    /// Sets the proprioception normalisation (stored with the weights).
    pub fn set_proprio_stats(&mut self, mean: &[f32], std: &[f32]) -> Result<()> {
        if mean.len() != self.dims.proprio || std.len() != self.dims.proprio {
            return Err(Error::mismatch(
                "proprio statistics length",
                self.dims.proprio,
                format!("{} / {}", mean.len(), std.len()),
            ));
        }
        let std: Vec<f32> = std.iter().map(|s| s.max(1e-3)).collect();
        tch::no_grad(|| {
            self.proprio_mean.copy_(&Tensor::from_slice(mean));
            self.proprio_std.copy_(&Tensor::from_slice(&std));
        });
        Ok(())
    }

    /// Raw proprioception → normalised.
    pub fn normalise_proprio(&self, proprio: &Tensor) -> Tensor {
        (proprio.to_kind(Kind::Float) - &self.proprio_mean) / &self.proprio_std
    }

    /// Normalised proprioception → raw.
    pub fn raw_proprio(&self, normalised: &Tensor) -> Tensor {
        normalised * &self.proprio_std + &self.proprio_mean
    }

    /// One chunk of latent dynamics: `(z [.., D], p̄ [.., P], a [.., C·A])` → `(z', p̄')`.
    pub fn step(&self, latent: &Tensor, proprio: &Tensor, action: &Tensor) -> (Tensor, Tensor) {
        let mut h = Tensor::cat(&[latent, proprio, action], -1).apply(&self.dyn_in);
        for block in &self.dyn_blocks {
            h = block.forward(&h);
        }
        let delta = self.dyn_norm.forward(&h).gelu("none").apply(&self.dyn_out);
        let d = self.dims.latent as i64;
        let dz = delta.narrow(-1, 0, d);
        let dp = delta.narrow(-1, d, self.dims.proprio as i64);
        (latent + dz, proprio + dp)
    }

    /// Logits of "goal reached" at chunk boundaries: `z [.., D]`, `p̄ [.., P]`,
    /// the previous chunk `a_prev [.., C·A]` (zeros at t = 0), task ids
    /// (int64, same leading shape) and boundary indices `t` (float).
    pub fn success_logit(
        &self,
        latent: &Tensor,
        proprio: &Tensor,
        prev_action: &Tensor,
        tasks: &Tensor,
        t: &Tensor,
    ) -> Tensor {
        let horizon = self.horizon_chunks().max(1) as f64;
        let frac = (t.to_kind(Kind::Float) / horizon).unsqueeze(-1);
        let emb = self.task_embed.forward(tasks);
        Tensor::cat(&[latent, proprio, prev_action, &emb, &frac], -1)
            .apply(&self.success_fc1)
            .gelu("none")
            .apply(&self.success_fc2)
            .gelu("none")
            .apply(&self.success_out)
            .squeeze_dim(-1)
    }

    /// Open-loop replay: from `z0 [B, D]`, `p̄0 [B, P]` through `actions
    /// [B, K, C·A]` → latents `[B, K+1, D]` and proprio `[B, K+1, P]`.
    pub fn rollout(&self, z0: &Tensor, p0: &Tensor, actions: &Tensor) -> (Tensor, Tensor) {
        let k = actions.size()[1];
        let (mut zs, mut ps) = (vec![z0.shallow_clone()], vec![p0.shallow_clone()]);
        for t in 0..k {
            let (z, p) = self.step(&zs[t as usize], &ps[t as usize], &actions.select(1, t));
            zs.push(z);
            ps.push(p);
        }
        (Tensor::stack(&zs, 1), Tensor::stack(&ps, 1))
    }

    /// Per-boundary logits `[B, K+1]` of a batch of trajectories (real or
    /// imagined latents `[B, K+1, D]`, proprio `[B, K+1, P]`, actions `[B, K, C·A]`).
    pub fn boundary_logits(
        &self,
        latents: &Tensor,
        proprio: &Tensor,
        actions: &Tensor,
        tasks: &Tensor,
    ) -> Tensor {
        let size = latents.size();
        let (b, k1) = (size[0], size[1]);
        let first = Tensor::zeros(
            [b, 1, self.dims.chunk() as i64],
            (Kind::Float, latents.device()),
        );
        let prev = Tensor::cat(&[first, actions.to_kind(Kind::Float)], 1);
        let t = Tensor::arange(k1, (Kind::Float, latents.device()))
            .unsqueeze(0)
            .expand([b, k1], false);
        let tasks = tasks.unsqueeze(1).expand([b, k1], false);
        self.success_logit(latents, proprio, &prev, &tasks, &t)
    }

    /// Checks that `policy` has the observation encoder this model was
    /// trained on (its latents are the model's inputs).
    pub fn check_encoder(&self, policy: &wmrl_vla::VlaPolicy) -> Result<()> {
        let found = policy.encoder_fingerprint();
        if found != self.encoder {
            return Err(Error::EncoderMismatch {
                expected: self.encoder.clone(),
                found,
            });
        }
        Ok(())
    }

    /// Checks that task indices fit the embedding table.
    pub fn check_task(&self, task: usize) -> Result<()> {
        if task as i64 >= self.config.model.max_tasks {
            return Err(Error::mismatch(
                format!("task index {task}"),
                format!("< model.max_tasks = {}", self.config.model.max_tasks),
                task,
            ));
        }
        Ok(())
    }
}

/// Masked max over the boundary axis: logits `[B, K+1]`, lengths (chunks) `[B]` → `[B]`.
pub fn episode_logits(boundary_logits: &Tensor, chunks: &Tensor) -> Tensor {
    let k1 = boundary_logits.size()[1];
    let t = Tensor::arange(k1, (Kind::Int64, boundary_logits.device())).unsqueeze(0);
    let valid = t.le_tensor(&chunks.unsqueeze(1));
    boundary_logits
        .masked_fill(&valid.logical_not(), -1e9)
        .amax([1].as_slice(), false)
}
