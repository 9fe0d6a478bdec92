//! Throughput figures of the core (`wmrl bench core`): the isotonic fit of
//! 10⁵ anchor pairs, a full core step at the default scale, GRPO advantage
//! throughput, and synthetic training steps per second. Medians of repeated
//! wall-clock measurements from one run; build in release to quote them.

use std::hint::black_box;
use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use wmrl_core::{AdvantageOptions, Core, CoreConfig, GroupInput, IsotonicFit, Mode, Stream};

use crate::Result;
use crate::scenario::Scenario;

/// What to measure.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CoreBenchOptions {
    /// Anchor pairs in the isotonic fit (default: 100 000).
    pub pairs: usize,
    /// Repetitions of each timed operation (default: 15).
    pub repeats: usize,
}

impl Default for CoreBenchOptions {
    fn default() -> Self {
        Self {
            pairs: 100_000,
            repeats: 15,
        }
    }
}

/// The measured figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CoreBenchFigures {
    /// Pairs fitted.
    pub isotonic_pairs: usize,
    /// Median time of one isotonic fit of `isotonic_pairs` pairs (ms).
    pub isotonic_fit_ms: f64,
    /// Fastest of those fits (ms).
    pub isotonic_fit_min_ms: f64,
    /// f̂ evaluations per second on the fitted map.
    pub predictions_per_s: f64,
    /// Median time of one core step (calibrator refit, cross-fitting, fusion)
    /// at 64 groups × 8 rollouts, 10% anchors, a full 16-step window (µs).
    pub core_step_us: f64,
    /// Group-relative advantages computed per second (groups of 8).
    pub advantages_per_s: f64,
    /// Synthetic training steps per second (`paper` world, mode `wmrl`, policy update included).
    pub synth_steps_per_s: f64,
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn time<T>(f: impl FnOnce() -> T) -> (f64, T) {
    let t = Instant::now();
    let out = f();
    (t.elapsed().as_secs_f64(), out)
}

/// Runs every measurement once with `options`.
pub fn bench_core(options: &CoreBenchOptions) -> Result<CoreBenchFigures> {
    let repeats = options.repeats.max(1);
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let scores: Vec<f64> = (0..options.pairs).map(|_| rng.random::<f64>()).collect();
    let rewards: Vec<f64> = scores
        .iter()
        .map(|&s| (rng.random::<f64>() < s * s) as u8 as f64)
        .collect();
    let mut fits = Vec::with_capacity(repeats);
    let mut fit = None;
    for _ in 0..repeats {
        let (t, f) = time(|| IsotonicFit::fit(black_box(&scores), black_box(&rewards), None));
        fits.push(t * 1e3);
        fit = Some(f?);
    }
    let fit = fit.expect("at least one repeat");
    let (t, sum) = time(|| {
        scores
            .iter()
            .map(|&s| fit.predict(black_box(s)))
            .sum::<f64>()
    });
    black_box(sum);
    let predictions_per_s = scores.len() as f64 / t;

    // One core step at the default scale, after the window has filled.
    let config = CoreConfig {
        mode: Mode::Wmrl,
        ..CoreConfig::default()
    };
    let data: Vec<(Vec<f64>, Vec<f64>)> = (0..config.groups)
        .map(|_| {
            let r: Vec<f64> = (0..config.group_size)
                .map(|_| rng.random::<f64>())
                .collect();
            let s = r
                .iter()
                .map(|&x| x * x + 0.1 * rng.random::<f64>())
                .collect();
            (r, s)
        })
        .collect();
    let mut core = Core::new(config)?;
    let mut step_times = Vec::new();
    for i in 0..(16 + repeats) {
        let plan = core.plan(&vec![0; config.groups])?;
        let groups: Vec<GroupInput<'_>> = data
            .iter()
            .enumerate()
            .map(|(g, (r, s))| GroupInput {
                task: (g % 10) as u32,
                stream: if plan.is_anchor[g] {
                    Stream::Anchor
                } else {
                    Stream::WorldModel
                },
                rewards: plan.is_anchor[g].then_some(r.as_slice()),
                scores: Some(s.as_slice()),
                inclusion_probability: plan.inclusion_probability[g],
            })
            .collect();
        let (t, out) = time(|| core.process(&groups));
        black_box(out?);
        if i >= 16 {
            step_times.push(t * 1e6);
        }
    }

    let rewards8: Vec<f64> = (0..1_000_000).map(|_| rng.random::<f64>()).collect();
    let mut out = vec![0.0; 8];
    let opts = AdvantageOptions::default();
    let (t, zeros) = time(|| {
        let mut zeros = 0;
        for g in rewards8.chunks(8) {
            zeros +=
                wmrl_core::advantage::group_advantages_into(black_box(g), &opts, &mut out) as usize;
        }
        zeros
    });
    black_box(zeros);
    let advantages_per_s = rewards8.len() as f64 / t;

    let scenario = Scenario {
        steps: 50,
        ..Scenario::default()
    };
    let (t, run) = time(|| crate::runner::run(&scenario, Mode::Wmrl, 0, |_| {}));
    run?;
    let synth_steps_per_s = scenario.steps as f64 / t;

    Ok(CoreBenchFigures {
        isotonic_pairs: options.pairs,
        isotonic_fit_ms: median(fits.clone()),
        isotonic_fit_min_ms: fits.iter().copied().fold(f64::INFINITY, f64::min),
        predictions_per_s,
        core_step_us: median(step_times),
        advantages_per_s,
        synth_steps_per_s,
    })
}
