//! The wire protocol between the trainer and robot daemons: zenoh key
//! expressions under `wmrl/`, and versioned JSON messages.
//!
//! Every payload is one UTF-8 JSON object with a protocol version `v` and a
//! message `type`, so a Python or C++ client with the official zenoh bindings
//! and any JSON library can speak it. Images travel as base64 raw RGB8.
//! [`decode`] checks size, version, then shape, and names what was wrong;
//! the schemas are in the crate README.
//!
//! | key expression | direction | message |
//! |---|---|---|
//! | `wmrl/robots/<id>/alive` | robot | liveliness token (availability) |
//! | `wmrl/robots/<id>/info` | robot (queryable) | [`RobotInfo`] |
//! | `wmrl/robots/<id>/episode` | trainer → robot | [`EpisodeStart`] |
//! | `wmrl/robots/<id>/action` | trainer → robot | [`ActionChunkMsg`] |
//! | `wmrl/robots/<id>/abort` | trainer → robot | [`Abort`] |
//! | `wmrl/robots/<id>/obs` | robot → trainer | [`ObservationMsg`] |
//! | `wmrl/robots/<id>/outcome` | robot → trainer | [`Outcome`] |
//! | `wmrl/robots/<id>/status` | robot → anyone | [`StatusEvent`] |
//! | `wmrl/robots/<id>/operator` | operator → robot | [`OperatorEvent`] |
//! | `wmrl/estop` | anyone allowed → every robot | [`OperatorEvent::EmergencyStop`] |

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use image::RgbImage;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// Version of the message schemas; a peer speaking another version is refused.
pub const PROTOCOL_VERSION: u32 = 1;

/// Largest payload a peer accepts (default 8 MiB: two 512×512 RGB images in base64).
pub const MAX_MESSAGE_BYTES: usize = 8 << 20;

/// Root of every WMRL key expression.
pub const ROOT: &str = "wmrl";

/// The global emergency-stop key: every daemon halts on any message here.
pub const ESTOP_KEY: &str = "wmrl/estop";

/// Why a payload was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// Larger than the configured limit.
    #[error("message of {bytes} bytes exceeds the {limit}-byte limit")]
    TooLarge {
        /// Payload size.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// Not a JSON object, or fields of the wrong type.
    #[error("malformed {expected} message: {reason}")]
    Malformed {
        /// The message type that was expected.
        expected: &'static str,
        /// The parser's explanation (names the field and position).
        reason: String,
    },
    /// Another protocol version.
    #[error(
        "protocol version mismatch: this peer speaks v{expected}, the message is {found}; upgrade the older side"
    )]
    VersionMismatch {
        /// Our version.
        expected: u32,
        /// The message's `v` field as found (`missing` when absent).
        found: String,
    },
    /// Well-formed but not acceptable (NaN action, wrong dimension, wrong robot id).
    #[error("invalid {field}: {reason}")]
    Invalid {
        /// The offending field.
        field: String,
        /// What was expected.
        reason: String,
    },
}

/// A robot's identifier: 1–64 characters from `[A-Za-z0-9_-]`, so it is
/// one chunk of a key expression.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RobotId(String);

impl RobotId {
    /// Validates `id`.
    pub fn new(id: &str) -> Result<Self, ProtocolError> {
        let ok = !id.is_empty()
            && id.len() <= 64
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if ok {
            Ok(RobotId(id.to_string()))
        } else {
            Err(ProtocolError::Invalid {
                field: "robot id".into(),
                reason: format!("`{id}` must be 1-64 characters from [A-Za-z0-9_-]"),
            })
        }
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `wmrl/robots/<id>/<leaf>`.
    pub fn key(&self, leaf: Leaf) -> String {
        format!("{ROOT}/robots/{}/{}", self.0, leaf.as_str())
    }

    /// The robot id in a key `wmrl/robots/<id>/...`, if it is one.
    pub fn from_key(key: &str) -> Option<(RobotId, &str)> {
        let rest = key.strip_prefix("wmrl/robots/")?;
        let (id, leaf) = rest.split_once('/')?;
        Some((RobotId::new(id).ok()?, leaf))
    }
}

impl TryFrom<String> for RobotId {
    type Error = ProtocolError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        RobotId::new(&value)
    }
}

