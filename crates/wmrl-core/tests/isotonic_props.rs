//! Property tests of the isotonic fit: monotone, order-invariant, optimal
//! among monotone fits (against a brute-force solver), and the prediction
//! rules between and outside blocks.

use proptest::prelude::*;
use wmrl_core::IsotonicFit;

/// Up to `max` pairs of (score, reward, weight) with repeated scores likely.
fn pairs(max: usize) -> impl Strategy<Value = Vec<(f64, f64, f64)>> {
    prop::collection::vec((0u8..12, -5.0f64..5.0, 0.1f64..3.0), 1..max).prop_map(|v| {
        v.into_iter()
            .map(|(s, r, w)| (s as f64 * 0.5, r, w))
            .collect()
    })
}

fn fit(p: &[(f64, f64, f64)]) -> IsotonicFit {
    let (s, r, w): (Vec<f64>, Vec<f64>, Vec<f64>) = p.iter().fold(
        (vec![], vec![], vec![]),
        |(mut s, mut r, mut w), &(a, b, c)| {
            s.push(a);
            r.push(b);
            w.push(c);
            (s, r, w)
        },
    );
    IsotonicFit::fit(&s, &r, Some(&w)).unwrap()
}

fn sse_of(p: &[(f64, f64, f64)], f: impl Fn(f64) -> f64) -> f64 {
    p.iter().map(|&(s, r, w)| w * (r - f(s)).powi(2)).sum()
}

/// The least weighted SSE over all non-decreasing functions of the distinct
/// scores: the optimum is constant on contiguous runs of distinct scores at
/// the run's weighted mean, so enumerate every partition into runs and keep
/// the monotone ones.
fn brute_force_sse(p: &[(f64, f64, f64)]) -> f64 {
    let mut xs: Vec<f64> = p.iter().map(|q| q.0).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let m = xs.len();
    // Per distinct score: total weight and weighted reward sum.
    let stats: Vec<(f64, f64)> = xs
        .iter()
        .map(|&x| {
            p.iter()
                .filter(|q| q.0 == x)
                .fold((0.0, 0.0), |(w, wy), q| (w + q.2, wy + q.2 * q.1))
        })
        .collect();
    let mut best = f64::INFINITY;
    for cuts in 0u32..(1 << (m - 1)) {
        let mut values = vec![0.0; m];
        let mut start = 0;
        let mut prev = f64::NEG_INFINITY;
        let mut monotone = true;
        for i in 0..m {
            if i == m - 1 || cuts & (1 << i) != 0 {
                let (w, wy) = stats[start..=i]
                    .iter()
                    .fold((0.0, 0.0), |(a, b), s| (a + s.0, b + s.1));
                let v = wy / w;
                monotone &= v >= prev - 1e-12;
                prev = v;
                values[start..=i].fill(v);
                start = i + 1;
            }
        }
        if monotone {
            let sse = sse_of(p, |s| values[xs.iter().position(|&x| x == s).unwrap()]);
            best = best.min(sse);
        }
    }
    best
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn fit_is_monotone_everywhere(p in pairs(40), probes in prop::collection::vec(-2.0f64..8.0, 20)) {
        let f = fit(&p);
        let mut probes = probes;
        probes.sort_by(f64::total_cmp);
        for w in probes.windows(2) {
            prop_assert!(f.predict(w[0]) <= f.predict(w[1]));
        }
        for b in f.blocks().windows(2) {
            prop_assert!(b[0].hi < b[1].lo && b[0].value < b[1].value);
        }
    }

    #[test]
    fn fit_does_not_depend_on_input_order(p in pairs(40), seed in any::<u64>()) {
        let mut shuffled = p.clone();
        // Fisher–Yates with a simple LCG driven by the seed.
        let mut state = seed | 1;
        for i in (1..shuffled.len()).rev() {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            shuffled.swap(i, (state >> 33) as usize % (i + 1));
        }
        prop_assert_eq!(fit(&p), fit(&shuffled));
    }

    #[test]
    fn fit_minimises_weighted_squared_error(p in pairs(9)) {
        let f = fit(&p);
        let ours = sse_of(&p, |s| f.predict(s));
        let best = brute_force_sse(&p);
        prop_assert!(ours <= best + 1e-9 * (1.0 + best), "PAVA {} vs brute force {}", ours, best);
    }

    #[test]
    fn prediction_is_block_value_inside_linear_between_clamped_outside(p in pairs(40)) {
        let f = fit(&p);
        let b = f.blocks();
        prop_assert_eq!(f.predict(b[0].lo - 100.0), b[0].value);
        prop_assert_eq!(f.predict(b[b.len() - 1].hi + 100.0), b[b.len() - 1].value);
        for blk in b {
            prop_assert_eq!(f.predict(blk.lo), blk.value);
            prop_assert_eq!(f.predict(blk.hi), blk.value);
            prop_assert_eq!(f.predict(0.5 * (blk.lo + blk.hi)), blk.value);
        }
        for w in b.windows(2) {
            let mid = 0.5 * (w[0].hi + w[1].lo);
            let expected = 0.5 * (w[0].value + w[1].value);
            prop_assert!((f.predict(mid) - expected).abs() <= 1e-12 * (1.0 + expected.abs()));
        }
    }
}
