//! The crate's error type.

use std::path::PathBuf;

use crate::protocol::ProtocolError;

/// Errors of the robot bridge.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A zenoh operation failed.
    #[error("zenoh: {context}: {message}")]
    Zenoh {
        /// What was being done.
        context: String,
        /// zenoh's message.
        message: String,
    },
    /// A config file (zenoh JSON5, safety limits) is missing or invalid.
    #[error("{}: {message}", path.display())]
    Config {
        /// The file (or `command line`).
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A message violated the protocol.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// No usable robot announced itself in time.
    #[error(
        "no robot available after {waited_s:.1} s (is a `wmrl robots serve` connected to the same zenoh network?){detail}"
    )]
    NoRobots {
        /// Seconds waited.
        waited_s: f64,
        /// Robots seen but refused, if any.
        detail: String,
    },
    /// The policy failed while acting.
    #[error("policy: {0}")]
    Policy(#[from] wmrl_vla::Error),
    /// A robot driver failed outside an episode.
    #[error("robot driver: {0}")]
    Driver(#[from] crate::driver::DriverError),
    /// File-system failure.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Certificate generation failed.
    #[error("certificates: {0}")]
    Certificates(String),
}

impl Error {
    pub(crate) fn zenoh(context: impl Into<String>, error: impl std::fmt::Display) -> Self {
        Error::Zenoh {
            context: context.into(),
            message: error.to_string(),
        }
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
