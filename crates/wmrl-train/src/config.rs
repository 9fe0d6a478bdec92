//! The config of a training run (TOML or JSON5, unknown keys rejected,
//! `--set key=value` overrides); the resolved config is saved in the run folder.

use std::path::Path;

use serde::{Deserialize, Serialize};
use wmrl_core::CoreConfig;
use wmrl_vla::grpo::GrpoConfig;

use crate::{Error, Result};

/// The simulator as anchor executor and evaluator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExecutorConfig {
    /// Environments stepped in parallel.
    pub envs: usize,
    /// Control steps per episode (LIBERO-Long: 520).
    pub max_steps: usize,
    /// Sampling temperature T of training rollouts, executed and imagined
    /// (evaluation is greedy). The learner optimises softmax(logits / T), the
    /// policy that sampled them, so its ratios are exact at any T.
    pub temperature: f64,
    /// Actions of each chunk executed before the policy re-plans, in
    /// training rollouts (anchors and branched prefixes), as `wmrl eval
    /// --execute-steps` does; 1..=chunk length (default: the whole chunk).
    /// The learner's loss covers the executed actions' tokens only.
    pub execute_steps: Option<usize>,
    /// The same for evaluation during training (default: `execute_steps`,
    /// so that the policy evaluated is the policy trained).
    pub eval_execute_steps: Option<usize>,
}

impl Default for ExecutorConfig {
    fn default() -> Self {
        Self {
            envs: 16,
            max_steps: 520,
            temperature: 1.0,
            execute_steps: None,
            eval_execute_steps: None,
        }
    }
}

impl ExecutorConfig {
    /// The re-planning stride of evaluation: `eval_execute_steps`, else `execute_steps`.
    pub fn eval_stride(&self) -> Option<usize> {
        self.eval_execute_steps.or(self.execute_steps)
    }

    /// Checks both strides against the policy's chunk length (`None`: not
    /// known yet, only 0 is refused); the error names the field.
    pub fn check_strides(&self, chunk_len: Option<usize>) -> Result<()> {
        for (field, value) in [
            ("executor.execute_steps", self.execute_steps),
            ("executor.eval_execute_steps", self.eval_execute_steps),
        ] {
            let Some(k) = value else { continue };
            let expected = match chunk_len {
                Some(len) if !(1..=len).contains(&k) => {
                    format!("1..={len} (the policy's chunk length)")
                }
                None if k == 0 => "at least 1 (the actions executed per chunk)".to_string(),
                _ => continue,
            };
            return Err(wmrl_config::Error::invalid(
                format!("field `{field}`"),
                format!("expected {expected}, found {k}"),
            )
            .into());
        }
        Ok(())
    }
}

/// A whole training run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrainConfig {
    /// The core: mode, groups G, group size n, anchor ratio ρ, calibration, denoising, seed.
    pub core: CoreConfig,
    /// LIBERO-Long task indices trained on (default: all ten).
    pub tasks: Vec<usize>,
    /// Iterations (core steps).
    pub iterations: u64,
    /// Evaluate every this many iterations, and before the first and after the last.
    pub eval_every: u64,
    /// Fixed initial states per task in each evaluation (from state 0).
    pub eval_states: usize,
    /// The learner.
    pub grpo: GrpoConfig,
    /// The simulator.
    pub executor: ExecutorConfig,
    /// Imagined control steps per episode (default: the executor's `max_steps`).
    pub imagine_steps: Option<usize>,
    /// Branched imagination: execute the first this many chunks of every
    /// imagined episode in the simulator and imagine only the rest from the
    /// real state reached (default 0: imagine whole episodes). The prefixes'
    /// control steps count as real environment steps; the learner trains
    /// on the executed chunks only. Needs `core.anchor_scoring = "twin"`
    /// (twins run their own prefixes, so anchors are scored as imagined
    /// episodes are) and a mode other than `ppi`.
    pub imagine_prefix_chunks: usize,
    /// With branched imagination, train the imagined stream on the chunks
    /// the world model imagined after the prefix as well as the executed
    /// ones (default: false, the executed chunks only).
    pub train_imagined_chunks: bool,
    /// Execute the anchor groups in the simulator on a worker thread while the
    /// world model imagines the others (default: true). Same results either
    /// way; only the wall-clock differs.
    pub overlap_anchors: bool,
    /// Write a resumable checkpoint every this many iterations (default: 1;
    /// the last iteration always gets one).
    pub checkpoint_every: u64,
    /// Report a task that trained in this many consecutive iterations
    /// without one informative group (all its groups' rewards equal, so
    /// GRPO learnt nothing on it): a warning, the task in each metrics row's
    /// `starved_tasks` and in the summary (default: 5; 0 turns it off).
    pub starved_after: u64,
    /// Keep this many of the newest complete checkpoints (default: 2, at
    /// least 1). Older ones are removed only after a newer one is written
    /// and verified, so a damaged newest checkpoint leaves one to resume from.
    pub checkpoint_keep: usize,
}

