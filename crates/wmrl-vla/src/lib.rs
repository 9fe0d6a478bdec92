//! A compact vision-language-action (VLA) policy in tch, the policy WMRL
//! post-trains.
//!
//! - [`model`]: two camera encoders, an instruction encoder, proprioception,
//!   a trunk and a parallel action-token head, factored as
//!   [`VlaPolicy::encode`] (observation → latent) and [`VlaPolicy::act`]
//!   (latent, proprioception, instruction → action-chunk token logits).
//! - [`binning`]: 256 uniform bins per action dimension on `[-1, 1]`.
//! - [`distribution`]: exact log-probabilities, entropies, sampling, greedy decoding.
//! - [`inference`]: batched inference from RGB images, proprioception and text.
//! - [`tokenizer`]: word-level instruction tokenizer saved with the checkpoint.
//! - [`checkpoint`]: safetensors weights + JSON config, strict shape checks.
//! - [`demos`]: the `.demo` episode format (checksummed) and dataset loading.
//! - [`grpo`]: the learner: clipped-surrogate GRPO on action tokens (encoder frozen).
//! - [`eval`]: per-task success through any anchor executor, failure GIFs.
//! - [`ensemble`]: ACT-style temporal ensembling of overlapping action chunks.
//! - [`rollout`]: the VLA domain for the core (prompts, episodes, closed-loop actor).
//! - [`sft`]: behaviour cloning (AdamW, warm-up + cosine, clipping, random shifts).
//! - `sim` (feature `sim`): the simulator as anchor executor and demonstration source.
//! - [`synthetic`]: synthetic demonstrations for tests and benchmarks.
//! - [`bench`]: training and inference throughput (`wmrl bench policy`).
//! - [`config`]: model and training configs (`tiny`, `cpu`, `gpu` are shipped).

pub mod bench;
pub mod binning;
pub mod checkpoint;
pub mod config;
pub mod demos;
pub mod distribution;
pub mod ensemble;
mod error;
pub mod eval;
pub mod grpo;
pub mod inference;
pub mod model;
pub mod rollout;
pub mod sft;
#[cfg(feature = "sim")]
pub mod sim;
pub mod synthetic;
pub mod tokenizer;

pub use binning::ActionBinning;
pub use config::{ModelConfig, SftConfig, VlaConfig};
pub use distribution::{ActionDistribution, Decoding};
pub use error::{Error, Result};
pub use inference::{ActionChunk, PolicyInput};
pub use model::VlaPolicy;
pub use tokenizer::Tokenizer;
