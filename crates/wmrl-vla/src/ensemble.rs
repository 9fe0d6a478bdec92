//! Temporal ensembling of action chunks, as ACT does it (Zhao et al., 2023,
//! "Learning Fine-Grained Bimanual Manipulation with Low-Cost Hardware").
//!
//! A chunking policy re-plans every few control steps, so each step is
//! predicted by every chunk issued during the last `chunk_len` steps. Instead
//! of executing only the newest chunk's action, the executor executes the
//! weighted mean of all of them, with weights `exp(-decay · i)` where `i = 0`
//! is the oldest prediction (ACT's `m`; small values weigh them nearly
//! equally). This smooths the executed trajectory and keeps a plan's
//! momentum through observations where a single prediction wavers.
//!
//! The executed action is then no longer one of the policy's tokens, so this
//! is an evaluation-time option: RL rollouts (which need the exact
//! log-probability of what was executed) leave it off.

use std::collections::VecDeque;

use crate::inference::ActionChunk;

/// The chunks still predicting upcoming steps, and the weighting.
#[derive(Debug, Clone)]
pub struct TemporalEnsemble {
    decay: f32,
    /// `(step the chunk was issued at, chunk)`, oldest first.
    chunks: VecDeque<(usize, ActionChunk)>,
}

impl TemporalEnsemble {
    /// An empty ensemble with ACT's weight decay `decay` (≥ 0; ACT uses 0.01).
    pub fn new(decay: f32) -> Self {
        Self {
            decay: decay.max(0.0),
            chunks: VecDeque::new(),
        }
    }

    /// Adds a chunk whose first action is meant for control step `issued_at`.
    pub fn push(&mut self, issued_at: usize, chunk: ActionChunk) {
        self.chunks.push_back((issued_at, chunk));
    }

    /// The ensembled action for control step `step`: the weighted mean of
    /// every held chunk's prediction for it. Chunks that no longer cover
    /// `step` or later are dropped. `None` when no chunk covers `step`.
    pub fn action(&mut self, step: usize) -> Option<Vec<f32>> {
        while self
            .chunks
            .front()
            .is_some_and(|(issued, chunk)| issued + chunk.chunk_len <= step)
        {
            self.chunks.pop_front();
        }
        let mut sum: Option<Vec<f32>> = None;
        let mut total = 0.0f32;
        let mut rank = 0usize;
        for (issued, chunk) in &self.chunks {
            if *issued > step || step >= issued + chunk.chunk_len {
                continue;
            }
            let weight = (-self.decay * rank as f32).exp();
            rank += 1;
            let action = chunk.action(step - issued);
            let acc = sum.get_or_insert_with(|| vec![0.0; action.len()]);
            for (a, v) in acc.iter_mut().zip(action) {
                *a += weight * v;
            }
            total += weight;
        }
        sum.map(|mut acc| {
            acc.iter_mut().for_each(|a| *a /= total);
            acc
        })
    }

    /// Forgets every chunk (a new episode).
    pub fn clear(&mut self) {
        self.chunks.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(values: &[[f32; 2]]) -> ActionChunk {
        ActionChunk {
            tokens: vec![0; values.len() * 2],
            actions: values.iter().flatten().copied().collect(),
            chunk_len: values.len(),
            action_dim: 2,
            log_prob: 0.0,
            token_log_probs: Vec::new(),
            executed: values.len(),
        }
    }

    #[test]
    fn one_chunk_is_executed_as_predicted() {
        let mut ensemble = TemporalEnsemble::new(0.01);
        ensemble.push(0, chunk(&[[0.1, 0.2], [0.3, 0.4], [0.5, 0.6]]));
        assert_eq!(ensemble.action(1).unwrap(), vec![0.3, 0.4]);
        assert_eq!(ensemble.action(2).unwrap(), vec![0.5, 0.6]);
        assert!(ensemble.action(3).is_none());
    }

    #[test]
    fn overlapping_chunks_are_averaged_with_older_weighted_more() {
        let mut ensemble = TemporalEnsemble::new(0.0);
        ensemble.push(0, chunk(&[[0.0, 0.0], [1.0, 0.0], [1.0, 0.0]]));
        ensemble.push(1, chunk(&[[0.0, 1.0], [0.0, 1.0], [0.0, 1.0]]));
        // Equal weights at decay 0.
        assert_eq!(ensemble.action(1).unwrap(), vec![0.5, 0.5]);

        let mut decayed = TemporalEnsemble::new(1.0);
        decayed.push(0, chunk(&[[0.0, 0.0], [1.0, 0.0], [1.0, 0.0]]));
        decayed.push(1, chunk(&[[0.0, 1.0], [0.0, 1.0], [0.0, 1.0]]));
        let a = decayed.action(2).unwrap();
        let w_new = (-1.0f32).exp() / (1.0 + (-1.0f32).exp());
        assert!((a[0] - (1.0 - w_new)).abs() < 1e-6, "{a:?}");
        assert!((a[1] - w_new).abs() < 1e-6, "{a:?}");
        // Step 3: only the second chunk still covers it; the first is dropped.
        assert_eq!(decayed.action(3).unwrap(), vec![0.0, 1.0]);
        assert_eq!(decayed.chunks.len(), 1);
    }
}
