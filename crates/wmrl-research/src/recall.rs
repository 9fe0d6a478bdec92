//! Exact recall of executed solutions: the world model's memory.
//!
//! A solution's score is a function of its text (every rendered estimator
//! gets `random_state=0`, and the sandbox runs it on fixed data), so once a
//! solution has been executed for real its reward is known exactly. A world
//! model that went on predicting something else for it would be wrong by
//! construction. [`Recall`] wraps any [`TextScorer`] (the learned text model,
//! the LLM judge): a (task, text) pair it has seen executed is answered with
//! its mean observed reward, anything new goes to the scorer.
//!
//! What it remembers is only what this run has paid for: the anchor
//! executions passed to [`TextScorer::observe`], and the reference solutions
//! behind the leaderboards ([`Recall::remember`]), whose outcomes built the
//! task. It never reads the execution cache, which is shared across runs.
//!
//! The core treats recalled scores like any other world-model score: they
//! are calibrated, and the denoiser measures the world model's noise on the
//! anchors, which contain recalled solutions as often as the imagined groups
//! do (both are sampled from the same policy).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::adapter::TextScorer;
use crate::task::Task;
use crate::{Error, Result};

/// How often the memory answered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecallStats {
    /// Scores asked of the world model.
    pub queries: u64,
    /// Of those, answered from memory.
    pub hits: u64,
    /// Distinct (task, text) pairs remembered.
    pub remembered: usize,
}

/// A [`TextScorer`] that answers already-executed solutions with their real reward.
#[derive(Debug)]
pub struct Recall<S> {
    inner: S,
    enabled: bool,
    /// Per task id, per solution text: (sum of real rewards, executions).
    known: HashMap<String, HashMap<String, (f64, u32)>>,
    queries: u64,
    hits: u64,
}

impl<S> Recall<S> {
    /// Wraps `inner`; with `enabled` false every score comes from `inner`
    /// (the memory is still kept, so its statistics stay comparable).
    pub fn new(inner: S, enabled: bool) -> Self {
        Self {
            inner,
            enabled,
            known: HashMap::new(),
            queries: 0,
            hits: 0,
        }
    }

    /// The wrapped scorer.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Records a real outcome without passing it to the scorer (the
    /// reference solutions, which the scorer is pre-trained on separately).
    pub fn remember(&mut self, task: &str, text: &str, reward: f64) {
        let entry = self
            .known
            .entry(task.to_string())
            .or_default()
            .entry(text.to_string())
            .or_insert((0.0, 0));
        entry.0 += reward;
        entry.1 += 1;
    }

    /// The mean real reward of `text` on `task`, if it was executed.
    pub fn recall(&self, task: &str, text: &str) -> Option<f64> {
        self.known
            .get(task)?
            .get(text)
            .map(|&(sum, n)| sum / f64::from(n))
    }

    /// Queries, hits and memory size so far.
    pub fn stats(&self) -> RecallStats {
        RecallStats {
            queries: self.queries,
            hits: self.hits,
            remembered: self.known.values().map(HashMap::len).sum(),
        }
    }
}

impl<S: TextScorer> TextScorer for Recall<S> {
    fn score(&mut self, items: &[(&Task, &str)]) -> Result<Vec<f64>> {
        self.queries += items.len() as u64;
        let recalled: Vec<Option<f64>> = items
            .iter()
            .map(|(task, text)| {
                if self.enabled {
                    self.recall(task.id(), text)
                } else {
                    None
                }
            })
            .collect();
        let unknown: Vec<(&Task, &str)> = items
            .iter()
            .zip(&recalled)
            .filter(|(_, r)| r.is_none())
            .map(|(item, _)| *item)
            .collect();
        self.hits += (items.len() - unknown.len()) as u64;
        let predicted = if unknown.is_empty() {
            Vec::new()
        } else {
            self.inner.score(&unknown)?
        };
        if predicted.len() != unknown.len() {
            return Err(Error::Build {
                what: "world-model scores".into(),
                message: format!(
                    "the scorer returned {} scores for {} solutions",
                    predicted.len(),
                    unknown.len()
                ),
            });
        }
        let mut predicted = predicted.into_iter();
        Ok(recalled
            .into_iter()
            .map(|r| r.unwrap_or_else(|| predicted.next().expect("one score per unknown solution")))
            .collect())
    }

    fn observe(&mut self, items: &[(&Task, &str, f64)]) -> Result<()> {
        for (task, text, reward) in items {
            self.remember(task.id(), text, *reward);
        }
        self.inner.observe(items)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scores every text by its length and counts what it was asked.
    #[derive(Default)]
    struct LengthScorer {
        asked: Vec<String>,
        observed: usize,
    }

    impl TextScorer for LengthScorer {
        fn score(&mut self, items: &[(&Task, &str)]) -> Result<Vec<f64>> {
            self.asked.extend(items.iter().map(|(_, t)| t.to_string()));
            Ok(items.iter().map(|(_, t)| t.len() as f64 / 100.0).collect())
        }

        fn observe(&mut self, items: &[(&Task, &str, f64)]) -> Result<()> {
            self.observed += items.len();
            Ok(())
        }
    }

    #[test]
    fn executed_solutions_are_answered_with_their_mean_reward() {
        let task = Task::for_tests("wine");
        let mut recall = Recall::new(LengthScorer::default(), true);
        recall
            .observe(&[(&task, "fit(a)", 0.9), (&task, "fit(a)", 0.7)])
            .unwrap();
        assert_eq!(recall.inner().observed, 2, "the scorer still learns");
        let scores = recall
            .score(&[(&task, "fit(b)"), (&task, "fit(a)"), (&task, "fit(cc)")])
            .unwrap();
        assert!((scores[1] - 0.8).abs() < 1e-12, "{scores:?}");
        assert_eq!(scores[0], 0.06);
        assert_eq!(scores[2], 0.07);
        assert_eq!(recall.inner().asked, ["fit(b)", "fit(cc)"]);
        assert_eq!(
            recall.stats(),
            RecallStats {
                queries: 3,
                hits: 1,
                remembered: 1
            }
        );
    }

    #[test]
    fn memory_is_per_task_and_can_be_switched_off() {
        let task = Task::for_tests("wine");
        let other = Task::for_tests("digits");
        let mut recall = Recall::new(LengthScorer::default(), true);
        recall.remember(task.id(), "fit(a)", 0.9);
        assert_eq!(recall.recall(task.id(), "fit(a)"), Some(0.9));
        assert_eq!(recall.score(&[(&other, "fit(a)")]).unwrap(), [0.06]);

        let mut off = Recall::new(LengthScorer::default(), false);
        off.remember(task.id(), "fit(a)", 0.9);
        assert_eq!(off.score(&[(&task, "fit(a)")]).unwrap(), [0.06]);
        assert_eq!(off.stats().hits, 0);
        assert_eq!(off.stats().remembered, 1);
    }
}
