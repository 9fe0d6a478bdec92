//! The policy network, factored as *observation encoder → latent → action head*.
//!
//! ```text
//! agent-view image ─ CameraEncoder ─┐
//!                                   ├─ Linear + LayerNorm ─ latent z  (encode)
//! wrist image ───── CameraEncoder ──┘
//! z, proprio (normalised, MLP), instruction (TextEncoder) ─ trunk ─ head
//!     ─ logits [B, chunk_len, action_dim, bins]                       (act)
//! ```
//!
//! The latent depends on the images only, so a world model can predict the
//! latent (and the proprioception) of future steps and [`VlaPolicy::act`] on
//! them exactly as on encoded observations. The head emits every token of the
//! chunk in parallel from learned per-slot queries (parallel decoding, as in
//! OpenVLA-OFT, Kim et al. 2025): the chunk distribution factorises over
//! tokens, so its log-probability and entropy are exact sums over tokens
//! (see [`crate::distribution`]).

pub mod adapter;
pub mod text;
pub mod vision;

use tch::nn::{self, Module};
use tch::{Device, Kind, Tensor};

use crate::config::ModelConfig;
use crate::tokenizer::Tokenizer;
use crate::{Error, Result};

pub use adapter::{ADAPTER_PREFIX, LatentAdapter};
pub use text::TextEncoder;
pub use vision::CameraEncoder;

/// A residual MLP block: `x + W2 gelu(W1 LN(x))` (the trunk here, the
/// world model's dynamics too).
#[derive(Debug)]
pub struct ResidualBlock {
    norm: nn::LayerNorm,
    fc1: nn::Linear,
    fc2: nn::Linear,
}

impl ResidualBlock {
    /// A block of width `dim` under `p` (`norm`, `fc1`, `fc2`).
    pub fn new(p: &nn::Path, dim: i64) -> Self {
        Self {
            norm: nn::layer_norm(p / "norm", vec![dim], Default::default()),
            fc1: nn::linear(p / "fc1", dim, dim, Default::default()),
            fc2: nn::linear(p / "fc2", dim, dim, Default::default()),
        }
    }

    /// `x + W2 gelu(W1 LN(x))`.
    pub fn forward(&self, x: &Tensor) -> Tensor {
        x + self
            .norm
            .forward(x)
            .apply(&self.fc1)
            .gelu("none")
            .apply(&self.fc2)
    }
}

/// Variable-name prefixes of the observation encoder (see [`VlaPolicy::encode`]).
pub const ENCODER_PREFIXES: [&str; 4] =
    ["agent_view.", "wrist_view.", "latent_proj.", "latent_norm."];

/// The compact VLA: weights live in its own [`nn::VarStore`].
#[derive(Debug)]
pub struct VlaPolicy {
    config: ModelConfig,
    tokenizer: Tokenizer,
    vs: nn::VarStore,
    agent: CameraEncoder,
    wrist: CameraEncoder,
    latent_proj: nn::Linear,
    latent_norm: nn::LayerNorm,
    adapter: Option<LatentAdapter>,
    text: TextEncoder,
    proprio_mean: Tensor,
    proprio_std: Tensor,
    proprio_fc1: nn::Linear,
    proprio_fc2: nn::Linear,
    trunk_in: nn::Linear,
    trunk: Vec<ResidualBlock>,
    trunk_norm: nn::LayerNorm,
    head_proj: nn::Linear,
    head_slots: Tensor,
    head_norm: nn::LayerNorm,
    head_out: nn::Linear,
}

