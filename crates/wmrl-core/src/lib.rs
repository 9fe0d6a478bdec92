//! The domain-free WMRL algorithm: GRPO with a cheap world-model stream and
//! a small anchor stream of real executions.
//!
//! A world model scores a rollout τ with ŝ(τ) = r(τ) + b(τ) + ξ(τ): true
//! reward, systematic bias, zero-mean noise. Each step has G groups (a
//! prompt and its n rollouts); a fraction ρ of them (default 0.1) are
//! **anchors**, executed for real and also scored, the rest are scored (or
//! imagined) by the world model only. The core
//!
//! - schedules anchors, stratified over tasks ([`schedule`]);
//! - **debiases**: fits a monotone map f̂ from scores to real rewards on
//!   anchor pairs by isotonic regression, refitted online ([`isotonic`],
//!   [`calibrator`]), and replaces world-model rewards by f̂(ŝ);
//! - **denoises**: estimates the world model's agreement with real rewards
//!   out of sample ([`denoise`]) and weights the two streams' gradients for
//!   the least error to the true gradient ([`weights`]);
//! - computes group-relative advantages ([`advantage`]) and per-sample
//!   loss weights for the learner ([`fuse`]), with diagnostics
//!   ([`diagnostics`]) for every step;
//! - keeps its state across steps in one checkpointable value ([`state`]);
//! - defines the seams a domain implements ([`seams`]) and a generic
//!   training step over them ([`driver`]).
//!
//! Everything is plain `f64` numbers: no tensors, simulator or async. All
//! randomness derives from a seed ([`rng`]).

pub mod advantage;
pub mod calibrator;
pub mod config;
pub mod denoise;
pub mod diagnostics;
pub mod driver;
mod error;
pub mod fuse;
pub mod isotonic;
pub mod mode;
pub mod rng;
pub mod sampling;
pub mod schedule;
pub mod seams;
pub mod state;
pub mod weights;

pub use advantage::{AdvantageOptions, Stream, group_advantages};
pub use calibrator::{AnchorPair, CalibratorConfig, Forgetting, OnlineCalibrator};
pub use config::{AnchorScoring, CoreConfig};
pub use denoise::{DenoiseConfig, NoiseEstimate};
pub use diagnostics::StepDiagnostics;
pub use driver::{StepPlan, StepReport, step};
pub use error::{Component, Error, Result};
pub use fuse::{GroupInput, SampleOut, StepOutput};
pub use isotonic::IsotonicFit;
pub use mode::Mode;
pub use sampling::{DynamicSampling, SamplingCounts};
pub use schedule::{AnchorPlan, TaskId};
pub use state::Core;
pub use weights::{Fallback, StreamWeights, WeightRule};
