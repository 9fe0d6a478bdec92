//! Run checkpoints: everything a killed run needs to continue as if it had
//! never stopped, kept so that one damaged file cannot end a run.
//!
//! Layout inside the run folder:
//!
//! ```text
//! reference_policy/          the SFT policy the run started from (KL reference), written once
//! checkpoints/iter-000012/
//!     learner/               policy weights, AdamW moments, learner counters
//!     world_model/           weights, AdamW moments, sampler RNG, replay buffer, counters
//!     state.json             iteration, the core (calibrator, denoiser, schedule), clocks, evaluations
//!     MANIFEST.json          size and SHA-256 of every file above, written last
//! ```
//!
//! Each file is written atomically (temp file + rename); a checkpoint is
//! complete once its `MANIFEST.json` is written and verifies, so a `kill -9`
//! while one is being written leaves the earlier ones in force. The newest
//! `checkpoint_keep` complete checkpoints are kept; older ones are removed
//! only after a newer one has verified.
//!
//! On resume ([`select`]) the newest checkpoint whose files match its
//! manifest is used; damaged ones (a truncated, altered or deleted file) are
//! named and skipped, or refused with [`OnDamage::Refuse`]. `metrics.jsonl`
//! is then cut back to the chosen checkpoint's iteration
//! ([`truncate_metrics`]). Checkpoints written before manifests existed
//! (format version 1, named by a `LATEST` file) are still accepted.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use wmrl_core::Core;

use crate::signal::SignalTracker;
use crate::timed::Clock;
use crate::trainer::Evaluation;
use crate::{Error, Result};

/// Folder of checkpoints inside a run folder.
pub const CHECKPOINTS_DIR: &str = "checkpoints";
/// File that named the newest checkpoint before manifests (read for old runs only).
pub const LEGACY_LATEST_FILE: &str = "LATEST";
/// The starting policy, kept as the KL reference and to rebuild the learner.
pub const REFERENCE_POLICY_DIR: &str = "reference_policy";
/// The run's counters inside a checkpoint.
pub const STATE_FILE: &str = "state.json";
const FORMAT: &str = "wmrl-train-checkpoint";
/// Version 2: checkpoints carry a manifest.
const VERSION: u32 = 2;
/// Version 1: no manifest; `LATEST` named the newest.
const LEGACY_VERSION: u32 = 1;

/// `state.json` of a checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunState {
    /// Always `wmrl-train-checkpoint`.
    pub format: String,
    /// Format version (2; 1 for checkpoints without a manifest).
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
    /// Per-task counts of iterations without a learning signal.
    #[serde(default)]
    pub signal: SignalTracker,
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

/// The iteration of a checkpoint folder named `iter-NNNNNN`.
fn iteration_of(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("iter-")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Every checkpoint folder of `run_dir`, complete or not, newest first.
pub fn list(run_dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let root = run_dir.join(CHECKPOINTS_DIR);
    let entries = match std::fs::read_dir(&root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(Error::Io { path: root, source }),
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| Error::Io {
            path: root.clone(),
            source,
        })?;
        if let Some(iteration) = iteration_of(&entry.file_name().to_string_lossy())
            && entry.path().is_dir()
        {
            found.push((iteration, entry.path()));
        }
    }
    found.sort_by_key(|entry| std::cmp::Reverse(entry.0));
    Ok(found)
}

/// Makes the folder of `iteration` ready to be written: a folder of that
/// name left by a stopped or damaged earlier write is removed first.
pub fn prepare(run_dir: &Path, iteration: u64) -> Result<PathBuf> {
    let dir = checkpoint_dir(run_dir, iteration);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|source| Error::Io {
            path: dir.clone(),
            source,
        })?;
    }
    Ok(dir)
}

/// Completes the checkpoint of `iteration`: writes its manifest, verifies
/// every file against it, and only then removes the checkpoints older than
/// the newest `keep` complete ones (and unfinished older folders).
pub fn commit(run_dir: &Path, iteration: u64, keep: usize) -> Result<()> {
    let dir = checkpoint_dir(run_dir, iteration);
    wmrl_report::manifest::write_all(&dir)?;
    wmrl_report::manifest::verify(&dir).map_err(wmrl_report::Error::from)?;
    let mut kept = 1;
    for (older, path) in list(run_dir)? {
        if older >= iteration {
            continue;
        }
        if kept < keep && wmrl_report::manifest::exists(&path) {
            kept += 1;
            continue;
        }
        if let Err(e) = std::fs::remove_dir_all(&path) {
            // Best effort: a folder that cannot be removed only costs disk space.
            tracing::warn!(folder = %path.display(), error = %e, "old checkpoint not removed");
        }
    }
    Ok(())
}

/// What to do when the newest checkpoint does not verify.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnDamage {
    /// Name it and resume from the newest older checkpoint that verifies.
    #[default]
    ResumeOlder,
    /// Refuse to resume (`wmrl train --resume --strict`).
    Refuse,
}

/// The checkpoint a resume starts from, and what was passed over to reach it.
#[derive(Debug, Clone)]
pub struct Selected {
    /// The checkpoint folder.
    pub dir: PathBuf,
    /// Its `state.json`.
    pub state: RunState,
    /// Newer folders that were skipped, each with why (damaged or unfinished).
    pub skipped: Vec<String>,
}

