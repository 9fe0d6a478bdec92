//! The core's stream weights and PPI λ against the exact gradient of the
//! synthetic benchmark (`wmrl_synth::fusion_bench`), on a fixed seed.
//! Each assertion fails for the rule it is aimed at: the paper's weight
//! misses the least error by more than 10% with a noisy world model.

use wmrl_synth::fusion_bench::{FusionBenchOptions, bench_fusion};

#[test]
fn the_cores_weights_and_lambda_are_near_the_least_error_on_the_grid() {
    let options = FusionBenchOptions {
        draws: 150,
        ..Default::default()
    };
    let report = bench_fusion(&options).unwrap();
    assert_eq!(report.results.len(), 8);
    for r in &report.results {
        let (f, p) = (&r.fusion, &r.ppi);
        let label = format!("{} (std {}): {f:?}", r.scenario, r.scale_by_std);
        // The least-error rule is within 10% of the grid's least error.
        assert!(f.mse_vs_best.unwrap() <= 1.1, "{label}");
        // Power-tuned λ is never worse than λ = 0, and near the grid's best.
        assert!(p.core_vs_zero.unwrap() < 1.0, "{label}: {p:?}");
        assert!(p.core_vs_best.unwrap() <= 1.1, "{label}: {p:?}");
        // Where the world model is a noisy copy (not a less noisy one, as
        // with binary rewards), fusion beats either stream by 10%.
        if r.scenario != "binary" {
            assert!(f.mse_vs_best_single.unwrap() <= 0.9, "{label}");
        }
    }
    // The paper's weight misses by more than 20% with a noisy world model (unscaled).
    let noisy = report
        .results
        .iter()
        .find(|r| r.scenario == "denoise" && !r.scale_by_std)
        .unwrap();
    assert!(noisy.fusion.paper_vs_best.unwrap() > 1.2, "{noisy:?}");
}
