//! The core's step on plain numbers: properties of advantages and weights,
//! every mode's weighting, the edges, bad input and exact state round trips.

use proptest::prelude::*;
use wmrl_core::denoise::{NoiseEstimate, stream_weights};
use wmrl_core::{
    AdvantageOptions, AnchorPair, CalibratorConfig, Core, CoreConfig, DenoiseConfig, Forgetting,
    GroupInput, Mode, OnlineCalibrator, Stream, group_advantages,
};
use wmrl_core::{Fallback, WeightRule};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn advantages_sum_to_zero_within_a_group(
        rewards in prop::collection::vec(-10.0f64..10.0, 1..32),
        scale in any::<bool>(),
    ) {
        let opts = AdvantageOptions { scale_by_std: scale, ..Default::default() };
        let (a, zero) = group_advantages(&rewards, &opts);
        let tol = 1e-9 * a.iter().map(|x| x.abs()).sum::<f64>().max(1.0);
        prop_assert!(a.iter().sum::<f64>().abs() <= tol);
        if zero {
            prop_assert!(a.iter().all(|&x| x == 0.0));
        }
    }

    #[test]
    fn stream_weights_are_finite_and_sum_to_one(
        na in 0usize..1000,
        nw in 0usize..10000,
        v_r in prop_oneof![Just(0.0), 0.0f64..1.0],
        v_y in prop_oneof![Just(0.0), 0.0f64..2.0],
        c in -1.0f64..1.0,
        residual in prop_oneof![Just(0.0), 0.0f64..2.0],
        some in any::<bool>(),
        mse in any::<bool>(),
        std in any::<bool>(),
    ) {
        let e = NoiseEstimate {
            residual_variance: residual,
            total_residual_variance: residual,
            residual_mean: 0.0,
            reward_variance: v_r,
            calibrated_variance: v_y,
            covariance: c,
            correlation: 0.0,
            groups: 2,
            pairs: 4,
        };
        let config = DenoiseConfig {
            weights: if mse { WeightRule::Mse } else { WeightRule::Paper },
            ..Default::default()
        };
        let w = stream_weights(na, nw, some.then_some(&e), &config, std);
        prop_assert!(w.anchor.is_finite() && w.world_model.is_finite() && w.noise_ratio.is_finite());
        prop_assert!(w.world_model_scale.is_finite());
        prop_assert!(w.anchor >= 0.0 && w.world_model >= 0.0);
        prop_assert!(w.anchor <= 1.0 && w.world_model <= config.max_gain);
        match (mse, w.fallback) {
            // The least-error rule: the fused expectation is the anchors'.
            (true, None) => prop_assert!((w.anchor + w.world_model_scale * w.world_model - 1.0).abs() < 1e-9),
            (_, Some(Fallback::GainCapped)) => prop_assert!(w.anchor + w.world_model_scale * w.world_model <= 1.0 + 1e-9),
            _ => prop_assert!((w.anchor + w.world_model - 1.0).abs() < 1e-12),
        }
        if !some {
            prop_assert!(w.fallback.is_some() || na == 0 || nw == 0);
        }
    }

    #[test]
    fn calibrator_state_round_trips_exactly(
        pairs in prop::collection::vec((any::<f64>(), any::<f64>(), 0.0f64..5.0), 1..80),
        exponential in any::<bool>(),
    ) {
        let forgetting = if exponential {
            Forgetting::Exponential { half_life_steps: 3.7 }
        } else {
            Forgetting::SlidingWindow { steps: 3 }
        };
        let mut c = OnlineCalibrator::new(CalibratorConfig { min_pairs: 4, forgetting, ..Default::default() }).unwrap();
        let finite = |x: f64| if x.is_finite() { x / 1e300 } else { 0.5 };
        for (step, chunk) in pairs.chunks(10).enumerate() {
            let batch: Vec<AnchorPair> = chunk
                .iter()
                .enumerate()
                .map(|(g, &(s, r, w))| AnchorPair { score: finite(s), reward: finite(r), weight: w, step: 0, group: g as u32 })
                .collect();
            c.update(step as u64, &batch).unwrap();
        }
        let json = serde_json::to_string(&c).unwrap();
        let back: OnlineCalibrator = serde_json::from_str(&json).unwrap();
        prop_assert_eq!(&back, &c);
        for probe in [-1e-300, 0.0, 1e-301, 3e-300] {
            prop_assert_eq!(back.predict(probe).to_bits(), c.predict(probe).to_bits());
        }
    }
}

fn input<'a>(
    stream: Stream,
    rewards: Option<&'a [f64]>,
    scores: Option<&'a [f64]>,
    pi: f64,
) -> GroupInput<'a> {
    GroupInput {
        task: 0,
        stream,
        rewards,
        scores,
        inclusion_probability: pi,
    }
}

fn core(mode: Mode) -> Core {
    Core::new(CoreConfig {
        mode,
        calibrator: CalibratorConfig {
            min_pairs: 4,
            ..Default::default()
        },
        ..Default::default()
    })
    .unwrap()
}

