//! `wmrl wm …`: the world model: record policy rollouts, train, evaluate.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use wmrl_report::plot::{LinePlot, Series, SeriesStyle};
use wmrl_vla::VlaPolicy;
use wmrl_vla::demos::dataset;
use wmrl_vla::sim::{self, SimExecutorOptions};
use wmrl_wm::collect::{RolloutPlan, collect_rollouts};
use wmrl_wm::fidelity::{BranchFidelity, branch_fidelity};
use wmrl_wm::quality::{reliability_plot, score_quality, within_group_correlation};
use wmrl_wm::trajectory::{self, Dims};
use wmrl_wm::{LatentTrajectory, LatentWorldModel, WmConfig, checkpoint, episodes};

use crate::cli::GlobalArgs;

/// Arguments of `wmrl wm`.
#[derive(Debug, Args)]
pub struct WmArgs {
    #[command(subcommand)]
    pub command: WmCommand,
}

/// World-model subcommands.
#[derive(Debug, Subcommand)]
pub enum WmCommand {
    /// Run a policy in the simulator and record its episodes, encoded, as a `.wmlat` file.
    Collect(CollectArgs),
    /// Train a world model on demonstrations and recorded rollouts.
    Train(TrainArgs),
    /// Quality of a world model's scores on held-out executed episodes.
    Eval(EvalArgs),
}

/// Arguments of `wmrl wm collect`.
#[derive(Debug, Args)]
pub struct CollectArgs {
    /// Policy checkpoint folder.
    #[arg(long)]
    pub policy: PathBuf,
    /// Output file (`.wmlat`).
    #[arg(long)]
    pub out: PathBuf,
    /// Task indices, comma-separated (default: all ten).
    #[arg(long, value_delimiter = ',')]
    pub tasks: Vec<usize>,
    /// First fixed initial state of each task.
    #[arg(long, default_value_t = 0)]
    pub first_state: usize,
    /// Initial states per task, from --first-state.
    #[arg(long, default_value_t = 10)]
    pub states: usize,
    /// Episodes per (task, state).
    #[arg(long, default_value_t = 1)]
    pub repeats: usize,
    /// Sampling temperature (1 = the policy's own distribution, as in RL).
    #[arg(long, default_value_t = 1.0)]
    pub temperature: f64,
    /// Environments stepped in parallel.
    #[arg(long, default_value_t = 16)]
    pub envs: usize,
    /// Control steps per episode.
    #[arg(long, default_value_t = 520)]
    pub max_steps: usize,
    /// Seed of sampling.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// Arguments of `wmrl wm train`.
#[derive(Debug, Args)]
pub struct TrainArgs {
    /// Policy checkpoint whose observation encoder the world model shares.
    #[arg(long)]
    pub policy: PathBuf,
    /// Demonstration folders (`wmrl data collect`), repeatable.
    #[arg(long)]
    pub demos: Vec<PathBuf>,
    /// Recorded episode files (`wmrl wm collect`), repeatable.
    #[arg(long)]
    pub episodes: Vec<PathBuf>,
    /// World-model config: a shipped name (tiny, small, cpu, gpu) or a TOML file.
    #[arg(long, default_value = "cpu")]
    pub config: String,
    /// Override one config value, e.g. `--set train.steps=500` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// Output folder: checkpoint, metrics.jsonl, losses.png.
    #[arg(long)]
    pub out: PathBuf,
}

/// Arguments of `wmrl wm eval`.
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// Policy checkpoint the world model was trained with.
    #[arg(long)]
    pub policy: PathBuf,
    /// World-model checkpoint folder.
    #[arg(long)]
    pub wm: PathBuf,
    /// Held-out recorded episode files (`wmrl wm collect`), repeatable.
    #[arg(long)]
    pub episodes: Vec<PathBuf>,
    /// Held-out demonstration folders (`wmrl data collect`), repeatable.
    #[arg(long)]
    pub demos: Vec<PathBuf>,
    /// Output folder for wm_eval.json and reliability.png (default: WM/eval).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Also imagine the policy in closed loop from the real state at these
    /// chunk boundaries of each held-out episode (0: its initial
    /// observation, as training imagines) and score the branches against
    /// the real outcomes, e.g. `--branch-depths 0,8,16,24`; writes
    /// branches.png.
    #[arg(long, value_delimiter = ',')]
    pub branch_depths: Vec<usize>,
    /// Imagined continuations per episode and depth (their mean score is
    /// the episode's).
    #[arg(long, default_value_t = 4)]
    pub branch_samples: usize,
    /// Sampling temperature of the branches (default: the world model's
    /// `imagine.temperature`; `wmrl train` uses its executor's).
    #[arg(long)]
    pub temperature: Option<f64>,
    /// Control steps an episode may last, the branches' horizon (default:
    /// the world model's `imagine.horizon_steps`; `wmrl train` uses its
    /// executor's `max_steps`).
    #[arg(long)]
    pub horizon_steps: Option<usize>,
    /// Seed of the branches' action sampling.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

pub fn run(global: &GlobalArgs, args: WmArgs) -> anyhow::Result<()> {
    match args.command {
        WmCommand::Collect(a) => collect(global, a),
        WmCommand::Train(a) => train(global, a),
        WmCommand::Eval(a) => eval(global, a),
    }
}

fn bar(len: u64, unit: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{elapsed_precise}} [{{bar:30}}] {{pos}}/{{len}} {unit} (eta {{eta}}) {{msg}}"
        ))
        .expect("valid template")
        .progress_chars("=> "),
    );
    bar
}

