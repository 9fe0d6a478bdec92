//! `manifest.json`: what a demonstration folder was collected for.
//!
//! Written by `wmrl data collect` beside the episode files. The loader uses it
//! to know which tasks must be present: a task listed here with no successful
//! episode on disk stops training with a clear message.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// File name of the manifest inside a demonstration folder.
pub const MANIFEST_FILE: &str = "manifest.json";
/// Value of [`Manifest::format`].
pub const FORMAT: &str = "wmrl-demos";

/// One task of a collection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestTask {
    /// Task index in the suite.
    pub task_index: usize,
    /// Task name.
    pub task_name: String,
    /// Instruction.
    pub instruction: String,
    /// Episodes written.
    pub episodes: usize,
    /// Successful episodes written.
    pub successes: usize,
}

/// A demonstration folder's manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Always `wmrl-demos`.
    pub format: String,
    /// Suite name.
    pub suite: String,
    /// Tasks collected, in index order.
    pub tasks: Vec<ManifestTask>,
    /// How the episodes were produced (expert, noise, seeds, image size…).
    #[serde(default)]
    pub info: serde_json::Value,
}

impl Manifest {
    /// Reads `path` when it exists.
    pub fn read_if_present(path: &Path) -> Result<Option<Self>> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(Error::Io {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        let manifest: Self = serde_json::from_str(&text).map_err(|source| Error::Json {
            path: path.to_path_buf(),
            source,
        })?;
        if manifest.format != FORMAT {
            return Err(Error::CorruptDemo {
                path: path.to_path_buf(),
                reason: format!("format `{}`, expected `{FORMAT}`", manifest.format),
            });
        }
        Ok(Some(manifest))
    }

    /// Writes the manifest atomically.
    pub fn write(&self, path: &Path) -> Result<()> {
        wmrl_report::write_json_atomic(path, self)?;
        Ok(())
    }
}
