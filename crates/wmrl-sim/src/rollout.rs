//! Running scripted experts: one episode, or a sweep over tasks and initial
//! states in parallel (rayon), with per-task success rates.

use nalgebra::Vector3;
use rayon::prelude::*;
use serde::Serialize;

use crate::api::Observation;
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
}

/// Runs the task's expert from initial state `k`; `on_step` sees every observation.
pub fn run_expert(
    env: &mut SimEnv,
    task: usize,
    k: usize,
    mut on_step: impl FnMut(&Observation),
) -> Result<EpisodeSummary> {
    let _span = tracing::debug_span!("expert_episode", task, k).entered();
    let obs = env.reset(task, k)?;
    on_step(&obs);
    let mut expert = Expert::new(env);
    let trace = std::env::var_os("WMRL_EXPERT_TRACE").is_some();
    let mut last = (usize::MAX, usize::MAX);
    loop {
        let action = expert.act(env);
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
}

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
            }
        })
        .collect()
}
