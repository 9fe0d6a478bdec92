//! Branched imagination's executed prefixes: the first chunks of an
//! imagined episode run for real before the world model imagines the rest
//! ([`crate::VlaWorldModel::with_prefixes`]).

use wmrl_core::seams::{EpisodeRequest, Execution};
use wmrl_vla::VlaPolicy;
use wmrl_vla::rollout::{EpisodeRecord, TaskPrompt};

use crate::Result;

/// Runs the first chunks of imagined episodes for real, so that the world
/// model imagines only the rest (branched imagination,
/// [`crate::VlaWorldModel::with_prefixes`]). The simulator's implementation is
/// `SimPrefixes`; a robot deployment can run prefixes on an arm.
pub trait PrefixExecutor: Send {
    /// Chunks executed per episode.
    fn chunks(&self) -> usize;

    /// Runs `policy` from each request's initial state for at most
    /// [`Self::chunks`] chunks (sampling with the request's seed, as an
    /// anchor executor does), recording the observation at every chunk
    /// boundary; one result per request, in order.
    fn execute(
        &mut self,
        policy: &VlaPolicy,
        requests: &[EpisodeRequest<'_, TaskPrompt>],
    ) -> Result<Vec<Execution<EpisodeRecord>>>;
}

/// Prefixes of branched imagination executed in the simulator.
#[cfg(feature = "sim")]
pub struct SimPrefixes {
    executor: wmrl_vla::sim::SimExecutor,
    chunks: usize,
}

#[cfg(feature = "sim")]
impl SimPrefixes {
    /// `envs` simulators with `options` (sampling temperature, cameras),
    /// each episode stopped after `chunks` chunks of `chunk_len` steps (or
    /// at the environment's own step limit, if lower).
    pub fn new(
        envs: usize,
        mut options: wmrl_vla::sim::SimExecutorOptions,
        chunks: usize,
        chunk_len: usize,
    ) -> Self {
        options.env.max_steps = options.env.max_steps.min(chunks * chunk_len);
        options.record_observations = true;
        Self {
            executor: wmrl_vla::sim::SimExecutor::new(envs, options),
            chunks,
        }
    }
}

#[cfg(feature = "sim")]
impl PrefixExecutor for SimPrefixes {
    fn chunks(&self) -> usize {
        self.chunks
    }

    fn execute(
        &mut self,
        policy: &VlaPolicy,
        requests: &[EpisodeRequest<'_, TaskPrompt>],
    ) -> Result<Vec<Execution<EpisodeRecord>>> {
        use wmrl_core::seams::AnchorExecutor;
        let _span = tracing::info_span!("prefix_execute", episodes = requests.len()).entered();
        Ok(self.executor.execute(policy, requests)?)
    }
}
