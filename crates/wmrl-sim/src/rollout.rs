//! Running scripted experts: one episode, or a sweep over tasks and initial
//! states in parallel (rayon), with per-task success rates.

use nalgebra::Vector3;
use rayon::prelude::*;
use serde::Serialize;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::api::{Action, Observation};
use crate::env::{EnvConfig, SimEnv};
use crate::error::Result;
use crate::expert::Expert;
use crate::predicates;

/// The result of one expert episode.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EpisodeSummary {
    /// Task index.
    pub task: usize,
    /// Initial-state index.
    pub init_state: usize,
    /// The goal was reached.
    pub success: bool,
    /// Control steps taken.
    pub steps: usize,
    /// Set when the simulation became unstable.
    pub execution_error: Option<String>,
    /// The goal predicates that did not hold at the end (empty on success).
    pub unmet_goals: Vec<String>,
    /// The highest speed (m/s) of any robot link or object at a control-step end.
    pub peak_speed: f32,
}

/// Runs the task's expert from initial state `k`; `on_step` sees every observation.
pub fn run_expert(
    env: &mut SimEnv,
    task: usize,
    k: usize,
    on_step: impl FnMut(&Observation),
) -> Result<EpisodeSummary> {
    run_expert_with(env, task, k, on_step, |_| {})
}

/// How [`run_perturbed_expert`] disturbs the expert: the kind of actions an
/// exploring or half-trained policy sends near objects (a shaky arm, a
/// gripper command that flips open/closed from one step to the next).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Perturbation {
    /// Half-width of the uniform noise added to the six arm dimensions (action units).
    pub arm_noise: f32,
    /// Probability per control step that the gripper command is inverted.
    pub gripper_flip: f64,
    /// Seed; each `(task, state)` episode draws from its own stream of it.
    pub seed: u64,
}

/// Runs the task's expert from initial state `k` with its actions disturbed
/// by `perturbation` (deterministic for a seed). Used to check that the
/// physics stays stable under the actions a learning policy sends.
pub fn run_perturbed_expert(
    env: &mut SimEnv,
    task: usize,
    k: usize,
    perturbation: &Perturbation,
) -> Result<EpisodeSummary> {
    let stream =
        perturbation.seed ^ ((task as u64) << 32 | k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut rng = ChaCha8Rng::seed_from_u64(stream);
    let p = *perturbation;
    run_expert_with(
        env,
        task,
        k,
        |_| {},
        move |action| {
            if p.arm_noise > 0.0 {
                for a in &mut action[..6] {
                    *a = (*a + rng.random_range(-p.arm_noise..=p.arm_noise)).clamp(-1.0, 1.0);
                }
            }
            if rng.random_bool(p.gripper_flip.clamp(0.0, 1.0)) {
                action[6] = -action[6];
            }
        },
    )
}

fn run_expert_with(
    env: &mut SimEnv,
    task: usize,
    k: usize,
    mut on_step: impl FnMut(&Observation),
    mut perturb: impl FnMut(&mut Action),
) -> Result<EpisodeSummary> {
    let _span = tracing::debug_span!("expert_episode", task, k).entered();
    let obs = env.reset(task, k)?;
    on_step(&obs);
    let mut expert = Expert::new(env);
    let trace = std::env::var_os("WMRL_EXPERT_TRACE").is_some();
    let mut last = (usize::MAX, usize::MAX);
    loop {
        let mut action = expert.act(env);
        perturb(&mut action);
        if trace
            && (expert.progress() != last || std::env::var_os("WMRL_EXPERT_TRACE_ALL").is_some())
        {
            last = expert.progress();
            let w = env.world();
            let ee = env.ee_pose().translation.vector;
            let mut line = format!(
                "[{k}] t={} skill={} phase={} q={:.2?} a={:.2?} ee=({:.3},{:.3},{:.3}) w={:.3}",
                env.steps(),
                last.0,
                last.1,
                env.proprio().joint_positions,
                &action[..6],
                ee.x,
                ee.y,
                ee.z,
                env.gripper_width()
            );
            for e in &w.entities {
                let pose = w.body_pose(e.root);
                let p = pose.translation.vector;
                let tilt = (pose.rotation * Vector3::z()).z.acos();
                let xa = pose.rotation * Vector3::x();
                let tilt = format!("{tilt:.2},yaw{:.2}", xa.y.atan2(xa.x));
                line += &format!(" {}=({:.3},{:.3},{:.3};{tilt})", e.name, p.x, p.y, p.z);
                for l in &e.links {
                    line += &format!(" {}={:.3}", l.name, w.joint_position(l.joint));
                }
            }
            // Which robot link (index along the chain) touches which entity.
            let touched: Vec<String> = (0..w.entities.len())
                .flat_map(|i| {
                    let theirs = w.entity_colliders(i);
                    w.robot
                        .links
                        .iter()
                        .enumerate()
                        .filter(|(_, b)| {
                            let ours: Vec<_> = w
                                .colliders
                                .iter()
                                .filter(|c| c.body == **b)
                                .map(|c| c.handle)
                                .collect();
                            w.in_contact(&ours, &theirs)
                        })
                        .map(|(l, _)| format!("{}@{l}", w.entities[i].name))
                        .collect::<Vec<_>>()
                })
                .collect();
            for &b in &w.robot.finger_bodies {
                let p = w.body_pose(b).translation.vector;
                line += &format!(" finger=({:.3},{:.3},{:.3})", p.x, p.y, p.z);
            }
            line += &format!(" touching={touched:?}");
            eprintln!("{line}");
        }
        let out = env.step(&action);
        on_step(&out.observation);
        if out.done {
            let unmet_goals = predicates::unmet_goals(env.scene(), env.world())
                .map(|p| p.to_string())
                .collect();
            return Ok(EpisodeSummary {
                task,
                init_state: k,
                success: out.success,
                steps: env.steps(),
                execution_error: out.execution_error.map(|e| e.to_string()),
                unmet_goals,
                peak_speed: env.peak_speed(),
            });
        }
    }
}

/// Per-task success over a sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskRate {
    /// Task index.
    pub task: usize,
    /// Episodes run.
    pub episodes: usize,
    /// Successful episodes.
    pub successes: usize,
    /// Episodes ended by an execution error.
    pub execution_errors: usize,
    /// successes / episodes.
    pub success_rate: f64,
    /// Mean steps of successful episodes.
    pub mean_success_steps: f64,
    /// Episodes whose peak body speed passed [`FAST_BODY_SPEED`] (whether or
    /// not they went on to an execution error).
    pub fast_episodes: usize,
    /// The highest body speed (m/s) over the task's episodes.
    pub peak_speed: f32,
}

