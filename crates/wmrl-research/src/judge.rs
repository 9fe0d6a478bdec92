//! An LLM judge as world model: an OpenAI-compatible endpoint estimates the
//! leaderboard percentile of a solution from its text.
//!
//! **Prompt.** System: [`SYSTEM_PROMPT`]. User: the task description, the
//! metric and its direction, the solution in a ```python block, and the
//! request to answer with JSON `{"percentile": P}`, P in [0, 100] (the share
//! of leaderboard entries it will beat). See [`prompt`].
//!
//! **Parsing** ([`parse_percentile`]): the first JSON object in the reply with
//! a numeric `percentile`; else the first number after the word
//! "percentile"; else the first number in the reply. Values in [0, 1] with a
//! `%`-free reply are read as they are on the 0–100 scale (a judge answering
//! 0.8 means 0.8 percent, not 80); values outside [0, 100] or non-finite are
//! malformed.
//!
//! **Malformed replies** are asked again once (same prompt, next seed); if the
//! reply is still malformed the score is `fallback` (default 0.5) and the
//! count of malformed replies grows ([`LlmJudge::malformed`]). The core's
//! calibrator then maps that constant like any other score.
//!
//! **Failures.** An endpoint that is down or slow is retried with back-off
//! (see [`crate::openai`]); when it still fails, the whole batch being scored
//! (task ids and solution texts) is appended to `pending_path` as JSONL
//! before the error is returned, so nothing is lost and the batch can be
//! scored later.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::adapter::TextScorer;
use crate::openai::{ChatClient, EndpointConfig, Message, parallel_map};
use crate::task::Task;
use crate::{Error, Result};

/// The judge's system prompt.
pub const SYSTEM_PROMPT: &str = "You are an expert machine-learning engineer. You judge Python solutions to \
tabular machine-learning tasks by how well they will rank on the task's leaderboard, without running them.";

/// Settings of the judge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct JudgeConfig {
    /// The endpoint (temperature 0 is sensible for a judge).
    pub endpoint: EndpointConfig,
    /// Score used for a reply that stays malformed (default: 0.5).
    pub fallback: f64,
    /// Where a batch that could not be scored is saved (default: `pending_judge_batches.jsonl`).
    pub pending_path: PathBuf,
}

impl Default for JudgeConfig {
    fn default() -> Self {
        Self {
            endpoint: EndpointConfig {
                temperature: 0.0,
                max_tokens: 64,
                ..EndpointConfig::default()
            },
            fallback: 0.5,
            pending_path: PathBuf::from("pending_judge_batches.jsonl"),
        }
    }
}

/// The user message for a solution.
pub fn prompt(task: &Task, solution: &str) -> String {
    format!(
        "Task description:\n{description}\n\nMetric: {metric} ({direction} is better).\n\n\
         Solution (solution.py):\n```python\n{solution}\n```\n\n\
         What share of the task's leaderboard will this solution beat? Reply with JSON only: \
         {{\"percentile\": P}} with P between 0 and 100.",
        description = task.description.trim(),
        metric = task.metric,
        direction = task.metric.direction().name(),
    )
}

/// Reads a percentile in [0, 100] from a reply (see the module docs); `None` if malformed.
pub fn parse_percentile(reply: &str) -> Option<f64> {
    let valid = |x: f64| (x.is_finite() && (0.0..=100.0).contains(&x)).then_some(x);
    // 1. A JSON object with a numeric "percentile".
    let mut start = 0;
    while let Some(open) = reply[start..].find('{') {
        let open = start + open;
        if let Some(close) = reply[open..].find('}')
            && let Ok(value) =
                serde_json::from_str::<serde_json::Value>(&reply[open..=open + close])
            && let Some(x) = value.get("percentile").and_then(serde_json::Value::as_f64)
        {
            return valid(x);
        }
        start = open + 1;
    }
    // 2. A number after "percentile", 3. any number.
    let lower = reply.to_lowercase();
    let after = lower
        .find("percentile")
        .map_or(0, |i| i + "percentile".len());
    first_number(&reply[after..])
        .or_else(|| first_number(reply))
        .and_then(valid)
}

