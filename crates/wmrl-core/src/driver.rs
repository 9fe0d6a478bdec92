//! The generic training step: schedule anchors, execute and imagine,
//! calibrate, fuse, compute advantages, hand the batch to the learner.
//!
//! [`step`] runs the phases in order through the [`crate::seams`]. Each
//! phase is also public ([`execute_anchors`], [`fuse_batch`]) so that a
//! trainer that overlaps phases (anchors on robots while the GPU imagines)
//! can reuse them and keep the same semantics.

use serde::{Deserialize, Serialize};

use crate::advantage::Stream;
use crate::config::CoreConfig;
use crate::diagnostics::StepDiagnostics;
use crate::error::Component;
use crate::fuse::GroupInput;
use crate::rng::{derive_seed, purpose};
use crate::sampling::{SamplingCounts, is_informative};
use crate::schedule::{AnchorPlan, TaskId};
use crate::seams::{
    Adapter, AnchorExecutor, Batch, BatchSample, EpisodeRequest, ExecutedEpisode, Execution,
    Imagined, Policy, WorldModel,
};
use crate::state::Core;
use crate::{Error, Result};

/// What a step did, beyond the core's diagnostics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepReport {
    /// The core's diagnostics.
    pub diagnostics: StepDiagnostics,
    /// Real episodes completed (each costs a real execution).
    pub executions: usize,
    /// Execution errors (re-queued episodes; each also cost an attempt).
    pub execution_failures: usize,
    /// Rollouts imagined by the world model.
    pub imagined: usize,
    /// Executed rollouts scored by the world model.
    pub scored: usize,
    /// Anchor twins imagined ([`crate::AnchorScoring::Twin`]); not counted in `imagined`.
    #[serde(default)]
    pub twins: usize,
    /// Dynamic sampling: groups dropped and refilled per stream ([`crate::sampling`]).
    #[serde(default)]
    pub sampling: SamplingCounts,
}

/// One group's data, ready for fusion.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupData<R> {
    /// The rollouts, one per sample.
    pub rollouts: Vec<R>,
    /// Real rewards (anchors).
    pub rewards: Option<Vec<f64>>,
    /// World-model scores (world-model groups; anchors in mixed modes).
    pub scores: Option<Vec<f64>>,
}

/// Anchor episodes executed by [`execute_anchors`].
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutedAnchors<R> {
    /// (rollout, real reward) per request, in request order.
    pub episodes: Vec<(R, f64)>,
    /// Execution errors that were re-queued.
    pub failures: usize,
}

/// The seed of episode (`group`, `sample`) of `step` at `attempt`.
pub fn episode_seed(seed: u64, step: u64, group: usize, sample: usize, attempt: u32) -> u64 {
    derive_seed(
        seed,
        &[
            purpose::EPISODES,
            step,
            group as u64,
            sample as u64,
            attempt as u64,
        ],
    )
}

