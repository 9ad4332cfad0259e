//! Messages given as JSON data rather than a file: the Python `Memory.add`, the HTTP API's
//! append and MCP's `add_messages`. Message objects are normalised to the JSONL message format
//! and read, one by one, by the same parser as `trajwiki ingest`, so every field is checked, and
//! named in errors, the same way.
//!
//! Where a message goes: one with a `seq` at that position (adding it again finds it there); one
//! without after the last message of its session, a position the store chooses under its write
//! lock ([`Place::Next`]), so that appends from several processes never take one position twice.
//! Equal content never makes two messages one ("ok" said twice is two messages): a retry is
//! recognised only by a key the client gives, the message's `ref` or an idempotency key for the
//! whole request (see [`IdempotencyKey`]).

use std::path::Path;

use serde_json::Value;
use trajwiki_core::Namespace;
use trajwiki_ingest::{jsonl, locomo, IngestError};
use trajwiki_store::{Append, Place};

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
    /// An idempotency key that cannot name messages.
    #[error("idempotency key {key:?}: {reason}")]
    Key {
        /// The key as given.
        key: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

impl MessagesError {
    fn shape(message: impl Into<String>) -> Self {
        MessagesError::Shape(message.into())
    }
}

/// A client's key for one request of messages (HTTP's `Idempotency-Key` header): sending the
/// request again with the same key adds nothing. Each message of the request that has neither a
/// `seq` nor a `ref` is stored with the ref `KEY#N`, N its place in the request from 1, so that
/// its id derives from the key; a retry finds every message by its ref (`unchanged`), and a key
/// used again for other messages is a conflict naming the field that differs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// The longest key accepted, in bytes.
    pub const MAX_BYTES: usize = 200;

    /// A key: 1 to [`Self::MAX_BYTES`] visible ASCII characters.
    pub fn new(key: &str) -> Result<Self, MessagesError> {
        let refuse = |reason| MessagesError::Key {
            key: key.chars().take(Self::MAX_BYTES).collect(),
            reason,
        };
        if key.is_empty() {
            return Err(refuse("it is empty"));
        }
        if key.len() > Self::MAX_BYTES {
            return Err(refuse("it is longer than 200 bytes"));
        }
        if !key.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(refuse(
                "only visible ASCII characters (no spaces) are allowed",
            ));
        }
        Ok(IdempotencyKey(key.to_string()))
    }

    /// The ref of the message at `index` (from 0) of the request.
    fn message_ref(&self, index: usize) -> String {
        format!("{}#{}", self.0, index + 1)
    }
}

/// Messages given as JSON data: LoCoMo samples (each message at its position), or message
/// objects normalised to the JSONL message format (the namespace filled in, `role`/`content`
/// accepted, `session` defaulting to 1) and read by the same parser as `trajwiki ingest`; a
/// message without `seq` goes after the last of its session ([`Place::Next`]). With `key`, each
/// message without `seq` or `ref` gets a ref derived from it (see [`IdempotencyKey`]).
pub fn parse_messages(
    value: Value,
    namespace: Option<&Namespace>,
    label: &str,
    key: Option<&IdempotencyKey>,
) -> Result<Vec<Append>, MessagesError> {
    let is_sample = |v: &Value| v.get("conversation").is_some();
    let samples = match value {
        Value::Object(_) if is_sample(&value) => vec![value],
        Value::Array(items) if items.first().is_some_and(is_sample) => items,
        Value::Array(items) => return normalise_messages(items, namespace, label, key),
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
        .map(Append::given)
        .collect())
}

/// Whether a field is given (present and not null).
fn given(obj: &serde_json::Map<String, Value>, field: &str) -> bool {
    obj.get(field).is_some_and(|v| !v.is_null())
}

fn normalise_messages(
    items: Vec<Value>,
    namespace: Option<&Namespace>,
    label: &str,
    key: Option<&IdempotencyKey>,
) -> Result<Vec<Append>, MessagesError> {
    let mut out = Vec::with_capacity(items.len());
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
        let place = if given(obj, "seq") {
            Place::Given
        } else {
            Place::Next
        };
        if let Some(key) = key {
            if place == Place::Next && !given(obj, "ref") {
                obj.insert("ref".into(), Value::from(key.message_ref(i)));
            }
        }
        // Read alone, so that no message is taken for another; errors name its place in the
        // list as the line of a file (line 1 for messages[0]).
        let message = jsonl::message_from_value(Path::new(label), i + 1, item)?
            .pop()
            .ok_or_else(|| MessagesError::shape(format!("messages[{i}] holds no message")))?;
        out.push(Append { message, place });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ns() -> Namespace {
        Namespace::new("n").unwrap()
    }

    #[test]
    fn messages_without_seq_go_next_and_keep_equal_content_apart() {
        let ok = json!({"speaker": "Ann", "text": "ok", "timestamp": "2024-05-01T10:00:00"});
        let placed = parse_messages(
            json!([ok, ok, {"seq": 4, "speaker": "Ann", "text": "ok",
            "timestamp": "2024-05-01T10:00:00"}]),
            Some(&ns()),
            "messages",
            None,
        )
        .unwrap();
        let places: Vec<Place> = placed.iter().map(|a| a.place).collect();
        assert_eq!(places, [Place::Next, Place::Next, Place::Given]);
        assert_eq!(placed[2].message.seq, 4);
        assert!(placed.iter().all(|a| a.message.external_ref.is_none()));
    }

    #[test]
    fn an_idempotency_key_names_the_messages_without_seq_or_ref() {
        let key = IdempotencyKey::new("req-7").unwrap();
        let m = |extra: Value| {
            let mut m = json!({"speaker": "Ann", "text": "ok", "timestamp": "2024-05-01"});
            m.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            m
        };
        let placed = parse_messages(
            json!([
                m(json!({})),
                m(json!({"ref": "mine"})),
                m(json!({"seq": 2})),
                m(json!({}))
            ]),
            Some(&ns()),
            "messages",
            Some(&key),
        )
        .unwrap();
        let refs: Vec<Option<&str>> = placed
            .iter()
            .map(|a| a.message.external_ref.as_deref())
            .collect();
        assert_eq!(refs, [Some("req-7#1"), Some("mine"), None, Some("req-7#4")]);
        for bad in ["", "a b", &"k".repeat(201), "ключ"] {
            assert!(IdempotencyKey::new(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_bad_message_is_named_by_its_place_in_the_list() {
        let err = parse_messages(
            json!([{"speaker": "A", "text": "x", "timestamp": "2024-05-01"},
                   {"speaker": "A", "timestamp": "2024-05-01"}]),
            Some(&ns()),
            "messages",
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("line 2") && err.contains("field `text`"),
            "{err}"
        );
    }
}
