//! `wmrl bench policy`: training samples per second and inference actions per
//! second of a model config, on synthetic 128×128 observations (the
//! simulator's default camera size), on the selected device.

use std::path::Path;
use std::time::Instant;

use serde::Serialize;
use tch::Device;

use crate::Result;
use crate::config::VlaConfig;
use crate::demos::DemoDataset;
use crate::distribution::Decoding;
use crate::inference::PolicyInput;
use crate::model::VlaPolicy;
use crate::sft::{Learner, dataset_options};
use crate::synthetic;
use crate::tokenizer::Tokenizer;

/// What to measure.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyBenchOptions {
    /// Camera image side fed to the policy (default: 128).
    pub image_size: u32,
    /// Timed optimiser steps, after 3 warm-up steps (default: 20).
    pub train_steps: u64,
    /// Environments per inference batch (default: 50).
    pub inference_batch: usize,
    /// Timed inference batches, after 2 warm-up batches (default: 20).
    pub inference_batches: usize,
}

impl Default for PolicyBenchOptions {
    fn default() -> Self {
        Self {
            image_size: 128,
            train_steps: 20,
            inference_batch: 50,
            inference_batches: 20,
        }
    }
}

/// Measured figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PolicyBench {
    /// Device used.
    pub device: String,
    /// libtorch intra-op threads.
    pub threads: i32,
    /// Trainable parameters.
    pub parameters: i64,
    /// Model input side.
    pub model_image_size: i64,
    /// Camera image side fed in.
    pub camera_image_size: u32,
    /// Training batch size.
    pub train_batch_size: i64,
    /// Behaviour-cloning samples per second (forward, backward, AdamW, augmentation).
    pub train_samples_per_s: f64,
    /// Environments per inference batch.
    pub inference_batch: usize,
    /// Chunks decoded per second (greedy, batched, from RGB images and text).
    pub inference_chunks_per_s: f64,
    /// Control actions per second (`chunks/s × chunk_len`).
    pub inference_actions_per_s: f64,
    /// Mean latency of one inference batch in milliseconds.
    pub inference_batch_ms: f64,
}

/// Runs the benchmark of `config` on `device`.
pub fn bench_policy(
    config: &VlaConfig,
    device: Device,
    options: &PolicyBenchOptions,
) -> Result<PolicyBench> {
    let _span = tracing::info_span!("bench_policy").entered();
    tch::manual_seed(0);
    let episodes = synthetic::episodes(32, 8, options.image_size, 0);
    let mut data_options = dataset_options(config);
    data_options.val_fraction = 0.0;
    let dataset =
        DemoDataset::from_episodes(Path::new("<synthetic>"), &episodes, None, &data_options)?;
    let tokenizer = Tokenizer::from_instructions(dataset.instructions());
    let policy = VlaPolicy::new(config.model.clone(), tokenizer.clone(), device)?;
    let parameters = policy.parameter_count();
    let mut learner = Learner::new(policy, config.train.clone(), &dataset.instructions())?;
    for _ in 0..3 {
        learner.train_step(&dataset.train)?;
    }
    let started = Instant::now();
    for _ in 0..options.train_steps {
        learner.train_step(&dataset.train)?;
    }
    let train_seconds = started.elapsed().as_secs_f64();
    let train_samples_per_s =
        options.train_steps as f64 * config.train.batch_size as f64 / train_seconds;

    let policy = learner.policy;
    let scenes: Vec<_> = episodes
        .iter()
        .cycle()
        .take(options.inference_batch)
        .collect();
    let inputs: Vec<PolicyInput<'_>> = scenes
        .iter()
        .map(|e| PolicyInput {
            agent_view: &e.agent_view[0],
            wrist_view: &e.wrist_view[0],
            proprio: &e.proprio[..synthetic::PROPRIO_DIM],
            instruction: &e.meta.instruction,
        })
        .collect();
    for _ in 0..2 {
        policy.predict(&inputs, Decoding::Greedy)?;
    }
    let started = Instant::now();
    for _ in 0..options.inference_batches {
        policy.predict(&inputs, Decoding::Greedy)?;
    }
    let infer_seconds = started.elapsed().as_secs_f64();
    let chunks = (options.inference_batches * options.inference_batch) as f64;
    let chunks_per_s = chunks / infer_seconds;
    Ok(PolicyBench {
        device: format!("{device:?}"),
        threads: tch::get_num_threads(),
        parameters,
        model_image_size: config.model.image_size,
        camera_image_size: options.image_size,
        train_batch_size: config.train.batch_size,
        train_samples_per_s,
        inference_batch: options.inference_batch,
        inference_chunks_per_s: chunks_per_s,
        inference_actions_per_s: chunks_per_s * config.model.action.chunk_len as f64,
        inference_batch_ms: infer_seconds * 1000.0 / options.inference_batches as f64,
    })
}