impl VlaPolicy {
    /// A freshly initialised policy (tch's global RNG: seed it with `tch::manual_seed`).
    pub fn new(config: ModelConfig, tokenizer: Tokenizer, device: Device) -> Result<Self> {
        config.validate()?;
        if tokenizer.len() < 2 {
            return Err(Error::mismatch(
                "tokenizer vocabulary",
                "at least <pad> and <unk>",
                tokenizer.len(),
            ));
        }
        let vs = nn::VarStore::new(device);
        let root = vs.root();
        let c = &config;
        let agent = CameraEncoder::new(&(&root / "agent_view"), &c.vision, c.image_size);
        let wrist = CameraEncoder::new(&(&root / "wrist_view"), &c.vision, c.image_size);
        let latent_proj = nn::linear(
            &root / "latent_proj",
            2 * c.vision.embed_dim,
            c.latent_dim,
            Default::default(),
        );
        let latent_norm = nn::layer_norm(
            &root / "latent_norm",
            vec![c.latent_dim],
            Default::default(),
        );
        let adapter = (c.latent_adapter > 0).then(|| {
            LatentAdapter::new(&(&root / "latent_adapter"), c.latent_dim, c.latent_adapter)
        });
        let text = TextEncoder::new(&(&root / "text"), &c.text, tokenizer.len() as i64);
        let proprio = &root / "proprio";
        let proprio_mean = proprio.zeros_no_train("mean", &[c.proprio_dim]);
        let proprio_std = proprio.ones_no_train("std", &[c.proprio_dim]);
        let proprio_fc1 = nn::linear(
            &proprio / "fc1",
            c.proprio_dim,
            c.proprio_hidden,
            Default::default(),
        );
        let proprio_fc2 = nn::linear(
            &proprio / "fc2",
            c.proprio_hidden,
            c.proprio_hidden,
            Default::default(),
        );
        let trunk_p = &root / "trunk";
        let trunk_in_dim = c.latent_dim + c.proprio_hidden + c.text.dim;
        let trunk_in = nn::linear(
            &trunk_p / "in",
            trunk_in_dim,
            c.trunk_hidden,
            Default::default(),
        );
        let trunk = (0..c.trunk_layers)
            .map(|i| ResidualBlock::new(&(&trunk_p / format!("block{i}")), c.trunk_hidden))
            .collect();
        let trunk_norm =
            nn::layer_norm(&trunk_p / "norm", vec![c.trunk_hidden], Default::default());
        let head = &root / "head";
        let slots = config.tokens_per_chunk();
        let head_proj = nn::linear(
            &head / "proj",
            c.trunk_hidden,
            slots * c.head_token_dim,
            Default::default(),
        );
        let head_slots = head.var(
            "slots",
            &[slots, c.head_token_dim],
            nn::Init::Randn {
                mean: 0.0,
                stdev: 0.02,
            },
        );
        let head_norm = nn::layer_norm(&head / "norm", vec![c.head_token_dim], Default::default());
        let head_out = nn::linear(
            &head / "out",
            c.head_token_dim,
            c.action.binning.bins,
            Default::default(),
        );
        Ok(Self {
            config,
            tokenizer,
            vs,
            agent,
            wrist,
            latent_proj,
            latent_norm,
            adapter,
            text,
            proprio_mean,
            proprio_std,
            proprio_fc1,
            proprio_fc2,
            trunk_in,
            trunk,
            trunk_norm,
            head_proj,
            head_slots,
            head_norm,
            head_out,
        })
    }

    /// The architecture.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// The instruction tokenizer.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The weights (for optimisers and checkpoints).
    pub fn var_store(&self) -> &nn::VarStore {
        &self.vs
    }

    /// Mutable weights (for loading checkpoints).
    pub fn var_store_mut(&mut self) -> &mut nn::VarStore {
        &mut self.vs
    }

    /// Where the weights live.
    pub fn device(&self) -> Device {
        self.vs.device()
    }

    /// Number of trainable scalars.
    pub fn parameter_count(&self) -> i64 {
        self.vs
            .trainable_variables()
            .iter()
            .map(Tensor::numel)
            .sum::<usize>() as i64
    }

    /// An independent copy with the same architecture, tokenizer and
    /// weights (a frozen reference, or the world model's encoder copy).
    pub fn try_clone(&self) -> Result<Self> {
        let mut copy = Self::new(self.config.clone(), self.tokenizer.clone(), self.device())?;
        copy.vs
            .copy(&self.vs)
            .map_err(Error::torch("copying the policy weights"))?;
        Ok(copy)
    }

