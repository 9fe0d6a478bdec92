//! Throughput measurements shared by `wmrl bench sim` and the criterion bench:
//! control steps per second on one core with physics only and with both
//! cameras rendered, and reset times, all measured in the same run on the same
//! expert-driven trajectories.

use std::time::Instant;

use serde::Serialize;

use crate::env::{EnvConfig, SimEnv};
use crate::error::Result;
use crate::expert::Expert;
use crate::tasks::NUM_TASKS;

/// What to measure.
#[derive(Debug, Clone, PartialEq)]
pub struct SimBenchOptions {
    /// Control steps per task and mode (default: 150).
    pub steps: usize,
    /// Tasks to run (default: all ten).
    pub tasks: Vec<usize>,
    /// Camera image side (default: 128).
    pub image_size: u32,
}

impl Default for SimBenchOptions {
    fn default() -> Self {
        SimBenchOptions {
            steps: 150,
            tasks: (0..NUM_TASKS).collect(),
            image_size: 128,
        }
    }
}

/// Measured figures (single thread).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimBenchResult {
    /// Control steps per second, physics and control only.
    pub physics_only_steps_per_s: f64,
    /// Control steps per second including both cameras.
    pub with_cameras_steps_per_s: f64,
    /// Milliseconds to render both cameras once.
    pub render_both_ms: f64,
    /// Milliseconds per reset to a cached initial state (world copy, restore, observation).
    pub reset_ms: f64,
    /// Milliseconds to generate one new initial state (sampling and settling).
    pub init_state_generation_ms: f64,
    /// Physics rate (Hz).
    pub physics_hz: f64,
    /// Physics substeps per control step.
    pub substeps: usize,
    /// Camera image side (pixels).
    pub image_size: u32,
    /// Control steps measured per mode.
    pub steps_measured: usize,
}

/// Drives `env` with the expert on `task` for `steps` control steps (resetting
/// when an episode ends); returns the seconds spent.
fn run(env: &mut SimEnv, task: usize, steps: usize) -> Result<f64> {
    env.reset(task, 0)?;
    let mut expert = Expert::new(env);
    let t = Instant::now();
    for _ in 0..steps {
        let a = expert.act(env);
        if env.step(&a).done {
            env.reset(task, 0)?;
            expert = Expert::new(env);
        }
    }
    Ok(t.elapsed().as_secs_f64())
}

/// Runs the benchmark on the calling thread.
pub fn bench_sim(opts: &SimBenchOptions) -> Result<SimBenchResult> {
    let _span = tracing::info_span!("bench_sim").entered();
    let mut config = EnvConfig::default();
    config.camera.width = opts.image_size;
    config.camera.height = opts.image_size;
    let mut physics = config.clone();
    physics.camera.enabled = false;

    // Initial states first (generation timed), so both runs start from cached states.
    let mut env = SimEnv::new(config.clone());
    let t = Instant::now();
    for &task in &opts.tasks {
        env.initial_state(task, 0)?;
    }
    let init_state_generation_ms = t.elapsed().as_secs_f64() * 1e3 / opts.tasks.len().max(1) as f64;
    let t = Instant::now();
    let mut resets = 0;
    for _ in 0..5 {
        for &task in &opts.tasks {
            env.reset(task, 0)?;
            resets += 1;
        }
    }
    let reset_ms = t.elapsed().as_secs_f64() * 1e3 / resets as f64;
    let t = Instant::now();
    for _ in 0..50 {
        env.observe();
    }
    let render_both_ms = t.elapsed().as_secs_f64() * 1e3 / 50.0;

    // Task by task, physics only then with cameras on the same trajectory, so
    // that a slow spell on a shared machine weighs on both figures alike.
    let mut physics_env = SimEnv::new(physics);
    let (mut p_secs, mut c_secs) = (0.0, 0.0);
    for &task in &opts.tasks {
        p_secs += run(&mut physics_env, task, opts.steps)?;
        c_secs += run(&mut env, task, opts.steps)?;
    }
    let steps = opts.steps * opts.tasks.len();
    Ok(SimBenchResult {
        physics_only_steps_per_s: steps as f64 / p_secs,
        with_cameras_steps_per_s: steps as f64 / c_secs,
        render_both_ms,
        reset_ms,
        init_state_generation_ms,
        physics_hz: config.world.physics_hz,
        substeps: (config.world.physics_hz / config.control.control_hz).round() as usize,
        image_size: opts.image_size,
        steps_measured: steps,
    })
}
