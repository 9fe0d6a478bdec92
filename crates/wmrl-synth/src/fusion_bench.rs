//! Stream fusion against the exact gradient (`wmrl bench fusion`).
//!
//! In the synthetic world the true policy gradient is known in closed form,
//! ∂J/∂θ_{x,a} = π(a|x)(q(x,a) − Σ_b π(b|x) q(x,b)) / P, so the core's
//! fusion rules can be judged by the error they make, not by a proxy. At a
//! fixed policy (the uniform one trained `policy_steps` steps in mode
//! `real`) the bench draws many steps of fresh groups. Each step is fed to
//! three cores in lockstep (`wmrl` with the least-error weights, `wmrl` with
//! the paper's, `ppi`), which see the same anchors and keep the same
//! calibrator window, and each stream's gradient is formed exactly as the
//! core forms it: ĝ_A from A(r) on anchors, ĝ_W from A(f̂(ŝ)) on world-model
//! groups, and PPI's correction ĝ_W(f̂₀) − ĝ_A(f̂₀) with the map f̂₀ fitted
//! before the step (Hájek weights within each stream).
//!
//! **Error.** An estimator's scale is the learning rate's business, so the
//! error of ĝ is taken after the one deterministic rescaling s that makes
//! its mean project onto g with unit coefficient, s = ‖g‖² / E[ĝ·g]:
//!
//! ```text
//! error = E‖s ĝ − g‖² / ‖g‖² = ‖g‖² E‖ĝ‖² / (E[ĝ·g])² − 1
//! ```
//!
//! (undefined when E[ĝ·g] ≤ 0). It counts variance and the direction of the
//! mean alike; the mean cosine of ĝ with g is reported beside it. The
//! fusion grid is (1 − w) ĝ_A + w ĝ_W (w = 0: anchors alone, w = 1: the
//! world model alone); the core's rules are scored with their per-step
//! weights on the same draws, and placed on the grid by their world-model
//! share. PPI's grid is ĝ_A(r) + λ (ĝ_W(f̂₀) − ĝ_A(f̂₀)).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use wmrl_core::rng::derive_seed;
use wmrl_core::{
    AdvantageOptions, Core, CoreConfig, DenoiseConfig, GroupInput, Mode, Stream, WeightRule,
    advantage::group_advantages_into, weights::count_weights,
};

use crate::policy::SoftmaxPolicy;
use crate::scenario::{RewardKind, Scenario};
use crate::world::{
    ActionSampler, SynthAdapter, SynthExecutor, SynthWorldModel, SyntheticWorld, standard_normal,
};
use crate::{Error, Result};

mod score;

pub use score::{Estimator, FusionTable, PpiTable};
use score::{Products, Tally};

/// What to measure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FusionBenchOptions {
    /// Presets measured (default: all four).
    pub scenarios: Vec<String>,
    /// Steps of mode `real` from the uniform policy to the probed one (default: 20).
    pub policy_steps: u64,
    /// Steps fed to the cores before measuring, to fill the calibrator's window (default: 16).
    pub warmup: usize,
    /// Measured steps per scenario and scaling (default: 400).
    pub draws: usize,
    /// World seed (default: 0).
    pub seed: u64,
    /// Grid of world-model weights w and of λ (default: 0, 0.05, …, 1).
    pub grid: Vec<f64>,
}

impl Default for FusionBenchOptions {
    fn default() -> Self {
        Self {
            scenarios: crate::PRESETS.iter().map(|s| s.to_string()).collect(),
            policy_steps: 20,
            warmup: 16,
            draws: 400,
            seed: 0,
            grid: (0..=20).map(|i| f64::from(i) / 20.0).collect(),
        }
    }
}

/// One scenario under one advantage scaling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioFusion {
    /// Preset name.
    pub scenario: String,
    /// Whether advantages were std-scaled.
    pub scale_by_std: bool,
    /// Steps measured.
    pub draws: usize,
    /// Anchor and world-model samples per step (mean).
    pub anchor_samples: f64,
    /// World-model samples per step (mean).
    pub world_model_samples: f64,
    /// Mean out-of-fold within-group correlation ρ the core measured.
    pub correlation: f64,
    /// Mean β̂ of the least-error rule.
    pub world_model_scale: f64,
    /// The fusion grid and the core's rules.
    pub fusion: FusionTable,
    /// PPI's λ grid and the core's λ.
    pub ppi: PpiTable,
}

