//! The world model as the core's `WorldModel` seam for the VLA (for any
//! policy type that lends its VLA, [`AsVlaPolicy`]): imagined
//! closed-loop rollouts of the policy inside the latent dynamics, scores of
//! executed anchor episodes computed the same way, and the replay buffer the
//! model is refreshed on.
//!
//! **Imagination.** Each episode starts from the encoded observation of its
//! prompt's initial state (rendered once by a [`StartObservations`] source
//! and cached). Then, for up to `horizon_steps / chunk_len` chunks, in one
//! batched forward loop over every episode of the wave: the policy's action
//! head acts on the latent ([`VlaPolicy::act`]), a chunk is sampled with the
//! episode's own seeded RNG (as the simulator executor does, so the same
//! seed gives the same first chunk in both worlds), the dynamics predict the
//! next latent and proprioception, and the success head scores the new
//! boundary. An episode ends when P(goal reached) crosses
//! `imagine.success_threshold`; its score ŝ is the max over its boundaries.
//!
//! **Branched imagination** ([`VlaWorldModel::with_prefixes`]): each
//! imagined episode first executes a few chunks for real through a
//! [`PrefixExecutor`], and the loop above starts from the real state
//! reached; the episode's score is the model's success estimate from there,
//! and the learner gets the executed chunks only (or, with
//! [`VlaWorldModel::with_imagined_chunks_trained`], the imagined ones too).
//!
//! **Anchors are scored like imagined episodes**: their executed chunks are
//! replayed open-loop through the dynamics from their initial observation,
//! so each calibration pair carries the dynamics' error. The score on the
//! real latents (when the executor recorded observations) is kept as a
//! diagnostic ([`VlaWorldModel::last_real_scores`]). With the core's
//! `anchor_scoring = "twin"` the calibrator is paired instead with an
//! imagined twin of each anchor (same prompt and seed, so the same first
//! chunk): replays show the success head's error on real behaviour, twins
//! also show what the policy does inside the dynamics.
//!
//! **Non-finite values.** An imagined episode whose latent or score becomes
//! NaN or infinite is dropped, logged with its task, state and seed, and
//! imagined again with a derived seed (up to three attempts); it never
//! reaches the calibrator.
//!
//! **Shared encoder.** The world model lives in the policy's latent space and
//! keeps a frozen copy of its observation encoder; the encoder stays frozen
//! during post-training, and a policy with another encoder is refused.

use std::collections::HashMap;

use image::RgbImage;
use wmrl_core::rng::derive_seed;
use wmrl_core::seams::{EpisodeRequest, ExecutedEpisode, Execution, Imagined, WorldModel};
use wmrl_vla::VlaPolicy;
use wmrl_vla::rollout::{
    AsVlaPolicy, ChunkInput, EpisodeRecord, RecordedObservation, TaskPrompt, VlaAdapter,
};

use crate::closed_loop::{Dream, ImagineStart, dream_wave};
use crate::model::LatentWorldModel;
use crate::prefix::PrefixExecutor;
use crate::replay::ReplayBuffer;
use crate::train::{WmTrainer, score_episodes};
use crate::trajectory::{LatentTrajectory, encode_observations, from_record};
use crate::{Error, Result};

/// Attempts per imagined episode before a non-finite result is an error.
const MAX_ATTEMPTS: u32 = 3;

/// Where initial observations of prompts come from (the simulator renders
/// them; a robot deployment can serve recorded ones).
pub trait StartObservations: Send {
    /// The observation right after resetting task `task` to initial state `state`.
    fn start(&mut self, task: usize, state: usize) -> Result<RecordedObservation>;
}

/// Counters of the world-model stream.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WmStats {
    /// Imagined episodes returned.
    pub imagined: u64,
    /// Imagined chunks (dynamics steps) computed.
    pub imagined_chunks: u64,
    /// Imagined episodes dropped for non-finite values and imagined again.
    pub non_finite_dropped: u64,
    /// Executed episodes scored.
    pub scored: u64,
    /// Executed episodes not added to the replay buffer (no recorded observations).
    pub observe_skipped: u64,
    /// World-model refreshes.
    pub refreshes: u64,
    /// Imagined episodes whose first chunks were executed for real
    /// (branched imagination, [`VlaWorldModel::with_prefixes`]).
    #[serde(default)]
    pub prefix_episodes: u64,
    /// Control steps those prefixes executed: real environment steps.
    #[serde(default)]
    pub prefix_steps: u64,
    /// Seconds spent executing prefixes (simulator time, inside imagination).
    #[serde(default)]
    pub prefix_seconds: f64,
}

