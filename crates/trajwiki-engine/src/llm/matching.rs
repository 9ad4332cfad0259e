//! The model-driven trajectory match (SPEC §2): a language model reads a new snapshot's summary
//! and the summaries of its best three candidate trajectories and says which one it continues,
//! or NEW. Its choice is a hint: an answer outside the candidates shown, or any failure, leaves
//! the decision to the deterministic decider (counted in [`LlmDecider::fallbacks`]).

use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{json, Value};
use trajwiki_llm::{Client, JsonRequest, Message, Phase};
use trajwiki_memory::matcher::{Features, MatchScore};
use trajwiki_memory::{DeterministicDecider, MatchDecider, MemoryConfig};

/// Candidates shown to the model.
const SHOWN: usize = 3;

/// The most tokens a choice may have.
const CHOICE_TOKENS: u32 = 150;

const INSTRUCTIONS: &str = "You keep a memory of a conversation as threads of related \
exchanges. A new exchange arrives; say which thread it continues (its number), or NEW when it \
starts a topic of its own. Continue a thread only when the exchange is about the same subject \
(the same event, plan, person or thing).";

/// A [`MatchDecider`] asking a language model, the deterministic decider behind it.
pub struct LlmDecider<'a> {
    client: &'a Client,
    fallback: DeterministicDecider,
    name: String,
    fallbacks: AtomicUsize,
}

impl<'a> LlmDecider<'a> {
    /// A decider asking `client`'s model, with the construction constants `config`.
    pub fn new(client: &'a Client, config: MemoryConfig) -> Self {
        LlmDecider {
            client,
            fallback: DeterministicDecider::new(config),
            name: format!("llm:{}", client.config().model),
            fallbacks: AtomicUsize::new(0),
        }
    }

    /// Decisions left to the deterministic decider.
    pub fn fallbacks(&self) -> usize {
        self.fallbacks.load(Ordering::Relaxed)
    }
}

impl MatchDecider for LlmDecider<'_> {
    fn name(&self) -> &str {
        &self.name
    }

    fn decide(&self, snapshot: &Features, scores: &[MatchScore]) -> Option<usize> {
        self.fallback.decide(snapshot, scores)
    }

    fn decide_with_texts(
        &self,
        snapshot: &Features,
        scores: &[MatchScore],
        summary: &str,
        candidates: &[&str],
    ) -> Option<usize> {
        let shown = scores.len().min(candidates.len()).min(SHOWN);
        if shown == 0 {
            return None;
        }
        let mut listed = String::new();
        for (k, text) in candidates.iter().take(shown).enumerate() {
            listed.push_str(&format!("[{}] {text}\n", k + 1));
        }
        let messages = [
            Message::system(INSTRUCTIONS),
            Message::user(format!("Threads:\n{listed}\nNew exchange: {summary}")),
        ];
        let schema = json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["choice"],
            "properties": {"choice": {"type": "string"}},
        });
        let request = JsonRequest {
            phase: Phase::Construction,
            messages: &messages,
            schema_name: "trajectory_match",
            schema: &schema,
            max_tokens: CHOICE_TOKENS,
        };
        let choice = self
            .client
            .json(&request)
            .ok()
            .and_then(|r| r.get("choice").and_then(Value::as_str).map(str::to_string));
        match choice.as_deref().map(str::trim) {
            Some(c) if c.eq_ignore_ascii_case("new") => None,
            Some(c) => match c.trim_matches(['[', ']']).parse::<usize>() {
                Ok(k) if (1..=shown).contains(&k) => Some(k - 1),
                _ => {
                    self.fallbacks.fetch_add(1, Ordering::Relaxed);
                    self.decide(snapshot, scores)
                }
            },
            None => {
                self.fallbacks.fetch_add(1, Ordering::Relaxed);
                self.decide(snapshot, scores)
            }
        }
    }
}
