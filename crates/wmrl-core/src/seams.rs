//! The seams: four traits a domain implements to train through the core.
//!
//! The core never sees an observation, an action, a tensor or a file: it
//! sees prompts, rollouts (opaque associated types), real rewards and
//! world-model scores. Implementations live in the crates above:
//!
//! | trait | VLA (LIBERO-style) | AutoResearch | synthetic benchmark |
//! |---|---|---|---|
//! | [`Adapter`] | task × initial state; episode | ML task; solution text | prompt index; action |
//! | [`Policy`] | tch VLA, clipped-surrogate GRPO | tch plan model or LLM export | softmax, exact gradient |
//! | [`AnchorExecutor`] | simulator, or robots over zenoh | sandboxed `python3` | true reward table |
//! | [`WorldModel`] | latent dynamics + success head | text model or LLM judge | biased, noisy score |
//!
//! # Closed-loop and open-loop domains share one shape
//! Both the executor and the world model receive the **policy** and a batch
//! of episode requests, and return finished rollouts:
//!
//! - A **VLA acts in closed loop**: each action depends on the last
//!   observation. The anchor executor *runs the policy* against the real
//!   environment (simulator or robot) and returns rollouts with real
//!   rewards; the world model *imagines* rollouts by running the policy
//!   inside the learned dynamics and returns them with scores ŝ. It must
//!   also *score* executed anchor rollouts the same way (replaying their
//!   actions through the model), so that each calibration pair carries the
//!   dynamics' error too.
//! - In **AutoResearch the policy samples a whole solution first**; the
//!   executor samples from the policy and runs the text in the sandbox; the
//!   world model samples and scores the text. "Imagining" is sampling plus
//!   scoring.
//!
//! Rollouts are produced inside the executor and world model, seeded by the
//! request's `seed`, so a step is reproducible whatever runs where. The
//! policy is lent as `&P` while rollouts are produced (no parameter change
//! mid-step; `P: Sync` lets an implementation fan out over threads) and as
//! `&mut P` only to learn. Each trait is generic over the policy type `P`,
//! so an executor states what it needs from a policy with its own bound
//! (e.g. `impl<P: ClosedLoopActor> AnchorExecutor<Vla, P> for SimPool`):
//! a zenoh robot pool, a local simulator and a Python sandbox are then
//! interchangeable wherever an `AnchorExecutor` is expected.
//!
//! # Execution errors are not task failures
//! An episode that ran to its end returns [`Execution::Completed`] with
//! its reward, whether the task succeeded or not. An episode that could not
//! be run properly (a robot vanished mid-episode, the simulation went
//! unstable, the sandbox host failed) returns [`Execution::Failed`]: the
//! driver re-queues it with a fresh seed, up to `max_attempts`, and never
//! records it as a failure. A trait's `Err` is for failures of the whole
//! component (pool gone, model crashed) and stops the step.
//!
//! Everything is synchronous: an implementation may use threads, rayon or a
//! runtime internally, but the seams block until results are in.

use crate::advantage::Stream;
use crate::diagnostics::StepDiagnostics;
use crate::fuse::SampleOut;
use crate::schedule::TaskId;

/// The domain: what a prompt and a rollout are, and where prompts come from.
pub trait Adapter {
    /// What a group is conditioned on (task × initial state; an ML task).
    type Prompt: Clone;
    /// One finished episode or solution, with whatever the learner needs
    /// (actions, log-probabilities, text).
    type Rollout;
    /// The adapter's own error.
    type Error: std::error::Error + Send + Sync + 'static;

    /// The `count` prompts of training step `step`, deterministic for the
    /// adapter's seed (fixed initial states, a task curriculum, …).
    fn prompts(&mut self, step: u64, count: usize) -> Result<Vec<Self::Prompt>, Self::Error>;

    /// The task of a prompt: the stratum anchors are balanced over.
    fn task(&self, prompt: &Self::Prompt) -> TaskId;
}

/// One episode to produce: rollout `sample` of group `group`.
#[derive(Debug)]
pub struct EpisodeRequest<'a, Q> {
    /// Group index within the step.
    pub group: usize,
    /// Rollout index within the group.
    pub sample: usize,
    /// The group's prompt.
    pub prompt: &'a Q,
    /// Seed for every random choice of this episode (policy sampling,
    /// environment noise, imagination noise).
    pub seed: u64,
    /// 0 on the first try, then 1, 2, … when re-queued after an execution error.
    pub attempt: u32,
}

