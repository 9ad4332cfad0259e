//! Messages given as JSON data rather than a file: the Python `Memory.add` and the HTTP API's
//! append. Message objects are normalised to the JSONL message format and read by the same
//! parser as `trajwiki ingest`, so every field is checked, and named in errors, the same way.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::Path;

use serde_json::Value;
use trajwiki_core::{Namespace, SourceMessage, TIMESTAMP_FORMAT};
use trajwiki_ingest::{jsonl, locomo, IngestError};
use trajwiki_store::{Store, StoreError};

/// Why messages given as data could not be read.
#[derive(Debug, thiserror::Error)]
pub enum MessagesError {
    /// The data is not a list of message objects or LoCoMo samples, or contradicts the
    /// namespace it is added to.
    #[error("{0}")]
    Shape(String),
    /// A message is malformed (the error names its position and field).
    #[error(transparent)]
    Ingest(#[from] IngestError),
    /// Reading the stored positions failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl MessagesError {
    fn shape(message: impl Into<String>) -> Self {
        MessagesError::Shape(message.into())
    }
}

/// Messages given as JSON data: LoCoMo samples, or message objects normalised to the JSONL message
/// format (the namespace filled in, `role`/`content` accepted, `session` defaulting to 1, `seq`
/// continuing after what the store holds) and read by the same parser as `trajwiki ingest`.
pub fn parse_messages(
    store: &Store,
    value: Value,
    namespace: Option<&Namespace>,
    label: &str,
) -> Result<Vec<SourceMessage>, MessagesError> {
    let is_sample = |v: &Value| v.get("conversation").is_some();
    let samples = match value {
        Value::Object(_) if is_sample(&value) => vec![value],
        Value::Array(items) if items.first().is_some_and(is_sample) => items,
        Value::Array(items) => return normalise_messages(store, items, namespace, label),
        _ => {
            return Err(MessagesError::shape(
                "messages must be a list of message dicts or a LoCoMo sample",
            ))
        }
    };
    let mut samples = samples;
    if let Some(ns) = namespace {
        if samples.len() != 1 {
            return Err(MessagesError::shape(
                "namespace= renames one LoCoMo sample; several samples keep their sample_id",
            ));
        }
        if let Some(obj) = samples[0].as_object_mut() {
            obj.insert("sample_id".into(), Value::from(ns.as_str()));
        }
    }
    let text = Value::Array(samples).to_string();
    Ok(locomo::parse_locomo(Path::new(label), &text)?
        .into_iter()
        .flat_map(|s| s.messages)
        .collect())
}

/// Where messages without a `seq` go: after the last stored (or added) message of their session,
/// or, for a message equal to a stored one not matched yet, at its position, so that adding the
/// same messages again is a no-op (and two equal messages stay two).
#[derive(Default)]
struct Positions {
    loaded: HashSet<(String, u64)>,
    last: HashMap<(String, u64), u64>,
    stored: HashMap<(String, u64, Content), VecDeque<u64>>,
}

/// Speaker, text and normalised time.
type Content = (String, String, String);

impl Positions {
    fn record(&mut self, ns: &str, session: u64, seq: u64) {
        let slot = self.last.entry((ns.to_string(), session)).or_insert(0);
        *slot = (*slot).max(seq);
    }

    /// Reads the stored messages of one session (not the whole namespace: adding messages one
    /// at a time must not cost more as the history grows).
    fn load(&mut self, store: &Store, ns: &str, session: u64) -> Result<(), MessagesError> {
        if !self.loaded.insert((ns.to_string(), session)) {
            return Ok(());
        }
        let (Ok(name), Ok(session)) = (Namespace::new(ns), u32::try_from(session)) else {
            return Ok(()); // The parser reports the bad name or session with its position.
        };
        for m in store.session_messages(&name, session)? {
            let (session, seq) = (u64::from(m.session), u64::from(m.seq));
            self.record(ns, session, seq);
            let time = m.timestamp.format(TIMESTAMP_FORMAT).to_string();
            self.stored
                .entry((ns.to_string(), session, (m.speaker, m.text, time)))
                .or_default()
                .push_back(seq);
        }
        Ok(())
    }

    /// The position of a message without one.
    fn place(&mut self, ns: &str, session: u64, content: Option<Content>) -> u64 {
        let known = content.and_then(|c| {
            self.stored
                .get_mut(&(ns.to_string(), session, c))
                .and_then(VecDeque::pop_front)
        });
        known.unwrap_or_else(|| {
            self.last
                .get(&(ns.to_string(), session))
                .copied()
                .unwrap_or(0)
                + 1
        })
    }
}

/// The (speaker, text, normalised time) of a message dict, when all three are readable.
fn content(obj: &serde_json::Map<String, Value>) -> Option<Content> {
    let field = |k: &str| obj.get(k).and_then(Value::as_str);
    let time = jsonl::parse_timestamp(field("timestamp")?)?;
    Some((
        field("speaker")?.to_string(),
        field("text")?.to_string(),
        time.format(TIMESTAMP_FORMAT).to_string(),
    ))
}

fn normalise_messages(
    store: &Store,
    items: Vec<Value>,
    namespace: Option<&Namespace>,
    label: &str,
) -> Result<Vec<SourceMessage>, MessagesError> {
    let mut positions = Positions::default();
    let mut lines = String::new();
    for (i, mut item) in items.into_iter().enumerate() {
        let Some(obj) = item.as_object_mut() else {
            return Err(MessagesError::shape(format!(
                "messages[{i}] must be a dict, got {item}"
            )));
        };
        for (alias, field) in [("role", "speaker"), ("content", "text")] {
            if !obj.contains_key(field) {
                if let Some(v) = obj.remove(alias) {
                    obj.insert(field.into(), v);
                }
            }
        }
        if let Some(ns) = namespace {
            match obj.get("namespace") {
                None => {
                    obj.insert("namespace".into(), Value::from(ns.as_str()));
                }
                Some(Value::String(s)) if s == ns.as_str() => {}
                Some(other) => {
                    return Err(MessagesError::shape(format!(
                        "messages[{i}] names namespace {other}, but namespace={:?} was given",
                        ns.as_str()
                    )))
                }
            }
        }
        obj.entry("session").or_insert(Value::from(1));
        let ns = obj
            .get("namespace")
            .and_then(Value::as_str)
            .map(str::to_string);
        let session = obj.get("session").and_then(Value::as_u64);
        // Malformed fields are left for the parser, which names them.
        if let (Some(ns), Some(session)) = (ns, session) {
            positions.load(store, &ns, session)?;
            let seq = match obj.get("seq") {
                Some(seq) => seq.as_u64(),
                None => {
                    let seq = positions.place(&ns, session, content(obj));
                    obj.insert("seq".into(), Value::from(seq));
                    Some(seq)
                }
            };
            if let Some(seq) = seq {
                positions.record(&ns, session, seq);
            }
        }
        lines.push_str(&item.to_string());
        lines.push('\n');
    }
    jsonl::parse_messages(Path::new(label), &lines).map_err(MessagesError::from)
}
