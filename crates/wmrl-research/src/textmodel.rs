//! A small learned world model for solution texts (tch): tokens → predicted
//! leaderboard percentile, trained online on anchor outcomes.
//!
//! Architecture (fastText-style, Joulin et al. 2017, "Bag of Tricks for
//! Efficient Text Classification"): the text is split into tokens (runs of
//! letters, digits, `_` and `.`), and the set of features {unigram, bigram,
//! task × unigram, task × bigram, task} is hashed (FNV-1a) into `buckets`
//! rows of an embedding table; the mean embedding goes through a one-hidden-
//! layer MLP and a sigmoid:
//!
//! ŝ = σ(W₂ · relu(W₁ · mean_{f ∈ F(text)} E[h(f)] + b₁) + b₂)
//!
//! The task-crossed features let the same line of code score differently on
//! different tasks. Training minimises the squared error to the real reward
//! on a replay buffer of every executed (task, text, reward) triple, with a
//! few Adam steps after each batch of anchors ([`TextScorer::observe`]).

use std::collections::BTreeSet;
use std::path::Path;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use tch::nn::{self, Module, OptimizerConfig};
use tch::{Device, Kind, Tensor};

use crate::adapter::TextScorer;
use crate::task::Task;
use crate::{Error, Result};

/// Settings of the text world model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TextModelConfig {
    /// Hash buckets of the embedding table (default: 65536).
    pub buckets: i64,
    /// Embedding width (default: 32).
    pub embedding: i64,
    /// Hidden width (default: 64).
    pub hidden: i64,
    /// Adam learning rate (default: 0.01).
    pub learning_rate: f64,
    /// Adam steps after each observed batch (default: 60).
    pub steps_per_observe: usize,
    /// Minibatch size (default: 64).
    pub batch_size: usize,
    /// Seed of initialisation and minibatch sampling (default: 0).
    pub seed: u64,
}

impl Default for TextModelConfig {
    fn default() -> Self {
        Self {
            buckets: 1 << 16,
            embedding: 32,
            hidden: 64,
            learning_rate: 0.01,
            steps_per_observe: 60,
            batch_size: 64,
            seed: 0,
        }
    }
}

/// FNV-1a, 64 bit.
fn fnv1a(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            h ^= 0x1f;
            h = h.wrapping_mul(0x100_0000_01b3);
        }
        for b in part.bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x100_0000_01b3);
        }
    }
    h
}

/// The hashed feature ids of a text for a task (sorted, deduplicated).
pub fn features(task: &str, text: &str, buckets: i64) -> Vec<i64> {
    let tokens: Vec<&str> = text
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .filter(|t| !t.is_empty())
        .collect();
    let mut set = BTreeSet::new();
    let mut add = |parts: &[&str]| {
        set.insert((fnv1a(parts) % buckets as u64) as i64);
    };
    add(&["task", task]);
    for (i, t) in tokens.iter().enumerate() {
        add(&["u", t]);
        add(&["tu", task, t]);
        if let Some(next) = tokens.get(i + 1) {
            add(&["b", t, next]);
            add(&["tb", task, t, next]);
        }
    }
    set.into_iter().collect()
}

/// The tch text world model.
pub struct TextModel {
    config: TextModelConfig,
    vs: nn::VarStore,
    embedding: Tensor,
    head: nn::Sequential,
    optimizer: nn::Optimizer,
    buffer: Vec<(Vec<i64>, f64)>,
    rng: ChaCha8Rng,
}

impl std::fmt::Debug for TextModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TextModel")
            .field("config", &self.config)
            .field("buffer", &self.buffer.len())
            .finish()
    }
}

impl TextModel {
    /// A fresh model on `device`.
    pub fn new(config: TextModelConfig, device: Device) -> Result<Self> {
        tch::manual_seed(config.seed as i64);
        let vs = nn::VarStore::new(device);
        let root = vs.root();
        let embedding = root.var(
            "embedding",
            &[config.buckets, config.embedding],
            nn::Init::Randn {
                mean: 0.0,
                stdev: 0.1,
            },
        );
        let head = nn::seq()
            .add(nn::linear(
                &root / "hidden",
                config.embedding,
                config.hidden,
                Default::default(),
            ))
            .add_fn(|x| x.relu())
            .add(nn::linear(
                &root / "out",
                config.hidden,
                1,
                Default::default(),
            ));
        let optimizer = nn::Adam::default()
            .build(&vs, config.learning_rate)
            .map_err(|e| Error::Build {
                what: "text model optimiser".into(),
                message: e.to_string(),
            })?;
        Ok(Self {
            config,
            vs,
            embedding,
            head,
            optimizer,
            buffer: Vec::new(),
            rng: ChaCha8Rng::seed_from_u64(config.seed),
        })
    }

    /// Replay buffer size.
    pub fn examples(&self) -> usize {
        self.buffer.len()
    }

