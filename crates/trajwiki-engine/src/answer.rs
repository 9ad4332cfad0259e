//! Answers from a retrieved context (SPEC §3, step 6).
//!
//! A model reads the context and writes a structured answer: `can_answer`, `answer_type`,
//! `final_answer`, `supporting_facts`, `supporting_source_refs`, `counted_events`,
//! `excluded_events`, `uncertainties`, `abstain_reason`. What it writes is a hint, checked here:
//! a reply that does not follow the schema is asked for again once, with what was wrong; refs
//! that are not in the context are removed; an answer left without a valid ref becomes an
//! abstention, with the reason; a count is the number of distinct counted events that are not
//! also excluded. An abstention is followed by one reflection ([`reflect`]: search hints) and a
//! search with them, then a rescue over the raw messages ([`answer_searching`], which `ask` and
//! `eval locomo --answer` share). Without a
//! model, or with the model unreachable, the result says so and the evidence is still returned:
//! the memory never depends on a model to be read.

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::{json, Map, Value};
use trajwiki_llm::{Client, JsonRequest, LlmError, Message, Phase};
use trajwiki_retrieve::{Mode, Reranked};

/// What became of a question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerStatus {
    /// Answered, with at least one source ref from the context.
    Answered,
    /// The model found no supported answer (or its answer had no valid support).
    Abstained,
    /// No model is configured: the evidence alone is returned.
    NoAnswerModel,
    /// The model could not be reached or kept giving unusable replies: the evidence alone.
    ModelUnavailable,
}

/// The kinds of answer the schema allows.
pub const ANSWER_TYPES: [&str; 6] = ["fact", "list", "count", "temporal", "yes_no", "other"];

/// A checked answer.
#[derive(Debug, Clone, Serialize)]
pub struct Answer {
    /// What became of the question.
    pub status: AnswerStatus,
    /// The answer (empty unless answered).
    pub final_answer: String,
    /// One of [`ANSWER_TYPES`] (empty without a model).
    pub answer_type: String,
    /// The facts the answer rests on, as the model stated them.
    pub supporting_facts: Vec<String>,
    /// Refs of the context's source messages that support the answer.
    pub supporting_source_refs: Vec<String>,
    /// For a count: the distinct events counted.
    pub counted_events: Vec<String>,
    /// Events the model considered and left out (planned, uncertain, duplicates).
    pub excluded_events: Vec<String>,
    /// What the model was unsure of.
    pub uncertainties: Vec<String>,
    /// Why there is no answer (abstained, no model, model unavailable).
    pub abstain_reason: Option<String>,
    /// Refs the model cited that are not in the context (removed).
    pub removed_refs: Vec<String>,
    /// Changes the checks made to the model's answer.
    pub corrections: Vec<String>,
    /// Replies asked for (0 without a model; a retry after invalid output makes 2).
    pub attempts: u32,
    /// Which search the answer comes from: `first`, `reflection` (the question rewritten with
    /// the model's hints and routed again) or `rescue` (raw messages, dense and lexical).
    pub route: String,
    /// The reflection's hints, when there was one.
    pub hints: Vec<String>,
}

impl Answer {
    /// An answer that is only a status and a reason.
    pub fn without_model(status: AnswerStatus, reason: String) -> Self {
        Answer {
            status,
            final_answer: String::new(),
            answer_type: String::new(),
            supporting_facts: Vec::new(),
            supporting_source_refs: Vec::new(),
            counted_events: Vec::new(),
            excluded_events: Vec::new(),
            uncertainties: Vec::new(),
            abstain_reason: Some(reason),
            removed_refs: Vec::new(),
            corrections: Vec::new(),
            attempts: 0,
            route: "first".into(),
            hints: Vec::new(),
        }
    }
}

/// The most tokens an answer may have: the schema's fields, short.
pub const ANSWER_TOKENS: u32 = 400;

/// The reason given when no model is configured.
pub const NO_MODEL: &str = "no answer model configured (set TRAJWIKI_LLM_BASE_URL and TRAJWIKI_LLM_MODEL, or pass --llm-base-url and --llm-model)";

