//! Finds (or installs) the libtorch that tch 0.24 binds, and builds the
//! environment cargo needs to link against it and to run what it built.
//!
//! Order of search:
//! 1. the `LIBTORCH` environment variable, checked to hold PyTorch 2.11.0;
//! 2. a project-local, git-ignored Python venv (`.venv/`) with the packages of
//!    `xtask/python-requirements.txt` (torch==2.11.0 and the sandboxes' Python
//!    packages), created with `python3 -m venv` + pip when missing or stale.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The PyTorch release tch 0.24 binds; see the pin in the root Cargo.toml.
pub const TORCH_VERSION: &str = "2.11.0";

/// Where the libtorch in use came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    EnvVar,
    ProjectVenv,
}

/// A libtorch directory checked to hold the right version.
#[derive(Debug, Clone)]
pub struct Libtorch {
    pub dir: PathBuf,
    pub version: String,
    pub source: Source,
}

/// Everything that can go wrong while finding libtorch, each with what to do.
#[derive(Debug)]
pub enum Error {
    EnvVarNotADir(PathBuf),
    MissingLibrary {
        dir: PathBuf,
        lib: &'static str,
    },
    WrongVersion {
        dir: PathBuf,
        found: String,
    },
    UnknownVersion(PathBuf),
    NoPython(String),
    VenvFailed {
        venv: PathBuf,
        detail: String,
    },
    PipFailed {
        venv: PathBuf,
        requirements: PathBuf,
        status: String,
    },
    TorchNotInVenv(PathBuf),
    Io {
        path: PathBuf,
        err: std::io::Error,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::EnvVarNotADir(p) => write!(
                f,
                "LIBTORCH={} is not a directory.\n  Point LIBTORCH at a libtorch {TORCH_VERSION} \
                 directory (or a pip torch package dir), or unset it to let `cargo xtask` \
                 install torch=={TORCH_VERSION} into .venv/.",
                p.display()
            ),
            Error::MissingLibrary { dir, lib } => write!(
                f,
                "{} has no lib/{lib}: it is not a libtorch directory.\n  Point LIBTORCH at the \
                 directory that holds lib/ and include/ (for pip: .../site-packages/torch), \
                 or unset it.",
                dir.display()
            ),
            Error::WrongVersion { dir, found } => write!(
                f,
                "{} holds PyTorch {found}, but tch 0.24 binds PyTorch {TORCH_VERSION} exactly.\n  \
                 Install torch=={TORCH_VERSION} there, point LIBTORCH elsewhere, or unset \
                 LIBTORCH to let `cargo xtask` install it into .venv/.",
                dir.display()
            ),
            Error::UnknownVersion(dir) => write!(
                f,
                "cannot tell which PyTorch {} holds (no build-version or version.py).\n  \
                 Use a libtorch {TORCH_VERSION} release or a pip torch=={TORCH_VERSION} install.",
                dir.display()
            ),
            Error::NoPython(detail) => write!(
                f,
                "python3 is needed once, to install torch=={TORCH_VERSION} from PyPI, and it was \
                 not found ({detail}).\n  Install Python 3.9+ with the venv module \
                 (Debian: `apt-get install python3 python3-venv`), or set LIBTORCH to an \
                 existing libtorch {TORCH_VERSION}."
            ),
            Error::VenvFailed { venv, detail } => write!(
                f,
                "`python3 -m venv {}` failed: {detail}\n  On Debian/Ubuntu install the venv \
                 module (`apt-get install python3-venv`), then run the command again.",
                venv.display()
            ),
            Error::PipFailed {
                venv,
                requirements,
                status,
            } => write!(
                f,
                "pip could not install {} into {} ({status}).\n  Check the network or proxy \
                 to PyPI and the free disk space (torch with its CUDA packages needs about \
                 5 GB), then run the command again: the venv is kept and pip resumes.",
                requirements.display(),
                venv.display()
            ),
            Error::TorchNotInVenv(venv) => write!(
                f,
                "pip finished but {} has no site-packages/torch; remove {} and run again.",
                venv.display(),
                venv.display()
            ),
            Error::Io { path, err } => write!(f, "{}: {err}", path.display()),
        }
    }
}

impl std::error::Error for Error {}

/// The version string of a libtorch directory: `build-version` (libtorch
/// releases) or `version.py` (pip's torch package).
fn read_version(dir: &Path) -> Option<String> {
    if let Ok(text) = std::fs::read_to_string(dir.join("build-version")) {
        return Some(text.trim().to_string());
    }
    let text = std::fs::read_to_string(dir.join("version.py")).ok()?;
    text.lines().find_map(|line| {
        let rest = line.strip_prefix("__version__")?;
        let value = rest.split('=').nth(1)?.trim();
        Some(value.trim_matches(|c| c == '\'' || c == '"').to_string())
    })
}

/// Checks that `dir` is a libtorch of the pinned version.
pub fn check_dir(dir: &Path, source: Source) -> Result<Libtorch, Error> {
    if !dir.is_dir() {
        return Err(Error::EnvVarNotADir(dir.to_path_buf()));
    }
    for lib in ["libtorch_cpu.so", "libc10.so"] {
        if !dir.join("lib").join(lib).exists() {
            return Err(Error::MissingLibrary {
                dir: dir.to_path_buf(),
                lib,
            });
        }
    }
    let version = read_version(dir).ok_or_else(|| Error::UnknownVersion(dir.to_path_buf()))?;
    let base = version.split('+').next().unwrap_or_default();
    if base != TORCH_VERSION {
        return Err(Error::WrongVersion {
            dir: dir.to_path_buf(),
            found: version,
        });
    }
    Ok(Libtorch {
        dir: dir.to_path_buf(),
        version,
        source,
    })
}

