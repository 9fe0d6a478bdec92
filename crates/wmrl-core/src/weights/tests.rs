use super::*;

/// Statistics of y = r + ξ with ξ independent of r: Var ξ = `residual`, Var r = `reward`.
fn estimate(residual: f64, reward: f64) -> NoiseEstimate {
    let v_y = reward + residual;
    NoiseEstimate {
        residual_variance: residual,
        total_residual_variance: residual,
        residual_mean: 0.0,
        reward_variance: reward,
        calibrated_variance: v_y,
        covariance: reward,
        correlation: if reward > 0.0 {
            reward / (reward * v_y).sqrt()
        } else {
            0.0
        },
        groups: 4,
        pairs: 32,
    }
}

/// A calibrated prediction: Var y = Cov(r, y) = `v_y` ≤ `v_r`, so ρ² = v_y / v_r.
fn calibrated(v_y: f64, v_r: f64) -> NoiseEstimate {
    NoiseEstimate {
        calibrated_variance: v_y,
        covariance: v_y,
        ..estimate(v_r - v_y, v_r)
    }
}

fn paper() -> DenoiseConfig {
    DenoiseConfig {
        weights: WeightRule::Paper,
        ..Default::default()
    }
}

#[test]
fn paper_weights_at_the_edges() {
    let cfg = paper();
    let e = estimate(0.1, 0.1);
    let w = stream_weights(0, 100, Some(&e), &cfg, false);
    assert_eq!((w.anchor, w.world_model), (0.0, 1.0));
    assert_eq!(w.fallback, Some(Fallback::NoAnchors));
    let w = stream_weights(10, 0, Some(&e), &cfg, false);
    assert_eq!((w.anchor, w.fallback), (1.0, Some(Fallback::NoWorldModel)));
    let w = stream_weights(0, 0, None, &cfg, false);
    assert_eq!(
        (w.anchor + w.world_model, w.fallback),
        (1.0, Some(Fallback::Empty))
    );
    // No estimate, or a zero residual: proportional to counts.
    let w = stream_weights(10, 90, None, &cfg, false);
    assert!((w.anchor - 0.1).abs() < 1e-15);
    assert_eq!(w.fallback, Some(Fallback::NoEstimate));
    let w = stream_weights(10, 90, Some(&estimate(0.0, 0.2)), &cfg, false);
    assert!((w.anchor - 0.1).abs() < 1e-15 && w.fallback.is_none());
    // Independent noise as large as the signal: κ = 1, a world-model sample counts half.
    let w = stream_weights(10, 90, Some(&e), &cfg, false);
    assert!((w.anchor - 10.0 / 55.0).abs() < 1e-12);
    assert!((w.anchor + w.world_model - 1.0).abs() < 1e-15);
    // A calibrated but shrunk prediction: κ = σ²/(v_r − σ²) = 3 for σ² = 0.075, v_r = 0.1.
    let w = stream_weights(10, 90, Some(&calibrated(0.025, 0.1)), &cfg, false);
    assert!((w.noise_ratio - 3.0).abs() < 1e-9);
    // All-equal binary anchor groups: v_r = 0, ρ not measurable, weights ∝ counts.
    let w = stream_weights(10, 90, Some(&estimate(0.05, 0.0)), &cfg, false);
    assert_eq!(
        (w.noise_ratio, w.fallback),
        (0.0, Some(Fallback::RewardVarianceFloor))
    );
    assert!((w.anchor - 0.1).abs() < 1e-15);
    // An uninformative world model (c = 0): κ capped, weights finite, world model nearly silenced.
    let useless = NoiseEstimate {
        covariance: 0.0,
        ..estimate(0.1, 0.1)
    };
    let w = stream_weights(10, 90, Some(&useless), &cfg, false);
    assert_eq!(
        (w.noise_ratio, w.fallback),
        (cfg.max_noise_ratio, Some(Fallback::Uninformative))
    );
    assert!(w.anchor.is_finite() && w.anchor > 0.99 && w.anchor + w.world_model == 1.0);
}

#[test]
fn mse_weights_rescale_the_world_model_to_the_anchors_expectation() {
    let cfg = DenoiseConfig::default();
    assert_eq!(cfg.weights, WeightRule::Mse);
    let (na, nw) = (8, 56);
    for e in [
        calibrated(0.025, 0.1),
        estimate(0.1, 0.1),
        calibrated(0.09, 0.1),
    ] {
        let rho2 = e.covariance * e.covariance / (e.reward_variance * e.calibrated_variance);
        let p = stream_weights(na, nw, Some(&e), &paper(), false);
        for std in [false, true] {
            let w = stream_weights(na, nw, Some(&e), &cfg, std);
            assert!(w.fallback.is_none(), "{w:?}");
            // The anchor weight is the paper's; the world model's is the paper's over β.
            assert!((w.anchor - p.anchor).abs() < 1e-12);
            let beta = if std {
                rho2.sqrt()
            } else {
                e.covariance / e.reward_variance
            };
            assert!((w.world_model_scale - beta).abs() < 1e-12);
            assert!(
                (w.world_model - p.world_model / beta).abs() < 1e-12,
                "{w:?}"
            );
            // The fused expectation is the anchors': u_A + β u_W = 1.
            assert!((w.anchor + beta * w.world_model - 1.0).abs() < 1e-12);
        }
    }
    // Unscaled, a calibrated world model's samples count as much as anchors whatever ρ.
    for v_y in [0.001, 0.03, 0.1] {
        let w = stream_weights(na, nw, Some(&calibrated(v_y, 0.1)), &cfg, false);
        assert!((w.world_model_share() - 56.0 / 64.0).abs() < 1e-12, "{w:?}");
    }
    // Std-scaled, the share is ρ N_W / (N_A + ρ N_W).
    let w = stream_weights(na, nw, Some(&calibrated(0.025, 0.1)), &cfg, true);
    assert!((w.world_model_share() - 0.5 * 56.0 / (8.0 + 0.5 * 56.0)).abs() < 1e-12);
}