/// The VLA world model behind the core's `WorldModel` seam.
pub struct VlaWorldModel {
    model: LatentWorldModel,
    encoder: VlaPolicy,
    starts: Box<dyn StartObservations>,
    start_cache: HashMap<(usize, usize), (Vec<f32>, Vec<f32>)>,
    replay: ReplayBuffer,
    trainer: WmTrainer,
    last_real_scores: Vec<Option<f64>>,
    /// Anchors encoded from their recorded observations by the last `score`,
    /// reused by the `observe` that follows (the core calls them in turn).
    scored_anchors: Vec<LatentTrajectory>,
    /// Executes the first chunks of every imagined episode for real, when set.
    prefixes: Option<Box<dyn PrefixExecutor>>,
    /// Whether branched rollouts hand the learner their imagined
    /// continuation's chunks too ([`Self::with_imagined_chunks_trained`]).
    train_imagined_chunks: bool,
    /// Counters.
    pub stats: WmStats,
}

impl std::fmt::Debug for VlaWorldModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VlaWorldModel")
            .field("model", &self.model)
            .field("replay", &self.replay.len())
            .field("stats", &self.stats)
            .finish()
    }
}

/// Purpose tag of the seeds of re-imagined episodes (`wmrl_core::rng::derive_seed`).
const REIMAGINE: u64 = 0x1_3A61;

/// Purpose tag of the seeds of prefixes executed again after an execution error.
const PREFIX_RETRY: u64 = 0x9_E7A1;

/// Purpose tag of the seeds of continuations imagined after an executed prefix.
pub(crate) const BRANCH: u64 = 0x00B4_A7C0;

impl VlaWorldModel {
    /// Wraps a model with `encoder` (a policy whose observation encoder the
    /// model was trained on; only its encoder is used) and a start source.
    pub fn new(
        model: LatentWorldModel,
        encoder: VlaPolicy,
        starts: Box<dyn StartObservations>,
    ) -> Result<Self> {
        model.check_encoder(&encoder)?;
        let trainer = WmTrainer::new(&model)?;
        let replay = ReplayBuffer::new(model.config().replay.capacity);
        Ok(Self {
            model,
            encoder,
            starts,
            start_cache: HashMap::new(),
            replay,
            trainer,
            last_real_scores: Vec::new(),
            scored_anchors: Vec::new(),
            prefixes: None,
            train_imagined_chunks: false,
            stats: WmStats::default(),
        })
    }

    /// Branched imagination: every imagined episode first executes
    /// `prefixes.chunks()` chunks for real (recorded), and the world model
    /// imagines the rest from the real state reached. The episode's score is
    /// the model's success estimate from that state (1 when the prefix
    /// already reached the goal, 0 when it ran out of steps), and the
    /// rollout handed to the learner holds only the executed chunks: the
    /// imagined continuation estimates their value and is not trained on,
    /// so the policy cannot learn to exploit the model's dynamics
    /// ([`Self::with_imagined_chunks_trained`] trains on it too). The
    /// prefixes' control steps are real environment steps
    /// ([`WmStats::prefix_steps`]).
    ///
    /// Measured on the demo's world model (`wmrl wm eval --branch-depths`):
    /// imagined from the initial observation, scores correlate +0.05 with
    /// real outcomes within initial states; branched after 4 executed chunks,
    /// +0.74. Pair anchors with twins (the core's `anchor_scoring = "twin"`):
    /// a twin runs its own prefix, so it is scored exactly as imagined
    /// episodes are, while [`WorldModel::score`] replays anchors from their
    /// start.
    pub fn with_prefixes(mut self, prefixes: Box<dyn PrefixExecutor>) -> Self {
        self.prefixes = Some(prefixes);
        self
    }

    /// With branched imagination, also hand the learner the chunks the
    /// world model imagined after the prefix (their inputs are imagined
    /// latents), so the imagined stream trains the whole episode rather
    /// than its first `prefixes.chunks()` chunks; the continuation is then
    /// trained on, and the policy can learn the model's errors as well as
    /// the task. Off by default (see [`Self::with_prefixes`]).
    pub fn with_imagined_chunks_trained(mut self, train: bool) -> Self {
        self.train_imagined_chunks = train;
        self
    }

