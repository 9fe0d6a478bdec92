//! The VLA domain as the WMRL core sees it: a prompt is a task and an
//! initial state, a rollout is an executed (or imagined) episode with the
//! policy's action chunks, and [`ClosedLoopActor`] is what an executor needs
//! from a policy to run it in closed loop.
//!
//! Executors (the simulator, robots over zenoh) implement
//! `wmrl_core::seams::AnchorExecutor<VlaAdapter, P>` for any
//! `P: ClosedLoopActor`, so evaluation and the anchor stream can use
//! either interchangeably.

use image::RgbImage;
use rand_chacha::ChaCha8Rng;
use wmrl_core::schedule::TaskId;
use wmrl_core::seams::Adapter;

use crate::inference::{ActionChunk, PolicyInput};
use crate::model::VlaPolicy;
use crate::{Error, Result};

/// A task and one of its initial states.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskPrompt {
    /// Task index in the suite.
    pub task_index: usize,
    /// Initial-state index.
    pub state_index: usize,
    /// The task's instruction.
    pub instruction: String,
}

/// An episode produced by running a policy.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EpisodeRecord {
    /// Task index.
    pub task_index: usize,
    /// Initial-state index.
    pub state_index: usize,
    /// Whether the goal was reached.
    pub success: bool,
    /// Control steps executed.
    pub steps: usize,
    /// The chunks the policy emitted, in order (tokens and log-probabilities).
    pub chunks: Vec<ActionChunk>,
    /// Agent-view frames, when the executor records them (for GIFs).
    pub frames: Vec<RgbImage>,
    /// The observation at every chunk boundary (after the reset, then after
    /// each executed chunk), when the executor records them: what a world
    /// model learns its dynamics from. Empty otherwise.
    pub observations: Vec<RecordedObservation>,
    /// What the policy acted on before each chunk, when the producer knows
    /// it without images (an imagined episode's latents): one per chunk.
    /// Empty for executed episodes, whose `observations` are encoded instead.
    pub inputs: Vec<ChunkInput>,
}

/// The policy's input before one chunk, in latent space.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkInput {
    /// Observation latent (`latent_dim` values).
    pub latent: Vec<f32>,
    /// Raw proprioception (`proprio_dim` values).
    pub proprio: Vec<f32>,
}

/// One observation of an executed episode.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedObservation {
    /// Third-person camera image.
    pub agent_view: RgbImage,
    /// Wrist camera image.
    pub wrist_view: RgbImage,
    /// Proprioception.
    pub proprio: Vec<f32>,
}

/// A fixed list of tasks with `states` initial states each.
#[derive(Debug, Clone)]
pub struct VlaAdapter {
    /// `(task index, instruction)` of each task.
    pub tasks: Vec<(usize, String)>,
    /// Initial states per task.
    pub states: usize,
    /// Seed of the prompt sequence.
    pub seed: u64,
}

impl VlaAdapter {
    /// Every (task, state) pair in order: the fixed evaluation set.
    pub fn all_prompts(&self) -> Vec<TaskPrompt> {
        self.tasks
            .iter()
            .flat_map(|(task, instruction)| {
                (0..self.states).map(move |state| TaskPrompt {
                    task_index: *task,
                    state_index: state,
                    instruction: instruction.clone(),
                })
            })
            .collect()
    }
}

/// SplitMix64: a well-mixed hash of a counter.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Adapter for VlaAdapter {
    type Prompt = TaskPrompt;
    type Rollout = EpisodeRecord;
    type Error = Error;

    /// Round-robin over the tasks; each prompt's state is a hash of (seed, step, slot).
    fn prompts(&mut self, step: u64, count: usize) -> Result<Vec<TaskPrompt>> {
        if self.tasks.is_empty() || self.states == 0 {
            return Err(Error::mismatch(
                "VLA adapter",
                "at least one task and one initial state",
                "none",
            ));
        }
        Ok((0..count)
            .map(|i| {
                let (task, instruction) =
                    &self.tasks[(step as usize * count + i) % self.tasks.len()];
                let state =
                    (mix(self.seed ^ mix(step ^ mix(i as u64))) % self.states as u64) as usize;
                TaskPrompt {
                    task_index: *task,
                    state_index: state,
                    instruction: instruction.clone(),
                }
            })
            .collect())
    }

    fn task(&self, prompt: &TaskPrompt) -> TaskId {
        prompt.task_index as TaskId
    }
}

/// Access to the VLA inside a policy type: the VLA itself, or a learner
/// that wraps it. A world model acts with the VLA's action head on latents,
/// so it accepts any policy type that can lend its VLA.
pub trait AsVlaPolicy {
    /// The VLA.
    fn as_vla(&self) -> &VlaPolicy;
}

impl AsVlaPolicy for VlaPolicy {
    fn as_vla(&self) -> &VlaPolicy {
        self
    }
}

/// What an executor needs from a policy to run it in closed loop.
pub trait ClosedLoopActor {
    /// Control steps per emitted chunk.
    fn chunk_len(&self) -> usize;

    /// One chunk per input. `temperature ≤ 0` decodes greedily; otherwise
    /// input `i` samples with its own generator `rngs[i]`.
    fn act(
        &self,
        inputs: &[PolicyInput<'_>],
        temperature: f64,
        rngs: &mut [ChaCha8Rng],
    ) -> Result<Vec<ActionChunk>>;
}

impl ClosedLoopActor for VlaPolicy {
    fn chunk_len(&self) -> usize {
        self.config().action.chunk_len as usize
    }

    fn act(
        &self,
        inputs: &[PolicyInput<'_>],
        temperature: f64,
        rngs: &mut [ChaCha8Rng],
    ) -> Result<Vec<ActionChunk>> {
        self.sample_seeded(inputs, temperature, rngs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_cycle_tasks_and_are_deterministic() {
        let mut adapter = VlaAdapter {
            tasks: vec![(3, "a".into()), (7, "b".into())],
            states: 50,
            seed: 1,
        };
        let p = adapter.prompts(4, 6).unwrap();
        assert_eq!(
            p.iter().map(|p| p.task_index).collect::<Vec<_>>(),
            vec![3, 7, 3, 7, 3, 7]
        );
        assert!(p.iter().all(|p| p.state_index < 50));
        assert_eq!(p, adapter.prompts(4, 6).unwrap());
        assert_ne!(p, adapter.prompts(5, 6).unwrap());
        assert_eq!(adapter.all_prompts().len(), 100);
    }
}
