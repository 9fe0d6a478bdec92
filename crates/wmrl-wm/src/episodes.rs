//! Latent-episode files (`*.wmlat`): executed episodes already encoded by a
//! policy's observation encoder, for training and evaluating world models
//! without re-rendering or re-encoding.
//!
//! A file is a safetensors file with three f32 tensors, every episode's rows
//! back to back: `latents [Σ(K+1), latent_dim]`, `proprio [Σ(K+1),
//! proprio_dim]`, `actions [ΣK, chunk_len · action_dim]`. Its metadata holds
//! `format` (`wmrl-latents`), `version` (`1`), `encoder` (the encoder's
//! fingerprint), `dims` and `episodes` (JSON: task, state, success, seed,
//! source, steps and chunk count of each episode), and `crc32`, the CRC-32
//! of the tensor bytes. A truncated file fails safetensors' length check, a
//! flipped bit fails the CRC, and a file from another encoder is refused.
//! Files are written atomically.

use std::collections::HashMap;
use std::path::Path;

use safetensors::tensor::{Dtype, SafeTensors};
use serde::{Deserialize, Serialize};
use wmrl_vla::checkpoint::OwnedView;

use crate::trajectory::{Dims, LatentTrajectory};
use crate::{Error, Result};

/// File extension of latent-episode files.
pub const EXTENSION: &str = "wmlat";
const FORMAT: &str = "wmrl-latents";
const VERSION: &str = "1";

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct EpisodeEntry {
    task_index: usize,
    state_index: usize,
    success: bool,
    seed: u64,
    source: String,
    steps: usize,
    chunks: usize,
}

/// Writes `episodes` (all encoded by the encoder `encoder`) to `path`, atomically.
pub fn write(path: &Path, dims: &Dims, encoder: &str, episodes: &[LatentTrajectory]) -> Result<()> {
    for e in episodes {
        e.validate(dims).map_err(|message| Error::BadFile {
            path: path.into(),
            message: format!("{}: {message}", e.describe()),
        })?;
    }
    let latents = OwnedView::rows(
        episodes.iter().flat_map(|e| e.latents.iter().copied()),
        dims.latent,
    );
    let proprio = OwnedView::rows(
        episodes.iter().flat_map(|e| e.proprio.iter().copied()),
        dims.proprio,
    );
    let actions = OwnedView::rows(
        episodes.iter().flat_map(|e| e.actions.iter().copied()),
        dims.chunk(),
    );
    let mut crc = crc32fast::Hasher::new();
    for v in [&actions, &latents, &proprio] {
        crc.update(&v.data);
    }
    let entries: Vec<EpisodeEntry> = episodes
        .iter()
        .map(|e| EpisodeEntry {
            task_index: e.task_index,
            state_index: e.state_index,
            success: e.success,
            seed: e.seed,
            source: e.source.clone(),
            steps: e.steps,
            chunks: e.chunks(dims),
        })
        .collect();
    let metadata: HashMap<String, String> = [
        ("format".to_string(), FORMAT.to_string()),
        ("version".to_string(), VERSION.to_string()),
        ("encoder".to_string(), encoder.to_string()),
        ("dims".to_string(), json(dims)),
        ("episodes".to_string(), json(&entries)),
        ("crc32".to_string(), crc.finalize().to_string()),
    ]
    .into();
    let bytes = safetensors::tensor::serialize(
        [
            ("actions", actions),
            ("latents", latents),
            ("proprio", proprio),
        ],
        &Some(metadata),
    )
    .map_err(|e| Error::BadFile {
        path: path.into(),
        message: format!("serialising: {e:?}"),
    })?;
    wmrl_report::write_atomic(path, &bytes)?;
    Ok(())
}

fn json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("plain data serialises")
}

