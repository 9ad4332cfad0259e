//! The chat-completions client.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use crate::{
    excerpt, extract_json, LlmConfig, LlmError, Message, Phase, ResponseCache, Usage, UsageTable,
};

/// One call: the messages, and the JSON schema the reply must follow.
#[derive(Debug, Clone, Copy)]
pub struct JsonRequest<'a> {
    /// What the call is for.
    pub phase: Phase,
    /// The conversation.
    pub messages: &'a [Message],
    /// The schema's name (letters, digits, `_` and `-`, as the API wants).
    pub schema_name: &'a str,
    /// The JSON schema of the reply (an object).
    pub schema: &'a Value,
    /// The most tokens the reply may have: a bound on a small model that never closes its
    /// object, as much as on cost. Part of the cache key.
    pub max_tokens: u32,
}

/// An OpenAI-compatible client (see the crate documentation).
pub struct Client {
    config: LlmConfig,
    url: String,
    agent: ureq::Agent,
    cache: Option<Arc<dyn ResponseCache>>,
    slots: Slots,
    /// Set once the server has refused a JSON schema: JSON mode from then on.
    json_mode: AtomicBool,
    usage: Mutex<UsageTable>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("config", &self.config)
            .field("cache", &self.cache.is_some())
            .finish_non_exhaustive()
    }
}

/// A counting semaphore: the requests in flight.
struct Slots {
    free: Mutex<usize>,
    freed: Condvar,
}

impl Slots {
    fn acquire(&self) -> SlotGuard<'_> {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        while *free == 0 {
            free = self.freed.wait(free).unwrap_or_else(|e| e.into_inner());
        }
        *free -= 1;
        SlotGuard(self)
    }
}

struct SlotGuard<'a>(&'a Slots);

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        self.0.freed.notify_one();
    }
}

/// What one request gave.
enum Attempt {
    /// The reply's message text and its token counts.
    Reply(String, u64, u64),
    /// The server refused the schema-constrained request.
    SchemaRefused,
    /// Worth another try after the wait (the server's `Retry-After`, if any).
    Retry(LlmError, Option<Duration>),
    /// Final.
    Fail(LlmError),
}

