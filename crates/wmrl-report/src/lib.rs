//! Run artefacts a person reads: files written atomically, checkpoint
//! manifests with checksums, metrics as JSONL,
//! and PNG plots drawn from them.
//!
//! Everything here is domain-free; the trainers and benchmarks decide what to
//! record. Metrics are data, not log lines: a [`MetricsSink`] appends one JSON
//! object per line (and, with [`MetricsSink::with_tensorboard`], the same
//! rows' numbers as TensorBoard scalars) and plots are drawn from those rows.

pub mod atomic;
pub mod curve;
pub mod manifest;
pub mod metrics;
pub mod plot;
pub mod tensorboard;

pub use atomic::{write_atomic, write_json_atomic, write_jsonl_atomic};
pub use curve::{MeanSe, first_crossing, seed_mean, seed_mean_se};
pub use manifest::{Damage, MANIFEST_FILE, Manifest};
pub use metrics::MetricsSink;
pub use plot::{LinePlot, Series, SeriesStyle};
pub use tensorboard::EventWriter;

/// Errors of this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file could not be written or read.
    #[error("{path}: {source}")]
    Io {
        /// The file involved.
        path: std::path::PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A value could not be serialised to JSON.
    #[error("cannot serialise to JSON for {path}: {source}")]
    Json {
        /// The file it was meant for.
        path: std::path::PathBuf,
        /// The underlying error.
        source: serde_json::Error,
    },
    /// A checkpoint's files do not match its manifest (or it has none).
    #[error(transparent)]
    Damaged(#[from] manifest::Damage),
    /// A TensorBoard event file is damaged or not one this crate reads.
    #[error("TensorBoard event file {path}: {message}")]
    EventFile {
        /// The event file.
        path: std::path::PathBuf,
        /// What is wrong, and where.
        message: String,
    },
    /// The plot could not be drawn.
    #[error("cannot draw plot {path}: {message}")]
    Plot {
        /// The PNG file.
        path: std::path::PathBuf,
        /// What went wrong.
        message: String,
    },
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;
