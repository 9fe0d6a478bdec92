//! The demonstration file format (`*.demo`, version 1): one episode per file.
//!
//! ```text
//! offset   size  content
//! 0        8     magic "WMRLDEMO"
//! 8        4     format version, u32 little-endian (1)
//! 12       4     header length H, u32 LE
//! 16       H     header: UTF-8 JSON (see `Header`)
//! 16+H     4     CRC-32 (IEEE) of the header bytes, u32 LE
//! 20+H     ...   sections, back to back, in the order the header lists them
//! ```
//!
//! The header lists each section's name, byte length and CRC-32, so the exact
//! file length is known: a shorter file is reported as truncated, a longer one
//! as corrupt, and a flipped bit fails its section's checksum. Sections:
//!
//! - `actions`: f32 LE, `[steps, action_dim]`: the action executed after observation `t`.
//! - `labels`: f32 LE, `[steps, action_dim]`: the action the demonstrator meant
//!   (with noise injection, DART-style, the executed action is the label plus
//!   noise; behaviour cloning learns the labels, a dynamics model the actions).
//! - `proprio`: f32 LE, `[steps + 1, proprio_dim]` (the last row is the final observation).
//! - `agent_view`, `wrist_view`: `steps + 1` frames, each a u32 LE byte count
//!   followed by a PNG (8-bit RGB, `image_width × image_height`).
//!
//! Files are written atomically (temporary file, fsync, rename).

use std::io::Cursor;
use std::path::Path;

use image::codecs::png::{CompressionType, FilterType, PngEncoder};
use image::{ImageEncoder, RgbImage};
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// First bytes of every demonstration file.
pub const MAGIC: &[u8; 8] = b"WMRLDEMO";
/// Current format version.
pub const VERSION: u32 = 1;
/// File extension of demonstration files.
pub const EXTENSION: &str = "demo";
const SECTIONS: [&str; 5] = ["actions", "labels", "proprio", "agent_view", "wrist_view"];

/// What an episode is: task, initial state, outcome, provenance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EpisodeMeta {
    /// Suite name, e.g. `libero-long`.
    pub suite: String,
    /// Task index in the suite.
    pub task_index: usize,
    /// Task name (e.g. the LIBERO scene-and-goal name).
    pub task_name: String,
    /// Language instruction.
    pub instruction: String,
    /// Initial-state index the episode started from.
    pub state_index: usize,
    /// Whether the task's goal was reached.
    pub success: bool,
    /// Who acted: `expert`, `takeover` (an expert from a policy's state), `policy`, or `synthetic`.
    pub source: String,
    /// Std of the Gaussian noise injected into the executed actions (0 = none).
    #[serde(default)]
    pub noise_std: f32,
    /// Seed of the episode's randomness.
    #[serde(default)]
    pub seed: u64,
    /// Control step of the episode at which the recording starts: 0 from the
    /// initial state; more when an expert took over from a policy's state
    /// (`source: takeover`), the episode's step limit counting from reset.
    #[serde(default)]
    pub start_step: usize,
    /// Steps (indices into `actions`, from the recording's start) at which a
    /// perturbation burst was added to the executed action: a behaviour-cloning
    /// target chunk of observation `t` is the expert's plan only up to the
    /// first perturbed step after `t` (see `demos::dataset`). Empty when the
    /// episode had no bursts (absent from the header then).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub perturbed_steps: Vec<usize>,
}

impl EpisodeMeta {
    /// The first perturbed step that does not lie in an episode of `steps` steps.
    pub fn perturbed_step_outside(&self, steps: usize) -> Option<usize> {
        self.perturbed_steps.iter().copied().find(|&s| s >= steps)
    }
}

/// One section's place in the file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    /// `actions`, `labels`, `proprio`, `agent_view` or `wrist_view`.
    pub name: String,
    /// Length in bytes.
    pub bytes: u64,
    /// CRC-32 (IEEE) of the bytes.
    pub crc32: u32,
}

/// The JSON header.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    /// Task, state, outcome.
    pub meta: EpisodeMeta,
    /// Actions taken (observations are `steps + 1`).
    pub steps: usize,
    /// Values per action.
    pub action_dim: usize,
    /// Values per proprioception row.
    pub proprio_dim: usize,
    /// Frame width in pixels.
    pub image_width: u32,
    /// Frame height in pixels.
    pub image_height: u32,
    /// Always `png`.
    pub frame_encoding: String,
    /// Sections in file order.
    pub sections: Vec<Section>,
}

/// A whole episode in memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Episode {
    /// Task, state, outcome.
    pub meta: EpisodeMeta,
    /// Third-person frames, `steps + 1`.
    pub agent_view: Vec<RgbImage>,
    /// Wrist frames, `steps + 1`.
    pub wrist_view: Vec<RgbImage>,
    /// Proprioception, row-major `[steps + 1, proprio_dim]`.
    pub proprio: Vec<f32>,
    /// Values per proprioception row.
    pub proprio_dim: usize,
    /// Executed actions, row-major `[steps, action_dim]`.
    pub actions: Vec<f32>,
    /// Demonstrator's intended actions (the cloning targets), same shape as `actions`.
    pub labels: Vec<f32>,
    /// Values per action.
    pub action_dim: usize,
}