/// A body speed (m/s) a third of the way to the execution-error threshold:
/// nothing on a tabletop moves this fast unless the solver is struggling.
pub const FAST_BODY_SPEED: f32 = 5.0;

/// Runs the expert on every `(task, state)` pair in parallel (cameras off).
pub fn expert_sweep(
    tasks: &[usize],
    states: std::ops::Range<usize>,
    config: &EnvConfig,
) -> Result<Vec<EpisodeSummary>> {
    let mut config = config.clone();
    config.camera.enabled = false;
    let jobs: Vec<(usize, usize)> = tasks
        .iter()
        .flat_map(|&t| states.clone().map(move |k| (t, k)))
        .collect();
    jobs.par_chunks(states.len().max(1))
        .map(|chunk| {
            let mut env = SimEnv::new(config.clone());
            chunk
                .iter()
                .map(|&(t, k)| run_expert(&mut env, t, k, |_| {}))
                .collect::<Result<Vec<_>>>()
        })
        .collect::<Result<Vec<Vec<_>>>>()
        .map(|v| v.into_iter().flatten().collect())
}

/// Aggregates episode summaries per task.
pub fn task_rates(episodes: &[EpisodeSummary]) -> Vec<TaskRate> {
    let mut tasks: Vec<usize> = episodes.iter().map(|e| e.task).collect();
    tasks.sort_unstable();
    tasks.dedup();
    tasks
        .into_iter()
        .map(|task| {
            let eps: Vec<&EpisodeSummary> = episodes.iter().filter(|e| e.task == task).collect();
            let ok: Vec<&&EpisodeSummary> = eps.iter().filter(|e| e.success).collect();
            TaskRate {
                task,
                episodes: eps.len(),
                successes: ok.len(),
                execution_errors: eps.iter().filter(|e| e.execution_error.is_some()).count(),
                success_rate: ok.len() as f64 / eps.len().max(1) as f64,
                mean_success_steps: ok.iter().map(|e| e.steps as f64).sum::<f64>()
                    / ok.len().max(1) as f64,
                fast_episodes: eps
                    .iter()
                    .filter(|e| e.peak_speed > FAST_BODY_SPEED)
                    .count(),
                peak_speed: eps.iter().map(|e| e.peak_speed).fold(0.0, f32::max),
            }
        })
        .collect()
}
