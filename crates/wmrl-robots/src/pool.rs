//! The trainer's side: a pool of robots reached over zenoh, as an
//! `AnchorExecutor` for the VLA domain.
//!
//! Robots are discovered through their liveliness tokens (and their `info`
//! answer, which must speak this protocol version). Each queued episode goes
//! to a free robot; the pool runs the policy on the trainer's device in
//! batches over every robot waiting for actions, and the robots execute the
//! chunks at their own control rate. A robot that vanishes mid-episode (its
//! token goes, or it stays silent past [`PoolOptions::silence_timeout`]) costs an
//! execution error and its episode is re-queued on another robot, never
//! recorded as a task failure.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use image::RgbImage;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use zenoh::sample::SampleKind;
use zenoh::{Session, Wait};

use wmrl_core::seams::{AnchorExecutor, EpisodeRequest, Execution};
use wmrl_vla::PolicyInput;
use wmrl_vla::inference::ActionChunk;
use wmrl_vla::rollout::{ClosedLoopActor, EpisodeRecord, TaskPrompt, VlaAdapter};

use crate::protocol::{
    self, Abort, ActionChunkMsg, EpisodeStart, Leaf, Message, ObservationMsg, RobotId,
};
use crate::{Error, Result};

/// Pool settings.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolOptions {
    /// Control steps per episode (default: 520, LIBERO-Long's).
    pub max_steps: usize,
    /// Sampling temperature; 0 decodes greedily (default: 0).
    pub temperature: f64,
    /// Actions of each chunk sent before re-planning (default: the whole chunk).
    pub execute_steps: Option<usize>,
    /// How long to wait for a first robot (default: 10 s).
    pub discovery_timeout: Duration,
    /// A running robot silent this long is treated as gone (default: 30 s).
    pub silence_timeout: Duration,
    /// Re-queues of one episode after robots vanished before it is returned
    /// as `Execution::Failed` (default: 3).
    pub max_requeues: u32,
    /// Largest accepted payload (default: [`protocol::MAX_MESSAGE_BYTES`]).
    pub max_message_bytes: usize,
}

impl Default for PoolOptions {
    fn default() -> Self {
        PoolOptions {
            max_steps: wmrl_sim::MAX_EPISODE_STEPS,
            temperature: 0.0,
            execute_steps: None,
            discovery_timeout: Duration::from_secs(10),
            silence_timeout: Duration::from_secs(30),
            max_requeues: 3,
            max_message_bytes: protocol::MAX_MESSAGE_BYTES,
        }
    }
}

/// What the pool has seen so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PoolCounters {
    /// Episodes dispatched to a robot (re-queued ones count again).
    pub dispatched: u64,
    /// Episodes that ended with an outcome.
    pub completed: u64,
    /// Episodes lost with their robot (execution errors), re-queued.
    pub requeued: u64,
    /// Execution errors reported by robots (emergency stop, instability).
    pub robot_errors: u64,
    /// Messages ignored as malformed, stale or from unknown robots.
    pub ignored_messages: u64,
}

/// An event from the zenoh callbacks.
enum Inbound {
    Alive(RobotId),
    Gone(RobotId),
    Payload {
        leaf: Leaf,
        robot: RobotId,
        bytes: Vec<u8>,
    },
}

#[derive(Debug, Clone, PartialEq)]
enum Slot {
    Free,
    Busy(u64),
}

/// One episode on a robot.
struct Running {
    request: usize,
    robot: RobotId,
    record: EpisodeRecord,
    rng: ChaCha8Rng,
    instruction: String,
    /// The observation awaiting an action chunk.
    pending: Option<(u64, RgbImage, RgbImage, Vec<f32>)>,
    heard: Instant,
    /// Times this episode was re-queued before this dispatch.
    tries: u32,
}

/// Robots over zenoh as one anchor executor.
pub struct ZenohExecutorPool {
    session: Session,
    inbound: Receiver<Inbound>,
    _subscribers: Vec<zenoh::pubsub::Subscriber<()>>,
    robots: BTreeMap<RobotId, Slot>,
    refused: BTreeMap<RobotId, String>,
    next_episode: u64,
    options: PoolOptions,
    counters: PoolCounters,
}

