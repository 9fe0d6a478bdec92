//! Criterion benchmarks: one control step (12 physics substeps) with physics
//! only and with both 128×128 cameras, rendering alone, and a reset.

use criterion::{Criterion, criterion_group, criterion_main};
use wmrl_sim::expert::Expert;
use wmrl_sim::{EnvConfig, SimEnv};

fn env(cameras: bool) -> SimEnv {
    let mut c = EnvConfig::default();
    c.camera.enabled = cameras;
    let mut env = SimEnv::new(c);
    env.reset(0, 0).expect("task 0 resets");
    env
}

fn control_step(c: &mut Criterion) {
    for (name, cameras) in [
        ("step_physics_only", false),
        ("step_with_both_cameras", true),
    ] {
        let mut e = env(cameras);
        let mut expert = Expert::new(&e);
        c.bench_function(name, |b| {
            b.iter(|| {
                let a = expert.act(&e);
                if e.step(&a).done {
                    e.reset(0, 0).expect("reset");
                    expert = Expert::new(&e);
                }
            })
        });
    }
    let mut e = env(true);
    c.bench_function("render_both_cameras", |b| b.iter(|| e.observe()));
    c.bench_function("reset_cached_state", |b| {
        b.iter(|| e.reset(0, 0).expect("reset"))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = control_step
}
criterion_main!(benches);
