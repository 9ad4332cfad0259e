//! An OpenAI-compatible chat client for the model-driven path: one JSON object per call, asked
//! for with a JSON schema (structured outputs) and, when a server lacks those, with JSON mode and
//! the schema in the prompt, read back by a tolerant parser. Calls are retried with backoff on
//! 429, 5xx and transport failures, bounded by a timeout and a concurrency limit, answered from a
//! response cache when the same (model, messages, schema) was asked before, and counted per
//! phase (calls, cache hits, tokens).
//!
//! The API key is held in an [`ApiKey`], which never prints: it is not part of any cache key,
//! error or log line.

mod client;
mod parse;

pub use client::{Client, JsonRequest};
pub use parse::extract_json;

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::Serialize;

/// The environment variable of the endpoint's base URL (for example `http://127.0.0.1:8080/v1`).
pub const ENV_BASE_URL: &str = "TRAJWIKI_LLM_BASE_URL";
/// The environment variable of the model name sent with every request.
pub const ENV_MODEL: &str = "TRAJWIKI_LLM_MODEL";
/// The environment variable of the API key (sent as a bearer token, never stored or printed).
pub const ENV_API_KEY: &str = "TRAJWIKI_LLM_API_KEY";

/// An API key: sent in the `Authorization` header and nowhere else.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        ApiKey(key.into())
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// Where and how to reach a model.
#[derive(Debug, Clone)]
pub struct LlmConfig {
    /// The base URL, up to and including `/v1` (`/chat/completions` is appended).
    pub base_url: String,
    /// The model name.
    pub model: String,
    /// The API key, if the server wants one.
    pub api_key: Option<ApiKey>,
    /// The longest a request may take, connecting included.
    pub timeout: Duration,
    /// Retries after a 429, a 5xx or a transport failure (timeouts included).
    pub retries: u32,
    /// The first backoff; each retry doubles it (a `Retry-After` header is used instead when
    /// the server sends one), up to [`LlmConfig::MAX_BACKOFF`].
    pub backoff: Duration,
    /// Requests in flight at once, over every thread using the client.
    pub concurrency: usize,
    /// The most tokens any reply may have (each request sets its own bound under it).
    pub max_tokens: u32,
}

impl LlmConfig {
    /// The longest wait between two attempts.
    pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

    /// A configuration with the defaults: 60 s timeout, 3 retries from 0.5 s, 4 requests at
    /// once, at most 2,048 tokens a reply.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        LlmConfig {
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
            timeout: Duration::from_secs(60),
            retries: 3,
            backoff: Duration::from_millis(500),
            concurrency: 4,
            max_tokens: 2048,
        }
    }

    /// The configuration the environment gives ([`ENV_BASE_URL`], [`ENV_MODEL`], [`ENV_API_KEY`]),
    /// or `None` when the base URL or the model is unset or empty.
    pub fn from_env() -> Option<Self> {
        let get = |name| {
            std::env::var(name)
                .ok()
                .filter(|v: &String| !v.trim().is_empty())
        };
        let mut config = LlmConfig::new(get(ENV_BASE_URL)?, get(ENV_MODEL)?);
        config.api_key = get(ENV_API_KEY).map(ApiKey::new);
        Some(config)
    }
}

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Message {
    /// `system`, `user` or `assistant`.
    pub role: &'static str,
    /// The text.
    pub content: String,
}

impl Message {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Message {
            role: "system",
            content: content.into(),
        }
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Message {
            role: "user",
            content: content.into(),
        }
    }

    /// An assistant message (a previous reply, shown to the model with a correction).
    pub fn assistant(content: impl Into<String>) -> Self {
        Message {
            role: "assistant",
            content: content.into(),
        }
    }
}

/// What a call is for, as the cost table counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Building the memory: extraction, matching, transitions, pages.
    Construction,
    /// Query-time help: reflection, reranking.
    Retrieval,
    /// Answering a question.
    Answer,
    /// A second try after invalid output.
    Repair,
    /// Judging an answer against the gold one.
    Judge,
    /// Compiling an agent run.
    Compilation,
}

/// The calls of one phase.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    /// Requests sent (retries included).
    pub requests: u64,
    /// Calls answered from the cache, without a request.
    pub cached: u64,
    /// Prompt tokens, as the server reported them.
    pub prompt_tokens: u64,
    /// Completion tokens, as the server reported them.
    pub completion_tokens: u64,
    /// Calls that ended in an error.
    pub failed: u64,
}

/// Usage per phase.
pub type UsageTable = BTreeMap<Phase, Usage>;

/// Where responses are kept between runs: a rerun of the same calls is answered from it.
pub trait ResponseCache: Send + Sync {
    /// The response stored under `key`.
    fn get(&self, key: &str) -> Option<String>;
    /// Stores `response` under `key` (a response already there stays).
    fn put(&self, key: &str, model: &str, response: &str) -> Result<(), String>;
}

/// Why a call gave no usable object.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// The server could not be reached (or kept failing) within the retries.
    #[error("the model server at {url} is unavailable: {reason}")]
    Unavailable {
        /// The URL asked.
        url: String,
        /// The last failure.
        reason: String,
    },
    /// The server answered with an error status.
    #[error("the model server at {url} answered {status}: {body}")]
    Status {
        /// The URL asked.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The start of the body.
        body: String,
    },
    /// The reply was not a chat completion, or its message held no JSON object.
    #[error("the model's reply is not usable: {reason} (reply starts: {excerpt})")]
    BadOutput {
        /// What is wrong.
        reason: String,
        /// The start of the reply.
        excerpt: String,
    },
}

/// The first `n` characters of `s`, with an ellipsis when cut.
pub(crate) fn excerpt(s: &str, n: usize) -> String {
    let mut out: String = s.chars().take(n).collect();
    if s.chars().nth(n).is_some() {
        out.push('…');
    }
    out
}