impl From<RobotId> for String {
    fn from(id: RobotId) -> String {
        id.0
    }
}

impl std::fmt::Display for RobotId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The last chunk of a robot's key expressions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leaf {
    /// Liveliness token.
    Alive,
    /// Queryable robot description.
    Info,
    /// Episode start requests.
    Episode,
    /// Action chunks.
    Action,
    /// Episode aborts.
    Abort,
    /// Observations.
    Obs,
    /// Episode outcomes.
    Outcome,
    /// Status events.
    Status,
    /// Operator events.
    Operator,
}

impl Leaf {
    /// The key chunk.
    pub fn as_str(self) -> &'static str {
        match self {
            Leaf::Alive => "alive",
            Leaf::Info => "info",
            Leaf::Episode => "episode",
            Leaf::Action => "action",
            Leaf::Abort => "abort",
            Leaf::Obs => "obs",
            Leaf::Outcome => "outcome",
            Leaf::Status => "status",
            Leaf::Operator => "operator",
        }
    }

    /// `wmrl/robots/*/<leaf>`: this leaf of every robot.
    pub fn every_robot(self) -> String {
        format!("{ROOT}/robots/*/{}", self.as_str())
    }
}

/// An RGB8 image as it travels: raw bytes, base64 in JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireImage {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// `width × height × 3` bytes, row-major RGB, base64 (standard alphabet).
    pub rgb8_base64: String,
}

impl WireImage {
    /// Encodes an image.
    pub fn encode(image: &RgbImage) -> Self {
        WireImage {
            width: image.width(),
            height: image.height(),
            rgb8_base64: BASE64.encode(image.as_raw()),
        }
    }

    /// Decodes, checking the byte count against the size.
    pub fn decode(&self, field: &str) -> Result<RgbImage, ProtocolError> {
        let bytes = BASE64
            .decode(&self.rgb8_base64)
            .map_err(|e| ProtocolError::Invalid {
                field: field.into(),
                reason: format!("not base64: {e}"),
            })?;
        let expected = self.width as usize * self.height as usize * 3;
        if bytes.len() != expected {
            return Err(ProtocolError::Invalid {
                field: field.into(),
                reason: format!(
                    "{}×{} RGB8 needs {expected} bytes, got {}",
                    self.width,
                    self.height,
                    bytes.len()
                ),
            });
        }
        Ok(RgbImage::from_raw(self.width, self.height, bytes).expect("length checked"))
    }
}

/// What a robot is, answered on `wmrl/robots/<id>/info`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RobotInfo {
    /// The robot's id.
    pub robot_id: RobotId,
    /// Kind of driver (`sim`, a vendor name, …).
    pub driver: String,
    /// Control rate (Hz) the robot executes actions at.
    pub control_hz: f64,
    /// Values per action (7 for LIBERO's end-effector delta + gripper).
    pub action_dim: usize,
    /// Camera image size (width, height); (0, 0) when it sends no images.
    pub camera: (u32, u32),
    /// Task suite the robot can set up (e.g. `libero-long`).
    pub suite: String,
    /// Whether episode success is detected automatically (otherwise an operator confirms it).
    pub automatic_success: bool,
}

/// Trainer → robot: set up and start an episode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EpisodeStart {
    /// The robot addressed (must be the receiving robot).
    pub robot_id: RobotId,
    /// Trainer-chosen episode id, echoed in every reply.
    pub episode_id: u64,
    /// Task index in the suite.
    pub task: usize,
    /// Fixed initial-state index.
    pub initial_state: usize,
    /// Language instruction (for the log and for operators).
    pub instruction: String,
    /// Control steps before the episode ends as a failure.
    pub max_steps: usize,
}

