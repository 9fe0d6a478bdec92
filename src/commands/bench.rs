//! `wmrl bench …`: whole-system benchmarks. Each prints a table, or one JSON
//! object with --json; ratios are always measured within the same run.

use clap::{Args, Subcommand};

use crate::cli::GlobalArgs;

/// Arguments of `wmrl bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub target: BenchTarget,
}

/// What to benchmark.
#[derive(Debug, Subcommand)]
pub enum BenchTarget {
    /// Every benchmark below, one JSON object keyed by name.
    All,
    /// VLA policy: behaviour-cloning samples/s and batched inference actions/s.
    Policy(PolicyBenchArgs),
    /// Simulator: control steps/s per core (physics only, both cameras) and reset time.
    Sim(SimBenchArgs),
    /// WMRL core: isotonic fit of 10^5 pairs, core step, advantages/s, synthetic steps/s.
    Core(CoreBenchArgs),
    /// Robots over zenoh on loopback: action round trip p50/p99 and episodes/s
    /// through simulator-backed daemons versus the in-process simulator.
    Robots(RobotsBenchArgs),
    /// World model: imagined episodes/s against simulated episodes/s with the
    /// same policy and prompts, as a ratio from one run.
    Wm(WmBenchArgs),
    /// Post-training: seconds per iteration with anchor execution overlapping
    /// imagination versus sequential, interleaved iteration by iteration.
    Train(TrainBenchArgs),
    /// Stream fusion on the VLA: error and cosine of each stream's policy
    /// gradient, and of their fusion at every world-model weight, against a
    /// real-execution reference (its own noise subtracted), at one fixed policy.
    Gradient(GradientBenchArgs),
    /// Stream fusion on the synthetic benchmark against the exact gradient:
    /// error and cosine over a grid of world-model weights and PPI λ, each
    /// stream alone, and the core's rules (a table, or JSON with --json).
    Fusion(FusionBenchArgs),
}

pub fn run(global: &GlobalArgs, args: BenchArgs) -> anyhow::Result<()> {
    let mut results = serde_json::Map::new();
    match args.target {
        BenchTarget::All => {
            results.insert(
                "policy".into(),
                bench_policy(global, &PolicyBenchArgs::default())?,
            );
            results.insert("sim".into(), bench_sim(&SimBenchArgs::default())?);
            results.insert("core".into(), bench_core(&CoreBenchArgs::default())?);
            results.insert(
                "robots".into(),
                bench_robots(global, &RobotsBenchArgs::default())?,
            );
            results.insert("wm".into(), bench_wm(global, &WmBenchArgs::default())?);
        }
        BenchTarget::Wm(args) => {
            results.insert("wm".into(), bench_wm(global, &args)?);
        }
        BenchTarget::Train(args) => {
            results.insert("train".into(), bench_train(global, &args)?);
        }
        BenchTarget::Gradient(args) => {
            results.insert("gradient".into(), bench_gradient(global, &args)?);
        }
        BenchTarget::Fusion(args) => {
            let report = wmrl_synth::fusion_bench::bench_fusion(&args.options())?;
            if !global.json {
                print!("{}", wmrl_synth::fusion_bench::table(&report));
                return Ok(());
            }
            results.insert("fusion".into(), serde_json::to_value(report)?);
        }
        BenchTarget::Policy(args) => {
            results.insert("policy".into(), bench_policy(global, &args)?);
        }
        BenchTarget::Core(args) => {
            results.insert("core".into(), bench_core(&args)?);
        }
        BenchTarget::Sim(args) => {
            results.insert("sim".into(), bench_sim(&args)?);
        }
        BenchTarget::Robots(args) => {
            results.insert("robots".into(), bench_robots(global, &args)?);
        }
    }
    let value = serde_json::Value::Object(std::mem::take(&mut results));
    if global.json {
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        println!("{value:#}");
    }
    Ok(())
}

/// Arguments of `wmrl bench policy`.
#[derive(Debug, Args)]
pub struct PolicyBenchArgs {
    /// Model config: a shipped name (tiny, small, cpu, gpu) or a TOML file.
    #[arg(long, default_value = "cpu")]
    pub config: String,
    /// Environments per inference batch.
    #[arg(long, default_value_t = 50)]
    pub envs: usize,
}

