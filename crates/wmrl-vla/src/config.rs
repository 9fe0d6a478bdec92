//! Model and training configuration (serde, unknown fields rejected).
//!
//! A config file is TOML with a `[model]` and a `[train]` table. Four are
//! shipped in `crates/wmrl-vla/configs/` and can be named instead of a path:
//! `tiny` (tests), `small` (the measured CPU budget for the whole suite),
//! `cpu` (a larger CPU model) and `gpu` (a CUDA workstation).
//! `key=value` overrides (`train.steps=500`) are applied before validation.

use serde::{Deserialize, Serialize};

use crate::Result;
use crate::binning::ActionBinning;

/// The shipped configs, by name.
pub const SHIPPED_CONFIGS: [(&str, &str); 4] = [
    ("tiny", include_str!("../configs/tiny.toml")),
    ("small", include_str!("../configs/small.toml")),
    ("cpu", include_str!("../configs/cpu.toml")),
    ("gpu", include_str!("../configs/gpu.toml")),
];

/// One camera's convolutional encoder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct VisionConfig {
    /// Output channels of each conv layer (default: `[32, 64, 64, 64]`).
    pub channels: Vec<i64>,
    /// Stride of each conv layer, same length as `channels` (default: `[2, 2, 2, 1]`).
    pub strides: Vec<i64>,
    /// Size of the per-camera embedding (default: 128).
    pub embed_dim: i64,
}

impl Default for VisionConfig {
    fn default() -> Self {
        Self {
            channels: vec![32, 64, 64, 64],
            strides: vec![2, 2, 2, 1],
            embed_dim: 128,
        }
    }
}

/// The instruction encoder: word embeddings and a small transformer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TextConfig {
    /// Longest instruction in tokens; longer ones are truncated (default: 24).
    pub max_tokens: i64,
    /// Embedding width (default: 64).
    pub dim: i64,
    /// Transformer layers (default: 1).
    pub layers: i64,
    /// Attention heads; must divide `dim` (default: 4).
    pub heads: i64,
}

impl Default for TextConfig {
    fn default() -> Self {
        Self {
            max_tokens: 24,
            dim: 64,
            layers: 1,
            heads: 4,
        }
    }
}

/// What the action head emits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ActionConfig {
    /// Control steps per action chunk (default: 8).
    pub chunk_len: i64,
    /// Dimensions per action (default: 7: Δpos xyz, Δrot xyz, gripper).
    pub action_dim: i64,
    /// Discretisation of each dimension (default: 256 uniform bins on [-1, 1]).
    pub binning: ActionBinning,
}

impl Default for ActionConfig {
    fn default() -> Self {
        Self {
            chunk_len: 8,
            action_dim: 7,
            binning: ActionBinning::default(),
        }
    }
}

/// The network architecture.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelConfig {
    /// Square side the camera images are resized to (default: 64).
    pub image_size: i64,
    /// Per-camera encoder (the agent-view and wrist cameras have their own weights).
    pub vision: VisionConfig,
    /// Instruction encoder.
    pub text: TextConfig,
    /// Proprioception values per step (default: 15).
    pub proprio_dim: i64,
    /// Width of the proprioception MLP (default: 64).
    pub proprio_hidden: i64,
    /// Size of the observation latent the world model predicts (default: 256).
    pub latent_dim: i64,
    /// Width of the trunk (default: 512).
    pub trunk_hidden: i64,
    /// Residual MLP blocks in the trunk (default: 2).
    pub trunk_layers: i64,
    /// Width of each action-token slot before its logits (default: 64).
    pub head_token_dim: i64,
    /// Width of the trainable adapter the action head reads the latent
    /// through (0, the default: none). Post-training adds it
    /// (`grpo.latent_adapter`); see [`crate::model::adapter`].
    pub latent_adapter: i64,
    /// Action chunk and binning.
    pub action: ActionConfig,
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self {
            image_size: 64,
            vision: VisionConfig::default(),
            text: TextConfig::default(),
            proprio_dim: 15,
            proprio_hidden: 64,
            latent_dim: 256,
            trunk_hidden: 512,
            trunk_layers: 2,
            head_token_dim: 64,
            latent_adapter: 0,
            action: ActionConfig::default(),
        }
    }
}

