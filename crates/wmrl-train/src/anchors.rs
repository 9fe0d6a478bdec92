//! The anchor stream's executor as the trainer holds it: any executor of
//! closed-loop VLA episodes (the built-in simulator, a pool of robots over
//! zenoh, a test's fault injector) behind one type, so that
//! [`crate::VlaTrainer`] does not depend on which one runs its anchors.
//!
//! The simulator ([`wmrl_vla::sim::SimExecutor`]) and the robot pool
//! (`wmrl_robots::ZenohExecutorPool`) both implement the core's
//! [`AnchorExecutor`] for every [`ClosedLoopActor`], the trait object
//! included; [`AnchorStream::new`] takes any such executor and boxes it with
//! its error, and the stream then executes for any policy the trainer lends
//! it (the learner in a sequential step, a snapshot of the policy on the
//! worker thread of an overlapped one).

use wmrl_core::seams::{AnchorExecutor, EpisodeRequest, Execution};
use wmrl_vla::rollout::{ClosedLoopActor, EpisodeRecord, TaskPrompt, VlaAdapter};

/// An executor's own error (a failure of the whole executor, not of one
/// episode), whatever the executor's error type.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct ExecutorError(Box<dyn std::error::Error + Send + Sync>);

/// An executor of closed-loop episodes for any policy (borrowed for any
/// lifetime), its error boxed.
type DynExecutor =
    dyn for<'p> AnchorExecutor<VlaAdapter, dyn ClosedLoopActor + 'p, Error = ExecutorError> + Send;

/// Boxes an executor's error into an [`ExecutorError`].
struct BoxedErrors<E>(E);

impl<'p, E> AnchorExecutor<VlaAdapter, dyn ClosedLoopActor + 'p> for BoxedErrors<E>
where
    E: AnchorExecutor<VlaAdapter, dyn ClosedLoopActor + 'p>,
{
    type Error = ExecutorError;

    fn execute(
        &mut self,
        policy: &(dyn ClosedLoopActor + 'p),
        episodes: &[EpisodeRequest<'_, TaskPrompt>],
    ) -> Result<Vec<Execution<EpisodeRecord>>, ExecutorError> {
        self.0
            .execute(policy, episodes)
            .map_err(|e| ExecutorError(Box::new(e)))
    }
}

/// The executor of the anchor stream, whichever it is.
pub struct AnchorStream {
    executor: Box<DynExecutor>,
    name: String,
}

impl AnchorStream {
    /// Wraps `executor`; `name` says what it is in logs and `Debug`.
    pub fn new<E>(name: impl Into<String>, executor: E) -> Self
    where
        E: for<'p> AnchorExecutor<VlaAdapter, dyn ClosedLoopActor + 'p> + Send + 'static,
    {
        Self {
            executor: Box::new(BoxedErrors(executor)),
            name: name.into(),
        }
    }

    /// What executes the anchors.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl std::fmt::Debug for AnchorStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnchorStream")
            .field("executor", &self.name)
            .finish()
    }
}

impl<P: ClosedLoopActor> AnchorExecutor<VlaAdapter, P> for AnchorStream {
    type Error = ExecutorError;

    fn execute(
        &mut self,
        policy: &P,
        episodes: &[EpisodeRequest<'_, TaskPrompt>],
    ) -> Result<Vec<Execution<EpisodeRecord>>, ExecutorError> {
        self.executor.execute(policy, episodes)
    }
}
