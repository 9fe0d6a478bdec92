//! `wmrl sft`: behaviour cloning of the demonstrations into a checkpoint
//! folder, with metrics (JSONL), loss and accuracy plots (PNG) and periodic
//! atomic checkpoints.
//!
//! Output folder: `config.json` + `model.safetensors` (the checkpoint),
//! `run.json` (resolved config, data summary), `metrics.jsonl`, `loss.png`,
//! `accuracy.png`. With `ema_decay > 0` the checkpoint holds the moving
//! average of the weights and `raw/` (a checkpoint folder too) the last
//! step's; validation reports both.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;
use tch::Device;
use wmrl_report::{LinePlot, MetricsSink, Series, SeriesStyle};

use crate::checkpoint::{self, CONFIG_FILE, WEIGHTS_FILE};
use crate::config::VlaConfig;
use crate::demos::{DatasetOptions, DemoDataset};
use crate::model::VlaPolicy;
use crate::sft::learner::{EvalStats, Learner, StepStats};
use crate::tokenizer::Tokenizer;
use crate::{Error, Result};

/// Held-out frames evaluated at each validation (evenly spaced).
const MAX_VAL_FRAMES: i64 = 4096;

/// What the training loop reports as it goes.
#[derive(Debug)]
pub enum Progress<'a> {
    /// After every optimiser step.
    Step(&'a StepStats),
    /// After a validation pass.
    Validation {
        /// Step it followed.
        step: u64,
        /// Figures.
        stats: &'a EvalStats,
    },
    /// After a checkpoint was written.
    Checkpoint(&'a Path),
}

/// Summary of a finished run.
#[derive(Debug, Clone, Serialize)]
pub struct SftSummary {
    /// Checkpoint folder.
    pub out_dir: PathBuf,
    /// Steps taken.
    pub steps: u64,
    /// Trainable parameters.
    pub parameters: i64,
    /// Training frames.
    pub train_frames: i64,
    /// Held-out frames.
    pub val_frames: i64,
    /// Mean training loss over the first `log_every` steps.
    pub first_loss: f64,
    /// Mean training loss over the last `log_every` steps.
    pub final_loss: f64,
    /// Last validation, if any frames were held out.
    pub val: Option<EvalStats>,
    /// Training samples per second over the whole run.
    pub samples_per_s: f64,
    /// Wall-clock seconds.
    pub seconds: f64,
}

/// Dataset options matching a config.
pub fn dataset_options(config: &VlaConfig) -> DatasetOptions {
    let m = &config.model;
    DatasetOptions {
        image_size: m.image_size,
        chunk_len: m.action.chunk_len,
        action_dim: m.action.action_dim as usize,
        proprio_dim: m.proprio_dim as usize,
        binning: m.action.binning,
        val_fraction: config.train.val_fraction,
        seed: config.train.seed,
    }
}

/// Refuses a folder that already holds a run.
fn check_out_dir(out_dir: &Path) -> Result<()> {
    if [WEIGHTS_FILE, CONFIG_FILE, "metrics.jsonl"]
        .iter()
        .any(|f| out_dir.join(f).exists())
    {
        return Err(Error::WouldOverwrite {
            dir: out_dir.to_path_buf(),
        });
    }
    Ok(())
}

#[derive(Default)]
struct Curves {
    loss: Vec<(f64, f64)>,
    accuracy: Vec<(f64, f64)>,
    val_loss: Vec<(f64, f64)>,
    val_accuracy: Vec<(f64, f64)>,
}

impl Curves {
    fn write(&self, out_dir: &Path) -> Result<()> {
        let plot = |title: &str, y: &str, train: &[(f64, f64)], val: &[(f64, f64)]| LinePlot {
            title: title.into(),
            x_label: "step".into(),
            y_label: y.into(),
            series: vec![
                Series::line("train (batch mean)", train.to_vec()),
                Series::line("held-out", val.to_vec()).with_style(SeriesStyle::LineWithMarkers),
            ],
            ..Default::default()
        };
        plot(
            "Behaviour cloning: token cross-entropy",
            "loss (nats)",
            &self.loss,
            &self.val_loss,
        )
        .write_png(&out_dir.join("loss.png"))?;
        plot(
            "Behaviour cloning: exact-token accuracy",
            "accuracy",
            &self.accuracy,
            &self.val_accuracy,
        )
        .write_png(&out_dir.join("accuracy.png"))?;
        Ok(())
    }
}

/// Trains a fresh policy on `dataset` and writes everything into `out_dir`.
pub fn train(
    config: &VlaConfig,
    dataset: &DemoDataset,
    device: Device,
    out_dir: &Path,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<SftSummary> {
    let _span = tracing::info_span!("sft", out = %out_dir.display()).entered();
    check_out_dir(out_dir)?;
    let t = &config.train;
    tch::manual_seed(t.seed as i64);
    let instructions = dataset.instructions();
    let tokenizer = Tokenizer::from_instructions(instructions.iter().copied());
    let mut policy = VlaPolicy::new(config.model.clone(), tokenizer, device)?;
    policy.set_proprio_stats(&dataset.proprio_mean, &dataset.proprio_std)?;
    let parameters = policy.parameter_count();
    let train_frames = dataset.train.len();
    let val_frames = dataset.val.as_ref().map_or(0, |v| v.len());
    tracing::info!(
        parameters,
        train_frames,
        val_frames,
        ?device,
        "starting behaviour cloning"
    );
    wmrl_report::write_json_atomic(
        &out_dir.join("run.json"),
        &serde_json::json!({
            "config": config,
            "demos": dataset.dir,
            "tasks": dataset.tasks,
            "train_frames": train_frames,
            "val_frames": val_frames,
            "parameters": parameters,
            "device": format!("{device:?}"),
        }),
    )?;
    let mut metrics = MetricsSink::append(&out_dir.join("metrics.jsonl"))?.with_tensorboard("step");
    let mut learner = Learner::new(policy, t.clone(), &instructions)?;
    let mut curves = Curves::default();
    let (mut window, mut window_acc, mut first_loss, mut final_loss) =
        (Vec::new(), Vec::new(), None, f64::NAN);
    let mut last_val = None;
    let started = Instant::now();
    let info = |step: u64, val: &Option<EvalStats>| serde_json::json!({ "step": step, "train": t, "demos": dataset.dir, "tasks": dataset.tasks, "val": val });
    for step in 0..t.steps {
        let stats = learner.train_step(&dataset.train)?;
        progress(Progress::Step(&stats));
        window.push(stats.loss);
        window_acc.push(stats.accuracy);
        let done = step + 1 == t.steps;
        if (step + 1) % t.log_every == 0 || done {
            let mean = window.iter().sum::<f64>() / window.len() as f64;
            let acc = window_acc.iter().sum::<f64>() / window_acc.len() as f64;
            first_loss.get_or_insert(mean);
            final_loss = mean;
            curves.loss.push((step as f64 + 1.0, mean));
            curves.accuracy.push((step as f64 + 1.0, acc));
            let elapsed = started.elapsed().as_secs_f64();
            metrics.write(&serde_json::json!({
                "step": step + 1, "loss": mean, "accuracy": acc, "lr": stats.lr, "grad_norm": stats.grad_norm,
                "samples_per_s": (step + 1) as f64 * t.batch_size as f64 / elapsed, "elapsed_s": elapsed,
            }))?;
            window.clear();
            window_acc.clear();
        }
        if let Some(val) = dataset
            .val
            .as_ref()
            .filter(|_| (step + 1) % t.eval_every == 0 || done)
        {
            let stats = learner.evaluate(val, MAX_VAL_FRAMES, false);
            let raw = learner
                .average
                .is_some()
                .then(|| learner.evaluate(val, MAX_VAL_FRAMES, true));
            progress(Progress::Validation {
                step: step + 1,
                stats: &stats,
            });
            curves.val_loss.push((step as f64 + 1.0, stats.loss));
            curves
                .val_accuracy
                .push((step as f64 + 1.0, stats.accuracy));
            metrics.write(&serde_json::json!({
                "step": step + 1, "val_loss": stats.loss, "val_accuracy": stats.accuracy,
                "val_action_l1": stats.action_l1, "val_frames": stats.frames,
                "val_loss_raw": raw.as_ref().map(|r| r.loss),
                "val_action_l1_raw": raw.as_ref().map(|r| r.action_l1),
            }))?;
            curves.write(out_dir)?;
            last_val = Some(stats);
        }
        if (step + 1) % t.checkpoint_every == 0 || done {
            match &learner.average {
                Some(average) => {
                    checkpoint::save(&average.policy, out_dir, info(step + 1, &last_val))?;
                    checkpoint::save(&learner.policy, &out_dir.join("raw"), info(step + 1, &None))?;
                }
                None => checkpoint::save(&learner.policy, out_dir, info(step + 1, &last_val))?,
            }
            progress(Progress::Checkpoint(out_dir));
        }
    }
    curves.write(out_dir)?;
    let seconds = started.elapsed().as_secs_f64();
    Ok(SftSummary {
        out_dir: out_dir.to_path_buf(),
        steps: t.steps,
        parameters,
        train_frames,
        val_frames,
        first_loss: first_loss.unwrap_or(f64::NAN),
        final_loss,
        val: last_val,
        samples_per_s: t.steps as f64 * t.batch_size as f64 / seconds.max(1e-9),
        seconds,
    })
}