impl Default for PolicyBenchArgs {
    fn default() -> Self {
        Self {
            config: "cpu".into(),
            envs: 50,
        }
    }
}

fn bench_policy(global: &GlobalArgs, args: &PolicyBenchArgs) -> anyhow::Result<serde_json::Value> {
    let config = wmrl_vla::VlaConfig::load(&args.config, &[])?;
    let device = wmrl_tch::select_device(global.device)?;
    let options = wmrl_vla::bench::PolicyBenchOptions {
        inference_batch: args.envs,
        ..Default::default()
    };
    let figures = wmrl_vla::bench::bench_policy(&config, device, &options)?;
    let mut value = serde_json::to_value(figures)?;
    value["config"] = serde_json::Value::String(args.config.clone());
    Ok(value)
}

/// Arguments of `wmrl bench sim`.
#[derive(Debug, Args)]
pub struct SimBenchArgs {
    /// Control steps per task and mode.
    #[arg(long, default_value_t = 150)]
    pub steps: usize,
    /// Camera image side (pixels).
    #[arg(long, default_value_t = 128)]
    pub size: u32,
}

impl Default for SimBenchArgs {
    fn default() -> Self {
        Self {
            steps: 150,
            size: 128,
        }
    }
}

/// Single-core simulator throughput on expert-driven trajectories of all ten tasks.
fn bench_sim(args: &SimBenchArgs) -> anyhow::Result<serde_json::Value> {
    let opts = wmrl_sim::bench::SimBenchOptions {
        steps: args.steps,
        image_size: args.size,
        ..Default::default()
    };
    Ok(serde_json::to_value(wmrl_sim::bench::bench_sim(&opts)?)?)
}

/// Arguments of `wmrl bench core`.
#[derive(Debug, Args)]
pub struct CoreBenchArgs {
    /// Anchor pairs in the timed isotonic fit.
    #[arg(long, default_value_t = 100_000)]
    pub pairs: usize,
    /// Repetitions of each timed operation (the median is reported).
    #[arg(long, default_value_t = 15)]
    pub repeats: usize,
}

impl Default for CoreBenchArgs {
    fn default() -> Self {
        Self {
            pairs: 100_000,
            repeats: 15,
        }
    }
}

/// Core throughput (crates/wmrl-synth/src/bench.rs); quote release-build figures only.
fn bench_core(args: &CoreBenchArgs) -> anyhow::Result<serde_json::Value> {
    let opts = wmrl_synth::bench::CoreBenchOptions {
        pairs: args.pairs,
        repeats: args.repeats,
    };
    let mut value = serde_json::to_value(wmrl_synth::bench::bench_core(&opts)?)?;
    value["profile"] = serde_json::Value::String(
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
        .into(),
    );
    Ok(value)
}

/// Arguments of `wmrl bench fusion` (crates/wmrl-synth/src/fusion_bench.rs).
#[derive(Debug, Args)]
pub struct FusionBenchArgs {
    /// Synthetic presets, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "paper,binary,debias,denoise"
    )]
    pub scenarios: Vec<String>,
    /// Measured steps per scenario and scaling.
    #[arg(long, default_value_t = 400)]
    pub draws: usize,
    /// Steps of mode `real` from the uniform policy to the probed one.
    #[arg(long, default_value_t = 20)]
    pub policy_steps: u64,
    /// World seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

impl FusionBenchArgs {
    fn options(&self) -> wmrl_synth::fusion_bench::FusionBenchOptions {
        wmrl_synth::fusion_bench::FusionBenchOptions {
            scenarios: self.scenarios.clone(),
            draws: self.draws,
            policy_steps: self.policy_steps,
            seed: self.seed,
            ..Default::default()
        }
    }
}

