//! Criterion benchmarks of the core's hot paths: the isotonic fit of 10⁵
//! anchor pairs, and one full core step (calibrate, cross-fit, fuse) at the
//! default scale (64 groups × 8 rollouts, 10% anchors).

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use wmrl_core::{Core, CoreConfig, GroupInput, IsotonicFit, Stream};

fn pairs(n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let scores: Vec<f64> = (0..n).map(|_| rng.random::<f64>()).collect();
    let rewards = scores
        .iter()
        .map(|&s| (s * s + 0.3 * (rng.random::<f64>() - 0.5) > 0.5) as u8 as f64)
        .collect();
    (scores, rewards)
}

fn isotonic(c: &mut Criterion) {
    let (s, r) = pairs(100_000);
    c.bench_function("isotonic_fit_100k", |b| {
        b.iter(|| IsotonicFit::fit(black_box(&s), black_box(&r), None).unwrap())
    });
}

fn core_step(c: &mut Criterion) {
    let config = CoreConfig::default();
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let data: Vec<(Vec<f64>, Vec<f64>)> = (0..config.groups)
        .map(|_| {
            let r: Vec<f64> = (0..config.group_size)
                .map(|_| rng.random::<f64>())
                .collect();
            let s = r.iter().map(|&x| x + 0.2 * rng.random::<f64>()).collect();
            (r, s)
        })
        .collect();
    let mut core = Core::new(config).unwrap();
    c.bench_function("core_step_64x8", |b| {
        b.iter(|| {
            let plan = core.plan(&vec![0; config.groups]).unwrap();
            let groups: Vec<GroupInput<'_>> = data
                .iter()
                .enumerate()
                .map(|(g, (r, s))| GroupInput {
                    task: 0,
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
            black_box(core.process(&groups).unwrap())
        })
    });
}

criterion_group!(benches, isotonic, core_step);
criterion_main!(benches);