impl<Q> Clone for EpisodeRequest<'_, Q> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<Q> Copy for EpisodeRequest<'_, Q> {}

/// The outcome of executing one episode for real.
#[derive(Debug, Clone, PartialEq)]
pub enum Execution<R> {
    /// The episode ran to its end; `reward` is its real reward (a task
    /// failure is a completed episode with a low reward).
    Completed {
        /// The executed rollout.
        rollout: R,
        /// Its real reward (finite).
        reward: f64,
    },
    /// The episode could not be run; it is re-queued, never scored as a failure.
    Failed {
        /// Why, for the log (e.g. "robot panda-2 left mid-episode").
        reason: String,
    },
}

/// An imagined rollout and its world-model score.
#[derive(Debug, Clone, PartialEq)]
pub struct Imagined<R> {
    /// The rollout produced inside the world model.
    pub rollout: R,
    /// Its score ŝ (finite; same scale as scores of executed rollouts).
    pub score: f64,
}

/// An executed rollout to score, or to learn from.
#[derive(Debug)]
pub struct ExecutedEpisode<'a, Q, R> {
    /// Group index within the step.
    pub group: usize,
    /// Rollout index within the group.
    pub sample: usize,
    /// The group's prompt.
    pub prompt: &'a Q,
    /// The executed rollout.
    pub rollout: &'a R,
    /// Its real reward.
    pub reward: f64,
}

impl<Q, R> Clone for ExecutedEpisode<'_, Q, R> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<Q, R> Copy for ExecutedEpisode<'_, Q, R> {}

/// Runs episodes for real: the anchor stream.
pub trait AnchorExecutor<A: Adapter, P: ?Sized> {
    /// The executor's own error (for failures of the whole executor).
    type Error: std::error::Error + Send + Sync + 'static;

    /// Produces one [`Execution`] per request, in request order, running
    /// (closed loop) or sampling (open loop) `policy` as the domain requires.
    fn execute(
        &mut self,
        policy: &P,
        episodes: &[EpisodeRequest<'_, A::Prompt>],
    ) -> Result<Vec<Execution<A::Rollout>>, Self::Error>;
}

/// The learned world model: the cheap stream.
pub trait WorldModel<A: Adapter, P: ?Sized> {
    /// The world model's own error.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Produces one imagined rollout per request, in request order, with its score.
    fn imagine(
        &mut self,
        policy: &P,
        episodes: &[EpisodeRequest<'_, A::Prompt>],
    ) -> Result<Vec<Imagined<A::Rollout>>, Self::Error>;

    /// Scores executed anchor rollouts exactly as imagined ones are scored
    /// (the real reward is in the request but must not be used). One score
    /// per episode, in order.
    fn score(
        &mut self,
        episodes: &[ExecutedEpisode<'_, A::Prompt, A::Rollout>],
    ) -> Result<Vec<f64>, Self::Error>;

    /// Receives executed episodes with their real rewards after they were
    /// scored (e.g. for a replay buffer the model is refreshed on). Default: ignore.
    fn observe(
        &mut self,
        episodes: &[ExecutedEpisode<'_, A::Prompt, A::Rollout>],
    ) -> Result<(), Self::Error> {
        let _ = episodes;
        Ok(())
    }
}

/// One rollout handed to the learner with its learning signal.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchSample<R> {
    /// Group, stream, reward used, advantage and loss weight.
    pub signal: SampleOut,
    /// The rollout itself.
    pub rollout: R,
}

impl<R> BatchSample<R> {
    /// The sample's stream.
    pub fn stream(&self) -> Stream {
        self.signal.stream
    }
}

/// A step's training batch.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch<Q, R> {
    /// Step index.
    pub step: u64,
    /// The prompt of each group.
    pub prompts: Vec<Q>,
    /// Every rollout of the step, group by group.
    pub samples: Vec<BatchSample<R>>,
    /// The core's diagnostics of the step.
    pub diagnostics: StepDiagnostics,
}

/// The policy being post-trained; it is also the learner.
pub trait Policy<A: Adapter> {
    /// The policy's own error.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Takes one policy-gradient step: minimise Σᵢ loss_weightᵢ · surrogateᵢ
    /// with surrogateᵢ the (clipped) policy-gradient loss of rollout i at
    /// advantage Aᵢ. Loss weights already carry the stream weights.
    fn learn(&mut self, batch: Batch<A::Prompt, A::Rollout>) -> Result<(), Self::Error>;
}