fn load_policy(global: &GlobalArgs, path: &Path) -> anyhow::Result<VlaPolicy> {
    let device = wmrl_tch::select_device(global.device).context("selecting the compute device")?;
    wmrl_vla::checkpoint::load(path, device)
        .with_context(|| format!("loading the policy checkpoint {}", path.display()))
}

pub(crate) fn collect(global: &GlobalArgs, args: CollectArgs) -> anyhow::Result<()> {
    let policy = load_policy(global, &args.policy)?;
    let adapter = sim::libero_adapter(&args.tasks, args.seed)?;
    if args.first_state + args.states > adapter.states || args.states == 0 {
        bail!(
            "--first-state {} --states {}: the suite has initial states 0..{}",
            args.first_state,
            args.states,
            adapter.states
        );
    }
    let prompts: Vec<_> = adapter
        .all_prompts()
        .into_iter()
        .filter(|p| (args.first_state..args.first_state + args.states).contains(&p.state_index))
        .collect();
    let mut options = SimExecutorOptions {
        temperature: args.temperature,
        ..Default::default()
    };
    options.env.max_steps = args.max_steps;
    let plan = RolloutPlan {
        prompts,
        repeats: args.repeats.max(1),
        seed: args.seed,
    };
    let progress = bar((plan.prompts.len() * plan.repeats) as u64, "episodes");
    let (rollouts, errors) = collect_rollouts(&policy, &options, args.envs, &plan, |done, _| {
        progress.set_position(done as u64)
    })?;
    progress.finish_and_clear();
    episodes::write(
        &args.out,
        &Dims::of(&policy),
        &policy.encoder_fingerprint(),
        &rollouts,
    )?;
    let successes = rollouts.iter().filter(|e| e.success).count();
    let summary = serde_json::json!({
        "out": args.out,
        "episodes": rollouts.len(),
        "successes": successes,
        "success_rate": successes as f64 / rollouts.len().max(1) as f64,
        "execution_errors": errors,
        "temperature": args.temperature,
    });
    if global.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        println!(
            "{} episodes ({} successes, {:.1}%; {} execution errors) -> {}",
            rollouts.len(),
            successes,
            100.0 * successes as f64 / rollouts.len().max(1) as f64,
            errors,
            args.out.display()
        );
    }
    Ok(())
}

/// Demonstrations of `dir`, read one file at a time and encoded.
fn encode_demos(
    policy: &VlaPolicy,
    dir: &Path,
    out: &mut Vec<LatentTrajectory>,
) -> anyhow::Result<()> {
    let files = dataset::episode_files(dir)?;
    if files.is_empty() {
        bail!("{}: no .demo files", dir.display());
    }
    let progress = bar(files.len() as u64, "demonstrations encoded");
    for file in files {
        let episode = wmrl_vla::demos::read_episode(&file)?;
        out.push(
            trajectory::from_demo(policy, &episode)
                .with_context(|| format!("encoding {}", file.display()))?,
        );
        progress.inc(1);
    }
    progress.finish_and_clear();
    Ok(())
}

