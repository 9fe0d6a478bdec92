//! Running a solution for real: `python3 solution.py` in the sandbox with the
//! task's public files, then validation and scoring of `submission.csv`
//! against the hidden answers (read by this process, never by the solution).
//!
//! Every run ends in one [`Outcome`]. Its reward is the leaderboard percentile
//! when scored and 0 otherwise: a crash, a timeout or an invalid submission is
//! a (completed) failed attempt, not an execution error.
//!
//! **Execution cache.** Executions are deterministic functions of (task data,
//! solution text, limits): solutions are rendered with fixed random seeds.
//! [`ExecutionCache`] stores each real execution's outcome under
//! SHA-256(task fingerprint ‖ limits ‖ solution text) in a JSONL file, and a
//! repeated solution is answered from it. Every cached entry is the record of
//! a real sandbox run; the runner counts both requested executions (what an
//! algorithm spent) and sandbox runs (what this machine spent).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use wmrl_sandbox::{Job, JobFile, LimitKind, Limits, RunReport, Sandbox, Termination};

use crate::submission::score_submission;
use crate::task::Task;
use crate::{Error, Result};

/// How one execution ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum Outcome {
    /// A valid submission was scored.
    Scored {
        /// The metric's value.
        score: f64,
    },
    /// The program finished but its submission is missing or invalid.
    InvalidSubmission {
        /// The first problem found.
        reason: String,
    },
    /// The program failed (non-zero exit or a signal) without evidence of a
    /// limit; its stderr may still say why (`MemoryError` when `RLIMIT_AS`
    /// refused an allocation, which the kernel does not count).
    Crashed {
        /// How it ended.
        termination: Termination,
        /// The last lines of its stderr.
        stderr_tail: String,
    },
    /// The wall-clock limit passed; the whole run was killed.
    TimedOut,
    /// A resource limit stopped it, on the kernel's evidence (signal, cgroup
    /// counters, a full folder: `RunReport::limit_hit`), never on what the
    /// solution printed.
    ResourceLimit {
        /// Which one.
        limit: LimitKind,
    },
}

impl Outcome {
    /// Short name (`scored`, `invalid-submission`, `crashed`, `timed-out`, `resource-limit`).
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::Scored { .. } => "scored",
            Outcome::InvalidSubmission { .. } => "invalid-submission",
            Outcome::Crashed { .. } => "crashed",
            Outcome::TimedOut => "timed-out",
            Outcome::ResourceLimit { .. } => "resource-limit",
        }
    }

    /// The score when scored.
    pub fn score(&self) -> Option<f64> {
        match self {
            Outcome::Scored { score } => Some(*score),
            _ => None,
        }
    }

    /// Classifies a finished sandbox run.
    pub fn from_report(task: &Task, report: &RunReport) -> Self {
        if report.termination == Termination::TimedOut {
            return Outcome::TimedOut;
        }
        if let Some(limit) = report.limit_hit {
            return Outcome::ResourceLimit { limit };
        }
        if !report.succeeded() {
            // What the solution wrote is shown on terminals: each line bounded
            // and its control characters (escape sequences) escaped.
            let lines: Vec<String> = report
                .stderr
                .text
                .lines()
                .rev()
                .take(5)
                .map(|l| wmrl_sandbox::printable(l, 300))
                .collect();
            let tail = lines.into_iter().rev().collect::<Vec<_>>().join("\n");
            return Outcome::Crashed {
                termination: report.termination,
                stderr_tail: tail,
            };
        }
        match report.files.get(SUBMISSION) {
            None => Outcome::InvalidSubmission {
                reason: format!("no {SUBMISSION} was written"),
            },
            Some(bytes) => match score_submission(task, bytes) {
                Ok(score) => Outcome::Scored { score },
                Err(reason) => Outcome::InvalidSubmission { reason },
            },
        }
    }
}

/// The file a solution writes.
pub const SUBMISSION: &str = "submission.csv";
/// The name the solution runs under.
pub const SOLUTION: &str = "solution.py";