/// Arguments of `wmrl bench robots`.
#[derive(Debug, Args)]
pub struct RobotsBenchArgs {
    /// Policy config (shipped name or TOML; randomly initialised: throughput only).
    #[arg(long, default_value = "tiny")]
    pub config: String,
    /// Loopback TCP port for the benchmark's zenoh listener.
    #[arg(long, default_value_t = 17447)]
    pub port: u16,
    /// Camera size (pixels per side).
    #[arg(long, default_value_t = 128)]
    pub camera: u32,
    /// Round trips measured.
    #[arg(long, default_value_t = 300)]
    pub round_trips: usize,
    /// Daemons (and in-process environments).
    #[arg(long, default_value_t = 2)]
    pub robots: usize,
    /// Episodes per executor.
    #[arg(long, default_value_t = 8)]
    pub episodes: usize,
    /// Control steps per episode.
    #[arg(long, default_value_t = 64)]
    pub max_steps: usize,
}

impl Default for RobotsBenchArgs {
    fn default() -> Self {
        let d = wmrl_robots::bench::BridgeBenchOptions::default();
        Self {
            config: "tiny".into(),
            port: d.port,
            camera: d.camera,
            round_trips: d.round_trips,
            robots: d.robots,
            episodes: d.episodes,
            max_steps: d.max_steps,
        }
    }
}

fn bench_robots(global: &GlobalArgs, args: &RobotsBenchArgs) -> anyhow::Result<serde_json::Value> {
    let config = wmrl_vla::VlaConfig::load(&args.config, &[])?;
    let device = wmrl_tch::select_device(global.device)?;
    let tasks = wmrl_vla::sim::suite_tasks();
    let tokenizer =
        wmrl_vla::Tokenizer::from_instructions(tasks.iter().map(|(_, text)| text.as_str()));
    tch::manual_seed(0);
    let policy = wmrl_vla::VlaPolicy::new(config.model, tokenizer, device)?;
    let prompts: Vec<_> = tasks
        .iter()
        .map(|(task, instruction)| wmrl_vla::rollout::TaskPrompt {
            task_index: *task,
            state_index: 0,
            instruction: instruction.clone(),
        })
        .collect();
    let options = wmrl_robots::bench::BridgeBenchOptions {
        port: args.port,
        camera: args.camera,
        round_trips: args.round_trips,
        robots: args.robots,
        episodes: args.episodes,
        max_steps: args.max_steps,
    };
    let result = wmrl_robots::bench::bench_bridge(&policy, &prompts, &options)?;
    let mut value = serde_json::to_value(result)?;
    value["policy_config"] = args.config.clone().into();
    value["device"] = format!("{device:?}").into();
    Ok(value)
}

/// Arguments of `wmrl bench wm`.
#[derive(Debug, Args)]
pub struct WmBenchArgs {
    /// Policy checkpoint (default: a randomly initialised policy of --config).
    #[arg(long)]
    pub policy: Option<std::path::PathBuf>,
    /// Policy config when no checkpoint is given.
    #[arg(long, default_value = "cpu")]
    pub config: String,
    /// World-model checkpoint (default: a fresh model of --wm-config).
    #[arg(long)]
    pub wm: Option<std::path::PathBuf>,
    /// World-model config when no checkpoint is given.
    #[arg(long, default_value = "cpu")]
    pub wm_config: String,
    /// Simulated episodes.
    #[arg(long, default_value_t = 16)]
    pub simulated: usize,
    /// Imagined episodes.
    #[arg(long, default_value_t = 512)]
    pub imagined: usize,
    /// Simulated environments stepped in parallel.
    #[arg(long, default_value_t = 16)]
    pub envs: usize,
    /// Control steps per episode, in both worlds.
    #[arg(long, default_value_t = 520)]
    pub max_steps: usize,
    /// Sampling temperature, in both worlds.
    #[arg(long, default_value_t = 1.0)]
    pub temperature: f64,
}

impl Default for WmBenchArgs {
    fn default() -> Self {
        Self {
            policy: None,
            config: "cpu".into(),
            wm: None,
            wm_config: "cpu".into(),
            simulated: 16,
            imagined: 512,
            envs: 16,
            max_steps: 520,
            temperature: 1.0,
        }
    }
}