impl ModelConfig {
    /// Checks the values that serde cannot.
    pub fn validate(&self) -> Result<()> {
        let bad = |message: String| Err(wmrl_config::Error::invalid("model", message).into());
        let positive = [
            ("image_size", self.image_size),
            ("vision.embed_dim", self.vision.embed_dim),
            ("text.max_tokens", self.text.max_tokens),
            ("text.dim", self.text.dim),
            ("text.heads", self.text.heads),
            ("proprio_dim", self.proprio_dim),
            ("proprio_hidden", self.proprio_hidden),
            ("latent_dim", self.latent_dim),
            ("trunk_hidden", self.trunk_hidden),
            ("head_token_dim", self.head_token_dim),
            ("action.chunk_len", self.action.chunk_len),
            ("action.action_dim", self.action.action_dim),
        ];
        for (name, value) in positive {
            if value <= 0 {
                return bad(format!("`{name}` must be positive, got {value}"));
            }
        }
        if self.latent_adapter < 0 {
            return bad(format!(
                "`latent_adapter` must be ≥ 0 (0: none), got {}",
                self.latent_adapter
            ));
        }
        if self.vision.channels.is_empty()
            || self.vision.channels.len() != self.vision.strides.len()
        {
            return bad(format!(
                "`vision.channels` ({}) and `vision.strides` ({}) must be non-empty and of equal length",
                self.vision.channels.len(),
                self.vision.strides.len()
            ));
        }
        if self
            .vision
            .channels
            .iter()
            .chain(&self.vision.strides)
            .any(|&v| v <= 0)
        {
            return bad("`vision.channels` and `vision.strides` must be positive".into());
        }
        let reduction: i64 = self.vision.strides.iter().product();
        if self.image_size / reduction < 2 {
            return bad(format!(
                "`image_size` {} is too small for total stride {reduction}: the feature map must be at least 2×2",
                self.image_size
            ));
        }
        if self.text.dim % self.text.heads != 0 {
            return bad(format!(
                "`text.heads` ({}) must divide `text.dim` ({})",
                self.text.heads, self.text.dim
            ));
        }
        if self.text.layers < 0 || self.trunk_layers < 0 {
            return bad("`text.layers` and `trunk_layers` must not be negative".into());
        }
        self.action.binning.validate()
    }

    /// Action tokens per chunk (`chunk_len × action_dim`).
    pub fn tokens_per_chunk(&self) -> i64 {
        self.action.chunk_len * self.action.action_dim
    }
}

/// Behaviour-cloning hyper-parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SftConfig {
    /// Optimiser steps (default: 2000).
    pub steps: u64,
    /// Samples per step (default: 64).
    pub batch_size: i64,
    /// Peak learning rate of AdamW (default: 3e-4).
    pub lr: f64,
    /// Linear warm-up steps from 0 to `lr` (default: 100).
    pub warmup_steps: u64,
    /// Cosine decay floor as a fraction of `lr` (default: 0.1).
    pub min_lr_ratio: f64,
    /// AdamW decoupled weight decay (default: 1e-4).
    pub weight_decay: f64,
    /// Global L2 gradient-norm clip (default: 1.0).
    pub grad_clip: f64,
    /// Random-shift augmentation: pad by this many pixels and crop back (default: 4; 0 = off).
    pub shift_pad: i64,
    /// Fraction of successful episodes per task held out for validation (default: 0.1).
    pub val_fraction: f64,
    /// Validate every this many steps (default: 200).
    pub eval_every: u64,
    /// Write the checkpoint every this many steps, and at the end (default: 1000).
    pub checkpoint_every: u64,
    /// Write a metrics row every this many steps (default: 10).
    pub log_every: u64,
    /// Seed of initialisation, batch sampling and augmentation (default: 0).
    pub seed: u64,
    /// Decay of an exponential moving average of the weights, updated after
    /// every step; when positive, the checkpoint holds the averaged weights
    /// and `raw/` beside it the last step's (default: 0 = off; 0.999 averages
    /// over about the last thousand steps).
    pub ema_decay: f64,
    /// Width (in bins) of the Gaussian soft targets of the training loss
    /// (see [`crate::sft::Learner`]); 0 = plain cross-entropy against the
    /// expert's token (default: 0).
    pub label_sigma_bins: f64,
}

