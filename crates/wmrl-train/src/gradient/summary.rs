//! The statistics of `wmrl bench gradient`: each estimator's error against
//! the real-execution reference with the reference's own noise taken out.
//!
//! The reference r is the mean of R draws of mode `real`, split into two
//! halves h₁, h₂ (n₁ + n₂ = R). Its expectation is the anchor stream's, ḡ,
//! and it is independent of the probed draws, so for a probed estimate ĝ:
//!
//! ```text
//! E‖ĝ − r‖² = E‖ĝ − ḡ‖² + E‖r − ḡ‖²,    E‖r − ḡ‖² = E‖h₁ − h₂‖² / (R (1/n₁ + 1/n₂)),
//! E[ĝ·r] = E[ĝ]·ḡ,                      E[h₁·h₂] = ‖ḡ‖².
//! ```
//!
//! Two errors follow, both free of the reference's noise: the mean squared
//! error E‖ĝ − ḡ‖² (reported relative to the anchor stream's alone), and
//! the scale-free error ‖ḡ‖² E‖ĝ‖² / (E[ĝ·ḡ])² − 1, the relative squared
//! error after the one fixed rescaling that gives ĝ's mean unit length along
//! ḡ (the error a tuned learning rate sees; the synthetic `wmrl bench
//! fusion` reports the same quantity against the exact gradient). Second
//! moments E‖ĝ‖² alone are not reported: they reward shrinking a gradient
//! rather than pointing it right.

use serde::{Deserialize, Serialize};

use super::{ReferenceGradient, StreamProducts};

/// One estimator's figures over the probed steps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GradientRow {
    /// Label: the core's rule, count weights, or a fixed weight.
    pub estimator: String,
    /// World-model weight w of (1 − w)·g_A + w·g_W, mean over steps.
    pub world_model_weight: f64,
    /// Mean cosine with the reference (lowered by the reference's noise alike for every row).
    pub cosine: f64,
    /// Its standard error.
    pub cosine_se: f64,
    /// Scale-free error against ḡ (`None` when undefined: E[ĝ·r] ≤ 0 or ‖ḡ‖² estimate ≤ 0).
    pub error: Option<f64>,
    /// E‖ĝ − ḡ‖², the reference's noise subtracted, over the anchor stream's alone.
    pub mse_vs_anchor: f64,
}

/// What `wmrl bench gradient` reports for one probed mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GradientSummary {
    /// Steps with a gradient in both streams.
    pub steps: usize,
    /// The core's world-model weight, mean over steps.
    pub core_world_model_weight: f64,
    /// Count weights' world-model weight, mean over steps.
    pub count_world_model_weight: f64,
    /// E‖r − ḡ‖², the reference's own noise.
    pub reference_noise: f64,
    /// ‖ḡ‖² estimated as h₁·h₂.
    pub reference_signal: f64,
    /// One row per estimator.
    pub estimators: Vec<GradientRow>,
}

fn mean_se(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    if values.len() < 2 {
        return (mean, 0.0);
    }
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, (var / n).sqrt())
}

/// Summarises probed steps: `products[i]` with the core's world-model
/// weight `core_w[i]` (the share u_W / (u_A + u_W)) and count weight
/// `count_w[i]`, and the fixed weights `grid`.
pub fn summarise(
    products: &[StreamProducts],
    core_w: &[f64],
    count_w: &[f64],
    grid: &[f64],
    reference: &ReferenceGradient,
) -> GradientSummary {
    assert!(
        !products.is_empty() && products.len() == core_w.len() && core_w.len() == count_w.len(),
        "one weight per probed step"
    );
    let noise = reference.noise();
    let signal = reference.signal();
    let mse_at = |w: &dyn Fn(usize) -> f64| {
        let d: Vec<f64> = products
            .iter()
            .enumerate()
            .map(|(i, p)| p.distance_squared_at(w(i)))
            .collect();
        mean_se(&d).0 - noise
    };
    let anchor_mse = mse_at(&|_| 0.0);
    let row = |label: String, w: &dyn Fn(usize) -> f64| {
        let cos: Vec<f64> = products
            .iter()
            .enumerate()
            .map(|(i, p)| p.cosine_at(w(i)))
            .collect();
        let (cosine, cosine_se) = mean_se(&cos);
        let weights: Vec<f64> = (0..products.len()).map(w).collect();
        let sq: Vec<f64> = products
            .iter()
            .enumerate()
            .map(|(i, p)| p.squared_norm_at(w(i)))
            .collect();
        let along: Vec<f64> = products
            .iter()
            .enumerate()
            .map(|(i, p)| p.along_at(w(i)))
            .collect();
        let (sq, along) = (mean_se(&sq).0, mean_se(&along).0);
        GradientRow {
            estimator: label,
            world_model_weight: mean_se(&weights).0,
            cosine,
            cosine_se,
            error: (along > 0.0 && signal > 0.0).then(|| signal * sq / (along * along) - 1.0),
            mse_vs_anchor: mse_at(w) / anchor_mse,
        }
    };
    let mut estimators = vec![
        row("core".into(), &|i| core_w[i]),
        row("count weights".into(), &|i| count_w[i]),
    ];
    for &w in grid {
        estimators.push(row(format!("w = {w}"), &|_| w));
    }
    GradientSummary {
        steps: products.len(),
        core_world_model_weight: mean_se(core_w).0,
        count_world_model_weight: mean_se(count_w).0,
        reference_noise: noise,
        reference_signal: signal,
        estimators,
    }
}
