//! `wmrl bench robots`: what the zenoh bridge costs, measured on loopback in
//! one run against the in-process simulator.
//!
//! - **Round trip**: the trainer sends a one-action chunk, the daemon clamps
//!   and executes it and sends back the observation (two camera images);
//!   p50/p99 over many steps, beside the in-process step + observation time.
//! - **Throughput**: the same policy, the same episodes, through a pool of
//!   simulator-backed daemons versus the in-process `SimExecutor` with as many
//!   environments; episodes/s of each and their ratio.

use std::time::{Duration, Instant};

use serde::Serialize;
use zenoh::{Session, Wait};

use wmrl_core::seams::{AnchorExecutor, EpisodeRequest, Execution};
use wmrl_sim::{EnvConfig, NOOP_ACTION, SimEnv};
use wmrl_vla::rollout::{ClosedLoopActor, TaskPrompt};
use wmrl_vla::sim::{SimExecutor, SimExecutorOptions};

use crate::daemon::{DaemonOptions, RobotDaemon};
use crate::driver::{SimDriver, SimDriverOptions};
use crate::net::NetOptions;
use crate::pool::{PoolOptions, ZenohExecutorPool};
use crate::protocol::{self, ActionChunkMsg, EpisodeStart, Leaf, Message, RobotId};
use crate::{Error, Result};

/// Benchmark settings.
#[derive(Debug, Clone, PartialEq)]
pub struct BridgeBenchOptions {
    /// Loopback TCP port of the first listener (default: 17447; +1 for the second run).
    pub port: u16,
    /// Camera size (default: 128, the policy's input).
    pub camera: u32,
    /// Round trips measured (default: 300).
    pub round_trips: usize,
    /// Daemons in the pool and environments in-process (default: 2).
    pub robots: usize,
    /// Episodes per executor (default: 8).
    pub episodes: usize,
    /// Control steps per episode (default: 64).
    pub max_steps: usize,
}

impl Default for BridgeBenchOptions {
    fn default() -> Self {
        BridgeBenchOptions {
            port: 17447,
            camera: 128,
            round_trips: 300,
            robots: 2,
            episodes: 8,
            max_steps: 64,
        }
    }
}

/// Results.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BridgeBench {
    /// Camera size used (pixels per side).
    pub camera: u32,
    /// Round trips measured.
    pub round_trips: usize,
    /// Median action → observation round trip over zenoh (ms).
    pub round_trip_p50_ms: f64,
    /// 99th percentile round trip (ms).
    pub round_trip_p99_ms: f64,
    /// Median in-process step + observation, the work inside each round trip (ms).
    pub in_process_step_p50_ms: f64,
    /// Bridge overhead: round-trip p50 minus in-process p50 (ms).
    pub bridge_overhead_p50_ms: f64,
    /// Episodes per executor.
    pub episodes: usize,
    /// Control steps per episode.
    pub max_steps: usize,
    /// Daemons / in-process environments.
    pub robots: usize,
    /// Episodes/s through the zenoh pool.
    pub bridge_episodes_per_s: f64,
    /// Episodes/s with the in-process simulator executor.
    pub in_process_episodes_per_s: f64,
    /// bridge / in-process.
    pub bridge_vs_in_process: f64,
}

fn env_config(camera: u32) -> EnvConfig {
    let mut env = SimDriverOptions::default().env;
    env.camera.width = camera;
    env.camera.height = camera;
    env.camera.enabled = camera > 0;
    env
}

fn spawn_daemon(endpoint: &str, id: &str, camera: u32) -> Result<RobotDaemon> {
    let session = NetOptions::connect_to(endpoint).open()?;
    let driver = SimDriver::new(SimDriverOptions {
        env: env_config(camera),
        realtime: false,
    });
    RobotDaemon::spawn(
        session,
        Box::new(driver),
        DaemonOptions::new(RobotId::new(id)?),
    )
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// Measures round trips against one daemon with a raw protocol client.
fn round_trips(
    trainer: &Session,
    robot: &RobotId,
    options: &BridgeBenchOptions,
) -> Result<Vec<f64>> {
    let obs = trainer
        .declare_subscriber(robot.key(Leaf::Obs))
        .wait()
        .map_err(|e| Error::zenoh("subscribing to observations", e))?;
    let outcome = trainer
        .declare_subscriber(robot.key(Leaf::Outcome))
        .wait()
        .map_err(|e| Error::zenoh("subscribing to outcomes", e))?;
    std::thread::sleep(Duration::from_millis(300));
    let put =
        |leaf: Leaf, message: Message| crate::net::publish(trainer, &robot.key(leaf), &message);
    let wait_obs = || -> Result<u64> {
        let sample = obs
            .recv_timeout(Duration::from_secs(10))
            .map_err(|e| Error::zenoh("waiting for an observation", e))?
            .ok_or_else(|| Error::zenoh("waiting for an observation", "timed out"))?;
        match protocol::decode(&sample.payload().to_bytes(), usize::MAX)? {
            Message::Observation(o) => Ok(o.seq),
            other => Err(Error::zenoh(
                "round trip",
                format!("got `{}`", other.kind()),
            )),
        }
    };
    let episode_id = 1;
    put(
        Leaf::Episode,
        Message::EpisodeStart(EpisodeStart {
            robot_id: robot.clone(),
            episode_id,
            task: 5,
            initial_state: 0,
            instruction: "bench".into(),
            max_steps: options.round_trips + 1,
        }),
    )?;
    let mut seq = wait_obs()?;
    let mut times = Vec::with_capacity(options.round_trips);
    for _ in 0..options.round_trips {
        let started = Instant::now();
        put(
            Leaf::Action,
            Message::ActionChunk(ActionChunkMsg {
                robot_id: robot.clone(),
                episode_id,
                seq,
                actions: vec![NOOP_ACTION.to_vec()],
            }),
        )?;
        seq = wait_obs()?;
        times.push(started.elapsed().as_secs_f64() * 1e3);
    }
    drop(outcome);
    Ok(times)
}

fn requests(prompts: &[TaskPrompt]) -> Vec<EpisodeRequest<'_, TaskPrompt>> {
    prompts
        .iter()
        .enumerate()
        .map(|(i, prompt)| EpisodeRequest {
            group: i,
            sample: 0,
            prompt,
            seed: i as u64,
            attempt: 0,
        })
        .collect()
}