/// Trainer → robot: the actions to execute next.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActionChunkMsg {
    /// The robot addressed.
    pub robot_id: RobotId,
    /// The running episode.
    pub episode_id: u64,
    /// Sequence number: that of the observation the chunk answers.
    pub seq: u64,
    /// Actions, each `action_dim` values in [-1, 1].
    pub actions: Vec<Vec<f32>>,
}

/// Trainer → robot: stop the episode now (no outcome is sent).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Abort {
    /// The robot addressed.
    pub robot_id: RobotId,
    /// The episode to stop.
    pub episode_id: u64,
}

/// Robot → trainer: what the robot sees after a reset or an executed chunk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObservationMsg {
    /// The sending robot.
    pub robot_id: RobotId,
    /// The running episode.
    pub episode_id: u64,
    /// 0 after the reset, then +1 per executed chunk.
    pub seq: u64,
    /// Control steps executed so far.
    pub step: usize,
    /// Proprioception (15 values: joints, eef position, eef quaternion xyzw, gripper width).
    pub proprio: Vec<f32>,
    /// Third-person camera.
    pub agent_view: WireImage,
    /// Wrist camera.
    pub wrist_view: WireImage,
}

/// Robot → trainer: how an episode ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Outcome {
    /// The sending robot.
    pub robot_id: RobotId,
    /// The episode.
    pub episode_id: u64,
    /// The task's goal was reached.
    pub success: bool,
    /// Control steps executed.
    pub steps: usize,
    /// Set when the episode could not be run properly (emergency stop,
    /// unstable simulation, hardware fault): an execution error, never a task failure.
    pub execution_error: Option<String>,
}

/// Robot → anyone: what happened on the robot side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case", deny_unknown_fields)]
pub enum StatusEvent {
    /// Idle and reset: episodes may start.
    Ready {
        /// The robot.
        robot_id: RobotId,
    },
    /// Waiting for an operator to confirm the scene is reset.
    AwaitingReset {
        /// The robot.
        robot_id: RobotId,
        /// The episode waiting.
        episode_id: u64,
    },
    /// Waiting for an operator to confirm success or failure.
    AwaitingVerdict {
        /// The robot.
        robot_id: RobotId,
        /// The episode waiting.
        episode_id: u64,
    },
    /// No action arrived in time: the arm holds its pose.
    WatchdogHold {
        /// The robot.
        robot_id: RobotId,
        /// The running episode.
        episode_id: u64,
        /// Milliseconds since the last observation was sent.
        waited_ms: u64,
    },
    /// Actions were limited to the workspace bounds or speed limits.
    Clamped {
        /// The robot.
        robot_id: RobotId,
        /// The running episode.
        episode_id: u64,
        /// Actions of the chunk that were changed.
        actions: usize,
    },
    /// A message was refused; the robot stays safe and keeps serving.
    Rejected {
        /// The robot.
        robot_id: RobotId,
        /// Why.
        reason: String,
    },
    /// Halted by an emergency stop; nothing moves until `clear_stop`.
    EmergencyStopped {
        /// The robot.
        robot_id: RobotId,
    },
}

/// Operator (or safety system) → robot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case", deny_unknown_fields)]
pub enum OperatorEvent {
    /// The scene is reset for the waiting episode.
    ResetDone,
    /// The finished episode's verdict.
    SuccessConfirmed {
        /// Whether the task was accomplished.
        success: bool,
    },
    /// Halt now.
    EmergencyStop,
    /// Leave the emergency stop (the next episode still needs a reset).
    ClearStop,
}

