//! The model-driven claim-transition judge (SPEC §2.4): when a trajectory already holds claims,
//! a language model decides whether a new claim revises one of them (REVISE), withdraws one
//! (DEPRECATE, the new claim added after) or is new (ADD). Its decision is a hint: a target that
//! is not one of the claims shown, or any failure, makes the claim an ADD, as the design says,
//! and is counted ([`LlmJudge::fallbacks`]). Every op it decides records the model in its
//! rationale. Responses are cached by the client, so a rebuild decides the same.

use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{json, Value};
use trajwiki_llm::{Client, JsonRequest, Message, Phase};
use trajwiki_memory::evolve::{ClaimJudge, EarlierClaim, Judgement};
use trajwiki_memory::extract::ClaimDraft;

/// The most earlier claims shown to the model: the trajectory's latest.
const SHOWN: usize = 12;

/// The most tokens a decision may have.
const DECISION_TOKENS: u32 = 200;

const INSTRUCTIONS: &str = "You keep a memory of facts from a conversation. A new claim arrives \
for a thread that already holds earlier claims. Decide: REVISE when the new claim updates or \
corrects one earlier claim (it replaces it), DEPRECATE when the new claim withdraws or cancels \
one earlier claim, ADD when it is a new fact (also when unsure). For REVISE and DEPRECATE give \
the number of the earlier claim as target; for ADD give -1. Give a short rationale.";

/// A [`ClaimJudge`] asking a language model.
pub struct LlmJudge<'a> {
    client: &'a Client,
    name: String,
    fallbacks: AtomicUsize,
}

impl<'a> LlmJudge<'a> {
    /// A judge asking `client`'s model.
    pub fn new(client: &'a Client) -> Self {
        LlmJudge {
            client,
            name: format!("llm:{}", client.config().model),
            fallbacks: AtomicUsize::new(0),
        }
    }

    /// Decisions that fell back to ADD (the model unreachable, or its decision invalid).
    pub fn fallbacks(&self) -> usize {
        self.fallbacks.load(Ordering::Relaxed)
    }

    fn add(&self, why: String) -> Judgement {
        self.fallbacks.fetch_add(1, Ordering::Relaxed);
        Judgement::Add {
            rationale: format!("{}: fell back to ADD: {why}", self.name),
        }
    }
}

fn schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["decision", "target", "rationale"],
        "properties": {
            "decision": {"type": "string", "enum": ["ADD", "REVISE", "DEPRECATE"]},
            "target": {"type": "integer"},
            "rationale": {"type": "string"},
        },
    })
}

impl ClaimJudge for LlmJudge<'_> {
    fn name(&self) -> &str {
        &self.name
    }

    fn judge(&self, new: &ClaimDraft, earlier: &[EarlierClaim<'_>]) -> Judgement {
        if earlier.is_empty() {
            return Judgement::Add {
                rationale: "the first claim of its trajectory".into(),
            };
        }
        let first = earlier.len().saturating_sub(SHOWN);
        let mut listed = String::new();
        for (i, e) in earlier.iter().enumerate().skip(first) {
            listed.push_str(&format!("[{i}] {} ({})\n", e.draft.text, e.status.as_str()));
        }
        let messages = [
            Message::system(INSTRUCTIONS),
            Message::user(format!(
                "Earlier claims:\n{listed}\nNew claim ({}): {}",
                new.status.as_str(),
                new.text
            )),
        ];
        let schema = schema();
        let request = JsonRequest {
            phase: Phase::Construction,
            messages: &messages,
            schema_name: "claim_transition",
            schema: &schema,
            max_tokens: DECISION_TOKENS,
        };
        let reply = match self.client.json(&request) {
            Ok(reply) => reply,
            Err(e) => return self.add(e.to_string()),
        };
        let decision = reply.get("decision").and_then(Value::as_str).unwrap_or("");
        let rationale = reply
            .get("rationale")
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim()
            .to_string();
        let rationale = format!("{}: {rationale}", self.name);
        let target = reply
            .get("target")
            .and_then(Value::as_i64)
            .and_then(|t| usize::try_from(t).ok())
            .filter(|&t| t >= first && t < earlier.len());
        match (decision, target) {
            ("ADD", _) => Judgement::Add { rationale },
            ("REVISE", Some(target)) => Judgement::Revise { target, rationale },
            ("DEPRECATE", Some(target)) => Judgement::Deprecate { target, rationale },
            ("REVISE" | "DEPRECATE", None) => {
                self.add(format!("{decision} without a claim shown as its target"))
            }
            (other, _) => self.add(format!("unknown decision {other:?}")),
        }
    }
}
