//! The model-driven extractor (SPEC §2): the deterministic extractor's draft is the episodic seed
//! (context, temporal anchors, keywords, entities, terms, facets), and a language model writes the
//! exchange's summary and claims, each a statement with the message it comes from and a verbatim
//! quote of it. What the model writes is checked: a claim citing a message outside the exchange,
//! an empty statement or a quote that is not in its message is dropped (its keywords and terms
//! are read from the quote, so none comes from outside the source). A preservation pass then keeps
//! every claim of the seed that holds a name, place, title, count or date that no kept claim
//! quotes. Without a usable reply the seed is the draft, and the fallback is counted.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{json, Value};
use trajwiki_core::SourceMessage;
use trajwiki_llm::{Client, JsonRequest, Message, Phase};
use trajwiki_memory::extract::ExtractError;
use trajwiki_memory::{
    claim_from_quote, ClaimDraft, DeterministicExtractor, Extractor, Lexicon, MemoryConfig,
    SnapshotDraft,
};

/// The most tokens an extraction may have.
const EXTRACTION_TOKENS: u32 = 1200;

/// The longest summary kept from the model, in characters.
const SUMMARY_CHARS: usize = 400;

const INSTRUCTIONS: &str = "You turn one exchange of a conversation into memory. Write a \
one-line summary, then the claims it states: each a short statement of one fact, event, plan or \
preference, in the third person with the person named (never I, me, my or you), with the ref of \
the message it comes from and a quote copied exactly from that message. Keep names, places, \
titles, counts and dates. Questions, greetings, thanks and filler are no claims.";

/// An [`Extractor`] asking a language model, seeded and checked by the deterministic one.
pub struct LlmExtractor<'a> {
    client: &'a Client,
    seed: DeterministicExtractor,
    config: MemoryConfig,
    name: String,
    fallbacks: AtomicUsize,
}

impl<'a> LlmExtractor<'a> {
    /// An extractor asking `client`'s model, with the construction constants `config`.
    pub fn new(client: &'a Client, config: MemoryConfig) -> Self {
        LlmExtractor {
            client,
            seed: DeterministicExtractor::new(config.clone()),
            config,
            name: format!("llm:{}", client.config().model),
            fallbacks: AtomicUsize::new(0),
        }
    }

    /// Exchanges whose draft is the deterministic seed alone (the model unreachable, or no
    /// claim of its reply valid).
    pub fn fallbacks(&self) -> usize {
        self.fallbacks.load(Ordering::Relaxed)
    }
}

fn schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["summary", "claims"],
        "properties": {
            "summary": {"type": "string"},
            "claims": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["ref", "statement", "quote"],
                    "properties": {
                        "ref": {"type": "string"},
                        "statement": {"type": "string"},
                        "quote": {"type": "string"},
                    },
                },
            },
        },
    })
}

/// The ref a message is cited by in the prompt.
fn reference(m: &SourceMessage) -> String {
    m.external_ref.clone().unwrap_or_else(|| m.id.to_string())
}

/// The seed's names, places, titles, counts and dates held by `claim` (lower-cased).
fn specifics(claim: &ClaimDraft, seed: &SnapshotDraft) -> BTreeSet<String> {
    let quote = claim.quote.to_lowercase();
    let mut out: BTreeSet<String> = claim.terms.iter().map(|t| t.to_lowercase()).collect();
    out.extend(
        seed.counts
            .iter()
            .chain(seed.anchors.iter().map(|(_, a)| &a.phrase))
            .map(|x| x.to_lowercase())
            .filter(|x| quote.contains(x.as_str())),
    );
    out
}

impl Extractor for LlmExtractor<'_> {
    fn name(&self) -> &str {
        &self.name
    }

    fn extract(
        &self,
        exchange: &[&SourceMessage],
        lexicon: &Lexicon,
    ) -> Result<SnapshotDraft, ExtractError> {
        let seed = self.seed.extract(exchange, lexicon)?;
        let mut shown = String::new();
        for m in exchange {
            shown.push_str(&format!("{} {}: {}", reference(m), m.speaker, m.text));
            for c in m.attachments.iter().filter_map(|a| a.caption.as_deref()) {
                shown.push_str(&format!(" [image: {c}]"));
            }
            shown.push('\n');
        }
        let messages = [Message::system(INSTRUCTIONS), Message::user(shown)];
        let schema = schema();
        let request = JsonRequest {
            phase: Phase::Construction,
            messages: &messages,
            schema_name: "extraction",
            schema: &schema,
            max_tokens: EXTRACTION_TOKENS,
        };
        let Ok(reply) = self.client.json(&request) else {
            self.fallbacks.fetch_add(1, Ordering::Relaxed);
            return Ok(seed);
        };
        // The model's claims that pass, in the order given.
        let mut claims: Vec<ClaimDraft> = Vec::new();
        for item in reply
            .get("claims")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let field = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or("").trim();
            let Some(m) = exchange.iter().find(|m| reference(m) == field("ref")) else {
                continue;
            };
            let statement = field("statement");
            if statement.is_empty() {
                continue;
            }
            let text = if statement.contains(m.speaker.as_str()) {
                statement.to_string()
            } else {
                format!("{}: {statement}", m.speaker)
            };
            // The same shape as the rules' claims: no questions, fragments or first person.
            if trajwiki_memory::claims::shape_error(&text).is_some() {
                continue;
            }
            if let Some(claim) = claim_from_quote(m, text, field("quote"), &self.config) {
                if !claims.iter().any(|c| c.text == claim.text) {
                    claims.push(claim);
                }
            }
        }
        if claims.is_empty() {
            self.fallbacks.fetch_add(1, Ordering::Relaxed);
            return Ok(seed);
        }
        // Preservation: the seed's claims holding specifics no kept claim quotes.
        let mut covered: BTreeSet<String> = BTreeSet::new();
        for c in &claims {
            covered.extend(specifics(c, &seed));
        }
        for c in &seed.claims {
            let own = specifics(c, &seed);
            if own.iter().any(|x| !covered.contains(x)) {
                covered.extend(own);
                claims.push(c.clone());
            }
        }
        // Claims in source order: by message, then where their quote starts in it.
        let position = |c: &ClaimDraft| {
            let i = exchange.iter().position(|m| m.id == c.source).unwrap_or(0);
            let at = exchange[i].text.find(&c.quote).unwrap_or(usize::MAX);
            (i, at)
        };
        claims.sort_by_key(position);
        let summary = reply
            .get("summary")
            .and_then(Value::as_str)
            .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
            .filter(|s| !s.is_empty() && s.chars().count() <= SUMMARY_CHARS)
            .unwrap_or_else(|| seed.summary.clone());
        Ok(SnapshotDraft {
            summary,
            claims,
            ..seed
        })
    }
}
