//! JSONL inputs: generic conversations (one message per line) and agent runs (one run per line),
//! and the writers that export them in the same formats.
//!
//! Message lines:
//! `{"namespace": "alice", "session": 1, "speaker": "Alice", "text": "...",
//!   "timestamp": "2023-05-08T13:56:00", "ref": "D1:1", "seq": 1,
//!   "attachments": [{"kind": "image", "caption": "...", "url": "..."}]}`
//! (`ref`, `seq` and `attachments` optional; `seq` defaults to the message's position within its
//! namespace and session in the file).
//!
//! Run lines: `{"id": "...", "task": "...", "steps": [{"action": "...", "observation": "..."}],
//! "success": true, "reward": 1.0, ...}`; every other field is kept as metadata. The namespace is
//! `--namespace`, else the line's `namespace`, else its `env`, else the file's stem.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::Path;

use chrono::{DateTime, NaiveDate, NaiveDateTime};
use serde_json::{json, Map, Value};
use trajwiki_core::limits;
use trajwiki_core::{
    content_hash, Attachment, Namespace, Outcome, Run, SourceMessage, Step, Timestamp,
    TIMESTAMP_FORMAT,
};

use crate::error::{quote, Location, Result};
use crate::fields::Record;
use crate::input::Input;

/// Parses a message timestamp: `2023-05-08T13:56:00`, `2023-05-08 13:56`, `2023-05-08`, or
/// RFC 3339 with an offset (converted to UTC). Years run from 1 to 9999, the years of ISO 8601
/// without its extensions (and of the stored form).
pub fn parse_timestamp(text: &str) -> Option<Timestamp> {
    use chrono::Datelike;
    parse_any_timestamp(text).filter(|t| (1..=9999).contains(&t.year()))
}

fn parse_any_timestamp(text: &str) -> Option<Timestamp> {
    let text = text.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Some(t.naive_utc());
    }
    for fmt in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(t) = NaiveDateTime::parse_from_str(text, fmt) {
            return Some(t);
        }
    }
    NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
}

/// The non-blank lines of `text` as JSON values, with their numbers.
fn lines<'a>(file: &'a Path, text: &'a str) -> impl Iterator<Item = Result<(usize, Value)>> + 'a {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(move |(i, line)| crate::input::parse_line(file, i + 1, line))
}

/// The bytes of a message that count against [`limits::MESSAGE_BYTES`]: every field it is
/// stored with (namespace, speaker, text, timestamp as written, ref, and each attachment's kind,
/// caption and url).
pub(crate) fn message_bytes(
    namespace: &str,
    speaker: &str,
    text: &str,
    timestamp: &str,
    external_ref: Option<&str>,
    attachments: &[Attachment],
) -> usize {
    namespace.len()
        + speaker.len()
        + text.len()
        + timestamp.len()
        + external_ref.map_or(0, str::len)
        + attachments
            .iter()
            .map(|a| {
                a.kind.len()
                    + a.caption.as_ref().map_or(0, String::len)
                    + a.url.as_ref().map_or(0, String::len)
            })
            .sum::<usize>()
}

/// Reads a JSONL conversation file (`-`: standard input), each line bounded (see
/// [`crate::input`]).
pub fn read_messages(file: &Path) -> Result<Vec<SourceMessage>> {
    Input::open(file)?.read_messages()
}

/// Parses JSONL conversation text; `file` is used in error messages.
pub fn parse_messages(file: &Path, text: &str) -> Result<Vec<SourceMessage>> {
    messages_from(file, lines(file, text))
}

/// Reads one message given as a JSON value, as line `line` of `file` (in error messages), alone:
/// no position is taken from other messages (the HTTP API's, Python's and MCP's appends). The
/// list holds that one message.
pub fn message_from_value(file: &Path, line: usize, value: Value) -> Result<Vec<SourceMessage>> {
    messages_from(file, std::iter::once(Ok((line, value))))
}

