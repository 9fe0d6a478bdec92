//! A synthetic benchmark that reproduces WMRL's claims in seconds, without
//! neural networks.
//!
//! A tabular softmax policy ([`policy`]) is trained by GRPO with exact
//! gradients on a synthetic world ([`scenario`], [`world`]) whose world
//! model is cheap but biased (a saturating monotone miscalibration and
//! over-rated bad actions) and noisy. Real executions cost 1, world-model
//! scores a configurable fraction. Every mode of the core runs from the
//! same seeds ([`runner`]); [`report`] prints the table and writes metrics
//! and plots.
//!
//! The benchmark is itself an implementation of the core's seams
//! ([`wmrl_core::seams`]): [`world::SynthAdapter`],
//! [`world::SynthExecutor`], [`world::SynthWorldModel`] and
//! [`policy::SoftmaxPolicy`] go through the same [`wmrl_core::step`]
//! driver as the VLA and AutoResearch trainers.

pub mod bench;
pub mod fusion_bench;
pub mod policy;
pub mod report;
pub mod runner;
pub mod scenario;
pub mod sweep;
pub mod world;

pub use runner::{BenchmarkResult, ModeSummary, RunResult, StepRecord, benchmark, run};
pub use scenario::{CostModel, PRESETS, RewardKind, Scenario, WorldModelSpec};

/// Errors of the synthetic benchmark.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The core rejected a configuration or failed a step.
    #[error(transparent)]
    Core(#[from] wmrl_core::Error),
    /// Writing metrics or plots failed.
    #[error(transparent)]
    Report(#[from] wmrl_report::Error),
    /// A scenario value is out of range.
    #[error("invalid scenario: {field} = {value}: expected {expected}")]
    InvalidScenario {
        /// The field, as written in a scenario file.
        field: &'static str,
        /// The value given.
        value: String,
        /// What is allowed.
        expected: &'static str,
    },
    /// A `key=value` override does not apply.
    #[error("cannot set `{key}`: {message}")]
    InvalidOverride {
        /// The key given.
        key: String,
        /// Why.
        message: String,
    },
    /// No preset has this name.
    #[error("unknown scenario `{name}`; expected one of {known}")]
    UnknownPreset {
        /// The name asked for.
        name: String,
        /// The presets.
        known: String,
    },
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;
