//! Executed episodes as the world model sees them: the latent and
//! proprioception at every chunk boundary, and the executed action chunks.
//!
//! A trajectory of `K` chunks holds `K + 1` observations: the one after the
//! reset, then one after each chunk (the last chunk may have been cut short
//! by success; its actions are padded to a full chunk). Latents come from
//! the policy's observation encoder, which is frozen during post-training,
//! so a trajectory is tied to that encoder's fingerprint.

use image::RgbImage;
use tch::{Device, Kind};
use wmrl_vla::VlaPolicy;
use wmrl_vla::demos::Episode;
use wmrl_vla::inference::images_to_tensor;
use wmrl_vla::rollout::{EpisodeRecord, RecordedObservation};

use crate::{Error, Result};

/// One executed episode in latent space.
#[derive(Debug, Clone, PartialEq)]
pub struct LatentTrajectory {
    /// Task index.
    pub task_index: usize,
    /// Initial-state index.
    pub state_index: usize,
    /// Whether the goal was reached.
    pub success: bool,
    /// Seed of the episode (for logs).
    pub seed: u64,
    /// `expert`, `policy`, …
    pub source: String,
    /// Control steps executed.
    pub steps: usize,
    /// Latents, row-major `[chunks + 1, latent_dim]`.
    pub latents: Vec<f32>,
    /// Raw proprioception, row-major `[chunks + 1, proprio_dim]`.
    pub proprio: Vec<f32>,
    /// Executed actions per chunk, row-major `[chunks, chunk_len · action_dim]`.
    pub actions: Vec<f32>,
}

/// Sizes every trajectory of one world model shares (stored as they are in
/// checkpoints and latent-episode files).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dims {
    /// Latent size.
    pub latent: usize,
    /// Proprioception size.
    pub proprio: usize,
    /// Control steps per chunk.
    pub chunk_len: usize,
    /// Values per action.
    pub action_dim: usize,
}

impl Dims {
    /// The sizes of `policy`.
    pub fn of(policy: &VlaPolicy) -> Self {
        let c = policy.config();
        Self {
            latent: c.latent_dim as usize,
            proprio: c.proprio_dim as usize,
            chunk_len: c.action.chunk_len as usize,
            action_dim: c.action.action_dim as usize,
        }
    }

    /// Values of one action chunk.
    pub fn chunk(&self) -> usize {
        self.chunk_len * self.action_dim
    }
}

impl std::fmt::Display for Dims {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "latent {}, proprio {}, chunk {}×{}",
            self.latent, self.proprio, self.chunk_len, self.action_dim
        )
    }
}

impl LatentTrajectory {
    /// Number of chunks.
    pub fn chunks(&self, dims: &Dims) -> usize {
        self.actions.len() / dims.chunk().max(1)
    }

    /// Checks lengths and finiteness; the message names the episode.
    pub fn validate(&self, dims: &Dims) -> std::result::Result<(), String> {
        let k = self.chunks(dims);
        if k == 0 || self.actions.len() != k * dims.chunk() {
            return Err(format!(
                "{} action values is not a whole number (≥ 1) of chunks",
                self.actions.len()
            ));
        }
        if self.latents.len() != (k + 1) * dims.latent {
            return Err(format!(
                "{} latent values, expected {}",
                self.latents.len(),
                (k + 1) * dims.latent
            ));
        }
        if self.proprio.len() != (k + 1) * dims.proprio {
            return Err(format!(
                "{} proprio values, expected {}",
                self.proprio.len(),
                (k + 1) * dims.proprio
            ));
        }
        let finite = |v: &[f32]| v.iter().all(|x| x.is_finite());
        if !(finite(&self.latents) && finite(&self.proprio) && finite(&self.actions)) {
            return Err("NaN or infinite values".into());
        }
        Ok(())
    }

    /// A short name for logs.
    pub fn describe(&self) -> String {
        format!(
            "task {} state {} seed {} ({})",
            self.task_index, self.state_index, self.seed, self.source
        )
    }
}

/// Encodes observations with the policy's encoder, in batches: `[N, latent_dim]`.
pub fn encode_observations(
    policy: &VlaPolicy,
    agent: &[&RgbImage],
    wrist: &[&RgbImage],
) -> Result<Vec<f32>> {
    let mut out = Vec::with_capacity(agent.len() * policy.config().latent_dim as usize);
    let _guard = tch::no_grad_guard();
    for (a, w) in agent.chunks(256).zip(wrist.chunks(256)) {
        let at = images_to_tensor(a, policy.device())?;
        let wt = images_to_tensor(w, policy.device())?;
        let z = policy
            .encode(&at, &wt)
            .to_device(Device::Cpu)
            .to_kind(Kind::Float)
            .flatten(0, -1);
        out.extend(Vec::<f32>::try_from(z).map_err(Error::torch("reading latents"))?);
    }
    Ok(out)
}