/// Every message type, tagged `type` on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Message {
    /// [`RobotInfo`].
    Info(RobotInfo),
    /// [`EpisodeStart`].
    EpisodeStart(EpisodeStart),
    /// [`ActionChunkMsg`].
    ActionChunk(ActionChunkMsg),
    /// [`Abort`].
    Abort(Abort),
    /// [`ObservationMsg`].
    Observation(ObservationMsg),
    /// [`Outcome`].
    Outcome(Outcome),
    /// [`StatusEvent`].
    Status(StatusEvent),
    /// [`OperatorEvent`].
    Operator(OperatorEvent),
}

impl Message {
    /// The wire name of the message type.
    pub fn kind(&self) -> &'static str {
        match self {
            Message::Info(_) => "info",
            Message::EpisodeStart(_) => "episode_start",
            Message::ActionChunk(_) => "action_chunk",
            Message::Abort(_) => "abort",
            Message::Observation(_) => "observation",
            Message::Outcome(_) => "outcome",
            Message::Status(_) => "status",
            Message::Operator(_) => "operator",
        }
    }
}

#[derive(Serialize)]
struct EnvelopeOut<'a> {
    v: u32,
    #[serde(flatten)]
    message: &'a Message,
}

/// Encodes a message with the protocol version.
pub fn encode(message: &Message) -> Vec<u8> {
    serde_json::to_vec(&EnvelopeOut {
        v: PROTOCOL_VERSION,
        message,
    })
    .expect("protocol messages always serialise")
}

/// Decodes a payload: size, then version, then the message's shape.
pub fn decode(bytes: &[u8], limit: usize) -> Result<Message, ProtocolError> {
    decode_as(bytes, limit, "wmrl")
}

fn decode_as<T: DeserializeOwned>(
    bytes: &[u8],
    limit: usize,
    expected: &'static str,
) -> Result<T, ProtocolError> {
    if bytes.len() > limit {
        return Err(ProtocolError::TooLarge {
            bytes: bytes.len(),
            limit,
        });
    }
    let mut value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| ProtocolError::Malformed {
            expected,
            reason: e.to_string(),
        })?;
    let object = value
        .as_object_mut()
        .ok_or_else(|| ProtocolError::Malformed {
            expected,
            reason: "not a JSON object".into(),
        })?;
    match object.remove("v") {
        Some(serde_json::Value::Number(n)) if n.as_u64() == Some(PROTOCOL_VERSION as u64) => {}
        Some(other) => {
            return Err(ProtocolError::VersionMismatch {
                expected: PROTOCOL_VERSION,
                found: format!("v{other}"),
            });
        }
        None => {
            return Err(ProtocolError::VersionMismatch {
                expected: PROTOCOL_VERSION,
                found: "missing (no `v` field)".into(),
            });
        }
    }
    serde_json::from_value(value).map_err(|e| ProtocolError::Malformed {
        expected,
        reason: e.to_string(),
    })
}

