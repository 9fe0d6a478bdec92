//! Closed-loop imagination, the kernel every imagined episode runs
//! through: the policy acts on the model's latents, a chunk is sampled with
//! the episode's own seeded RNG, the dynamics predict the next latent and
//! the success head scores the new boundary, for a whole wave of episodes
//! in one batched loop. Episodes start from any encoded observation at any
//! chunk boundary: a prompt's initial observation (what
//! [`crate::VlaWorldModel`] imagines), the state after an executed prefix
//! (branched imagination), or a held-out episode's state after k chunks
//! ([`crate::fidelity`]).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tch::{Device, Kind, Tensor};
use wmrl_vla::inference::ActionChunk;
use wmrl_vla::rollout::{ChunkInput, EpisodeRecord};
use wmrl_vla::{ActionDistribution, Decoding, VlaPolicy};

use crate::model::LatentWorldModel;
use crate::{Error, Result};

/// One imagined episode in progress.
pub(crate) struct Dream {
    pub(crate) record: EpisodeRecord,
    pub(crate) rng: ChaCha8Rng,
    pub(crate) score: f64,
    pub(crate) done: bool,
    pub(crate) bad: Option<String>,
}

/// Where one imagined episode starts: a prompt's encoded initial
/// observation, or the encoded observation at a chunk boundary of an
/// executed episode (a branch, see [`imagine_from`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ImagineStart<'a> {
    /// Task index.
    pub task_index: usize,
    /// Initial-state index of the episode the start belongs to.
    pub state_index: usize,
    /// The task's instruction.
    pub instruction: &'a str,
    /// Observation latent (`latent_dim` values).
    pub latent: Vec<f32>,
    /// Raw proprioception (`proprio_dim` values).
    pub proprio: Vec<f32>,
    /// Seed of the episode's action sampling.
    pub seed: u64,
}

/// One episode imagined by [`imagine_from`].
#[derive(Debug, Clone, PartialEq)]
pub struct ImaginedEpisode {
    /// The imagined chunks, their inputs and log-probabilities.
    pub record: EpisodeRecord,
    /// ŝ: the highest success probability over the imagined boundaries.
    pub score: f64,
    /// What went non-finite, if anything (the record is then incomplete).
    pub non_finite: Option<String>,
}