/// The JSON schema of an answer.
pub fn answer_schema() -> Value {
    let strings = json!({"type": "array", "items": {"type": "string"}});
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": [
            "can_answer", "answer_type", "final_answer", "supporting_facts",
            "supporting_source_refs", "counted_events", "excluded_events", "uncertainties",
            "abstain_reason"
        ],
        "properties": {
            "can_answer": {"type": "boolean"},
            "answer_type": {"type": "string", "enum": ANSWER_TYPES},
            "final_answer": {"type": "string"},
            "supporting_facts": strings,
            "supporting_source_refs": strings,
            "counted_events": strings,
            "excluded_events": strings,
            "uncertainties": strings,
            "abstain_reason": {"type": "string"},
        },
    })
}

const INSTRUCTIONS: &str = "You answer a question about a long conversation from a memory \
context. Each source message in the context starts with its ref (for example D3:12). Use only \
the context. Cite in supporting_source_refs the refs of the messages that support the answer, \
exactly as written. Keep final_answer short: a name, a date, a phrase, a number. For a count, \
list each distinct event once in counted_events and put planned, uncertain or repeated ones in \
excluded_events. When the context does not support an answer, set can_answer to false, leave \
final_answer empty and say why in abstain_reason.";

/// The messages that ask for an answer.
pub fn answer_messages(context: &str, question: &str) -> Vec<Message> {
    vec![
        Message::system(INSTRUCTIONS),
        Message::user(format!("Context:\n{context}\n\nQuestion: {question}")),
    ]
}

/// Asks `client` for an answer to `question` from `context`, whose source refs are
/// `context_refs`, and checks it (see the module documentation).
pub fn answer(client: &Client, context: &str, context_refs: &[String], question: &str) -> Answer {
    let schema = answer_schema();
    let mut messages = answer_messages(context, question);
    let refs: BTreeSet<&str> = context_refs.iter().map(String::as_str).collect();
    let mut attempts = 0;
    loop {
        attempts += 1;
        let phase = if attempts == 1 {
            Phase::Answer
        } else {
            Phase::Repair
        };
        let request = JsonRequest {
            phase,
            messages: &messages,
            schema_name: "answer",
            schema: &schema,
            max_tokens: ANSWER_TOKENS,
        };
        let problems = match client.json(&request) {
            Ok(object) => match check(&object, &refs) {
                Ok(mut answer) => {
                    answer.attempts = attempts;
                    return answer;
                }
                Err(problems) => {
                    messages.push(Message::assistant(Value::Object(object).to_string()));
                    problems
                }
            },
            Err(LlmError::BadOutput { reason, excerpt }) => {
                messages.push(Message::assistant(excerpt));
                vec![reason]
            }
            Err(e) => {
                let mut a = Answer::without_model(AnswerStatus::ModelUnavailable, e.to_string());
                a.attempts = attempts;
                return a;
            }
        };
        if attempts >= 2 {
            let mut a = Answer::without_model(
                AnswerStatus::ModelUnavailable,
                format!(
                    "the model's replies did not follow the answer schema: {}",
                    problems.join("; ")
                ),
            );
            a.attempts = attempts;
            return a;
        }
        messages.push(Message::user(format!(
            "Your reply did not follow the schema: {}. Reply again with one JSON object that does.",
            problems.join("; ")
        )));
    }
}

/// The most tokens a reflection may have.
const REFLECTION_TOKENS: u32 = 200;

const REFLECT: &str = "A question about a long conversation could not be answered from the \
context retrieved for it. Rewrite it into search hints: the entities (people, places, things) \
it is about, the event terms (what happened), the temporal terms (dates, periods), and the terms \
an answer must contain. Short phrases only.";

/// The reflection's schema.
fn hints_schema() -> Value {
    let strings = json!({"type": "array", "items": {"type": "string"}});
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["entities", "event_terms", "temporal_terms", "must_find_terms"],
        "properties": {
            "entities": strings, "event_terms": strings, "temporal_terms": strings,
            "must_find_terms": strings,
        },
    })
}

