//! The replay buffer of executed episodes the world model is refreshed on.
//!
//! Bounded by `replay.capacity` episodes; when full, the oldest episode goes
//! first (FIFO), so the model tracks the current policy's state distribution
//! while keeping a window of older behaviour. Episodes with NaN or infinite
//! values are dropped at the door (logged with task and seed).

use std::collections::VecDeque;

use crate::trajectory::{Dims, LatentTrajectory};

/// A FIFO of executed episodes.
#[derive(Debug, Clone, Default)]
pub struct ReplayBuffer {
    capacity: usize,
    episodes: VecDeque<LatentTrajectory>,
    /// Episodes refused for non-finite values.
    pub rejected: u64,
    /// Episodes ever accepted.
    pub accepted: u64,
}

impl ReplayBuffer {
    /// An empty buffer holding at most `capacity` episodes.
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            episodes: VecDeque::new(),
            rejected: 0,
            accepted: 0,
        }
    }

    /// Adds an episode (evicting the oldest when full); `false` if refused.
    pub fn push(&mut self, episode: LatentTrajectory, dims: &Dims) -> bool {
        if let Err(reason) = episode.validate(dims) {
            self.rejected += 1;
            tracing::warn!(episode = %episode.describe(), %reason, "replay buffer: episode dropped");
            return false;
        }
        while self.episodes.len() >= self.capacity {
            self.episodes.pop_front();
        }
        self.episodes.push_back(episode);
        self.accepted += 1;
        true
    }

    /// Episodes held, oldest first.
    pub fn episodes(&self) -> impl Iterator<Item = &LatentTrajectory> {
        self.episodes.iter()
    }

    /// Number of episodes held.
    pub fn len(&self) -> usize {
        self.episodes.len()
    }

    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.episodes.is_empty()
    }

    /// Capacity in episodes.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn episode(seed: u64, value: f32) -> LatentTrajectory {
        LatentTrajectory {
            task_index: 0,
            state_index: 0,
            success: false,
            seed,
            source: "policy".into(),
            steps: 1,
            latents: vec![value; 2],
            proprio: vec![0.0; 2],
            actions: vec![0.0; 1],
        }
    }

    #[test]
    fn oldest_goes_first_and_nan_is_refused() {
        let dims = Dims {
            latent: 1,
            proprio: 1,
            chunk_len: 1,
            action_dim: 1,
        };
        let mut buffer = ReplayBuffer::new(2);
        for seed in 0..3 {
            assert!(buffer.push(episode(seed, 0.0), &dims));
        }
        assert!(!buffer.push(episode(9, f32::NAN), &dims));
        let seeds: Vec<u64> = buffer.episodes().map(|e| e.seed).collect();
        assert_eq!(seeds, vec![1, 2]);
        assert_eq!((buffer.accepted, buffer.rejected), (3, 1));
    }
}
