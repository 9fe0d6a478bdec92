//! Per-step diagnostics: what the core saw and decided, as data a trainer
//! logs (one JSONL row per step) and checkpoints. `None` fields serialise as
//! `null` and mean "not applicable in this mode or not estimable yet".

use serde::{Deserialize, Serialize};

use crate::mode::Mode;
use crate::weights::StreamWeights;

/// What one step of the core computed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepDiagnostics {
    /// Step index.
    pub step: u64,
    /// Mode of the step.
    pub mode: Mode,
    /// Groups in the step.
    pub groups: usize,
    /// Anchor groups (executed for real).
    pub anchor_groups: usize,
    /// World-model groups.
    pub world_model_groups: usize,
    /// Anchor samples (rollouts).
    pub anchor_samples: usize,
    /// World-model samples.
    pub world_model_samples: usize,
    /// Mean real reward of this step's anchor samples.
    pub anchor_reward_mean: Option<f64>,
    /// Mean raw world-model score of this step's world-model samples.
    pub world_model_score_mean: Option<f64>,
    /// Mean reward used for world-model samples (f̂(ŝ) when debiasing, ŝ otherwise).
    pub world_model_reward_mean: Option<f64>,
    /// Mean of ŝ − r on this step's anchors: the raw world model's bias.
    pub raw_bias: Option<f64>,
    /// Mean of f̂(ŝ) − r on this step's anchors, with f̂ fitted on earlier
    /// steps only (out of sample): the bias left after debiasing.
    pub calibrated_bias: Option<f64>,
    /// σ²_ξ: cross-fitted within-group residual variance (see [`crate::denoise`]).
    pub residual_variance: Option<f64>,
    /// Cross-fitted residual variance over all anchor pairs, between-group errors included.
    pub total_residual_variance: Option<f64>,
    /// v_r: pooled within-group variance of real rewards on the anchors in the window.
    pub reward_variance: Option<f64>,
    /// ρ: out-of-fold within-group correlation of real and world-model
    /// rewards on anchors; a world-model sample is worth ρ² of an anchor one.
    pub reward_correlation: Option<f64>,
    /// Stream weights handed to the learner (in `ppi`: 1 and λ, not normalised).
    pub stream_weights: StreamWeights,
    /// λ* of the prediction-powered estimator (mode `ppi` only).
    pub ppi_lambda: Option<f64>,
    /// Anchor pairs held by the calibrator after this step.
    pub calibrator_pairs: usize,
    /// Blocks of the calibrator's map (0 while it is the identity).
    pub calibrator_blocks: usize,
    /// Whether f̂ was the identity (too few pairs) when applied this step.
    pub calibrator_identity: bool,
    /// Groups whose rewards were all equal (zero advantage).
    pub zero_variance_groups: usize,
    /// Their share of all groups.
    pub zero_variance_share: f64,
}
