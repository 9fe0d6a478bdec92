//! How far the world model can imagine: closed-loop imagination branched
//! from the real state at chunk k of held-out executed episodes, scored
//! against those episodes' real outcomes, for several depths k.
//!
//! The training loop imagines whole episodes from their initial
//! observations, so the policy acts on the model's own predictions for up
//! to the full horizon. Replaying an executed episode's actions
//! ([`crate::train::score_episodes`]) measures the success head on real
//! behaviour; this measures the whole closed loop (dynamics, policy acting
//! on predicted latents, success head) as a function of how much of the
//! episode is left to imagine. From a real state at chunk k each episode
//! gets `samples` imagined continuations of the policy; their mean score is
//! the model's estimate of P(success | state at k), compared with the one
//! real outcome that followed.
//!
//! A perfect model's estimate correlates with the outcome more the later
//! the branch (the state says more about the outcome); a model whose
//! imagination drifts or is exploited stays near zero. The within-state
//! correlation (scores and outcomes centred on each initial state's mean)
//! is the figure GRPO cares about: it is the world model's within-group
//! signal.

use std::collections::HashMap;

use serde::Serialize;
use wmrl_core::rng::derive_seed;
use wmrl_vla::VlaPolicy;

use crate::closed_loop::{ImagineStart, imagine_from};
use crate::model::LatentWorldModel;
use crate::quality::{auroc, within_group_correlation};
use crate::trajectory::LatentTrajectory;
use crate::{Error, Result};

/// Purpose tag of branch seeds (`wmrl_core::rng::derive_seed`).
const BRANCH: u64 = 0xB4A7C;

/// Fidelity of imagination branched at one depth.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BranchFidelity {
    /// Chunk boundary the branches start from (0: the initial observation).
    pub depth: usize,
    /// Held-out episodes still running at `depth` (the others had ended).
    pub episodes: usize,
    /// Their real success rate.
    pub success_rate: f64,
    /// Mean imagined score (mean over episodes of the mean over samples).
    pub mean_score: f64,
    /// Mean chunks imagined per branch.
    pub mean_imagined_chunks: f64,
    /// AUROC of the score against the real outcome; `None` with one class.
    pub auroc: Option<f64>,
    /// Pearson correlation of score and outcome over all episodes.
    pub correlation: Option<f64>,
    /// Correlation after centring both on each (task, initial state)'s
    /// mean: the within-group signal; `None` without repeated states.
    pub within_state_correlation: Option<f64>,
    /// Branches dropped for non-finite values.
    pub non_finite: usize,
}

/// Imagines `samples` continuations of `policy` from the real state at
/// chunk boundary `depth` of every episode of `episodes` still running
/// there, and compares their mean score with the real outcomes.
/// `instruction(task)` gives each task's instruction (`None`: an unknown task).
pub fn branch_fidelity(
    model: &LatentWorldModel,
    policy: &VlaPolicy,
    episodes: &[&LatentTrajectory],
    instruction: &dyn Fn(usize) -> Option<String>,
    depth: usize,
    samples: usize,
    seed: u64,
) -> Result<BranchFidelity> {
    if samples == 0 {
        return Err(Error::mismatch("branch samples", "at least 1", 0));
    }
    let dims = model.dims();
    let mut instructions: HashMap<usize, String> = HashMap::new();
    for e in episodes {
        if let std::collections::hash_map::Entry::Vacant(v) = instructions.entry(e.task_index) {
            let text = instruction(e.task_index).ok_or_else(|| {
                Error::mismatch(
                    format!("task {} of a held-out episode", e.task_index),
                    "a task with an instruction",
                    "an unknown task",
                )
            })?;
            v.insert(text);
        }
    }
    let running: Vec<(usize, &LatentTrajectory)> = episodes
        .iter()
        .enumerate()
        .filter(|(_, e)| e.chunks(&dims) > depth)
        .map(|(i, e)| (i, *e))
        .collect();
    let mut starts = Vec::with_capacity(running.len() * samples);
    for (index, e) in &running {
        let latent = e.latents[depth * dims.latent..(depth + 1) * dims.latent].to_vec();
        let proprio = e.proprio[depth * dims.proprio..(depth + 1) * dims.proprio].to_vec();
        for sample in 0..samples {
            starts.push(ImagineStart {
                task_index: e.task_index,
                state_index: e.state_index,
                instruction: &instructions[&e.task_index],
                latent: latent.clone(),
                proprio: proprio.clone(),
                seed: derive_seed(seed, &[BRANCH, *index as u64, depth as u64, sample as u64]),
            });
        }
    }
    let imagined = imagine_from(model, policy, &starts, depth)?;
    let (mut scores, mut outcomes, mut groups) = (Vec::new(), Vec::new(), Vec::new());
    let (mut chunks, mut finite, mut non_finite) = (0usize, 0usize, 0usize);
    for ((_, e), branch) in running.iter().zip(imagined.chunks(samples)) {
        let ok: Vec<_> = branch.iter().filter(|b| b.non_finite.is_none()).collect();
        non_finite += branch.len() - ok.len();
        if ok.is_empty() {
            continue;
        }
        chunks += ok.iter().map(|b| b.record.chunks.len()).sum::<usize>();
        finite += ok.len();
        scores.push(ok.iter().map(|b| b.score).sum::<f64>() / ok.len() as f64);
        outcomes.push(e.success);
        groups.push((e.task_index, e.state_index));
    }
    let n = scores.len();
    let real: Vec<f64> = outcomes.iter().map(|&o| f64::from(u8::from(o))).collect();
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    Ok(BranchFidelity {
        depth,
        episodes: n,
        success_rate: mean(&real),
        mean_score: mean(&scores),
        mean_imagined_chunks: chunks as f64 / finite.max(1) as f64,
        auroc: auroc(&scores, &outcomes),
        correlation: within_group_correlation(&scores, &real, &vec![0usize; n]),
        within_state_correlation: within_group_correlation(&scores, &real, &groups),
        non_finite,
    })
}