fn first_number(text: &str) -> Option<f64> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_digit() {
            let mut j = i;
            while j < bytes.len() && (bytes[j].is_ascii_digit() || bytes[j] == b'.') {
                j += 1;
            }
            let negative = i > 0 && bytes[i - 1] == b'-';
            let x: f64 = text[i..j].trim_end_matches('.').parse().ok()?;
            return Some(if negative { -x } else { x });
        }
        i += 1;
    }
    None
}

/// The LLM judge.
#[derive(Debug)]
pub struct LlmJudge {
    config: JudgeConfig,
    client: ChatClient,
    malformed: AtomicU64,
    calls: AtomicU64,
}

impl LlmJudge {
    /// A judge over `config.endpoint`.
    pub fn new(config: JudgeConfig) -> Self {
        let client = ChatClient::new(config.endpoint.clone());
        Self {
            config,
            client,
            malformed: AtomicU64::new(0),
            calls: AtomicU64::new(0),
        }
    }

    /// Replies that stayed malformed (scored `fallback`).
    pub fn malformed(&self) -> u64 {
        self.malformed.load(Ordering::Relaxed)
    }

    /// Solutions scored.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    fn judge_one(&self, task: &Task, solution: &str, seed: u64) -> Result<f64> {
        let messages = [
            Message::system(SYSTEM_PROMPT),
            Message::user(prompt(task, solution)),
        ];
        for attempt in 0..2 {
            let reply = self.client.complete(&messages, Some(seed + attempt))?;
            if let Some(p) = parse_percentile(&reply) {
                return Ok(p / 100.0);
            }
            tracing::warn!(task = task.id(), reply = %reply.chars().take(120).collect::<String>(), "malformed judge reply");
        }
        self.malformed.fetch_add(1, Ordering::Relaxed);
        Ok(self.config.fallback)
    }

    fn save_pending(&self, items: &[(&Task, &str)], error: &Error) -> Result<()> {
        let mut sink = wmrl_report::MetricsSink::append(&self.config.pending_path)?;
        for (task, text) in items {
            sink.write(&serde_json::json!({"task": task.id(), "solution": text, "error": error.to_string()}))?;
        }
        Ok(())
    }
}

impl TextScorer for LlmJudge {
    fn score(&mut self, items: &[(&Task, &str)]) -> Result<Vec<f64>> {
        let seeded: Vec<(usize, &(&Task, &str))> = items.iter().enumerate().collect();
        let results = parallel_map(
            &seeded,
            self.config.endpoint.concurrency,
            |(i, (task, text))| self.judge_one(task, text, *i as u64 * 2),
        );
        self.calls.fetch_add(items.len() as u64, Ordering::Relaxed);
        let mut scores = Vec::with_capacity(items.len());
        for r in results {
            match r {
                Ok(s) => scores.push(s),
                Err(e) => {
                    self.save_pending(items, &e)?;
                    return Err(Error::Build {
                        what: "judge".into(),
                        message: format!(
                            "{e}; the batch of {} solutions was saved to {}",
                            items.len(),
                            self.config.pending_path.display()
                        ),
                    });
                }
            }
        }
        Ok(scores)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_parsed_from_json_text_or_rejected() {
        assert_eq!(parse_percentile("{\"percentile\": 73}"), Some(73.0));
        assert_eq!(
            parse_percentile("Sure! ```json\n{\"percentile\": 12.5}\n```"),
            Some(12.5)
        );
        assert_eq!(
            parse_percentile("I estimate the percentile at 40 (maybe 50)."),
            Some(40.0)
        );
        assert_eq!(parse_percentile("Around 64"), Some(64.0));
        assert_eq!(parse_percentile("{\"percentile\": 140}"), None);
        assert_eq!(parse_percentile("{\"percentile\": -3}"), None);
        assert_eq!(parse_percentile("percentile: -3"), None);
        assert_eq!(parse_percentile("no idea"), None);
    }
}
