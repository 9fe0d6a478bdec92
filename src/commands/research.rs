//! `wmrl research …`: AutoResearch tasks, sandboxed runs of solutions, and
//! WMRL training of solution-writing policies (crates/wmrl-research).

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, Subcommand};
use wmrl_research::suite::{self, Suite};
use wmrl_research::{ExecutionCache, Outcome, SolutionRunner, Task};
use wmrl_sandbox::Limits;

use crate::cli::GlobalArgs;

mod train;

/// Arguments of `wmrl research`.
#[derive(Debug, Args)]
pub struct ResearchArgs {
    #[command(subcommand)]
    pub command: ResearchCommand,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub enum ResearchCommand {
    /// Task suites: generate data and leaderboards, or list them.
    Tasks(TasksArgs),
    /// Run one solution in the sandbox on a task and score it.
    Run(RunArgs),
    /// Post-train the in-process plan policy through the WMRL core.
    Train(TrainArgs),
    /// Train every mode on the same seeds and compare percentile against real executions.
    Experiment(ExperimentArgs),
}

/// `wmrl research train`.
#[derive(Debug, Args)]
pub struct TrainArgs {
    /// One task folder (instead of --suite).
    #[arg(long, conflicts_with = "suite")]
    pub task: Option<PathBuf>,
    /// A suite, built into .wmrl-cache on demand.
    #[arg(long)]
    pub suite: Option<String>,
    /// Folder holding built suites (default: .wmrl-cache/research-tasks).
    #[arg(long)]
    pub tasks_dir: Option<PathBuf>,
    /// Core mode: real, wm-only, wmrl, wmrl-no-debias, wmrl-no-denoise, ppi.
    #[arg(long, default_value = "wmrl")]
    pub mode: wmrl_core::Mode,
    /// Training steps.
    #[arg(long)]
    pub steps: Option<u64>,
    /// Seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// A JSON file with a full ResearchConfig (flags override its mode, steps and seed).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Run folder (default: runs/research-<mode>-<seed>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Execution cache (JSONL; default: .wmrl-cache/research-executions.jsonl; "none" disables).
    #[arg(long)]
    pub cache: Option<String>,
    /// Use an LLM judge as the world model: base URL of an OpenAI-compatible
    /// endpoint up to `/v1` (vLLM, SGLang, llama.cpp), e.g. http://127.0.0.1:8000/v1.
    /// Default: the in-process text model.
    #[arg(long)]
    pub judge_url: Option<String>,
    /// Model name sent to the judge endpoint (default: `default`).
    #[arg(long)]
    pub judge_model: Option<String>,
    #[command(flatten)]
    pub sandbox: SandboxArgs,
}

/// `wmrl research experiment`.
#[derive(Debug, Args)]
pub struct ExperimentArgs {
    /// Suite to train on.
    #[arg(long, default_value = "sklearn-v1")]
    pub suite: String,
    /// Folder holding built suites (default: .wmrl-cache/research-tasks).
    #[arg(long)]
    pub tasks_dir: Option<PathBuf>,
    /// Modes, comma-separated.
    #[arg(long, default_value = "real,wm-only,wmrl", value_delimiter = ',')]
    pub modes: Vec<wmrl_core::Mode>,
    /// Seeds, comma-separated.
    #[arg(long, default_value = "0,1", value_delimiter = ',')]
    pub seeds: Vec<u64>,
    /// Training steps per run.
    #[arg(long, default_value_t = 10)]
    pub steps: u64,
    /// GRPO groups per step.
    #[arg(long, default_value_t = 5)]
    pub groups: usize,
    /// GRPO groups per step for mode `real`, which executes every group
    /// (default: `--groups`). Lets `real` keep its own execution budget per
    /// step while the world-model modes imagine more groups.
    #[arg(long)]
    pub real_groups: Option<usize>,
    /// Share of groups executed for real as anchors (ρ; K = ⌈ρ·G⌉ groups).
    #[arg(long, default_value_t = 0.1)]
    pub anchor_ratio: f64,
    /// Solutions per group.
    #[arg(long, default_value_t = 8)]
    pub group_size: usize,
    /// Evaluation samples per task.
    #[arg(long, default_value_t = 4)]
    pub eval_samples: usize,
    /// Evaluate every this many steps.
    #[arg(long, default_value_t = 2)]
    pub eval_every: u64,
    /// Output folder (default: runs/research-experiment).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Override one training setting for every run, e.g. `--set
    /// policy.entropy=0.01` (repeatable; keys of the research training
    /// config: `policy.*`, `world_model.*`, `core.calibrator.*`, …). The
    /// options above win over `--set` for the fields they name.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    #[command(flatten)]
    pub sandbox: SandboxArgs,
}

/// `wmrl research tasks`.
#[derive(Debug, Args)]
pub struct TasksArgs {
    #[command(subcommand)]
    pub command: TasksCommand,
}

/// Task suite commands.
#[derive(Debug, Subcommand)]
pub enum TasksCommand {
    /// Generate a suite's data (scikit-learn's bundled data sets) and run its
    /// reference solutions in the sandbox to form the leaderboards.
    Build(BuildArgs),
    /// List a built suite's tasks and leaderboards.
    List(SuiteArgs),
}

/// Where a suite lives.
#[derive(Debug, Args)]
pub struct SuiteArgs {
    /// Suite name.
    #[arg(long, default_value = "sklearn-v1")]
    pub suite: String,
    /// Folder holding built suites (default: .wmrl-cache/research-tasks).
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// Sandbox settings shared by the commands that execute solutions.
#[derive(Debug, Args, Clone)]
pub struct SandboxArgs {
    /// Python interpreter (default: $WMRL_PYTHON, ./.venv/bin/python, python3).
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// Concurrent sandbox runs (default: available cores).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Wall-clock limit per run, seconds.
    #[arg(long, default_value_t = 120.0)]
    pub wall_time: f64,
    /// Address-space limit per process, MiB.
    #[arg(long, default_value_t = 4096)]
    pub memory_mb: u64,
    /// Run solutions even where this machine cannot isolate them (no root, no
    /// user namespaces): they can then read your files, the hidden answers
    /// included, and use the network. Off by default: the sandbox fails closed.
    #[arg(long)]
    pub allow_unisolated: bool,
}

/// `wmrl research tasks build`.
#[derive(Debug, Args)]
pub struct BuildArgs {
    #[command(flatten)]
    pub suite: SuiteArgs,
    #[command(flatten)]
    pub sandbox: SandboxArgs,
    /// Build only these task ids (repeatable).
    #[arg(long)]
    pub only: Vec<String>,
}

/// `wmrl research run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The solution (a Python file).
    #[arg(long)]
    pub solution: PathBuf,
    /// The task folder.
    #[arg(long)]
    pub task: PathBuf,
    #[command(flatten)]
    pub sandbox: SandboxArgs,
}

pub fn run(global: &GlobalArgs, args: ResearchArgs) -> anyhow::Result<()> {
    match args.command {
        ResearchCommand::Tasks(TasksArgs {
            command: TasksCommand::Build(a),
        }) => build(global, a),
        ResearchCommand::Tasks(TasksArgs {
            command: TasksCommand::List(a),
        }) => list(global, a),
        ResearchCommand::Run(a) => run_solution(global, a),
        ResearchCommand::Train(a) => train::train(global, a),
        ResearchCommand::Experiment(a) => train::experiment(global, a),
    }
}

fn suite_dir(args: &SuiteArgs) -> anyhow::Result<(Suite, PathBuf)> {
    let suite = suite::find_suite(&args.suite)?;
    let root = args
        .dir
        .clone()
        .unwrap_or_else(|| suite::default_cache(Path::new(".")));
    Ok((suite, root.join(suite.name)))
}

pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Builds the sandbox and reports its isolation loudly when it is weak.
pub(crate) async fn runner(
    args: &SandboxArgs,
    cache: Option<ExecutionCache>,
) -> anyhow::Result<SolutionRunner> {
    let python = wmrl_research::python::find_python(args.python.as_deref())?;
    let limits = Limits {
        wall_time_s: args.wall_time,
        address_space: args.memory_mb << 20,
        ..Limits::default()
    };
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let isolation = if args.allow_unisolated {
        wmrl_research::python::IsolationPolicy::AllowUnisolated
    } else {
        wmrl_research::python::IsolationPolicy::Required
    };
    let sandbox = wmrl_research::python::sandbox(&python, limits, jobs, isolation).await?;
    if !sandbox.isolation().is_isolated() {
        eprintln!(
            "WARNING (--allow-unisolated): the sandbox is NOT isolated on this machine ({}): solutions \
             can read your files (including hidden answers) and use the network. Run as root or \
             enable user namespaces.",
            sandbox.isolation()
        );
    }
    Ok(SolutionRunner::new(sandbox, cache))
}

fn build(global: &GlobalArgs, args: BuildArgs) -> anyhow::Result<()> {
    let (suite, dir) = suite_dir(&args.suite)?;
    let tasks: Vec<_> = suite
        .tasks
        .iter()
        .copied()
        .filter(|t| args.only.is_empty() || args.only.iter().any(|o| o == t.id))
        .collect();
    if let Some(unknown) = args
        .only
        .iter()
        .find(|o| !suite.tasks.iter().any(|t| t.id == o.as_str()))
    {
        anyhow::bail!("suite {} has no task `{unknown}`", suite.name);
    }
    let python = wmrl_research::python::find_python(args.sandbox.python.as_deref())?;
    wmrl_research::python::check_packages(&python)?;
    suite::generate(&python, &dir, &tasks)?;
    let dirs: Vec<PathBuf> = tasks.iter().map(|t| dir.join(t.id)).collect();
    let bar = indicatif::ProgressBar::new((dirs.len() * suite::references().len()) as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} references {msg}")
            .expect("template"),
    );
    let rt = runtime()?;
    rt.block_on(async {
        let runner = runner(&args.sandbox, None).await?;
        let progress = |task: &str, name: &str, outcome: &Outcome| {
            bar.inc(1);
            bar.set_message(format!("{task}/{name}: {}", outcome.name()));
        };
        suite::build_leaderboards(&runner, &dirs, &progress).await?;
        anyhow::Ok(())
    })?;
    bar.finish_and_clear();
    list(
        global,
        SuiteArgs {
            suite: suite.name.into(),
            dir: args.suite.dir,
        },
    )
}

