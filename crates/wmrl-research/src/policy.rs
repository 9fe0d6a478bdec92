//! The in-process policy (tch): a small network that emits a solution plan
//! for a task, trained by GRPO through the core.
//!
//! π(plan | task) = π(pre | t) · π(family | t) · π(capacity | t, family) ·
//! π(regularisation | t, family): a task embedding (one-hot → tanh layer)
//! feeds a categorical head per plan field; the two hyperparameter heads also
//! see the chosen family (one-hot), so each family learns its own levels.
//!
//! Learning (Shao et al. 2024, GRPO; Schulman et al. 2017, PPO clipping):
//! for `epochs` passes over the step's batch,
//! L = −Σᵢ wᵢ · min(ρᵢ·Aᵢ, clip(ρᵢ, 1 ± ε)·Aᵢ) − β · mean entropy,
//! with ρᵢ = π(aᵢ)/π_old(aᵢ), Aᵢ the core's advantage and wᵢ its loss weight
//! (stream weight included). Sampling reads a probability table refreshed
//! after each update, so it is plain Rust, deterministic per seed, and `Sync`.

use std::path::Path;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use tch::nn::{self, Module, OptimizerConfig};
use tch::{Device, Kind, Tensor};
use wmrl_core::seams::{Batch, Policy};

use crate::adapter::{ResearchAdapter, Solution, SolutionSampler, TaskPrompt};
use crate::plan::Plan;
use crate::task::Task;
use crate::{Error, Result};

/// Settings of the plan policy.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PlanPolicyConfig {
    /// Hidden width (default: 32).
    pub hidden: i64,
    /// Adam learning rate (default: 0.03).
    pub learning_rate: f64,
    /// PPO clip ε (default: 0.2).
    pub clip: f64,
    /// Passes over each batch (default: 4).
    pub epochs: usize,
    /// Entropy bonus β (default: 0.001).
    pub entropy: f64,
    /// Seed of the initialisation (default: 0).
    pub seed: u64,
}

impl Default for PlanPolicyConfig {
    fn default() -> Self {
        Self {
            hidden: 32,
            learning_rate: 0.03,
            clip: 0.2,
            epochs: 4,
            entropy: 0.001,
            seed: 0,
        }
    }
}

/// Probabilities of one task's heads (the hyperparameter heads per family).
#[derive(Debug, Clone, Default)]
struct TaskTable {
    pre: Vec<f64>,
    family: Vec<f64>,
    capacity: Vec<Vec<f64>>,
    regularisation: Vec<Vec<f64>>,
}

/// The tch plan policy.
pub struct PlanPolicy {
    config: PlanPolicyConfig,
    tasks: usize,
    vs: nn::VarStore,
    trunk: nn::Linear,
    pre: nn::Linear,
    family: nn::Linear,
    capacity: nn::Linear,
    regularisation: nn::Linear,
    optimizer: nn::Optimizer,
    table: Arc<Vec<TaskTable>>,
}

impl std::fmt::Debug for PlanPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlanPolicy")
            .field("config", &self.config)
            .field("tasks", &self.tasks)
            .finish()
    }
}

const FAMILIES: i64 = Plan::HEADS[1] as i64;

/// Per-sample outputs of the heads: log-probabilities of the chosen actions and entropies.
struct Heads {
    log_prob: Tensor,
    entropy: Tensor,
}

impl PlanPolicy {
    /// A fresh policy for `tasks` tasks (near-uniform plans).
    pub fn new(tasks: usize, config: PlanPolicyConfig, device: Device) -> Result<Self> {
        tch::manual_seed(config.seed as i64);
        let vs = nn::VarStore::new(device);
        let root = vs.root();
        let small = nn::LinearConfig {
            ws_init: nn::Init::Randn {
                mean: 0.0,
                stdev: 0.01,
            },
            ..Default::default()
        };
        let h = config.hidden;
        let trunk = nn::linear(&root / "trunk", tasks as i64, h, Default::default());
        let pre = nn::linear(&root / "pre", h, Plan::HEADS[0] as i64, small);
        let family = nn::linear(&root / "family", h, FAMILIES, small);
        let capacity = nn::linear(
            &root / "capacity",
            h + FAMILIES,
            Plan::HEADS[2] as i64,
            small,
        );
        let regularisation = nn::linear(
            &root / "regularisation",
            h + FAMILIES,
            Plan::HEADS[3] as i64,
            small,
        );
        let optimizer = nn::Adam::default()
            .build(&vs, config.learning_rate)
            .map_err(|e| Error::Build {
                what: "policy optimiser".into(),
                message: e.to_string(),
            })?;
        let mut policy = Self {
            config,
            tasks,
            vs,
            trunk,
            pre,
            family,
            capacity,
            regularisation,
            optimizer,
            table: Arc::default(),
        };
        policy.refresh_table();
        Ok(policy)
    }