/// Reads messages from JSON lines (their numbers and values); `file` is used in error messages.
pub(crate) fn messages_from(
    file: &Path,
    records: impl Iterator<Item = Result<(usize, Value)>>,
) -> Result<Vec<SourceMessage>> {
    let mut next_seq: HashMap<(Namespace, u32), u32> = HashMap::new();
    let mut first_line: HashMap<trajwiki_core::MessageId, (usize, usize)> = HashMap::new();
    let mut out: Vec<SourceMessage> = Vec::new();
    for item in records {
        let (line, value) = item?;
        let rec = Record::new(file, Location::Line { line, column: None }, "", &value)?;
        let ns = rec.str("namespace")?;
        let namespace = Namespace::new(ns)
            .map_err(|e| rec.error("namespace", "a valid namespace name", e.to_string()))?;
        let session = rec.u32("session")?;
        let counter = next_seq.entry((namespace.clone(), session)).or_insert(0);
        let counted = *counter;
        let given = rec.opt_u32_in("seq", 1, u32::MAX, "a position")?;
        let seq = match given {
            Some(s) => s,
            None => counter.checked_add(1).ok_or_else(|| {
                rec.error(
                    "seq",
                    "a position given: the one after the last of this session is past 4294967295",
                    "nothing (missing)",
                )
            })?,
        };
        *counter = (*counter).max(seq);
        let ts_text = rec.str("timestamp")?;
        let timestamp = parse_timestamp(ts_text).ok_or_else(|| {
            rec.error(
                "timestamp",
                "a time like 2023-05-08T13:56:00 (or RFC 3339, or a date), in the years 1 to 9999",
                quote(ts_text),
            )
        })?;
        let mut attachments = Vec::new();
        for (a, att) in rec.opt_array("attachments")?.iter().enumerate() {
            let arec = rec.child(&format!("attachments[{a}]"), att)?;
            attachments.push(Attachment {
                kind: arec.str("kind")?.to_string(),
                caption: arec.opt_str("caption")?.map(str::to_string),
                url: arec.opt_str("url")?.map(str::to_string),
            });
        }
        let external_ref = match rec.opt_str("ref")? {
            Some(r) if r.trim().is_empty() => {
                return Err(rec.error("ref", "a non-empty string", "an empty string"))
            }
            r => r.map(str::to_string),
        };
        let (speaker, text) = (rec.name_str("speaker")?, rec.str("text")?);
        rec.limit(
            limits::MESSAGE_BYTES,
            message_bytes(
                ns,
                speaker,
                text,
                ts_text,
                external_ref.as_deref(),
                &attachments,
            ),
        )?;
        let message = SourceMessage::new(
            namespace,
            session,
            seq,
            speaker.to_string(),
            text.to_string(),
            timestamp,
            attachments,
            external_ref,
        );
        // The same message twice is one message; two different ones with one identity (a ref,
        // or a session and position, used twice) are an error in the file.
        match first_line.get(&message.id) {
            // The same line again (its position, when not given, counted on from the first):
            // one message, and it takes no position of its own.
            Some(&(_, i))
                if out[i]
                    == (SourceMessage {
                        seq: if given.is_none() { out[i].seq } else { seq },
                        ..message.clone()
                    }) =>
            {
                if let Some(c) = next_seq.get_mut(&(message.namespace.clone(), session)) {
                    *c = counted;
                }
            }
            Some(&(earlier, i)) if out[i] != message => {
                return Err(rec.error(
                    "ref",
                    &format!("a message of its own (line {earlier} has the same ref or session and position)"),
                    format!("{} where line {earlier} has {}", quote(&message.text), quote(&out[i].text)),
                ));
            }
            Some(_) => {}
            None => {
                first_line.insert(message.id.clone(), (line, out.len()));
                out.push(message);
            }
        }
    }
    Ok(out)
}

/// Reads a JSONL runs file (`-`: standard input), each line bounded (see [`crate::input`]).
/// `namespace` overrides the namespace of every run.
pub fn read_runs(file: &Path, namespace: Option<&Namespace>) -> Result<Vec<Run>> {
    Input::open(file)?.read_runs(namespace)
}

/// The fields of a run line that are not metadata.
const RUN_FIELDS: [&str; 6] = ["id", "namespace", "task", "steps", "success", "reward"];

/// Parses JSONL runs text; `file` is used in error messages and for the default namespace.
pub fn parse_runs(file: &Path, text: &str, namespace: Option<&Namespace>) -> Result<Vec<Run>> {
    let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("runs");
    runs_from(file, stem, lines(file, text), namespace)
}

