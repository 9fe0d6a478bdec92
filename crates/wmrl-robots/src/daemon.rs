//! `wmrl robots serve`: serves one robot over zenoh through a [`RobotDriver`].
//!
//! The daemon announces the robot with a liveliness token, answers `info`
//! queries, starts episodes only after a completed reset, executes action
//! chunks at the robot's pace after clamping them to its [`SafetyLimits`],
//! publishes an observation after each chunk and the outcome at the end.
//! Safety lives here, on the robot side: a watchdog holds the arm when no
//! action arrives within [`DaemonOptions::watchdog`] (default 200 ms), an
//! emergency stop (`wmrl/estop`, or `emergency_stop` on the robot's operator
//! key) halts it until `clear_stop`, and any malformed, oversized, wrong-version,
//! misaddressed, NaN or wrong-dimension message is rejected with a logged
//! reason while the daemon keeps serving.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;
use zenoh::{Session, Wait};

use crate::driver::{ResetStatus, RobotDriver};
use crate::protocol::{
    self, ActionChunkMsg, ESTOP_KEY, EpisodeStart, Leaf, Message, ObservationMsg, OperatorEvent,
    Outcome, RobotId, RobotInfo, StatusEvent, WireImage,
};
use crate::safety::SafetyLimits;
use crate::{Error, Result};

/// Daemon settings.
#[derive(Debug, Clone, PartialEq)]
pub struct DaemonOptions {
    /// The robot's id (its key-expression chunk).
    pub robot_id: RobotId,
    /// Workspace and speed limits applied to every action.
    pub limits: SafetyLimits,
    /// Hold the arm when no action arrives this long after an observation (default: 200 ms).
    pub watchdog: Duration,
    /// End the episode as an execution error after this long without actions (default: 30 s).
    pub abandon_after: Duration,
    /// Largest accepted payload (default: [`protocol::MAX_MESSAGE_BYTES`]).
    pub max_message_bytes: usize,
}

impl DaemonOptions {
    /// Defaults for robot `robot_id`.
    pub fn new(robot_id: RobotId) -> Self {
        DaemonOptions {
            robot_id,
            limits: SafetyLimits::default(),
            watchdog: Duration::from_millis(200),
            abandon_after: Duration::from_secs(30),
            max_message_bytes: protocol::MAX_MESSAGE_BYTES,
        }
    }
}

/// Counters a running daemon keeps (read with [`RobotDaemon::counters`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DaemonCounters {
    /// Episodes started (after a completed reset).
    pub episodes_started: u64,
    /// Episodes that ended with an outcome.
    pub episodes_finished: u64,
    /// Control steps executed.
    pub steps: u64,
    /// Watchdog holds.
    pub watchdog_holds: u64,
    /// Actions changed by the safety limits.
    pub clamped_actions: u64,
    /// Messages rejected.
    pub rejected_messages: u64,
    /// Emergency stops received.
    pub emergency_stops: u64,
}

#[derive(Default)]
struct Counters {
    episodes_started: AtomicU64,
    episodes_finished: AtomicU64,
    steps: AtomicU64,
    watchdog_holds: AtomicU64,
    clamped_actions: AtomicU64,
    rejected_messages: AtomicU64,
    emergency_stops: AtomicU64,
}

impl Counters {
    fn snapshot(&self) -> DaemonCounters {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        DaemonCounters {
            episodes_started: get(&self.episodes_started),
            episodes_finished: get(&self.episodes_finished),
            steps: get(&self.steps),
            watchdog_holds: get(&self.watchdog_holds),
            clamped_actions: get(&self.clamped_actions),
            rejected_messages: get(&self.rejected_messages),
            emergency_stops: get(&self.emergency_stops),
        }
    }
}

fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

/// A daemon running on its own thread.
pub struct RobotDaemon {
    robot_id: RobotId,
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
    thread: Option<JoinHandle<Result<()>>>,
}