impl std::fmt::Debug for ZenohExecutorPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZenohExecutorPool")
            .field("robots", &self.robots)
            .field("options", &self.options)
            .field("counters", &self.counters)
            .finish()
    }
}

impl ZenohExecutorPool {
    /// Starts discovering robots on `session`.
    pub fn new(session: Session, options: PoolOptions) -> Result<Self> {
        let (tx, rx) = mpsc::channel();
        let mut subscribers = Vec::new();
        let alive_tx = tx.clone();
        let alive = session
            .liveliness()
            .declare_subscriber(Leaf::Alive.every_robot())
            .history(true)
            .callback(move |sample| {
                if let Some((robot, _)) = RobotId::from_key(sample.key_expr().as_str()) {
                    let _ = alive_tx.send(match sample.kind() {
                        SampleKind::Put => Inbound::Alive(robot),
                        SampleKind::Delete => Inbound::Gone(robot),
                    });
                }
            })
            .wait()
            .map_err(|e| Error::zenoh("subscribing to robot liveliness", e))?;
        subscribers.push(alive);
        for leaf in [Leaf::Obs, Leaf::Outcome, Leaf::Status] {
            let tx = tx.clone();
            let sub = session
                .declare_subscriber(leaf.every_robot())
                .callback(move |sample| {
                    if let Some((robot, _)) = RobotId::from_key(sample.key_expr().as_str()) {
                        let bytes = sample.payload().to_bytes().into_owned();
                        let _ = tx.send(Inbound::Payload { leaf, robot, bytes });
                    }
                })
                .wait()
                .map_err(|e| Error::zenoh(format!("subscribing to {}", leaf.every_robot()), e))?;
            subscribers.push(sub);
        }
        // Episode ids unique across trainer restarts, so a late message from a
        // previous run can never be taken for one of ours.
        let next_episode = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(1);
        Ok(ZenohExecutorPool {
            session,
            inbound: rx,
            _subscribers: subscribers,
            robots: BTreeMap::new(),
            refused: BTreeMap::new(),
            next_episode,
            options,
            counters: PoolCounters::default(),
        })
    }

    /// Counters so far.
    pub fn counters(&self) -> PoolCounters {
        self.counters
    }

    /// Settings.
    pub fn options(&self) -> &PoolOptions {
        &self.options
    }

    /// Robots currently usable.
    pub fn robots(&self) -> Vec<RobotId> {
        self.robots.keys().cloned().collect()
    }

    /// Waits until at least `count` robots are usable or `timeout` passes;
    /// returns how many are.
    pub fn wait_for_robots(&mut self, count: usize, timeout: Duration) -> usize {
        let deadline = Instant::now() + timeout;
        let mut scratch = HashMap::new();
        let mut queue = VecDeque::new();
        while self.robots.len() < count && Instant::now() < deadline {
            if let Ok(event) = self.inbound.recv_timeout(Duration::from_millis(20)) {
                self.on_event(event, &mut scratch, &mut queue);
            }
        }
        self.robots.len()
    }

    /// Asks a newly seen robot what it is; refuses other protocol versions.
    fn admit(&mut self, robot: RobotId) {
        let key = robot.key(Leaf::Info);
        let replies = match self
            .session
            .get(&key)
            .timeout(Duration::from_secs(3))
            .wait()
        {
            Ok(replies) => replies,
            Err(e) => {
                tracing::warn!(%robot, "querying {key}: {e}");
                return;
            }
        };
        let verdict = match replies.recv() {
            Ok(reply) => match reply.result() {
                Ok(sample) => {
                    let bytes = sample.payload().to_bytes();
                    match protocol::decode(&bytes, self.options.max_message_bytes) {
                        Ok(Message::Info(info)) if info.robot_id != robot => {
                            Err(format!("its info names robot `{}`", info.robot_id))
                        }
                        Ok(Message::Info(info)) if info.action_dim != wmrl_sim::ACTION_DIM => {
                            Err(format!(
                                "it takes {}-D actions, the policy emits {}",
                                info.action_dim,
                                wmrl_sim::ACTION_DIM
                            ))
                        }
                        Ok(Message::Info(info)) => Ok(info),
                        Ok(other) => Err(format!("its info query answered `{}`", other.kind())),
                        Err(e) => Err(e.to_string()),
                    }
                }
                Err(e) => Err(format!("info query failed: {e:?}")),
            },
            Err(_) => Err("no answer to the info query".into()),
        };
        match verdict {
            Ok(info) => {
                tracing::info!(%robot, driver = %info.driver, hz = info.control_hz, "robot joined the pool");
                self.refused.remove(&robot);
                self.robots.entry(robot).or_insert(Slot::Free);
            }
            Err(reason) => {
                tracing::error!(%robot, "robot refused: {reason}");
                self.refused.insert(robot, reason);
            }
        }
    }