#[test]
fn non_finite_values_are_rejected_naming_group_and_sample() {
    let mut c = core(Mode::Wmrl);
    let (r, s) = ([0.0, 1.0], [0.2, 0.9]);
    let bad = [0.1, f64::NAN, 0.3];
    let err = c
        .process(&[
            input(Stream::Anchor, Some(&r), Some(&s), 0.5),
            input(Stream::WorldModel, None, Some(&bad), 0.5),
        ])
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "world-model group 1, sample 1: score is NaN, expected a finite number"
    );
    let inf = [0.0, f64::INFINITY];
    let err = c
        .process(&[input(Stream::Anchor, Some(&inf), Some(&s), 0.5)])
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "anchor group 0, sample 1: reward is inf, expected a finite number"
    );
    assert_eq!(c.step(), 0, "a rejected step changes nothing");
    assert!(c.calibrator().is_empty());
}

#[test]
fn malformed_groups_name_the_problem() {
    let mut c = core(Mode::Wmrl);
    let s = [0.5, 0.5];
    let err = c
        .process(&[input(Stream::Anchor, None, Some(&s), 0.5)])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("group 0") && err.contains("without real rewards"),
        "{err}"
    );
    let r = [1.0];
    let err = c
        .process(&[input(Stream::Anchor, Some(&r), Some(&s), 0.5)])
        .unwrap_err()
        .to_string();
    assert!(err.contains("1 rewards but 2 scores"), "{err}");
    let mut c = core(Mode::WmOnly);
    let err = c
        .process(&[input(Stream::Anchor, Some(&s), Some(&s), 0.5)])
        .unwrap_err()
        .to_string();
    assert!(err.contains("wm-only has no anchors"), "{err}");
}

/// 2 anchor groups and 8 world-model groups of 4 rollouts, scores = rewards + offset.
fn step_data() -> Vec<(Vec<f64>, Vec<f64>)> {
    (0..10)
        .map(|g| {
            let r: Vec<f64> = (0..4).map(|i| ((g * 7 + i * 3) % 5) as f64 / 4.0).collect();
            let s = r
                .iter()
                .enumerate()
                .map(|(i, x)| 0.5 * x + 0.3 + 0.01 * i as f64)
                .collect();
            (r, s)
        })
        .collect()
}

fn run_step(c: &mut Core, data: &[(Vec<f64>, Vec<f64>)]) -> wmrl_core::StepOutput {
    let groups: Vec<GroupInput<'_>> = data
        .iter()
        .enumerate()
        .map(|(g, (r, s))| {
            let anchor =
                c.config().mode == Mode::Real || (c.config().mode != Mode::WmOnly && g < 2);
            let pi = match c.config().mode {
                Mode::Real => 1.0,
                Mode::WmOnly => 0.0,
                _ => 0.2,
            };
            if anchor {
                input(Stream::Anchor, Some(r), Some(s), pi)
            } else {
                input(Stream::WorldModel, None, Some(s), pi)
            }
        })
        .collect();
    c.process(&groups).unwrap()
}

#[test]
fn every_mode_weights_its_streams_as_documented() {
    let data = step_data();
    for mode in Mode::ALL {
        let mut c = core(mode);
        let mut out = run_step(&mut c, &data);
        for _ in 0..3 {
            out = run_step(&mut c, &data);
        }
        let d = &out.diagnostics;
        let total: f64 = out.samples.iter().map(|s| s.loss_weight).sum();
        let per_stream = |st: Stream| {
            out.samples
                .iter()
                .filter(|s| s.stream == st)
                .map(|s| s.loss_weight)
                .sum::<f64>()
        };
        match mode {
            Mode::Real => assert_eq!((d.anchor_groups, per_stream(Stream::Anchor)), (10, total)),
            Mode::WmOnly => assert_eq!(
                (d.anchor_groups, per_stream(Stream::WorldModel)),
                (0, total)
            ),
            Mode::WmrlNoDenoise => assert!((d.stream_weights.anchor - 0.2).abs() < 1e-12),
            Mode::Wmrl | Mode::WmrlNoDebias => {
                // The fused expectation is the anchors': u_A + β u_W = 1.
                let w = d.stream_weights;
                assert!(
                    (w.anchor + w.world_model_scale * w.world_model - 1.0).abs() < 1e-9,
                    "{mode}: {d:?}"
                );
                assert!((per_stream(Stream::WorldModel) - w.world_model).abs() < 1e-12);
            }
            Mode::Ppi => {
                let lambda = d.ppi_lambda.unwrap();
                assert!(lambda > 0.5 && lambda <= 1.0, "{d:?}");
                assert!((per_stream(Stream::WorldModel) - lambda).abs() < 1e-12);
            }
        }
        if !matches!(mode, Mode::Ppi | Mode::Wmrl | Mode::WmrlNoDebias) {
            assert!(
                (total - 1.0).abs() < 1e-12,
                "{mode}: weights sum to {total}"
            );
            assert!((per_stream(Stream::Anchor) - d.stream_weights.anchor).abs() < 1e-12);
        }
        if mode.mixes_streams() {
            assert!(
                d.raw_bias.unwrap() > 0.0 && d.residual_variance.is_some(),
                "{mode}: {d:?}"
            );
        }
        if mode.debiases() && mode != Mode::Ppi {
            // f̂ recodes world-model scores onto the reward scale.
            let wm_mean = d.world_model_reward_mean.unwrap();
            assert!(
                (wm_mean - d.anchor_reward_mean.unwrap()).abs() < 0.2,
                "{mode}: {d:?}"
            );
        }
        let json = serde_json::to_string(d).unwrap();
        assert_eq!(
            &serde_json::from_str::<wmrl_core::StepDiagnostics>(&json).unwrap(),
            d
        );
    }
}