/// Checks an action chunk: at least one action, each of `action_dim` finite values.
pub fn validate_actions(actions: &[Vec<f32>], action_dim: usize) -> Result<(), ProtocolError> {
    if actions.is_empty() {
        return Err(ProtocolError::Invalid {
            field: "actions".into(),
            reason: "empty chunk".into(),
        });
    }
    for (i, action) in actions.iter().enumerate() {
        if action.len() != action_dim {
            return Err(ProtocolError::Invalid {
                field: format!("actions[{i}]"),
                reason: format!("expected {action_dim} values, got {}", action.len()),
            });
        }
        if let Some(j) = action.iter().position(|x| !x.is_finite()) {
            return Err(ProtocolError::Invalid {
                field: format!("actions[{i}][{j}]"),
                reason: format!("expected a finite number, got {}", action[j]),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id() -> RobotId {
        RobotId::new("panda-1").unwrap()
    }

    #[test]
    fn messages_round_trip_with_version_and_type() {
        let start = Message::EpisodeStart(EpisodeStart {
            robot_id: id(),
            episode_id: 7,
            task: 3,
            initial_state: 12,
            instruction: "open the drawer".into(),
            max_steps: 520,
        });
        let bytes = encode(&start);
        let text = std::str::from_utf8(&bytes).unwrap();
        assert!(text.contains("\"v\":1"), "{text}");
        assert!(text.contains("\"type\":\"episode_start\""), "{text}");
        assert_eq!(decode(&bytes, MAX_MESSAGE_BYTES).unwrap(), start);

        let status = Message::Status(StatusEvent::WatchdogHold {
            robot_id: id(),
            episode_id: 1,
            waited_ms: 250,
        });
        let bytes = encode(&status);
        assert!(
            std::str::from_utf8(&bytes)
                .unwrap()
                .contains("\"event\":\"watchdog_hold\"")
        );
        assert_eq!(decode(&bytes, MAX_MESSAGE_BYTES).unwrap(), status);
    }

    #[test]
    fn other_versions_are_refused_by_name() {
        let text = br#"{"v":2,"type":"abort","robot_id":"panda-1","episode_id":1}"#;
        let err = decode(text, MAX_MESSAGE_BYTES).unwrap_err();
        assert!(matches!(err, ProtocolError::VersionMismatch { .. }));
        assert!(err.to_string().contains("speaks v1"), "{err}");
        assert!(err.to_string().contains("v2"), "{err}");
        let text = br#"{"type":"abort","robot_id":"panda-1","episode_id":1}"#;
        let err = decode(text, MAX_MESSAGE_BYTES).unwrap_err();
        assert!(err.to_string().contains("missing"), "{err}");
    }

    #[test]
    fn malformed_and_oversized_payloads_are_refused() {
        let err = decode(b"not json", MAX_MESSAGE_BYTES).unwrap_err();
        assert!(matches!(err, ProtocolError::Malformed { .. }), "{err}");
        let err = decode(br#"{"v":1,"type":"abort","robot_id":"panda-1"}"#, 1000).unwrap_err();
        assert!(err.to_string().contains("episode_id"), "{err}");
        let err = decode(&[b' '; 2000], 1000).unwrap_err();
        assert_eq!(
            err,
            ProtocolError::TooLarge {
                bytes: 2000,
                limit: 1000
            }
        );
        let err = decode(
            br#"{"v":1,"type":"abort","robot_id":"bad/id","episode_id":1}"#,
            1000,
        )
        .unwrap_err();
        assert!(err.to_string().contains("bad/id"), "{err}");
    }

    #[test]
    fn actions_are_checked_for_dimension_and_nan() {
        assert!(validate_actions(&[vec![0.0; 7]], 7).is_ok());
        let err = validate_actions(&[vec![0.0; 7], vec![0.0; 6]], 7).unwrap_err();
        assert!(err.to_string().contains("actions[1]"), "{err}");
        let err = validate_actions(&[vec![0.0, f32::NAN, 0.0, 0.0, 0.0, 0.0, 0.0]], 7).unwrap_err();
        assert!(err.to_string().contains("actions[0][1]"), "{err}");
        assert!(validate_actions(&[], 7).is_err());
    }

    #[test]
    fn images_round_trip_and_sizes_are_checked() {
        let mut image = RgbImage::new(3, 2);
        image.put_pixel(2, 1, image::Rgb([1, 2, 3]));
        let wire = WireImage::encode(&image);
        assert_eq!(wire.decode("agent_view").unwrap(), image);
        let bad = WireImage { width: 4, ..wire };
        let err = bad.decode("agent_view").unwrap_err();
        assert!(err.to_string().contains("agent_view"), "{err}");
    }

    #[test]
    fn keys_name_the_robot() {
        assert_eq!(id().key(Leaf::Action), "wmrl/robots/panda-1/action");
        assert_eq!(Leaf::Obs.every_robot(), "wmrl/robots/*/obs");
        let (robot, leaf) = RobotId::from_key("wmrl/robots/panda-1/obs").unwrap();
        assert_eq!((robot, leaf), (id(), "obs"));
        assert!(RobotId::from_key("wmrl/other/x").is_none());
    }
}
