//! The Python that solutions run with: finding it, and a sandbox around it.
//!
//! The interpreter is `$WMRL_PYTHON`, else the project's venv
//! (`.venv/bin/python` under the working folder, as `cargo xtask` makes it),
//! else `python3` on `PATH`, skipping version-manager shims (pyenv's
//! `~/.pyenv/shims/python3` is a shell script that cannot run inside the
//! jail). Its prefixes (`sys.prefix`, `sys.base_prefix`) are bound read-only
//! into the sandbox so that numpy and scikit-learn import.
//!
//! The sandbox requires isolation: [`sandbox`] fails where this machine
//! allows none, unless [`IsolationPolicy::AllowUnisolated`] is passed (the CLI's
//! `--allow-unisolated`), an explicit opt-out under which solutions can read
//! the host's files, the hidden answers included.

use std::path::{Path, PathBuf};

use wmrl_sandbox::{Limits, Sandbox, SandboxConfig};

use crate::{Error, Result};

/// Whether solutions may run where the machine cannot isolate them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IsolationPolicy {
    /// Refuse to run without isolation (the default).
    #[default]
    Required,
    /// Run unisolated where nothing better is available: solutions then see
    /// the host's files and network. An explicit, loudly reported opt-out.
    AllowUnisolated,
}

/// Whether `path` is a version manager's shim (pyenv, asdf, …) rather than an interpreter.
fn is_shim(path: &Path) -> bool {
    path.parent()
        .and_then(Path::file_name)
        .is_some_and(|dir| dir == "shims")
}

/// Finds the interpreter (see the module docs); `explicit` wins.
pub fn find_python(explicit: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("WMRL_PYTHON") {
        return Ok(PathBuf::from(p));
    }
    let venv = Path::new(".venv/bin/python");
    if venv.is_file() {
        return std::path::absolute(venv).map_err(|source| Error::Io {
            path: venv.to_path_buf(),
            source,
        });
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).map(|d| d.join("python3")).find(|p| p.is_file() && !is_shim(p)).ok_or_else(|| Error::Build {
        what: "python".into(),
        message: "no python found: set WMRL_PYTHON, pass --python, or run `cargo xtask` to create .venv".into(),
    })
}

/// `sys.prefix` and `sys.base_prefix` of `python`.
pub fn prefixes(python: &Path) -> Result<Vec<PathBuf>> {
    let output = std::process::Command::new(python)
        .args([
            "-c",
            "import sys; print(sys.prefix); print(sys.base_prefix)",
        ])
        .output()
        .map_err(|source| Error::Io {
            path: python.to_path_buf(),
            source,
        })?;
    if !output.status.success() {
        return Err(Error::Build {
            what: "python".into(),
            message: format!(
                "{} does not run ({})",
                python.display(),
                String::from_utf8_lossy(&output.stderr)
                    .lines()
                    .last()
                    .unwrap_or("")
            ),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(PathBuf::from)
        .collect())
}

/// Checks that `python` imports numpy and scikit-learn (what solutions use).
pub fn check_packages(python: &Path) -> Result<()> {
    let output = std::process::Command::new(python)
        .args(["-c", "import numpy, sklearn"])
        .output()
        .map_err(|source| Error::Io {
            path: python.to_path_buf(),
            source,
        })?;
    if output.status.success() {
        return Ok(());
    }
    Err(Error::Build {
        what: "python".into(),
        message: format!(
            "{} cannot import numpy and scikit-learn ({}); install xtask/python-requirements.txt into it \
             (`cargo xtask` does)",
            python.display(),
            String::from_utf8_lossy(&output.stderr)
                .lines()
                .last()
                .unwrap_or("")
        ),
    })
}

/// A sandbox running `python` with `limits`, at most `max_concurrent` runs
/// at once; it refuses to start unisolated unless `isolation` allows it.
pub async fn sandbox(
    python: &Path,
    limits: Limits,
    max_concurrent: usize,
    isolation: IsolationPolicy,
) -> Result<Sandbox> {
    let config = SandboxConfig {
        read_only: prefixes(python)?,
        limits,
        max_concurrent: max_concurrent.max(1),
        require_isolation: isolation == IsolationPolicy::Required,
        ..SandboxConfig::new(python)
    };
    Ok(Sandbox::new(config).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shims_are_not_interpreters() {
        assert!(is_shim(Path::new("/root/.pyenv/shims/python3")));
        assert!(!is_shim(Path::new("/usr/bin/python3")));
        assert!(!is_shim(Path::new("/work/.venv/bin/python3")));
    }

    #[test]
    fn isolation_is_required_unless_opted_out() {
        assert_eq!(IsolationPolicy::default(), IsolationPolicy::Required);
    }
}
