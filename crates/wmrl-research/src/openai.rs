//! A minimal client of the OpenAI-compatible chat-completions API
//! (`POST {base_url}/chat/completions`), as served by vLLM, SGLang,
//! llama.cpp's server and OpenAI itself, with retries.
//!
//! Request: `{"model", "messages": [{"role", "content"}…], "temperature",
//! "max_tokens", "seed"}`; the reply's `choices[0].message.content` is
//! returned. Connection failures, time-outs, HTTP 429 and 5xx are retried
//! with exponential back-off (`backoff_s · 2^k`, capped at `backoff_max_s`)
//! up to `retries` times, then reported as [`Error::Endpoint`] naming the URL,
//! the attempts and the last error. Other HTTP errors (400, 401, 404 …) are
//! reported at once: retrying cannot fix them.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// Where and how to reach an endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EndpointConfig {
    /// Base URL up to `/v1` (default: `http://127.0.0.1:8000/v1`).
    pub base_url: String,
    /// Model name sent with each request (default: `default`).
    pub model: String,
    /// Environment variable holding a bearer token, if any (default: `WMRL_API_KEY`).
    pub api_key_env: String,
    /// Time limit of one request in seconds (default: 120).
    pub timeout_s: f64,
    /// Retries after the first attempt (default: 4).
    pub retries: u32,
    /// First back-off in seconds (default: 0.5).
    pub backoff_s: f64,
    /// Largest back-off in seconds (default: 8).
    pub backoff_max_s: f64,
    /// Sampling temperature (default: 1.0).
    pub temperature: f64,
    /// Most tokens per reply (default: 2048).
    pub max_tokens: u32,
    /// Requests in flight at once (default: 8).
    pub concurrency: usize,
}

impl Default for EndpointConfig {
    fn default() -> Self {
        Self {
            base_url: "http://127.0.0.1:8000/v1".into(),
            model: "default".into(),
            api_key_env: "WMRL_API_KEY".into(),
            timeout_s: 120.0,
            retries: 4,
            backoff_s: 0.5,
            backoff_max_s: 8.0,
            temperature: 1.0,
            max_tokens: 2048,
            concurrency: 8,
        }
    }
}

/// One chat message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The text.
    pub content: String,
}

impl Message {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self {
            role: "system".into(),
            content: content.into(),
        }
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self {
            role: "user".into(),
            content: content.into(),
        }
    }
}

/// A blocking chat-completions client; cheap to clone and `Sync`.
#[derive(Debug, Clone)]
pub struct ChatClient {
    config: EndpointConfig,
    agent: ureq::Agent,
    url: String,
}

enum Failure {
    Retryable(String),
    Fatal(String),
}

impl ChatClient {
    /// A client for `config`.
    pub fn new(config: EndpointConfig) -> Self {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs_f64(config.timeout_s.max(0.001))))
            .http_status_as_error(false)
            .build()
            .into();
        let url = format!("{}/chat/completions", config.base_url.trim_end_matches('/'));
        Self { config, agent, url }
    }

    /// The configuration.
    pub fn config(&self) -> &EndpointConfig {
        &self.config
    }

    /// Sends `messages` and returns the reply text, retrying as the module docs say.
    pub fn complete(&self, messages: &[Message], seed: Option<u64>) -> Result<String> {
        let mut body = serde_json::json!({
            "model": self.config.model,
            "messages": messages,
            "temperature": self.config.temperature,
            "max_tokens": self.config.max_tokens,
        });
        if let Some(seed) = seed {
            body["seed"] = (seed & 0x7fff_ffff).into();
        }
        let body = body.to_string();
        let mut last = String::new();
        for attempt in 0..=self.config.retries {
            if attempt > 0 {
                let wait = (self.config.backoff_s * 2f64.powi(attempt as i32 - 1))
                    .min(self.config.backoff_max_s);
                tracing::warn!(url = %self.url, attempt, wait_s = wait, error = %last, "endpoint request failed; retrying");
                std::thread::sleep(Duration::from_secs_f64(wait.max(0.0)));
            }
            match self.attempt(&body) {
                Ok(text) => return Ok(text),
                Err(Failure::Retryable(e)) => last = e,
                Err(Failure::Fatal(e)) => {
                    return Err(Error::Endpoint {
                        url: self.url.clone(),
                        attempts: attempt + 1,
                        message: e,
                    });
                }
            }
        }
        Err(Error::Endpoint {
            url: self.url.clone(),
            attempts: self.config.retries + 1,
            message: last,
        })
    }

    fn attempt(&self, body: &str) -> std::result::Result<String, Failure> {
        let mut request = self
            .agent
            .post(&self.url)
            .header("Content-Type", "application/json");
        if let Ok(key) = std::env::var(&self.config.api_key_env) {
            request = request.header("Authorization", &format!("Bearer {key}"));
        }
        let mut response = request
            .send(body)
            .map_err(|e| Failure::Retryable(e.to_string()))?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .read_to_string()
            .map_err(|e| Failure::Retryable(e.to_string()))?;
        if status == 429 || status >= 500 {
            return Err(Failure::Retryable(format!(
                "HTTP {status}: {}",
                snippet(&text)
            )));
        }
        if status >= 400 {
            return Err(Failure::Fatal(format!("HTTP {status}: {}", snippet(&text))));
        }
        let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
            Failure::Retryable(format!("reply is not JSON ({e}): {}", snippet(&text)))
        })?;
        value["choices"][0]["message"]["content"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| {
                Failure::Retryable(format!(
                    "reply has no choices[0].message.content: {}",
                    snippet(&text)
                ))
            })
    }
}

fn snippet(text: &str) -> String {
    text.chars().take(200).collect()
}

/// Runs `f` over `items` on up to `concurrency` threads, results in order.
pub(crate) fn parallel_map<T: Sync, R: Send>(
    items: &[T],
    concurrency: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<R>>> =
        items.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..concurrency.clamp(1, items.len().max(1)) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if i >= items.len() {
                        break;
                    }
                    let r = f(&items[i]);
                    *results[i].lock().expect("result lock") = Some(r);
                }
            });
        }
    });
    results
        .into_iter()
        .map(|m| {
            m.into_inner()
                .expect("result lock")
                .expect("every item ran")
        })
        .collect()
}