    fn on_event(
        &mut self,
        event: Inbound,
        running: &mut HashMap<u64, Running>,
        queue: &mut VecDeque<(usize, u32)>,
    ) -> Option<(usize, Execution<EpisodeRecord>)> {
        match event {
            Inbound::Alive(robot) => {
                if !self.robots.contains_key(&robot) {
                    self.admit(robot);
                }
                None
            }
            Inbound::Gone(robot) => {
                tracing::warn!(%robot, "robot left the pool");
                if let Some(Slot::Busy(episode)) = self.robots.remove(&robot) {
                    let reason = format!("robot `{robot}` left mid-episode");
                    return self.lost(episode, running, queue, &reason);
                }
                None
            }
            Inbound::Payload { leaf, robot, bytes } => {
                let message = match protocol::decode(&bytes, self.options.max_message_bytes) {
                    Ok(message) => message,
                    Err(e) => {
                        self.counters.ignored_messages += 1;
                        tracing::warn!(%robot, "ignored on `{}`: {e}", leaf.as_str());
                        return None;
                    }
                };
                match message {
                    Message::Observation(obs) => {
                        self.on_observation(robot, obs, running);
                        None
                    }
                    Message::Outcome(outcome) => {
                        let Some(run) = running.get(&outcome.episode_id) else {
                            self.counters.ignored_messages += 1;
                            return None;
                        };
                        if run.robot != robot {
                            self.counters.ignored_messages += 1;
                            return None;
                        }
                        let mut run = running.remove(&outcome.episode_id).expect("present");
                        if let Some(slot) = self.robots.get_mut(&robot) {
                            *slot = Slot::Free;
                        }
                        self.counters.completed += 1;
                        run.record.success = outcome.success;
                        run.record.steps = outcome.steps;
                        let execution = match outcome.execution_error {
                            Some(reason) => {
                                self.counters.robot_errors += 1;
                                Execution::Failed {
                                    reason: format!("robot `{robot}`: {reason}"),
                                }
                            }
                            None => Execution::Completed {
                                reward: if outcome.success { 1.0 } else { 0.0 },
                                rollout: run.record,
                            },
                        };
                        Some((run.request, execution))
                    }
                    Message::Status(status) => {
                        tracing::debug!(%robot, ?status, "robot status");
                        None
                    }
                    other => {
                        self.counters.ignored_messages += 1;
                        tracing::warn!(%robot, "ignored `{}` on `{}`", other.kind(), leaf.as_str());
                        None
                    }
                }
            }
        }
    }

    fn on_observation(
        &mut self,
        robot: RobotId,
        obs: ObservationMsg,
        running: &mut HashMap<u64, Running>,
    ) {
        let Some(run) = running.get_mut(&obs.episode_id) else {
            self.counters.ignored_messages += 1;
            return;
        };
        if run.robot != robot || obs.robot_id != robot {
            self.counters.ignored_messages += 1;
            return;
        }
        let images = obs
            .agent_view
            .decode("agent_view")
            .and_then(|a| Ok((a, obs.wrist_view.decode("wrist_view")?)));
        let proprio_ok =
            obs.proprio.len() == wmrl_sim::PROPRIO_DIM && obs.proprio.iter().all(|x| x.is_finite());
        match images {
            Ok((agent, wrist)) if proprio_ok => {
                run.heard = Instant::now();
                run.pending = Some((obs.seq, agent, wrist, obs.proprio));
            }
            Ok(_) => {
                self.counters.ignored_messages += 1;
                tracing::warn!(%robot, "observation with invalid proprioception ignored");
            }
            Err(e) => {
                self.counters.ignored_messages += 1;
                tracing::warn!(%robot, "observation ignored: {e}");
            }
        }
    }