/// Unscaled advantages, raw scores ŝ ≈ 0.5 r + 0.3 (ρ ≈ 1): the world
/// model's gradient is half the anchors', so the least-error rule doubles its
/// weight (u_W ≈ 2 N_W / N, u_A ≈ N_A / N); the paper's rule keeps
/// w_W ≈ N_W / N and halves the fused gradient's world-model part.
#[test]
fn the_mse_rule_rescales_a_shrunk_world_model_and_the_paper_rule_does_not() {
    let data = step_data();
    let mut weights = Vec::new();
    for rule in [WeightRule::Mse, WeightRule::Paper] {
        let mut c = Core::new(CoreConfig {
            mode: Mode::WmrlNoDebias,
            advantage: AdvantageOptions {
                scale_by_std: false,
                ..Default::default()
            },
            denoise: DenoiseConfig {
                weights: rule,
                ..Default::default()
            },
            calibrator: CalibratorConfig {
                min_pairs: 4,
                ..Default::default()
            },
            ..Default::default()
        })
        .unwrap();
        let mut out = run_step(&mut c, &data);
        for _ in 0..3 {
            out = run_step(&mut c, &data);
        }
        let w = out.diagnostics.stream_weights;
        assert!(w.fallback.is_none(), "{w:?}");
        assert!((w.world_model_scale - 0.5).abs() < 0.05, "{w:?}");
        weights.push(w);
    }
    let (mse, paper) = (weights[0], weights[1]);
    assert!((mse.anchor - 0.2).abs() < 0.03, "{mse:?}");
    assert!((mse.world_model - 1.6).abs() < 0.15, "{mse:?}");
    assert!((paper.world_model - 0.8).abs() < 0.03, "{paper:?}");
    assert!((paper.anchor + paper.world_model - 1.0).abs() < 1e-12);
}

#[test]
fn zero_variance_groups_get_zero_advantage_and_are_counted() {
    let mut c = core(Mode::Real);
    let (ones, mixed) = ([1.0; 4], [0.0, 1.0, 1.0, 0.0]);
    let out = c
        .process(&[
            input(Stream::Anchor, Some(&ones), None, 1.0),
            input(Stream::Anchor, Some(&mixed), None, 1.0),
        ])
        .unwrap();
    assert_eq!(out.diagnostics.zero_variance_groups, 1);
    assert_eq!(out.diagnostics.zero_variance_share, 0.5);
    assert!(out.samples[..4].iter().all(|s| s.advantage == 0.0));
    assert!(out.samples[4..].iter().all(|s| s.advantage.abs() > 0.9));
}

#[test]
fn no_anchors_yet_and_empty_streams_are_sane() {
    // First step of wmrl: the calibrator is the identity and there is no noise estimate.
    let data = step_data();
    let mut c = core(Mode::Wmrl);
    let groups: Vec<GroupInput<'_>> = data
        .iter()
        .map(|(_, s)| input(Stream::WorldModel, None, Some(s), 0.0))
        .collect();
    let out = c.process(&groups).unwrap();
    let d = &out.diagnostics;
    assert!(d.calibrator_identity && d.residual_variance.is_none() && d.raw_bias.is_none());
    assert_eq!(
        (d.stream_weights.anchor, d.stream_weights.world_model),
        (0.0, 1.0)
    );
    // Only anchors: all weight on them.
    let groups: Vec<GroupInput<'_>> = data
        .iter()
        .map(|(r, s)| input(Stream::Anchor, Some(r), Some(s), 1.0))
        .collect();
    let out = c.process(&groups).unwrap();
    assert_eq!(out.diagnostics.stream_weights.anchor, 1.0);
    assert!(out.samples.iter().all(|s| s.loss_weight.is_finite()));
}

#[test]
fn core_state_round_trips_and_rejects_tampering() {
    let data = step_data();
    let mut c = core(Mode::Wmrl);
    for _ in 0..5 {
        run_step(&mut c, &data);
    }
    let json = serde_json::to_string(&c).unwrap();
    let back: Core = serde_json::from_str(&json).unwrap();
    assert_eq!(back, c);
    let tampered = json.replacen("\"min_pairs\":4", "\"min_pairs\":0", 1);
    assert!(serde_json::from_str::<Core>(&tampered).is_err());
    let unknown = json.replacen("{", "{\"extra\":1,", 1);
    assert!(
        serde_json::from_str::<Core>(&unknown)
            .unwrap_err()
            .to_string()
            .contains("extra")
    );
}
