//! The AutoResearch side of the core's seams (`wmrl_core::seams`).
//!
//! - [`ResearchAdapter`]: a prompt is a task of the suite; a rollout is a
//!   [`Solution`] (its text, and the plan and log-probability when the policy
//!   is the in-process plan model). Prompts cycle through the tasks so every
//!   step covers them evenly.
//! - [`SandboxExecutor`]: the anchor executor. It samples solutions from the
//!   policy ([`SolutionSampler`]) and runs them in the sandbox; the reward is
//!   the leaderboard percentile (0 for crashes, timeouts, invalid submissions).
//!   A failure of the sandbox machinery is [`Execution::Failed`] and re-queued.
//! - [`TextWorldModel`]: the world model, over any [`TextScorer`] (the tch
//!   text model or the LLM judge): imagining is sampling from the policy plus
//!   scoring the text.

use std::collections::HashSet;
use std::sync::Arc;

use serde::Serialize;
use wmrl_core::TaskId;
use wmrl_core::seams::{
    Adapter, AnchorExecutor, EpisodeRequest, ExecutedEpisode, Execution, Imagined, WorldModel,
};

use crate::executor::{ExecutionRecord, SolutionRunner};
use crate::plan::Plan;
use crate::task::Task;
use crate::{Error, Result};

/// A prompt: task `index` of the adapter's task list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TaskPrompt {
    /// Index into the task list.
    pub index: usize,
}

/// A solution: what the policy wrote for a task.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Solution {
    /// Task index.
    pub task: usize,
    /// The Python program.
    pub text: String,
    /// The plan it was rendered from (in-process policy).
    pub plan: Option<Plan>,
    /// Action indices of the plan, one per head.
    pub actions: Option<[usize; 4]>,
    /// Log-probability of the actions under the sampling policy.
    pub log_prob: f64,
    /// The prompt the text was sampled for (endpoint policies).
    pub prompt: Option<String>,
    /// The raw completion the text was extracted from (endpoint policies).
    pub completion: Option<String>,
}

/// Something that writes solutions: the policy as the executor and the world model see it.
pub trait SolutionSampler {
    /// One solution for task `task` (index into `tasks`), deterministic for `seed`.
    fn sample(&self, tasks: &[Arc<Task>], task: usize, seed: u64) -> Result<Solution>;

    /// Solutions for many (task, seed) requests; by default one at a time.
    fn sample_many(&self, tasks: &[Arc<Task>], requests: &[(usize, u64)]) -> Result<Vec<Solution>> {
        requests
            .iter()
            .map(|&(t, s)| self.sample(tasks, t, s))
            .collect()
    }
}

/// The AutoResearch domain: a task list.
#[derive(Debug, Clone)]
pub struct ResearchAdapter {
    tasks: Arc<Vec<Arc<Task>>>,
}

impl ResearchAdapter {
    /// An adapter over `tasks` (each needs a leaderboard).
    pub fn new(tasks: Vec<Task>) -> Result<Self> {
        if tasks.is_empty() {
            return Err(Error::Build {
                what: "adapter".into(),
                message: "no tasks".into(),
            });
        }
        for t in &tasks {
            if t.leaderboard.is_none() {
                return Err(Error::MissingFile {
                    task: t.dir.clone(),
                    file: crate::task::files::LEADERBOARD.into(),
                });
            }
        }
        Ok(Self {
            tasks: Arc::new(tasks.into_iter().map(Arc::new).collect()),
        })
    }

    /// The tasks.
    pub fn tasks(&self) -> &Arc<Vec<Arc<Task>>> {
        &self.tasks
    }
}

impl Adapter for ResearchAdapter {
    type Prompt = TaskPrompt;
    type Rollout = Solution;
    type Error = Error;

    fn prompts(&mut self, step: u64, count: usize) -> Result<Vec<TaskPrompt>> {
        let n = self.tasks.len();
        let offset = (step as usize).wrapping_mul(count) % n;
        Ok((0..count)
            .map(|g| TaskPrompt {
                index: (offset + g) % n,
            })
            .collect())
    }

    fn task(&self, prompt: &TaskPrompt) -> TaskId {
        prompt.index as TaskId
    }
}

fn sample_requests<P: SolutionSampler + ?Sized>(
    policy: &P,
    tasks: &[Arc<Task>],
    episodes: &[EpisodeRequest<'_, TaskPrompt>],
) -> Result<Vec<Solution>> {
    let requests: Vec<(usize, u64)> = episodes.iter().map(|e| (e.prompt.index, e.seed)).collect();
    policy.sample_many(tasks, &requests)
}

/// One real execution, for the anchor log.
#[derive(Debug, Clone, Serialize)]
pub struct AnchorLogRow<'a> {
    /// Task id.
    pub task: &'a str,
    /// Plan, when known.
    pub plan: Option<String>,
    /// The execution record (outcome, wall time, percentile).
    pub record: &'a ExecutionRecord,
}

/// The anchor executor: sample from the policy, run in the sandbox, reward = percentile.
pub struct SandboxExecutor {
    tasks: Arc<Vec<Arc<Task>>>,
    runner: SolutionRunner,
    runtime: Arc<tokio::runtime::Runtime>,
    log: Option<wmrl_report::MetricsSink>,
    distinct: HashSet<String>,
}