fn completed<R>(results: &[Execution<R>]) -> usize {
    results
        .iter()
        .filter(|r| matches!(r, Execution::Completed { .. }))
        .count()
}

/// Runs both measurements with `policy` on `prompts` (cycled to `options.episodes`).
pub fn bench_bridge<P: ClosedLoopActor>(
    policy: &P,
    prompts: &[TaskPrompt],
    options: &BridgeBenchOptions,
) -> Result<BridgeBench> {
    let _span = tracing::info_span!("bench_bridge").entered();
    let endpoint = format!("tcp/127.0.0.1:{}", options.port);
    let trainer = NetOptions::listen_on(&endpoint).open()?;

    // Round trips against one daemon.
    let daemon = spawn_daemon(&endpoint, "bench-rt", options.camera)?;
    let robot = daemon.robot_id().clone();
    let mut times = round_trips(&trainer, &robot, options)?;
    daemon.shutdown()?;
    times.sort_by(f64::total_cmp);
    let mut env = SimEnv::new(env_config(options.camera));
    env.reset(5, 0)
        .map_err(|e| Error::zenoh("in-process reset", e))?;
    let mut step_times: Vec<f64> = (0..options.round_trips.min(200))
        .map(|_| {
            let started = Instant::now();
            let _ = env.step(&NOOP_ACTION);
            let _ = env.observe();
            started.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    step_times.sort_by(f64::total_cmp);

    // Throughput: pool of daemons vs in-process executor.
    let episodes: Vec<TaskPrompt> = prompts
        .iter()
        .cycle()
        .take(options.episodes)
        .cloned()
        .collect();
    let daemons = (0..options.robots.max(1))
        .map(|i| spawn_daemon(&endpoint, &format!("bench-{i}"), options.camera))
        .collect::<Result<Vec<_>>>()?;
    let mut pool = ZenohExecutorPool::new(
        trainer,
        PoolOptions {
            max_steps: options.max_steps,
            ..Default::default()
        },
    )?;
    let joined = pool.wait_for_robots(daemons.len(), Duration::from_secs(10));
    if joined < daemons.len() {
        return Err(Error::NoRobots {
            waited_s: 10.0,
            detail: format!("; only {joined} of {} daemons joined", daemons.len()),
        });
    }
    let started = Instant::now();
    let bridged = pool.execute(policy, &requests(&episodes))?;
    let bridge_s = started.elapsed().as_secs_f64();
    drop(pool);
    for daemon in daemons {
        daemon.shutdown()?;
    }

    let mut in_process = SimExecutor::new(
        options.robots.max(1),
        SimExecutorOptions {
            env: EnvConfig {
                max_steps: options.max_steps,
                ..env_config(options.camera)
            },
            ..Default::default()
        },
    );
    let started = Instant::now();
    let local = in_process.execute(policy, &requests(&episodes))?;
    let local_s = started.elapsed().as_secs_f64();

    let bridge_rate = completed(&bridged) as f64 / bridge_s;
    let local_rate = completed(&local) as f64 / local_s;
    let rt50 = percentile(&times, 0.5);
    let step50 = percentile(&step_times, 0.5);
    Ok(BridgeBench {
        camera: options.camera,
        round_trips: times.len(),
        round_trip_p50_ms: rt50,
        round_trip_p99_ms: percentile(&times, 0.99),
        in_process_step_p50_ms: step50,
        bridge_overhead_p50_ms: rt50 - step50,
        episodes: options.episodes,
        max_steps: options.max_steps,
        robots: options.robots.max(1),
        bridge_episodes_per_s: bridge_rate,
        in_process_episodes_per_s: local_rate,
        bridge_vs_in_process: bridge_rate / local_rate,
    })
}
