//! Leaderboards: reference scores of a task, and the map from a score to a
//! leaderboard percentile (the reward).
//!
//! With the N entries' scores turned into "goodness" g (the score when higher
//! is better, its negation otherwise) and sorted, g₍₁₎ ≤ … ≤ g₍N₎, entry k sits
//! at percentile p_k = (k − 1)/(N − 1): the share of the *other* entries it
//! beats. Entries with equal scores share the mean of their p_k (ties count
//! half). A score s is mapped to
//!
//! - 0 below the worst entry and 1 above the best;
//! - p_k at an entry's score;
//! - linear interpolation between neighbouring distinct entries.
//!
//! So the reward is continuous and monotone in the score, 0 for the worst
//! reference and 1 for matching the best; a Kaggle-style step percentile would
//! give GRPO groups many exact ties.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::metric::Direction;
use crate::{Error, Result};

/// One reference entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Who (which reference solution) made the score.
    pub name: String,
    /// Its score on the hidden answers.
    pub score: f64,
}

/// A task's leaderboard.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Leaderboard {
    /// The entries, best first.
    pub entries: Vec<Entry>,
    /// Direction of the task's metric.
    pub direction: Direction,
}

impl Leaderboard {
    /// A leaderboard from entries in any order (sorted best first).
    pub fn new(mut entries: Vec<Entry>, direction: Direction) -> Self {
        let sign = if direction == Direction::Higher {
            -1.0
        } else {
            1.0
        };
        entries.sort_by(|a, b| (sign * a.score).total_cmp(&(sign * b.score)));
        Self { entries, direction }
    }

    /// Reads `name,score` rows (header required).
    pub fn load(path: &Path, direction: Direction) -> Result<Self> {
        let mut reader = csv::Reader::from_path(path).map_err(|e| Error::csv(path, e))?;
        let headers = reader.headers().map_err(|e| Error::csv(path, e))?.clone();
        if headers.iter().collect::<Vec<_>>() != ["name", "score"] {
            return Err(Error::BadFile {
                path: path.to_path_buf(),
                line: 1,
                message: format!(
                    "header is `{}`; expected `name,score`",
                    headers.iter().collect::<Vec<_>>().join(",")
                ),
            });
        }
        let mut entries = Vec::new();
        for (i, record) in reader.records().enumerate() {
            let record = record.map_err(|e| Error::csv(path, e))?;
            let line = i + 2;
            let score: f64 =
                record
                    .get(1)
                    .unwrap_or("")
                    .trim()
                    .parse()
                    .map_err(|_| Error::BadFile {
                        path: path.to_path_buf(),
                        line,
                        message: format!("score `{}` is not a number", record.get(1).unwrap_or("")),
                    })?;
            if !score.is_finite() {
                return Err(Error::BadFile {
                    path: path.to_path_buf(),
                    line,
                    message: "score is not finite".into(),
                });
            }
            entries.push(Entry {
                name: record.get(0).unwrap_or("").to_string(),
                score,
            });
        }
        if entries.len() < 2 {
            return Err(Error::BadFile {
                path: path.to_path_buf(),
                line: 1,
                message: format!("{} entries; a leaderboard needs at least 2", entries.len()),
            });
        }
        Ok(Self::new(entries, direction))
    }

    /// Writes `name,score` rows, best first, atomically.
    pub fn save(&self, path: &Path) -> Result<()> {
        let mut text = String::from("name,score\n");
        for e in &self.entries {
            text.push_str(&format!("{},{}\n", e.name.replace(',', ";"), e.score));
        }
        wmrl_report::write_atomic(path, text.as_bytes()).map_err(Error::from)
    }

    fn goodness(&self, score: f64) -> f64 {
        if self.direction == Direction::Higher {
            score
        } else {
            -score
        }
    }

    /// The percentile in [0, 1] of `score` (see the module docs); NaN maps to 0.
    pub fn percentile(&self, score: f64) -> f64 {
        if !score.is_finite() || self.entries.is_empty() {
            return 0.0;
        }
        let n = self.entries.len();
        if n == 1 {
            return if self.goodness(score) >= self.goodness(self.entries[0].score) {
                1.0
            } else {
                0.0
            };
        }
        let mut g: Vec<f64> = self
            .entries
            .iter()
            .map(|e| self.goodness(e.score))
            .collect();
        g.sort_by(f64::total_cmp);
        // Distinct goodness values with the mean rank percentile of their ties.
        let mut points: Vec<(f64, f64)> = Vec::new();
        let mut i = 0;
        while i < n {
            let mut j = i;
            while j + 1 < n && g[j + 1] == g[i] {
                j += 1;
            }
            let p = ((i + j) as f64 / 2.0) / (n - 1) as f64;
            points.push((g[i], p));
            i = j + 1;
        }
        let x = self.goodness(score);
        let (first, last) = (points[0], points[points.len() - 1]);
        if x <= first.0 {
            return if x == first.0 { first.1 } else { 0.0 };
        }
        if x >= last.0 {
            return if x == last.0 { last.1 } else { 1.0 };
        }
        let k = points.partition_point(|&(gx, _)| gx <= x);
        let (lo, hi) = (points[k - 1], points[k]);
        lo.1 + (hi.1 - lo.1) * (x - lo.0) / (hi.0 - lo.0)
    }

    /// The best reference score.
    pub fn best(&self) -> Option<f64> {
        self.entries.first().map(|e| e.score)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn board(scores: &[f64], direction: Direction) -> Leaderboard {
        Leaderboard::new(
            scores
                .iter()
                .enumerate()
                .map(|(i, &score)| Entry {
                    name: format!("r{i}"),
                    score,
                })
                .collect(),
            direction,
        )
    }

    #[test]
    fn percentile_interpolates_between_entries() {
        let b = board(&[0.5, 0.7, 0.9], Direction::Higher);
        assert_eq!(b.percentile(0.4), 0.0);
        assert_eq!(b.percentile(0.5), 0.0);
        assert_eq!(b.percentile(0.7), 0.5);
        assert!((b.percentile(0.8) - 0.75).abs() < 1e-12);
        assert_eq!(b.percentile(0.9), 1.0);
        assert_eq!(b.percentile(0.95), 1.0);
        assert_eq!(b.percentile(f64::NAN), 0.0);
        assert_eq!(b.entries[0].score, 0.9);
    }

    #[test]
    fn lower_is_better_and_ties_share_their_rank() {
        let b = board(&[10.0, 20.0, 20.0, 30.0], Direction::Lower);
        assert_eq!(b.percentile(30.0), 0.0);
        assert_eq!(b.percentile(20.0), 0.5);
        assert_eq!(b.percentile(5.0), 1.0);
        assert!(b.percentile(25.0) > 0.0 && b.percentile(25.0) < 0.5);
        assert_eq!(b.best(), Some(10.0));
    }

    #[test]
    fn percentile_is_monotone() {
        let b = board(&[0.1, 0.3, 0.3, 0.35, 0.8, 0.81], Direction::Higher);
        let mut last = -1.0;
        for i in 0..=100 {
            let p = b.percentile(i as f64 / 100.0);
            assert!(p >= last && (0.0..=1.0).contains(&p));
            last = p;
        }
    }
}
