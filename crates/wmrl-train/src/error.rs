//! Errors of the post-training loop.

use std::path::PathBuf;

/// What can stop a training run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A config value or file is invalid.
    #[error(transparent)]
    Config(#[from] wmrl_config::Error),
    /// The policy side.
    #[error(transparent)]
    Vla(#[from] wmrl_vla::Error),
    /// The world model.
    #[error(transparent)]
    WorldModel(#[from] wmrl_wm::Error),
    /// The core.
    #[error(transparent)]
    Core(#[from] wmrl_core::Error),
    /// Writing artefacts.
    #[error(transparent)]
    Report(#[from] wmrl_report::Error),
    /// A run checkpoint is missing, corrupt or belongs to another run.
    #[error("checkpoint {}: {message}", path.display())]
    Checkpoint {
        /// The file or folder.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Reading or writing a file.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// Result with the trainer's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
