//! The world model's share of a training run's checkpoint: weights,
//! optimiser moments, the batch sampler's RNG, counters and the replay
//! buffer, so that a resumed run refreshes the model exactly as the
//! uninterrupted run would have.
//!
//! A state folder holds `world_model/` (a regular checkpoint),
//! `optimizer.safetensors`, `replay.wmlat` and `state.json`, each written
//! atomically. Loading goes into an existing [`VlaWorldModel`] built from the
//! same starting checkpoint, in place (the optimiser keeps its references to
//! the weights).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::imagine::{VlaWorldModel, WmStats};
use crate::replay::ReplayBuffer;
use crate::train::TrainerCounters;
use crate::{Error, Result};

/// Optimiser moments of the world model.
pub const OPTIMIZER_FILE: &str = "optimizer.safetensors";
/// The replay buffer, oldest episode first.
pub const REPLAY_FILE: &str = "replay.wmlat";
/// Counters.
pub const STATE_FILE: &str = "state.json";

/// `state.json` of a world-model state folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WorldModelRunState {
    trainer: TrainerCounters,
    stats: WmStats,
    replay_capacity: usize,
    replay_accepted: u64,
    replay_rejected: u64,
}

/// Writes the world model's state into `dir`.
pub fn save(world_model: &VlaWorldModel, dir: &Path) -> Result<()> {
    let _span = tracing::info_span!("save_world_model_state", dir = %dir.display()).entered();
    let model = world_model.model();
    crate::checkpoint::save(model, &dir.join("world_model"), serde_json::Value::Null)?;
    wmrl_report::write_atomic(
        &dir.join(OPTIMIZER_FILE),
        &wmrl_vla::checkpoint::var_store_bytes(world_model.trainer().optimizer_state())?,
    )?;
    let replay = world_model.replay();
    let episodes: Vec<_> = replay.episodes().cloned().collect();
    crate::episodes::write(
        &dir.join(REPLAY_FILE),
        &model.dims(),
        model.encoder(),
        &episodes,
    )?;
    wmrl_report::write_json_atomic(
        &dir.join(STATE_FILE),
        &WorldModelRunState {
            trainer: world_model.trainer().counters(),
            stats: world_model.stats.clone(),
            replay_capacity: replay.capacity(),
            replay_accepted: replay.accepted,
            replay_rejected: replay.rejected,
        },
    )?;
    Ok(())
}

/// Restores a state written by [`save`] into `world_model` (built from the
/// same starting checkpoint): weights, optimiser, RNG, counters, replay buffer.
pub fn load(world_model: &mut VlaWorldModel, dir: &Path) -> Result<()> {
    let _span = tracing::info_span!("load_world_model_state", dir = %dir.display()).entered();
    let weights = dir
        .join("world_model")
        .join(crate::checkpoint::WEIGHTS_FILE);
    let stored = crate::checkpoint::read_config(&dir.join("world_model"))?;
    let dims = world_model.model().dims();
    if stored.dims != dims || stored.encoder != world_model.model().encoder() {
        return Err(Error::mismatch(
            format!("{}: sizes and encoder", weights.display()),
            format!("{dims}, encoder {}", world_model.model().encoder()),
            format!("{}, encoder {}", stored.dims, stored.encoder),
        ));
    }
    wmrl_vla::checkpoint::load_var_store(world_model.model_mut().var_store_mut(), &weights)?;
    wmrl_vla::checkpoint::load_var_store(
        world_model.trainer_mut().optimizer_state_mut(),
        &dir.join(OPTIMIZER_FILE),
    )?;
    let path = dir.join(STATE_FILE);
    let text = std::fs::read_to_string(&path).map_err(|source| Error::Io {
        path: path.clone(),
        source,
    })?;
    let state: WorldModelRunState = serde_json::from_str(&text).map_err(|source| Error::Json {
        path: path.clone(),
        source,
    })?;
    world_model
        .trainer_mut()
        .set_counters(&state.trainer)
        .map_err(|message| Error::BadFile {
            path: path.clone(),
            message,
        })?;
    let encoder = world_model.model().encoder().to_string();
    let episodes = crate::episodes::read(&dir.join(REPLAY_FILE), &dims, Some(&encoder))?;
    let mut replay = ReplayBuffer::new(state.replay_capacity);
    for e in episodes {
        replay.push(e, &dims);
    }
    replay.accepted = state.replay_accepted;
    replay.rejected = state.replay_rejected;
    *world_model.replay_mut() = replay;
    world_model.stats = state.stats;
    Ok(())
}
