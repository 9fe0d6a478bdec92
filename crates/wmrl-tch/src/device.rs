//! Device selection: CUDA when it is available, CPU otherwise, overridable.
//!
//! rustc links with `--as-needed`, so `libtorch_cuda.so` is dropped from the
//! binary even on a CUDA install and torch then reports no GPU. Before asking
//! torch, [`cuda_backend_loaded`] `dlopen`s `libtorch_cuda.so` with
//! `RTLD_GLOBAL` so its kernels register; on a CPU-only libtorch the load fails
//! cleanly and everything runs on the CPU. One binary serves both.

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

use tch::{Cuda, Device};

use crate::{Error, Result};

/// What the user asked for with `--device`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeviceChoice {
    /// CUDA device 0 when available, else CPU (default).
    #[default]
    Auto,
    /// Always the CPU.
    Cpu,
    /// CUDA device N; an error when it is not there.
    Cuda(usize),
}

impl FromStr for DeviceChoice {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let lower = s.trim().to_ascii_lowercase();
        match lower.as_str() {
            "auto" => Ok(Self::Auto),
            "cpu" => Ok(Self::Cpu),
            "cuda" | "gpu" => Ok(Self::Cuda(0)),
            other => other
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(Self::Cuda)
                .ok_or_else(|| Error::UnknownDevice {
                    given: s.to_string(),
                }),
        }
    }
}

impl fmt::Display for DeviceChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Auto => write!(f, "auto"),
            Self::Cpu => write!(f, "cpu"),
            Self::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

/// Loads libtorch's CUDA backend once; true when it is loaded.
pub fn cuda_backend_loaded() -> bool {
    static LOADED: OnceLock<bool> = OnceLock::new();
    *LOADED.get_or_init(|| {
        let lib_dir = env!("WMRL_LIBTORCH_LIB");
        let mut candidates = vec!["libtorch_cuda.so".to_string()];
        if !lib_dir.is_empty() {
            candidates.insert(0, format!("{lib_dir}/libtorch_cuda.so"));
        }
        for candidate in &candidates {
            // SAFETY: loading libtorch_cuda runs its static initialisers, which
            // only register CUDA kernels with the already-loaded libtorch_cpu.
            // The handle is leaked on purpose: the library must stay loaded.
            let loaded = unsafe {
                libloading::os::unix::Library::open(
                    Some(candidate),
                    libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_GLOBAL,
                )
            };
            match loaded {
                Ok(lib) => {
                    std::mem::forget(lib);
                    tracing::debug!(library = %candidate, "loaded libtorch CUDA backend");
                    return true;
                }
                Err(err) => {
                    tracing::debug!(library = %candidate, %err, "libtorch CUDA backend not loaded")
                }
            }
        }
        false
    })
}

/// Resolves a [`DeviceChoice`] to a tch [`Device`].
pub fn select_device(choice: DeviceChoice) -> Result<Device> {
    let cuda = cuda_backend_loaded() && Cuda::is_available();
    let device = match choice {
        DeviceChoice::Cpu => Device::Cpu,
        DeviceChoice::Auto if cuda => Device::Cuda(0),
        DeviceChoice::Auto => Device::Cpu,
        DeviceChoice::Cuda(n) => {
            if !cuda {
                return Err(Error::CudaUnavailable {
                    requested: choice.to_string(),
                    reason: "no CUDA device is usable (CPU-only libtorch, no driver, or no GPU); use --device cpu"
                        .into(),
                });
            }
            let count = Cuda::device_count() as usize;
            if n >= count {
                return Err(Error::CudaUnavailable {
                    requested: choice.to_string(),
                    reason: format!("only {count} CUDA device(s) are present"),
                });
            }
            Device::Cuda(n)
        }
    };
    tracing::info!(?device, %choice, "selected device");
    Ok(device)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_device_choices() {
        assert_eq!("auto".parse::<DeviceChoice>().unwrap(), DeviceChoice::Auto);
        assert_eq!("CPU".parse::<DeviceChoice>().unwrap(), DeviceChoice::Cpu);
        assert_eq!(
            "cuda".parse::<DeviceChoice>().unwrap(),
            DeviceChoice::Cuda(0)
        );
        assert_eq!(
            "cuda:3".parse::<DeviceChoice>().unwrap(),
            DeviceChoice::Cuda(3)
        );
        let err = "tpu".parse::<DeviceChoice>().unwrap_err();
        assert!(
            err.to_string()
                .contains("expected auto, cpu, cuda or cuda:N")
        );
    }

    #[test]
    fn cpu_is_always_available() {
        assert_eq!(select_device(DeviceChoice::Cpu).unwrap(), Device::Cpu);
    }
}