    /// Gives the policy a [`LatentAdapter`] of width `hidden` (identity at
    /// creation, so no action probability changes); its width is recorded
    /// in the config (`latent_adapter`), so checkpoints load with it. Fails
    /// if the policy has one already or `hidden` is not positive.
    pub fn add_latent_adapter(&mut self, hidden: i64) -> Result<()> {
        if self.adapter.is_some() || hidden <= 0 {
            return Err(wmrl_config::Error::invalid(
                "model.latent_adapter",
                format!(
                    "expected a positive width for a policy without an adapter, found {hidden} \
                     for a policy with adapter width {}",
                    self.config.latent_adapter
                ),
            )
            .into());
        }
        let root = self.vs.root();
        self.adapter = Some(LatentAdapter::new(
            &(&root / "latent_adapter"),
            self.config.latent_dim,
            hidden,
        ));
        self.config.latent_adapter = hidden;
        Ok(())
    }

    /// Whether the action head reads the latent through an adapter.
    pub fn has_latent_adapter(&self) -> bool {
        self.adapter.is_some()
    }

    /// Names of the observation encoder's weights (both cameras and the latent
    /// projection): the part of the policy a world model shares.
    pub fn encoder_variable_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .vs
            .variables()
            .into_keys()
            .filter(|n| ENCODER_PREFIXES.iter().any(|p| n.starts_with(p)))
            .collect();
        names.sort();
        names
    }

    /// A fingerprint (FNV-1a over names, shapes and f32 bytes) of the
    /// observation encoder's weights. A world model trained on this encoder's
    /// latents records it and refuses a policy with another encoder.
    pub fn encoder_fingerprint(&self) -> String {
        let variables = self.vs.variables();
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |bytes: &[u8]| {
            for b in bytes {
                hash = (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
            }
        };
        for name in self.encoder_variable_names() {
            let t = variables[&name]
                .detach()
                .to_device(Device::Cpu)
                .to_kind(Kind::Float)
                .contiguous();
            eat(name.as_bytes());
            for d in t.size() {
                eat(&d.to_le_bytes());
            }
            let values: Vec<f32> = Vec::try_from(t.flatten(0, -1)).unwrap_or_default();
            for v in values {
                eat(&v.to_le_bytes());
            }
        }
        format!("{hash:016x}")
    }

    /// Sets the proprioception normalisation `(p - mean) / std` (stored with the weights).
    pub fn set_proprio_stats(&mut self, mean: &[f32], std: &[f32]) -> Result<()> {
        let dim = self.config.proprio_dim as usize;
        if mean.len() != dim || std.len() != dim {
            return Err(Error::mismatch(
                "proprio statistics length",
                dim,
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

    /// Token ids `[B, max_tokens]` (on the model's device) of a batch of instructions.
    pub fn tokenize(&self, instructions: &[&str]) -> Tensor {
        let max_len = self.config.text.max_tokens as usize;
        let mut ids = Vec::with_capacity(instructions.len() * max_len);
        for text in instructions {
            let encoded = self.tokenizer.encode(text, max_len);
            if (!encoded.unknown.is_empty() || encoded.truncated) && first_warning(text) {
                tracing::warn!(instruction = %text, unknown = ?encoded.unknown, truncated = encoded.truncated,
                    "instruction has words outside the training vocabulary or is too long");
            }
            ids.extend(encoded.ids);
        }
        Tensor::from_slice(&ids)
            .view([instructions.len() as i64, max_len as i64])
            .to_device(self.device())
    }

    /// Images with values in 0..=255 (`u8` or float, `[B, 3, H, W]`, any size) →
    /// float `[B, 3, S, S]` centred on 0 (`x / 255 - 0.5`), resized by area
    /// averaging (or bilinear interpolation when enlarging).
    pub fn prepare_images(&self, images: &Tensor) -> Tensor {
        let size = self.config.image_size;
        let x = resize_images(&images.to_kind(Kind::Float), size);
        x / 255.0 - 0.5
    }

    /// Observation encoder: camera images (values 0..=255, `[B, 3, H, W]`) → latent `[B, latent_dim]`.
    pub fn encode(&self, agent_view: &Tensor, wrist_view: &Tensor) -> Tensor {
        let a = self.agent.forward(&self.prepare_images(agent_view));
        let w = self.wrist.forward(&self.prepare_images(wrist_view));
        Tensor::cat(&[a, w], 1)
            .gelu("none")
            .apply(&self.latent_proj)
            .apply(&self.latent_norm)
    }

    /// Instruction encoder: token ids `[B, L]` → `[B, text.dim]`.
    pub fn encode_instructions(&self, ids: &Tensor) -> Tensor {
        self.text.forward(ids)
    }

    /// Action head: latent `[B, latent_dim]` (the encoder's, read through
    /// the latent adapter when there is one), raw proprioception
    /// `[B, proprio_dim]` and instruction embedding `[B, text.dim]` → logits
    /// `[B, chunk_len, action_dim, bins]`.
    pub fn act(&self, latent: &Tensor, proprio: &Tensor, instruction: &Tensor) -> Tensor {
        let c = &self.config;
        let latent = match &self.adapter {
            Some(adapter) => adapter.forward(latent),
            None => latent.shallow_clone(),
        };
        let p = ((proprio.to_kind(Kind::Float) - &self.proprio_mean) / &self.proprio_std)
            .apply(&self.proprio_fc1)
            .gelu("none")
            .apply(&self.proprio_fc2);
        let mut h = Tensor::cat(&[latent.shallow_clone(), p, instruction.shallow_clone()], 1)
            .apply(&self.trunk_in);
        for block in &self.trunk {
            h = block.forward(&h);
        }
        let h = self.trunk_norm.forward(&h).gelu("none");
        let b = h.size()[0];
        let slots = (h
            .apply(&self.head_proj)
            .view([b, c.tokens_per_chunk(), c.head_token_dim])
            + &self.head_slots)
            .gelu("none")
            .apply(&self.head_norm);
        slots.apply(&self.head_out).view([
            b,
            c.action.chunk_len,
            c.action.action_dim,
            c.action.binning.bins,
        ])
    }

    /// The whole forward pass: images, proprioception, token ids → logits.
    pub fn logits(
        &self,
        agent_view: &Tensor,
        wrist_view: &Tensor,
        proprio: &Tensor,
        ids: &Tensor,
    ) -> Tensor {
        let latent = self.encode(agent_view, wrist_view);
        self.act(&latent, proprio, &self.encode_instructions(ids))
    }
}

/// True the first time an instruction is seen by this process, so a
/// vocabulary or length warning is logged once per instruction, not per batch.
fn first_warning(instruction: &str) -> bool {
    static SEEN: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut seen = SEEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if seen.iter().any(|s| s == instruction) {
        false
    } else {
        seen.push(instruction.to_string());
        true
    }
}

/// Resizes float images `[B, C, H, W]` to `[B, C, size, size]`: exact box
/// filter for integer down-scaling, adaptive average pooling for other
/// down-scaling, bilinear for up-scaling.
pub fn resize_images(images: &Tensor, size: i64) -> Tensor {
    let dims = images.size();
    let (h, w) = (dims[2], dims[3]);
    if h == size && w == size {
        images.shallow_clone()
    } else if h >= size && w >= size {
        if h % size == 0 && w % size == 0 {
            let (kh, kw) = (h / size, w / size);
            images.avg_pool2d([kh, kw], [kh, kw], [0, 0], false, true, None)
        } else {
            images.adaptive_avg_pool2d([size, size])
        }
    } else {
        images.upsample_bilinear2d([size, size], false, None, None)
    }
}
