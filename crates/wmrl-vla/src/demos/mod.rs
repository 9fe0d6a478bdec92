//! Demonstrations: the on-disk episode format, the folder manifest, and
//! loading a folder for behaviour cloning.

pub mod dataset;
pub mod format;
pub mod manifest;

pub use dataset::{DatasetOptions, DemoDataset, Split, TaskSummary};
pub use format::{Episode, EpisodeMeta, read_episode, write_episode};
pub use manifest::{MANIFEST_FILE, Manifest, ManifestTask};
