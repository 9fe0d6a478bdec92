//! AdamW whose state can be saved and restored.
//!
//! tch's optimisers live in C++ and keep their moment estimates out of reach,
//! so a run restarted from a checkpoint would begin with fresh moments and
//! drift from the uninterrupted run. [`AdamW`] keeps the first and second
//! moments in a [`nn::VarStore`] of its own (`m.<parameter>`, `v.<parameter>`)
//! that is saved and loaded like any model's weights, plus the step count: a
//! restored optimiser continues bit for bit.
//!
//! The update is PyTorch's `torch.optim.AdamW` (Loshchilov & Hutter, 2019,
//! Algorithm 2): decoupled weight decay `θ ← θ(1 − ηλ)`, then
//! `m ← β₁m + (1−β₁)g`, `v ← β₂v + (1−β₂)g²`,
//! `θ ← θ − η m̂ / (√v̂ + ε)` with the bias-corrected `m̂`, `v̂`.

use tch::{Kind, Tensor, nn};

/// AdamW hyper-parameters (defaults are PyTorch's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamWConfig {
    /// Learning rate η (default: 1e-3).
    pub lr: f64,
    /// First-moment decay β₁ (default: 0.9).
    pub beta1: f64,
    /// Second-moment decay β₂ (default: 0.999).
    pub beta2: f64,
    /// Denominator term ε (default: 1e-8).
    pub eps: f64,
    /// Decoupled weight decay λ (default: 0.01).
    pub weight_decay: f64,
}

impl Default for AdamWConfig {
    fn default() -> Self {
        Self {
            lr: 1e-3,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.01,
        }
    }
}

/// AdamW over the trainable variables of a [`nn::VarStore`], with saveable state.
pub struct AdamW {
    config: AdamWConfig,
    params: Vec<(String, Tensor)>,
    moments: Vec<(Tensor, Tensor)>,
    state: nn::VarStore,
    steps: u64,
}

impl std::fmt::Debug for AdamW {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdamW")
            .field("config", &self.config)
            .field("parameters", &self.params.len())
            .field("steps", &self.steps)
            .finish()
    }
}

/// `root` followed by the `.`-separated segments of `name`.
fn nested<'a>(root: nn::Path<'a>, name: &str) -> (nn::Path<'a>, String) {
    let mut parts: Vec<&str> = name.split('.').collect();
    let last = parts.pop().unwrap_or_default().to_string();
    let path = parts.into_iter().fold(root, |p, s| p / s);
    (path, last)
}

impl AdamW {
    /// An optimiser over the variables of `vs` that require gradients at
    /// this moment (freeze first, then build), in name order.
    pub fn new(vs: &nn::VarStore, config: AdamWConfig) -> Self {
        let mut params: Vec<(String, Tensor)> = vs
            .variables()
            .into_iter()
            .filter(|(_, t)| t.requires_grad())
            .collect();
        params.sort_by(|a, b| a.0.cmp(&b.0));
        let state = nn::VarStore::new(vs.device());
        let moments = params
            .iter()
            .map(|(name, t)| {
                let shape = t.size();
                let (pm, lm) = nested(state.root() / "m", name);
                let (pv, lv) = nested(state.root() / "v", name);
                (
                    pm.zeros_no_train(&lm, &shape),
                    pv.zeros_no_train(&lv, &shape),
                )
            })
            .collect();
        Self {
            config,
            params,
            moments,
            state,
            steps: 0,
        }
    }

    /// The hyper-parameters.
    pub fn config(&self) -> &AdamWConfig {
        &self.config
    }

    /// Sets the learning rate (for schedules).
    pub fn set_lr(&mut self, lr: f64) {
        self.config.lr = lr;
    }

    /// Optimiser steps taken.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Sets the step count (when restoring a saved state).
    pub fn set_steps(&mut self, steps: u64) {
        self.steps = steps;
    }

    /// The moment estimates (`m.<parameter>`, `v.<parameter>`), to save with
    /// the model's own variable-store writer.
    pub fn state(&self) -> &nn::VarStore {
        &self.state
    }

