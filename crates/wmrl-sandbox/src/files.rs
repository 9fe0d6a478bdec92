//! Host-side files of a run, handled without following links: the checked
//! scratch folder, the job's files staged for the jail, and the outputs read
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
/// folder owned by this process's user and writable by no one else: a
/// scratch folder under a shared `/tmp` could otherwise be someone else's.
pub(crate) fn owned_dir(dir: &Path) -> Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io_err(dir))?;
    let meta = std::fs::symlink_metadata(dir).map_err(io_err(dir))?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if !meta.is_dir() || meta.uid() != me || meta.mode() & 0o022 != 0 {
        return Err(Error::UnsafeFolder {
            path: dir.to_path_buf(),
            expected: "a folder (not a link) owned by this user and writable by it only",
        });
    }
    Ok(())
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
