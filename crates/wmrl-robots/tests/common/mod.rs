//! Loopback fixtures: free ports, daemons backed by the simulator, a raw
//! protocol client for the trainer's side, and a scripted closed-loop actor.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use rand_chacha::ChaCha8Rng;
use zenoh::handlers::FifoChannelHandler;
use zenoh::pubsub::Subscriber;
use zenoh::qos::CongestionControl;
use zenoh::sample::Sample;
use zenoh::{Session, Wait};

use wmrl_robots::daemon::{DaemonOptions, RobotDaemon};
use wmrl_robots::driver::{SimDriver, SimDriverOptions};
use wmrl_robots::net::NetOptions;
use wmrl_robots::protocol::{self, Leaf, Message, ObservationMsg, RobotId, StatusEvent};
use wmrl_vla::rollout::ClosedLoopActor;
use wmrl_vla::{ActionChunk, PolicyInput};

/// A loopback TCP endpoint on a port that was free a moment ago.
pub fn endpoint() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    format!("tcp/127.0.0.1:{}", listener.local_addr().unwrap().port())
}

/// Simulator settings for tests: small cameras.
pub fn sim_options(camera: u32) -> SimDriverOptions {
    let mut options = SimDriverOptions::default();
    options.env.camera.width = camera;
    options.env.camera.height = camera;
    options.env.camera.enabled = camera > 0;
    options
}

/// A simulator-backed daemon connecting to `endpoint`.
pub fn daemon(endpoint: &str, id: &str, configure: impl FnOnce(&mut DaemonOptions)) -> RobotDaemon {
    let session = NetOptions::connect_to(endpoint).open().unwrap();
    let mut options = DaemonOptions::new(RobotId::new(id).unwrap());
    configure(&mut options);
    RobotDaemon::spawn(session, Box::new(SimDriver::new(sim_options(32))), options).unwrap()
}

/// The trainer's side of the protocol, by hand.
pub struct RawTrainer {
    pub session: Session,
    pub robot: RobotId,
    obs: Subscriber<FifoChannelHandler<Sample>>,
    outcome: Subscriber<FifoChannelHandler<Sample>>,
    status: Subscriber<FifoChannelHandler<Sample>>,
}

impl RawTrainer {
    pub fn new(session: Session, robot: &str) -> Self {
        let robot = RobotId::new(robot).unwrap();
        let sub = |leaf: Leaf| session.declare_subscriber(robot.key(leaf)).wait().unwrap();
        let trainer = RawTrainer {
            obs: sub(Leaf::Obs),
            outcome: sub(Leaf::Outcome),
            status: sub(Leaf::Status),
            session,
            robot,
        };
        // Let the declarations reach the daemon before the first message.
        std::thread::sleep(Duration::from_millis(400));
        trainer
    }

    pub fn put_bytes(&self, leaf: Leaf, bytes: Vec<u8>) {
        self.session
            .put(self.robot.key(leaf), bytes)
            .congestion_control(CongestionControl::Block)
            .wait()
            .unwrap();
    }

    pub fn put(&self, leaf: Leaf, message: Message) {
        self.put_bytes(leaf, protocol::encode(&message));
    }

    fn next(sub: &Subscriber<FifoChannelHandler<Sample>>, timeout: Duration) -> Option<Message> {
        let sample = sub.recv_timeout(timeout).ok().flatten()?;
        Some(protocol::decode(&sample.payload().to_bytes(), usize::MAX).unwrap())
    }

    pub fn observation(&self, timeout: Duration) -> Option<ObservationMsg> {
        match Self::next(&self.obs, timeout)? {
            Message::Observation(o) => Some(o),
            other => panic!("expected an observation, got {other:?}"),
        }
    }

    pub fn outcome(&self, timeout: Duration) -> Option<protocol::Outcome> {
        match Self::next(&self.outcome, timeout)? {
            Message::Outcome(o) => Some(o),
            other => panic!("expected an outcome, got {other:?}"),
        }
    }

    /// Status events until `stop` matches one (returned) or `timeout` passes.
    pub fn status_until(
        &self,
        timeout: Duration,
        stop: impl Fn(&StatusEvent) -> bool,
    ) -> (Vec<StatusEvent>, Option<StatusEvent>) {
        let deadline = Instant::now() + timeout;
        let mut seen = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match Self::next(&self.status, left) {
                Some(Message::Status(event)) if stop(&event) => return (seen, Some(event)),
                Some(Message::Status(event)) => seen.push(event),
                Some(other) => panic!("expected a status, got {other:?}"),
                None => break,
            }
        }
        (seen, None)
    }
}

/// A closed-loop actor that always sends the same action: enough to drive
/// the protocol; the tests of learning use the real policy.
pub struct ConstantActor {
    pub action: [f32; 7],
    pub chunk_len: usize,
}

impl ClosedLoopActor for ConstantActor {
    fn chunk_len(&self) -> usize {
        self.chunk_len
    }

    fn act(
        &self,
        inputs: &[PolicyInput<'_>],
        _temperature: f64,
        _rngs: &mut [ChaCha8Rng],
    ) -> wmrl_vla::Result<Vec<ActionChunk>> {
        Ok(inputs
            .iter()
            .map(|_| ActionChunk {
                tokens: vec![128; self.chunk_len * 7],
                actions: self.action.repeat(self.chunk_len),
                chunk_len: self.chunk_len,
                action_dim: 7,
                log_prob: 0.0,
                token_log_probs: Vec::new(),
                executed: self.chunk_len,
            })
            .collect())
    }
}
