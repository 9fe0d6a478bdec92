//! Checkpoint manifests: `MANIFEST.json` lists every file a checkpoint holds
//! with its size and SHA-256, and is written last and atomically, so it is
//! both the checkpoint's "complete" mark and the way to tell a damaged file
//! (truncated, a flipped byte, deleted) from a good one.
//!
//! The checksums are plain SHA-256 of the file bytes, so a person can check
//! a checkpoint by hand with `sha256sum`. Verification reads every listed
//! file and reports every problem it finds, not only the first.

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::{Error, Result};

/// The manifest's file name inside a checkpoint folder.
pub const MANIFEST_FILE: &str = "MANIFEST.json";
const FORMAT: &str = "wmrl-manifest";
const VERSION: u32 = 1;

/// `MANIFEST.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Always `wmrl-manifest`.
    pub format: String,
    /// Format version (1).
    pub version: u32,
    /// The files, by path relative to the checkpoint folder, sorted.
    pub files: Vec<FileEntry>,
}

/// One file of a [`Manifest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileEntry {
    /// Path relative to the checkpoint folder, `/`-separated.
    pub path: String,
    /// Size in bytes.
    pub bytes: u64,
    /// SHA-256 of the contents, lower-case hex.
    pub sha256: String,
}

/// What is wrong with one file of a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The folder has no `MANIFEST.json`: it was never completed, or the
    /// manifest itself was lost.
    NoManifest,
    /// `MANIFEST.json` cannot be read or parsed.
    BadManifest(String),
    /// A listed file is missing.
    Missing(String),
    /// A listed file has another size.
    Size {
        /// The file.
        path: String,
        /// Bytes the manifest lists.
        expected: u64,
        /// Bytes on disk.
        found: u64,
    },
    /// A listed file has the right size and other contents.
    Checksum(String),
    /// A listed file cannot be read.
    Unreadable {
        /// The file.
        path: String,
        /// The I/O error, as the system said it.
        message: String,
    },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::NoManifest => write!(f, "{MANIFEST_FILE} missing (never completed, or lost)"),
            Problem::BadManifest(m) => write!(f, "{MANIFEST_FILE} unreadable: {m}"),
            Problem::Missing(p) => write!(f, "{p} missing"),
            Problem::Size {
                path,
                expected,
                found,
            } => write!(
                f,
                "{path} is {found} bytes, {expected} expected (truncated?)"
            ),
            Problem::Checksum(p) => write!(f, "{p} has another SHA-256 than its manifest's"),
            Problem::Unreadable { path, message } => write!(f, "{path} unreadable: {message}"),
        }
    }
}

/// Every problem found in one checkpoint folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// The checkpoint folder.
    pub dir: PathBuf,
    /// What is wrong, file by file (never empty).
    pub problems: Vec<Problem>,
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} is damaged: ", self.dir.display())?;
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{p}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Damage {}

/// SHA-256 and size of the file at `path`.
fn digest(path: &Path) -> std::io::Result<(u64, String)> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut bytes = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        bytes += n as u64;
        hasher.update(&buf[..n]);
    }
    let hex = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok((bytes, hex))
}

/// True for the temporary siblings of [`crate::write_atomic`] and the like.
fn is_temporary(name: &str) -> bool {
    name.starts_with('.') && name.contains(".tmp")
}