    fn forward(&self, batch: &[&[i64]]) -> Tensor {
        let device = self.vs.device();
        let mut indices = Vec::new();
        let mut offsets = Vec::with_capacity(batch.len());
        for ids in batch {
            offsets.push(indices.len() as i64);
            indices.extend_from_slice(ids);
        }
        let indices = Tensor::from_slice(&indices).to_device(device);
        let offsets = Tensor::from_slice(&offsets).to_device(device);
        let (bag, _, _, _) = Tensor::embedding_bag::<Tensor>(
            &self.embedding,
            &indices,
            &offsets,
            false,
            1,
            false,
            None,
            false,
        );
        self.head.forward(&bag).squeeze_dim(-1).sigmoid()
    }

    /// Predicted percentiles.
    pub fn predict(&self, items: &[(&str, &str)]) -> Vec<f64> {
        let feats: Vec<Vec<i64>> = items
            .iter()
            .map(|(task, text)| features(task, text, self.config.buckets))
            .collect();
        let refs: Vec<&[i64]> = feats.iter().map(Vec::as_slice).collect();
        let out = tch::no_grad(|| self.forward(&refs))
            .to_kind(Kind::Double)
            .to_device(Device::Cpu);
        Vec::<f64>::try_from(out).unwrap_or_else(|_| vec![0.5; items.len()])
    }

    /// Adds examples and takes `steps_per_observe` Adam steps on the buffer; returns the last loss.
    pub fn train_on(&mut self, items: &[(&str, &str, f64)]) -> f64 {
        for (task, text, reward) in items {
            self.buffer
                .push((features(task, text, self.config.buckets), *reward));
        }
        if self.buffer.is_empty() {
            return 0.0;
        }
        let device = self.vs.device();
        let mut last = 0.0;
        for _ in 0..self.config.steps_per_observe {
            let picks: Vec<usize> = (0..self.config.batch_size.min(self.buffer.len()))
                .map(|_| self.rng.random_range(0..self.buffer.len()))
                .collect();
            let batch: Vec<&[i64]> = picks.iter().map(|&i| self.buffer[i].0.as_slice()).collect();
            let target: Vec<f32> = picks.iter().map(|&i| self.buffer[i].1 as f32).collect();
            let target = Tensor::from_slice(&target).to_device(device);
            let loss = (self.forward(&batch) - target).square().mean(Kind::Float);
            self.optimizer.backward_step(&loss);
            last = loss.double_value(&[]);
        }
        last
    }

    /// Saves the weights (safetensors).
    pub fn save(&self, path: &Path) -> Result<()> {
        self.vs.save(path).map_err(|e| Error::Build {
            what: format!("saving {}", path.display()),
            message: e.to_string(),
        })
    }

    /// Loads weights saved by [`TextModel::save`].
    pub fn load(&mut self, path: &Path) -> Result<()> {
        self.vs.load(path).map_err(|e| Error::Build {
            what: format!("loading {}", path.display()),
            message: e.to_string(),
        })
    }
}

impl TextScorer for TextModel {
    fn score(&mut self, items: &[(&Task, &str)]) -> Result<Vec<f64>> {
        let items: Vec<(&str, &str)> = items.iter().map(|(t, s)| (t.id(), *s)).collect();
        Ok(self.predict(&items))
    }

    fn observe(&mut self, items: &[(&Task, &str, f64)]) -> Result<()> {
        let items: Vec<(&str, &str, f64)> =
            items.iter().map(|(t, s, r)| (t.id(), *s, *r)).collect();
        let loss = self.train_on(&items);
        tracing::debug!(
            examples = self.buffer.len(),
            loss,
            "text world model updated"
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_depend_on_task_and_tokens() {
        let a = features("wine", "model = SVC(C=1.0)", 1 << 16);
        let b = features("digits", "model = SVC(C=1.0)", 1 << 16);
        let c = features("wine", "model = SVC(C=10.0)", 1 << 16);
        assert_ne!(a, b);
        assert_ne!(a, c);
        assert_eq!(a, features("wine", "model = SVC(C=1.0)", 1 << 16));
    }

    #[test]
    fn learns_to_rank_texts_by_reward() {
        let config = TextModelConfig {
            buckets: 4096,
            steps_per_observe: 200,
            ..Default::default()
        };
        let mut model = TextModel::new(config, Device::Cpu).unwrap();
        let data: Vec<(String, f64)> = (0..20)
            .map(|i| (format!("fit(model=Forest, depth={i})"), 0.9))
            .chain((0..20).map(|i| (format!("fit(model=Stump, depth={i})"), 0.1)))
            .collect();
        let items: Vec<(&str, &str, f64)> =
            data.iter().map(|(t, r)| ("wine", t.as_str(), *r)).collect();
        model.train_on(&items);
        let p = model.predict(&[
            ("wine", "fit(model=Forest, depth=99)"),
            ("wine", "fit(model=Stump, depth=99)"),
        ]);
        assert!(p[0] > 0.7 && p[1] < 0.3, "{p:?}");
    }
}