    /// Chunks executed before imagination (0 without prefixes).
    pub fn prefix_chunks(&self) -> usize {
        self.prefixes.as_ref().map_or(0, |p| p.chunks())
    }

    /// The networks.
    pub fn model(&self) -> &LatentWorldModel {
        &self.model
    }

    /// Mutable networks (e.g. imagination settings).
    pub fn model_mut(&mut self) -> &mut LatentWorldModel {
        &mut self.model
    }

    /// The replay buffer.
    pub fn replay(&self) -> &ReplayBuffer {
        &self.replay
    }

    /// The replay buffer, to restore a saved one.
    pub fn replay_mut(&mut self) -> &mut ReplayBuffer {
        &mut self.replay
    }

    /// The refresh trainer (optimiser and batch sampler).
    pub fn trainer(&self) -> &WmTrainer {
        &self.trainer
    }

    /// The refresh trainer, to restore a saved state.
    pub fn trainer_mut(&mut self) -> &mut WmTrainer {
        &mut self.trainer
    }

    /// Adds episodes (demonstrations, earlier rollouts) to the replay buffer.
    pub fn extend_replay(&mut self, episodes: impl IntoIterator<Item = LatentTrajectory>) {
        let dims = self.model.dims();
        for e in episodes {
            self.replay.push(e, &dims);
        }
    }

    /// Scores on the real latents of the last scored anchors (`None` where
    /// the executor did not record observations): a diagnostic.
    pub fn last_real_scores(&self) -> &[Option<f64>] {
        &self.last_real_scores
    }

    /// Trains `steps` optimiser steps on the replay buffer; returns the mean total loss.
    pub fn refresh(&mut self, steps: usize) -> Result<Option<f64>> {
        let _span = tracing::info_span!("world_model_refresh", steps, episodes = self.replay.len())
            .entered();
        let episodes: Vec<&LatentTrajectory> = self.replay.episodes().collect();
        if episodes.is_empty() {
            return Ok(None);
        }
        let (mut sum, mut n) = (0.0, 0usize);
        for _ in 0..steps {
            if let Some(l) = self.trainer.step(&self.model, &episodes)? {
                sum += l.total;
                n += 1;
            }
        }
        self.stats.refreshes += 1;
        Ok((n > 0).then(|| sum / n as f64))
    }

    /// Refreshes when `iteration` is a multiple of `replay.refresh_every`.
    pub fn maybe_refresh(&mut self, iteration: u64) -> Result<Option<f64>> {
        let r = &self.model.config().replay;
        if iteration > 0 && iteration.is_multiple_of(r.refresh_every) {
            let steps = r.refresh_steps;
            return self.refresh(steps);
        }
        Ok(None)
    }

    /// Encoded initial observation `(latent, raw proprio)` of (task, state), cached.
    fn start_latent(&mut self, task: usize, state: usize) -> Result<(Vec<f32>, Vec<f32>)> {
        if let Some(hit) = self.start_cache.get(&(task, state)) {
            return Ok(hit.clone());
        }
        let obs = self.starts.start(task, state)?;
        let latent = encode_observations(&self.encoder, &[&obs.agent_view], &[&obs.wrist_view])?;
        let entry = (latent, obs.proprio.clone());
        self.start_cache.insert((task, state), entry.clone());
        Ok(entry)
    }

