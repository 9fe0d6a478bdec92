//! Errors of the world model.

use std::path::PathBuf;

/// What can go wrong building, training, running or loading a world model.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A config value or file is invalid.
    #[error(transparent)]
    Config(#[from] wmrl_config::Error),
    /// The policy side (encoder, checkpoint, demonstrations).
    #[error(transparent)]
    Vla(#[from] wmrl_vla::Error),
    /// Writing a report or plot.
    #[error(transparent)]
    Report(#[from] wmrl_report::Error),
    /// A libtorch call failed.
    #[error("{context}: {source}")]
    Torch {
        /// What was being done.
        context: String,
        /// libtorch's error.
        source: tch::TchError,
    },
    /// Reading or writing a file.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A JSON file does not parse.
    #[error("{}: {source}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: serde_json::Error,
    },
    /// A latent-episode file or world-model checkpoint is corrupt, truncated or of another kind.
    #[error("{}: {message}", path.display())]
    BadFile {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The world model was trained on another observation encoder than the policy's.
    #[error(
        "the world model was trained on observation encoder {expected}, but the policy's encoder is {found}: \
         train the world model on this policy's latents (the encoder stays frozen during post-training)"
    )]
    EncoderMismatch {
        /// Fingerprint the world model was trained with.
        expected: String,
        /// Fingerprint of the policy given.
        found: String,
    },
    /// Sizes that must agree do not.
    #[error("{what}: expected {expected}, found {found}")]
    Mismatch {
        /// What was compared.
        what: String,
        /// Expected value.
        expected: String,
        /// Found value.
        found: String,
    },
    /// Imagined latents or scores stayed NaN or infinite after re-imagining.
    #[error(
        "imagined episode of task {task}, state {state}, seed {seed}: {what} is not finite after {attempts} attempts"
    )]
    NonFinite {
        /// Task index.
        task: usize,
        /// Initial-state index.
        state: usize,
        /// Seed of the last attempt.
        seed: u64,
        /// What went non-finite.
        what: String,
        /// Attempts made.
        attempts: u32,
    },
    /// An initial observation could not be produced.
    #[error("initial state {state} of task {task}: {message}")]
    Start {
        /// Task index.
        task: usize,
        /// Initial-state index.
        state: usize,
        /// What went wrong.
        message: String,
    },
    /// A prefix of branched imagination could not be executed.
    #[error(
        "executing the prefix of an imagined episode of task {task} state {state} failed {attempts} times; last: {reason}"
    )]
    Prefix {
        /// Task index.
        task: usize,
        /// Initial-state index.
        state: usize,
        /// Attempts made.
        attempts: u32,
        /// The executor's last reason.
        reason: String,
    },
    /// No episodes to train or evaluate on.
    #[error("{what}: no episodes")]
    Empty {
        /// Which set.
        what: String,
    },
}

impl Error {
    /// Wraps a libtorch error with what was being done.
    pub fn torch(context: impl Into<String>) -> impl FnOnce(tch::TchError) -> Error {
        let context = context.into();
        move |source| Error::Torch { context, source }
    }

    /// A size or kind mismatch.
    pub fn mismatch(
        what: impl Into<String>,
        expected: impl std::fmt::Display,
        found: impl std::fmt::Display,
    ) -> Self {
        Error::Mismatch {
            what: what.into(),
            expected: expected.to_string(),
            found: found.to_string(),
        }
    }
}

/// Result with the world model's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