impl std::fmt::Debug for RobotDaemon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RobotDaemon")
            .field("robot_id", &self.robot_id)
            .field("counters", &self.counters.snapshot())
            .finish()
    }
}

/// A message received on one of the daemon's keys.
struct Inbound {
    leaf: Leaf,
    payload: Vec<u8>,
}

impl RobotDaemon {
    /// Declares the robot on `session` and starts serving it.
    pub fn spawn(
        session: Session,
        driver: Box<dyn RobotDriver>,
        options: DaemonOptions,
    ) -> Result<RobotDaemon> {
        options.limits.validate().map_err(|message| Error::Config {
            path: "safety limits".into(),
            message,
        })?;
        let (tx, rx) = mpsc::channel();
        let estop = Arc::new(AtomicBool::new(false));
        let links = Links::declare(&session, &options, driver.as_ref(), tx, estop.clone())?;
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(Counters::default());
        let server = Server {
            id: options.robot_id.clone(),
            session,
            driver,
            options: options.clone(),
            counters: counters.clone(),
            estop,
            state: State::Idle,
            _links: links,
        };
        let thread_stop = stop.clone();
        let thread = std::thread::Builder::new()
            .name(format!("robotd-{}", options.robot_id))
            .spawn(move || server.run(rx, thread_stop))
            .map_err(|e| Error::zenoh("spawning the daemon thread", e))?;
        tracing::info!(robot = %options.robot_id, "robot daemon serving");
        Ok(RobotDaemon {
            robot_id: options.robot_id,
            stop,
            counters,
            thread: Some(thread),
        })
    }

    /// The robot's id.
    pub fn robot_id(&self) -> &RobotId {
        &self.robot_id
    }

    /// Counters so far.
    pub fn counters(&self) -> DaemonCounters {
        self.counters.snapshot()
    }

    /// Stops serving: the liveliness token goes and the session closes.
    pub fn shutdown(mut self) -> Result<()> {
        self.stop.store(true, Ordering::SeqCst);
        self.join_thread()
    }

    /// Blocks until the daemon stops (its session closes or it fails).
    pub fn join(mut self) -> Result<()> {
        self.join_thread()
    }

    fn join_thread(&mut self) -> Result<()> {
        match self.thread.take() {
            Some(thread) => thread
                .join()
                .unwrap_or_else(|_| Err(Error::zenoh("robot daemon thread", "panicked"))),
            None => Ok(()),
        }
    }
}

impl Drop for RobotDaemon {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.join_thread();
    }
}

/// The zenoh declarations that live as long as the daemon.
struct Links {
    _subscribers: Vec<zenoh::pubsub::Subscriber<()>>,
    _info: zenoh::query::Queryable<()>,
    _alive: zenoh::liveliness::LivelinessToken,
}