impl Episode {
    /// Actions taken.
    pub fn steps(&self) -> usize {
        self.actions.len() / self.action_dim.max(1)
    }

    /// Checks that every array has the length `steps` implies.
    pub fn validate(&self) -> Result<()> {
        let steps = self.steps();
        if self.action_dim == 0
            || self.proprio_dim == 0
            || self.actions.len() != steps * self.action_dim
        {
            return Err(Error::mismatch(
                "episode actions",
                "a whole number of non-empty actions",
                self.actions.len(),
            ));
        }
        if self.labels.len() != self.actions.len() {
            return Err(Error::mismatch(
                "episode labels",
                self.actions.len(),
                self.labels.len(),
            ));
        }
        let frames = steps + 1;
        if self.agent_view.len() != frames || self.wrist_view.len() != frames {
            return Err(Error::mismatch(
                "episode frames",
                format!("{frames} per camera (steps + 1)"),
                format!(
                    "{} agent-view, {} wrist",
                    self.agent_view.len(),
                    self.wrist_view.len()
                ),
            ));
        }
        if self.proprio.len() != frames * self.proprio_dim {
            return Err(Error::mismatch(
                "episode proprioception values",
                frames * self.proprio_dim,
                self.proprio.len(),
            ));
        }
        if let Some(step) = self.meta.perturbed_step_outside(steps) {
            return Err(Error::mismatch(
                "episode perturbed step",
                format!("a step index below {steps}"),
                step,
            ));
        }
        let size = self.agent_view[0].dimensions();
        if self
            .agent_view
            .iter()
            .chain(&self.wrist_view)
            .any(|f| f.dimensions() != size)
        {
            return Err(Error::mismatch(
                "episode frame sizes",
                format!("all {size:?}"),
                "frames of different sizes",
            ));
        }
        Ok(())
    }
}

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn frames_bytes(frames: &[RgbImage]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    for frame in frames {
        let mut png = Vec::new();
        PngEncoder::new_with_quality(
            Cursor::new(&mut png),
            CompressionType::Fast,
            FilterType::Adaptive,
        )
        .write_image(
            frame.as_raw(),
            frame.width(),
            frame.height(),
            image::ExtendedColorType::Rgb8,
        )
        .map_err(|e| Error::mismatch("PNG encoding of a frame", "an encodable RGB image", e))?;
        out.extend_from_slice(&(png.len() as u32).to_le_bytes());
        out.extend_from_slice(&png);
    }
    Ok(out)
}

/// Serialises an episode to the bytes of a `.demo` file.
pub fn encode_episode(episode: &Episode) -> Result<Vec<u8>> {
    episode.validate()?;
    let payloads = [
        f32_bytes(&episode.actions),
        f32_bytes(&episode.labels),
        f32_bytes(&episode.proprio),
        frames_bytes(&episode.agent_view)?,
        frames_bytes(&episode.wrist_view)?,
    ];
    let sections = SECTIONS
        .iter()
        .zip(&payloads)
        .map(|(name, bytes)| Section {
            name: name.to_string(),
            bytes: bytes.len() as u64,
            crc32: crc32fast::hash(bytes),
        })
        .collect();
    let (w, h) = episode.agent_view[0].dimensions();
    let header = Header {
        meta: episode.meta.clone(),
        steps: episode.steps(),
        action_dim: episode.action_dim,
        proprio_dim: episode.proprio_dim,
        image_width: w,
        image_height: h,
        frame_encoding: "png".into(),
        sections,
    };
    let header = serde_json::to_vec(&header).expect("the header serialises");
    let mut out =
        Vec::with_capacity(20 + header.len() + payloads.iter().map(Vec::len).sum::<usize>());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(&crc32fast::hash(&header).to_le_bytes());
    for payload in &payloads {
        out.extend_from_slice(payload);
    }
    Ok(out)
}