#[test]
fn mse_fallbacks_are_finite_and_named() {
    let cfg = DenoiseConfig::default();
    let useless = NoiseEstimate {
        covariance: -0.01,
        ..estimate(0.1, 0.1)
    };
    let w = stream_weights(10, 90, Some(&useless), &cfg, false);
    assert_eq!(
        (w.anchor, w.world_model, w.fallback),
        (1.0, 0.0, Some(Fallback::Uninformative))
    );
    let w = stream_weights(10, 90, Some(&estimate(0.05, 0.0)), &cfg, true);
    assert_eq!(w.fallback, Some(Fallback::RewardVarianceFloor));
    assert!((w.anchor - 0.1).abs() < 1e-15);
    let nan = NoiseEstimate {
        covariance: f64::NAN,
        ..estimate(0.1, 0.1)
    };
    let w = stream_weights(10, 90, Some(&nan), &cfg, false);
    assert_eq!(w.fallback, Some(Fallback::NonFinite));
    // A y that barely moves with r: the gain 1/β = v_r/c is capped.
    let tiny = NoiseEstimate {
        calibrated_variance: 1e-8,
        covariance: 1e-5,
        ..estimate(0.1, 0.1)
    };
    let w = stream_weights(10, 90, Some(&tiny), &cfg, false);
    assert_eq!(w.fallback, Some(Fallback::GainCapped), "{w:?}");
    assert!(w.world_model.is_finite() && w.world_model <= cfg.max_gain);
}

/// Variance of the PPI estimate (up to Φ) at λ, per the module docs.
fn ppi_variance(e: &NoiseEstimate, na: f64, nw: f64, std: bool, l: f64) -> f64 {
    let (v_r, v_y, c) = (e.reward_variance, e.calibrated_variance, e.covariance);
    if std {
        let rho = c / (v_r * v_y).sqrt();
        (1.0 - 2.0 * l * rho + l * l) / na + l * l / nw
    } else {
        (v_r - 2.0 * l * c + l * l * v_y) / na + l * l * v_y / nw
    }
}

#[test]
fn lambda_is_the_least_variance_on_the_unit_interval_for_either_scaling() {
    let cfg = DenoiseConfig::default();
    let e = estimate(0.0, 0.2); // y = r: λ* = 1/(1 + 10/90) = 0.9 on either scale
    assert!((ppi_lambda(Some(&e), 10, 90, &cfg, false).0 - 0.9).abs() < 1e-12);
    assert!((ppi_lambda(Some(&e), 10, 90, &cfg, true).0 - 0.9).abs() < 1e-12);
    assert_eq!(
        ppi_lambda(Some(&e), 10, 0, &cfg, false),
        (0.0, Some(Fallback::NoWorldModel))
    );
    assert_eq!(
        ppi_lambda(None, 10, 90, &cfg, true),
        (0.0, Some(Fallback::NoEstimate))
    );
    let neg = NoiseEstimate {
        covariance: -0.1,
        ..e
    };
    assert_eq!(ppi_lambda(Some(&neg), 10, 90, &cfg, false).0, 0.0);
    // A calibrated world model with ρ = 0.31: the raw-scale λ stays near 0.88,
    // the std-scaled one is ρ/(1 + N_A/N_W) ≈ 0.27; each is the grid's least
    // variance for its scaling and never worse than λ = 0.
    let weak = calibrated(0.31 * 0.31 * 0.1, 0.1);
    let (na, nw) = (8.0, 56.0);
    for std in [false, true] {
        let (l, fallback) = ppi_lambda(Some(&weak), 8, 56, &cfg, std);
        assert!(fallback.is_none());
        let at = |x: f64| ppi_variance(&weak, na, nw, std, x);
        let best = (0..=1000)
            .map(|i| at(i as f64 / 1000.0))
            .fold(f64::INFINITY, f64::min);
        assert!(
            at(l) <= best + 1e-12 && at(l) <= at(0.0),
            "std {std}: λ {l}"
        );
    }
    let (l_std, _) = ppi_lambda(Some(&weak), 8, 56, &cfg, true);
    assert!((l_std - 0.31 / (1.0 + 8.0 / 56.0)).abs() < 1e-9);
    // The raw λ applied to std-scaled advantages is worse than λ = 0.
    let (l_raw, _) = ppi_lambda(Some(&weak), 8, 56, &cfg, false);
    assert!(
        ppi_variance(&weak, na, nw, true, l_raw) > 1.2 * ppi_variance(&weak, na, nw, true, 0.0)
    );
}