impl Links {
    fn declare(
        session: &Session,
        options: &DaemonOptions,
        driver: &dyn RobotDriver,
        tx: Sender<Inbound>,
        estop: Arc<AtomicBool>,
    ) -> Result<Links> {
        let id = &options.robot_id;
        let mut subscribers = Vec::new();
        for leaf in [Leaf::Episode, Leaf::Action, Leaf::Abort, Leaf::Operator] {
            let tx = tx.clone();
            let estop = estop.clone();
            let limit = options.max_message_bytes;
            let sub = session
                .declare_subscriber(id.key(leaf))
                .callback(move |sample| {
                    let payload = sample.payload().to_bytes().into_owned();
                    // Emergency stops take effect between two control steps,
                    // even in the middle of a chunk.
                    if leaf == Leaf::Operator
                        && matches!(
                            protocol::decode(&payload, limit),
                            Ok(Message::Operator(OperatorEvent::EmergencyStop))
                        )
                    {
                        estop.store(true, Ordering::SeqCst);
                    }
                    let _ = tx.send(Inbound { leaf, payload });
                })
                .wait()
                .map_err(|e| Error::zenoh(format!("subscribing to {}", id.key(leaf)), e))?;
            subscribers.push(sub);
        }
        let global = session
            .declare_subscriber(ESTOP_KEY)
            .callback(move |_| {
                estop.store(true, Ordering::SeqCst);
                let _ = tx.send(Inbound {
                    leaf: Leaf::Operator,
                    payload: protocol::encode(&Message::Operator(OperatorEvent::EmergencyStop)),
                });
            })
            .wait()
            .map_err(|e| Error::zenoh(format!("subscribing to {ESTOP_KEY}"), e))?;
        subscribers.push(global);

        let info = driver.info();
        let payload = protocol::encode(&Message::Info(RobotInfo {
            robot_id: id.clone(),
            driver: info.driver,
            control_hz: info.control_hz,
            action_dim: wmrl_sim::ACTION_DIM,
            camera: info.camera,
            suite: info.suite,
            automatic_success: info.automatic_success,
        }));
        let info_key = id.key(Leaf::Info);
        let queryable = session
            .declare_queryable(&info_key)
            .callback(move |query| {
                if let Err(e) = query
                    .reply(query.key_expr().clone(), payload.clone())
                    .wait()
                {
                    tracing::warn!("answering an info query: {e}");
                }
            })
            .wait()
            .map_err(|e| Error::zenoh(format!("declaring {info_key}"), e))?;
        let alive = session
            .liveliness()
            .declare_token(id.key(Leaf::Alive))
            .wait()
            .map_err(|e| Error::zenoh("declaring the liveliness token", e))?;
        Ok(Links {
            _subscribers: subscribers,
            _info: queryable,
            _alive: alive,
        })
    }
}

/// Where the robot is in its episode cycle.
#[derive(Debug)]
enum State {
    /// No episode; the next one starts with a reset.
    Idle,
    /// Reset done by the driver; an operator must confirm the scene.
    AwaitingReset(EpisodeStart),
    /// Executing an episode.
    Running(Episode),
    /// Episode over; an operator must give the verdict.
    AwaitingVerdict(EpisodeStart, usize),
    /// Emergency stop: nothing moves until `clear_stop`.
    Stopped,
}

#[derive(Debug)]
struct Episode {
    start: EpisodeStart,
    steps: usize,
    /// Sequence number of the last observation sent (the next chunk must answer it).
    seq: u64,
    observed_at: Instant,
    holding: bool,
}

struct Server {
    id: RobotId,
    session: Session,
    driver: Box<dyn RobotDriver>,
    options: DaemonOptions,
    counters: Arc<Counters>,
    estop: Arc<AtomicBool>,
    state: State,
    _links: Links,
}