/// Executes `requests`, re-queueing episodes that fail to execute (with a
/// fresh seed) until each completes or `max_attempts` are spent.
pub fn execute_anchors<A, P, E>(
    executor: &mut E,
    policy: &P,
    requests: &[EpisodeRequest<'_, A::Prompt>],
    seed: u64,
    step: u64,
    max_attempts: u32,
) -> Result<ExecutedAnchors<A::Rollout>>
where
    A: Adapter,
    P: ?Sized,
    E: AnchorExecutor<A, P>,
{
    let _span = tracing::info_span!("execute_anchors", episodes = requests.len()).entered();
    let mut results: Vec<Option<(A::Rollout, f64)>> = requests.iter().map(|_| None).collect();
    let mut pending: Vec<usize> = (0..requests.len()).collect();
    let mut reasons = vec![String::new(); requests.len()];
    let mut failures = 0;
    for attempt in 0..max_attempts {
        if pending.is_empty() {
            break;
        }
        let batch: Vec<EpisodeRequest<'_, A::Prompt>> = pending
            .iter()
            .map(|&i| {
                let r = requests[i];
                EpisodeRequest {
                    attempt,
                    seed: episode_seed(seed, step, r.group, r.sample, attempt),
                    ..r
                }
            })
            .collect();
        let outcomes = executor
            .execute(policy, &batch)
            .map_err(|e| Error::component(Component::Executor, e))?;
        if outcomes.len() != batch.len() {
            return Err(Error::Contract {
                component: Component::Executor,
                expected: batch.len(),
                got: outcomes.len(),
            });
        }
        let mut still = Vec::new();
        for (&i, outcome) in pending.iter().zip(outcomes) {
            match outcome {
                Execution::Completed { rollout, reward } => results[i] = Some((rollout, reward)),
                Execution::Failed { reason } => {
                    failures += 1;
                    tracing::warn!(
                        group = requests[i].group,
                        sample = requests[i].sample,
                        attempt,
                        %reason,
                        "anchor episode failed to execute; re-queued"
                    );
                    reasons[i] = reason;
                    still.push(i);
                }
            }
        }
        pending = still;
    }
    if let Some(&i) = pending.first() {
        return Err(Error::ExecutionExhausted {
            group: requests[i].group,
            sample: requests[i].sample,
            attempts: max_attempts,
            reason: std::mem::take(&mut reasons[i]),
        });
    }
    let episodes = results
        .into_iter()
        .map(|r| r.expect("every pending episode completed"))
        .collect();
    Ok(ExecutedAnchors { episodes, failures })
}

/// Runs the core on the step's groups and assembles the learner's batch.
pub fn fuse_batch<Q, R>(
    core: &mut Core,
    prompts: Vec<Q>,
    tasks: &[TaskId],
    plan: &AnchorPlan,
    groups: Vec<GroupData<R>>,
) -> Result<Batch<Q, R>> {
    let _span = tracing::info_span!("fuse", groups = groups.len()).entered();
    let step = core.step();
    let inputs: Vec<GroupInput<'_>> = groups
        .iter()
        .enumerate()
        .map(|(g, d)| GroupInput {
            task: tasks[g],
            stream: if plan.is_anchor[g] {
                Stream::Anchor
            } else {
                Stream::WorldModel
            },
            rewards: d.rewards.as_deref(),
            scores: d.scores.as_deref(),
            inclusion_probability: plan.inclusion_probability[g],
        })
        .collect();
    for (g, d) in groups.iter().enumerate() {
        let n = d.rewards.as_ref().or(d.scores.as_ref()).map_or(0, Vec::len);
        if d.rollouts.len() != n {
            return Err(Error::InvalidGroup {
                group: g,
                message: format!("{} rollouts for {n} values", d.rollouts.len()),
            });
        }
    }
    let out = core.process(&inputs)?;
    drop(inputs);
    let mut rollouts = groups.into_iter().flat_map(|d| d.rollouts);
    let samples = out
        .samples
        .into_iter()
        .map(|signal| BatchSample {
            signal,
            rollout: rollouts.next().expect("one rollout per sample"),
        })
        .collect();
    Ok(Batch {
        step,
        prompts,
        samples,
        diagnostics: out.diagnostics,
    })
}

/// The first phase of a step: the prompts, their tasks and which groups
/// are anchors.
#[derive(Debug, Clone)]
pub struct StepPlan<Q> {
    /// The core's step index (seeds derive from it).
    pub step: u64,
    /// The core's settings at this step.
    pub config: CoreConfig,
    /// One prompt per group.
    pub prompts: Vec<Q>,
    /// The task of each group.
    pub tasks: Vec<TaskId>,
    /// Anchor or world-model group, and inclusion probabilities.
    pub plan: AnchorPlan,
    /// Index of the first group in the step: 0, or the groups before a
    /// dynamic-sampling refill round (episode seeds derive from it).
    pub group_offset: usize,
}

impl<Q> StepPlan<Q> {
    /// The episode requests of the anchor groups (`anchor`) or of the
    /// world-model groups (`!anchor`), group-major, at attempt 0.
    pub fn requests(&self, anchor: bool) -> Vec<EpisodeRequest<'_, Q>> {
        let (seed, step, n) = (self.config.seed, self.step, self.config.group_size);
        let offset = self.group_offset;
        (0..self.prompts.len())
            .filter(|&g| self.plan.is_anchor[g] == anchor)
            .flat_map(|g| {
                let prompt = &self.prompts[g];
                (0..n).map(move |sample| EpisodeRequest {
                    group: offset + g,
                    sample,
                    prompt,
                    seed: episode_seed(seed, step, offset + g, sample, 0),
                    attempt: 0,
                })
            })
            .collect()
    }

    /// The requests of the anchors' imagined twins ([`crate::AnchorScoring::Twin`]):
    /// the anchor requests when this step pairs twins, none otherwise.
    pub fn twin_requests(&self) -> Vec<EpisodeRequest<'_, Q>> {
        if self.config.pairs_twins() {
            self.requests(true)
        } else {
            Vec::new()
        }
    }
}