    fn trunk(&self, tasks: &[i64]) -> Tensor {
        let device = self.vs.device();
        let index = Tensor::from_slice(tasks).to_device(device);
        let onehot = index.one_hot(self.tasks as i64).to_kind(Kind::Float);
        self.trunk.forward(&onehot).tanh()
    }

    fn with_family(&self, trunk: &Tensor, families: &[i64]) -> Tensor {
        let index = Tensor::from_slice(families).to_device(self.vs.device());
        Tensor::cat(
            &[
                trunk.shallow_clone(),
                index.one_hot(FAMILIES).to_kind(Kind::Float),
            ],
            1,
        )
    }

    fn heads(&self, tasks: &[i64], actions: &[[usize; 4]]) -> Heads {
        let trunk = self.trunk(tasks);
        let families: Vec<i64> = actions.iter().map(|a| a[1] as i64).collect();
        let conditioned = self.with_family(&trunk, &families);
        let logits = [
            self.pre.forward(&trunk),
            self.family.forward(&trunk),
            self.capacity.forward(&conditioned),
            self.regularisation.forward(&conditioned),
        ];
        let device = self.vs.device();
        let mut log_prob = Tensor::zeros([tasks.len() as i64], (Kind::Float, device));
        let mut entropy = Tensor::zeros([tasks.len() as i64], (Kind::Float, device));
        for (head, l) in logits.iter().enumerate() {
            let lp = l.log_softmax(-1, Kind::Float);
            let chosen: Vec<i64> = actions.iter().map(|a| a[head] as i64).collect();
            let chosen = Tensor::from_slice(&chosen).to_device(device).unsqueeze(1);
            log_prob += lp.gather(1, &chosen, false).squeeze_dim(1);
            entropy += -(lp.exp() * &lp).sum_dim_intlist([-1i64].as_slice(), false, Kind::Float);
        }
        Heads { log_prob, entropy }
    }

    fn refresh_table(&mut self) {
        let to_vec = |t: Tensor| -> Vec<Vec<f64>> {
            let t = t.to_kind(Kind::Double).to_device(Device::Cpu);
            let rows = t.size()[0];
            (0..rows)
                .map(|r| Vec::<f64>::try_from(t.get(r)).expect("1-d row"))
                .collect()
        };
        let table = tch::no_grad(|| {
            let all: Vec<i64> = (0..self.tasks as i64).collect();
            let trunk = self.trunk(&all);
            let pre = to_vec(self.pre.forward(&trunk).softmax(-1, Kind::Float));
            let family = to_vec(self.family.forward(&trunk).softmax(-1, Kind::Float));
            (0..self.tasks)
                .map(|t| {
                    let row = trunk.get(t as i64).unsqueeze(0).repeat([FAMILIES, 1]);
                    let fams: Vec<i64> = (0..FAMILIES).collect();
                    let conditioned = self.with_family(&row, &fams);
                    TaskTable {
                        pre: pre[t].clone(),
                        family: family[t].clone(),
                        capacity: to_vec(
                            self.capacity.forward(&conditioned).softmax(-1, Kind::Float),
                        ),
                        regularisation: to_vec(
                            self.regularisation
                                .forward(&conditioned)
                                .softmax(-1, Kind::Float),
                        ),
                    }
                })
                .collect()
        });
        self.table = Arc::new(table);
    }

    /// Samples plan indices for task `task` and their log-probability.
    pub fn sample_actions(&self, task: usize, seed: u64) -> ([usize; 4], f64) {
        let t = &self.table[task];
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut draw = |p: &[f64]| -> usize {
            let u: f64 = rng.random();
            let mut acc = 0.0;
            for (i, &pi) in p.iter().enumerate() {
                acc += pi;
                if u < acc {
                    return i;
                }
            }
            p.len() - 1
        };
        let pre = draw(&t.pre);
        let family = draw(&t.family);
        let capacity = draw(&t.capacity[family]);
        let regularisation = draw(&t.regularisation[family]);
        let log_prob = t.pre[pre].ln()
            + t.family[family].ln()
            + t.capacity[family][capacity].ln()
            + t.regularisation[family][regularisation].ln();
        ([pre, family, capacity, regularisation], log_prob)
    }

    /// The most probable plan of a task (field by field).
    pub fn greedy(&self, task: usize) -> Plan {
        let argmax = |p: &[f64]| {
            p.iter()
                .enumerate()
                .max_by(|a, b| a.1.total_cmp(b.1))
                .map_or(0, |(i, _)| i)
        };
        let t = &self.table[task];
        let family = argmax(&t.family);
        Plan::from_indices([
            argmax(&t.pre),
            family,
            argmax(&t.capacity[family]),
            argmax(&t.regularisation[family]),
        ])
    }

    /// Probability of each family for each task (for logs).
    pub fn family_probabilities(&self) -> Vec<Vec<f64>> {
        self.table.iter().map(|t| t.family.clone()).collect()
    }