impl Server {
    fn run(mut self, rx: Receiver<Inbound>, stop: Arc<AtomicBool>) -> Result<()> {
        self.status(StatusEvent::Ready {
            robot_id: self.id.clone(),
        });
        let tick = Duration::from_millis(20);
        while !stop.load(Ordering::SeqCst) {
            if self.estop.swap(false, Ordering::SeqCst) {
                self.emergency_stop();
            }
            let wait = match &self.state {
                State::Running(e) if !e.holding => {
                    let due = e.observed_at + self.options.watchdog;
                    due.saturating_duration_since(Instant::now()).min(tick)
                }
                _ => tick,
            };
            match rx.recv_timeout(wait) {
                Ok(inbound) => self.handle(inbound),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            self.check_watchdog();
        }
        drop(self._links);
        self.session
            .close()
            .wait()
            .map_err(|e| Error::zenoh("closing the daemon's session", e))
    }

    fn handle(&mut self, inbound: Inbound) {
        let message = match protocol::decode(&inbound.payload, self.options.max_message_bytes) {
            Ok(message) => message,
            Err(e) => return self.reject(format!("on `{}`: {e}", inbound.leaf.as_str())),
        };
        let expected = match inbound.leaf {
            Leaf::Episode => "episode_start",
            Leaf::Action => "action_chunk",
            Leaf::Abort => "abort",
            _ => "operator",
        };
        if message.kind() != expected {
            return self.reject(format!(
                "on `{}`: expected a `{expected}` message, got `{}`",
                inbound.leaf.as_str(),
                message.kind()
            ));
        }
        match message {
            Message::EpisodeStart(start) => self.start_episode(start),
            Message::ActionChunk(chunk) => self.execute_chunk(chunk),
            Message::Abort(abort) => {
                if self.check_addressee(&abort.robot_id) {
                    self.abort(abort.episode_id);
                }
            }
            Message::Operator(event) => self.operator(event),
            _ => unreachable!("kinds checked above"),
        }
    }

    fn check_addressee(&mut self, robot: &RobotId) -> bool {
        if *robot == self.id {
            return true;
        }
        self.reject(format!(
            "message addressed to robot `{robot}` arrived at `{}`",
            self.id
        ));
        false
    }

    fn start_episode(&mut self, start: EpisodeStart) {
        if !self.check_addressee(&start.robot_id) {
            return;
        }
        match &self.state {
            State::Idle => {}
            State::Stopped => {
                return self.reject(format!(
                    "episode {} refused: emergency stop active (send `clear_stop` first)",
                    start.episode_id
                ));
            }
            busy => {
                return self.reject(format!(
                    "episode {} refused: robot busy ({})",
                    start.episode_id,
                    state_name(busy)
                ));
            }
        }
        if start.max_steps == 0 {
            return self.reject(format!(
                "episode {}: max_steps must be positive",
                start.episode_id
            ));
        }
        let _span =
            tracing::info_span!("robot_reset", robot = %self.id, episode = start.episode_id)
                .entered();
        match self.driver.reset(start.task, start.initial_state) {
            Ok(ResetStatus::Ready) => self.begin(start),
            Ok(ResetStatus::NeedsOperator) => {
                self.status(StatusEvent::AwaitingReset {
                    robot_id: self.id.clone(),
                    episode_id: start.episode_id,
                });
                self.state = State::AwaitingReset(start);
            }
            Err(e) => {
                let id = start.episode_id;
                self.publish_outcome(id, false, 0, Some(format!("reset failed: {e}")));
            }
        }
    }

    /// The reset is complete: the episode starts with observation 0.
    fn begin(&mut self, start: EpisodeStart) {
        bump(&self.counters.episodes_started, 1);
        let episode = Episode {
            start,
            steps: 0,
            seq: 0,
            observed_at: Instant::now(),
            holding: false,
        };
        self.state = State::Running(episode);
        self.publish_observation();
    }

    fn execute_chunk(&mut self, chunk: ActionChunkMsg) {
        if !self.check_addressee(&chunk.robot_id) {
            return;
        }
        let State::Running(episode) = &self.state else {
            return self.reject(format!(
                "action chunk for episode {} while {}",
                chunk.episode_id,
                state_name(&self.state)
            ));
        };
        if episode.start.episode_id != chunk.episode_id || episode.seq != chunk.seq {
            let (id, seq) = (episode.start.episode_id, episode.seq);
            return self.reject(format!(
                "stale action chunk (episode {}, seq {}); running episode {id} expects seq {seq}",
                chunk.episode_id, chunk.seq
            ));
        }
        if let Err(e) = protocol::validate_actions(&chunk.actions, wmrl_sim::ACTION_DIM) {
            if let Err(e) = self.driver.hold() {
                tracing::warn!("hold failed: {e}");
            }
            return self.reject(format!("action chunk refused, arm holds: {e}"));
        }
        let mut clamped = 0;
        let mut finished = None;
        for action in &chunk.actions {
            if self.estop.swap(false, Ordering::SeqCst) {
                return self.emergency_stop();
            }
            let raw: [f32; 7] = action.as_slice().try_into().expect("dimension validated");
            let (safe, changed) = self
                .options
                .limits
                .clamp(&raw, self.driver.end_effector_position());
            clamped += changed as usize;
            let report = self.driver.step(&safe);
            bump(&self.counters.steps, 1);
            let State::Running(episode) = &mut self.state else {
                unreachable!("still running")
            };
            episode.steps += 1;
            match report {
                Err(e) => {
                    finished = Some((false, Some(e.to_string())));
                    break;
                }
                Ok(report) if report.execution_error.is_some() => {
                    finished = Some((false, report.execution_error));
                    break;
                }
                Ok(report) if report.success => {
                    finished = Some((true, None));
                    break;
                }
                Ok(_) if episode.steps >= episode.start.max_steps => {
                    finished = Some((false, None));
                    break;
                }
                Ok(_) => {}
            }
        }
        if clamped > 0 {
            bump(&self.counters.clamped_actions, clamped as u64);
            tracing::info!(robot = %self.id, clamped, "actions limited by the safety limits");
            self.status(StatusEvent::Clamped {
                robot_id: self.id.clone(),
                episode_id: chunk.episode_id,
                actions: clamped,
            });
        }
        match finished {
            Some((success, error)) => self.finish(success, error),
            None => {
                if let State::Running(episode) = &mut self.state {
                    episode.seq += 1;
                }
                self.publish_observation();
            }
        }
    }

    fn finish(&mut self, success: bool, error: Option<String>) {
        let State::Running(episode) = std::mem::replace(&mut self.state, State::Idle) else {
            return;
        };
        if error.is_none() && !self.driver.info().automatic_success {
            self.status(StatusEvent::AwaitingVerdict {
                robot_id: self.id.clone(),
                episode_id: episode.start.episode_id,
            });
            self.state = State::AwaitingVerdict(episode.start, episode.steps);
            return;
        }
        self.publish_outcome(episode.start.episode_id, success, episode.steps, error);
    }

    fn abort(&mut self, episode_id: u64) {
        let current = match &self.state {
            State::Running(e) => Some(e.start.episode_id),
            State::AwaitingReset(s) | State::AwaitingVerdict(s, _) => Some(s.episode_id),
            _ => None,
        };
        if current != Some(episode_id) {
            return self.reject(format!(
                "abort of episode {episode_id}, which is not running"
            ));
        }
        if let Err(e) = self.driver.hold() {
            tracing::warn!("hold failed: {e}");
        }
        tracing::info!(robot = %self.id, episode_id, "episode aborted by the trainer");
        self.state = State::Idle;
        self.status(StatusEvent::Ready {
            robot_id: self.id.clone(),
        });
    }

    fn operator(&mut self, event: OperatorEvent) {
        match event {
            OperatorEvent::EmergencyStop => {
                self.estop.store(false, Ordering::SeqCst);
                self.emergency_stop();
            }
            OperatorEvent::ClearStop => {
                if matches!(self.state, State::Stopped) {
                    tracing::warn!(robot = %self.id, "emergency stop cleared");
                    self.state = State::Idle;
                    self.status(StatusEvent::Ready {
                        robot_id: self.id.clone(),
                    });
                }
            }
            OperatorEvent::ResetDone => match std::mem::replace(&mut self.state, State::Idle) {
                State::AwaitingReset(start) => self.begin(start),
                other => {
                    self.state = other;
                    self.reject("`reset_done` while no reset was awaited".into());
                }
            },
            OperatorEvent::SuccessConfirmed { success } => {
                match std::mem::replace(&mut self.state, State::Idle) {
                    State::AwaitingVerdict(start, steps) => {
                        self.publish_outcome(start.episode_id, success, steps, None)
                    }
                    other => {
                        self.state = other;
                        self.reject("`success_confirmed` while no verdict was awaited".into());
                    }
                }
            }
        }
    }

    fn emergency_stop(&mut self) {
        self.driver.emergency_stop();
        if matches!(self.state, State::Stopped) {
            return; // Already stopped (the same stop arrives by flag and by message).
        }
        bump(&self.counters.emergency_stops, 1);
        tracing::warn!(robot = %self.id, "EMERGENCY STOP");
        let running = match std::mem::replace(&mut self.state, State::Stopped) {
            State::Running(e) => Some((e.start.episode_id, e.steps)),
            State::AwaitingReset(s) => Some((s.episode_id, 0)),
            State::AwaitingVerdict(s, steps) => Some((s.episode_id, steps)),
            State::Idle | State::Stopped => None,
        };
        if let Some((episode_id, steps)) = running {
            self.publish_outcome(episode_id, false, steps, Some("emergency stop".into()));
            self.state = State::Stopped;
        }
        self.status(StatusEvent::EmergencyStopped {
            robot_id: self.id.clone(),
        });
    }

    fn check_watchdog(&mut self) {
        let State::Running(episode) = &mut self.state else {
            return;
        };
        let waited = episode.observed_at.elapsed();
        if waited >= self.options.abandon_after {
            let message = format!(
                "no action for {:.1} s: the trainer went silent",
                waited.as_secs_f64()
            );
            tracing::warn!(robot = %self.id, "{message}");
            return self.finish(false, Some(message));
        }
        if !episode.holding && waited >= self.options.watchdog {
            episode.holding = true;
            let episode_id = episode.start.episode_id;
            if let Err(e) = self.driver.hold() {
                tracing::warn!("hold failed: {e}");
            }
            bump(&self.counters.watchdog_holds, 1);
            tracing::warn!(robot = %self.id, episode_id, waited_ms = waited.as_millis() as u64, "watchdog: no action in time, holding the arm");
            self.status(StatusEvent::WatchdogHold {
                robot_id: self.id.clone(),
                episode_id,
                waited_ms: waited.as_millis() as u64,
            });
        }
    }

    fn publish_observation(&mut self) {
        let State::Running(episode) = &self.state else {
            return;
        };
        let (episode_id, seq, step) = (episode.start.episode_id, episode.seq, episode.steps);
        match self.driver.observe() {
            Ok(observation) => {
                let message = Message::Observation(ObservationMsg {
                    robot_id: self.id.clone(),
                    episode_id,
                    seq,
                    step,
                    proprio: observation.proprio.to_vec(),
                    agent_view: WireImage::encode(&observation.agent_view),
                    wrist_view: WireImage::encode(&observation.wrist_view),
                });
                self.put(Leaf::Obs, &message);
                if let State::Running(episode) = &mut self.state {
                    episode.observed_at = Instant::now();
                    episode.holding = false;
                }
            }
            Err(e) => self.finish(false, Some(format!("observation failed: {e}"))),
        }
    }

    fn publish_outcome(
        &mut self,
        episode_id: u64,
        success: bool,
        steps: usize,
        error: Option<String>,
    ) {
        bump(&self.counters.episodes_finished, 1);
        tracing::info!(robot = %self.id, episode_id, success, steps, error = error.as_deref().unwrap_or(""), "episode over");
        let message = Message::Outcome(Outcome {
            robot_id: self.id.clone(),
            episode_id,
            success,
            steps,
            execution_error: error,
        });
        self.put(Leaf::Outcome, &message);
        if !matches!(self.state, State::Stopped) {
            self.status(StatusEvent::Ready {
                robot_id: self.id.clone(),
            });
        }
    }

    fn reject(&mut self, reason: String) {
        bump(&self.counters.rejected_messages, 1);
        tracing::warn!(robot = %self.id, "rejected: {reason}");
        self.status(StatusEvent::Rejected {
            robot_id: self.id.clone(),
            reason,
        });
    }

    fn status(&self, event: StatusEvent) {
        self.put(Leaf::Status, &Message::Status(event));
    }

    fn put(&self, leaf: Leaf, message: &Message) {
        if let Err(e) = crate::net::publish(&self.session, &self.id.key(leaf), message) {
            tracing::warn!("{e}");
        }
    }
}

fn state_name(state: &State) -> &'static str {
    match state {
        State::Idle => "idle",
        State::AwaitingReset(_) => "awaiting an operator's reset",
        State::Running(_) => "running an episode",
        State::AwaitingVerdict(..) => "awaiting an operator's verdict",
        State::Stopped => "emergency-stopped",
    }
}
