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

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tch::{Device, Kind, Tensor};
use wmrl_core::rng::derive_seed;
use wmrl_core::seams::{EpisodeRequest, ExecutedEpisode, Imagined, WorldModel};
use wmrl_vla::inference::ActionChunk;
use wmrl_vla::rollout::{
    AsVlaPolicy, ChunkInput, EpisodeRecord, RecordedObservation, TaskPrompt, VlaAdapter,
};
use wmrl_vla::{ActionDistribution, Decoding, VlaPolicy};

use crate::model::LatentWorldModel;
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

/// One imagined episode in progress.
struct Dream {
    record: EpisodeRecord,
    rng: ChaCha8Rng,
    score: f64,
    done: bool,
    bad: Option<String>,
}

impl VlaWorldModel {
    /// Wraps a model with `encoder` (a policy whose observation encoder the
    /// model was trained on; only its encoder is used) and a start source.
    pub fn new(
        model: LatentWorldModel,
        encoder: VlaPolicy,
        starts: Box<dyn StartObservations>,
    ) -> Result<Self> {
        let found = encoder.encoder_fingerprint();
        if found != model.encoder() {
            return Err(Error::EncoderMismatch {
                expected: model.encoder().into(),
                found,
            });
        }
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
            stats: WmStats::default(),
        })
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

    /// Imagines one wave of episodes (at most `imagine.batch`) in one batched loop.
    fn imagine_wave(
        &mut self,
        policy: &VlaPolicy,
        wave: &[(&TaskPrompt, u64)],
    ) -> Result<Vec<Dream>> {
        let device = self.model.device();
        let dims = self.model.dims();
        let b = wave.len() as i64;
        let (mut z0, mut p0) = (Vec::new(), Vec::new());
        for (prompt, _) in wave {
            self.model.check_task(prompt.task_index)?;
            let (z, p) = self.start_latent(prompt.task_index, prompt.state_index)?;
            z0.extend(z);
            p0.extend(p);
        }
        let imagine = self.model.config().imagine.clone();
        let horizon = self.model.horizon_chunks();
        let action = &policy.config().action;
        let (chunk_len, action_dim) = (action.chunk_len, action.action_dim);
        let binning = action.binning;
        let _guard = tch::no_grad_guard();
        // Instruction embeddings: one per distinct instruction.
        let mut distinct: Vec<&str> = Vec::new();
        let rows: Vec<i64> = wave
            .iter()
            .map(|(p, _)| {
                let pos = distinct.iter().position(|d| *d == p.instruction);
                pos.unwrap_or_else(|| {
                    distinct.push(&p.instruction);
                    distinct.len() - 1
                }) as i64
            })
            .collect();
        let mut instr = policy
            .encode_instructions(&policy.tokenize(&distinct))
            .index_select(0, &Tensor::from_slice(&rows).to_device(policy.device()));
        let mut tasks = Tensor::from_slice(
            &wave
                .iter()
                .map(|(p, _)| p.task_index as i64)
                .collect::<Vec<_>>(),
        )
        .to_device(device);
        let mut z = Tensor::from_slice(&z0)
            .view([b, dims.latent as i64])
            .to_device(device);
        let mut pn = self.model.normalise_proprio(
            &Tensor::from_slice(&p0)
                .view([b, dims.proprio as i64])
                .to_device(device),
        );
        let zero_action = Tensor::zeros([b, dims.chunk() as i64], (Kind::Float, device));
        let first = self
            .model
            .success_logit(
                &z,
                &pn,
                &zero_action,
                &tasks,
                &Tensor::zeros([b], (Kind::Float, device)),
            )
            .sigmoid();
        let first: Vec<f64> = Vec::try_from(first.to_device(Device::Cpu).to_kind(Kind::Double))
            .map_err(Error::torch("reading scores"))?;
        let mut dreams: Vec<Dream> = wave
            .iter()
            .zip(first)
            .map(|((prompt, seed), s)| Dream {
                record: EpisodeRecord {
                    task_index: prompt.task_index,
                    state_index: prompt.state_index,
                    ..Default::default()
                },
                rng: ChaCha8Rng::seed_from_u64(*seed),
                score: if s.is_finite() { s } else { 0.0 },
                done: false,
                bad: (!s.is_finite()).then(|| "initial score".to_string()),
            })
            .collect();
        let per = (chunk_len * action_dim) as usize;
        let (low, width) = (f64::from(binning.low), f64::from(binning.width()));
        // Rows still imagined; finished episodes leave the batch.
        let mut live: Vec<usize> = (0..dreams.len()).collect();
        for t in 0..horizon {
            let keep: Vec<i64> = live
                .iter()
                .enumerate()
                .filter(|(_, d)| !dreams[**d].done && dreams[**d].bad.is_none())
                .map(|(row, _)| row as i64)
                .collect();
            if keep.is_empty() {
                break;
            }
            if keep.len() < live.len() {
                let rows = Tensor::from_slice(&keep).to_device(device);
                z = z.index_select(0, &rows);
                pn = pn.index_select(0, &rows);
                tasks = tasks.index_select(0, &rows);
                instr = instr.index_select(0, &rows.to_device(instr.device()));
                live = keep.iter().map(|&row| live[row as usize]).collect();
            }
            let b = live.len() as i64;
            let raw_p = self.model.raw_proprio(&pn);
            // What the policy acts on, kept for the learner.
            let z_rows: Vec<f32> = Vec::try_from(z.to_device(Device::Cpu).flatten(0, -1))
                .map_err(Error::torch("reading latents"))?;
            let p_rows: Vec<f32> = Vec::try_from(raw_p.to_device(Device::Cpu).flatten(0, -1))
                .map_err(Error::torch("reading proprioception"))?;
            let logits = policy.act(
                &z.to_device(policy.device()),
                &raw_p.to_device(policy.device()),
                &instr,
            );
            let uniforms: Vec<f32> = live
                .iter()
                .flat_map(|&d| {
                    let rng = &mut dreams[d].rng;
                    (0..per).map(|_| rng.random::<f32>()).collect::<Vec<_>>()
                })
                .collect();
            let uniforms = Tensor::from_slice(&uniforms)
                .view([b, chunk_len, action_dim])
                .to_device(logits.device());
            let (tokens, log_probs) = ActionDistribution::decode_with_uniforms(
                &logits,
                Decoding::Sample {
                    temperature: imagine.temperature,
                },
                &uniforms,
            );
            let actions = (tokens.to_kind(Kind::Float) + 0.5) * width + low;
            let actions = actions.view([b, per as i64]).to_device(device);
            (z, pn) = self.model.step(&z, &pn, &actions);
            let step_t = Tensor::full([b], (t + 1) as f64, (Kind::Float, device));
            let prob = self
                .model
                .success_logit(&z, &pn, &actions, &tasks, &step_t)
                .sigmoid();
            let finite_rows = z
                .isfinite()
                .all_dim(1, false)
                .logical_and(&pn.isfinite().all_dim(1, false));
            let prob: Vec<f64> = Vec::try_from(prob.to_device(Device::Cpu).to_kind(Kind::Double))
                .map_err(Error::torch("reading scores"))?;
            let finite_rows: Vec<bool> = Vec::try_from(finite_rows.to_device(Device::Cpu))
                .map_err(Error::torch("reading finiteness"))?;
            let tokens: Vec<i64> = Vec::try_from(
                tokens
                    .to_device(Device::Cpu)
                    .to_kind(Kind::Int64)
                    .flatten(0, -1),
            )
            .map_err(Error::torch("reading tokens"))?;
            let log_probs: Vec<f32> =
                Vec::try_from(log_probs.to_device(Device::Cpu).to_kind(Kind::Float))
                    .map_err(Error::torch("reading log-probabilities"))?;
            self.stats.imagined_chunks += live.len() as u64;
            for (i, &d) in live.iter().enumerate() {
                let dream = &mut dreams[d];
                if !finite_rows[i] || !prob[i].is_finite() || !log_probs[i].is_finite() {
                    dream.bad = Some(format!("latent or score at chunk {}", t + 1));
                    continue;
                }
                let toks = tokens[i * per..(i + 1) * per].to_vec();
                dream.record.inputs.push(ChunkInput {
                    latent: z_rows[i * dims.latent..(i + 1) * dims.latent].to_vec(),
                    proprio: p_rows[i * dims.proprio..(i + 1) * dims.proprio].to_vec(),
                });
                dream.record.chunks.push(ActionChunk {
                    actions: binning.decode_all(&toks),
                    tokens: toks,
                    chunk_len: chunk_len as usize,
                    action_dim: action_dim as usize,
                    log_prob: log_probs[i],
                });
                dream.record.steps += chunk_len as usize;
                dream.score = dream.score.max(prob[i]);
                if prob[i] >= imagine.success_threshold {
                    dream.done = true;
                }
            }
        }
        for dream in &mut dreams {
            dream.record.success = dream.score >= imagine.success_threshold;
        }
        Ok(dreams)
    }

    /// Imagines one rollout per `(prompt, seed)`; episodes that go
    /// non-finite are dropped, logged and imagined again with a derived seed.
    pub fn imagine_prompts(
        &mut self,
        policy: &VlaPolicy,
        requests: &[(&TaskPrompt, u64)],
    ) -> Result<Vec<Imagined<EpisodeRecord>>> {
        let found = policy.encoder_fingerprint();
        if found != self.model.encoder() {
            return Err(Error::EncoderMismatch {
                expected: self.model.encoder().into(),
                found,
            });
        }
        let batch = self.model.config().imagine.batch;
        let mut out: Vec<Option<Imagined<EpisodeRecord>>> =
            (0..requests.len()).map(|_| None).collect();
        let mut pending: Vec<(usize, u64)> = requests
            .iter()
            .enumerate()
            .map(|(i, (_, s))| (i, *s))
            .collect();
        for attempt in 0..MAX_ATTEMPTS {
            let mut retry = Vec::new();
            for wave in pending.chunks(batch) {
                let items: Vec<(&TaskPrompt, u64)> =
                    wave.iter().map(|(i, s)| (requests[*i].0, *s)).collect();
                let dreams = self.imagine_wave(policy, &items)?;
                for ((index, seed), dream) in wave.iter().zip(dreams) {
                    if let Some(what) = dream.bad {
                        let p = requests[*index].0;
                        tracing::warn!(task = p.task_index, state = p.state_index, seed, %what, attempt,
                            "imagined episode dropped: non-finite values; imagining it again with a derived seed");
                        self.stats.non_finite_dropped += 1;
                        if attempt + 1 == MAX_ATTEMPTS {
                            return Err(Error::NonFinite {
                                task: p.task_index,
                                state: p.state_index,
                                seed: *seed,
                                what,
                                attempts: MAX_ATTEMPTS,
                            });
                        }
                        retry.push((
                            *index,
                            derive_seed(*seed, &[REIMAGINE, u64::from(attempt + 1)]),
                        ));
                    } else {
                        out[*index] = Some(Imagined {
                            score: dream.score,
                            rollout: dream.record,
                        });
                    }
                }
            }
            if retry.is_empty() {
                break;
            }
            pending = retry;
        }
        self.stats.imagined += requests.len() as u64;
        Ok(out
            .into_iter()
            .map(|o| o.expect("every request imagined"))
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
