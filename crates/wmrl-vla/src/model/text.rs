//! Instruction encoder: word embeddings plus learned positions, a few pre-norm
//! transformer encoder layers (Vaswani et al. 2017; pre-LN as in Xiong et al.
//! 2020), and a masked mean over the real tokens.

use tch::nn::{self, Module};
use tch::{Kind, Tensor};

use crate::config::TextConfig;
use crate::tokenizer::PAD;

/// One pre-norm transformer encoder layer.
#[derive(Debug)]
struct EncoderLayer {
    norm1: nn::LayerNorm,
    qkv: nn::Linear,
    out: nn::Linear,
    norm2: nn::LayerNorm,
    fc1: nn::Linear,
    fc2: nn::Linear,
    heads: i64,
}

impl EncoderLayer {
    fn new(p: &nn::Path, dim: i64, heads: i64) -> Self {
        Self {
            norm1: nn::layer_norm(p / "norm1", vec![dim], Default::default()),
            qkv: nn::linear(p / "qkv", dim, 3 * dim, Default::default()),
            out: nn::linear(p / "out", dim, dim, Default::default()),
            norm2: nn::layer_norm(p / "norm2", vec![dim], Default::default()),
            fc1: nn::linear(p / "fc1", dim, 4 * dim, Default::default()),
            fc2: nn::linear(p / "fc2", 4 * dim, dim, Default::default()),
            heads,
        }
    }

    /// `x: [B, L, D]`, `attend: [B, 1, 1, L]` (true where a key is a real token).
    fn forward(&self, x: &Tensor, attend: &Tensor) -> Tensor {
        let (b, l, d) = x.size3().expect("[B, L, D]");
        let head_dim = d / self.heads;
        let qkv = self
            .norm1
            .forward(x)
            .apply(&self.qkv)
            .view([b, l, 3, self.heads, head_dim])
            .permute([2, 0, 3, 1, 4]);
        let (q, k, v) = (qkv.get(0), qkv.get(1), qkv.get(2));
        let attended =
            Tensor::scaled_dot_product_attention(&q, &k, &v, Some(attend), 0.0, false, None, false);
        let x = x + attended.transpose(1, 2).reshape([b, l, d]).apply(&self.out);
        let mlp = self
            .norm2
            .forward(&x)
            .apply(&self.fc1)
            .gelu("none")
            .apply(&self.fc2);
        x + mlp
    }
}

/// Token ids `[B, L]` → instruction embedding `[B, dim]`.
#[derive(Debug)]
pub struct TextEncoder {
    embed: nn::Embedding,
    positions: Tensor,
    layers: Vec<EncoderLayer>,
    norm: nn::LayerNorm,
}

impl TextEncoder {
    /// Builds the encoder for a vocabulary of `vocab` tokens.
    pub fn new(p: &nn::Path, config: &TextConfig, vocab: i64) -> Self {
        let embed_cfg = nn::EmbeddingConfig {
            padding_idx: PAD,
            ..Default::default()
        };
        Self {
            embed: nn::embedding(p / "embed", vocab, config.dim, embed_cfg),
            positions: p.var(
                "positions",
                &[config.max_tokens, config.dim],
                nn::Init::Randn {
                    mean: 0.0,
                    stdev: 0.02,
                },
            ),
            layers: (0..config.layers)
                .map(|i| EncoderLayer::new(&(p / format!("layer{i}")), config.dim, config.heads))
                .collect(),
            norm: nn::layer_norm(p / "norm", vec![config.dim], Default::default()),
        }
    }

    /// Encodes padded token ids (`PAD` after the real tokens; position 0 is always real).
    pub fn forward(&self, ids: &Tensor) -> Tensor {
        let (b, l) = ids.size2().expect("[B, L] token ids");
        let real = ids.ne(PAD);
        let mut x = self.embed.forward(ids) + self.positions.narrow(0, 0, l);
        let attend = real.view([b, 1, 1, l]);
        for layer in &self.layers {
            x = layer.forward(&x, &attend);
        }
        let x = self.norm.forward(&x);
        let weights = real.to_kind(Kind::Float).unsqueeze(-1);
        (x * &weights).sum_dim_intlist(1, false, Kind::Float)
            / weights
                .sum_dim_intlist(1, false, Kind::Float)
                .clamp_min(1.0)
    }
}
