//! `wmrl demo`: the main job, end to end, on the embedded default (the
//! rapier simulator; no robot, no downloads), sized for a 2-core CPU:
//!
//! 1. scripted-expert demonstrations of LIBERO-Long task 5;
//! 2. a tiny VLA trained on them by behaviour cloning (the SFT policy);
//! 3. rollouts of that policy, recorded for the world model;
//! 4. the world model, trained on demonstrations and rollouts;
//! 5. WMRL post-training (shipped config `demo`): anchors executed in the
//!    simulator, the rest imagined, debiased and denoised by the core,
//!    greedy success on the 50 fixed initial states before and after.
//!
//! Steps 1–4 are cached under `OUT/cache/` and reused by later runs (delete
//! the folder, or pass `--fresh`, to rebuild them); each post-training run
//! gets a new folder `OUT/run-N/`.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use wmrl_train::{TrainConfig, VlaTrainer};

use crate::cli::GlobalArgs;

/// The LIBERO-Long task of the demo (the book into the caddy).
const DEMO_TASK: usize = 5;
/// Bump when a cached stage's recipe changes, so stale caches are not reused.
const CACHE_VERSION: &str = "v2";

/// Arguments of `wmrl demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Where the cache and the run folders go.
    #[arg(long, default_value = "runs/demo")]
    pub out: PathBuf,
    /// Rebuild the cached demonstrations, SFT policy and world model.
    #[arg(long)]
    pub fresh: bool,
    /// Override one value of the post-training config (repeatable), e.g. `--set iterations=20`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// Every stage at toy size, in seconds: a plumbing check (tests use it);
    /// nothing is learned. Its cache is kept apart from the real one.
    #[arg(long)]
    pub smoke: bool,
}

/// How big each stage is.
struct Sizes {
    demos_per_task: usize,
    sft_overrides: Vec<String>,
    rollout_states: usize,
    world_model_config: &'static str,
    world_model_overrides: Vec<String>,
    train_overrides: Vec<String>,
}

impl Sizes {
    fn full() -> Self {
        Self {
            demos_per_task: 50,
            sft_overrides: vec![
                "train.steps=1500".into(),
                "train.eval_every=500".into(),
                "train.checkpoint_every=1500".into(),
            ],
            rollout_states: 50,
            world_model_config: "small",
            world_model_overrides: vec![],
            train_overrides: vec![],
        }
    }

    fn smoke() -> Self {
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
        Self {
            demos_per_task: 3,
            sft_overrides: set(&[
                "train.steps=10",
                "train.eval_every=10",
                "train.checkpoint_every=10",
                "train.log_every=5",
            ]),
            rollout_states: 2,
            world_model_config: "tiny",
            world_model_overrides: set(&["train.steps=6"]),
            train_overrides: set(&[
                "iterations=2",
                "eval_every=2",
                "eval_states=2",
                "executor.envs=4",
                "executor.max_steps=24",
                "core.groups=4",
                "core.group_size=2",
                "core.anchor_ratio=0.5",
                "core.calibrator.min_pairs=2",
                "imagine_prefix_chunks=1",
            ]),
        }
    }
}

/// Removes what an interrupted demo left of a stage's folder (a half-trained
/// model), so the stage is rebuilt from scratch.
fn clear_interrupted(dir: &Path) -> anyhow::Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)
            .with_context(|| format!("clearing the unfinished stage {}", dir.display()))?;
    }
    Ok(())
}

fn stage(global: &GlobalArgs, n: usize, what: &str, cached: bool) {
    if !global.json {
        let note = if cached { " (cached)" } else { "" };
        println!("\n[{n}/5] {what}{note}");
    }
}