    /// Imagines every start from chunk boundary `first_chunk`, in waves of
    /// `imagine.batch`; an episode whose latent or score goes non-finite is
    /// dropped, logged and imagined again with a derived seed (up to
    /// [`MAX_ATTEMPTS`], then an error naming it). One dream per start, in
    /// order.
    fn dream_with_retries(
        &mut self,
        policy: &VlaPolicy,
        starts: &[ImagineStart<'_>],
        first_chunk: usize,
    ) -> Result<Vec<Dream>> {
        let batch = self.model.config().imagine.batch.max(1);
        let mut out: Vec<Option<Dream>> = (0..starts.len()).map(|_| None).collect();
        let mut pending: Vec<(usize, u64)> = starts
            .iter()
            .enumerate()
            .map(|(i, s)| (i, s.seed))
            .collect();
        for attempt in 0..MAX_ATTEMPTS {
            let mut retry = Vec::new();
            for wave in pending.chunks(batch) {
                let wave_starts: Vec<ImagineStart<'_>> = wave
                    .iter()
                    .map(|&(i, seed)| ImagineStart {
                        seed,
                        ..starts[i].clone()
                    })
                    .collect();
                let (dreams, chunks) = dream_wave(&self.model, policy, &wave_starts, first_chunk)?;
                self.stats.imagined_chunks += chunks;
                for (&(i, seed), dream) in wave.iter().zip(dreams) {
                    let Some(what) = dream.bad.clone() else {
                        out[i] = Some(dream);
                        continue;
                    };
                    let s = &starts[i];
                    self.stats.non_finite_dropped += 1;
                    if attempt + 1 == MAX_ATTEMPTS {
                        return Err(Error::NonFinite {
                            task: s.task_index,
                            state: s.state_index,
                            seed,
                            what,
                            attempts: MAX_ATTEMPTS,
                        });
                    }
                    tracing::warn!(task = s.task_index, state = s.state_index, first_chunk, seed, %what, attempt,
                        "imagined episode dropped: non-finite values; imagining it again with a derived seed");
                    retry.push((i, derive_seed(seed, &[REIMAGINE, u64::from(attempt + 1)])));
                }
            }
            if retry.is_empty() {
                break;
            }
            pending = retry;
        }
        Ok(out
            .into_iter()
            .map(|d| d.expect("every episode imagined"))
            .collect())
    }

    /// Imagines one rollout per `(prompt, seed)`; episodes that go
    /// non-finite are dropped, logged and imagined again with a derived seed.
    pub fn imagine_prompts(
        &mut self,
        policy: &VlaPolicy,
        requests: &[(&TaskPrompt, u64)],
    ) -> Result<Vec<Imagined<EpisodeRecord>>> {
        self.model.check_encoder(policy)?;
        let mut starts = Vec::with_capacity(requests.len());
        for (prompt, seed) in requests {
            self.model.check_task(prompt.task_index)?;
            let (latent, proprio) = self.start_latent(prompt.task_index, prompt.state_index)?;
            starts.push(ImagineStart {
                task_index: prompt.task_index,
                state_index: prompt.state_index,
                instruction: &prompt.instruction,
                latent,
                proprio,
                seed: *seed,
            });
        }
        let dreams = self.dream_with_retries(policy, &starts, 0)?;
        self.stats.imagined += requests.len() as u64;
        Ok(dreams
            .into_iter()
            .map(|d| Imagined {
                score: d.score,
                rollout: d.record,
            })
            .collect())
    }

    /// Branched imagination ([`Self::with_prefixes`]): executes each
    /// request's prefix, then imagines the rest from the real state reached.
    fn imagine_branched(
        &mut self,
        policy: &VlaPolicy,
        episodes: &[EpisodeRequest<'_, TaskPrompt>],
    ) -> Result<Vec<Imagined<EpisodeRecord>>> {
        self.model.check_encoder(policy)?;
        let prefixes = self.prefixes.as_mut().expect("called with prefixes");
        let k = prefixes.chunks();
        let started = std::time::Instant::now();
        // Execution failures are re-run with a fresh seed (as the core
        // re-queues anchors: a simulator fails the same way on the same seed).
        let mut records: Vec<Option<EpisodeRecord>> = (0..episodes.len()).map(|_| None).collect();
        let mut pending: Vec<usize> = (0..episodes.len()).collect();
        for attempt in 0..MAX_ATTEMPTS {
            let requests: Vec<EpisodeRequest<'_, TaskPrompt>> = pending
                .iter()
                .map(|&i| EpisodeRequest {
                    attempt,
                    seed: match attempt {
                        0 => episodes[i].seed,
                        a => derive_seed(episodes[i].seed, &[PREFIX_RETRY, u64::from(a)]),
                    },
                    ..episodes[i]
                })
                .collect();
            let results = prefixes.execute(policy, &requests)?;
            let mut failed = Vec::new();
            for (i, result) in pending.iter().zip(results) {
                match result {
                    Execution::Completed { rollout, .. } => records[*i] = Some(rollout),
                    Execution::Failed { reason } => {
                        let p = episodes[*i].prompt;
                        if attempt + 1 == MAX_ATTEMPTS {
                            return Err(Error::Prefix {
                                task: p.task_index,
                                state: p.state_index,
                                attempts: MAX_ATTEMPTS,
                                reason,
                            });
                        }
                        tracing::warn!(task = p.task_index, state = p.state_index, %reason, attempt,
                            "prefix execution failed; running it again");
                        failed.push(*i);
                    }
                }
            }
            pending = failed;
            if pending.is_empty() {
                break;
            }
        }
        let mut records: Vec<EpisodeRecord> = records
            .into_iter()
            .map(|r| r.expect("every prefix executed"))
            .collect();
        self.stats.prefix_seconds += started.elapsed().as_secs_f64();
        self.stats.prefix_episodes += records.len() as u64;
        self.stats.prefix_steps += records.iter().map(|r| r.steps as u64).sum::<u64>();
        // The learner's inputs: every recorded observation but the last, encoded.
        let dims = self.model.dims();
        let mut finals = Vec::with_capacity(records.len());
        for record in &mut records {
            let obs = std::mem::take(&mut record.observations);
            if obs.len() != record.chunks.len() + 1 {
                return Err(Error::mismatch(
                    format!(
                        "recorded observations of the prefix of task {} state {}",
                        record.task_index, record.state_index
                    ),
                    record.chunks.len() + 1,
                    obs.len(),
                ));
            }
            let agent: Vec<&RgbImage> = obs.iter().map(|o| &o.agent_view).collect();
            let wrist: Vec<&RgbImage> = obs.iter().map(|o| &o.wrist_view).collect();
            let latents = encode_observations(&self.encoder, &agent, &wrist)?;
            record.inputs = obs[..record.chunks.len()]
                .iter()
                .zip(latents.chunks(dims.latent))
                .map(|(o, z)| ChunkInput {
                    latent: z.to_vec(),
                    proprio: o.proprio.clone(),
                })
                .collect();
            let last = obs.len() - 1;
            finals.push((
                latents[last * dims.latent..(last + 1) * dims.latent].to_vec(),
                obs[last].proprio.clone(),
            ));
        }
        // Imagine from the real state after k chunks' worth of control steps
        // where the prefix is still running (an executor that re-plans every
        // few actions records more, shorter chunks over the same steps).
        let mut scores: Vec<f64> = records
            .iter()
            .map(|r| if r.success { 1.0 } else { 0.0 })
            .collect();
        let prefix_steps = k * policy.config().action.chunk_len as usize;
        let running: Vec<usize> = (0..records.len())
            .filter(|&i| !records[i].success && records[i].steps == prefix_steps)
            .collect();
        let starts: Vec<ImagineStart<'_>> = running
            .iter()
            .map(|&i| ImagineStart {
                task_index: records[i].task_index,
                state_index: records[i].state_index,
                instruction: &episodes[i].prompt.instruction,
                latent: finals[i].0.clone(),
                proprio: finals[i].1.clone(),
                seed: derive_seed(episodes[i].seed, &[BRANCH]),
            })
            .collect();
        let dreams = self.dream_with_retries(policy, &starts, k)?;
        for (&i, dream) in running.iter().zip(dreams) {
            scores[i] = dream.score;
            if self.train_imagined_chunks {
                let record = &mut records[i];
                record.chunks.extend(dream.record.chunks);
                record.inputs.extend(dream.record.inputs);
            }
        }
        self.stats.imagined += episodes.len() as u64;
        Ok(records
            .into_iter()
            .zip(scores)
            .map(|(rollout, score)| Imagined { rollout, score })
            .collect())
    }

    /// An executed record as a latent trajectory: from its recorded
    /// observations, or (without them) from its initial state's observation
    /// repeated, which is enough for the open-loop replay score.
    fn anchor_trajectory(&mut self, record: &EpisodeRecord) -> Result<(LatentTrajectory, bool)> {
        if let Some(t) = from_record(&self.encoder, record, 0, "anchor")? {
            return Ok((t, true));
        }
        if record.chunks.is_empty() {
            return Err(Error::Empty {
                what: format!(
                    "executed episode of task {} state {}",
                    record.task_index, record.state_index
                ),
            });
        }
        let (z, p) = self.start_latent(record.task_index, record.state_index)?;
        let k = record.chunks.len();
        Ok((
            LatentTrajectory {
                task_index: record.task_index,
                state_index: record.state_index,
                success: record.success,
                seed: 0,
                source: "anchor".into(),
                steps: record.steps,
                latents: z.repeat(k + 1),
                proprio: p.repeat(k + 1),
                actions: record
                    .chunks
                    .iter()
                    .flat_map(|c| c.actions.iter().copied())
                    .collect(),
            },
            false,
        ))
    }
}

impl<P: AsVlaPolicy + ?Sized> WorldModel<VlaAdapter, P> for VlaWorldModel {
    type Error = Error;

    fn imagine(
        &mut self,
        policy: &P,
        episodes: &[EpisodeRequest<'_, TaskPrompt>],
    ) -> Result<Vec<Imagined<EpisodeRecord>>> {
        let _span = tracing::info_span!("world_model_imagine", episodes = episodes.len()).entered();
        if self.prefixes.is_some() {
            return self.imagine_branched(policy.as_vla(), episodes);
        }
        let requests: Vec<(&TaskPrompt, u64)> =
            episodes.iter().map(|e| (e.prompt, e.seed)).collect();
        self.imagine_prompts(policy.as_vla(), &requests)
    }

    fn score(
        &mut self,
        episodes: &[ExecutedEpisode<'_, TaskPrompt, EpisodeRecord>],
    ) -> Result<Vec<f64>> {
        let _span = tracing::info_span!("world_model_score", episodes = episodes.len()).entered();
        let mut trajectories = Vec::with_capacity(episodes.len());
        let mut real = Vec::with_capacity(episodes.len());
        for e in episodes {
            let (t, has_real) = self.anchor_trajectory(e.rollout)?;
            trajectories.push(t);
            real.push(has_real);
        }
        let refs: Vec<&LatentTrajectory> = trajectories.iter().collect();
        let scores = score_episodes(&self.model, &refs)?;
        self.last_real_scores = scores
            .iter()
            .zip(&real)
            .map(|((_, r), has)| has.then_some(*r))
            .collect();
        self.stats.scored += episodes.len() as u64;
        let mut out = Vec::with_capacity(scores.len());
        for ((s, _), t) in scores.into_iter().zip(&trajectories) {
            if !s.is_finite() {
                return Err(Error::NonFinite {
                    task: t.task_index,
                    state: t.state_index,
                    seed: t.seed,
                    what: "anchor score".into(),
                    attempts: 1,
                });
            }
            out.push(s);
        }
        self.scored_anchors = trajectories
            .into_iter()
            .zip(real)
            .filter_map(|(t, has_real)| has_real.then_some(t))
            .collect();
        Ok(out)
    }

    fn observe(
        &mut self,
        episodes: &[ExecutedEpisode<'_, TaskPrompt, EpisodeRecord>],
    ) -> Result<()> {
        let dims = self.model.dims();
        let mut encoded = std::mem::take(&mut self.scored_anchors);
        for e in episodes {
            let r = e.rollout;
            let cached = encoded.iter().position(|t| {
                (t.task_index, t.state_index, t.steps) == (r.task_index, r.state_index, r.steps)
                    && t.actions
                        .iter()
                        .eq(r.chunks.iter().flat_map(|c| c.actions.iter()))
            });
            let trajectory = match cached {
                Some(i) => Some(encoded.swap_remove(i)),
                None => from_record(&self.encoder, r, 0, "anchor")?,
            };
            match trajectory {
                Some(mut t) => {
                    t.success = e.reward > 0.5;
                    self.replay.push(t, &dims);
                }
                None => self.stats.observe_skipped += 1,
            }
        }
        Ok(())
    }
}

/// Initial observations rendered by the simulator.
#[cfg(feature = "sim")]
pub struct SimStarts {
    env: wmrl_sim::SimEnv,
}

#[cfg(feature = "sim")]
impl SimStarts {
    /// A simulator with `config` (cameras must match the executor's).
    pub fn new(config: wmrl_sim::EnvConfig) -> Self {
        Self {
            env: wmrl_sim::SimEnv::new(config),
        }
    }
}

#[cfg(feature = "sim")]
impl StartObservations for SimStarts {
    fn start(&mut self, task: usize, state: usize) -> Result<RecordedObservation> {
        let obs = self.env.reset(task, state).map_err(|e| Error::Start {
            task,
            state,
            message: e.to_string(),
        })?;
        Ok(RecordedObservation {
            agent_view: obs.agent_view,
            wrist_view: obs.wrist_view,
            proprio: obs.proprio.to_vec(),
        })
    }
}
