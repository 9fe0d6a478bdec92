//! Supervised fine-tuning (behaviour cloning) of the policy on demonstrations:
//! AdamW, warm-up + cosine learning rate, global-norm gradient clipping,
//! random-shift augmentation, metrics, plots and checkpoints.

pub mod augment;
pub mod learner;
pub mod schedule;
pub mod trainer;

pub use learner::{EvalStats, Learner, StepStats, WeightAverage, bc_loss, soft_target_loss};
pub use trainer::{Progress, SftSummary, dataset_options, train};