pub fn run(global: &GlobalArgs, args: DemoArgs) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let sizes = if args.smoke {
        Sizes::smoke()
    } else {
        Sizes::full()
    };
    let cache_name = if args.smoke {
        format!("{CACHE_VERSION}-smoke")
    } else {
        CACHE_VERSION.to_string()
    };
    let cache = args.out.join("cache").join(cache_name);
    if args.fresh && cache.exists() {
        std::fs::remove_dir_all(&cache)
            .with_context(|| format!("removing the cache {}", cache.display()))?;
    }
    let overrides: Vec<String> = sizes
        .train_overrides
        .iter()
        .chain(&args.overrides)
        .cloned()
        .collect();
    let config = TrainConfig::load(Some(Path::new("demo")), &overrides)?;
    let instruction = wmrl_sim::task(DEMO_TASK)?.instruction;
    if !global.json {
        let replaced = if config.imagine_prefix_chunks > 0 {
            format!(
                "imagining {:.0}% of the episodes after their first {} chunks",
                100.0 * (1.0 - config.core.anchor_ratio),
                config.imagine_prefix_chunks
            )
        } else {
            format!(
                "replacing {:.0}% of the real executions",
                100.0 * (1.0 - config.core.anchor_ratio)
            )
        };
        println!(
            "WMRL demo: post-train a vision-language-action policy on LIBERO-Long task {DEMO_TASK} \
             (\"{instruction}\") in the embedded rapier simulator, with a learned world model \
             {replaced}."
        );
    }
    // Each stage is the CLI command of the same name and prints its summary.
    let inner = global;

    let demos = cache.join("demos");
    let done = demos.join("manifest.json").exists();
    stage(
        global,
        1,
        &format!(
            "scripted-expert demonstrations ({} noisy episodes)",
            sizes.demos_per_task
        ),
        done,
    );
    if !done {
        let no_bursts = wmrl_vla::sim::Perturbations::default();
        super::demos::collect(
            inner,
            super::demos::CollectArgs {
                suite: "libero-long".into(),
                per_task: sizes.demos_per_task,
                tasks: vec![DEMO_TASK],
                noise: 0.03,
                seed: 1,
                perturb_rate: no_bursts.rate,
                perturb_steps: no_bursts.max_steps,
                perturb_size: no_bursts.size,
                image_size: 128,
                successes_only: false,
                takeover: None,
                takeover_steps: 20..=300,
                execute_steps: 2,
                temperature: 0.0,
                out: demos.clone(),
            },
        )?;
    }

    let sft = cache.join("sft");
    let done = sft.join(wmrl_vla::checkpoint::WEIGHTS_FILE).exists();
    stage(global, 2, "behaviour cloning of a tiny VLA", done);
    if !done {
        clear_interrupted(&sft)?;
        super::sft::run(
            inner,
            super::sft::SftArgs {
                demos: demos.clone(),
                config: "tiny".into(),
                overrides: sizes.sft_overrides.clone(),
                out: sft.clone(),
            },
        )?;
    }

    let rollouts = cache.join("rollouts.wmlat");
    let done = rollouts.exists();
    stage(
        global,
        3,
        &format!(
            "SFT policy rollouts for the world model ({} episodes)",
            2 * sizes.rollout_states
        ),
        done,
    );
    if !done {
        super::wm::collect(
            inner,
            super::wm::CollectArgs {
                policy: sft.clone(),
                out: rollouts.clone(),
                tasks: vec![DEMO_TASK],
                first_state: 0,
                states: sizes.rollout_states,
                repeats: 2,
                temperature: 1.0,
                envs: 16,
                max_steps: config.executor.max_steps,
                seed: 0,
            },
        )?;
    }

    let wm = cache.join("world_model");
    let done = wm.join(wmrl_wm::checkpoint::CONFIG_FILE).exists();
    stage(global, 4, "world model on demonstrations + rollouts", done);
    if !done {
        clear_interrupted(&wm)?;
        super::wm::train(
            inner,
            super::wm::TrainArgs {
                policy: sft.clone(),
                demos: vec![demos.clone()],
                episodes: vec![rollouts.clone()],
                config: sizes.world_model_config.into(),
                overrides: sizes.world_model_overrides.clone(),
                out: wm.clone(),
            },
        )?;
    }

    let anchor_groups = match config.core.mode {
        wmrl_core::Mode::Real => config.core.groups,
        wmrl_core::Mode::WmOnly => 0,
        _ => wmrl_core::schedule::anchor_count(config.core.anchor_ratio, config.core.groups),
    };
    let run_dir = (1..)
        .map(|k| args.out.join(format!("run-{k}")))
        .find(|d| !d.exists())
        .expect("an unused run folder");
    stage(
        global,
        5,
        &format!(
            "WMRL post-training: {} iterations of {} groups × {} rollouts, {} executed for real{}",
            config.iterations,
            config.core.groups,
            config.core.group_size,
            match anchor_groups {
                1 => "one group".to_string(),
                k => format!("{k} groups"),
            },
            if config.imagine_prefix_chunks > 0 {
                format!(
                    ", the others for their first {} chunks and imagined from there",
                    config.imagine_prefix_chunks
                )
            } else {
                ", the others imagined".to_string()
            }
        ),
        false,
    );
    let device = wmrl_tch::select_device(global.device).context("selecting the compute device")?;
    let mut trainer = VlaTrainer::new(config, &sft, &wm, &run_dir, device)
        .with_context(|| format!("setting up the run in {}", run_dir.display()))?;
    let summary = super::train::run_with_progress(&mut trainer, "evaluating the SFT policy")?;
    if global.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
        return Ok(());
    }
    let (first, last) = (
        summary.evaluations.first().context("no evaluation")?,
        summary.evaluations.last().context("no evaluation")?,
    );
    println!(
        "\ngreedy success on the {} fixed initial states of task {DEMO_TASK}: {:.1}% (SFT) -> {:.1}% after {} iterations",
        trainer.config().eval_states,
        100.0 * first.success,
        100.0 * last.success,
        last.iteration
    );
    for e in &summary.evaluations {
        println!(
            "  iteration {:>3}: {:>5.1}%  ({} real environment steps so far)",
            e.iteration,
            100.0 * e.success,
            e.env_steps
        );
    }
    let states = trainer.config().eval_states;
    let gain = last.success - first.success;
    let se = first
        .standard_error(states)
        .hypot(last.standard_error(states));
    println!(
        "what this shows: {:+.1} points over the SFT policy, {:.1} standard errors of the difference \
         (binomial, {states} states each): {}",
        100.0 * gain,
        gain / se.max(1e-9),
        if gain > 2.0 * se {
            "post-training improved the policy beyond evaluation noise"
        } else {
            "within evaluation noise on this run (one seed; see docs/results/ for several)"
        }
    );
    let imagined = if trainer.config().imagine_prefix_chunks > 0 {
        format!(
            "imagined episodes {} (each after {} executed chunks: {} of the real steps)",
            summary.imagined,
            trainer.config().imagine_prefix_chunks,
            summary.prefix_env_steps
        )
    } else {
        format!("imagined episodes {}", summary.imagined)
    };
    println!(
        "real episodes {}, {imagined}, {:.0} s of training; demo total {:.0} s",
        summary.executions,
        summary.train_seconds,
        started.elapsed().as_secs_f64()
    );
    if let Some(line) = world_model_stream_line(&run_dir.join("metrics.jsonl"))? {
        println!("{line}");
    }
    println!(
        "run folder {}:\n  success_vs_env_steps.png, success_vs_wallclock.png  (plots)\n  metrics.jsonl  (one row per iteration: the core's diagnostics, learner statistics, clocks)\n  policy/  (the post-trained policy; `wmrl eval --checkpoint {}/policy --tasks {DEMO_TASK}`)\n  checkpoints/  (`wmrl train --resume {}` continues a stopped run)",
        run_dir.display(),
        run_dir.display(),
        run_dir.display()
    );
    println!(
        "cached stages in {} (reused next time; --fresh rebuilds). `wmrl experiment --config demo` compares every mode.",
        cache.display()
    );
    Ok(())
}

