//! A full training run of the world model on a fixed set of executed
//! episodes (`wmrl wm train`): proprioception statistics from the data,
//! AdamW with a cosine learning-rate decay, metrics (JSONL) and a loss
//! plot (PNG) written as it goes.

use std::path::Path;
use std::time::Instant;

use serde::Serialize;
use wmrl_report::MetricsSink;
use wmrl_report::plot::{LinePlot, Series};

use crate::model::LatentWorldModel;
use crate::train::{Losses, WmTrainer, proprio_stats};
use crate::trajectory::LatentTrajectory;
use crate::{Error, Result};

/// Metrics file of a training run.
pub const METRICS_FILE: &str = "metrics.jsonl";
/// Loss plot of a training run.
pub const LOSS_PLOT: &str = "losses.png";

/// What a training run did.
#[derive(Debug, Clone, Serialize)]
pub struct FitReport {
    /// Optimiser steps taken.
    pub steps: u64,
    /// Batches dropped for non-finite losses.
    pub dropped_batches: u64,
    /// Training episodes.
    pub episodes: usize,
    /// Successful training episodes.
    pub successes: usize,
    /// Mean losses over the last `log_every` steps.
    pub final_losses: Option<Losses>,
    /// Wall-clock seconds.
    pub seconds: f64,
}

#[derive(Serialize)]
struct Row<'a> {
    step: u64,
    lr: f64,
    #[serde(flatten)]
    losses: &'a Losses,
}

/// Trains `model` on `episodes` for `config.train.steps` steps; writes
/// `out_dir/metrics.jsonl` and `out_dir/losses.png`. `progress(step, total)`
/// is called after every step.
pub fn fit(
    model: &mut LatentWorldModel,
    episodes: &[LatentTrajectory],
    out_dir: &Path,
    mut progress: impl FnMut(u64, u64),
) -> Result<FitReport> {
    let _span = tracing::info_span!("world_model_fit", episodes = episodes.len()).entered();
    let start = Instant::now();
    let dims = model.dims();
    let refs: Vec<&LatentTrajectory> = episodes.iter().collect();
    if refs.is_empty() {
        return Err(Error::Empty {
            what: "world-model training set".into(),
        });
    }
    let (mean, std) = proprio_stats(&refs, dims.proprio);
    model.set_proprio_stats(&mean, &std)?;
    let config = model.config().train.clone();
    let mut trainer = WmTrainer::new(model)?;
    std::fs::create_dir_all(out_dir).map_err(|source| Error::Io {
        path: out_dir.into(),
        source,
    })?;
    let mut sink = MetricsSink::append(&out_dir.join(METRICS_FILE))?.with_tensorboard("step");
    let total = config.steps as u64;
    let mut window: Vec<Losses> = Vec::new();
    let mut curves: [Vec<(f64, f64)>; 4] = Default::default();
    let mut final_losses = None;
    for step in 0..total {
        let progress_frac = step as f64 / total.max(1) as f64;
        let lr =
            config.lr * (0.05 + 0.95 * 0.5 * (1.0 + (std::f64::consts::PI * progress_frac).cos()));
        trainer.set_lr(lr);
        if let Some(l) = trainer.step(model, &refs)? {
            window.push(l);
        }
        if ((step + 1).is_multiple_of(config.log_every as u64) || step + 1 == total)
            && !window.is_empty()
        {
            let n = window.len() as f64;
            let mean = |f: fn(&Losses) -> f64| window.iter().map(f).sum::<f64>() / n;
            let losses = Losses {
                one_step: mean(|l| l.one_step),
                multi_step: mean(|l| l.multi_step),
                success_real: mean(|l| l.success_real),
                success_replay: mean(|l| l.success_replay),
                total: mean(|l| l.total),
            };
            sink.write(&Row {
                step: step + 1,
                lr,
                losses: &losses,
            })?;
            let x = (step + 1) as f64;
            for (curve, v) in curves.iter_mut().zip([
                losses.one_step,
                losses.multi_step,
                losses.success_real,
                losses.success_replay,
            ]) {
                curve.push((x, v));
            }
            final_losses = Some(losses);
            window.clear();
        }
        progress(step + 1, total);
    }
    let names = [
        "one-step dynamics MSE",
        "open-loop dynamics MSE",
        "success BCE (real latents)",
        "success BCE (replayed latents)",
    ];
    LinePlot {
        title: "World-model training".into(),
        x_label: "optimiser step".into(),
        y_label: "loss".into(),
        series: names
            .iter()
            .zip(curves)
            .map(|(n, c)| Series::line(*n, c))
            .collect(),
        ..Default::default()
    }
    .write_png(&out_dir.join(LOSS_PLOT))?;
    Ok(FitReport {
        steps: trainer.steps,
        dropped_batches: trainer.dropped_batches,
        episodes: episodes.len(),
        successes: episodes.iter().filter(|e| e.success).count(),
        final_losses,
        seconds: start.elapsed().as_secs_f64(),
    })
}