    fn put(&self, key: &str, message: &Message) -> Result<()> {
        crate::net::publish(&self.session, key, message)
    }

    fn dispatch(
        &mut self,
        episodes: &[EpisodeRequest<'_, TaskPrompt>],
        queue: &mut VecDeque<(usize, u32)>,
        running: &mut HashMap<u64, Running>,
    ) -> Result<()> {
        let free: Vec<RobotId> = self
            .robots
            .iter()
            .filter(|(_, slot)| **slot == Slot::Free)
            .map(|(id, _)| id.clone())
            .collect();
        for robot in free {
            let Some((index, tries)) = queue.pop_front() else {
                break;
            };
            let request = &episodes[index];
            let episode_id = self.next_episode;
            self.next_episode += 1;
            let prompt = request.prompt;
            self.put(
                &robot.key(Leaf::Episode),
                &Message::EpisodeStart(EpisodeStart {
                    robot_id: robot.clone(),
                    episode_id,
                    task: prompt.task_index,
                    initial_state: prompt.state_index,
                    instruction: prompt.instruction.clone(),
                    max_steps: self.options.max_steps,
                }),
            )?;
            self.counters.dispatched += 1;
            self.robots.insert(robot.clone(), Slot::Busy(episode_id));
            running.insert(
                episode_id,
                Running {
                    request: index,
                    robot,
                    record: EpisodeRecord {
                        task_index: prompt.task_index,
                        state_index: prompt.state_index,
                        ..Default::default()
                    },
                    // Same seeding as the in-process simulator executor.
                    rng: ChaCha8Rng::seed_from_u64(request.seed),
                    instruction: prompt.instruction.clone(),
                    pending: None,
                    heard: Instant::now(),
                    tries,
                },
            );
        }
        Ok(())
    }

    /// One policy batch over every robot waiting for actions.
    fn act<P: ClosedLoopActor + ?Sized>(
        &mut self,
        policy: &P,
        running: &mut HashMap<u64, Running>,
    ) -> Result<()> {
        let mut waiting: Vec<(u64, &mut Running)> = running
            .iter_mut()
            .filter(|(_, run)| run.pending.is_some())
            .map(|(id, run)| (*id, run))
            .collect();
        if waiting.is_empty() {
            return Ok(());
        }
        waiting.sort_by_key(|(id, _)| *id);
        let pending: Vec<_> = waiting
            .iter_mut()
            .map(|(_, run)| run.pending.take().expect("filtered"))
            .collect();
        let inputs: Vec<PolicyInput<'_>> = waiting
            .iter()
            .zip(&pending)
            .map(|((_, run), (_, agent, wrist, proprio))| PolicyInput {
                agent_view: agent,
                wrist_view: wrist,
                proprio,
                instruction: &run.instruction,
            })
            .collect();
        let mut rngs: Vec<ChaCha8Rng> = waiting.iter().map(|(_, run)| run.rng.clone()).collect();
        let chunks = policy.act(&inputs, self.options.temperature, &mut rngs)?;
        drop(inputs);
        let execute = self
            .options
            .execute_steps
            .unwrap_or(policy.chunk_len())
            .clamp(1, policy.chunk_len());
        let mut messages = Vec::with_capacity(waiting.len());
        for (((episode_id, run), rng), (chunk, (seq, ..))) in waiting
            .into_iter()
            .zip(rngs)
            .zip(chunks.into_iter().zip(&pending))
        {
            run.rng = rng;
            let actions: Vec<Vec<f32>> = chunk.steps().take(execute).map(<[f32]>::to_vec).collect();
            messages.push((
                run.robot.key(Leaf::Action),
                Message::ActionChunk(ActionChunkMsg {
                    robot_id: run.robot.clone(),
                    episode_id,
                    seq: *seq,
                    actions,
                }),
            ));
            // The robot runs the first `execute` actions (fewer only when
            // the episode ends mid-chunk).
            run.record.chunks.push(ActionChunk {
                executed: execute,
                ..chunk
            });
            run.heard = Instant::now();
        }
        for (key, message) in messages {
            self.put(&key, &message)?;
        }
        Ok(())
    }
}

impl<P: ClosedLoopActor + ?Sized> AnchorExecutor<VlaAdapter, P> for ZenohExecutorPool {
    type Error = Error;

