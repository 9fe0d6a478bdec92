//! Per-camera image encoder: a small strided CNN with GroupNorm, read out by a
//! spatial softmax (expected x/y of each feature map, as in Levine et al. 2016,
//! "End-to-End Training of Deep Visuomotor Policies", §4.1) plus global average
//! pooling, then a linear projection.
//!
//! Keypoints keep *where* things are, which manipulation needs and global pooling
//! alone throws away; the pooled channels keep *what* is visible.

use tch::nn::{self, Module};
use tch::{Kind, Tensor};

use crate::config::VisionConfig;

/// One camera's encoder.
#[derive(Debug)]
pub struct CameraEncoder {
    layers: Vec<(nn::Conv2D, nn::GroupNorm)>,
    proj: nn::Linear,
    /// x coordinate in [-1, 1] of each flattened feature-map cell, `[h·w]`.
    grid_x: Tensor,
    /// y coordinate in [-1, 1] of each flattened feature-map cell, `[h·w]`.
    grid_y: Tensor,
}

/// Feature-map side after the conv stack for a square input of `size`.
pub fn feature_map_side(config: &VisionConfig, size: i64) -> i64 {
    config
        .strides
        .iter()
        .enumerate()
        .fold(size, |side, (i, &stride)| {
            let (kernel, pad) = kernel_and_padding(i);
            (side + 2 * pad - kernel) / stride + 1
        })
}

fn kernel_and_padding(layer: usize) -> (i64, i64) {
    if layer == 0 { (5, 2) } else { (3, 1) }
}

fn groups_for(channels: i64) -> i64 {
    [8, 4, 2]
        .into_iter()
        .find(|g| channels % g == 0)
        .unwrap_or(1)
}

impl CameraEncoder {
    /// Builds the encoder for square images of side `image_size`.
    pub fn new(p: &nn::Path, config: &VisionConfig, image_size: i64) -> Self {
        let mut layers = Vec::with_capacity(config.channels.len());
        let mut in_channels = 3;
        for (i, (&out, &stride)) in config.channels.iter().zip(&config.strides).enumerate() {
            let (kernel, padding) = kernel_and_padding(i);
            let conv_cfg = nn::ConvConfig {
                stride,
                padding,
                ..Default::default()
            };
            let conv = nn::conv2d(p / format!("conv{i}"), in_channels, out, kernel, conv_cfg);
            let norm = nn::group_norm(
                p / format!("norm{i}"),
                groups_for(out),
                out,
                Default::default(),
            );
            layers.push((conv, norm));
            in_channels = out;
        }
        let side = feature_map_side(config, image_size);
        let device = p.device();
        let coords = Tensor::linspace(-1.0, 1.0, side, (Kind::Float, device));
        let grid_x = coords.repeat([side]);
        let grid_y = coords.repeat_interleave_self_int(side, 0, None);
        let proj = nn::linear(
            p / "proj",
            3 * in_channels,
            config.embed_dim,
            Default::default(),
        );
        Self {
            layers,
            proj,
            grid_x,
            grid_y,
        }
    }

    /// `[B, 3, S, S]` normalised images → `[B, embed_dim]`.
    pub fn forward(&self, images: &Tensor) -> Tensor {
        let mut x = images.shallow_clone();
        for (conv, norm) in &self.layers {
            x = x.apply(conv).apply(norm).relu();
        }
        let (b, c, h, w) = x.size4().expect("conv features are 4-D");
        let flat = x.view([b, c, h * w]);
        let attention = flat.softmax(-1, Kind::Float);
        let kx = (&attention * &self.grid_x).sum_dim_intlist(-1, false, Kind::Float);
        let ky = (&attention * &self.grid_y).sum_dim_intlist(-1, false, Kind::Float);
        let pooled = flat.mean_dim(-1, false, Kind::Float);
        self.proj.forward(&Tensor::cat(&[kx, ky, pooled], 1))
    }
}