/// The newest checkpoint of `run_dir` whose files match its manifest.
/// `Ok(None)` when the run has no checkpoint folder at all. Folders without
/// a manifest are unfinished writes and are passed over in either mode;
/// a folder whose files do not match its manifest is passed over only with
/// [`OnDamage::ResumeOlder`]. When none verifies, the error names each
/// folder and what is wrong with it. Nothing is changed on disk.
pub fn select(run_dir: &Path, on_damage: OnDamage) -> Result<Option<Selected>> {
    let folders = list(run_dir)?;
    if folders.is_empty() {
        return Ok(None);
    }
    let legacy = legacy_latest(run_dir);
    let mut skipped = Vec::new();
    for (_, dir) in &folders {
        if !wmrl_report::manifest::exists(dir) {
            if legacy.as_deref() == Some(dir.as_path())
                && let Ok(state) = read_state(dir)
                && state.version == LEGACY_VERSION
            {
                tracing::warn!(checkpoint = %dir.display(), "checkpoint predates manifests: resumed without verifying its files");
                return Ok(Some(Selected {
                    dir: dir.clone(),
                    state,
                    skipped,
                }));
            }
            skipped.push(format!(
                "{}: unfinished (no {}; the run stopped while writing it, or the manifest was lost)",
                dir.display(),
                wmrl_report::MANIFEST_FILE
            ));
            continue;
        }
        match wmrl_report::manifest::verify(dir) {
            Ok(_) => {
                let state = read_state(dir)?;
                return Ok(Some(Selected {
                    dir: dir.clone(),
                    state,
                    skipped,
                }));
            }
            Err(damage) if on_damage == OnDamage::Refuse => {
                return Err(Error::Checkpoint {
                    path: dir.clone(),
                    message: format!(
                        "{damage}; refused (--strict); without --strict the run resumes from the newest checkpoint that verifies"
                    ),
                });
            }
            Err(damage) => skipped.push(damage.to_string()),
        }
    }
    Err(Error::Checkpoint {
        path: run_dir.join(CHECKPOINTS_DIR),
        message: format!(
            "no checkpoint verifies, so the run cannot resume (nothing was changed): {}",
            skipped.join("; ")
        ),
    })
}

/// The folder a pre-manifest run's `LATEST` file names, if any.
fn legacy_latest(run_dir: &Path) -> Option<PathBuf> {
    let root = run_dir.join(CHECKPOINTS_DIR);
    let name = std::fs::read_to_string(root.join(LEGACY_LATEST_FILE)).ok()?;
    let name = name.trim();
    iteration_of(name).map(|_| root.join(name))
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
    if state.format != FORMAT || !(LEGACY_VERSION..=VERSION).contains(&state.version) {
        return Err(Error::Checkpoint {
            path,
            message: format!(
                "format `{}` version {} is not a {FORMAT} of version {LEGACY_VERSION} to {VERSION}",
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

    /// A checkpoint folder of `iteration` with one file, committed.
    fn committed(run: &Path, iteration: u64, keep: usize) -> PathBuf {
        let ck = prepare(run, iteration).unwrap();
        std::fs::create_dir_all(ck.join("learner")).unwrap();
        std::fs::write(ck.join("learner/weights.bin"), vec![iteration as u8; 64]).unwrap();
        let state =
            format!("{{\"format\":\"{FORMAT}\",\"version\":{VERSION},\"iteration\":{iteration}}}");
        std::fs::write(ck.join(STATE_FILE), state).unwrap();
        commit(run, iteration, keep).unwrap();
        ck
    }

    /// The folder names under `checkpoints/`.
    fn names(run: &Path) -> Vec<String> {
        list(run)
            .unwrap()
            .into_iter()
            .map(|(_, p)| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn the_newest_k_complete_checkpoints_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path();
        assert!(list(run).unwrap().is_empty());
        committed(run, 0, 2);
        committed(run, 1, 2);
        // An unfinished folder (no manifest) between two complete ones.
        std::fs::create_dir_all(checkpoint_dir(run, 2)).unwrap();
        committed(run, 3, 2);
        assert_eq!(names(run), ["iter-000003", "iter-000001"]);
        committed(run, 4, 1);
        assert_eq!(names(run), ["iter-000004"]);
        assert_eq!(iteration_of("iter-000004"), Some(4));
        assert_eq!(iteration_of("iter-4.damaged"), None);
        assert_eq!(iteration_of("iter-"), None);
    }

    #[test]
    fn with_every_checkpoint_damaged_the_refusal_names_each_and_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path();
        let old = committed(run, 1, 2);
        let new = committed(run, 2, 2);
        std::fs::write(old.join("learner/weights.bin"), b"short").unwrap();
        std::fs::remove_file(new.join(STATE_FILE)).unwrap();
        let before = names(run);
        for on_damage in [OnDamage::ResumeOlder, OnDamage::Refuse] {
            let err = select(run, on_damage).unwrap_err().to_string();
            assert!(
                err.contains("iter-000002") && err.contains("state.json missing"),
                "{err}"
            );
            if on_damage == OnDamage::ResumeOlder {
                assert!(err.contains("no checkpoint verifies"), "{err}");
                assert!(
                    err.contains("iter-000001") && err.contains("learner/weights.bin is 5 bytes"),
                    "{err}"
                );
            } else {
                assert!(err.contains("--strict"), "{err}");
            }
        }
        assert_eq!(names(run), before, "nothing removed");
        assert!(old.join("learner/weights.bin").exists());
        assert!(
            select(&run.join("elsewhere"), OnDamage::Refuse)
                .unwrap()
                .is_none()
        );
    }
}
