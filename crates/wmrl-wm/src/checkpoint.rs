//! World-model checkpoints, in the same form as the policy's: a folder with
//! `world_model.safetensors` (every tensor, f32) and `world_model.json`
//! (config, sizes, the encoder fingerprint, provenance), both written
//! atomically, then `MANIFEST.json` with their sizes and SHA-256 (and the
//! training episodes' when they are saved beside). Loading verifies the
//! manifest when there is one, builds the architecture from the JSON and
//! checks every tensor's name and shape before copying anything.

use std::path::Path;

use serde::{Deserialize, Serialize};
use tch::Device;

use crate::config::WmConfig;
use crate::model::LatentWorldModel;
use crate::trajectory::Dims;
use crate::{Error, Result};

/// Weights file inside a world-model checkpoint folder.
pub const WEIGHTS_FILE: &str = "world_model.safetensors";
/// Config file inside a world-model checkpoint folder.
pub const CONFIG_FILE: &str = "world_model.json";
/// The encoded training episodes `wmrl wm train` leaves beside the
/// checkpoint; post-training seeds the replay buffer with them, so that a
/// refresh on a buffer of mostly failed anchors does not unlearn success.
pub const TRAINING_DATA_FILE: &str = "train.wmlat";
const FORMAT: &str = "wmrl-wm";
const VERSION: u32 = 1;

/// `world_model.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WmCheckpointConfig {
    /// Always `wmrl-wm`.
    pub format: String,
    /// Format version (1).
    pub version: u32,
    /// Architecture, imagination, training, replay.
    pub config: WmConfig,
    /// Sizes shared with the policy.
    pub dims: Dims,
    /// Fingerprint of the policy encoder the latents come from.
    pub encoder: String,
    /// Provenance (data, steps, losses); not read back.
    #[serde(default)]
    pub info: serde_json::Value,
}

/// Writes `dir/world_model.safetensors`, `dir/world_model.json` and then
/// their manifest ([`wmrl_report::manifest`]), atomically.
pub fn save(model: &LatentWorldModel, dir: &Path, info: serde_json::Value) -> Result<()> {
    let _span = tracing::info_span!("save_world_model", dir = %dir.display()).entered();
    std::fs::create_dir_all(dir).map_err(|source| Error::Io {
        path: dir.into(),
        source,
    })?;
    let bytes = wmrl_vla::checkpoint::var_store_bytes(model.var_store())?;
    wmrl_report::write_atomic(&dir.join(WEIGHTS_FILE), &bytes)?;
    let config = WmCheckpointConfig {
        format: FORMAT.into(),
        version: VERSION,
        config: model.config().clone(),
        dims: model.dims(),
        encoder: model.encoder().into(),
        info,
    };
    wmrl_report::write_json_atomic(&dir.join(CONFIG_FILE), &config)?;
    wmrl_report::manifest::write(dir, &[WEIGHTS_FILE, CONFIG_FILE])?;
    Ok(())
}

/// Writes the world model's training episodes beside its checkpoint in
/// `dir` (what `wmrl train` seeds its replay buffer with), and adds them to
/// the checkpoint's manifest.
pub fn save_training_data(
    dir: &Path,
    dims: &Dims,
    encoder: &str,
    episodes: &[crate::LatentTrajectory],
) -> Result<()> {
    crate::episodes::write(&dir.join(TRAINING_DATA_FILE), dims, encoder, episodes)?;
    wmrl_report::manifest::write(dir, &[WEIGHTS_FILE, CONFIG_FILE, TRAINING_DATA_FILE])?;
    Ok(())
}

/// Reads and checks `dir/world_model.json`.
pub fn read_config(dir: &Path) -> Result<WmCheckpointConfig> {
    let path = dir.join(CONFIG_FILE);
    let text = std::fs::read_to_string(&path).map_err(|source| Error::Io {
        path: path.clone(),
        source,
    })?;
    let config: WmCheckpointConfig = serde_json::from_str(&text).map_err(|source| Error::Json {
        path: path.clone(),
        source,
    })?;
    if config.format != FORMAT || config.version != VERSION {
        return Err(Error::BadFile {
            path,
            message: format!(
                "format `{}` version {} is not a {FORMAT} checkpoint of version {VERSION}",
                config.format, config.version
            ),
        });
    }
    config.config.validate()?;
    Ok(config)
}

/// Loads a world model for a policy of sizes `dims` whose encoder has
/// fingerprint `encoder` (`None` skips the encoder check, for inspection).
pub fn load(
    dir: &Path,
    dims: &Dims,
    encoder: Option<&str>,
    device: Device,
) -> Result<LatentWorldModel> {
    let _span = tracing::info_span!("load_world_model", dir = %dir.display()).entered();
    wmrl_report::manifest::verify_if_present(dir).map_err(wmrl_report::Error::from)?;
    let stored = read_config(dir)?;
    if stored.dims != *dims {
        return Err(Error::mismatch(
            format!("{}: sizes", dir.join(CONFIG_FILE).display()),
            format!("the policy's ({dims})"),
            format!("({})", stored.dims),
        ));
    }
    if let Some(expected) = encoder
        && stored.encoder != expected
    {
        return Err(Error::EncoderMismatch {
            expected: stored.encoder,
            found: expected.into(),
        });
    }
    let mut model = LatentWorldModel::new(stored.config, *dims, stored.encoder, device)?;
    wmrl_vla::checkpoint::load_var_store(model.var_store_mut(), &dir.join(WEIGHTS_FILE))?;
    Ok(model)
}