/// One execution's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecutionRecord {
    /// Cache key (see the module docs).
    pub key: String,
    /// Task id.
    pub task: String,
    /// How it ended.
    pub outcome: Outcome,
    /// Wall-clock seconds of the real run.
    pub wall_time_s: f64,
    /// Leaderboard percentile in [0, 1] (0 unless scored; absent without a leaderboard).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percentile: Option<f64>,
    /// Whether this record was answered from the cache.
    #[serde(skip)]
    pub cached: bool,
}

impl ExecutionRecord {
    /// The reward: the percentile when scored, 0 otherwise.
    pub fn reward(&self) -> f64 {
        self.percentile.unwrap_or(0.0)
    }
}

/// Real executions by key, persisted as JSONL.
#[derive(Debug)]
pub struct ExecutionCache {
    entries: Mutex<HashMap<String, ExecutionRecord>>,
    sink: Mutex<wmrl_report::MetricsSink>,
}

impl ExecutionCache {
    /// Opens (or creates) the cache file.
    pub fn open(path: &Path) -> Result<Self> {
        let mut entries = HashMap::new();
        if path.exists() {
            for row in wmrl_report::metrics::read_rows(path)? {
                if let Ok(record) = serde_json::from_value::<ExecutionRecord>(row) {
                    entries.insert(record.key.clone(), record);
                }
            }
        }
        let sink = wmrl_report::MetricsSink::append(path)?;
        Ok(Self {
            entries: Mutex::new(entries),
            sink: Mutex::new(sink),
        })
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.lock().expect("cache lock").len()
    }

    /// Whether empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn get(&self, key: &str) -> Option<ExecutionRecord> {
        self.entries.lock().expect("cache lock").get(key).cloned()
    }

    fn put(&self, record: &ExecutionRecord) -> Result<()> {
        let mut stored = record.clone();
        stored.percentile = None;
        self.sink.lock().expect("cache lock").write(&stored)?;
        self.entries
            .lock()
            .expect("cache lock")
            .insert(record.key.clone(), stored);
        Ok(())
    }
}

/// Counters of a [`SolutionRunner`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunnerStats {
    /// Executions asked for.
    pub requested: u64,
    /// Of those, answered by a real sandbox run now.
    pub sandbox_runs: u64,
    /// Of those, answered from the cache (earlier real runs).
    pub cache_hits: u64,
}

/// Runs solutions for tasks in the sandbox (the anchor executor's engine).
#[derive(Debug, Clone)]
pub struct SolutionRunner {
    sandbox: Sandbox,
    cache: Option<Arc<ExecutionCache>>,
    fingerprints: Arc<Mutex<HashMap<PathBuf, String>>>,
    requested: Arc<AtomicU64>,
    runs: Arc<AtomicU64>,
    hits: Arc<AtomicU64>,
}

impl SolutionRunner {
    /// A runner over `sandbox`, with an optional cache.
    pub fn new(sandbox: Sandbox, cache: Option<ExecutionCache>) -> Self {
        Self {
            sandbox,
            cache: cache.map(Arc::new),
            fingerprints: Arc::default(),
            requested: Arc::default(),
            runs: Arc::default(),
            hits: Arc::default(),
        }
    }

    /// The sandbox.
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// Counters so far.
    pub fn stats(&self) -> RunnerStats {
        RunnerStats {
            requested: self.requested.load(Ordering::Relaxed),
            sandbox_runs: self.runs.load(Ordering::Relaxed),
            cache_hits: self.hits.load(Ordering::Relaxed),
        }
    }

    fn key(&self, task: &Task, limits: &Limits, solution: &str) -> Result<String> {
        let fingerprint = {
            let mut map = self.fingerprints.lock().expect("fingerprint lock");
            match map.get(&task.dir) {
                Some(f) => f.clone(),
                None => {
                    let f = task.fingerprint()?;
                    map.insert(task.dir.clone(), f.clone());
                    f
                }
            }
        };
        let mut hasher = Sha256::new();
        hasher.update(fingerprint.as_bytes());
        hasher.update(serde_json::to_vec(limits).expect("limits serialise"));
        hasher.update(solution.as_bytes());
        Ok(crate::hex(&hasher.finalize()))
    }