fn bench_wm(global: &GlobalArgs, args: &WmBenchArgs) -> anyhow::Result<serde_json::Value> {
    use anyhow::Context;
    let device = wmrl_tch::select_device(global.device)?;
    let tasks = wmrl_vla::sim::suite_tasks();
    tch::manual_seed(0);
    let policy = match &args.policy {
        Some(path) => wmrl_vla::checkpoint::load(path, device)
            .with_context(|| format!("loading the policy checkpoint {}", path.display()))?,
        None => {
            let config = wmrl_vla::VlaConfig::load(&args.config, &[])?;
            let tokenizer =
                wmrl_vla::Tokenizer::from_instructions(tasks.iter().map(|(_, t)| t.as_str()));
            wmrl_vla::VlaPolicy::new(config.model, tokenizer, device)?
        }
    };
    let encoder_copy = policy.try_clone()?;
    let dims = wmrl_wm::Dims::of(&policy);
    let mut model = match &args.wm {
        Some(dir) => {
            wmrl_wm::checkpoint::load(dir, &dims, Some(&policy.encoder_fingerprint()), device)
                .with_context(|| format!("loading the world model {}", dir.display()))?
        }
        None => wmrl_wm::LatentWorldModel::new(
            wmrl_wm::WmConfig::load(&args.wm_config, &[])?,
            dims,
            policy.encoder_fingerprint(),
            device,
        )?,
    };
    model.imagine_config_mut().horizon_steps = args.max_steps;
    model.imagine_config_mut().temperature = args.temperature;
    let mut sim_options = wmrl_vla::sim::SimExecutorOptions {
        temperature: args.temperature,
        ..Default::default()
    };
    sim_options.env.max_steps = args.max_steps;
    let starts = Box::new(wmrl_wm::SimStarts::new(sim_options.env.clone()));
    let mut world_model = wmrl_wm::VlaWorldModel::new(model, encoder_copy, starts)?;
    let prompts: Vec<_> = tasks
        .iter()
        .map(|(task, instruction)| wmrl_vla::rollout::TaskPrompt {
            task_index: *task,
            state_index: 0,
            instruction: instruction.clone(),
        })
        .collect();
    let report = wmrl_wm::bench::bench_world_model(
        &policy,
        &mut world_model,
        &sim_options,
        args.envs,
        &prompts,
        args.simulated,
        args.imagined,
    )?;
    let mut value = serde_json::to_value(report)?;
    value["policy"] = args
        .policy
        .as_ref()
        .map_or(format!("random {}", args.config), |p| {
            p.display().to_string()
        })
        .into();
    value["world_model"] = args
        .wm
        .as_ref()
        .map_or(format!("fresh {}", args.wm_config), |p| {
            p.display().to_string()
        })
        .into();
    value["device"] = format!("{device:?}").into();
    value["threads"] = rayon::current_num_threads().into();
    Ok(value)
}

/// The first of `out/1`, `out/2`, … that does not exist.
fn unused_numbered_folder(out: &std::path::Path) -> std::path::PathBuf {
    (1..)
        .map(|k| out.join(k.to_string()))
        .find(|d| !d.exists())
        .expect("an unused folder")
}

/// The checkpoints and run config of a post-training benchmark.
#[derive(Debug, Args)]
pub struct RunInputs {
    /// Policy checkpoint (an SFT policy, or a post-trained one).
    #[arg(long)]
    pub policy: std::path::PathBuf,
    /// World-model checkpoint on that policy's encoder.
    #[arg(long)]
    pub wm: std::path::PathBuf,
    /// Run config: a file or a shipped name.
    #[arg(long, default_value = "demo")]
    pub config: std::path::PathBuf,
    /// Override one config value (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
}

impl RunInputs {
    /// The run config with the overrides applied, for `iterations`
    /// iterations and one single-episode evaluation at the end (benchmarks
    /// do not measure success).
    fn bench_config(&self, iterations: u64) -> anyhow::Result<wmrl_train::TrainConfig> {
        let mut config = wmrl_train::TrainConfig::load(Some(&self.config), &self.overrides)?;
        config.iterations = iterations.max(1);
        config.eval_every = config.iterations;
        config.eval_states = 1;
        Ok(config)
    }

