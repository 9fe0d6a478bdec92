//! Atomic file writes: write a temporary file beside the target, flush it to
//! disk, then rename it over the target, so a reader (or a resumed run after a
//! `kill -9`) sees either the old file or the new one, never a torn one.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// The temporary sibling used while writing `path`.
pub fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}

/// Writes `bytes` to `path` atomically (temp file + fsync + rename).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    let tmp = temp_path(path);
    let mut file = std::fs::File::create(&tmp).map_err(io)?;
    file.write_all(bytes).map_err(io)?;
    file.sync_all().map_err(io)?;
    drop(file);
    std::fs::rename(&tmp, path).map_err(io)
}

/// Serialises `value` as pretty JSON and writes it atomically.
pub fn write_json_atomic<T: serde::Serialize + ?Sized>(path: &Path, value: &T) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(|source| Error::Json {
        path: path.to_path_buf(),
        source,
    })?;
    bytes.push(b'\n');
    write_atomic(path, &bytes)
}

/// Writes `rows` as JSONL (one compact JSON object per line) atomically,
/// replacing the whole file: for metrics recomputed as a whole rather than
/// appended row by row ([`crate::MetricsSink`]).
pub fn write_jsonl_atomic<T: serde::Serialize>(path: &Path, rows: &[T]) -> Result<()> {
    let mut bytes = Vec::new();
    for row in rows {
        serde_json::to_writer(&mut bytes, row).map_err(|source| Error::Json {
            path: path.to_path_buf(),
            source,
        })?;
        bytes.push(b'\n');
    }
    write_atomic(path, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonl_rows_replace_the_earlier_rows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metrics.jsonl");
        write_jsonl_atomic(&path, &[1, 2, 3]).unwrap();
        write_jsonl_atomic(&path, &[4, 5]).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "4\n5\n");
    }

    #[test]
    fn replaces_whole_file_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/state.json");
        write_json_atomic(&path, &[1, 2, 3]).unwrap();
        write_json_atomic(&path, &[4]).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(serde_json::from_str::<Vec<i32>>(&text).unwrap(), vec![4]);
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "temp file left behind: {names:?}");
    }
}
