//! WMRL post-training of the VLA: each iteration is one step of the core
//! (`wmrl_core::step`) through the four seams:
//!
//! - **adapter**: LIBERO-Long prompts (task × initial state) of the chosen tasks;
//! - **anchor executor**: the rapier simulator ([`wmrl_vla::sim::SimExecutor`]),
//!   recording the observation at every chunk boundary (the learner
//!   re-evaluates the policy on them, the world model learns from them), or
//!   any other executor of closed-loop episodes ([`anchors`]);
//! - **world model**: [`wmrl_wm::VlaWorldModel`]: imagined rollouts in the
//!   policy's latent space, anchors scored by open-loop replay, anchor
//!   episodes into its replay buffer, refreshed every K iterations;
//! - **policy**: [`wmrl_vla::grpo::VlaLearner`], clipped-surrogate GRPO on the
//!   action tokens with the core's advantages and stream weights.
//!
//! The core calibrates, denoises and computes advantages; the mode (`real`,
//! `wm-only`, `wmrl`, `wmrl-no-debias`, `wmrl-no-denoise`, `ppi`) is the
//! core's. Every `eval_every` iterations the policy is evaluated greedily on
//! the fixed initial states. Artefacts in the run folder: `config.json`
//! (resolved), `metrics.jsonl` (one row per iteration: success rates,
//! rewards, the core's diagnostics, learner statistics, real environment
//! steps, simulator / world-model / learner seconds),
//! `success_vs_env_steps.png` and `success_vs_wallclock.png`,
//! `policy/` (the post-trained policy) and `checkpoints/` (see
//! [`checkpoint`]: `wmrl train --resume` continues a killed run bit for bit).
//! [`gradient`] measures the streams' gradients against real execution's
//! (`wmrl bench gradient`).

pub mod anchors;
pub mod checkpoint;
mod config;
mod error;
pub mod experiment;
pub mod gradient;
pub mod overlap;
pub mod signal;
mod timed;
mod trainer;

pub use anchors::{AnchorStream, ExecutorError};
pub use checkpoint::OnDamage;
pub use config::{ExecutorConfig, TrainConfig};
pub use error::{Error, Result};
pub use signal::{SignalTracker, StarvedTask};
pub use timed::{Clock, Timed};
pub use trainer::{Evaluation, IterationRow, TrainSummary, VlaTrainer};
