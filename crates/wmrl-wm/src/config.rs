//! World-model configs: architecture, imagination, training and replay.
//! Shipped presets (`tiny`, `cpu`, `gpu`) pair with the VLA configs of the
//! same name; a TOML file works too, with `--set key=value` overrides and
//! unknown keys rejected.

use serde::{Deserialize, Serialize};

use crate::Result;

/// The shipped configs, by name.
pub const SHIPPED_CONFIGS: [(&str, &str); 4] = [
    ("tiny", include_str!("../configs/tiny.toml")),
    ("cpu", include_str!("../configs/cpu.toml")),
    ("small", include_str!("../configs/small.toml")),
    ("gpu", include_str!("../configs/gpu.toml")),
];

/// Architecture of the latent dynamics and the success head. Latent,
/// proprioception and action sizes come from the policy it is built for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WmModelConfig {
    /// Width of the dynamics MLP.
    pub hidden: i64,
    /// Residual blocks of the dynamics MLP.
    pub layers: i64,
    /// Width of the success head.
    pub success_hidden: i64,
    /// Size of the learned task embedding.
    pub task_embed: i64,
    /// Task indices the embedding table holds (LIBERO-Long: 10).
    pub max_tasks: i64,
}

/// How imagined rollouts are run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImagineConfig {
    /// Control steps per imagined episode (LIBERO-Long: 520).
    pub horizon_steps: usize,
    /// Episodes per batched forward loop.
    pub batch: usize,
    /// Policy sampling temperature inside the model (0 = greedy).
    pub temperature: f64,
    /// An imagined episode ends (as a success) once P(goal reached) ≥ this.
    pub success_threshold: f64,
}

/// World-model training.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WmTrainConfig {
    /// Optimiser steps of a full training run (`wmrl wm train`).
    pub steps: usize,
    /// Episodes per batch.
    pub batch_size: usize,
    /// Chunks of the multi-step (open-loop) dynamics loss.
    pub window: usize,
    /// AdamW learning rate.
    pub lr: f64,
    /// AdamW weight decay.
    pub weight_decay: f64,
    /// Gradient-norm clip.
    pub grad_clip: f64,
    /// Seed of initialisation and batch sampling.
    pub seed: u64,
    /// Steps between metric rows.
    pub log_every: usize,
}

/// The replay buffer of executed episodes the trainer refreshes the model on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayConfig {
    /// Episodes kept; the oldest goes first when full.
    pub capacity: usize,
    /// Refresh the world model every this many trainer iterations.
    pub refresh_every: u64,
    /// Optimiser steps per refresh.
    pub refresh_steps: usize,
}

/// A whole world-model config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WmConfig {
    /// Architecture.
    pub model: WmModelConfig,
    /// Imagined rollouts.
    pub imagine: ImagineConfig,
    /// Training.
    pub train: WmTrainConfig,
    /// Replay buffer.
    pub replay: ReplayConfig,
}

impl WmConfig {
    /// Checks every value.
    pub fn validate(&self) -> Result<()> {
        let bad = |field: &str, expected: &str, found: String| {
            Err(wmrl_config::Error::invalid(
                format!("field `{field}`"),
                format!("expected {expected}, found {found}"),
            )
            .into())
        };
        let m = &self.model;
        for (field, v) in [
            ("model.hidden", m.hidden),
            ("model.success_hidden", m.success_hidden),
            ("model.task_embed", m.task_embed),
            ("model.max_tasks", m.max_tasks),
        ] {
            if v < 1 {
                return bad(field, "≥ 1", v.to_string());
            }
        }
        if m.layers < 0 {
            return bad("model.layers", "≥ 0", m.layers.to_string());
        }
        let i = &self.imagine;
        if i.horizon_steps == 0 || i.batch == 0 {
            return bad(
                "imagine.horizon_steps / imagine.batch",
                "≥ 1",
                format!("{} / {}", i.horizon_steps, i.batch),
            );
        }
        if !(i.temperature.is_finite() && i.temperature >= 0.0) {
            return bad(
                "imagine.temperature",
                "a finite number ≥ 0",
                i.temperature.to_string(),
            );
        }
        if !(i.success_threshold > 0.0 && i.success_threshold <= 1.0) {
            return bad(
                "imagine.success_threshold",
                "a probability in (0, 1]",
                i.success_threshold.to_string(),
            );
        }
        let t = &self.train;
        if t.batch_size == 0 || t.window == 0 || t.log_every == 0 {
            return bad(
                "train.batch_size / train.window / train.log_every",
                "≥ 1",
                format!("{} / {} / {}", t.batch_size, t.window, t.log_every),
            );
        }
        if !(t.lr.is_finite() && t.lr > 0.0) {
            return bad("train.lr", "a finite number > 0", t.lr.to_string());
        }
        if !(t.grad_clip.is_finite() && t.grad_clip > 0.0) {
            return bad(
                "train.grad_clip",
                "a finite number > 0",
                t.grad_clip.to_string(),
            );
        }
        if self.replay.capacity == 0 || self.replay.refresh_every == 0 {
            return bad(
                "replay.capacity / replay.refresh_every",
                "≥ 1",
                format!("{} / {}", self.replay.capacity, self.replay.refresh_every),
            );
        }
        Ok(())
    }

    /// Parses TOML text, applies `key=value` overrides, and validates.
    pub fn from_toml(text: &str, origin: &str, overrides: &[String]) -> Result<Self> {
        Self::parse(&wmrl_config::Source::text(text, origin), overrides)
    }

    /// Loads a shipped config by name (`tiny`, `cpu`, `small`, `gpu`) or a TOML file by path.
    pub fn load(name_or_path: &str, overrides: &[String]) -> Result<Self> {
        Self::parse(
            &wmrl_config::Source::find(name_or_path, &SHIPPED_CONFIGS)?,
            overrides,
        )
    }

    fn parse(source: &wmrl_config::Source, overrides: &[String]) -> Result<Self> {
        let config: Self = wmrl_config::parse(source, overrides)?;
        config.validate()?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_configs_load_round_trip_and_reject_unknown_keys() {
        for (name, _) in SHIPPED_CONFIGS {
            let config = WmConfig::load(name, &[]).unwrap();
            let text = toml::to_string(&config).unwrap();
            assert_eq!(WmConfig::from_toml(&text, name, &[]).unwrap(), config);
        }
        let c = WmConfig::load("tiny", &["train.steps=3".into()]).unwrap();
        assert_eq!(c.train.steps, 3);
        let err =
            wmrl_config::chain(&WmConfig::load("tiny", &["train.stepz=3".into()]).unwrap_err());
        assert!(err.contains("stepz"), "{err}");
        let err = wmrl_config::chain(
            &WmConfig::load("tiny", &["imagine.success_threshold=0".into()]).unwrap_err(),
        );
        assert!(err.contains("imagine.success_threshold"), "{err}");
    }
}
