//! Run checkpoints: everything a killed run needs to continue as if it had
//! never stopped.
//!
//! Layout inside the run folder:
//!
//! ```text
//! reference_policy/          the SFT policy the run started from (KL reference), written once
//! checkpoints/LATEST         name of the newest complete checkpoint (written atomically, last)
//! checkpoints/iter-000012/
//!     learner/               policy weights, AdamW moments, learner counters
//!     world_model/           weights, AdamW moments, sampler RNG, replay buffer, counters
//!     state.json             iteration, the core (calibrator, denoiser, schedule), clocks, evaluations
//! ```
//!
//! Each file is written atomically (temp file + rename); a checkpoint counts
//! only once `LATEST` names it, so a `kill -9` while one is being written
//! leaves the previous one in force. Older checkpoint folders are removed
//! after `LATEST` moves on. On resume, `metrics.jsonl` is cut back to the
//! checkpoint's iteration: at most the iteration in flight is lost.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use wmrl_core::Core;

use crate::timed::Clock;
use crate::trainer::Evaluation;
use crate::{Error, Result};

/// Folder of checkpoints inside a run folder.
pub const CHECKPOINTS_DIR: &str = "checkpoints";
/// File naming the newest complete checkpoint.
pub const LATEST_FILE: &str = "LATEST";
/// The starting policy, kept as the KL reference and to rebuild the learner.
pub const REFERENCE_POLICY_DIR: &str = "reference_policy";
/// The run's counters inside a checkpoint.
pub const STATE_FILE: &str = "state.json";
const FORMAT: &str = "wmrl-train-checkpoint";
const VERSION: u32 = 1;

/// `state.json` of a checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunState {
    /// Always `wmrl-train-checkpoint`.
    pub format: String,
    /// Format version (1).
    pub version: u32,
    /// Iterations completed.
    pub iteration: u64,
    /// Mode of the run.
    pub mode: String,
    /// The core: step counter, calibrator, denoiser, anchor schedule.
    pub core: Core,
    /// Real episodes executed by training.
    pub executions: u64,
    /// Imagined episodes of the training groups (anchors' imagined twins not included).
    pub imagined: u64,
    /// Wall-clock seconds of training.
    pub train_seconds: f64,
    /// The simulator's clock (seconds, real environment steps).
    pub simulator: Clock,
    /// The world model's clock.
    pub world_model: Clock,
    /// The learner's clock.
    pub learner: Clock,
    /// Evaluations so far.
    pub evaluations: Vec<Evaluation>,
    /// Episodes the replay buffer was seeded with.
    pub replay_seeded: usize,
}

impl RunState {
    /// Stamps format and version.
    pub fn stamp(mut self) -> Self {
        self.format = FORMAT.into();
        self.version = VERSION;
        self
    }
}

/// Folder of the checkpoint after `iteration`.
pub fn checkpoint_dir(run_dir: &Path, iteration: u64) -> PathBuf {
    run_dir
        .join(CHECKPOINTS_DIR)
        .join(format!("iter-{iteration:06}"))
}

/// The newest complete checkpoint of `run_dir`, if any.
pub fn latest(run_dir: &Path) -> Result<Option<PathBuf>> {
    let path = run_dir.join(CHECKPOINTS_DIR).join(LATEST_FILE);
    if !path.exists() {
        return Ok(None);
    }
    let name = std::fs::read_to_string(&path).map_err(|source| Error::Io {
        path: path.clone(),
        source,
    })?;
    let name = name.trim();
    let dir = run_dir.join(CHECKPOINTS_DIR).join(name);
    if name.is_empty() || name.contains('/') || !dir.join(STATE_FILE).exists() {
        return Err(Error::Checkpoint {
            path,
            message: format!("names `{name}`, which is not a complete checkpoint folder"),
        });
    }
    Ok(Some(dir))
}

/// Makes the checkpoint of `iteration` the newest, then removes the others.
pub fn commit(run_dir: &Path, iteration: u64) -> Result<()> {
    let dir = checkpoint_dir(run_dir, iteration);
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    let root = run_dir.join(CHECKPOINTS_DIR);
    wmrl_report::write_atomic(&root.join(LATEST_FILE), name.as_bytes())?;
    remove_others(&root, &name);
    Ok(())
}

/// Removes every checkpoint folder of `root` except `keep` (best effort:
/// a folder that cannot be removed only costs disk space).
pub fn remove_others(root: &Path, keep: &str) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("iter-")
            && name != keep
            && let Err(e) = std::fs::remove_dir_all(entry.path())
        {
            tracing::warn!(folder = %entry.path().display(), error = %e, "old checkpoint not removed");
        }
    }
}

/// Reads and checks `state.json` of checkpoint `dir`.
pub fn read_state(dir: &Path) -> Result<RunState> {
    let path = dir.join(STATE_FILE);
    let text = std::fs::read_to_string(&path).map_err(|source| Error::Io {
        path: path.clone(),
        source,
    })?;
    let state: RunState = serde_json::from_str(&text).map_err(|e| Error::Checkpoint {
        path: path.clone(),
        message: e.to_string(),
    })?;
    if state.format != FORMAT || state.version != VERSION {
        return Err(Error::Checkpoint {
            path,
            message: format!(
                "format `{}` version {} is not a {FORMAT} of version {VERSION}",
                state.format, state.version
            ),
        });
    }
    Ok(state)
}

/// Cuts `metrics.jsonl` back to the rows of iterations `1..=iteration`
/// (dropping a half-written last line too), atomically.
pub fn truncate_metrics(path: &Path, iteration: u64) -> Result<()> {
    if !path.exists() {
        return Ok(());
    }
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.into(),
        source,
    })?;
    let mut kept = String::new();
    for line in text.lines() {
        let row: Option<serde_json::Value> = serde_json::from_str(line).ok();
        let it = row.as_ref().and_then(|r| r["iteration"].as_u64());
        if it.is_some_and(|i| i <= iteration) {
            kept.push_str(line);
            kept.push('\n');
        }
    }
    wmrl_report::write_atomic(path, kept.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_are_cut_back_to_the_checkpoint_and_a_torn_line_goes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metrics.jsonl");
        std::fs::write(
            &path,
            "{\"iteration\":1}\n{\"iteration\":2}\n{\"iteration\":3}\n{\"itera",
        )
        .unwrap();
        truncate_metrics(&path, 2).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"iteration\":1}\n{\"iteration\":2}\n"
        );
    }

    #[test]
    fn latest_names_only_complete_checkpoints() {
        let dir = tempfile::tempdir().unwrap();
        assert!(latest(dir.path()).unwrap().is_none());
        let ck = checkpoint_dir(dir.path(), 3);
        std::fs::create_dir_all(&ck).unwrap();
        std::fs::write(ck.join(STATE_FILE), "{}").unwrap();
        std::fs::create_dir_all(checkpoint_dir(dir.path(), 2)).unwrap();
        commit(dir.path(), 3).unwrap();
        assert_eq!(latest(dir.path()).unwrap(), Some(ck));
        assert!(
            !checkpoint_dir(dir.path(), 2).exists(),
            "older folder removed"
        );
        std::fs::write(
            dir.path().join(CHECKPOINTS_DIR).join(LATEST_FILE),
            "iter-000009",
        )
        .unwrap();
        let err = latest(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("iter-000009") && err.contains("LATEST"),
            "{err}"
        );
    }
}
