//! Metrics as data: one JSON object per line (JSONL), appended and flushed a
//! row at a time. A row torn by a crash can only be the last one, and
//! [`read_rows`] drops it, so a resumed run continues from the rows that made it.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use crate::tensorboard::{EventWriter, scalar_leaves};
use crate::{Error, Result};

/// Appends metric rows to a JSONL file.
#[derive(Debug)]
pub struct MetricsSink {
    path: PathBuf,
    file: File,
    /// TensorBoard events of the same rows.
    tensorboard: Option<Tensorboard>,
}

/// Where a sink's TensorBoard events go. The event file is created with the
/// first row, so a sink opened and dropped (a refused resume) leaves nothing.
#[derive(Debug)]
struct Tensorboard {
    dir: PathBuf,
    /// The row key holding the step.
    step_key: String,
    events: Option<EventWriter>,
}

impl MetricsSink {
    /// Opens `path` for appending, creating it (and its folder) if needed.
    pub fn append(path: &Path) -> Result<Self> {
        let io = |source| Error::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(io)?;
        Ok(Self {
            path: path.to_path_buf(),
            file,
            tensorboard: None,
        })
    }

    /// Also writes every row's numeric leaves as TensorBoard scalars (tags
    /// are key paths joined with `/`, see [`scalar_leaves`]), at the step
    /// the row's `step_key` holds, into a new event file in the metrics
    /// file's folder: `tensorboard --logdir` on that folder, or a parent,
    /// shows the run live. The event file is created with the first row.
    pub fn with_tensorboard(mut self, step_key: &str) -> Self {
        let dir = self
            .path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        self.tensorboard = Some(Tensorboard {
            dir: dir.to_path_buf(),
            step_key: step_key.to_string(),
            events: None,
        });
        self
    }

    /// The file rows go to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes one row (any serialisable value, normally a JSON object).
    pub fn write<T: serde::Serialize + ?Sized>(&mut self, row: &T) -> Result<()> {
        let mut line = serde_json::to_vec(row).map_err(|source| Error::Json {
            path: self.path.clone(),
            source,
        })?;
        line.push(b'\n');
        self.file
            .write_all(&line)
            .and_then(|()| self.file.flush())
            .map_err(|source| Error::Io {
                path: self.path.clone(),
                source,
            })?;
        if let Some(tb) = &mut self.tensorboard {
            let value = serde_json::to_value(row).map_err(|source| Error::Json {
                path: self.path.clone(),
                source,
            })?;
            let step = value
                .get(tb.step_key.as_str())
                .and_then(serde_json::Value::as_i64);
            let events = match &mut tb.events {
                Some(events) => events,
                None => tb.events.insert(EventWriter::create(&tb.dir)?),
            };
            events.scalars(step.unwrap_or(0), &scalar_leaves(&value))?;
        }
        Ok(())
    }
}

/// Reads every complete row of a JSONL file; a torn last line is skipped.
pub fn read_rows(path: &Path) -> Result<Vec<serde_json::Value>> {
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let reader = BufReader::new(File::open(path).map_err(io)?);
    let mut rows = Vec::new();
    for line in reader.lines() {
        let line = line.map_err(io)?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(&line) {
            Ok(value) => rows.push(value),
            Err(_) => break,
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torn_last_row_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metrics.jsonl");
        let mut sink = MetricsSink::append(&path).unwrap();
        sink.write(&serde_json::json!({"step": 1, "loss": 0.5}))
            .unwrap();
        sink.write(&serde_json::json!({"step": 2, "loss": 0.25}))
            .unwrap();
        drop(sink);
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(b"{\"step\": 3, \"lo").unwrap();
        let rows = read_rows(&path).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1]["loss"], 0.25);
    }
}