    /// A trainer on these checkpoints in `dir`.
    fn trainer(
        &self,
        config: wmrl_train::TrainConfig,
        dir: &std::path::Path,
        device: tch::Device,
    ) -> anyhow::Result<wmrl_train::VlaTrainer> {
        use anyhow::Context;
        wmrl_train::VlaTrainer::new(config, &self.policy, &self.wm, dir, device)
            .with_context(|| format!("setting up {}", dir.display()))
    }
}

/// Arguments of `wmrl bench train`.
#[derive(Debug, Args)]
pub struct TrainBenchArgs {
    #[command(flatten)]
    pub run: RunInputs,
    /// Iterations of each variant.
    #[arg(long, default_value_t = 3)]
    pub iterations: u64,
    /// Folder for the two runs (a fresh numbered subfolder each time).
    #[arg(long, default_value = "runs/bench-train")]
    pub out: std::path::PathBuf,
}

fn bench_train(global: &GlobalArgs, args: &TrainBenchArgs) -> anyhow::Result<serde_json::Value> {
    let device = wmrl_tch::select_device(global.device)?;
    let config = args.run.bench_config(args.iterations)?;
    let root = unused_numbered_folder(&args.out);
    let mut trainers = Vec::new();
    for overlap in [false, true] {
        let mut c = config.clone();
        c.overlap_anchors = overlap;
        let dir = root.join(if overlap { "overlapped" } else { "sequential" });
        trainers.push(args.run.trainer(c, &dir, device)?);
    }
    // Interleaved, so that both variants see the same machine load.
    for i in 1..=config.iterations {
        for t in &mut trainers {
            t.run_until(i, &mut |_, _| {})?;
        }
    }
    let mut summaries = Vec::new();
    for t in &mut trainers {
        summaries.push(t.finish()?);
    }
    let per_iteration = |s: &wmrl_train::TrainSummary| s.train_seconds / config.iterations as f64;
    let (sequential, overlapped) = (per_iteration(&summaries[0]), per_iteration(&summaries[1]));
    let weights = |s: &wmrl_train::TrainSummary| {
        std::fs::read(
            s.run_dir
                .join("policy")
                .join(wmrl_vla::checkpoint::WEIGHTS_FILE),
        )
    };
    Ok(serde_json::json!({
        "iterations": config.iterations,
        "mode": config.core.mode.name(),
        "groups": config.core.groups,
        "group_size": config.core.group_size,
        "anchor_ratio": config.core.anchor_ratio,
        "sequential_seconds_per_iteration": sequential,
        "overlapped_seconds_per_iteration": overlapped,
        "speedup": sequential / overlapped,
        "identical_policies": weights(&summaries[0])? == weights(&summaries[1])?,
        "runs": root,
        "threads": rayon::current_num_threads(),
        "device": format!("{device:?}"),
    }))
}

/// Arguments of `wmrl bench gradient`.
#[derive(Debug, Args)]
pub struct GradientBenchArgs {
    /// The policy is where the gradients are measured (it does not move).
    #[command(flatten)]
    pub run: RunInputs,
    /// Modes probed, comma-separated (modes with both streams and plain
    /// stream weights: wmrl, wmrl-no-debias, wmrl-no-denoise).
    #[arg(long, value_delimiter = ',', default_value = "wmrl")]
    pub modes: Vec<wmrl_core::Mode>,
    /// Measured steps per probed mode.
    #[arg(long, default_value_t = 24)]
    pub steps: usize,
    /// Steps per probed mode before measuring, so that the calibrator holds
    /// `calibrator.min_pairs` anchor pairs.
    #[arg(long, default_value_t = 2)]
    pub warmup: usize,
    /// Steps of mode `real` (every group executed) averaged into the
    /// reference gradient, drawn with the config's seed + 1 000 003.
    #[arg(long, default_value_t = 24)]
    pub reference_steps: usize,
    /// World-model weights scored besides the core's own and count weights.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0,0.25,0.5,0.6,0.7,0.8,0.85,0.9,0.95,1"
    )]
    pub weights: Vec<f64>,
    /// Folder for the runs set up (a fresh numbered subfolder each time).
    #[arg(long, default_value = "runs/bench-gradient")]
    pub out: std::path::PathBuf,
}