/// Phase 1: the step's prompts from the adapter and the anchor plan.
pub fn plan_step<A: Adapter>(core: &mut Core, adapter: &mut A) -> Result<StepPlan<A::Prompt>> {
    let config = *core.config();
    let step = core.step();
    let prompts = adapter
        .prompts(step, config.groups)
        .map_err(|e| Error::component(Component::Adapter, e))?;
    if prompts.len() != config.groups {
        return Err(Error::Contract {
            component: Component::Adapter,
            expected: config.groups,
            got: prompts.len(),
        });
    }
    let tasks: Vec<TaskId> = prompts.iter().map(|p| adapter.task(p)).collect();
    let plan = core.plan(&tasks)?;
    Ok(StepPlan {
        step,
        config,
        prompts,
        tasks,
        plan,
        group_offset: 0,
    })
}

/// Phase 2b (mixed modes): the world model scores the executed anchors and
/// then observes them with their real rewards. Returns the scores the
/// anchors are paired with: the executed rollouts' own, or, when `twins`
/// holds the anchors' imagined twins ([`StepPlan::twin_requests`], in
/// request order), the twins'. `None` in modes that do not mix the
/// streams, or without anchors.
pub fn score_anchors<A, P, W>(
    world_model: &mut W,
    plan: &StepPlan<A::Prompt>,
    requests: &[EpisodeRequest<'_, A::Prompt>],
    executed: &[(A::Rollout, f64)],
    twins: Vec<Imagined<A::Rollout>>,
) -> Result<Option<Vec<f64>>>
where
    A: Adapter,
    P: ?Sized,
    W: WorldModel<A, P>,
{
    if !plan.config.mode.mixes_streams() || executed.is_empty() {
        return Ok(None);
    }
    let _span = tracing::info_span!("score_anchors", episodes = executed.len()).entered();
    let episodes: Vec<ExecutedEpisode<'_, A::Prompt, A::Rollout>> = requests
        .iter()
        .zip(executed)
        .map(|(r, (rollout, reward))| ExecutedEpisode {
            group: r.group,
            sample: r.sample,
            prompt: r.prompt,
            rollout,
            reward: *reward,
        })
        .collect();
    let scores = world_model
        .score(&episodes)
        .map_err(|e| Error::component(Component::WorldModel, e))?;
    if scores.len() != episodes.len() {
        return Err(Error::Contract {
            component: Component::WorldModel,
            expected: episodes.len(),
            got: scores.len(),
        });
    }
    world_model
        .observe(&episodes)
        .map_err(|e| Error::component(Component::WorldModel, e))?;
    if twins.is_empty() {
        return Ok(Some(scores));
    }
    if twins.len() != episodes.len() {
        return Err(Error::Contract {
            component: Component::WorldModel,
            expected: episodes.len(),
            got: twins.len(),
        });
    }
    Ok(Some(twins.into_iter().map(|t| t.score).collect()))
}

/// Phase 2c: the world model imagines `requests` (the world-model groups'
/// rollouts, or the anchors' twins).
pub fn imagine_groups<A, P, W>(
    world_model: &mut W,
    policy: &P,
    requests: &[EpisodeRequest<'_, A::Prompt>],
) -> Result<Vec<Imagined<A::Rollout>>>
where
    A: Adapter,
    P: ?Sized,
    W: WorldModel<A, P>,
{
    if requests.is_empty() {
        return Ok(Vec::new());
    }
    let _span = tracing::info_span!("imagine", episodes = requests.len()).entered();
    let out = world_model
        .imagine(policy, requests)
        .map_err(|e| Error::component(Component::WorldModel, e))?;
    if out.len() != requests.len() {
        return Err(Error::Contract {
            component: Component::WorldModel,
            expected: requests.len(),
            got: out.len(),
        });
    }
    Ok(out)
}

/// What [`imagine_with_twins`] imagined, each in request order.
#[derive(Debug, Clone, PartialEq)]
pub struct ImaginedWithTwins<R> {
    /// The world-model groups' rollouts.
    pub groups: Vec<Imagined<R>>,
    /// The anchors' twins (empty unless the step pairs twins).
    pub twins: Vec<Imagined<R>>,
}

/// Phase 2c with twins: imagines `wm_requests` and the anchors' twins
/// ([`StepPlan::twin_requests`], none unless the step pairs twins) in one
/// batch.
pub fn imagine_with_twins<A, P, W>(
    world_model: &mut W,
    policy: &P,
    plan: &StepPlan<A::Prompt>,
    wm_requests: &[EpisodeRequest<'_, A::Prompt>],
) -> Result<ImaginedWithTwins<A::Rollout>>
where
    A: Adapter,
    P: ?Sized,
    W: WorldModel<A, P>,
{
    let mut requests = wm_requests.to_vec();
    requests.extend(plan.twin_requests());
    let mut groups = imagine_groups::<A, P, W>(world_model, policy, &requests)?;
    let twins = groups.split_off(wm_requests.len());
    Ok(ImaginedWithTwins { groups, twins })
}

/// Phase 3: assembles every group, runs the core (calibrate, denoise,
/// advantages) and hands the batch to the learner.
pub fn finish_step<A, P>(
    core: &mut Core,
    policy: &mut P,
    round: Round<A::Prompt, A::Rollout>,
) -> Result<StepReport>
where
    A: Adapter,
    P: Policy<A> + ?Sized,
{
    let Round {
        plan,
        executed,
        anchor_scores,
        imagined,
        sampling,
    } = round;
    let StepPlan {
        config,
        prompts,
        tasks,
        plan,
        ..
    } = plan;
    let n = config.group_size;
    let groups = prompts.len();
    let executions = executed.episodes.len();
    let scored = anchor_scores.as_ref().map_or(0, Vec::len);
    let imagined_count = imagined.len();
    let mut data: Vec<Option<GroupData<A::Rollout>>> = (0..groups).map(|_| None).collect();
    let mut scores_iter = anchor_scores.into_iter().flatten();
    let mut executed_iter = executed.episodes.into_iter();
    for g in (0..groups).filter(|&g| plan.is_anchor[g]) {
        let (rollouts, rewards): (Vec<_>, Vec<_>) = executed_iter.by_ref().take(n).unzip();
        let scores = config
            .mode
            .mixes_streams()
            .then(|| scores_iter.by_ref().take(n).collect());
        data[g] = Some(GroupData {
            rollouts,
            rewards: Some(rewards),
            scores,
        });
    }
    let mut it = imagined.into_iter();
    for g in (0..groups).filter(|&g| !plan.is_anchor[g]) {
        let (rollouts, scores): (Vec<_>, Vec<_>) =
            it.by_ref().take(n).map(|i| (i.rollout, i.score)).unzip();
        data[g] = Some(GroupData {
            rollouts,
            rewards: None,
            scores: Some(scores),
        });
    }
    let data: Vec<GroupData<A::Rollout>> = data
        .into_iter()
        .map(|d| d.expect("every group produced"))
        .collect();
    let batch = fuse_batch(core, prompts, &tasks, &plan, data)?;
    let diagnostics = batch.diagnostics.clone();
    {
        let _span = tracing::info_span!("learn").entered();
        policy
            .learn(batch)
            .map_err(|e| Error::component(Component::Policy, e))?;
    }
    Ok(StepReport {
        diagnostics,
        executions,
        execution_failures: executed.failures,
        imagined: imagined_count,
        scored,
        twins: if config.pairs_twins() { scored } else { 0 },
        sampling,
    })
}

/// One full training step through the seams (see the module docs): plan,
/// execute the anchors, score them (imagining their twins first with
/// [`crate::AnchorScoring::Twin`]), imagine the rest, fuse and learn.
pub fn step<A, P, W, E>(
    core: &mut Core,
    adapter: &mut A,
    policy: &mut P,
    world_model: &mut W,
    executor: &mut E,
) -> Result<StepReport>
where
    A: Adapter,
    P: Policy<A>,
    W: WorldModel<A, P>,
    E: AnchorExecutor<A, P>,
{
    let plan = plan_step(core, adapter)?;
    let _span =
        tracing::info_span!("train_step", step = plan.step, mode = %plan.config.mode).entered();
    let round = run_round::<A, P, W, E>(plan, policy, world_model, executor)?;
    let round = refill::<A, P, W, E>(core, adapter, policy, world_model, executor, round)?;
    finish_step::<A, P>(core, policy, round)
}

/// What one round of a step executed and imagined, in group order: the
/// step's planned groups, or (merged) those and their refill groups.
#[derive(Debug, Clone)]
pub struct Round<Q, R> {
    /// The round's groups.
    pub plan: StepPlan<Q>,
    /// The anchor groups' episodes, in request order.
    pub executed: ExecutedAnchors<R>,
    /// The anchors' world-model scores (mixed modes).
    pub anchor_scores: Option<Vec<f64>>,
    /// The world-model groups' rollouts, in request order.
    pub imagined: Vec<Imagined<R>>,
    /// Dynamic sampling's counts (zero until [`refill`] ran).
    pub sampling: SamplingCounts,
}

impl<Q, R> Round<Q, R> {
    /// Each group's stream and values (anchors: rewards; world-model groups:
    /// scores mapped by `calibrate`), in group order.
    fn group_values(&self, calibrate: &dyn Fn(f64) -> f64) -> Vec<(Stream, Vec<f64>)> {
        let n = self.plan.config.group_size;
        let mut rewards = self.executed.episodes.iter().map(|(_, r)| *r);
        let mut scores = self.imagined.iter().map(|i| calibrate(i.score));
        self.plan
            .plan
            .is_anchor
            .iter()
            .map(|&anchor| {
                if anchor {
                    (Stream::Anchor, rewards.by_ref().take(n).collect())
                } else {
                    (Stream::WorldModel, scores.by_ref().take(n).collect())
                }
            })
            .collect()
    }

    /// Appends `other`'s groups after this round's.
    fn extend(&mut self, other: Round<Q, R>) {
        self.plan.prompts.extend(other.plan.prompts);
        self.plan.tasks.extend(other.plan.tasks);
        self.plan.plan.is_anchor.extend(other.plan.plan.is_anchor);
        self.plan
            .plan
            .inclusion_probability
            .extend(other.plan.plan.inclusion_probability);
        self.executed.episodes.extend(other.executed.episodes);
        self.executed.failures += other.executed.failures;
        if let (Some(mine), Some(theirs)) = (&mut self.anchor_scores, other.anchor_scores) {
            mine.extend(theirs);
        }
        self.imagined.extend(other.imagined);
    }
}

/// Phase 2 for one round: executes the anchor groups, scores them
/// (imagining their twins first with [`crate::AnchorScoring::Twin`]) and
/// imagines the world-model groups.
pub fn run_round<A, P, W, E>(
    plan: StepPlan<A::Prompt>,
    policy: &mut P,
    world_model: &mut W,
    executor: &mut E,
) -> Result<Round<A::Prompt, A::Rollout>>
where
    A: Adapter,
    P: Policy<A>,
    W: WorldModel<A, P>,
    E: AnchorExecutor<A, P>,
{
    let anchor_requests = plan.requests(true);
    let executed = execute_anchors::<A, P, E>(
        executor,
        policy,
        &anchor_requests,
        plan.config.seed,
        plan.step,
        plan.config.max_attempts,
    )?;
    let wm_requests = plan.requests(false);
    let score = |world_model: &mut W, twins| {
        score_anchors::<A, P, W>(
            world_model,
            &plan,
            &anchor_requests,
            &executed.episodes,
            twins,
        )
    };
    let (imagined, anchor_scores) = if plan.config.pairs_twins() {
        // Twins are imagined before the world model observes the real outcomes.
        let ImaginedWithTwins { groups, twins } =
            imagine_with_twins::<A, P, W>(world_model, policy, &plan, &wm_requests)?;
        (groups, score(world_model, twins)?)
    } else {
        // Scored (and observed) first: an adapter's world model may learn
        // from the anchors before it imagines.
        let scores = score(world_model, Vec::new())?;
        let groups = imagine_groups::<A, P, W>(world_model, policy, &wm_requests)?;
        (groups, scores)
    };
    drop(anchor_requests);
    drop(wm_requests);
    Ok(Round {
        plan,
        executed,
        anchor_scores,
        imagined,
        sampling: SamplingCounts::default(),
    })
}

/// Dynamic sampling ([`crate::sampling`]): while the step holds fewer than
/// `groups` informative groups and the cap of extra rollouts allows, runs a
/// round of refill groups, one per uninformative group of the last round,
/// of the same stream, on new prompts; returns the rounds merged, with the
/// counts. Without dynamic sampling it returns `round` with its counts.
pub fn refill<A, P, W, E>(
    core: &Core,
    adapter: &mut A,
    policy: &mut P,
    world_model: &mut W,
    executor: &mut E,
    mut round: Round<A::Prompt, A::Rollout>,
) -> Result<Round<A::Prompt, A::Rollout>>
where
    A: Adapter,
    P: Policy<A>,
    W: WorldModel<A, P>,
    E: AnchorExecutor<A, P>,
{
    let config = round.plan.config;
    let debias = config.mode.debiases();
    let calibrate = |s: f64| {
        if debias {
            core.calibrator().predict(s)
        } else {
            s
        }
    };
    let mut counts = SamplingCounts::default();
    let mut last = tally(&mut counts, round.group_values(&calibrate), 0);
    let cap = config.dynamic_sampling.max_extra_groups(config.group_size);
    let mut extra = 0;
    while counts.informative < config.groups && extra < cap && !last.is_empty() {
        let wanted = (config.groups - counts.informative)
            .min(cap - extra)
            .min(last.len());
        let offset = round.plan.prompts.len();
        let _span = tracing::info_span!("refill", groups = wanted).entered();
        let prompts: Vec<A::Prompt> = adapter
            .prompts(round.plan.step, offset + wanted)
            .map_err(|e| Error::component(Component::Adapter, e))?
            .into_iter()
            .skip(offset)
            .collect();
        if prompts.len() != wanted {
            return Err(Error::Contract {
                component: Component::Adapter,
                expected: offset + wanted,
                got: offset + prompts.len(),
            });
        }
        let streams = &last[..wanted];
        for &(_, stream) in streams {
            counts.refill(stream);
        }
        let plan = StepPlan {
            step: round.plan.step,
            config,
            tasks: prompts.iter().map(|p| adapter.task(p)).collect(),
            prompts,
            plan: AnchorPlan {
                is_anchor: streams.iter().map(|(_, s)| *s == Stream::Anchor).collect(),
                inclusion_probability: streams
                    .iter()
                    .map(|&(g, _)| round.plan.plan.inclusion_probability[g])
                    .collect(),
            },
            group_offset: offset,
        };
        let refilled = run_round::<A, P, W, E>(plan, policy, world_model, executor)?;
        extra += wanted;
        last = tally(&mut counts, refilled.group_values(&calibrate), offset);
        round.extend(refilled);
    }
    if counts.informative < config.groups && config.dynamic_sampling.enabled {
        tracing::debug!(
            informative = counts.informative,
            groups = config.groups,
            "dynamic sampling: cap of extra rollouts reached"
        );
    }
    round.sampling = counts;
    Ok(round)
}

/// Counts each group (numbered from `offset`) as informative or dropped;
/// returns the dropped ones with their streams.
fn tally(
    counts: &mut SamplingCounts,
    groups: Vec<(Stream, Vec<f64>)>,
    offset: usize,
) -> Vec<(usize, Stream)> {
    let mut dropped = Vec::new();
    for (g, (stream, values)) in groups.into_iter().enumerate() {
        if is_informative(&values) {
            counts.informative += 1;
        } else {
            counts.drop(stream);
            dropped.push((offset + g, stream));
        }
    }
    dropped
}
