//! Vectorised execution: N independent environments stepped in parallel with
//! rayon. Each environment owns its world and steps single-threaded, so results
//! are bit-for-bit identical whatever the number of threads.

use rayon::prelude::*;

use crate::api::{Action, Observation, StepOutcome};
use crate::env::{EnvConfig, SimEnv};
use crate::error::Result;

/// A batch of environments.
pub struct VecEnv {
    envs: Vec<SimEnv>,
}

impl VecEnv {
    /// `n` environments with the same settings.
    pub fn new(n: usize, config: EnvConfig) -> VecEnv {
        VecEnv {
            envs: (0..n).map(|_| SimEnv::new(config.clone())).collect(),
        }
    }

    /// Number of environments.
    pub fn len(&self) -> usize {
        self.envs.len()
    }

    /// Whether there are no environments.
    pub fn is_empty(&self) -> bool {
        self.envs.is_empty()
    }

    /// Resets environment `i` to `(task, initial_state)` = `starts[i]`, in parallel.
    pub fn reset(&mut self, starts: &[(usize, usize)]) -> Result<Vec<Observation>> {
        assert_eq!(
            starts.len(),
            self.envs.len(),
            "one (task, initial state) per environment"
        );
        self.envs
            .par_iter_mut()
            .zip(starts.par_iter())
            .map(|(env, &(task, k))| env.reset(task, k))
            .collect()
    }

    /// Steps environment `i` with `actions[i]`, in parallel.
    pub fn step(&mut self, actions: &[Action]) -> Vec<StepOutcome> {
        assert_eq!(actions.len(), self.envs.len(), "one action per environment");
        self.envs
            .par_iter_mut()
            .zip(actions.par_iter())
            .map(|(env, a)| env.step(a))
            .collect()
    }

    /// The environments (e.g. for experts to read their state).
    pub fn envs(&self) -> &[SimEnv] {
        &self.envs
    }

    /// Mutable access to the environments.
    pub fn envs_mut(&mut self) -> &mut [SimEnv] {
        &mut self.envs
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn env_is_send() {
        fn assert_send<T: Send>() {}
        assert_send::<super::SimEnv>();
        assert_send::<super::VecEnv>();
    }
}