fn list(global: &GlobalArgs, args: SuiteArgs) -> anyhow::Result<()> {
    let (suite, dir) = suite_dir(&args)?;
    let mut rows = Vec::new();
    for t in suite.tasks {
        let path = dir.join(t.id);
        if !path.exists() {
            continue;
        }
        let task = Task::load(&path)?;
        let board = task.leaderboard.as_ref();
        rows.push(serde_json::json!({
            "task": task.id(), "dir": path, "metric": task.metric.name(), "direction": task.metric.direction(),
            "test_rows": task.test_ids.len(),
            "leaderboard": board.map(|b| b.entries.iter().map(|e| serde_json::json!({"name": e.name, "score": e.score})).collect::<Vec<_>>()),
        }));
    }
    if global.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    println!(
        "{:<16} {:<9} {:>5}  {:>9} {:>9} {:>9}  folder",
        "task", "metric", "test", "worst", "median", "best"
    );
    for r in &rows {
        let scores: Vec<f64> = r["leaderboard"]
            .as_array()
            .map(|a| a.iter().filter_map(|e| e["score"].as_f64()).collect())
            .unwrap_or_default();
        let fmt = |v: Option<&f64>| v.map_or("-".to_string(), |x| format!("{x:.4}"));
        println!(
            "{:<16} {:<9} {:>5}  {:>9} {:>9} {:>9}  {}",
            r["task"].as_str().unwrap_or(""),
            r["metric"].as_str().unwrap_or(""),
            r["test_rows"],
            fmt(scores.last()),
            fmt(scores.get(scores.len() / 2)),
            fmt(scores.first()),
            r["dir"].as_str().unwrap_or("")
        );
    }
    if rows.is_empty() {
        println!(
            "(nothing built in {}; run `wmrl research tasks build`)",
            dir.display()
        );
    }
    Ok(())
}