impl Default for SftConfig {
    fn default() -> Self {
        Self {
            steps: 2000,
            batch_size: 64,
            lr: 3e-4,
            warmup_steps: 100,
            min_lr_ratio: 0.1,
            weight_decay: 1e-4,
            grad_clip: 1.0,
            shift_pad: 4,
            val_fraction: 0.1,
            eval_every: 200,
            checkpoint_every: 1000,
            log_every: 10,
            seed: 0,
            ema_decay: 0.0,
            label_sigma_bins: 0.0,
        }
    }
}

impl SftConfig {
    /// Checks the values that serde cannot.
    pub fn validate(&self) -> Result<()> {
        let bad = |message: String| Err(wmrl_config::Error::invalid("train", message).into());
        if self.steps == 0 || self.batch_size <= 0 {
            return bad("`steps` and `batch_size` must be positive".into());
        }
        if !(self.lr > 0.0 && self.lr.is_finite()) {
            return bad(format!("`lr` must be a positive number, got {}", self.lr));
        }
        if !(0.0..=1.0).contains(&self.min_lr_ratio) {
            return bad(format!(
                "`min_lr_ratio` must lie in [0, 1], got {}",
                self.min_lr_ratio
            ));
        }
        if !(0.0..1.0).contains(&self.val_fraction) {
            return bad(format!(
                "`val_fraction` must lie in [0, 1), got {}",
                self.val_fraction
            ));
        }
        if self.weight_decay < 0.0 || self.grad_clip <= 0.0 || self.shift_pad < 0 {
            return bad(
                "`weight_decay` and `shift_pad` must not be negative; `grad_clip` must be positive"
                    .into(),
            );
        }
        if !(self.label_sigma_bins >= 0.0 && self.label_sigma_bins.is_finite()) {
            return bad(format!(
                "`label_sigma_bins` must be a non-negative number, got {}",
                self.label_sigma_bins
            ));
        }
        if !(0.0..1.0).contains(&self.ema_decay) {
            return bad(format!(
                "`ema_decay` must lie in [0, 1), got {}",
                self.ema_decay
            ));
        }
        if self.eval_every == 0 || self.checkpoint_every == 0 || self.log_every == 0 {
            return bad("`eval_every`, `checkpoint_every` and `log_every` must be positive".into());
        }
        Ok(())
    }
}

/// A whole config file: `[model]` and `[train]`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct VlaConfig {
    /// Architecture.
    pub model: ModelConfig,
    /// Behaviour cloning.
    pub train: SftConfig,
}

impl VlaConfig {
    /// Parses TOML text, applies `key=value` overrides, and validates.
    pub fn from_toml(text: &str, origin: &str, overrides: &[String]) -> Result<Self> {
        Self::parse(&wmrl_config::Source::text(text, origin), overrides)
    }

    /// Loads a shipped config by name (`tiny`, `small`, `cpu`, `gpu`) or a TOML file by path.
    pub fn load(name_or_path: &str, overrides: &[String]) -> Result<Self> {
        Self::parse(
            &wmrl_config::Source::find(name_or_path, &SHIPPED_CONFIGS)?,
            overrides,
        )
    }

    fn parse(source: &wmrl_config::Source, overrides: &[String]) -> Result<Self> {
        let config: Self = wmrl_config::parse(source, overrides)?;
        config.model.validate()?;
        config.train.validate()?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_config_loads_and_round_trips() {
        for (name, _) in SHIPPED_CONFIGS {
            let config = VlaConfig::load(name, &[]).unwrap();
            let text = toml::to_string(&config).unwrap();
            assert_eq!(
                VlaConfig::from_toml(&text, name, &[]).unwrap(),
                config,
                "{name}"
            );
        }
    }

    #[test]
    fn overrides_apply_and_unknown_keys_are_rejected() {
        let config = VlaConfig::load(
            "tiny",
            &["train.steps=7".into(), "model.vision.embed_dim=12".into()],
        )
        .unwrap();
        assert_eq!(config.train.steps, 7);
        assert_eq!(config.model.vision.embed_dim, 12);
        let err =
            wmrl_config::chain(&VlaConfig::load("tiny", &["train.stepz=7".into()]).unwrap_err());
        assert!(err.contains("stepz"), "{err}");
        let err = wmrl_config::chain(
            &VlaConfig::load("tiny", &["model.text.heads=5".into()]).unwrap_err(),
        );
        assert!(err.contains("must divide"), "{err}");
    }
}