impl Default for TrainConfig {
    fn default() -> Self {
        let mut core = CoreConfig {
            groups: 16,
            group_size: 8,
            ..CoreConfig::default()
        };
        core.calibrator.min_pairs = 16;
        Self {
            core,
            tasks: (0..10).collect(),
            iterations: 100,
            eval_every: 10,
            eval_states: 10,
            grpo: GrpoConfig::default(),
            executor: ExecutorConfig::default(),
            imagine_steps: None,
            imagine_prefix_chunks: 0,
            train_imagined_chunks: false,
            overlap_anchors: true,
            starved_after: 5,
            checkpoint_every: 1,
            checkpoint_keep: 2,
        }
    }
}

impl TrainConfig {
    /// Checks every value.
    pub fn validate(&self) -> Result<()> {
        let bad = |field: &str, message: String| {
            Err(wmrl_config::Error::invalid(format!("field `{field}`"), message).into())
        };
        self.core.validate()?;
        self.grpo.validate()?;
        if self.tasks.is_empty() || self.tasks.iter().any(|&t| t >= 10) {
            return bad(
                "tasks",
                format!(
                    "expected LIBERO-Long task indices 0..=9, found {:?}",
                    self.tasks
                ),
            );
        }
        if self.executor.envs == 0 || self.executor.max_steps == 0 {
            return bad("executor", "envs and max_steps must be at least 1".into());
        }
        // The upper bound (the chunk length) is checked when the policy loads.
        self.executor.check_strides(None)?;
        if self.checkpoint_keep == 0 {
            return bad(
                "checkpoint_keep",
                "expected at least 1 (the newest complete checkpoint is always kept)".into(),
            );
        }
        if self.train_imagined_chunks && self.imagine_prefix_chunks == 0 {
            return bad(
                "train_imagined_chunks",
                "expected false without branched imagination (imagine_prefix_chunks = 0): whole imagined episodes are always trained on".into(),
            );
        }
        if self.imagine_prefix_chunks > 0 {
            if self.core.mode == wmrl_core::Mode::Ppi {
                return bad(
                    "imagine_prefix_chunks",
                    format!(
                        "expected 0 with mode `ppi`, found {} (ppi pairs anchors with replays of whole episodes; branched imagination needs twins)",
                        self.imagine_prefix_chunks
                    ),
                );
            }
            if self.core.mode.mixes_streams()
                && self.core.anchor_scoring != wmrl_core::AnchorScoring::Twin
            {
                return bad(
                    "imagine_prefix_chunks",
                    format!(
                        "{} needs core.anchor_scoring = \"twin\" (twins run their own prefixes, so anchors are scored as imagined episodes are); found {:?}",
                        self.imagine_prefix_chunks, self.core.anchor_scoring
                    ),
                );
            }
        }
        if self.eval_states == 0 || self.eval_states > 50 {
            return bad(
                "eval_states",
                format!("expected 1..=50, found {}", self.eval_states),
            );
        }
        Ok(())
    }

    /// The shipped run configs: `(name, TOML text)`.
    pub const SHIPPED_CONFIGS: &'static [(&'static str, &'static str)] =
        &[("demo", include_str!("../configs/demo.toml"))];