    /// The moment estimates, to load a saved state into.
    pub fn state_mut(&mut self) -> &mut nn::VarStore {
        &mut self.state
    }

    /// Names of the optimised parameters, in update order.
    pub fn parameter_names(&self) -> impl Iterator<Item = &str> {
        self.params.iter().map(|(n, _)| n.as_str())
    }

    /// Clears every gradient.
    pub fn zero_grad(&mut self) {
        for (_, p) in &self.params {
            let mut g = p.grad();
            if g.defined() {
                let _ = g.detach_();
                let _ = g.zero_();
            }
        }
    }

    /// The global L2 norm of the gradients (f64 accumulation).
    pub fn grad_norm(&self) -> f64 {
        let mut sq = 0.0;
        for (_, p) in &self.params {
            let g = p.grad();
            if g.defined() {
                sq += g.square().sum(Kind::Double).double_value(&[]);
            }
        }
        sq.sqrt()
    }

    /// The gradients of every optimised parameter, in update order, flattened
    /// into one f32 vector on the CPU (zeros for a parameter without one).
    pub fn flat_gradient(&self) -> Vec<f32> {
        let mut out = Vec::new();
        for (_, p) in &self.params {
            let g = p.grad();
            let g = if g.defined() {
                g.detach()
            } else {
                p.zeros_like()
            };
            let g = g
                .to_device(tch::Device::Cpu)
                .to_kind(Kind::Float)
                .flatten(0, -1);
            let n = g.numel();
            let start = out.len();
            out.resize(start + n, 0.0);
            g.copy_data(&mut out[start..], n);
        }
        out
    }

    /// Scales the gradients so that their global norm is at most `max_norm`
    /// (PyTorch's `clip_grad_norm_`); returns the norm before clipping.
    pub fn clip_grad_norm(&mut self, max_norm: f64) -> f64 {
        let norm = self.grad_norm();
        let coef = max_norm / (norm + 1e-6);
        if coef < 1.0 {
            tch::no_grad(|| {
                for (_, p) in &self.params {
                    let mut g = p.grad();
                    if g.defined() {
                        let _ = g.g_mul_scalar_(coef);
                    }
                }
            });
        }
        norm
    }

