//! Training modes: the paper's method, its baselines and ablations, and a
//! prediction-powered variant.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// How a step turns groups into advantages and loss weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// GRPO with every group executed for real (the compute-hungry baseline).
    Real,
    /// GRPO on raw world-model scores only, no anchors.
    WmOnly,
    /// Full WMRL: anchors, isotonic debiasing, inverse-variance denoising.
    Wmrl,
    /// WMRL without debiasing: world-model groups use raw scores.
    WmrlNoDebias,
    /// WMRL without denoising: streams weighted by sample count.
    WmrlNoDenoise,
    /// Prediction-powered gradient with power-tuned λ* (see [`crate::denoise`]).
    Ppi,
}

impl Mode {
    /// Every mode, in table order.
    pub const ALL: [Mode; 6] = [
        Mode::Real,
        Mode::WmOnly,
        Mode::Wmrl,
        Mode::WmrlNoDebias,
        Mode::WmrlNoDenoise,
        Mode::Ppi,
    ];

    /// The name used on the command line and in files.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Real => "real",
            Mode::WmOnly => "wm-only",
            Mode::Wmrl => "wmrl",
            Mode::WmrlNoDebias => "wmrl-no-debias",
            Mode::WmrlNoDenoise => "wmrl-no-denoise",
            Mode::Ppi => "ppi",
        }
    }

    /// Whether some groups are world-model groups.
    pub fn uses_world_model(self) -> bool {
        self != Mode::Real
    }

    /// Whether a fraction ρ of groups are anchors (executed *and* scored).
    pub fn mixes_streams(self) -> bool {
        !matches!(self, Mode::Real | Mode::WmOnly)
    }

    /// Whether world-model scores are recoded by the calibrator f̂.
    pub fn debiases(self) -> bool {
        matches!(self, Mode::Wmrl | Mode::WmrlNoDenoise | Mode::Ppi)
    }

    /// Whether streams are weighted by inverse variance.
    pub fn denoises(self) -> bool {
        matches!(self, Mode::Wmrl | Mode::WmrlNoDebias)
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Mode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Mode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Mode::ALL.iter().map(|m| m.name()).collect();
                format!("unknown mode `{s}`; expected one of {}", names.join(", "))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for m in Mode::ALL {
            assert_eq!(m.name().parse::<Mode>().unwrap(), m);
            let json = serde_json::to_string(&m).unwrap();
            assert_eq!(json, format!("\"{}\"", m.name()));
        }
        assert!("wm".parse::<Mode>().unwrap_err().contains("wmrl-no-debias"));
    }
}
