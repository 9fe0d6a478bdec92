//! Shared libtorch plumbing for the crates that hold neural networks.
//!
//! - [`device`]: pick CPU or CUDA (automatic, overridable with `cpu|cuda|cuda:N`),
//!   after making sure libtorch's CUDA backend is actually loaded.
//! - [`optim`]: AdamW with a saveable state, so resumed runs continue bit for bit.

pub mod device;
pub mod optim;

pub use device::{DeviceChoice, cuda_backend_loaded, select_device};
pub use optim::{AdamW, AdamWConfig};

/// Errors of this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A `--device` value that is not `auto`, `cpu`, `cuda` or `cuda:N`.
    #[error("unknown device `{given}`: expected auto, cpu, cuda or cuda:N")]
    UnknownDevice {
        /// What was given.
        given: String,
    },
    /// CUDA was asked for but is not usable.
    #[error("device `{requested}` was requested but {reason}")]
    CudaUnavailable {
        /// The requested device.
        requested: String,
        /// Why it cannot be used.
        reason: String,
    },
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;