    /// One AdamW update with the current gradients. Parameters without a
    /// gradient are left untouched (their moments too).
    pub fn step(&mut self) {
        self.steps += 1;
        let c = self.config;
        let t = self.steps as i32;
        let bias1 = 1.0 - c.beta1.powi(t);
        let bias2_sqrt = (1.0 - c.beta2.powi(t)).sqrt();
        tch::no_grad(|| {
            for ((_, p), (m, v)) in self.params.iter().zip(&self.moments) {
                let g = p.grad();
                if !g.defined() {
                    continue;
                }
                let (mut p, mut m, mut v) =
                    (p.shallow_clone(), m.shallow_clone(), v.shallow_clone());
                if c.weight_decay != 0.0 {
                    let _ = p.g_mul_scalar_(1.0 - c.lr * c.weight_decay);
                }
                let _ = m.lerp_(&g, 1.0 - c.beta1);
                let _ = v.g_mul_scalar_(c.beta2);
                let _ = v.addcmul_(&g, &(&g * (1.0 - c.beta2)));
                let denom = v.sqrt() / bias2_sqrt + c.eps;
                let _ = p.addcdiv_(&(&m * (-c.lr / bias1)), &denom);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::Device;

    /// A 3×4 linear layer with fixed weights (no global RNG: tests in one
    /// binary run in parallel and would interleave their draws).
    fn model(seed: i64) -> (nn::VarStore, Tensor, Tensor) {
        let vs = nn::VarStore::new(Device::Cpu);
        let root = vs.root();
        let init = ((Tensor::arange(12, (Kind::Float, Device::Cpu)) + seed as f64) * 0.7)
            .sin()
            .view([3, 4]);
        let w = root.sub("layer").var_copy("weight", &init);
        let b = root.sub("layer").zeros("bias", &[3]);
        (vs, w, b)
    }

    fn loss(w: &Tensor, b: &Tensor, x: &Tensor) -> Tensor {
        (x.matmul(&w.tr()) + b).square().mean(Kind::Float)
    }

    #[test]
    fn matches_tch_adamw_on_a_small_problem() {
        let x = Tensor::arange(8, (Kind::Float, Device::Cpu)).view([2, 4]) / 8.0;
        let (vs_a, wa, ba) = model(1);
        let (vs_b, wb, bb) = model(1);
        let config = AdamWConfig {
            lr: 0.05,
            ..Default::default()
        };
        let mut ours = AdamW::new(&vs_a, config);
        let mut reference = nn::OptimizerConfig::build(
            nn::AdamW {
                wd: config.weight_decay,
                ..Default::default()
            },
            &vs_b,
            config.lr,
        )
        .unwrap();
        for _ in 0..20 {
            ours.zero_grad();
            loss(&wa, &ba, &x).backward();
            ours.step();
            reference.zero_grad();
            loss(&wb, &bb, &x).backward();
            reference.step();
        }
        let diff =
            (&wa - &wb).abs().max().double_value(&[]) + (&ba - &bb).abs().max().double_value(&[]);
        assert!(diff < 1e-5, "max |ours − tch| = {diff}");
        assert!(
            loss(&wa, &ba, &x).double_value(&[])
                < 0.5 * loss(&model(1).1, &model(1).2, &x).double_value(&[])
        );
    }

    #[test]
    fn a_restored_state_continues_bit_for_bit() {
        let x = Tensor::arange(8, (Kind::Float, Device::Cpu)).view([2, 4]) / 8.0;
        let run = |split: Option<usize>| -> Vec<f32> {
            let (vs, w, b) = model(2);
            let mut opt = AdamW::new(&vs, AdamWConfig::default());
            for i in 0..10 {
                if Some(i) == split {
                    // Copy the state into a fresh optimiser, as a checkpoint would.
                    let mut fresh = AdamW::new(&vs, AdamWConfig::default());
                    tch::no_grad(|| {
                        let saved = opt.state().variables();
                        for (name, mut t) in fresh.state_mut().variables() {
                            t.copy_(&saved[&name]);
                        }
                    });
                    fresh.set_steps(opt.steps());
                    opt = fresh;
                }
                opt.zero_grad();
                loss(&w, &b, &x).backward();
                opt.clip_grad_norm(0.5);
                opt.step();
            }
            Vec::<f32>::try_from(w.flatten(0, -1)).unwrap()
        };
        let straight = run(None);
        let resumed = run(Some(4));
        assert_eq!(
            straight.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            resumed.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
        let names: Vec<String> = {
            let (vs, _, _) = model(2);
            let opt = AdamW::new(&vs, AdamWConfig::default());
            let mut n: Vec<String> = opt.state().variables().into_keys().collect();
            n.sort();
            n
        };
        assert_eq!(
            names,
            [
                "m.layer.bias",
                "m.layer.weight",
                "v.layer.bias",
                "v.layer.weight"
            ]
        );
    }

    /// The flat gradient is every parameter's gradient in update (name)
    /// order: here `layer.bias` then `layer.weight`.
    #[test]
    fn flat_gradient_concatenates_the_gradients_in_update_order() {
        let x = Tensor::arange(8, (Kind::Float, Device::Cpu)).view([2, 4]) / 8.0;
        let (vs, w, b) = model(2);
        let mut opt = AdamW::new(&vs, AdamWConfig::default());
        assert_eq!(opt.flat_gradient(), vec![0.0; 15], "no gradient yet");
        opt.zero_grad();
        loss(&w, &b, &x).backward();
        let flat = opt.flat_gradient();
        let expected: Vec<f32> = Vec::try_from(Tensor::cat(
            &[b.grad().flatten(0, -1), w.grad().flatten(0, -1)],
            0,
        ))
        .unwrap();
        assert_eq!(flat, expected);
        assert!(flat.iter().any(|g| *g != 0.0));
    }
}
