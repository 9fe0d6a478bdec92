//! Runs the synthetic benchmark: one training run per (mode, seed) through
//! the core's generic [`wmrl_core::step`] driver, then a summary per mode.
//!
//! Every mode of a seed sees the same world (true rewards, over-rated
//! actions) and the same episode seeds. A run's *final true reward* is the
//! exact J of the policy averaged over the last 10% of steps. The *target*
//! is a fraction (default 95%) of `real`'s improvement over the initial
//! policy: J₀ + f·(J_real − J₀), with J_real the mean over seeds; a
//! mode's *executions to target* are the mean real executions at the first
//! step where its seed-averaged true reward reaches the target, and its
//! *savings* are `real`'s executions to target divided by its own.

use serde::{Deserialize, Serialize};
use wmrl_core::rng::derive_seed;
use wmrl_core::{Core, Mode, StepDiagnostics};

use crate::policy::SoftmaxPolicy;
use crate::scenario::Scenario;
use crate::world::{SynthAdapter, SynthExecutor, SynthWorldModel, SyntheticWorld};
use crate::{Error, Result};

/// The state of a run after one step (or before the first, at step 0).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// Steps completed.
    pub step: u64,
    /// Exact true reward J of the policy.
    pub true_reward: f64,
    /// Policy mass on over-rated actions.
    pub overrated_mass: f64,
    /// Real executions so far (attempts, re-queued ones included).
    pub executions: u64,
    /// Total cost so far (cost model of the scenario).
    pub cost: f64,
    /// The core's diagnostics of this step (`None` at step 0).
    pub diagnostics: Option<StepDiagnostics>,
}

/// One training run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// Mode.
    pub mode: Mode,
    /// Seed.
    pub seed: u64,
    /// Records from step 0 to the last step.
    pub records: Vec<StepRecord>,
    /// True reward averaged over the last 10% of steps.
    pub final_true_reward: f64,
}

/// Steps averaged for the final true reward.
pub fn final_window(steps: u64) -> usize {
    (steps as usize / 10).max(1)
}

/// Trains a fresh uniform policy for `scenario.steps` steps in `mode`,
/// calling `on_step` after each step.
pub fn run(
    scenario: &Scenario,
    mode: Mode,
    seed: u64,
    mut on_step: impl FnMut(&StepRecord),
) -> Result<RunResult> {
    scenario.validate()?;
    let _span = tracing::info_span!("synth_run", scenario = %scenario.name, %mode, seed).entered();
    let world = SyntheticWorld::generate(scenario, seed);
    let config = wmrl_core::CoreConfig {
        mode,
        seed: derive_seed(seed, &[0xc0e]),
        ..scenario.core
    };
    let mut core = Core::new(config)?;
    let mut adapter = SynthAdapter {
        prompts: scenario.prompts,
    };
    let mut policy =
        SoftmaxPolicy::uniform(scenario.prompts, scenario.actions, scenario.learning_rate);
    let mut executor = SynthExecutor::new(&world, scenario.execution_failure_rate);
    let mut world_model = SynthWorldModel::new(&world, derive_seed(seed, &[0x3a7e]));

    let mut records = vec![StepRecord {
        step: 0,
        true_reward: policy.true_reward(&world),
        overrated_mass: policy.overrated_mass(&world),
        executions: 0,
        cost: 0.0,
        diagnostics: None,
    }];
    let (mut executions, mut cost) = (0u64, 0.0);
    for step in 1..=scenario.steps {
        let report = wmrl_core::step(
            &mut core,
            &mut adapter,
            &mut policy,
            &mut world_model,
            &mut executor,
        )?;
        let attempts = (report.executions + report.execution_failures) as u64;
        executions += attempts;
        cost += attempts as f64 * scenario.cost.execution
            + (report.imagined + report.scored) as f64 * scenario.cost.world_model;
        let record = StepRecord {
            step,
            true_reward: policy.true_reward(&world),
            overrated_mass: policy.overrated_mass(&world),
            executions,
            cost,
            diagnostics: Some(report.diagnostics),
        };
        on_step(&record);
        records.push(record);
    }
    let w = final_window(scenario.steps);
    let final_true_reward = records[records.len() - w..]
        .iter()
        .map(|r| r.true_reward)
        .sum::<f64>()
        / w as f64;
    Ok(RunResult {
        mode,
        seed,
        records,
        final_true_reward,
    })
}

/// Summary of one mode over seeds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModeSummary {
    /// Mode.
    pub mode: Mode,
    /// Final true reward, mean over seeds.
    pub final_true_reward: f64,
    /// Its standard error over seeds.
    pub final_true_reward_se: f64,
    /// Final policy mass on over-rated actions, mean over seeds.
    pub overrated_mass: f64,
    /// Real executions per run (mean).
    pub real_executions: f64,
    /// Total cost per run (mean).
    pub cost: f64,
    /// Mean real executions at the first step the seed-averaged true reward reached the target.
    pub executions_to_target: Option<f64>,
    /// `real`'s executions to target divided by this mode's.
    pub savings_vs_real: Option<f64>,
}

/// A seed-averaged learning curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Curve {
    /// Mode.
    pub mode: Mode,
    /// (step, mean real executions, mean cost, mean true reward), from step 0.
    pub points: Vec<(u64, f64, f64, f64)>,
}

