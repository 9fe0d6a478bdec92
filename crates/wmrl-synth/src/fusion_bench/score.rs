//! Scoring of linear combinations of two gradient estimates against the
//! exact gradient from six dot products per draw, so that every weight on
//! the grid and every rule is scored on the same draws.

use serde::{Deserialize, Serialize};

/// The dot products that fix p·a + q·b's squared norm and projection on g for every (p, q).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Products {
    aa: f64,
    ab: f64,
    bb: f64,
    ag: f64,
    bg: f64,
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

impl Products {
    pub(crate) fn new(a: &[f64], b: &[f64], g: &[f64]) -> Self {
        Self {
            aa: dot(a, a),
            ab: dot(a, b),
            bb: dot(b, b),
            ag: dot(a, g),
            bg: dot(b, g),
        }
    }

    fn squared_norm(&self, p: f64, q: f64) -> f64 {
        (p * p * self.aa + 2.0 * p * q * self.ab + q * q * self.bb).max(0.0)
    }

    fn along(&self, p: f64, q: f64) -> f64 {
        p * self.ag + q * self.bg
    }
}

/// One estimator's error against the exact gradient (see the module docs of
/// [`crate::fusion_bench`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Estimator {
    /// World-model weight w (its share u_W / (u_A + u_W) for a rule, mean
    /// over draws), or λ for PPI.
    pub weight: f64,
    /// ‖g‖² E‖ĝ‖² / (E[ĝ·g])² − 1: the relative squared error after the best
    /// fixed rescaling (`None` when E[ĝ·g] ≤ 0).
    pub error: Option<f64>,
    /// Mean cosine of ĝ with g.
    pub cosine: f64,
    /// E[ĝ·g] / ‖g‖²: the length of ĝ's mean along g.
    pub scale: f64,
}

/// Ratio of two errors, `None` when either is undefined or the denominator is 0.
pub(crate) fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

/// The fusion grid and the core's rules on it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FusionTable {
    /// (1 − w) ĝ_A + w ĝ_W at each w of the grid.
    pub grid: Vec<Estimator>,
    /// The grid point of least error.
    pub best: Estimator,
    /// The anchor stream alone (w = 0).
    pub anchor_only: Estimator,
    /// The world-model stream alone (w = 1).
    pub world_model_only: Estimator,
    /// The least-error rule (`weights = "mse"`), its per-step weights.
    pub mse: Estimator,
    /// The paper's rule (`weights = "paper"`).
    pub paper: Estimator,
    /// Count weights (mode `wmrl-no-denoise`).
    pub counts: Estimator,
    /// `mse`'s error over the grid's least.
    pub mse_vs_best: Option<f64>,
    /// `paper`'s error over the grid's least.
    pub paper_vs_best: Option<f64>,
    /// `mse`'s error over the better single stream's.
    pub mse_vs_best_single: Option<f64>,
}

/// PPI's λ grid and the core's λ.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PpiTable {
    /// ĝ_A(r) + λ (ĝ_W(f̂₀) − ĝ_A(f̂₀)) at each λ of the grid.
    pub grid: Vec<Estimator>,
    /// The grid point of least error.
    pub best: Estimator,
    /// λ = 0: the anchors alone.
    pub lambda_zero: Estimator,
    /// The core's power-tuned λ, its per-step values.
    pub core: Estimator,
    /// The core's error over the grid's least.
    pub core_vs_best: Option<f64>,
    /// The core's error over λ = 0's.
    pub core_vs_zero: Option<f64>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Acc {
    sq: f64,
    along: f64,
    cos: f64,
    weight: f64,
    n: usize,
}

impl Acc {
    fn add(&mut self, p: &Products, a: f64, b: f64, gg: f64, weight: f64) {
        let (sq, along) = (p.squared_norm(a, b), p.along(a, b));
        self.sq += sq;
        self.along += along;
        let den = (sq * gg).sqrt();
        self.cos += if den > 0.0 { along / den } else { 0.0 };
        self.weight += weight;
        self.n += 1;
    }

