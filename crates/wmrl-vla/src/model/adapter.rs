//! A trainable adapter on the frozen observation latent: the part of the
//! policy's perception that post-training may change while the encoder, and
//! with it the world model's latent space, stays as SFT left it.
//!
//! `z' = z + W₂ gelu(W₁ LN(z))`, with W₂ and its bias zero at creation, so a
//! policy gains the adapter without changing a single action probability.
//! The action head reads z'. The world model keeps predicting z (the frozen
//! encoder's latent), and imagined and executed chunks are re-evaluated
//! through the same adapter, so both streams train it.

use tch::Tensor;
use tch::nn::{self, Module};

/// Variable-name prefix of the adapter's weights.
pub const ADAPTER_PREFIX: &str = "latent_adapter.";

/// The residual MLP on the latent.
#[derive(Debug)]
pub struct LatentAdapter {
    norm: nn::LayerNorm,
    fc1: nn::Linear,
    fc2: nn::Linear,
}

impl LatentAdapter {
    /// An adapter of width `hidden` on latents of `latent_dim` under `p`
    /// (`norm`, `fc1`, `fc2`), the identity map until trained.
    pub fn new(p: &nn::Path, latent_dim: i64, hidden: i64) -> Self {
        let zero = nn::LinearConfig {
            ws_init: nn::Init::Const(0.0),
            bs_init: Some(nn::Init::Const(0.0)),
            bias: true,
        };
        Self {
            norm: nn::layer_norm(p / "norm", vec![latent_dim], Default::default()),
            fc1: nn::linear(p / "fc1", latent_dim, hidden, Default::default()),
            fc2: nn::linear(p / "fc2", hidden, latent_dim, zero),
        }
    }

    /// `z + W₂ gelu(W₁ LN(z))`.
    pub fn forward(&self, z: &Tensor) -> Tensor {
        z + self
            .norm
            .forward(z)
            .apply(&self.fc1)
            .gelu("none")
            .apply(&self.fc2)
    }
}
