//! Wall-clock accounting of the three consumers of a training step (the
//! simulator, the world model, the learner), and the real environment steps
//! the anchor stream cost, measured by wrapping each seam.

use std::time::Instant;

use wmrl_core::seams::{
    Adapter, AnchorExecutor, Batch, EpisodeRequest, ExecutedEpisode, Execution, Imagined, Policy,
    WorldModel,
};
use wmrl_vla::rollout::{AsVlaPolicy, ClosedLoopActor, EpisodeRecord, TaskPrompt, VlaAdapter};

/// Seconds spent inside a component, and what it did.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Clock {
    /// Seconds inside the component.
    pub seconds: f64,
    /// Control steps of the episodes it executed (executors only).
    pub env_steps: u64,
    /// Calls.
    pub calls: u64,
}

/// A seam implementation with a [`Clock`].
#[derive(Debug)]
pub struct Timed<T> {
    /// The wrapped component.
    pub inner: T,
    /// Its accounting.
    pub clock: Clock,
}

impl<T> Timed<T> {
    /// Wraps `inner` with a zero clock.
    pub fn new(inner: T) -> Self {
        Self {
            inner,
            clock: Clock::default(),
        }
    }

    fn time<R>(&mut self, f: impl FnOnce(&mut T) -> R) -> R {
        let start = Instant::now();
        let out = f(&mut self.inner);
        self.clock.seconds += start.elapsed().as_secs_f64();
        self.clock.calls += 1;
        out
    }
}

impl<P, E> AnchorExecutor<VlaAdapter, P> for Timed<E>
where
    P: ?Sized,
    E: AnchorExecutor<VlaAdapter, P>,
{
    type Error = E::Error;

    fn execute(
        &mut self,
        policy: &P,
        episodes: &[EpisodeRequest<'_, TaskPrompt>],
    ) -> Result<Vec<Execution<EpisodeRecord>>, E::Error> {
        let out = self.time(|e| e.execute(policy, episodes))?;
        self.clock.env_steps += out
            .iter()
            .map(|e| match e {
                Execution::Completed { rollout, .. } => rollout.steps as u64,
                // A failed attempt also ran the environment, but its length is
                // not reported; the core counts the attempt.
                Execution::Failed { .. } => 0,
            })
            .sum::<u64>();
        Ok(out)
    }
}

impl<P, W> WorldModel<VlaAdapter, P> for Timed<W>
where
    P: ?Sized,
    W: WorldModel<VlaAdapter, P>,
{
    type Error = W::Error;

    fn imagine(
        &mut self,
        policy: &P,
        episodes: &[EpisodeRequest<'_, TaskPrompt>],
    ) -> Result<Vec<Imagined<EpisodeRecord>>, W::Error> {
        self.time(|w| w.imagine(policy, episodes))
    }

    fn score(
        &mut self,
        episodes: &[ExecutedEpisode<'_, TaskPrompt, EpisodeRecord>],
    ) -> Result<Vec<f64>, W::Error> {
        self.time(|w| w.score(episodes))
    }

    fn observe(
        &mut self,
        episodes: &[ExecutedEpisode<'_, TaskPrompt, EpisodeRecord>],
    ) -> Result<(), W::Error> {
        self.time(|w| w.observe(episodes))
    }
}

impl<L: Policy<VlaAdapter>> Policy<VlaAdapter> for Timed<L> {
    type Error = L::Error;

    fn learn(
        &mut self,
        batch: Batch<<VlaAdapter as Adapter>::Prompt, <VlaAdapter as Adapter>::Rollout>,
    ) -> Result<(), L::Error> {
        self.time(|l| l.learn(batch))
    }
}

impl<L: AsVlaPolicy> AsVlaPolicy for Timed<L> {
    fn as_vla(&self) -> &wmrl_vla::VlaPolicy {
        self.inner.as_vla()
    }
}

impl<L: ClosedLoopActor> ClosedLoopActor for Timed<L> {
    fn chunk_len(&self) -> usize {
        self.inner.chunk_len()
    }

    fn act(
        &self,
        inputs: &[wmrl_vla::PolicyInput<'_>],
        temperature: f64,
        rngs: &mut [rand_chacha::ChaCha8Rng],
    ) -> wmrl_vla::Result<Vec<wmrl_vla::ActionChunk>> {
        self.inner.act(inputs, temperature, rngs)
    }
}