    /// Executes `solution` for `task` (or answers from the cache) and scores it.
    pub async fn run(&self, task: &Task, solution: &str) -> Result<ExecutionRecord> {
        self.requested.fetch_add(1, Ordering::Relaxed);
        let limits = self.sandbox.config().limits.clone();
        let key = self.key(task, &limits, solution)?;
        let with_percentile = |mut record: ExecutionRecord| -> Result<ExecutionRecord> {
            record.percentile = match (&record.outcome, &task.leaderboard) {
                (Outcome::Scored { score }, Some(_)) => Some(task.percentile(*score)?),
                (_, Some(_)) => Some(0.0),
                (_, None) => None,
            };
            Ok(record)
        };
        if let Some(record) = self.cache.as_ref().and_then(|c| c.get(&key)) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return with_percentile(ExecutionRecord {
                cached: true,
                ..record
            });
        }
        // An isolated sandbox that binds the task's folder in is a mistake to
        // refuse. Unisolated, every file is visible: that is the explicit,
        // loudly warned opt-out (`--allow-unisolated`), not a reason to refuse.
        if self.sandbox.isolation().is_isolated()
            && self
                .sandbox
                .exposes(&task.dir.join(crate::task::files::ANSWERS))
        {
            return Err(Error::Build {
                what: format!("sandbox for {}", task.id()),
                message: format!(
                    "the hidden answers of {} would be visible inside the sandbox (the task lies under a folder bound into it)",
                    task.dir.display()
                ),
            });
        }
        let mut files: Vec<(String, JobFile)> = task
            .public_files()
            .into_iter()
            .map(|(name, path)| (name, JobFile::Path(path)))
            .collect();
        files.push((SOLUTION.into(), JobFile::Bytes(solution.as_bytes().into())));
        let job = Job {
            args: vec![SOLUTION.into()],
            files,
            collect: vec![SUBMISSION.into()],
            collect_max_bytes: 64 << 20,
            limits: None,
        };
        let report = self.sandbox.run(job).await?;
        self.runs.fetch_add(1, Ordering::Relaxed);
        let outcome = Outcome::from_report(task, &report);
        tracing::debug!(
            task = task.id(),
            outcome = outcome.name(),
            wall_s = report.wall_time.as_secs_f64(),
            "executed"
        );
        let record = ExecutionRecord {
            key,
            task: task.id().to_string(),
            outcome,
            wall_time_s: report.wall_time.as_secs_f64(),
            percentile: None,
            cached: false,
        };
        if let Some(cache) = &self.cache {
            cache.put(&record)?;
        }
        with_percentile(record)
    }

    /// Runs a batch concurrently (bounded by the sandbox's semaphore); one
    /// result per item, in order (an `Err` is a failure of the machinery for
    /// that item, not of the solution).
    pub async fn run_batch(&self, items: &[(Arc<Task>, String)]) -> Vec<Result<ExecutionRecord>> {
        let mut set = tokio::task::JoinSet::new();
        for (i, (task, solution)) in items.iter().enumerate() {
            let (runner, task, solution) = (self.clone(), task.clone(), solution.clone());
            set.spawn(async move { (i, runner.run(&task, &solution).await) });
        }
        let mut out: Vec<Option<Result<ExecutionRecord>>> =
            (0..items.len()).map(|_| None).collect();
        while let Some(joined) = set.join_next().await {
            match joined {
                Ok((i, result)) => out[i] = Some(result),
                Err(e) => tracing::error!(%e, "an execution task panicked"),
            }
        }
        out.into_iter()
            .map(|r| {
                r.unwrap_or_else(|| {
                    Err(Error::Build {
                        what: "execution".into(),
                        message: "task panicked".into(),
                    })
                })
            })
            .collect()
    }
}