/// Splits per-step actions into chunks, padding the last chunk with its last action.
fn chunk_actions(actions: &[f32], dims: &Dims) -> Vec<f32> {
    let steps = actions.len() / dims.action_dim;
    let chunks = steps.div_ceil(dims.chunk_len);
    let mut out = Vec::with_capacity(chunks * dims.chunk());
    for step in 0..chunks * dims.chunk_len {
        let s = step.min(steps - 1);
        out.extend_from_slice(&actions[s * dims.action_dim..(s + 1) * dims.action_dim]);
    }
    out
}

/// A demonstration (one frame per step) as a latent trajectory: observations
/// at steps 0, C, 2C, … and the final one.
pub fn from_demo(policy: &VlaPolicy, episode: &Episode) -> Result<LatentTrajectory> {
    let dims = Dims::of(policy);
    if episode.action_dim != dims.action_dim || episode.proprio_dim != dims.proprio {
        return Err(Error::mismatch(
            format!(
                "demonstration of task {} state {}: action / proprio sizes",
                episode.meta.task_index, episode.meta.state_index
            ),
            format!("{} / {}", dims.action_dim, dims.proprio),
            format!("{} / {}", episode.action_dim, episode.proprio_dim),
        ));
    }
    let steps = episode.steps();
    if steps == 0 {
        return Err(Error::Empty {
            what: format!(
                "demonstration of task {} state {}",
                episode.meta.task_index, episode.meta.state_index
            ),
        });
    }
    let chunks = steps.div_ceil(dims.chunk_len);
    let boundaries: Vec<usize> = (0..=chunks)
        .map(|k| (k * dims.chunk_len).min(steps))
        .collect();
    let agent: Vec<&RgbImage> = boundaries.iter().map(|&s| &episode.agent_view[s]).collect();
    let wrist: Vec<&RgbImage> = boundaries.iter().map(|&s| &episode.wrist_view[s]).collect();
    let latents = encode_observations(policy, &agent, &wrist)?;
    let proprio = boundaries
        .iter()
        .flat_map(|&s| {
            episode.proprio[s * dims.proprio..(s + 1) * dims.proprio]
                .iter()
                .copied()
        })
        .collect();
    Ok(LatentTrajectory {
        task_index: episode.meta.task_index,
        state_index: episode.meta.state_index,
        success: episode.meta.success,
        seed: episode.meta.seed,
        source: episode.meta.source.clone(),
        steps,
        latents,
        proprio,
        actions: chunk_actions(&episode.actions, &dims),
    })
}

/// An executed episode whose executor recorded the observation at every
/// chunk boundary (`SimExecutorOptions::record_observations`). `None` when
/// the observations were not recorded.
pub fn from_record(
    policy: &VlaPolicy,
    record: &EpisodeRecord,
    seed: u64,
    source: &str,
) -> Result<Option<LatentTrajectory>> {
    let dims = Dims::of(policy);
    if record.chunks.is_empty() || record.observations.len() != record.chunks.len() + 1 {
        return Ok(None);
    }
    let obs: &[RecordedObservation] = &record.observations;
    let agent: Vec<&RgbImage> = obs.iter().map(|o| &o.agent_view).collect();
    let wrist: Vec<&RgbImage> = obs.iter().map(|o| &o.wrist_view).collect();
    let latents = encode_observations(policy, &agent, &wrist)?;
    let mut actions = Vec::with_capacity(record.chunks.len() * dims.chunk());
    for chunk in &record.chunks {
        if chunk.actions.len() != dims.chunk() {
            return Err(Error::mismatch(
                "recorded chunk size",
                dims.chunk(),
                chunk.actions.len(),
            ));
        }
        actions.extend_from_slice(&chunk.actions);
    }
    Ok(Some(LatentTrajectory {
        task_index: record.task_index,
        state_index: record.state_index,
        success: record.success,
        seed,
        source: source.into(),
        steps: record.steps,
        latents,
        proprio: obs.iter().flat_map(|o| o.proprio.iter().copied()).collect(),
        actions,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunking_pads_the_last_chunk_with_its_last_action() {
        let dims = Dims {
            latent: 1,
            proprio: 1,
            chunk_len: 4,
            action_dim: 2,
        };
        let actions: Vec<f32> = (0..12).map(|v| v as f32).collect(); // 6 steps
        let chunked = chunk_actions(&actions, &dims);
        assert_eq!(chunked.len(), 16);
        assert_eq!(&chunked[8..12], &[8.0, 9.0, 10.0, 11.0]);
        assert_eq!(&chunked[12..16], &[10.0, 11.0, 10.0, 11.0]);
    }
}