impl Client {
    /// A client for `config`, keeping responses in `cache` when one is given.
    pub fn new(config: LlmConfig, cache: Option<Arc<dyn ResponseCache>>) -> Self {
        let url = format!("{}/chat/completions", config.base_url.trim_end_matches('/'));
        let agent = ureq::AgentBuilder::new().timeout(config.timeout).build();
        let slots = Slots {
            free: Mutex::new(config.concurrency.max(1)),
            freed: Condvar::new(),
        };
        Client {
            config,
            url,
            agent,
            cache,
            slots,
            json_mode: AtomicBool::new(false),
            usage: Mutex::new(UsageTable::new()),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &LlmConfig {
        &self.config
    }

    /// The calls made so far, per phase.
    pub fn usage(&self) -> UsageTable {
        self.usage.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn count(&self, phase: Phase, f: impl FnOnce(&mut Usage)) {
        let mut usage = self.usage.lock().unwrap_or_else(|e| e.into_inner());
        f(usage.entry(phase).or_default());
    }

    /// The cache key of a request: a digest of the model, the messages and the schema (never
    /// the key or the URL, so that a memory rebuilt elsewhere reads the same responses).
    pub fn cache_key(&self, request: &JsonRequest<'_>) -> String {
        let identity = json!([
            self.config.model,
            request.messages,
            request.schema_name,
            request.schema,
            request.max_tokens.min(self.config.max_tokens)
        ]);
        hex::encode(Sha256::digest(identity.to_string().as_bytes()))
    }

    /// Asks for one JSON object following `request.schema`: from the cache when it has the
    /// reply, else from the server (retried on 429, 5xx and transport failures). Every reply the
    /// server completes is cached, usable or not: a rerun replays it and reaches the same
    /// result, a reply that is no JSON object being [`LlmError::BadOutput`] again (a request
    /// that got no reply is asked again). The caller validates the object's content.
    pub fn json(&self, request: &JsonRequest<'_>) -> Result<Map<String, Value>, LlmError> {
        let key = self.cache_key(request);
        let cached = self.cache.as_ref().and_then(|c| c.get(&key));
        let reply = match cached {
            Some(reply) => {
                self.count(request.phase, |u| u.cached += 1);
                Ok(reply)
            }
            None => self.ask(request).inspect(|reply| {
                if let Some(cache) = &self.cache {
                    // A cache that cannot be written costs a rerun its savings, not this call.
                    let _ = cache.put(&key, &self.config.model, reply);
                }
            }),
        };
        let object = reply.and_then(|reply| {
            extract_json(&reply).map_err(|reason| LlmError::BadOutput {
                reason,
                excerpt: excerpt(&reply, 200),
            })
        });
        if object.is_err() {
            self.count(request.phase, |u| u.failed += 1);
        }
        object
    }

    /// The reply's message text, retried as configured.
    fn ask(&self, request: &JsonRequest<'_>) -> Result<String, LlmError> {
        let _slot = self.slots.acquire();
        let mut wait = self.config.backoff;
        let mut retries = 0;
        loop {
            let json_mode = self.json_mode.load(Ordering::Relaxed);
            self.count(request.phase, |u| u.requests += 1);
            match self.attempt(request, json_mode) {
                Attempt::Reply(text, prompt, completion) => {
                    self.count(request.phase, |u| {
                        u.prompt_tokens += prompt;
                        u.completion_tokens += completion;
                    });
                    return Ok(text);
                }
                Attempt::SchemaRefused if !json_mode => {
                    self.json_mode.store(true, Ordering::Relaxed);
                }
                Attempt::SchemaRefused => unreachable!("JSON mode sends no schema"),
                Attempt::Retry(e, after) => {
                    if retries >= self.config.retries {
                        return Err(e);
                    }
                    retries += 1;
                    std::thread::sleep(after.unwrap_or(wait).min(LlmConfig::MAX_BACKOFF));
                    wait = (wait * 2).min(LlmConfig::MAX_BACKOFF);
                }
                Attempt::Fail(e) => return Err(e),
            }
        }
    }

    /// The request body: the schema as a structured-output format, or (JSON mode) the schema
    /// told in a last system message.
    fn body(&self, request: &JsonRequest<'_>, json_mode: bool) -> Value {
        let mut messages: Vec<Value> = request
            .messages
            .iter()
            .map(|m| json!({"role": m.role, "content": m.content}))
            .collect();
        let format = if json_mode {
            messages.push(json!({
                "role": "system",
                "content": format!(
                    "Reply with one JSON object and nothing else. It must follow this JSON schema:\n{}",
                    request.schema
                ),
            }));
            // Servers that constrain JSON mode by a schema (llama.cpp's) read it here; others
            // ignore the field and have the schema in the prompt.
            json!({"type": "json_object", "schema": request.schema})
        } else {
            json!({
                "type": "json_schema",
                "json_schema": {"name": request.schema_name, "schema": request.schema, "strict": true},
            })
        };
        json!({
            "model": self.config.model,
            "messages": messages,
            "temperature": 0,
            "max_tokens": request.max_tokens.min(self.config.max_tokens),
            "response_format": format,
        })
    }

    fn attempt(&self, request: &JsonRequest<'_>, json_mode: bool) -> Attempt {
        let mut http = self
            .agent
            .post(&self.url)
            .set("Content-Type", "application/json");
        if let Some(key) = &self.config.api_key {
            http = http.set("Authorization", &format!("Bearer {}", key.expose()));
        }
        let unavailable = |reason: String| LlmError::Unavailable {
            url: self.url.clone(),
            reason,
        };
        match http.send_string(&self.body(request, json_mode).to_string()) {
            Ok(response) => match response.into_string() {
                Ok(text) => read_completion(&text),
                Err(e) => Attempt::Retry(unavailable(format!("reading the reply: {e}")), None),
            },
            Err(ureq::Error::Status(status, response)) => {
                let after = response
                    .header("Retry-After")
                    .and_then(|v| v.trim().parse::<f64>().ok())
                    .filter(|s| s.is_finite() && *s >= 0.0)
                    .map(Duration::from_secs_f64);
                let body = response.into_string().unwrap_or_default();
                // Servers refuse an unknown response format with 400 or 422, and some (the
                // llama-cpp-python server) with a 500 that names the field.
                let refused_schema = matches!(status, 400 | 422 | 500)
                    && !json_mode
                    && ["response_format", "json_schema"]
                        .iter()
                        .any(|w| body.contains(w));
                let error = LlmError::Status {
                    url: self.url.clone(),
                    status,
                    body: excerpt(&body, 300),
                };
                if refused_schema {
                    Attempt::SchemaRefused
                } else if status == 429 || status >= 500 {
                    Attempt::Retry(error, after)
                } else {
                    Attempt::Fail(error)
                }
            }
            Err(ureq::Error::Transport(t)) => Attempt::Retry(unavailable(t.to_string()), None),
        }
    }
}

/// The message text and token counts of a chat-completion body.
fn read_completion(text: &str) -> Attempt {
    let bad = |reason: &str| {
        Attempt::Fail(LlmError::BadOutput {
            reason: reason.into(),
            excerpt: excerpt(text, 200),
        })
    };
    let Ok(body) = serde_json::from_str::<Value>(text) else {
        return bad("the server's reply is not JSON");
    };
    let Some(content) = body
        .pointer("/choices/0/message/content")
        .and_then(Value::as_str)
    else {
        return bad("the reply has no choices[0].message.content");
    };
    let tokens = |field: &str| {
        body.pointer(&format!("/usage/{field}"))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    Attempt::Reply(
        content.to_string(),
        tokens("prompt_tokens"),
        tokens("completion_tokens"),
    )
}