/// Search hints for `question` from the model (SPEC §3, step 6's reflection): its entities, event,
/// temporal and must-find terms, each once; empty when the model gives none or fails.
pub fn reflect(client: &Client, question: &str, why: &str) -> Vec<String> {
    let messages = [
        Message::system(REFLECT),
        Message::user(format!(
            "Question: {question}\nWhy it was not answered: {why}"
        )),
    ];
    let schema = hints_schema();
    let request = JsonRequest {
        phase: Phase::Retrieval,
        messages: &messages,
        schema_name: "hints",
        schema: &schema,
        max_tokens: REFLECTION_TOKENS,
    };
    let Ok(reply) = client.json(&request) else {
        return Vec::new();
    };
    let mut hints: Vec<String> = Vec::new();
    for field in [
        "entities",
        "event_terms",
        "temporal_terms",
        "must_find_terms",
    ] {
        for h in reply
            .get(field)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let h = h
                .as_str()
                .unwrap_or("")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            if !h.is_empty() && h.len() <= 100 && !hints.iter().any(|x| x.eq_ignore_ascii_case(&h))
            {
                hints.push(h);
            }
        }
    }
    hints.truncate(16);
    hints
}

/// Answers `question` from `first` (a search's result; `context` gives its text and refs), and
/// after an abstention tries again (SPEC §3, step 6): one reflection turns the question into
/// hints that `search` routes in `mode`, then `search` rescues over the raw messages. A later
/// answer is taken only when it is supported (an abstention never replaces the first one:
/// strictly better supported than none). Returns the search the answer comes from and the
/// answer, with every attempt counted; `search` is called with the text to search for and the
/// mode.
pub fn answer_searching<S, E>(
    client: &Client,
    question: &str,
    mode: Mode,
    first: S,
    context: impl Fn(&S) -> (&str, &[String]),
    mut search: impl FnMut(&str, Mode) -> Result<S, E>,
) -> Result<(S, Answer), E> {
    let (text, refs) = context(&first);
    let answered = answer(client, text, refs, question);
    if answered.status != AnswerStatus::Abstained {
        return Ok((first, answered));
    }
    let why = answered.abstain_reason.clone().unwrap_or_default();
    let hints = reflect(client, question, &why);
    let mut attempts = answered.attempts;
    // The question rewritten: its hints alone, which name what the answer must contain, routed
    // again in the question's mode (when there are hints and they fit a question); then the
    // question itself over the raw messages, dense and lexical.
    let rewritten = hints.join(" ");
    let fits = trajwiki_core::limits::QUESTION_BYTES
        .check(rewritten.len())
        .is_ok();
    let tries = [
        (!hints.is_empty() && fits).then_some(("reflection", rewritten.as_str(), mode)),
        Some(("rescue", question, Mode::TurnHybrid)),
    ];
    for (route, text, mode) in tries.into_iter().flatten() {
        let found = search(text, mode)?;
        let (ctx, refs) = context(&found);
        let mut next = answer(client, ctx, refs, question);
        attempts += next.attempts;
        if next.status == AnswerStatus::Answered {
            next.attempts = attempts;
            next.route = route.to_string();
            next.hints = hints;
            return Ok((found, next));
        }
    }
    let mut answered = answered;
    answered.attempts = attempts;
    answered.hints = hints;
    Ok((first, answered))
}

/// The most tokens a rerank may have.
const RERANK_TOKENS: u32 = 120;

const RERANK_TRAJECTORIES: &str = "Threads of a conversation's memory were selected for a \
question. Order them by how likely they hold its answer: give the numbers of the threads, most \
likely first. Leave out those that cannot help.";

const RERANK_PAGES: &str = "Pages of a conversation's memory wiki were found for a question; \
each lists the threads of the conversation about one person, topic or kind of thing. Order them \
by how likely their threads hold its answer: give the numbers of the pages, most likely first. \
Leave out those that cannot help.";

