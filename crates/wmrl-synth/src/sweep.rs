//! Learning-rate sweeps: every mode at its own best learning rate from one
//! common grid, so that a claim about a mode is not a claim about the
//! learning rate it happened to be run at.
//!
//! A mode's weights change the length of its gradient (count weights, the
//! paper's weights and the least-error weights differ by up to the
//! world-model stream's shrinkage), so at a fixed learning rate a
//! comparison of modes partly compares step sizes. [`sweep`] runs each
//! mode at every rate of the grid on the same seeds and reports, per mode,
//! the rate with the highest final true reward.

use serde::{Deserialize, Serialize};
use wmrl_core::Mode;

use crate::Result;
use crate::runner::{ModeSummary, benchmark};
use crate::scenario::Scenario;

/// One mode at one learning rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    /// Learning rate.
    pub learning_rate: f64,
    /// The mode's summary at that rate.
    pub summary: ModeSummary,
}

/// One mode over the grid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModeSweep {
    /// Mode.
    pub mode: Mode,
    /// Every rate of the grid, in grid order.
    pub points: Vec<SweepPoint>,
    /// The point with the highest final true reward.
    pub best: SweepPoint,
}

/// A sweep of one scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sweep {
    /// Scenario name.
    pub scenario: String,
    /// The grid of learning rates.
    pub learning_rates: Vec<f64>,
    /// One entry per mode, in the order given.
    pub modes: Vec<ModeSweep>,
}

impl Sweep {
    /// The sweep of `mode`, if it was run.
    pub fn mode(&self, mode: Mode) -> Option<&ModeSweep> {
        self.modes.iter().find(|m| m.mode == mode)
    }
}

/// Runs `modes` of `scenario` at every rate of `learning_rates` (same seeds).
pub fn sweep(scenario: &Scenario, modes: &[Mode], learning_rates: &[f64]) -> Result<Sweep> {
    let mut per_mode: Vec<Vec<SweepPoint>> = vec![Vec::new(); modes.len()];
    for &learning_rate in learning_rates {
        let s = Scenario {
            learning_rate,
            ..scenario.clone()
        };
        let result = benchmark(&s, modes, 0.95, |_| {})?;
        for (points, summary) in per_mode.iter_mut().zip(result.modes) {
            points.push(SweepPoint {
                learning_rate,
                summary,
            });
        }
    }
    let modes = modes
        .iter()
        .zip(per_mode)
        .map(|(&mode, points)| {
            let best = points
                .iter()
                .max_by(|a, b| {
                    a.summary
                        .final_true_reward
                        .total_cmp(&b.summary.final_true_reward)
                })
                .expect("a non-empty grid")
                .clone();
            ModeSweep { mode, points, best }
        })
        .collect();
    Ok(Sweep {
        scenario: scenario.name.clone(),
        learning_rates: learning_rates.to_vec(),
        modes,
    })
}
