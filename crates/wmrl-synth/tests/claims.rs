//! The paper's claims on the synthetic benchmark, on fixed seeds 0–4 of each
//! preset (5 repetitions per mode, 300 steps each), with stated margins.
//!
//! Figures these tests saw when written (mean ± standard error over seeds;
//! see the crate README for the full tables):
//! - `paper`: real 0.945 ± 0.001, wm-only 0.597 ± 0.057, wmrl 0.933 ± 0.004,
//!   wmrl reaches 95% of real's improvement with 6.0× fewer real executions;
//! - `debias`: wmrl 0.934 ± 0.001, wmrl-no-debias 0.892 ± 0.006;
//! - `denoise`: wmrl 0.895 ± 0.003, wmrl-no-denoise 0.598 ± 0.014.

use wmrl_core::Mode;
use wmrl_synth::{BenchmarkResult, ModeSummary, Scenario, benchmark};

fn bench(preset: &str, modes: &[Mode]) -> BenchmarkResult {
    let scenario = Scenario::preset(preset).unwrap();
    assert_eq!(scenario.seeds, 5, "the claims are stated for 5 seeds");
    benchmark(&scenario, modes, 0.95, |_| {}).unwrap()
}

/// Difference of two means and its standard error.
fn gap(better: &ModeSummary, worse: &ModeSummary) -> (f64, f64) {
    let d = better.final_true_reward - worse.final_true_reward;
    let se = (better.final_true_reward_se.powi(2) + worse.final_true_reward_se.powi(2)).sqrt();
    (d, se)
}

#[test]
fn wm_only_plateaus_below_real_and_wmrl_matches_real_with_3x_fewer_executions() {
    let r = bench("paper", &[Mode::Real, Mode::WmOnly, Mode::Wmrl]);
    let (real, wm_only, wmrl) = (
        r.mode(Mode::Real).unwrap(),
        r.mode(Mode::WmOnly).unwrap(),
        r.mode(Mode::Wmrl).unwrap(),
    );
    let improvement = real.final_true_reward - r.initial_true_reward;
    assert!(improvement > 0.5, "real must learn: {real:?}");

    // wm-only plateaus measurably below real: by more than 0.15 and 3 standard errors.
    let (d, se) = gap(real, wm_only);
    assert!(
        d > 0.15 && d > 3.0 * se,
        "wm-only {wm_only:?} vs real {real:?}"
    );
    assert!(
        wm_only.overrated_mass > 0.1,
        "wm-only exploits over-rated actions: {wm_only:?}"
    );

    // Full WMRL reaches real's final true reward within the tolerance (5% of
    // real's improvement) …
    let target = r.target.unwrap();
    assert!(
        wmrl.final_true_reward >= target,
        "wmrl {wmrl:?} below target {target}"
    );
    // … with at least 3× fewer real executions.
    let savings = wmrl.savings_vs_real.expect("wmrl reaches the target");
    assert!(
        savings >= 3.0,
        "savings {savings:.2}×: {wmrl:?}, real {real:?}"
    );
    assert!(wmrl.real_executions * 3.0 <= real.real_executions);
}

#[test]
fn removing_debiasing_hurts_when_the_world_model_saturates() {
    let r = bench("debias", &[Mode::Wmrl, Mode::WmrlNoDebias]);
    let (wmrl, no_debias) = (
        r.mode(Mode::Wmrl).unwrap(),
        r.mode(Mode::WmrlNoDebias).unwrap(),
    );
    let (d, se) = gap(wmrl, no_debias);
    assert!(
        d > 0.02 && d > 3.0 * se,
        "wmrl {wmrl:?} vs wmrl-no-debias {no_debias:?}"
    );
}

#[test]
fn removing_denoising_hurts_when_the_world_model_is_noisy() {
    let r = bench("denoise", &[Mode::Wmrl, Mode::WmrlNoDenoise]);
    let (wmrl, no_denoise) = (
        r.mode(Mode::Wmrl).unwrap(),
        r.mode(Mode::WmrlNoDenoise).unwrap(),
    );
    let (d, se) = gap(wmrl, no_denoise);
    assert!(
        d > 0.1 && d > 3.0 * se,
        "wmrl {wmrl:?} vs wmrl-no-denoise {no_denoise:?}"
    );
}