/// Everything `wmrl bench fusion` measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FusionReport {
    /// The options run.
    pub options: FusionBenchOptions,
    /// One entry per scenario and scaling.
    pub results: Vec<ScenarioFusion>,
}

/// Runs every scenario of `options` under unscaled and std-scaled advantages.
pub fn bench_fusion(options: &FusionBenchOptions) -> Result<FusionReport> {
    if options.draws < 2 || options.grid.is_empty() {
        return Err(Error::InvalidScenario {
            field: "draws",
            value: options.draws.to_string(),
            expected: "at least 2 draws and a non-empty grid",
        });
    }
    if !(options.grid.contains(&0.0) && options.grid.contains(&1.0)) {
        return Err(Error::InvalidScenario {
            field: "grid",
            value: format!("{:?}", options.grid),
            expected: "a grid holding 0 and 1 (each stream alone)",
        });
    }
    if let Some(w) = options.grid.iter().find(|w| !(0.0..=1.0).contains(*w)) {
        return Err(Error::InvalidScenario {
            field: "grid",
            value: w.to_string(),
            expected: "weights in [0, 1]",
        });
    }
    let mut results = Vec::new();
    for name in &options.scenarios {
        let scenario = Scenario::preset(name)?;
        for scale_by_std in [false, true] {
            results.push(measure(&scenario, scale_by_std, options)?);
        }
    }
    Ok(FusionReport {
        options: options.clone(),
        results,
    })
}

/// The probed policy: uniform, then `steps` steps of mode `real`.
fn probed_policy(
    scenario: &Scenario,
    world: &SyntheticWorld,
    seed: u64,
    steps: u64,
) -> Result<SoftmaxPolicy> {
    let mut policy =
        SoftmaxPolicy::uniform(scenario.prompts, scenario.actions, scenario.learning_rate);
    let mut core = Core::new(CoreConfig {
        mode: Mode::Real,
        seed: derive_seed(seed, &[0xf05e]),
        ..scenario.core
    })?;
    let mut adapter = SynthAdapter {
        prompts: scenario.prompts,
    };
    let mut executor = SynthExecutor::new(world, 0.0);
    let mut world_model = SynthWorldModel::new(world, seed);
    for _ in 0..steps {
        wmrl_core::step(
            &mut core,
            &mut adapter,
            &mut policy,
            &mut world_model,
            &mut executor,
        )?;
    }
    Ok(policy)
}

