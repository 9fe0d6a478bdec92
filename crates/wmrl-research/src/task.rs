//! The task format: a folder a solution is written for (see the crate README).
//!
//! ```text
//! TASK/
//!   task.toml                     id, title, metric, direction, columns, classes
//!   description.md                what to predict, shown to agents
//!   public/train.csv              id, features…, target
//!   public/test.csv               id, features…
//!   public/sample_submission.csv  id, target (a valid, trivial submission)
//!   hidden/answers.csv            id, target — never copied into a sandbox
//!   leaderboard.csv               name, score — reference solutions' scores
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::leaderboard::Leaderboard;
use crate::metric::{Direction, Metric};
use crate::{Error, Result};

/// File names inside a task folder.
pub mod files {
    /// Task metadata.
    pub const SPEC: &str = "task.toml";
    /// Task description.
    pub const DESCRIPTION: &str = "description.md";
    /// Training data (with targets).
    pub const TRAIN: &str = "public/train.csv";
    /// Test inputs (without targets).
    pub const TEST: &str = "public/test.csv";
    /// A valid submission.
    pub const SAMPLE_SUBMISSION: &str = "public/sample_submission.csv";
    /// Hidden test answers.
    pub const ANSWERS: &str = "hidden/answers.csv";
    /// Reference scores.
    pub const LEADERBOARD: &str = "leaderboard.csv";
}

/// `task.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    /// Short identifier (letters, digits, `-`).
    pub id: String,
    /// Human-readable title.
    pub title: String,
    /// The metric's name (`accuracy`, `macro-f1`, `roc-auc`, `rmse`, `mae`).
    pub metric: String,
    /// `higher` or `lower`; must agree with the metric.
    pub direction: Direction,
    /// Name of the id column in every CSV (default: `id`).
    #[serde(default = "default_id")]
    pub id_column: String,
    /// Name of the target column (default: `target`).
    #[serde(default = "default_target")]
    pub target_column: String,
    /// Class labels of a classification task; for `roc-auc` the second is
    /// the positive class (default: empty, a regression task).
    #[serde(default)]
    pub classes: Vec<String>,
}

fn default_id() -> String {
    "id".into()
}

fn default_target() -> String {
    "target".into()
}

/// A loaded task: its spec, test ids, hidden answers and leaderboard.
#[derive(Debug, Clone)]
pub struct Task {
    /// The task folder.
    pub dir: PathBuf,
    /// `task.toml`.
    pub spec: TaskSpec,
    /// The metric.
    pub metric: Metric,
    /// The description text.
    pub description: String,
    /// Test ids in `test.csv` order.
    pub test_ids: Vec<String>,
    /// Hidden answer per test id.
    answers: HashMap<String, String>,
    /// Reference scores (absent until `wmrl research tasks build` made them).
    pub leaderboard: Option<Leaderboard>,
}

fn require(dir: &Path, name: &str) -> Result<PathBuf> {
    let path = dir.join(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(Error::MissingFile {
            task: dir.to_path_buf(),
            file: name.to_string(),
        })
    }
}

/// Reads a CSV's header and the values of `columns` in every row.
pub(crate) fn read_columns(
    path: &Path,
    columns: &[&str],
) -> Result<(Vec<String>, Vec<Vec<String>>)> {
    let mut reader = csv::Reader::from_path(path).map_err(|e| Error::csv(path, e))?;
    let headers: Vec<String> = reader
        .headers()
        .map_err(|e| Error::csv(path, e))?
        .iter()
        .map(str::to_string)
        .collect();
    let mut index = Vec::new();
    for c in columns {
        let i = headers
            .iter()
            .position(|h| h == c)
            .ok_or_else(|| Error::BadFile {
                path: path.to_path_buf(),
                line: 1,
                message: format!("no column `{c}` in header `{}`", headers.join(",")),
            })?;
        index.push(i);
    }
    let mut rows = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| Error::csv(path, e))?;
        rows.push(
            index
                .iter()
                .map(|&i| record.get(i).unwrap_or("").to_string())
                .collect(),
        );
    }
    Ok((headers, rows))
}

