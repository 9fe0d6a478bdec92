//! The crate's error type: every failure names what was wrong and where.

use std::fmt;

use crate::advantage::Stream;

/// Which pluggable component of a training step failed (see [`crate::seams`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Component {
    /// The [`crate::seams::Adapter`] (prompt source).
    Adapter,
    /// The [`crate::seams::Policy`] (learner).
    Policy,
    /// The [`crate::seams::WorldModel`] (imagination and scoring).
    WorldModel,
    /// The [`crate::seams::AnchorExecutor`] (real execution).
    Executor,
}

impl fmt::Display for Component {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Component::Adapter => "adapter",
            Component::Policy => "policy",
            Component::WorldModel => "world model",
            Component::Executor => "anchor executor",
        })
    }
}

/// Errors of the WMRL core.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A score or reward is NaN or infinite; it is never averaged in.
    #[error(
        "{stream} group {group}, sample {sample}: {field} is {value}, expected a finite number"
    )]
    NonFinite {
        /// The stream the group belongs to.
        stream: Stream,
        /// Group index within the step.
        group: usize,
        /// Sample index within the group.
        sample: usize,
        /// `"score"` or `"reward"`.
        field: &'static str,
        /// The offending value.
        value: f64,
    },
    /// A group is malformed for the current mode (missing rewards or scores, lengths differ, empty).
    #[error("group {group}: {message}")]
    InvalidGroup {
        /// Group index within the step.
        group: usize,
        /// What was expected.
        message: String,
    },
    /// A calibration pair is invalid (non-finite value or negative weight).
    #[error("pair {index}: {field} is {value}, expected {expected}")]
    InvalidPair {
        /// Index of the pair in the input.
        index: usize,
        /// `"score"`, `"reward"` or `"weight"`.
        field: &'static str,
        /// The offending value.
        value: f64,
        /// What a valid value looks like.
        expected: &'static str,
    },
    /// There was nothing to fit.
    #[error("cannot fit an isotonic map to {what}: no pair with positive weight")]
    NoPairs {
        /// What was being fitted.
        what: &'static str,
    },
    /// A configuration value is out of range.
    #[error("invalid configuration: {field} = {value}: expected {expected}")]
    InvalidConfig {
        /// The field, as written in a config file.
        field: &'static str,
        /// The value given.
        value: String,
        /// What is allowed.
        expected: &'static str,
    },
    /// Restored state (a checkpoint) is inconsistent.
    #[error("invalid saved state: {message}")]
    InvalidState {
        /// What is inconsistent.
        message: String,
    },
    /// A pluggable component returned an error.
    #[error("the {component} failed: {source}")]
    Component {
        /// Which component.
        component: Component,
        /// Its error.
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// A pluggable component broke the seam's contract (e.g. returned the wrong number of results).
    #[error("the {component} returned {got} results for {expected} requests")]
    Contract {
        /// Which component.
        component: Component,
        /// Results expected (one per request).
        expected: usize,
        /// Results returned.
        got: usize,
    },
    /// An anchor episode failed to execute on every allowed attempt.
    #[error(
        "anchor episode (group {group}, sample {sample}) failed to execute {attempts} times; last error: {reason}"
    )]
    ExecutionExhausted {
        /// Group index within the step.
        group: usize,
        /// Sample index within the group.
        sample: usize,
        /// Attempts made.
        attempts: u32,
        /// The executor's last reason.
        reason: String,
    },
}

impl Error {
    /// Wraps a component's own error.
    pub fn component<E: std::error::Error + Send + Sync + 'static>(
        component: Component,
        source: E,
    ) -> Self {
        Error::Component {
            component,
            source: Box::new(source),
        }
    }
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;