/// Reads runs from JSON lines (their numbers and values); `file` is used in error messages,
/// `stem` is the namespace of runs that name none.
pub(crate) fn runs_from(
    file: &Path,
    stem: &str,
    records: impl Iterator<Item = Result<(usize, Value)>>,
    namespace: Option<&Namespace>,
) -> Result<Vec<Run>> {
    let mut first_line: HashMap<trajwiki_core::RunId, (usize, usize)> = HashMap::new();
    let mut out: Vec<Run> = Vec::new();
    for item in records {
        let (line, value) = item?;
        let rec = Record::new(file, Location::Line { line, column: None }, "", &value)?;
        let ns = match namespace {
            Some(ns) => ns.clone(),
            None => {
                let name = match rec.opt_str("namespace")? {
                    Some(n) => n,
                    None => rec.opt_str("env").ok().flatten().unwrap_or(stem),
                };
                Namespace::new(name)
                    .map_err(|e| rec.error("namespace", "a valid namespace name", e.to_string()))?
            }
        };
        let task = rec.str("task")?.to_string();
        let mut steps = Vec::new();
        for (s, step) in rec.opt_array("steps")?.iter().enumerate() {
            let srec = rec.child(&format!("steps[{s}]"), step)?;
            steps.push(Step {
                action: srec.str("action")?.to_string(),
                observation: srec.opt_str("observation")?.unwrap_or_default().to_string(),
            });
        }
        rec.limit(limits::RUN_STEPS, steps.len())?;
        let outcome = Outcome {
            success: rec.opt_bool("success")?,
            reward: rec.opt_f64("reward")?,
        };
        let metadata: BTreeMap<String, Value> = rec
            .obj
            .iter()
            .filter(|(k, _)| !RUN_FIELDS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let external_ref = match rec.opt_str("id")? {
            Some(id) if !id.trim().is_empty() => id.to_string(),
            Some(_) => return Err(rec.error("id", "a non-empty string", "an empty string")),
            None => {
                // No id: address the run by its content, so re-ingesting the file is a no-op.
                let body = serde_json::to_string(&value).unwrap_or_default();
                format!("sha-{}", &content_hash([body.as_str()])[..16])
            }
        };
        rec.limit(
            limits::RUN_BYTES,
            run_bytes(&ns, &external_ref, &task, &steps, &metadata),
        )?;
        let run = Run::new(ns, external_ref, task, steps, outcome, metadata);
        match first_line.get(&run.id) {
            Some(&(earlier, i)) if out[i] != run => {
                return Err(rec.error(
                    "id",
                    &format!("a run of its own (line {earlier} has the same id)"),
                    format!("{} again, with other content", quote(&run.external_ref)),
                ));
            }
            Some(_) => {}
            None => {
                first_line.insert(run.id.clone(), (line, out.len()));
                out.push(run);
            }
        }
    }
    Ok(out)
}

/// The bytes of a run that count against [`limits::RUN_BYTES`]: every field it is stored with
/// (namespace, id, task, each step's action and observation, and each metadata field's name and
/// value as JSON).
fn run_bytes(
    namespace: &Namespace,
    id: &str,
    task: &str,
    steps: &[Step],
    metadata: &BTreeMap<String, Value>,
) -> usize {
    namespace.as_str().len()
        + id.len()
        + task.len()
        + steps
            .iter()
            .map(|s| s.action.len() + s.observation.len())
            .sum::<usize>()
        + metadata
            .iter()
            .map(|(k, v)| k.len() + v.to_string().len())
            .sum::<usize>()
}

/// Writes messages as JSONL in the format [`parse_messages`] reads.
pub fn write_messages(out: &mut impl Write, messages: &[SourceMessage]) -> std::io::Result<()> {
    for m in messages {
        let mut obj = Map::new();
        obj.insert("namespace".into(), json!(m.namespace.as_str()));
        obj.insert("session".into(), json!(m.session));
        obj.insert("seq".into(), json!(m.seq));
        obj.insert("speaker".into(), json!(m.speaker));
        obj.insert("text".into(), json!(m.text));
        obj.insert(
            "timestamp".into(),
            // Fractional seconds, where the message has them, are kept (`%.f` writes none for 0).
            json!(m
                .timestamp
                .format(&format!("{TIMESTAMP_FORMAT}%.f"))
                .to_string()),
        );
        if let Some(r) = &m.external_ref {
            obj.insert("ref".into(), json!(r));
        }
        if !m.attachments.is_empty() {
            obj.insert("attachments".into(), serde_json::to_value(&m.attachments)?);
        }
        serde_json::to_writer(&mut *out, &Value::Object(obj))?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// Writes runs as JSONL in the format [`parse_runs`] reads.
pub fn write_runs(out: &mut impl Write, runs: &[Run]) -> std::io::Result<()> {
    for r in runs {
        let mut obj: Map<String, Value> = r
            .metadata
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        obj.insert("id".into(), json!(r.external_ref));
        obj.insert("namespace".into(), json!(r.namespace.as_str()));
        obj.insert("task".into(), json!(r.task));
        obj.insert("steps".into(), serde_json::to_value(&r.steps)?);
        if let Some(s) = r.outcome.success {
            obj.insert("success".into(), json!(s));
        }
        if let Some(x) = r.outcome.reward {
            obj.insert("reward".into(), json!(x));
        }
        serde_json::to_writer(&mut *out, &Value::Object(obj))?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::IngestError;

    #[test]
    fn messages_round_trip() {
        let text = r#"{"namespace": "a", "session": 1, "speaker": "Ann", "text": "Hi", "timestamp": "2023-05-08T13:56:00", "ref": "x1"}
{"namespace": "a", "session": 1, "speaker": "Bob", "text": "Hey", "timestamp": "2023-05-08 13:57", "attachments": [{"kind": "image", "caption": "a cat"}]}

{"namespace": "a", "session": 2, "speaker": "Ann", "text": "Later", "timestamp": "2023-05-09"}
"#;
        let msgs = parse_messages(Path::new("c.jsonl"), text).unwrap();
        assert_eq!(msgs.len(), 3);
        assert_eq!((msgs[1].session, msgs[1].seq), (1, 2));
        assert_eq!((msgs[2].session, msgs[2].seq), (2, 1));
        let mut buf = Vec::new();
        write_messages(&mut buf, &msgs).unwrap();
        let again =
            parse_messages(Path::new("c.jsonl"), std::str::from_utf8(&buf).unwrap()).unwrap();
        assert_eq!(msgs, again);
    }

    #[test]
    fn message_errors_name_line_and_field() {
        let text = "{\"namespace\": \"a\", \"session\": 1, \"speaker\": \"A\", \"text\": \"x\", \"timestamp\": \"2023-05-08\"}\n{\"namespace\": \"a\", \"session\": \"one\", \"speaker\": \"A\", \"text\": \"x\", \"timestamp\": \"2023-05-08\"}\n";
        let err = parse_messages(Path::new("c.jsonl"), text)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("c.jsonl: line 2")
                && err.contains("`session`")
                && err.contains("string \"one\""),
            "{err}"
        );
        let err = parse_messages(Path::new("c.jsonl"), "{\"namespace\": \"a\", \"session\": 1, \"speaker\": \"A\", \"text\": \"x\", \"timestamp\": \"May\"}").unwrap_err().to_string();
        assert!(
            err.contains("`timestamp`") && err.contains("\"May\""),
            "{err}"
        );
        let err = parse_messages(Path::new("c.jsonl"), "{\"namespace\": \"a\"").unwrap_err();
        assert!(matches!(
            err,
            IngestError::Syntax {
                at: Location::Line { line: 1, .. },
                ..
            }
        ));
    }

    #[test]
    fn runs_round_trip_and_namespace() {
        let text = r#"{"id": "r1", "env": "shop", "task": "buy", "steps": [{"action": "search[x]", "observation": "ok"}], "reward": 0.5, "success": false, "agent": "ReAct"}
{"id": "r2", "env": "shop", "task": "none", "steps": null, "success": true}
"#;
        let runs = parse_runs(Path::new("runs.jsonl"), text, None).unwrap();
        assert_eq!(runs[0].namespace.as_str(), "shop");
        assert_eq!(runs[0].outcome.reward, Some(0.5));
        assert_eq!(runs[0].metadata["agent"], json!("ReAct"));
        assert!(runs[1].steps.is_empty());
        let mut buf = Vec::new();
        write_runs(&mut buf, &runs).unwrap();
        let again = parse_runs(
            Path::new("other.jsonl"),
            std::str::from_utf8(&buf).unwrap(),
            None,
        )
        .unwrap();
        assert_eq!(runs, again);
        let ns = Namespace::new("override").unwrap();
        assert_eq!(
            parse_runs(Path::new("r.jsonl"), text, Some(&ns)).unwrap()[0].namespace,
            ns
        );
        let err = parse_runs(Path::new("r.jsonl"), r#"{"id": "x", "steps": []}"#, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 1") && err.contains("`task`"), "{err}");
    }
}