/// A cheap content hash (FNV-1a) of the requirements, to notice when the venv is stale.
fn fingerprint(text: &str) -> String {
    let mut hash: u64 = 0xcbf29ce484222325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x100000001b3);
    }
    format!("{hash:016x}")
}

fn site_packages_torch(venv: &Path) -> Option<PathBuf> {
    let lib = venv.join("lib");
    let entries = std::fs::read_dir(&lib).ok()?;
    entries
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("site-packages").join("torch"))
        .find(|p| p.join("lib").is_dir())
}

/// Finds libtorch: `LIBTORCH` first, else the project venv (installed if needed).
pub fn locate(repo: &Path) -> Result<Libtorch, Error> {
    if let Some(dir) = std::env::var_os("LIBTORCH").filter(|v| !v.is_empty()) {
        return check_dir(Path::new(&dir), Source::EnvVar);
    }
    let venv = repo.join(".venv");
    ensure_venv(repo, &venv)?;
    let dir = site_packages_torch(&venv).ok_or_else(|| Error::TorchNotInVenv(venv.clone()))?;
    check_dir(&dir, Source::ProjectVenv)
}

/// Creates `.venv` and installs the requirements unless a stamp says they are there.
fn ensure_venv(repo: &Path, venv: &Path) -> Result<(), Error> {
    let requirements = repo.join("xtask").join("python-requirements.txt");
    let wanted = std::fs::read_to_string(&requirements).map_err(|err| Error::Io {
        path: requirements.clone(),
        err,
    })?;
    let stamp_path = venv.join(".wmrl-requirements-stamp");
    let stamp = fingerprint(&wanted);
    if std::fs::read_to_string(&stamp_path).is_ok_and(|s| s.trim() == stamp) {
        return Ok(());
    }
    let python = venv.join("bin").join("python");
    if !python.exists() {
        let python3 = std::env::var_os("PYTHON").unwrap_or_else(|| OsString::from("python3"));
        match Command::new(&python3).arg("--version").output() {
            Ok(out) if out.status.success() => {}
            Ok(out) => {
                return Err(Error::NoPython(format!(
                    "`python3 --version` exited {}",
                    out.status
                )));
            }
            Err(err) => return Err(Error::NoPython(err.to_string())),
        }
        eprintln!("xtask: creating the project venv {} (once)", venv.display());
        let out = Command::new(&python3)
            .args(["-m", "venv"])
            .arg(venv)
            .output()
            .map_err(|err| Error::VenvFailed {
                venv: venv.to_path_buf(),
                detail: err.to_string(),
            })?;
        if !out.status.success() {
            let detail = String::from_utf8_lossy(&out.stderr).trim().to_string();
            return Err(Error::VenvFailed {
                venv: venv.to_path_buf(),
                detail,
            });
        }
    }
    eprintln!(
        "xtask: installing {} into .venv/ (once; torch with its CUDA packages is about 5 GB, \
         a few minutes)",
        requirements.display()
    );
    let status = Command::new(&python)
        .args(["-m", "pip", "install", "--disable-pip-version-check", "-r"])
        .arg(&requirements)
        // pip's progress goes to stderr: `eval "$(cargo xtask env)"` reads stdout.
        .stdout(std::io::stderr())
        .status()
        .map_err(|err| Error::PipFailed {
            venv: venv.to_path_buf(),
            requirements: requirements.clone(),
            status: err.to_string(),
        })?;
    if !status.success() {
        return Err(Error::PipFailed {
            venv: venv.to_path_buf(),
            requirements,
            status: status.to_string(),
        });
    }
    std::fs::write(&stamp_path, format!("{stamp}\n")).map_err(|err| Error::Io {
        path: stamp_path,
        err,
    })
}

impl Libtorch {
    /// The environment for cargo and for the programs it builds.
    pub fn env(&self) -> Vec<(String, OsString)> {
        let lib = self.dir.join("lib");
        let mut ld = OsString::from(lib.as_os_str());
        if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|v| !v.is_empty()) {
            ld.push(":");
            ld.push(old);
        }
        vec![
            ("LIBTORCH".to_string(), self.dir.clone().into_os_string()),
            ("LD_LIBRARY_PATH".to_string(), ld),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_pip_version_py() {
        let dir = std::env::temp_dir().join(format!("xtask-version-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("lib")).unwrap();
        std::fs::write(dir.join("version.py"), "__version__ = '2.10.0+cu128'\n").unwrap();
        for lib in ["libtorch_cpu.so", "libc10.so"] {
            std::fs::write(dir.join("lib").join(lib), b"").unwrap();
        }
        let err = check_dir(&dir, Source::EnvVar).unwrap_err();
        assert!(matches!(&err, Error::WrongVersion { found, .. } if found == "2.10.0+cu128"));
        assert!(err.to_string().contains("binds PyTorch 2.11.0"));
        std::fs::write(dir.join("version.py"), "__version__ = '2.11.0+cu130'\n").unwrap();
        assert_eq!(
            check_dir(&dir, Source::EnvVar).unwrap().version,
            "2.11.0+cu130"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn missing_library_is_named() {
        let dir = std::env::temp_dir().join(format!("xtask-nolib-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let err = check_dir(&dir, Source::EnvVar).unwrap_err();
        assert!(err.to_string().contains("lib/libtorch_cpu.so"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