    fn execute(
        &mut self,
        policy: &P,
        episodes: &[EpisodeRequest<'_, TaskPrompt>],
    ) -> Result<Vec<Execution<EpisodeRecord>>> {
        let _span = tracing::info_span!("zenoh_execute", episodes = episodes.len()).entered();
        let mut results: Vec<Option<Execution<EpisodeRecord>>> = vec![None; episodes.len()];
        let mut queue: VecDeque<(usize, u32)> = (0..episodes.len()).map(|i| (i, 0)).collect();
        let mut running: HashMap<u64, Running> = HashMap::new();
        let mut idle_since = Instant::now();
        let mut remaining = episodes.len();
        while remaining > 0 {
            // Everything that arrived, before acting: one batch per wave of observations.
            let mut events = Vec::new();
            match self.inbound.recv_timeout(Duration::from_millis(5)) {
                Ok(event) => events.push(event),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(Error::zenoh("receiving from robots", "session closed"));
                }
            }
            events.extend(self.inbound.try_iter());
            for event in events {
                if let Some((index, execution)) = self.on_event(event, &mut running, &mut queue) {
                    remaining -= usize::from(results[index].is_none());
                    results[index] = Some(execution);
                }
            }
            // Silent robots are treated as gone.
            let silent: Vec<(u64, RobotId)> = running
                .iter()
                .filter(|(_, run)| run.heard.elapsed() > self.options.silence_timeout)
                .map(|(id, run)| (*id, run.robot.clone()))
                .collect();
            for (episode, robot) in silent {
                let _ = self.put(
                    &robot.key(Leaf::Abort),
                    &Message::Abort(Abort {
                        robot_id: robot.clone(),
                        episode_id: episode,
                    }),
                );
                self.robots.remove(&robot);
                self.refused
                    .insert(robot.clone(), "silent mid-episode".into());
                let reason = format!(
                    "robot `{robot}` silent for {:.0} s",
                    self.options.silence_timeout.as_secs_f64()
                );
                if let Some((index, execution)) =
                    self.lost(episode, &mut running, &mut queue, &reason)
                {
                    remaining -= usize::from(results[index].is_none());
                    results[index] = Some(execution);
                }
            }
            self.dispatch(episodes, &mut queue, &mut running)?;
            self.act(policy, &mut running)?;
            if running.is_empty() && !queue.is_empty() {
                if idle_since.elapsed() > self.options.discovery_timeout {
                    let detail = if self.refused.is_empty() {
                        String::new()
                    } else {
                        format!(
                            "; refused: {}",
                            self.refused
                                .iter()
                                .map(|(id, why)| format!("`{id}` ({why})"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    };
                    return Err(Error::NoRobots {
                        waited_s: idle_since.elapsed().as_secs_f64(),
                        detail,
                    });
                }
            } else {
                idle_since = Instant::now();
            }
        }
        Ok(results
            .into_iter()
            .map(|r| r.expect("every episode has a result"))
            .collect())
    }
}

impl ZenohExecutorPool {
    /// An episode's robot is gone: re-queue the episode (an execution error,
    /// not a task failure), or give up after `max_requeues`.
    fn lost(
        &mut self,
        episode: u64,
        running: &mut HashMap<u64, Running>,
        queue: &mut VecDeque<(usize, u32)>,
        reason: &str,
    ) -> Option<(usize, Execution<EpisodeRecord>)> {
        let run = running.remove(&episode)?;
        self.counters.requeued += 1;
        tracing::warn!(robot = %run.robot, episode, "{reason}: episode re-queued (execution error)");
        if run.tries >= self.options.max_requeues {
            return Some((
                run.request,
                Execution::Failed {
                    reason: format!("{reason} (after {} re-queues)", run.tries),
                },
            ));
        }
        queue.push_front((run.request, run.tries + 1));
        None
    }
}
