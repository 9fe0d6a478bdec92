//! The stateful core: its settings, the online calibrator and the step
//! counter, checkpointed as one value. One step of it, [`Core::process`],
//! is the fusion of [`crate::fuse`]; [`Core::plan`] draws the next step's
//! anchors ([`crate::schedule`]).

use serde::{Deserialize, Serialize};

use crate::calibrator::OnlineCalibrator;
use crate::config::CoreConfig;
use crate::mode::Mode;
use crate::schedule::{AnchorPlan, TaskId, schedule_anchors};
use crate::{Error, Result};

/// The stateful core: configuration, calibrator and step counter. Serialise
/// it to checkpoint a run; the restored core is validated and continues
/// bit-for-bit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "CoreState", into = "CoreState")]
pub struct Core {
    pub(crate) config: CoreConfig,
    pub(crate) calibrator: OnlineCalibrator,
    pub(crate) step: u64,
}

/// Serialised form of [`Core`].
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CoreState {
    config: CoreConfig,
    calibrator: OnlineCalibrator,
    step: u64,
}

impl TryFrom<CoreState> for Core {
    type Error = Error;

    fn try_from(s: CoreState) -> Result<Self> {
        let core = Core {
            config: s.config,
            calibrator: s.calibrator,
            step: s.step,
        };
        core.validate()?;
        if core.calibrator.step() > core.step {
            return Err(Error::InvalidState {
                message: "the calibrator is ahead of the core's step".into(),
            });
        }
        Ok(core)
    }
}

impl From<Core> for CoreState {
    fn from(c: Core) -> Self {
        Self {
            config: c.config,
            calibrator: c.calibrator,
            step: c.step,
        }
    }
}

impl Core {
    /// A fresh core.
    pub fn new(config: CoreConfig) -> Result<Self> {
        config.validate()?;
        Ok(Self {
            calibrator: OnlineCalibrator::new(config.calibrator)?,
            config,
            step: 0,
        })
    }

    /// Checks the configuration and that the calibrator's settings are the core's.
    pub fn validate(&self) -> Result<()> {
        self.config.validate()?;
        if self.calibrator.config() != &self.config.calibrator {
            return Err(Error::InvalidState {
                message: "calibrator settings differ from the core's".into(),
            });
        }
        Ok(())
    }

    /// The settings.
    pub fn config(&self) -> &CoreConfig {
        &self.config
    }

    /// The next step's index.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// The online calibrator.
    pub fn calibrator(&self) -> &OnlineCalibrator {
        &self.calibrator
    }

    /// The anchors of the next step for groups of these tasks.
    pub fn plan(&self, tasks: &[TaskId]) -> Result<AnchorPlan> {
        match self.config.mode {
            Mode::Real => Ok(AnchorPlan::all(tasks.len())),
            Mode::WmOnly => Ok(AnchorPlan::none(tasks.len())),
            _ => schedule_anchors(tasks, self.config.anchor_ratio, self.config.seed, self.step),
        }
    }
}