    fn finish(&self, gg: f64) -> Estimator {
        let n = self.n.max(1) as f64;
        let (sq, along) = (self.sq / n, self.along / n);
        Estimator {
            weight: self.weight / n,
            error: (along > 0.0 && gg > 0.0).then(|| gg * sq / (along * along) - 1.0),
            cosine: self.cos / n,
            scale: if gg > 0.0 { along / gg } else { 0.0 },
        }
    }
}

/// Running sums of every estimator.
pub(crate) struct Tally {
    gg: f64,
    grid: Vec<f64>,
    fusion: Vec<Acc>,
    ppi: Vec<Acc>,
    rules: [Acc; 3],
    lambda: Acc,
}

fn least(points: &[Estimator]) -> Estimator {
    *points
        .iter()
        .min_by(|a, b| {
            a.error
                .unwrap_or(f64::INFINITY)
                .total_cmp(&b.error.unwrap_or(f64::INFINITY))
        })
        .expect("a non-empty grid")
}

impl Tally {
    pub(crate) fn new(truth: &[f64], grid: &[f64]) -> Self {
        Self {
            gg: dot(truth, truth),
            grid: grid.to_vec(),
            fusion: vec![Acc::default(); grid.len()],
            ppi: vec![Acc::default(); grid.len()],
            rules: [Acc::default(); 3],
            lambda: Acc::default(),
        }
    }

    pub(crate) fn draws(&self) -> usize {
        self.lambda.n
    }

    /// One draw: the fusion and PPI products, the rules' (u_A, u_W) (mse,
    /// paper, counts) and the core's λ.
    pub(crate) fn add(
        &mut self,
        fusion: &Products,
        ppi: &Products,
        rules: [(f64, f64); 3],
        lambda: f64,
    ) {
        let gg = self.gg;
        for (i, &w) in self.grid.iter().enumerate() {
            self.fusion[i].add(fusion, 1.0 - w, w, gg, w);
            self.ppi[i].add(ppi, 1.0, w, gg, w);
        }
        for (acc, (a, b)) in self.rules.iter_mut().zip(rules) {
            let share = if a + b > 0.0 { b / (a + b) } else { 0.0 };
            acc.add(fusion, a, b, gg, share);
        }
        self.lambda.add(ppi, 1.0, lambda, gg, lambda);
    }

    pub(crate) fn finish(&self) -> (FusionTable, PpiTable) {
        let gg = self.gg;
        let grid: Vec<Estimator> = self.fusion.iter().map(|a| a.finish(gg)).collect();
        let at = |points: &[Estimator], w: f64| {
            let i = self
                .grid
                .iter()
                .position(|&x| x == w)
                .expect("the grid holds 0 and 1");
            points[i]
        };
        let (anchor_only, world_model_only) = (at(&grid, 0.0), at(&grid, 1.0));
        let [mse, paper, counts] = self.rules.map(|a| a.finish(gg));
        let best = least(&grid);
        let best_single = match (anchor_only.error, world_model_only.error) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let fusion = FusionTable {
            best,
            anchor_only,
            world_model_only,
            mse_vs_best: ratio(mse.error, best.error),
            paper_vs_best: ratio(paper.error, best.error),
            mse_vs_best_single: ratio(mse.error, best_single),
            mse,
            paper,
            counts,
            grid,
        };
        let grid: Vec<Estimator> = self.ppi.iter().map(|a| a.finish(gg)).collect();
        let core = self.lambda.finish(gg);
        let best = least(&grid);
        let lambda_zero = at(&grid, 0.0);
        let ppi = PpiTable {
            best,
            lambda_zero,
            core_vs_best: ratio(core.error, best.error),
            core_vs_zero: ratio(core.error, lambda_zero.error),
            core,
            grid,
        };
        (fusion, ppi)
    }
}