    /// Reads the resolved config a run saved (`config.json`), checked as strictly.
    pub fn read_resolved(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: path.into(),
            source,
        })?;
        let config: Self = serde_json::from_str(&text).map_err(|e| wmrl_config::Error::Parse {
            origin: path.display().to_string(),
            source: e.into(),
        })?;
        config.validate()?;
        Ok(config)
    }

    /// Parses TOML (or JSON5, `json` = true) text, applies overrides, validates.
    pub fn parse(text: &str, origin: &str, json: bool, overrides: &[String]) -> Result<Self> {
        let mut source = wmrl_config::Source::text(text, origin);
        if json {
            source.format = wmrl_config::Format::Json5;
        }
        Self::from_source(&source, overrides)
    }

    fn from_source(source: &wmrl_config::Source, overrides: &[String]) -> Result<Self> {
        let config: Self = wmrl_config::parse(source, overrides)?;
        config.validate()?;
        Ok(config)
    }

    /// Loads a config file (`.toml`, or `.json` / `.json5` as JSON5) or a
    /// shipped config by name (`demo`); `None` gives the defaults.
    pub fn load(path: Option<&Path>, overrides: &[String]) -> Result<Self> {
        let source = match path {
            None => wmrl_config::Source::text("", "defaults"),
            Some(path) => {
                wmrl_config::Source::find(&path.to_string_lossy(), Self::SHIPPED_CONFIGS)?
            }
        };
        Self::from_source(&source, overrides)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branched_imagination_needs_twin_pairing() {
        let with = |mode: &str, scoring: &str| {
            TrainConfig::parse(
                &format!(
                    "imagine_prefix_chunks = 4\n[core]\nmode = \"{mode}\"\nanchor_scoring = \"{scoring}\"\n"
                ),
                "run.toml",
                false,
                &[],
            )
        };
        assert!(with("wmrl", "twin").is_ok());
        assert!(with("wm-only", "replay").is_ok(), "no anchors to pair");
        let err = wmrl_config::chain(&with("wmrl", "replay").unwrap_err());
        assert!(
            err.contains("imagine_prefix_chunks") && err.contains("twin"),
            "{err}"
        );
        let err = wmrl_config::chain(&with("ppi", "twin").unwrap_err());
        assert!(
            err.contains("imagine_prefix_chunks") && err.contains("ppi"),
            "{err}"
        );
        // Training on the imagined continuation needs a continuation.
        let train_imagined = |prefix: &str| {
            TrainConfig::parse(
                "train_imagined_chunks = true\n[core]\nanchor_scoring = \"twin\"\n",
                "run.toml",
                false,
                &[format!("imagine_prefix_chunks={prefix}")],
            )
        };
        assert!(train_imagined("4").is_ok());
        let err = wmrl_config::chain(&train_imagined("0").unwrap_err());
        assert!(
            err.contains("train_imagined_chunks") && err.contains("imagine_prefix_chunks = 0"),
            "{err}"
        );
    }

    #[test]
    fn strides_are_checked_with_the_field_named() {
        let parse = |set: &str| TrainConfig::parse("", "run.toml", false, &[set.into()]);
        let err = wmrl_config::chain(&parse("executor.execute_steps=0").unwrap_err());
        assert!(
            err.contains("executor.execute_steps") && err.contains("found 0"),
            "{err}"
        );
        let err = wmrl_config::chain(&parse("executor.eval_execute_steps=0").unwrap_err());
        assert!(err.contains("executor.eval_execute_steps"), "{err}");
        let c = parse("executor.execute_steps=2").unwrap();
        assert_eq!(
            c.executor.eval_stride(),
            Some(2),
            "evaluation follows training"
        );
        let err = wmrl_config::chain(&c.executor.check_strides(Some(1)).unwrap_err());
        assert!(
            err.contains("executor.execute_steps") && err.contains("1..=1"),
            "{err}"
        );
        assert!(c.executor.check_strides(Some(8)).is_ok());
    }

    #[test]
    fn unknown_keys_name_the_key_and_overrides_apply() {
        let c = TrainConfig::parse(
            "iterations = 3\n[core]\nmode = \"ppi\"\n[grpo]\nlr = 1e-4\n",
            "t.toml",
            false,
            &["executor.envs=2".into()],
        )
        .unwrap();
        assert_eq!((c.iterations, c.executor.envs), (3, 2));
        assert_eq!(c.core.mode, wmrl_core::Mode::Ppi);
        assert_eq!((c.grpo.lr, c.grpo.clip_bounds()), (1e-4, (0.2, 0.28)));
        let err = wmrl_config::chain(
            &TrainConfig::parse("iteratons = 3\n", "t.toml", false, &[]).unwrap_err(),
        );
        assert!(err.contains("iteratons") && err.contains("t.toml"), "{err}");
        let err = wmrl_config::chain(
            &TrainConfig::parse("tasks = [12]\n", "t.toml", false, &[]).unwrap_err(),
        );
        assert!(err.contains("tasks"), "{err}");
        let err = wmrl_config::chain(
            &TrainConfig::parse("[core]\nanchor_scoring = \"twins\"\n", "t.toml", false, &[])
                .unwrap_err(),
        );
        assert!(
            err.contains("twins")
                && err.contains("expected `replay` or `twin`")
                && err.contains("core.anchor_scoring"),
            "{err}"
        );
        let twin = TrainConfig::parse(
            "",
            "t.toml",
            false,
            &["core.anchor_scoring=\"twin\"".into()],
        )
        .unwrap();
        assert_eq!(twin.core.anchor_scoring, wmrl_core::AnchorScoring::Twin);
        let json = TrainConfig::parse("{iterations: 2, // JSON5\n}", "t.json5", true, &[]).unwrap();
        assert_eq!(json.iterations, 2);
    }
}