fn run_solution(global: &GlobalArgs, args: RunArgs) -> anyhow::Result<()> {
    let task = Task::load(&args.task)?;
    let solution = std::fs::read_to_string(&args.solution)
        .with_context(|| format!("reading the solution {}", args.solution.display()))?;
    let rt = runtime()?;
    let record = rt.block_on(async {
        let runner = runner(&args.sandbox, None).await?;
        anyhow::Ok(runner.run(&task, &solution).await?)
    })?;
    if global.json {
        println!("{}", serde_json::to_string_pretty(&record)?);
        return Ok(());
    }
    println!("task:       {}", task.id());
    println!("outcome:    {}", record.outcome.name());
    match &record.outcome {
        Outcome::Scored { score } => println!("score:      {score:.6} ({})", task.metric),
        // The solution's words (also from older cache entries): bounded and escaped.
        Outcome::InvalidSubmission { reason } => {
            println!("reason:     {}", wmrl_sandbox::printable(reason, 500))
        }
        Outcome::Crashed {
            termination,
            stderr_tail,
        } => println!(
            "ended:      {termination:?}\n{}",
            wmrl_sandbox::printable(stderr_tail, 2000)
        ),
        Outcome::ResourceLimit { limit } => println!("limit:      {limit:?}"),
        Outcome::TimedOut => println!("limit:      wall clock ({} s)", args.sandbox.wall_time),
    }
    if let Some(p) = record.percentile {
        println!(
            "percentile: {:.1} (leaderboard of {})",
            100.0 * p,
            task.leaderboard.as_ref().map_or(0, |b| b.entries.len())
        );
    }
    println!("wall time:  {:.2} s", record.wall_time_s);
    Ok(())
}