/// Reads a latent-episode file, checking its kind, encoder, sizes and CRC.
/// `encoder` = `None` accepts any encoder (for inspection).
pub fn read(path: &Path, dims: &Dims, encoder: Option<&str>) -> Result<Vec<LatentTrajectory>> {
    let bad = |message: String| Error::BadFile {
        path: path.into(),
        message,
    };
    let bytes = std::fs::read(path).map_err(|source| Error::Io {
        path: path.into(),
        source,
    })?;
    let file = SafeTensors::deserialize(&bytes).map_err(|e| {
        bad(format!(
            "not a complete safetensors file (truncated or corrupt): {e:?}"
        ))
    })?;
    let (_, header) = SafeTensors::read_metadata(&bytes).map_err(|e| bad(format!("{e:?}")))?;
    let meta = header
        .metadata()
        .clone()
        .ok_or_else(|| bad("no metadata: not a latent-episode file".into()))?;
    let field = |key: &str| {
        meta.get(key)
            .cloned()
            .ok_or_else(|| bad(format!("metadata field `{key}` is missing")))
    };
    if field("format")? != FORMAT || field("version")? != VERSION {
        return Err(bad(format!("not a {FORMAT} file of version {VERSION}")));
    }
    if let Some(expected) = encoder {
        let found = field("encoder")?;
        if found != expected {
            return Err(Error::EncoderMismatch {
                expected: found,
                found: expected.to_string(),
            });
        }
    }
    let file_dims: Dims =
        serde_json::from_str(&field("dims")?).map_err(|e| bad(format!("metadata `dims`: {e}")))?;
    if file_dims != *dims {
        return Err(bad(format!(
            "sizes ({file_dims}) do not match the policy's ({dims})"
        )));
    }
    let entries: Vec<EpisodeEntry> = serde_json::from_str(&field("episodes")?)
        .map_err(|e| bad(format!("metadata `episodes`: {e}")))?;
    let tensor = |name: &str| -> Result<Vec<f32>> {
        let v = file
            .tensor(name)
            .map_err(|_| bad(format!("tensor `{name}` is missing")))?;
        if v.dtype() != Dtype::F32 {
            return Err(bad(format!(
                "tensor `{name}` is {:?}, expected F32",
                v.dtype()
            )));
        }
        Ok(v.data()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect())
    };
    let mut crc = crc32fast::Hasher::new();
    for name in ["actions", "latents", "proprio"] {
        crc.update(file.tensor(name).map(|v| v.data()).unwrap_or_default());
    }
    let expected_crc: u32 = field("crc32")?
        .parse()
        .map_err(|_| bad("metadata `crc32` is not a number".into()))?;
    if crc.finalize() != expected_crc {
        return Err(bad("checksum mismatch: the tensor data is corrupt".into()));
    }
    let (latents, proprio, actions) = (tensor("latents")?, tensor("proprio")?, tensor("actions")?);
    let (mut o, mut a) = (0usize, 0usize);
    let mut out = Vec::with_capacity(entries.len());
    for (i, e) in entries.into_iter().enumerate() {
        let k = e.chunks;
        if (o + k + 1) * dims.latent > latents.len() || (a + k) * dims.chunk() > actions.len() {
            return Err(bad(format!("episode {i} runs past the end of the tensors")));
        }
        let t = LatentTrajectory {
            task_index: e.task_index,
            state_index: e.state_index,
            success: e.success,
            seed: e.seed,
            source: e.source,
            steps: e.steps,
            latents: latents[o * dims.latent..(o + k + 1) * dims.latent].to_vec(),
            proprio: proprio[o * dims.proprio..(o + k + 1) * dims.proprio].to_vec(),
            actions: actions[a * dims.chunk()..(a + k) * dims.chunk()].to_vec(),
        };
        t.validate(dims)
            .map_err(|m| bad(format!("episode {i} ({}): {m}", t.describe())))?;
        o += k + 1;
        a += k;
        out.push(t);
    }
    if o * dims.latent != latents.len() || a * dims.chunk() != actions.len() {
        return Err(bad("tensors hold more rows than the episodes list".into()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dims() -> Dims {
        Dims {
            latent: 3,
            proprio: 2,
            chunk_len: 2,
            action_dim: 1,
        }
    }

    fn episode(k: usize, seed: u64) -> LatentTrajectory {
        LatentTrajectory {
            task_index: 1,
            state_index: 2,
            success: seed.is_multiple_of(2),
            seed,
            source: "policy".into(),
            steps: 2 * k,
            latents: (0..(k + 1) * 3).map(|v| v as f32 * 0.5).collect(),
            proprio: (0..(k + 1) * 2).map(|v| v as f32).collect(),
            actions: (0..k * 2).map(|v| v as f32 * 0.1).collect(),
        }
    }

    #[test]
    fn round_trip_and_corruption_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.wmlat");
        let episodes = vec![episode(3, 1), episode(1, 2)];
        write(&path, &dims(), "abc", &episodes).unwrap();
        assert_eq!(read(&path, &dims(), Some("abc")).unwrap(), episodes);
        // Another encoder is refused.
        let err = read(&path, &dims(), Some("xyz")).unwrap_err().to_string();
        assert!(err.contains("encoder"), "{err}");
        // A flipped bit in the data fails the checksum.
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 3;
        bytes[last] ^= 0x10;
        std::fs::write(&path, &bytes).unwrap();
        let err = read(&path, &dims(), None).unwrap_err().to_string();
        assert!(err.contains("checksum") && err.contains("a.wmlat"), "{err}");
        // A truncated file is named as such.
        std::fs::write(&path, &bytes[..bytes.len() - 10]).unwrap();
        let err = read(&path, &dims(), None).unwrap_err().to_string();
        assert!(err.contains("truncated"), "{err}");
    }
}
