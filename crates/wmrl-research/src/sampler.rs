//! A real LLM as the policy, through an OpenAI-compatible endpoint: it writes
//! solutions; the core turns them into a GRPO batch; the batch is exported as
//! JSONL for an external trainer (TRL, OpenRLHF, verl …) to take the gradient
//! step on the LLM's weights.
//!
//! **Prompt** ([`solution_prompt`]): the task description and the request for
//! a complete `solution.py` in one ```python block. **Parsing**
//! ([`extract_code`]): the last ```python (or plain ```) block of the reply,
//! else the whole reply. A reply without usable code simply fails in the
//! sandbox (reward 0) — that is the policy's problem, not the pipeline's.
//!
//! **Export**, one JSON object per line per rollout, after every step:
//! `{"step", "group", "sample", "task", "prompt", "completion", "solution",
//! "reward", "advantage", "stream", "weight"}`, where `reward` is the value
//! the advantage was computed from (r for anchors, f̂(ŝ) or ŝ for world-model
//! samples), `stream` is `anchor` or `world-model` and `weight` the core's loss
//! weight (stream weight included): the external trainer minimises
//! Σ weight · clipped-surrogate(advantage).
//!
//! When the endpoint stays down, the requests not yet answered are written to
//! `<export>.pending.jsonl` (task, seed, prompt) before the error is returned.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use wmrl_core::seams::{Batch, Policy};

use crate::adapter::{ResearchAdapter, Solution, SolutionSampler, TaskPrompt};
use crate::openai::{ChatClient, EndpointConfig, Message, parallel_map};
use crate::task::Task;
use crate::{Error, Result};

/// System prompt of the solution writer.
pub const SYSTEM_PROMPT: &str = "You are an expert machine-learning engineer. You write complete, \
self-contained Python programs that solve tabular machine-learning tasks with numpy and scikit-learn.";

/// The user message asking for a solution to `task`.
pub fn solution_prompt(task: &Task) -> String {
    format!(
        "{}\n\nWrite the complete solution.py. Reply with one ```python code block.",
        task.description.trim()
    )
}

/// The program in a reply (see the module docs).
pub fn extract_code(reply: &str) -> String {
    let mut best: Option<&str> = None;
    let mut rest = reply;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        let body_start = after.find('\n').map_or(after.len(), |i| i + 1);
        let body = &after[body_start..];
        match body.find("```") {
            Some(close) => {
                best = Some(&body[..close]);
                rest = &body[close + 3..];
            }
            None => break,
        }
    }
    best.unwrap_or(reply).trim().to_string() + "\n"
}

/// One exported rollout.
#[derive(Debug, Clone, Serialize)]
pub struct ExportRow<'a> {
    /// Training step.
    pub step: u64,
    /// Group within the step.
    pub group: usize,
    /// Sample within the group.
    pub sample: usize,
    /// Task id.
    pub task: &'a str,
    /// The user prompt sent.
    pub prompt: &'a str,
    /// The raw completion.
    pub completion: &'a str,
    /// The program extracted from it.
    pub solution: &'a str,
    /// Reward the advantage came from.
    pub reward: f64,
    /// GRPO advantage.
    pub advantage: f64,
    /// `anchor` or `world-model`.
    pub stream: &'static str,
    /// Loss weight.
    pub weight: f64,
}

/// The endpoint policy.
#[derive(Debug)]
pub struct EndpointPolicy {
    client: ChatClient,
    export: PathBuf,
    tasks: Arc<Vec<Arc<Task>>>,
}

impl EndpointPolicy {
    /// A policy sampling from `endpoint` for the adapter's tasks, exporting
    /// batches to `export` (JSONL, appended).
    pub fn new(endpoint: EndpointConfig, export: &Path, adapter: &ResearchAdapter) -> Self {
        Self {
            client: ChatClient::new(endpoint),
            export: export.to_path_buf(),
            tasks: adapter.tasks().clone(),
        }
    }

    fn pending_path(&self) -> PathBuf {
        let mut name = self.export.file_name().unwrap_or_default().to_os_string();
        name.push(".pending.jsonl");
        self.export.with_file_name(name)
    }
}

impl SolutionSampler for EndpointPolicy {
    fn sample(&self, tasks: &[Arc<Task>], task: usize, seed: u64) -> Result<Solution> {
        Ok(self.sample_many(tasks, &[(task, seed)])?.remove(0))
    }

    fn sample_many(&self, tasks: &[Arc<Task>], requests: &[(usize, u64)]) -> Result<Vec<Solution>> {
        let replies = parallel_map(
            requests,
            self.client.config().concurrency,
            |&(task, seed)| {
                let prompt = solution_prompt(&tasks[task]);
                let reply = self.client.complete(
                    &[
                        Message::system(SYSTEM_PROMPT),
                        Message::user(prompt.clone()),
                    ],
                    Some(seed),
                );
                (prompt, reply)
            },
        );
        let mut out = Vec::with_capacity(requests.len());
        let mut failed: Option<Error> = None;
        let mut pending = Vec::new();
        for (&(task, seed), (prompt, reply)) in requests.iter().zip(replies) {
            match reply {
                Ok(completion) => out.push(Solution {
                    task,
                    text: extract_code(&completion),
                    plan: None,
                    actions: None,
                    log_prob: 0.0,
                    prompt: Some(prompt),
                    completion: Some(completion),
                }),
                Err(e) => {
                    pending.push(serde_json::json!({"task": tasks[task].id(), "seed": seed, "prompt": prompt}));
                    failed.get_or_insert(e);
                }
            }
        }
        if let Some(e) = failed {
            let path = self.pending_path();
            let mut sink = wmrl_report::MetricsSink::append(&path)?;
            for row in &pending {
                sink.write(row)?;
            }
            return Err(Error::Build {
                what: "endpoint policy".into(),
                message: format!(
                    "{e}; {} unanswered requests saved to {}",
                    pending.len(),
                    path.display()
                ),
            });
        }
        Ok(out)
    }
}

impl Policy<ResearchAdapter> for EndpointPolicy {
    type Error = Error;

    fn learn(&mut self, batch: Batch<TaskPrompt, Solution>) -> Result<()> {
        let mut sink = wmrl_report::MetricsSink::append(&self.export)?;
        for s in &batch.samples {
            let rollout = &s.rollout;
            let row = ExportRow {
                step: batch.step,
                group: s.signal.group,
                sample: s.signal.sample,
                task: self.tasks[rollout.task].id(),
                prompt: rollout.prompt.as_deref().unwrap_or(""),
                completion: rollout.completion.as_deref().unwrap_or(""),
                solution: &rollout.text,
                reward: s.signal.reward,
                advantage: s.signal.advantage,
                stream: match s.signal.stream {
                    wmrl_core::Stream::Anchor => "anchor",
                    _ => "world-model",
                },
                weight: s.signal.loss_weight,
            };
            sink.write(&row)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_is_extracted_from_the_last_block() {
        let reply = "Here:\n```python\nprint(1)\n```\nand better:\n```python\nprint(2)\n```\nDone.";
        assert_eq!(extract_code(reply), "print(2)\n");
        assert_eq!(extract_code("```\nx = 1\n```"), "x = 1\n");
        assert_eq!(extract_code("import os"), "import os\n");
    }
}
