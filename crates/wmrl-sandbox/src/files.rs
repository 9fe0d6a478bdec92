//! Host-side files of a run, handled without following links: the checked
//! scratch and lease folders, the job's files staged for the jail, and the outputs read
//! back through a descriptor of the work folder.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

use crate::sandbox::JobFile;
use crate::{Error, Result};

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.to_path_buf();
    move |source| Error::Io { path, source }
}

/// Creates `dir` (mode 0700) when missing and checks that it is a real
/// folder owned by `owner` and writable by no one else, and that no one
/// else could replace it: every folder above it belongs to root or `owner`
/// and is writable by no one else unless sticky (like `/tmp`), and a link
/// on the way (owned by root or `owner`) leads to such folders too. A
/// scratch or lease folder under a shared `/tmp` could otherwise be someone
/// else's, or be swapped for a link between the check and its use.
pub(crate) fn checked_dir(dir: &Path, owner: u32, expected: &'static str) -> Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io_err(dir))?;
    let unsafe_folder = || Error::UnsafeFolder {
        path: dir.to_path_buf(),
        expected,
    };
    let meta = std::fs::symlink_metadata(dir).map_err(io_err(dir))?;
    if !meta.is_dir() || meta.uid() != owner || meta.mode() & 0o022 != 0 {
        return Err(unsafe_folder());
    }
    let absolute = std::path::absolute(dir).map_err(io_err(dir))?;
    match absolute.parent() {
        Some(parent) if !trusted_chain(parent, owner, 2)? => Err(unsafe_folder()),
        _ => Ok(()),
    }
}

/// Whether `path` and every folder above it could be changed only by root
/// or `owner` (see [`checked_dir`]); links are followed `hops` deep at most.
fn trusted_chain(path: &Path, owner: u32, hops: u32) -> Result<bool> {
    let mut prefix = std::path::PathBuf::new();
    for part in path.components() {
        prefix.push(part);
        let meta = std::fs::symlink_metadata(&prefix).map_err(io_err(&prefix))?;
        if meta.uid() != 0 && meta.uid() != owner {
            return Ok(false);
        }
        if meta.file_type().is_symlink() {
            let real = std::fs::canonicalize(&prefix).map_err(io_err(&prefix))?;
            if hops == 0 || !trusted_chain(&real, owner, hops - 1)? {
                return Ok(false);
            }
        } else if !meta.is_dir() || (meta.mode() & 0o022 != 0 && meta.mode() & 0o1000 == 0) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// A fresh folder `dir` (mode 0700), failing if anything is at its place.
pub(crate) fn fresh_dir(dir: &Path) -> Result<()> {
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(dir)
        .map_err(io_err(dir))
}

/// Writes `source` to the new file `dst` (never an existing file or link).
pub(crate) fn stage(dst: &Path, source: &JobFile) -> Result<()> {
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(dst)
        .map_err(io_err(dst))?;
    match source {
        JobFile::Bytes(bytes) => out.write_all(bytes).map_err(io_err(dst)),
        JobFile::Path(src) => {
            let mut input = std::fs::File::open(src).map_err(io_err(src))?;
            std::io::copy(&mut input, &mut out)
                .map(drop)
                .map_err(io_err(src))
        }
    }
}

/// Reads `name` in the folder `dir` (at most `max` bytes), refusing links and
/// anything not a regular file: what a run leaves is not trusted.
pub(crate) fn read_regular_at(dir: BorrowedFd<'_>, name: &str, max: u64) -> Option<Vec<u8>> {
    let c_name = std::ffi::CString::new(name).ok()?;
    // SAFETY: openat on a valid folder descriptor; the result is owned below.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c_name.as_ptr(),
            libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` was just opened and is owned by nothing else.
    let file = unsafe { std::fs::File::from_raw_fd(fd) };
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(max).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}