pub(crate) fn train(global: &GlobalArgs, args: TrainArgs) -> anyhow::Result<()> {
    let config = WmConfig::load(&args.config, &args.overrides)?;
    if args.out.join(checkpoint::CONFIG_FILE).exists() {
        bail!(
            "{} already holds a world model; choose another --out (nothing was changed)",
            args.out.display()
        );
    }
    let policy = load_policy(global, &args.policy)?;
    let dims = Dims::of(&policy);
    let encoder = policy.encoder_fingerprint();
    let mut data = Vec::new();
    for dir in &args.demos {
        encode_demos(&policy, dir, &mut data)?;
    }
    for file in &args.episodes {
        data.extend(episodes::read(file, &dims, Some(&encoder))?);
    }
    if data.is_empty() {
        bail!("no training episodes: give --demos DIR and/or --episodes FILE");
    }
    if !data.iter().any(|e| e.success) || data.iter().all(|e| e.success) {
        bail!("the training episodes must hold both successes and failures for the success head");
    }
    tch::manual_seed(config.train.seed as i64);
    let mut model = LatentWorldModel::new(config.clone(), dims, encoder, policy.device())?;
    if !global.json {
        eprintln!(
            "{} episodes ({} successes), world model {} parameters, device {:?}",
            data.len(),
            data.iter().filter(|e| e.success).count(),
            model.parameter_count(),
            policy.device()
        );
    }
    let progress = bar(config.train.steps as u64, "steps");
    let report = wmrl_wm::fit::fit(&mut model, &data, &args.out, |step, _| {
        progress.set_position(step)
    })?;
    progress.finish_and_clear();
    let info = serde_json::json!({
        "policy": args.policy,
        "demos": args.demos,
        "episodes": args.episodes,
        "fit": report,
    });
    checkpoint::save(&model, &args.out, info.clone())?;
    checkpoint::save_training_data(&args.out, &dims, model.encoder(), &data)?;
    if global.json {
        println!("{}", serde_json::to_string_pretty(&info)?);
    } else {
        println!("world model    : {}", args.out.display());
        println!(
            "trained        : {} steps on {} episodes ({} successes) in {:.0} s; {} batches dropped",
            report.steps, report.episodes, report.successes, report.seconds, report.dropped_batches
        );
        if let Some(l) = report.final_losses {
            println!(
                "final losses   : one-step {:.4}, open-loop {:.4}, success (real) {:.4}, success (replay) {:.4}",
                l.one_step, l.multi_step, l.success_real, l.success_replay
            );
        }
        println!(
            "metrics, data  : metrics.jsonl, losses.png, {} (the training episodes, encoded) in the same folder",
            checkpoint::TRAINING_DATA_FILE
        );
    }
    Ok(())
}

fn eval(global: &GlobalArgs, args: EvalArgs) -> anyhow::Result<()> {
    let policy = load_policy(global, &args.policy)?;
    let dims = Dims::of(&policy);
    let encoder = policy.encoder_fingerprint();
    let mut model = checkpoint::load(&args.wm, &dims, Some(&encoder), policy.device())
        .with_context(|| format!("loading the world model {}", args.wm.display()))?;
    if let Some(t) = args.temperature {
        if !(t.is_finite() && t > 0.0) {
            bail!("--temperature must be a positive number, got {t}");
        }
        model.imagine_config_mut().temperature = t;
    }
    if let Some(h) = args.horizon_steps {
        if h == 0 {
            bail!("--horizon-steps must be at least 1");
        }
        model.imagine_config_mut().horizon_steps = h;
    }
    if args.branch_samples == 0 {
        bail!("--branch-samples must be at least 1");
    }
    let mut data = Vec::new();
    for file in &args.episodes {
        data.extend(episodes::read(file, &dims, Some(&encoder))?);
    }
    for dir in &args.demos {
        encode_demos(&policy, dir, &mut data)?;
    }
    if data.is_empty() {
        bail!("no held-out episodes: give --episodes FILE and/or --demos DIR");
    }
    let refs: Vec<&LatentTrajectory> = data.iter().collect();
    let scores = wmrl_wm::train::score_episodes(&model, &refs)?;
    let outcomes: Vec<bool> = data.iter().map(|e| e.success).collect();
    let replay: Vec<f64> = scores.iter().map(|s| s.0).collect();
    let real: Vec<f64> = scores.iter().map(|s| s.1).collect();
    let q_replay = score_quality(&replay, &outcomes, 10);
    let q_real = score_quality(&real, &outcomes, 10);
    let out = args.out.clone().unwrap_or_else(|| args.wm.join("eval"));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    reliability_plot(
        &out.join("reliability.png"),
        "World-model success score on held-out episodes",
        &[
            ("ŝ (open-loop replay)", &q_replay),
            ("real latents (diagnostic)", &q_real),
        ],
    )?;
    let branches = branch_report(&model, &policy, &refs, &args, &out)?;
    // Within each initial state: what group-relative advantages can use.
    let (real_outcomes, groups) = (binary(&outcomes), states(&data));
    let rho_replay = within_group_correlation(&replay, &real_outcomes, &groups);
    let rho_real = within_group_correlation(&real, &real_outcomes, &groups);
    let json = serde_json::json!({
        "world_model": args.wm,
        "policy": args.policy,
        "episodes_files": args.episodes,
        "demos": args.demos,
        "score": q_replay,
        "score_on_real_latents": q_real,
        "within_state_correlation": {
            "replay": rho_replay,
            "real_latents": rho_real,
        },
        "branches": branches,
    });
    wmrl_report::write_json_atomic(&out.join("wm_eval.json"), &json)?;
    if global.json {
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        let auroc = |q: &wmrl_wm::quality::ScoreQuality| {
            q.auroc
                .map_or("n/a (one class)".into(), |a| format!("{a:.3}"))
        };
        println!(
            "held-out episodes : {} (real success {:.1}%)",
            q_replay.episodes,
            100.0 * q_replay.success_rate
        );
        for (name, q) in [
            ("ŝ (open-loop replay)", &q_replay),
            ("real latents", &q_real),
        ] {
            println!(
                "{name:<22}: AUROC {}, Brier {:.4}, ECE {:.4}, bias {:+.4}, noise {:.4}",
                auroc(q),
                q.brier,
                q.ece,
                q.bias,
                q.noise
            );
        }
        let rho = |v: Option<f64>| v.map_or("n/a".into(), |r| format!("{r:+.3}"));
        println!(
            "within-state ρ    : open-loop replay {}, real latents {}",
            rho(rho_replay),
            rho(rho_real),
        );
        if !branches.is_empty() {
            println!(
                "imagination branched from the real state at chunk k ({} samples each):",
                args.branch_samples
            );
            println!("    k  episodes  real  mean ŝ  chunks  AUROC    ρ   within-state ρ");
            for b in &branches {
                println!(
                    "{:>5}  {:>8}  {:>4.0}%  {:>6.3}  {:>6.1}  {:>5}  {:>6}  {:>6}",
                    b.depth,
                    b.episodes,
                    100.0 * b.success_rate,
                    b.mean_score,
                    b.mean_imagined_chunks,
                    b.auroc.map_or("n/a".into(), |a| format!("{a:.3}")),
                    rho(b.correlation),
                    rho(b.within_state_correlation),
                );
            }
        }
        println!("report, plot      : {}", out.display());
    }
    Ok(())
}