/// One line on how much the run leaned on the world model: the mean
/// gradient weight of the world-model stream and the mean within-group
/// correlation of world-model and real rewards on the anchors (the core's
/// diagnostics in `metrics.jsonl`). `None` when no iteration reported them.
fn world_model_stream_line(metrics: &Path) -> anyhow::Result<Option<String>> {
    let rows = wmrl_report::metrics::read_rows(metrics)?;
    let mean = |pointer: &str| {
        let values: Vec<f64> = rows
            .iter()
            .filter_map(|row| row.pointer(pointer)?.as_f64())
            .collect();
        (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
    };
    // The world model's share u_W / (u_A + u_W): with the least-error rule
    // the two weights need not sum to one.
    let shares: Vec<f64> = rows
        .iter()
        .filter_map(|row| {
            let w = row.pointer("/core/diagnostics/stream_weights")?;
            let (a, m) = (w["anchor"].as_f64()?, w["world_model"].as_f64()?);
            (a + m > 0.0).then(|| m / (a + m))
        })
        .collect();
    let weight = (!shares.is_empty()).then(|| shares.iter().sum::<f64>() / shares.len() as f64);
    let correlation = mean("/core/diagnostics/reward_correlation");
    let twins = rows
        .iter()
        .any(|row| row["core"]["twins"].as_u64() > Some(0));
    Ok(weight.map(|w| {
        let paired = if twins {
            "anchors paired with imagined twins"
        } else {
            "anchors paired with replays of their executed episodes"
        };
        let rho = correlation.map_or("not measured yet".into(), |c| format!("{c:+.2}"));
        format!(
            "world-model stream: {:.1}% of the gradient weight on average (its share of the two \
             streams' weights); world-model vs real \
             reward correlation within groups {rho} ({paired}; a world-model sample is worth \
             ρ² of an anchor)",
            100.0 * w
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_world_model_line_averages_the_cores_diagnostics() {
        let dir = tempfile::tempdir().unwrap();
        let metrics = dir.path().join("metrics.jsonl");
        let row = |w: f64, rho: Option<f64>, twins: u64| {
            serde_json::json!({"core": {"twins": twins, "diagnostics": {
                "stream_weights": {"anchor": 1.0 - w, "world_model": w},
                "reward_correlation": rho}}})
            .to_string()
        };
        std::fs::write(
            &metrics,
            [row(0.75, None, 16), row(0.05, Some(0.1), 16)].join("\n") + "\n",
        )
        .unwrap();
        let line = world_model_stream_line(&metrics).unwrap().unwrap();
        assert!(line.contains("40.0% of the gradient weight"), "{line}");
        assert!(line.contains("correlation within groups +0.10"), "{line}");
        assert!(line.contains("imagined twins"), "{line}");
        std::fs::write(&metrics, "").unwrap();
        assert_eq!(world_model_stream_line(&metrics).unwrap(), None);
    }
}
