//! Task metrics and their directions.
//!
//! - accuracy: share of exact label matches (higher is better);
//! - macro-F1: unweighted mean of F1 = 2·TP/(2·TP + FP + FN) over the classes
//!   present in truth or prediction (scikit-learn's `average="macro"`);
//! - ROC-AUC: probability that a random positive is ranked above a random
//!   negative (Mann–Whitney U / (n₊·n₋), ties count ½), from predicted
//!   probabilities of the positive class (higher is better);
//! - RMSE: √(mean (ŷ − y)²) and MAE: mean |ŷ − y| (lower is better).

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Whether larger scores are better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Direction {
    /// Larger is better (accuracy, F1, ROC-AUC).
    Higher,
    /// Smaller is better (errors).
    Lower,
}

impl Direction {
    /// The name used in task files.
    pub fn name(self) -> &'static str {
        match self {
            Direction::Higher => "higher",
            Direction::Lower => "lower",
        }
    }
}

/// What a submission's target column holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TargetKind {
    /// One of the task's class labels.
    Label,
    /// The probability, in [0, 1], of the positive (second) class.
    Probability,
    /// A real number.
    Value,
}

/// A task's metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Metric {
    /// Share of correct labels.
    Accuracy,
    /// Macro-averaged F1 over the classes present in truth or prediction.
    MacroF1,
    /// Area under the ROC curve (binary tasks).
    RocAuc,
    /// Root mean squared error.
    Rmse,
    /// Mean absolute error.
    Mae,
}

impl Metric {
    /// Every metric.
    pub const ALL: [Metric; 5] = [
        Metric::Accuracy,
        Metric::MacroF1,
        Metric::RocAuc,
        Metric::Rmse,
        Metric::Mae,
    ];

    /// The name used in task files.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Accuracy => "accuracy",
            Metric::MacroF1 => "macro-f1",
            Metric::RocAuc => "roc-auc",
            Metric::Rmse => "rmse",
            Metric::Mae => "mae",
        }
    }

    /// Whether larger is better.
    pub fn direction(self) -> Direction {
        match self {
            Metric::Accuracy | Metric::MacroF1 | Metric::RocAuc => Direction::Higher,
            Metric::Rmse | Metric::Mae => Direction::Lower,
        }
    }

    /// What submissions must hold.
    pub fn target_kind(self) -> TargetKind {
        match self {
            Metric::Accuracy | Metric::MacroF1 => TargetKind::Label,
            Metric::RocAuc => TargetKind::Probability,
            Metric::Rmse | Metric::Mae => TargetKind::Value,
        }
    }

    /// Scores predictions against truth (same order, same length, validated).
    /// Labels are compared as strings; probabilities and values as numbers;
    /// for ROC-AUC `truth` holds labels and `positive` names the positive class.
    pub fn score(self, truth: &[String], predicted: &[String], positive: Option<&str>) -> f64 {
        let num = |v: &[String]| -> Vec<f64> {
            v.iter()
                .map(|s| s.trim().parse().unwrap_or(f64::NAN))
                .collect()
        };
        match self {
            Metric::Accuracy => {
                let hits = truth
                    .iter()
                    .zip(predicted)
                    .filter(|(t, p)| t.trim() == p.trim())
                    .count();
                hits as f64 / truth.len().max(1) as f64
            }
            Metric::MacroF1 => macro_f1(truth, predicted),
            Metric::RocAuc => {
                let positive = positive.unwrap_or("1");
                let labels: Vec<bool> = truth.iter().map(|t| t.trim() == positive).collect();
                roc_auc(&labels, &num(predicted))
            }
            Metric::Rmse => {
                let (t, p) = (num(truth), num(predicted));
                let mse = t.iter().zip(&p).map(|(a, b)| (a - b).powi(2)).sum::<f64>()
                    / t.len().max(1) as f64;
                mse.sqrt()
            }
            Metric::Mae => {
                let (t, p) = (num(truth), num(predicted));
                t.iter().zip(&p).map(|(a, b)| (a - b).abs()).sum::<f64>() / t.len().max(1) as f64
            }
        }
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Metric {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Metric::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Metric::ALL.iter().map(|m| m.name()).collect();
                format!("unknown metric `{s}`; expected one of {}", names.join(", "))
            })
    }
}