    /// One clipped-surrogate update; returns the mean loss over epochs.
    pub fn update(&mut self, samples: &[(usize, [usize; 4], f64, f64, f64)]) -> f64 {
        let used: Vec<_> = samples
            .iter()
            .filter(|s| s.4 != 0.0 && s.3 != 0.0)
            .copied()
            .collect();
        if used.is_empty() {
            return 0.0;
        }
        let device = self.vs.device();
        let tasks: Vec<i64> = used.iter().map(|s| s.0 as i64).collect();
        let actions: Vec<[usize; 4]> = used.iter().map(|s| s.1).collect();
        let old = Tensor::from_slice(&used.iter().map(|s| s.2 as f32).collect::<Vec<_>>())
            .to_device(device);
        let adv = Tensor::from_slice(&used.iter().map(|s| s.3 as f32).collect::<Vec<_>>())
            .to_device(device);
        let weight = Tensor::from_slice(&used.iter().map(|s| s.4 as f32).collect::<Vec<_>>())
            .to_device(device);
        let eps = self.config.clip;
        let mut total = 0.0;
        for _ in 0..self.config.epochs {
            let heads = self.heads(&tasks, &actions);
            let ratio = (&heads.log_prob - &old).exp();
            let surrogate = (&ratio * &adv).minimum(&(ratio.clamp(1.0 - eps, 1.0 + eps) * &adv));
            let loss = -(&weight * surrogate).sum(Kind::Float)
                - heads.entropy.mean(Kind::Float) * self.config.entropy;
            self.optimizer.backward_step(&loss);
            total += loss.double_value(&[]);
        }
        self.refresh_table();
        total / self.config.epochs as f64
    }

    /// Saves the weights (safetensors).
    pub fn save(&self, path: &Path) -> Result<()> {
        self.vs.save(path).map_err(|e| Error::Build {
            what: format!("saving {}", path.display()),
            message: e.to_string(),
        })
    }

    /// Loads weights saved by [`PlanPolicy::save`].
    pub fn load(&mut self, path: &Path) -> Result<()> {
        self.vs.load(path).map_err(|e| Error::Build {
            what: format!("loading {}", path.display()),
            message: e.to_string(),
        })?;
        self.refresh_table();
        Ok(())
    }
}

impl SolutionSampler for PlanPolicy {
    fn sample(&self, tasks: &[Arc<Task>], task: usize, seed: u64) -> Result<Solution> {
        let (actions, log_prob) = self.sample_actions(task, seed);
        let plan = Plan::from_indices(actions);
        Ok(Solution {
            task,
            text: plan.render(&tasks[task]),
            plan: Some(plan),
            actions: Some(actions),
            log_prob,
            prompt: None,
            completion: None,
        })
    }
}

impl Policy<ResearchAdapter> for PlanPolicy {
    type Error = Error;

    fn learn(&mut self, batch: Batch<TaskPrompt, Solution>) -> Result<()> {
        let samples: Vec<(usize, [usize; 4], f64, f64, f64)> = batch
            .samples
            .iter()
            .filter_map(|s| {
                let actions = s.rollout.actions?;
                Some((
                    s.rollout.task,
                    actions,
                    s.rollout.log_prob,
                    s.signal.advantage,
                    s.signal.loss_weight,
                ))
            })
            .collect();
        let loss = self.update(&samples);
        tracing::debug!(
            step = batch.step,
            samples = samples.len(),
            loss,
            "policy updated"
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampling_is_deterministic_and_updates_move_probability_mass() {
        let mut policy = PlanPolicy::new(
            2,
            PlanPolicyConfig {
                learning_rate: 0.1,
                ..Default::default()
            },
            Device::Cpu,
        )
        .unwrap();
        assert_eq!(policy.sample_actions(0, 7), policy.sample_actions(0, 7));
        let before = policy.family_probabilities()[0][4];
        // Reward family 4 on task 0 against the others.
        let samples: Vec<_> = (0..64)
            .map(|i| {
                let (mut a, lp) = policy.sample_actions(0, i);
                a[1] = if i % 2 == 0 { 4 } else { (i as usize / 2) % 4 };
                let _ = lp;
                let log_prob = policy.table[0].pre[a[0]].ln()
                    + policy.table[0].family[a[1]].ln()
                    + policy.table[0].capacity[a[1]][a[2]].ln()
                    + policy.table[0].regularisation[a[1]][a[3]].ln();
                (
                    0,
                    a,
                    log_prob,
                    if a[1] == 4 { 1.0 } else { -1.0 },
                    1.0 / 64.0,
                )
            })
            .collect();
        for _ in 0..5 {
            policy.update(&samples);
        }
        let after = policy.family_probabilities()[0][4];
        assert!(after > before + 0.1, "{before} -> {after}");
    }
}