fn bench_gradient(
    global: &GlobalArgs,
    args: &GradientBenchArgs,
) -> anyhow::Result<serde_json::Value> {
    use wmrl_core::Mode;
    use wmrl_train::gradient::{ReferenceGradient, StreamProducts, summarise};

    for mode in &args.modes {
        if !matches!(mode, Mode::Wmrl | Mode::WmrlNoDebias | Mode::WmrlNoDenoise) {
            anyhow::bail!(
                "--modes {mode}: expected wmrl, wmrl-no-debias or wmrl-no-denoise \
                 (modes with both streams and plain stream weights)"
            );
        }
    }
    if let Some(w) = args.weights.iter().find(|w| !(0.0..=1.0).contains(*w)) {
        anyhow::bail!("--weights {w}: expected world-model weights in [0, 1]");
    }
    if args.steps < 2 || args.reference_steps < 2 {
        anyhow::bail!(
            "--steps {} --reference-steps {}: expected at least 2 each",
            args.steps,
            args.reference_steps
        );
    }
    let device = wmrl_tch::select_device(global.device)?;
    let config = args
        .run
        .bench_config((args.warmup + args.steps).max(args.reference_steps) as u64)?;
    let root = unused_numbered_folder(&args.out);
    let trainer = |mode: Mode, seed: u64| -> anyhow::Result<wmrl_train::VlaTrainer> {
        let mut c = config.clone();
        c.core.mode = mode;
        c.core.seed = seed;
        args.run.trainer(c, &root.join(mode.name()), device)
    };
    let total = args.reference_steps + args.modes.len() * (args.warmup + args.steps);
    let bar = indicatif::ProgressBar::new(total as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} steps {msg} (eta {eta})",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );

    bar.set_message("real (reference)");
    let mut reference = ReferenceGradient::default();
    let mut real = trainer(Mode::Real, config.core.seed.wrapping_add(1_000_003))?;
    for _ in 0..args.reference_steps {
        let measured = real.measure_gradients()?;
        if let Some(g) = measured.anchor {
            reference.add(&g);
        }
        bar.inc(1);
    }
    if reference.draws() < 2 {
        anyhow::bail!(
            "the reference steps gave {} gradients; expected at least 2",
            reference.draws()
        );
    }
    let reference_mean = reference.mean();

    let mut modes = Vec::new();
    for &mode in &args.modes {
        bar.set_message(mode.name());
        let mut probe = trainer(mode, config.core.seed)?;
        for _ in 0..args.warmup {
            probe.measure_gradients()?;
            bar.inc(1);
        }
        let (mut products, mut core_w, mut count_w) = (Vec::new(), Vec::new(), Vec::new());
        let mut skipped = 0;
        for _ in 0..args.steps {
            let m = probe.measure_gradients()?;
            bar.inc(1);
            match (&m.anchor, &m.world_model) {
                (Some(a), Some(b)) => {
                    products.push(StreamProducts::new(a, b, &reference_mean));
                    core_w.push(m.weights.world_model_share());
                    count_w.push(m.count_weight());
                }
                // A stream with no rollouts, or weight 0, this step.
                _ => skipped += 1,
            }
        }
        if products.len() < 2 {
            anyhow::bail!(
                "{mode}: {} of {} steps had a gradient in both streams; expected at least 2",
                products.len(),
                args.steps
            );
        }
        let summary = summarise(&products, &core_w, &count_w, &args.weights, &reference);
        let mut value = serde_json::to_value(summary)?;
        value["mode"] = serde_json::Value::String(mode.name().into());
        value["skipped_steps"] = serde_json::json!(skipped);
        modes.push(value);
    }
    bar.finish_and_clear();
    Ok(serde_json::json!({
        "config": args.run.config,
        "policy": args.run.policy,
        "reference": {
            "steps": args.reference_steps,
            "gradients": reference.draws(),
            "split_half_cosine": reference.split_half_cosine(),
        },
        "warmup_steps": args.warmup,
        "modes": modes,
        "parameters": reference_mean.len(),
        "runs": root,
        "threads": rayon::current_num_threads(),
        "device": format!("{device:?}"),
    }))
}