impl Task {
    /// Loads and checks a task folder. A missing leaderboard is allowed
    /// (`leaderboard` is then `None`); anything else missing or inconsistent
    /// is an error naming the file.
    pub fn load(dir: &Path) -> Result<Self> {
        let _span = tracing::debug_span!("load_task", dir = %dir.display()).entered();
        let spec_path = require(dir, files::SPEC)?;
        let text = std::fs::read_to_string(&spec_path).map_err(|source| Error::Io {
            path: spec_path.clone(),
            source,
        })?;
        let spec: TaskSpec = toml::from_str(&text).map_err(|e| Error::BadFile {
            path: spec_path.clone(),
            line: 0,
            message: e.to_string(),
        })?;
        let metric: Metric = spec.metric.parse().map_err(|message| Error::BadFile {
            path: spec_path.clone(),
            line: 0,
            message,
        })?;
        if metric.direction() != spec.direction {
            return Err(Error::BadFile {
                path: spec_path,
                line: 0,
                message: format!(
                    "direction `{}` contradicts metric `{metric}`, which is {}-is-better",
                    spec.direction.name(),
                    metric.direction().name()
                ),
            });
        }
        if metric == Metric::RocAuc && spec.classes.len() != 2 {
            return Err(Error::BadFile {
                path: spec_path,
                line: 0,
                message: format!(
                    "roc-auc needs exactly 2 classes, got {}",
                    spec.classes.len()
                ),
            });
        }
        let description_path = require(dir, files::DESCRIPTION)?;
        let description =
            std::fs::read_to_string(&description_path).map_err(|source| Error::Io {
                path: description_path,
                source,
            })?;
        let train = require(dir, files::TRAIN)?;
        read_columns(&train, &[&spec.id_column, &spec.target_column])?;
        require(dir, files::SAMPLE_SUBMISSION)?;
        let test = require(dir, files::TEST)?;
        let (_, test_rows) = read_columns(&test, &[&spec.id_column])?;
        let test_ids: Vec<String> = test_rows.into_iter().map(|mut r| r.remove(0)).collect();
        let answers_path = require(dir, files::ANSWERS)?;
        let (_, answer_rows) =
            read_columns(&answers_path, &[&spec.id_column, &spec.target_column])?;
        let answers: HashMap<String, String> = answer_rows
            .into_iter()
            .map(|mut r| (r.remove(0), r.remove(0)))
            .collect();
        if let Some(missing) = test_ids.iter().find(|id| !answers.contains_key(*id)) {
            return Err(Error::BadFile {
                path: answers_path,
                line: 0,
                message: format!("no answer for test id `{missing}`"),
            });
        }
        if answers.len() != test_ids.len() {
            return Err(Error::BadFile {
                path: answers_path,
                line: 0,
                message: format!("{} answers for {} test ids", answers.len(), test_ids.len()),
            });
        }
        let board_path = dir.join(files::LEADERBOARD);
        let leaderboard = if board_path.is_file() {
            Some(Leaderboard::load(&board_path, metric.direction())?)
        } else {
            None
        };
        Ok(Self {
            dir: dir.to_path_buf(),
            spec,
            metric,
            description,
            test_ids,
            answers,
            leaderboard,
        })
    }

    /// An in-memory classification task with id `id` and no data, for unit tests.
    #[cfg(test)]
    pub(crate) fn for_tests(id: &str) -> Self {
        Self {
            dir: PathBuf::from(id),
            spec: TaskSpec {
                id: id.to_string(),
                title: id.to_string(),
                metric: "accuracy".into(),
                direction: Direction::Higher,
                id_column: default_id(),
                target_column: default_target(),
                classes: vec!["a".into(), "b".into()],
            },
            metric: Metric::Accuracy,
            description: String::new(),
            test_ids: Vec::new(),
            answers: HashMap::new(),
            leaderboard: None,
        }
    }

    /// The task's id.
    pub fn id(&self) -> &str {
        &self.spec.id
    }

    /// The hidden answer of a test id.
    pub fn answer(&self, id: &str) -> Option<&str> {
        self.answers.get(id).map(String::as_str)
    }

    /// The host paths of the public files copied into a sandbox, with their names there.
    pub fn public_files(&self) -> Vec<(String, PathBuf)> {
        [files::TRAIN, files::TEST, files::SAMPLE_SUBMISSION]
            .iter()
            .map(|f| {
                (
                    Path::new(f)
                        .file_name()
                        .expect("file name")
                        .to_string_lossy()
                        .into_owned(),
                    self.dir.join(f),
                )
            })
            .collect()
    }

    /// The leaderboard percentile of a score; an error if the task has no leaderboard yet.
    pub fn percentile(&self, score: f64) -> Result<f64> {
        let board = self
            .leaderboard
            .as_ref()
            .ok_or_else(|| Error::MissingFile {
                task: self.dir.clone(),
                file: files::LEADERBOARD.into(),
            })?;
        Ok(board.percentile(score))
    }

    /// A fingerprint of everything that decides a solution's score (spec,
    /// public data, answers): part of the execution cache key.
    pub fn fingerprint(&self) -> Result<String> {
        use sha2::{Digest, Sha256};
        let mut hasher = Sha256::new();
        for f in [files::SPEC, files::TRAIN, files::TEST, files::ANSWERS] {
            let path = self.dir.join(f);
            let bytes = std::fs::read(&path).map_err(|source| Error::Io { path, source })?;
            hasher.update((bytes.len() as u64).to_le_bytes());
            hasher.update(&bytes);
        }
        Ok(crate::hex(&hasher.finalize()))
    }
}