/// ∇J, row-major by prompt.
fn true_gradient(policy: &SoftmaxPolicy, world: &SyntheticWorld) -> Vec<f64> {
    let p = world.prompts() as f64;
    (0..world.prompts())
        .flat_map(|x| {
            let (pi, q) = (policy.probs(x), world.quality_row(x));
            let j: f64 = pi.iter().zip(q).map(|(a, b)| a * b).sum();
            pi.iter()
                .zip(q)
                .map(move |(a, b)| a * (b - j) / p)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// One sampled group: prompt, actions, real rewards, scores.
struct Group {
    prompt: usize,
    actions: Vec<usize>,
    rewards: Vec<f64>,
    scores: Vec<f64>,
}

/// Adds Σ cᵢ ψᵢ to `grad` for the group's rollouts, ψ = e_a − π_x.
fn add_scores(grad: &mut [f64], policy: &SoftmaxPolicy, g: &Group, coef: &[f64]) {
    let k = policy.probs(g.prompt).len();
    let row = &mut grad[g.prompt * k..(g.prompt + 1) * k];
    for (&a, &c) in g.actions.iter().zip(coef) {
        for (r, &p) in row.iter_mut().zip(policy.probs(g.prompt)) {
            *r -= c * p;
        }
        row[a] += c;
    }
}

fn measure(
    scenario: &Scenario,
    scale_by_std: bool,
    options: &FusionBenchOptions,
) -> Result<ScenarioFusion> {
    let _span =
        tracing::info_span!("fusion_bench", scenario = %scenario.name, scale_by_std).entered();
    let world = SyntheticWorld::generate(scenario, options.seed);
    let policy = probed_policy(scenario, &world, options.seed, options.policy_steps)?;
    let truth = true_gradient(&policy, &world);
    let advantage = AdvantageOptions {
        scale_by_std,
        ..scenario.core.advantage
    };
    let config = |mode, weights| CoreConfig {
        mode,
        advantage,
        denoise: DenoiseConfig {
            weights,
            ..scenario.core.denoise
        },
        seed: derive_seed(options.seed, &[0xf0b1]),
        ..scenario.core
    };
    let mut cores = [
        Core::new(config(Mode::Wmrl, WeightRule::Mse))?,
        Core::new(config(Mode::Wmrl, WeightRule::Paper))?,
        Core::new(config(Mode::Ppi, WeightRule::Mse))?,
    ];
    let (groups, n) = (scenario.core.groups, scenario.core.group_size);
    let tasks: Vec<u32> = (0..groups).map(|g| (g % scenario.prompts) as u32).collect();
    let mut rng =
        ChaCha8Rng::seed_from_u64(derive_seed(options.seed, &[0xf0b2, scale_by_std as u64]));
    let noise_sd = scenario.world_model.noise_sd;
    let dim = truth.len();
    let mut tally = Tally::new(&truth, &options.grid);
    let (mut na_sum, mut nw_sum, mut rho_sum, mut beta_sum) = (0.0, 0.0, 0.0, 0.0);
    let mut adv = vec![0.0; n];
    let mut coef = vec![0.0; n];
    for step in 0..options.warmup + options.draws {
        let plan = cores[0].plan(&tasks)?;
        let sampled: Vec<Group> = tasks
            .iter()
            .map(|&x| {
                let x = x as usize;
                let actions: Vec<usize> =
                    (0..n).map(|_| policy.sample_action(x, &mut rng)).collect();
                let rewards = actions
                    .iter()
                    .map(|&a| {
                        let q = world.quality(x, a);
                        match scenario.reward {
                            RewardKind::Continuous => q,
                            RewardKind::Bernoulli => (rng.random::<f64>() < q) as u8 as f64,
                        }
                    })
                    .collect();
                let scores = actions
                    .iter()
                    .map(|&a| world.expected_score(x, a) + noise_sd * standard_normal(&mut rng))
                    .collect();
                Group {
                    prompt: x,
                    actions,
                    rewards,
                    scores,
                }
            })
            .collect();
        let inputs: Vec<GroupInput<'_>> = sampled
            .iter()
            .enumerate()
            .map(|(g, s)| {
                let anchor = plan.is_anchor[g];
                GroupInput {
                    task: tasks[g],
                    stream: if anchor {
                        Stream::Anchor
                    } else {
                        Stream::WorldModel
                    },
                    rewards: anchor.then_some(s.rewards.as_slice()),
                    scores: Some(s.scores.as_slice()),
                    inclusion_probability: plan.inclusion_probability[g],
                }
            })
            .collect();
        // f̂₀: the map fitted before this step (PPI's), identical in every core.
        let prior: Vec<Vec<f64>> = sampled
            .iter()
            .map(|s| {
                s.scores
                    .iter()
                    .map(|&v| cores[2].calibrator().predict(v))
                    .collect()
            })
            .collect();
        let outs = [
            cores[0].process(&inputs)?,
            cores[1].process(&inputs)?,
            cores[2].process(&inputs)?,
        ];
        if step < options.warmup {
            continue;
        }
        // Hájek weights within each stream.
        let norm = |anchor: bool| -> f64 {
            inputs
                .iter()
                .filter(|g| (g.stream == Stream::Anchor) == anchor)
                .map(|g| n as f64 / stream_probability(g))
                .sum()
        };
        let (norm_a, norm_w) = (norm(true), norm(false));
        if norm_a == 0.0 || norm_w == 0.0 {
            continue;
        }
        // ĝ_A(r), ĝ_W(f̂), ĝ_A(f̂₀), ĝ_W(f̂₀).
        let mut grads = [
            vec![0.0; dim],
            vec![0.0; dim],
            vec![0.0; dim],
            vec![0.0; dim],
        ];
        for ((s, g), f0) in sampled.iter().zip(&inputs).zip(&prior) {
            let anchor = g.stream == Stream::Anchor;
            let h = 1.0 / stream_probability(g) / if anchor { norm_a } else { norm_w };
            let post: Vec<f64>;
            let (reward, index) = if anchor {
                (&s.rewards, 0)
            } else {
                post = s
                    .scores
                    .iter()
                    .map(|&v| cores[0].calibrator().predict(v))
                    .collect();
                (&post, 1)
            };
            for (y, slot) in [(reward, index), (f0, index + 2)] {
                group_advantages_into(y, &advantage, &mut adv);
                for (c, a) in coef.iter_mut().zip(&adv) {
                    *c = h * a;
                }
                add_scores(&mut grads[slot], &policy, s, &coef);
            }
        }
        let correction: Vec<f64> = grads[3].iter().zip(&grads[2]).map(|(w, a)| w - a).collect();
        let fusion = Products::new(&grads[0], &grads[1], &truth);
        let ppi = Products::new(&grads[0], &correction, &truth);
        let d = &outs[0].diagnostics;
        let (na, nw) = (d.anchor_samples, d.world_model_samples);
        let counts = count_weights(na, nw);
        let mse = d.stream_weights;
        let paper = outs[1].diagnostics.stream_weights;
        let lambda = outs[2].diagnostics.ppi_lambda.unwrap_or(0.0);
        tally.add(
            &fusion,
            &ppi,
            [
                (mse.anchor, mse.world_model),
                (paper.anchor, paper.world_model),
                (counts.anchor, counts.world_model),
            ],
            lambda,
        );
        na_sum += na as f64;
        nw_sum += nw as f64;
        rho_sum += d.reward_correlation.unwrap_or(0.0);
        beta_sum += mse.world_model_scale;
    }
    let draws = tally.draws();
    if draws < 2 {
        return Err(Error::InvalidScenario {
            field: "draws",
            value: draws.to_string(),
            expected: "at least 2 steps with both streams",
        });
    }
    let d = draws as f64;
    let correlation = rho_sum / d;
    let (fusion, ppi) = tally.finish();
    Ok(ScenarioFusion {
        scenario: scenario.name.clone(),
        scale_by_std,
        draws,
        anchor_samples: na_sum / d,
        world_model_samples: nw_sum / d,
        correlation,
        world_model_scale: beta_sum / d,
        fusion,
        ppi,
    })
}

fn stream_probability(g: &GroupInput<'_>) -> f64 {
    if g.stream == Stream::Anchor {
        g.inclusion_probability
    } else {
        1.0 - g.inclusion_probability
    }
}

fn fmt_error(e: &Estimator) -> String {
    e.error.map_or_else(|| "—".into(), |x| format!("{x:.3}"))
}

fn fmt_ratio(r: Option<f64>) -> String {
    r.map_or_else(|| "—".into(), |x| format!("{x:.2}"))
}

/// The report as a text table: one row per scenario and scaling, errors
/// relative to ‖g‖² (cosines in the JSON).
pub fn table(report: &FusionReport) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<8} {:<8} {:>5} {:>7} {:>7} {:>7} {:>12} {:>12} {:>12} {:>12} {:>6} {:>6} {:>7} {:>12} {:>12}",
        "scenario",
        "scaling",
        "ρ",
        "anchor",
        "wm",
        "best w",
        "mse (w)",
        "paper (w)",
        "counts (w)",
        "best/grid",
        "mse/b",
        "mse/1",
        "λ=0",
        "ppi λ",
        "best λ"
    );
    for r in &report.results {
        let f = &r.fusion;
        let p = &r.ppi;
        let with_w = |e: &Estimator| format!("{} ({:.2})", fmt_error(e), e.weight);
        let _ = writeln!(
            out,
            "{:<8} {:<8} {:>5.2} {:>7} {:>7} {:>7.2} {:>12} {:>12} {:>12} {:>12} {:>6} {:>6} {:>7} {:>12} {:>12}",
            r.scenario,
            if r.scale_by_std { "std" } else { "unscaled" },
            r.correlation,
            fmt_error(&f.anchor_only),
            fmt_error(&f.world_model_only),
            f.best.weight,
            with_w(&f.mse),
            with_w(&f.paper),
            with_w(&f.counts),
            fmt_error(&f.best),
            fmt_ratio(f.mse_vs_best),
            fmt_ratio(f.mse_vs_best_single),
            fmt_error(&p.lambda_zero),
            with_w(&p.core),
            with_w(&p.best),
        );
    }
    out
}