/// Imagines the policy in closed loop inside `model` from arbitrary
/// starts, all at chunk boundary `first_chunk`, up to the model's horizon:
/// with `first_chunk = 0` from initial observations (what the training
/// loop imagines), with `first_chunk = k > 0` from the real state after
/// chunk k of executed episodes, which measures how the world model's
/// fidelity depends on how far it has to imagine (`wmrl wm eval
/// --branch-depths`). A branch's score counts only the boundaries it
/// imagined (the executed prefix had not reached the goal, or the episode
/// would have ended). No retries: non-finite episodes are returned marked.
pub fn imagine_from(
    model: &LatentWorldModel,
    policy: &VlaPolicy,
    starts: &[ImagineStart<'_>],
    first_chunk: usize,
) -> Result<Vec<ImaginedEpisode>> {
    model.check_encoder(policy)?;
    for s in starts {
        model.check_task(s.task_index)?;
    }
    let mut out = Vec::with_capacity(starts.len());
    for wave in starts.chunks(model.config().imagine.batch.max(1)) {
        let (dreams, _) = dream_wave(model, policy, wave, first_chunk)?;
        out.extend(dreams.into_iter().map(|d| ImaginedEpisode {
            record: d.record,
            score: d.score,
            non_finite: d.bad,
        }));
    }
    Ok(out)
}

/// Imagines one wave of episodes in one batched loop from chunk boundary
/// `first_chunk`; returns them and the number of dynamics steps computed.
pub(crate) fn dream_wave(
    model: &LatentWorldModel,
    policy: &VlaPolicy,
    wave: &[ImagineStart<'_>],
    first_chunk: usize,
) -> Result<(Vec<Dream>, u64)> {
    let device = model.device();
    let dims = model.dims();
    let b = wave.len() as i64;
    let (mut z0, mut p0) = (Vec::new(), Vec::new());
    for start in wave {
        z0.extend_from_slice(&start.latent);
        p0.extend_from_slice(&start.proprio);
    }
    let mut chunks_computed = 0u64;
    let imagine = model.config().imagine.clone();
    let horizon = model.horizon_chunks();
    let action = &policy.config().action;
    let (chunk_len, action_dim) = (action.chunk_len, action.action_dim);
    let binning = action.binning;
    let _guard = tch::no_grad_guard();
    // Instruction embeddings: one per distinct instruction.
    let mut distinct: Vec<&str> = Vec::new();
    let rows: Vec<i64> = wave
        .iter()
        .map(|s| {
            let pos = distinct.iter().position(|d| *d == s.instruction);
            pos.unwrap_or_else(|| {
                distinct.push(s.instruction);
                distinct.len() - 1
            }) as i64
        })
        .collect();
    let mut instr = policy
        .encode_instructions(&policy.tokenize(&distinct))
        .index_select(0, &Tensor::from_slice(&rows).to_device(policy.device()));
    let mut tasks =
        Tensor::from_slice(&wave.iter().map(|s| s.task_index as i64).collect::<Vec<_>>())
            .to_device(device);
    let mut z = Tensor::from_slice(&z0)
        .view([b, dims.latent as i64])
        .to_device(device);
    let mut pn = model.normalise_proprio(
        &Tensor::from_slice(&p0)
            .view([b, dims.proprio as i64])
            .to_device(device),
    );
    // The initial boundary is scored at t = 0 only: a branch's executed
    // prefix had not reached the goal, or the episode would have ended.
    let first: Vec<f64> = if first_chunk == 0 {
        let zero_action = Tensor::zeros([b, dims.chunk() as i64], (Kind::Float, device));
        let first = model
            .success_logit(
                &z,
                &pn,
                &zero_action,
                &tasks,
                &Tensor::zeros([b], (Kind::Float, device)),
            )
            .sigmoid();
        Vec::try_from(first.to_device(Device::Cpu).to_kind(Kind::Double))
            .map_err(Error::torch("reading scores"))?
    } else {
        vec![0.0; wave.len()]
    };
    let mut dreams: Vec<Dream> = wave
        .iter()
        .zip(first)
        .map(|(start, s)| Dream {
            record: EpisodeRecord {
                task_index: start.task_index,
                state_index: start.state_index,
                ..Default::default()
            },
            rng: ChaCha8Rng::seed_from_u64(start.seed),
            score: if s.is_finite() { s } else { 0.0 },
            done: false,
            bad: (!s.is_finite()).then(|| "initial score".to_string()),
        })
        .collect();
    let per = (chunk_len * action_dim) as usize;
    let (low, width) = (f64::from(binning.low), f64::from(binning.width()));
    // Rows still imagined; finished episodes leave the batch.
    let mut live: Vec<usize> = (0..dreams.len()).collect();
    for t in first_chunk..horizon {
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
        let raw_p = model.raw_proprio(&pn);
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
        (z, pn) = model.step(&z, &pn, &actions);
        let step_t = Tensor::full([b], (t + 1) as f64, (Kind::Float, device));
        let prob = model
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
        let token_log_probs: Vec<f32> = Vec::try_from(
            log_probs
                .to_device(Device::Cpu)
                .to_kind(Kind::Float)
                .flatten(0, -1),
        )
        .map_err(Error::torch("reading log-probabilities"))?;
        let log_probs: Vec<f32> = token_log_probs
            .chunks(per)
            .map(|row| row.iter().sum())
            .collect();
        chunks_computed += live.len() as u64;
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
                token_log_probs: token_log_probs[i * per..(i + 1) * per].to_vec(),
                // The dynamics step whole chunks.
                executed: chunk_len as usize,
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
    Ok((dreams, chunks_computed))
}