/// Everything the benchmark measured for one scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchmarkResult {
    /// The scenario run.
    pub scenario: Scenario,
    /// True reward of the initial uniform policy (mean over seeds).
    pub initial_true_reward: f64,
    /// Ceiling: best action's quality, mean over prompts and seeds.
    pub optimal_true_reward: f64,
    /// Fraction f of `real`'s improvement that counts as reaching it.
    pub target_fraction: f64,
    /// J₀ + f·(J_real − J₀) (`None` without `real`).
    pub target: Option<f64>,
    /// One summary per mode, in the order run.
    pub modes: Vec<ModeSummary>,
    /// Seed-averaged curves, one per mode.
    pub curves: Vec<Curve>,
}

impl BenchmarkResult {
    /// The summary of `mode`, if it was run.
    pub fn mode(&self, mode: Mode) -> Option<&ModeSummary> {
        self.modes.iter().find(|m| m.mode == mode)
    }
}

/// Mean and standard error over seeds (NaN without seeds).
fn mean_se(xs: &[f64]) -> (f64, f64) {
    wmrl_report::MeanSe::of(xs).map_or((f64::NAN, 0.0), |m| (m.mean, m.se))
}

fn mean_curve(mode: Mode, runs: &[&RunResult]) -> Curve {
    let n = runs.len() as f64;
    let len = runs[0].records.len();
    let points = (0..len)
        .map(|i| {
            let (e, c, r) = runs.iter().fold((0.0, 0.0, 0.0), |(e, c, r), run| {
                let rec = &run.records[i];
                (e + rec.executions as f64, c + rec.cost, r + rec.true_reward)
            });
            (runs[0].records[i].step, e / n, c / n, r / n)
        })
        .collect();
    Curve { mode, points }
}

/// Runs every mode in `modes` for every seed of the scenario and
/// summarises. `on_run` sees each finished run (for progress and metrics).
pub fn benchmark(
    scenario: &Scenario,
    modes: &[Mode],
    target_fraction: f64,
    mut on_run: impl FnMut(&RunResult),
) -> Result<BenchmarkResult> {
    scenario.validate()?;
    if !(target_fraction.is_finite() && (0.0..=1.0).contains(&target_fraction)) {
        return Err(Error::InvalidScenario {
            field: "target_fraction",
            value: target_fraction.to_string(),
            expected: "a number in [0, 1]",
        });
    }
    if modes.is_empty() {
        return Err(Error::InvalidScenario {
            field: "modes",
            value: "[]".into(),
            expected: "at least one mode",
        });
    }
    let mut runs = Vec::new();
    for &mode in modes {
        for seed in 0..scenario.seeds {
            let run = run(scenario, mode, seed, |_| {})?;
            on_run(&run);
            runs.push(run);
        }
    }
    let worlds: Vec<SyntheticWorld> = (0..scenario.seeds)
        .map(|s| SyntheticWorld::generate(scenario, s))
        .collect();
    let optimal_true_reward = worlds
        .iter()
        .map(SyntheticWorld::optimal_reward)
        .sum::<f64>()
        / worlds.len() as f64;

    let by_mode = |mode: Mode| runs.iter().filter(|r| r.mode == mode).collect::<Vec<_>>();
    let curves: Vec<Curve> = modes.iter().map(|&m| mean_curve(m, &by_mode(m))).collect();
    let initial_true_reward = curves[0].points[0].3;
    let target = modes.contains(&Mode::Real).then(|| {
        let finals: Vec<f64> = by_mode(Mode::Real)
            .iter()
            .map(|r| r.final_true_reward)
            .collect();
        initial_true_reward + target_fraction * (mean_se(&finals).0 - initial_true_reward)
    });
    let to_target = |curve: &Curve| -> Option<f64> {
        let t = target?;
        curve.points.iter().find(|p| p.3 >= t).map(|p| p.1)
    };
    let real_to_target = curves
        .iter()
        .find(|c| c.mode == Mode::Real)
        .and_then(to_target);
    let modes = modes
        .iter()
        .zip(&curves)
        .map(|(&mode, curve)| {
            let rs = by_mode(mode);
            let finals: Vec<f64> = rs.iter().map(|r| r.final_true_reward).collect();
            let (final_true_reward, final_true_reward_se) = mean_se(&finals);
            let last = |f: fn(&StepRecord) -> f64| {
                rs.iter()
                    .map(|r| f(r.records.last().expect("records")))
                    .sum::<f64>()
                    / rs.len() as f64
            };
            let executions_to_target = to_target(curve);
            let savings_vs_real = match (real_to_target, executions_to_target) {
                (Some(real), Some(own)) if own > 0.0 => Some(real / own),
                _ => None,
            };
            ModeSummary {
                mode,
                final_true_reward,
                final_true_reward_se,
                overrated_mass: last(|r| r.overrated_mass),
                real_executions: last(|r| r.executions as f64),
                cost: last(|r| r.cost),
                executions_to_target,
                savings_vs_real,
            }
        })
        .collect();
    Ok(BenchmarkResult {
        scenario: scenario.clone(),
        initial_true_reward,
        optimal_true_reward,
        target_fraction,
        target,
        modes,
        curves,
    })
}