fn binary(outcomes: &[bool]) -> Vec<f64> {
    outcomes.iter().map(|&o| f64::from(u8::from(o))).collect()
}

fn states(data: &[LatentTrajectory]) -> Vec<(usize, usize)> {
    data.iter().map(|e| (e.task_index, e.state_index)).collect()
}

/// `wmrl wm eval --branch-depths`: branch fidelity at each depth, and a
/// plot of AUROC and correlations against depth.
fn branch_report(
    model: &LatentWorldModel,
    policy: &VlaPolicy,
    data: &[&LatentTrajectory],
    args: &EvalArgs,
    out: &Path,
) -> anyhow::Result<Vec<BranchFidelity>> {
    if args.branch_depths.is_empty() {
        return Ok(Vec::new());
    }
    let instruction = |task: usize| wmrl_sim::task(task).ok().map(|t| t.instruction);
    let progress = bar(args.branch_depths.len() as u64, "depths");
    let mut branches = Vec::new();
    for &depth in &args.branch_depths {
        let b = branch_fidelity(
            model,
            policy,
            data,
            &instruction,
            depth,
            args.branch_samples,
            args.seed,
        )
        .with_context(|| format!("imagining branches at chunk {depth}"))?;
        if b.episodes == 0 {
            bail!("--branch-depths {depth}: no held-out episode lasts more than {depth} chunks");
        }
        branches.push(b);
        progress.inc(1);
    }
    progress.finish_and_clear();
    let line = |name: &str, f: &dyn Fn(&BranchFidelity) -> Option<f64>| {
        Series::line(
            name,
            branches
                .iter()
                .filter_map(|b| f(b).map(|v| (b.depth as f64, v)))
                .collect(),
        )
        .with_style(SeriesStyle::LineWithMarkers)
    };
    LinePlot {
        title: "Imagination branched from real states: score against real outcome".into(),
        x_label: "branch point (chunks executed for real)".into(),
        y_label: "AUROC / correlation".into(),
        series: vec![
            line("AUROC", &|b| b.auroc),
            line("correlation", &|b| b.correlation),
            line("within-state correlation (GRPO's signal)", &|b| {
                b.within_state_correlation
            }),
        ],
        y_range: Some((-0.5, 1.0)),
        ..Default::default()
    }
    .write_png(&out.join("branches.png"))?;
    Ok(branches)
}