/// The order `client`'s model gives `texts` (the routed pages or the selected trajectories, as
/// `what` says) for `question`: positions, best first, or `None` — keep the fused order — when
/// there is nothing to order, the model fails, or its order names nothing shown.
pub fn rerank(
    client: &Client,
    question: &str,
    what: Reranked,
    texts: &[&str],
) -> Option<Vec<usize>> {
    if texts.len() < 2 {
        return None;
    }
    let (system, heading) = match what {
        Reranked::Pages => (RERANK_PAGES, "Pages"),
        Reranked::Trajectories => (RERANK_TRAJECTORIES, "Threads"),
    };
    let mut listed = String::new();
    for (i, s) in texts.iter().enumerate() {
        let line: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
        let line: String = line.chars().take(300).collect();
        listed.push_str(&format!("[{}] {line}\n", i + 1));
    }
    let messages = [
        Message::system(system),
        Message::user(format!("Question: {question}\n{heading}:\n{listed}")),
    ];
    let schema = json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["order"],
        "properties": {"order": {"type": "array", "items": {"type": "integer"}}},
    });
    let request = JsonRequest {
        phase: Phase::Retrieval,
        messages: &messages,
        schema_name: "rerank",
        schema: &schema,
        max_tokens: RERANK_TOKENS,
    };
    let reply = client.json(&request).ok()?;
    let order: Vec<usize> = reply
        .get("order")?
        .as_array()?
        .iter()
        .filter_map(Value::as_u64)
        .filter_map(|n| usize::try_from(n).ok()?.checked_sub(1))
        .filter(|&p| p < texts.len())
        .collect();
    (!order.is_empty()).then_some(order)
}