/// Every regular file under `dir` (recursively), relative and sorted,
/// except its own manifest and temporary files.
fn files_under(dir: &Path) -> Result<Vec<String>> {
    fn walk(root: &Path, rel: &Path, out: &mut Vec<String>) -> Result<()> {
        let here = root.join(rel);
        let entries = std::fs::read_dir(&here).map_err(|source| Error::Io {
            path: here.clone(),
            source,
        })?;
        for entry in entries {
            let entry = entry.map_err(|source| Error::Io {
                path: here.clone(),
                source,
            })?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let kind = entry.file_type().map_err(|source| Error::Io {
                path: entry.path(),
                source,
            })?;
            let rel = rel.join(&name);
            if kind.is_dir() {
                walk(root, &rel, out)?;
            } else if kind.is_file() && !is_temporary(&name) && rel != Path::new(MANIFEST_FILE) {
                out.push(rel.to_string_lossy().replace('\\', "/"));
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(dir, Path::new(""), &mut out)?;
    out.sort();
    Ok(out)
}

/// Writes `dir/MANIFEST.json` for `files` (relative to `dir`), atomically.
/// Call it after every listed file is written: it marks the checkpoint complete.
pub fn write(dir: &Path, files: &[&str]) -> Result<Manifest> {
    let mut entries = Vec::with_capacity(files.len());
    let mut names: Vec<&str> = files.to_vec();
    names.sort_unstable();
    names.dedup();
    for name in names {
        let path = dir.join(name);
        let (bytes, sha256) = digest(&path).map_err(|source| Error::Io { path, source })?;
        entries.push(FileEntry {
            path: name.to_string(),
            bytes,
            sha256,
        });
    }
    let manifest = Manifest {
        format: FORMAT.into(),
        version: VERSION,
        files: entries,
    };
    crate::write_json_atomic(&dir.join(MANIFEST_FILE), &manifest)?;
    Ok(manifest)
}

/// Writes `dir/MANIFEST.json` for every file under `dir`, nested folders
/// (and their own manifests) included.
pub fn write_all(dir: &Path) -> Result<Manifest> {
    let files = files_under(dir)?;
    let names: Vec<&str> = files.iter().map(String::as_str).collect();
    write(dir, &names)
}

/// Whether `dir` has a manifest at all (complete, or written before manifests).
pub fn exists(dir: &Path) -> bool {
    dir.join(MANIFEST_FILE).is_file()
}

/// Checks every file `dir/MANIFEST.json` lists: present, of its size and
/// SHA-256. Returns the manifest, or every problem found.
pub fn verify(dir: &Path) -> std::result::Result<Manifest, Damage> {
    let damaged = |problems| Damage {
        dir: dir.to_path_buf(),
        problems,
    };
    let path = dir.join(MANIFEST_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(damaged(vec![Problem::NoManifest]));
        }
        Err(e) => return Err(damaged(vec![Problem::BadManifest(e.to_string())])),
    };
    let manifest: Manifest = serde_json::from_str(&text)
        .map_err(|e| damaged(vec![Problem::BadManifest(e.to_string())]))?;
    if manifest.format != FORMAT || manifest.version != VERSION {
        return Err(damaged(vec![Problem::BadManifest(format!(
            "format `{}` version {} is not a {FORMAT} of version {VERSION}",
            manifest.format, manifest.version
        ))]));
    }
    let mut problems = Vec::new();
    for entry in &manifest.files {
        let file = dir.join(&entry.path);
        match digest(&file) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                problems.push(Problem::Missing(entry.path.clone()));
            }
            Err(e) => problems.push(Problem::Unreadable {
                path: entry.path.clone(),
                message: e.to_string(),
            }),
            Ok((bytes, _)) if bytes != entry.bytes => problems.push(Problem::Size {
                path: entry.path.clone(),
                expected: entry.bytes,
                found: bytes,
            }),
            Ok((_, sha256)) if sha256 != entry.sha256 => {
                problems.push(Problem::Checksum(entry.path.clone()));
            }
            Ok(_) => {}
        }
    }
    if problems.is_empty() {
        Ok(manifest)
    } else {
        Err(damaged(problems))
    }
}

/// Like [`verify`], for folders that may predate manifests: `Ok(false)` when
/// there is none, `Ok(true)` when it verifies.
pub fn verify_if_present(dir: &Path) -> std::result::Result<bool, Damage> {
    if !exists(dir) {
        return Ok(false);
    }
    verify(dir).map(|_| true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("a.bin"), b"hello world").unwrap();
        std::fs::write(dir.path().join("sub/b.json"), b"{}").unwrap();
        std::fs::write(dir.path().join(".a.bin.tmp-1"), b"half").unwrap();
        dir
    }

    #[test]
    fn lists_every_file_with_sha256_and_verifies() {
        let dir = folder();
        let manifest = write_all(dir.path()).unwrap();
        let paths: Vec<_> = manifest.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["a.bin", "sub/b.json"], "temp file left out");
        assert_eq!(
            manifest.files[0].sha256,
            "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9",
            "sha256sum of `hello world`"
        );
        assert_eq!(verify(dir.path()).unwrap(), manifest);
        assert!(verify_if_present(dir.path()).unwrap());
    }

    #[test]
    fn names_each_damaged_file() {
        let dir = folder();
        write_all(dir.path()).unwrap();
        std::fs::write(dir.path().join("a.bin"), b"hello").unwrap();
        std::fs::write(dir.path().join("sub/b.json"), b"[]").unwrap();
        let damage = verify(dir.path()).unwrap_err();
        assert_eq!(
            damage.problems,
            [
                Problem::Size {
                    path: "a.bin".into(),
                    expected: 11,
                    found: 5
                },
                Problem::Checksum("sub/b.json".into()),
            ]
        );
        let text = damage.to_string();
        assert!(
            text.contains("a.bin is 5 bytes") && text.contains("sub/b.json"),
            "{text}"
        );
        std::fs::remove_file(dir.path().join("a.bin")).unwrap();
        assert_eq!(
            verify(dir.path()).unwrap_err().problems[0],
            Problem::Missing("a.bin".into())
        );
    }

    #[test]
    fn a_lost_or_torn_manifest_is_damage_and_absence_is_legacy() {
        let dir = folder();
        assert!(!verify_if_present(dir.path()).unwrap(), "no manifest yet");
        assert_eq!(
            verify(dir.path()).unwrap_err().problems,
            [Problem::NoManifest]
        );
        write_all(dir.path()).unwrap();
        let path = dir.path().join(MANIFEST_FILE);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, &text[..text.len() / 2]).unwrap();
        assert!(matches!(
            verify(dir.path()).unwrap_err().problems[..],
            [Problem::BadManifest(_)]
        ));
    }
}