/// Writes an episode to `path` atomically.
pub fn write_episode(path: &Path, episode: &Episode) -> Result<()> {
    wmrl_report::write_atomic(path, &encode_episode(episode)?)?;
    Ok(())
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

/// Parses and checks the header of a file's bytes; returns it and where the sections start.
pub fn decode_header(path: &Path, bytes: &[u8]) -> Result<(Header, usize)> {
    let corrupt = |reason: String| Error::CorruptDemo {
        path: path.to_path_buf(),
        reason,
    };
    let truncated = |expected: u64| Error::TruncatedDemo {
        path: path.to_path_buf(),
        expected,
        found: bytes.len() as u64,
    };
    if bytes.len() < 16 {
        return Err(truncated(16));
    }
    if &bytes[..8] != MAGIC {
        return Err(corrupt(
            "does not start with the magic bytes \"WMRLDEMO\"; not a demonstration file".into(),
        ));
    }
    let version = u32_at(bytes, 8);
    if version != VERSION {
        return Err(corrupt(format!(
            "format version {version}, this build reads version {VERSION}"
        )));
    }
    let header_len = u32_at(bytes, 12) as usize;
    let body = 20 + header_len;
    if bytes.len() < body {
        return Err(truncated(body as u64));
    }
    let header_bytes = &bytes[16..16 + header_len];
    let (stored, computed) = (
        u32_at(bytes, 16 + header_len),
        crc32fast::hash(header_bytes),
    );
    if stored != computed {
        return Err(Error::ChecksumMismatch {
            path: path.to_path_buf(),
            section: "header".into(),
            stored,
            computed,
        });
    }
    let header: Header =
        serde_json::from_slice(header_bytes).map_err(|e| corrupt(format!("header JSON: {e}")))?;
    let names: Vec<&str> = header.sections.iter().map(|s| s.name.as_str()).collect();
    if names != SECTIONS {
        return Err(corrupt(format!(
            "sections {names:?}, expected {SECTIONS:?}"
        )));
    }
    if let Some(step) = header.meta.perturbed_step_outside(header.steps) {
        return Err(corrupt(format!(
            "perturbed step {step} in the header, but the episode has {} steps",
            header.steps
        )));
    }
    if header.frame_encoding != "png" {
        return Err(corrupt(format!(
            "frame encoding `{}`, expected `png`",
            header.frame_encoding
        )));
    }
    let expected = body as u64 + header.sections.iter().map(|s| s.bytes).sum::<u64>();
    if (bytes.len() as u64) < expected {
        return Err(truncated(expected));
    }
    if bytes.len() as u64 > expected {
        return Err(corrupt(format!(
            "{} bytes after the last section (expected length {expected})",
            bytes.len() as u64 - expected
        )));
    }
    Ok((header, body))
}

fn read_f32s(path: &Path, name: &str, bytes: &[u8], expected: usize) -> Result<Vec<f32>> {
    if bytes.len() != expected * 4 {
        return Err(Error::CorruptDemo {
            path: path.to_path_buf(),
            reason: format!(
                "section `{name}` holds {} bytes, expected {} ({expected} f32 values)",
                bytes.len(),
                expected * 4
            ),
        });
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect())
}

fn read_frames(path: &Path, name: &str, bytes: &[u8], header: &Header) -> Result<Vec<RgbImage>> {
    let corrupt = |reason: String| Error::CorruptDemo {
        path: path.to_path_buf(),
        reason: format!("section `{name}`: {reason}"),
    };
    let mut frames = Vec::with_capacity(header.steps + 1);
    let mut at = 0;
    while at < bytes.len() {
        if at + 4 > bytes.len() {
            return Err(corrupt(format!(
                "frame {} length runs past the section end",
                frames.len()
            )));
        }
        let len = u32_at(bytes, at) as usize;
        let png = bytes
            .get(at + 4..at + 4 + len)
            .ok_or_else(|| corrupt(format!("frame {} runs past the section end", frames.len())))?;
        let frame = image::load_from_memory_with_format(png, image::ImageFormat::Png)
            .map_err(|e| corrupt(format!("frame {}: {e}", frames.len())))?
            .to_rgb8();
        if frame.dimensions() != (header.image_width, header.image_height) {
            return Err(corrupt(format!(
                "frame {} is {:?}, header says {}×{}",
                frames.len(),
                frame.dimensions(),
                header.image_width,
                header.image_height
            )));
        }
        frames.push(frame);
        at += 4 + len;
    }
    if frames.len() != header.steps + 1 {
        return Err(corrupt(format!(
            "{} frames, expected {} (steps + 1)",
            frames.len(),
            header.steps + 1
        )));
    }
    Ok(frames)
}

/// Decodes and checks a whole `.demo` file's bytes.
pub fn decode_episode(path: &Path, bytes: &[u8]) -> Result<Episode> {
    let (header, mut at) = decode_header(path, bytes)?;
    let mut payloads = Vec::with_capacity(SECTIONS.len());
    for section in &header.sections {
        let payload = &bytes[at..at + section.bytes as usize];
        let computed = crc32fast::hash(payload);
        if computed != section.crc32 {
            return Err(Error::ChecksumMismatch {
                path: path.to_path_buf(),
                section: section.name.clone(),
                stored: section.crc32,
                computed,
            });
        }
        payloads.push(payload);
        at += section.bytes as usize;
    }
    let frames = header.steps + 1;
    Ok(Episode {
        actions: read_f32s(
            path,
            "actions",
            payloads[0],
            header.steps * header.action_dim,
        )?,
        labels: read_f32s(
            path,
            "labels",
            payloads[1],
            header.steps * header.action_dim,
        )?,
        proprio: read_f32s(path, "proprio", payloads[2], frames * header.proprio_dim)?,
        agent_view: read_frames(path, "agent_view", payloads[3], &header)?,
        wrist_view: read_frames(path, "wrist_view", payloads[4], &header)?,
        proprio_dim: header.proprio_dim,
        action_dim: header.action_dim,
        meta: header.meta,
    })
}

/// Reads and checks a `.demo` file.
pub fn read_episode(path: &Path) -> Result<Episode> {
    let bytes = std::fs::read(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    decode_episode(path, &bytes)
}