/// The fields of a reply, or what is wrong with them.
fn check(object: &Map<String, Value>, refs: &BTreeSet<&str>) -> Result<Answer, Vec<String>> {
    let mut problems = Vec::new();
    let mut text = |field: &str| -> String {
        match object.get(field) {
            Some(Value::String(s)) => s.trim().to_string(),
            Some(_) => {
                problems.push(format!("{field} must be a string"));
                String::new()
            }
            None => {
                problems.push(format!("{field} is missing"));
                String::new()
            }
        }
    };
    let final_answer = text("final_answer");
    let answer_type = text("answer_type");
    let abstain_reason = text("abstain_reason");
    let mut list = |field: &str| -> Vec<String> {
        match object.get(field) {
            Some(Value::Array(items)) => {
                let mut out = Vec::new();
                for item in items {
                    match item {
                        Value::String(s) if !s.trim().is_empty() => out.push(s.trim().to_string()),
                        Value::String(_) => {}
                        _ => problems.push(format!("{field} must hold strings")),
                    }
                }
                out
            }
            Some(_) => {
                problems.push(format!("{field} must be a list of strings"));
                Vec::new()
            }
            None => {
                problems.push(format!("{field} is missing"));
                Vec::new()
            }
        }
    };
    let supporting_facts = list("supporting_facts");
    let cited = list("supporting_source_refs");
    let counted = list("counted_events");
    let excluded_events = list("excluded_events");
    let uncertainties = list("uncertainties");
    let can_answer = match object.get("can_answer") {
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            problems.push("can_answer must be true or false".into());
            false
        }
        None => {
            problems.push("can_answer is missing".into());
            false
        }
    };
    if !answer_type.is_empty() && !ANSWER_TYPES.contains(&answer_type.as_str()) {
        problems.push(format!(
            "answer_type must be one of {}",
            ANSWER_TYPES.join(", ")
        ));
    }
    if !problems.is_empty() {
        return Err(problems);
    }

    // Refs: those of the context, each once, in the order cited.
    let mut supporting_source_refs = Vec::new();
    let mut removed_refs = Vec::new();
    for r in cited {
        let r = r.trim_matches(|c| c == '[' || c == ']').to_string();
        if refs.contains(r.as_str()) {
            if !supporting_source_refs.contains(&r) {
                supporting_source_refs.push(r);
            }
        } else if !removed_refs.contains(&r) {
            removed_refs.push(r);
        }
    }
    // Counted events: distinct (ignoring case and spacing) and not also excluded.
    let key = |s: &str| {
        s.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase()
    };
    let excluded: BTreeSet<String> = excluded_events.iter().map(|e| key(e)).collect();
    let mut seen = BTreeSet::new();
    let counted_events: Vec<String> = counted
        .into_iter()
        .filter(|e| !excluded.contains(&key(e)) && seen.insert(key(e)))
        .collect();
    let mut corrections = Vec::new();
    let mut final_answer = final_answer;
    if answer_type == "count" && !counted_events.is_empty() {
        let n = counted_events.len();
        if final_answer.trim().parse::<usize>().ok() != Some(n) {
            corrections.push(format!(
                "count set to the {n} distinct counted events (the model said {final_answer:?})"
            ));
            final_answer = n.to_string();
        }
    }
    let (status, abstain_reason) = if !can_answer || final_answer.is_empty() {
        let reason = if abstain_reason.is_empty() {
            "the model found no answer in the context".to_string()
        } else {
            abstain_reason
        };
        (AnswerStatus::Abstained, Some(reason))
    } else if supporting_source_refs.is_empty() {
        (
            AnswerStatus::Abstained,
            Some(if removed_refs.is_empty() {
                "the answer cites no source message of the context".to_string()
            } else {
                format!(
                    "the answer cites only refs that are not in the context ({})",
                    removed_refs.join(", ")
                )
            }),
        )
    } else {
        (AnswerStatus::Answered, None)
    };
    if status == AnswerStatus::Abstained && !final_answer.is_empty() {
        corrections.push(format!("unsupported answer {final_answer:?} withdrawn"));
        final_answer.clear();
    }
    Ok(Answer {
        status,
        final_answer,
        answer_type,
        supporting_facts,
        supporting_source_refs,
        counted_events,
        excluded_events,
        uncertainties,
        abstain_reason,
        removed_refs,
        corrections,
        attempts: 0,
        route: "first".into(),
        hints: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(v: Value) -> Map<String, Value> {
        let mut base = json!({
            "can_answer": true, "answer_type": "fact", "final_answer": "a sunset",
            "supporting_facts": [], "supporting_source_refs": ["D1:2"], "counted_events": [],
            "excluded_events": [], "uncertainties": [], "abstain_reason": ""
        });
        for (k, x) in v.as_object().unwrap() {
            base[k] = x.clone();
        }
        base.as_object().unwrap().clone()
    }

    #[test]
    fn refs_outside_the_context_are_removed_and_leave_an_abstention() {
        let refs: BTreeSet<&str> = ["D1:2", "D1:3"].into();
        let a = check(
            &reply(json!({"supporting_source_refs": ["D9:9", "[D1:2]", "D1:2"]})),
            &refs,
        )
        .unwrap();
        assert_eq!(a.status, AnswerStatus::Answered);
        assert_eq!(a.supporting_source_refs, ["D1:2"]);
        assert_eq!(a.removed_refs, ["D9:9"]);
        let a = check(&reply(json!({"supporting_source_refs": ["D9:9"]})), &refs).unwrap();
        assert_eq!(a.status, AnswerStatus::Abstained);
        assert!(a.final_answer.is_empty());
        assert!(a.abstain_reason.unwrap().contains("D9:9"));
    }

    #[test]
    fn counts_are_the_distinct_events_not_excluded() {
        let refs: BTreeSet<&str> = ["D1:2"].into();
        let a = check(
            &reply(json!({
                "answer_type": "count", "final_answer": "4",
                "counted_events": ["Paris trip", "paris  trip", "Rome trip", "Oslo trip"],
                "excluded_events": ["Oslo trip"]
            })),
            &refs,
        )
        .unwrap();
        assert_eq!(a.final_answer, "2");
        assert_eq!(a.counted_events, ["Paris trip", "Rome trip"]);
        assert_eq!(a.corrections.len(), 1);
    }

    #[test]
    fn schema_violations_are_listed() {
        let refs: BTreeSet<&str> = BTreeSet::new();
        let mut bad = reply(json!({"answer_type": "poem", "counted_events": "x"}));
        bad.remove("can_answer");
        let problems = check(&bad, &refs).unwrap_err();
        assert_eq!(problems.len(), 3, "{problems:?}");
    }
}