fn macro_f1(truth: &[String], predicted: &[String]) -> f64 {
    let classes: BTreeSet<&str> = truth.iter().chain(predicted).map(|s| s.trim()).collect();
    if classes.is_empty() {
        return 0.0;
    }
    let mut total = 0.0;
    for class in &classes {
        let (mut tp, mut fp, mut fneg) = (0usize, 0usize, 0usize);
        for (t, p) in truth.iter().zip(predicted) {
            match (t.trim() == *class, p.trim() == *class) {
                (true, true) => tp += 1,
                (false, true) => fp += 1,
                (true, false) => fneg += 1,
                (false, false) => {}
            }
        }
        let denominator = 2 * tp + fp + fneg;
        total += if denominator == 0 {
            0.0
        } else {
            2.0 * tp as f64 / denominator as f64
        };
    }
    total / classes.len() as f64
}

/// ROC-AUC by ranks: (Σ ranks of positives − n₊(n₊+1)/2) / (n₊·n₋), average
/// ranks for ties. 0.5 when a class is missing.
pub fn roc_auc(labels: &[bool], scores: &[f64]) -> f64 {
    let n_pos = labels.iter().filter(|&&l| l).count();
    let n_neg = labels.len() - n_pos;
    if n_pos == 0 || n_neg == 0 {
        return 0.5;
    }
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]));
    let mut ranks = vec![0.0; scores.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && scores[order[j + 1]] == scores[order[i]] {
            j += 1;
        }
        let average = (i + j) as f64 / 2.0 + 1.0;
        for &k in &order[i..=j] {
            ranks[k] = average;
        }
        i = j + 1;
    }
    let rank_sum: f64 = labels
        .iter()
        .zip(&ranks)
        .filter(|(l, _)| **l)
        .map(|(_, r)| r)
        .sum();
    (rank_sum - (n_pos * (n_pos + 1)) as f64 / 2.0) / (n_pos as f64 * n_neg as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn metrics_match_hand_computed_values() {
        let t = s(&["0", "1", "1", "2"]);
        assert_eq!(
            Metric::Accuracy.score(&t, &s(&["0", "1", "2", "2"]), None),
            0.75
        );
        // Per class F1: 0 → 1, 1 → 2/3, 2 → 2/3.
        let f1 = Metric::MacroF1.score(&t, &s(&["0", "1", "2", "2"]), None);
        assert!((f1 - (1.0 + 2.0 / 3.0 + 2.0 / 3.0) / 3.0).abs() < 1e-12);
        let auc = Metric::RocAuc.score(
            &s(&["0", "0", "1", "1"]),
            &s(&["0.1", "0.4", "0.35", "0.8"]),
            Some("1"),
        );
        assert!((auc - 0.75).abs() < 1e-12);
        assert_eq!(roc_auc(&[false, true], &[0.5, 0.5]), 0.5);
        let rmse = Metric::Rmse.score(&s(&["1", "2"]), &s(&["2", "4"]), None);
        assert!((rmse - (2.5f64).sqrt()).abs() < 1e-12);
        assert_eq!(
            Metric::Mae.score(&s(&["1", "2"]), &s(&["2", "4"]), None),
            1.5
        );
    }

    #[test]
    fn names_round_trip_and_unknown_names_list_the_choices() {
        for m in Metric::ALL {
            assert_eq!(m.name().parse::<Metric>().unwrap(), m);
        }
        assert!("auc".parse::<Metric>().unwrap_err().contains("roc-auc"));
    }
}