impl SandboxExecutor {
    /// An executor for the adapter's tasks; `log` receives one JSONL row per execution.
    pub fn new(
        adapter: &ResearchAdapter,
        runner: SolutionRunner,
        runtime: Arc<tokio::runtime::Runtime>,
        log: Option<wmrl_report::MetricsSink>,
    ) -> Self {
        Self {
            tasks: adapter.tasks.clone(),
            runner,
            runtime,
            log,
            distinct: HashSet::new(),
        }
    }

    /// Distinct solutions (by cache key: task and text) among the anchor
    /// executions so far: what a deduplicating executor would have run.
    pub fn distinct_executions(&self) -> u64 {
        self.distinct.len() as u64
    }

    /// The runner (its counters tell executions requested and run).
    pub fn runner(&self) -> &SolutionRunner {
        &self.runner
    }

    /// Runs solutions already written (e.g. for evaluation), one record per solution.
    pub fn run_solutions(&mut self, solutions: &[Solution]) -> Vec<Result<ExecutionRecord>> {
        let items: Vec<(Arc<Task>, String)> = solutions
            .iter()
            .map(|s| (self.tasks[s.task].clone(), s.text.clone()))
            .collect();
        self.runtime.block_on(self.runner.run_batch(&items))
    }
}

impl<P: SolutionSampler + ?Sized> AnchorExecutor<ResearchAdapter, P> for SandboxExecutor {
    type Error = Error;

    fn execute(
        &mut self,
        policy: &P,
        episodes: &[EpisodeRequest<'_, TaskPrompt>],
    ) -> Result<Vec<Execution<Solution>>> {
        let solutions = sample_requests(policy, &self.tasks, episodes)?;
        let records = self.run_solutions(&solutions);
        let mut out = Vec::with_capacity(solutions.len());
        for (solution, record) in solutions.into_iter().zip(records) {
            match record {
                Ok(record) => {
                    self.distinct.insert(record.key.clone());
                    if let Some(log) = &mut self.log {
                        let row = AnchorLogRow {
                            task: self.tasks[solution.task].id(),
                            plan: solution.plan.map(|p| p.to_string()),
                            record: &record,
                        };
                        log.write(&row)?;
                    }
                    out.push(Execution::Completed {
                        reward: record.reward(),
                        rollout: solution,
                    });
                }
                Err(err) => out.push(Execution::Failed {
                    reason: err.to_string(),
                }),
            }
        }
        Ok(out)
    }
}

/// Scores solution texts: the learned part of a world model.
pub trait TextScorer {
    /// One score per (task, text), on the reward's scale (a percentile in [0, 1]) as well as it can.
    fn score(&mut self, items: &[(&Task, &str)]) -> Result<Vec<f64>>;

    /// Learns from executed solutions and their real rewards. Default: nothing.
    fn observe(&mut self, items: &[(&Task, &str, f64)]) -> Result<()> {
        let _ = items;
        Ok(())
    }
}

/// A world model that imagines by sampling from the policy and scoring the text.
pub struct TextWorldModel<S> {
    tasks: Arc<Vec<Arc<Task>>>,
    scorer: S,
}

impl<S: TextScorer> TextWorldModel<S> {
    /// Wraps `scorer` for the adapter's tasks.
    pub fn new(adapter: &ResearchAdapter, scorer: S) -> Self {
        Self {
            tasks: adapter.tasks.clone(),
            scorer,
        }
    }

    /// The scorer.
    pub fn scorer(&self) -> &S {
        &self.scorer
    }

    /// The scorer, mutably.
    pub fn scorer_mut(&mut self) -> &mut S {
        &mut self.scorer
    }

    fn score_solutions(&mut self, solutions: &[&Solution]) -> Result<Vec<f64>> {
        let tasks = self.tasks.clone();
        let items: Vec<(&Task, &str)> = solutions
            .iter()
            .map(|s| (tasks[s.task].as_ref(), s.text.as_str()))
            .collect();
        self.scorer.score(&items)
    }
}

impl<S: TextScorer, P: SolutionSampler + ?Sized> WorldModel<ResearchAdapter, P>
    for TextWorldModel<S>
{
    type Error = Error;

    fn imagine(
        &mut self,
        policy: &P,
        episodes: &[EpisodeRequest<'_, TaskPrompt>],
    ) -> Result<Vec<Imagined<Solution>>> {
        let solutions = sample_requests(policy, &self.tasks, episodes)?;
        let scores = self.score_solutions(&solutions.iter().collect::<Vec<_>>())?;
        Ok(solutions
            .into_iter()
            .zip(scores)
            .map(|(rollout, score)| Imagined { rollout, score })
            .collect())
    }

    fn score(
        &mut self,
        episodes: &[ExecutedEpisode<'_, TaskPrompt, Solution>],
    ) -> Result<Vec<f64>> {
        let solutions: Vec<&Solution> = episodes.iter().map(|e| e.rollout).collect();
        self.score_solutions(&solutions)
    }

    fn observe(&mut self, episodes: &[ExecutedEpisode<'_, TaskPrompt, Solution>]) -> Result<()> {
        let tasks = self.tasks.clone();
        let items: Vec<(&Task, &str, f64)> = episodes
            .iter()
            .map(|e| {
                (
                    tasks[e.rollout.task].as_ref(),
                    e.rollout.text.as_str(),
                    e.reward,
                )
            })
            .collect();
        self.scorer.observe(&items)
    }
}
