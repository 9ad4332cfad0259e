//! The LoCoMo benchmark layout (`locomo10.json`): a JSON array of samples, each with a
//! conversation split into sessions and a list of QA items.
//!
//! Quirks handled (see `shared/data/README.md`): malformed evidence ids (extra spaces, `D:` typos,
//! several ids in one string) are normalised; evidence pointing at turns that do not exist is kept
//! but reported as dangling; integer answers become strings; category 5 keeps its answer under
//! `adversarial_answer`; sessions may have a date and no turns; shared photos become image
//! attachments whose caption is evidence; every turn gets its session's timestamp.

use std::collections::BTreeSet;
use std::path::Path;

use chrono::NaiveDateTime;
use serde::Serialize;
use serde_json::Value;
use trajwiki_core::limits;
use trajwiki_core::{Attachment, Namespace, SourceMessage, Timestamp};

use crate::error::{quote, IngestError, Location, Result};
use crate::fields::Record;
use crate::input::Input;

/// One LoCoMo conversation and its questions.
#[derive(Debug, Clone, PartialEq)]
pub struct LocomoSample {
    /// The sample id (`conv-26`), also the namespace.
    pub namespace: Namespace,
    /// The two speakers.
    pub speakers: [String; 2],
    /// Sessions in order, including those without turns.
    pub sessions: Vec<LocomoSession>,
    /// The conversation's messages, in session and turn order.
    pub messages: Vec<SourceMessage>,
    /// The questions, in file order.
    pub qa: Vec<QaItem>,
}

/// One session of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LocomoSession {
    /// The session number (`N` of `session_N`).
    pub index: u32,
    /// When it took place.
    pub timestamp: Timestamp,
    /// The original text, e.g. `1:56 pm on 8 May, 2023`.
    pub date_time: String,
    /// How many turns it has (possibly none).
    pub turns: usize,
}

/// A LoCoMo question category.
pub const CATEGORY_NAMES: [(u8, &str); 5] = [
    (1, "multi-hop"),
    (2, "temporal"),
    (3, "open-domain"),
    (4, "single-hop"),
    (5, "adversarial"),
];

/// The name of a LoCoMo category number.
pub fn category_name(category: u8) -> &'static str {
    CATEGORY_NAMES
        .iter()
        .find(|(n, _)| *n == category)
        .map(|(_, name)| *name)
        .unwrap_or("unknown")
}

/// One question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QaItem {
    /// Position in the sample's `qa` list, from 0.
    pub qa_index: usize,
    /// The question.
    pub question: String,
    /// The gold answer (integers rendered as text); `None` for adversarial questions.
    pub answer: Option<String>,
    /// The answer a model would give if fooled (category 5 only).
    pub adversarial_answer: Option<String>,
    /// 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial.
    pub category: u8,
    /// Normalised evidence refs that name existing turns, in file order, deduplicated.
    pub evidence: Vec<String>,
    /// Normalised evidence refs that name turns the conversation does not have.
    pub dangling_evidence: Vec<String>,
    /// The evidence strings as they appear in the file.
    pub raw_evidence: Vec<String>,
}

/// Extracts the dialogue ids in an evidence string, tolerating the typos found in LoCoMo:
/// `"D8:6; D9:17"` → `[D8:6, D9:17]`, `"D:11:26"` → `[D11:26]`, `" D 3 : 12"` → `[D3:12]`,
/// `"D03:5"` → `[D3:5]`; text with no session and turn number (`"D"`) yields nothing.
pub fn normalize_evidence(raw: &str) -> Vec<String> {
    let chars: Vec<char> = raw.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let skip = |i: &mut usize, set: &[char]| {
        while *i < chars.len() && (chars[*i].is_whitespace() || set.contains(&chars[*i])) {
            *i += 1;
        }
    };
    let number = |i: &mut usize| -> Option<u64> {
        let start = *i;
        while *i < chars.len() && chars[*i].is_ascii_digit() {
            *i += 1;
        }
        chars[start..*i].iter().collect::<String>().parse().ok()
    };
    while i < chars.len() {
        if chars[i] != 'D' && chars[i] != 'd' {
            i += 1;
            continue;
        }
        let mut j = i + 1;
        skip(&mut j, &[':']);
        let Some(session) = number(&mut j) else {
            i += 1;
            continue;
        };
        skip(&mut j, &[]);
        if j >= chars.len() || chars[j] != ':' {
            i = j;
            continue;
        }
        j += 1;
        skip(&mut j, &[]);
        match number(&mut j) {
            Some(turn) => {
                out.push(format!("D{session}:{turn}"));
                i = j;
            }
            None => i = j,
        }
    }
    out
}

/// Parses a LoCoMo session time such as `1:56 pm on 8 May, 2023`.
pub fn parse_session_time(text: &str) -> Option<Timestamp> {
    let cleaned = text.split_whitespace().collect::<Vec<_>>().join(" ");
    [
        "%I:%M %p on %d %B, %Y",
        "%I:%M %p on %d %b, %Y",
        "%H:%M on %d %B, %Y",
    ]
    .iter()
    .find_map(|fmt| NaiveDateTime::parse_from_str(&cleaned, fmt).ok())
}

/// Reads a LoCoMo file (`-`: standard input), parsed as it streams in and bounded by
/// [`limits::DOCUMENT_BYTES`] (see [`crate::input`]).
pub fn read_locomo(path: &Path) -> Result<Vec<LocomoSample>> {
    Input::open(path)?.read_locomo()
}

/// Parses LoCoMo JSON text; `file` is used in error messages.
pub fn parse_locomo(file: &Path, text: &str) -> Result<Vec<LocomoSample>> {
    let root: Value = serde_json::from_str(text).map_err(|e| IngestError::Syntax {
        file: file.to_path_buf(),
        at: Location::Line {
            line: e.line(),
            column: Some(e.column()),
        },
        message: e.to_string(),
    })?;
    samples_of(file, &root)
}

/// The samples of a parsed LoCoMo document; `file` is used in error messages.
pub(crate) fn samples_of(file: &Path, root: &Value) -> Result<Vec<LocomoSample>> {
    let samples = root.as_array().ok_or_else(|| IngestError::Field {
        file: file.to_path_buf(),
        at: Location::Record("(top level)".into()),
        field: "(document)".into(),
        expected: "an array of LoCoMo samples".into(),
        found: crate::error::describe(Some(root)),
    })?;
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(samples.len());
    for (i, sample) in samples.iter().enumerate() {
        let parsed = parse_sample(file, i, sample)?;
        if !seen.insert(parsed.namespace.clone()) {
            return Err(IngestError::Field {
                file: file.to_path_buf(),
                at: Location::Record(format!("[{i}]")),
                field: "sample_id".into(),
                expected: "a sample id not used by an earlier sample".into(),
                found: format!("duplicate {}", quote(parsed.namespace.as_str())),
            });
        }
        out.push(parsed);
    }
    Ok(out)
}

/// The session numbers of a conversation, in order, from its keys. A conversation holds
/// `speaker_a`, `speaker_b`, and per session `session_N` (its turns, which may be absent) and
/// `session_N_date_time`, where N is a whole number from 0 to 4294967295 written in decimal
/// without a sign or leading zeros. Any other key is an error naming it, so that no session is
/// left out unsaid (`session_01`, `session_-3`, `session_4294967296`).
fn session_numbers(conv: &Record<'_>) -> Result<BTreeSet<u32>> {
    let mut numbers = BTreeSet::new();
    for key in conv.obj.keys() {
        if key == "speaker_a" || key == "speaker_b" {
            continue;
        }
        let digits = key
            .strip_prefix("session_")
            .map(|rest| rest.strip_suffix("_date_time").unwrap_or(rest));
        let number = digits
            .filter(|d| d == &"0" || (!d.starts_with('0') && d.bytes().all(|b| b.is_ascii_digit())))
            .and_then(|d| d.parse::<u32>().ok());
        match number {
            Some(n) => {
                numbers.insert(n);
            }
            None => {
                return Err(IngestError::Field {
                    file: conv.file.to_path_buf(),
                    at: conv.at.clone(),
                    field: conv.prefix.clone(),
                    expected: "keys `speaker_a`, `speaker_b`, `session_N` and `session_N_date_time`, N a whole number from 0 to 4294967295 written without sign or leading zeros".into(),
                    found: format!("the key {}", quote(key)),
                })
            }
        }
    }
    Ok(numbers)
}

fn parse_sample(file: &Path, i: usize, value: &Value) -> Result<LocomoSample> {
    let top = Record::new(file, Location::Record(format!("[{i}]")), "", value)?;
    let sample_id = top.str("sample_id")?;
    let namespace = Namespace::new(sample_id)
        .map_err(|e| top.error("sample_id", "a valid namespace name", e.to_string()))?;
    let at = Location::Record(sample_id.to_string());
    let top = Record::new(file, at.clone(), "", value)?;
    let conv_value = top
        .get("conversation")
        .ok_or_else(|| top.error("conversation", "an object", "nothing (missing)"))?;
    let conv = top.child("conversation", conv_value)?;
    let speakers = [
        conv.name_str("speaker_a")?.to_string(),
        conv.name_str("speaker_b")?.to_string(),
    ];

    let numbers = session_numbers(&conv)?;
    let mut sessions = Vec::new();
    let mut messages = Vec::new();
    let mut refs = BTreeSet::new();
    for n in numbers {
        let date_key = format!("session_{n}_date_time");
        let date_time = conv.str(&date_key)?;
        let timestamp = parse_session_time(date_time).ok_or_else(|| {
            conv.error(
                &date_key,
                "a time like `1:56 pm on 8 May, 2023`",
                quote(date_time),
            )
        })?;
        let turns_key = format!("session_{n}");
        let turns = conv.opt_array(&turns_key)?;
        for (t, turn) in turns.iter().enumerate() {
            let field = format!("{turns_key}[{t}]");
            let rec = conv.child(&field, turn)?;
            let speaker = rec.name_str("speaker")?.to_string();
            let text = rec.str("text")?.to_string();
            let dia_id = rec.str("dia_id")?;
            let external_ref = normalize_evidence(dia_id)
                .into_iter()
                .next()
                .filter(|_| !dia_id.trim().is_empty())
                .ok_or_else(|| rec.error("dia_id", "a dialogue id like `D3:12`", quote(dia_id)))?;
            if !refs.insert(external_ref.clone()) {
                return Err(rec.error(
                    "dia_id",
                    "an id not used by an earlier turn",
                    format!("duplicate {external_ref}"),
                ));
            }
            let caption = rec.opt_str("blip_caption")?;
            let url = match rec.get("img_url") {
                Some(Value::Array(urls)) => urls.iter().find_map(Value::as_str),
                Some(Value::String(u)) => Some(u.as_str()),
                _ => None,
            };
            let attachments = if caption.is_some() || url.is_some() {
                vec![Attachment {
                    kind: "image".into(),
                    caption: caption.map(str::to_string),
                    url: url.map(str::to_string),
                }]
            } else {
                vec![]
            };
            rec.limit(
                limits::MESSAGE_BYTES,
                crate::jsonl::message_bytes(
                    namespace.as_str(),
                    &speaker,
                    &text,
                    date_time,
                    Some(&external_ref),
                    &attachments,
                ),
            )?;
            messages.push(SourceMessage::new(
                namespace.clone(),
                n,
                t as u32 + 1,
                speaker,
                text,
                timestamp,
                attachments,
                Some(external_ref),
            ));
        }
        sessions.push(LocomoSession {
            index: n,
            timestamp,
            date_time: date_time.to_string(),
            turns: turns.len(),
        });
    }

    let qa_values = top.opt_array("qa")?;
    let mut qa = Vec::with_capacity(qa_values.len());
    for (q, item) in qa_values.iter().enumerate() {
        let rec = top.child(&format!("qa[{q}]"), item)?;
        let category = rec.u32_in("category", 1, 5, "an integer")?;
        let answer_text = |field: &str| -> Result<Option<String>> {
            match rec.get(field) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(Value::Number(n)) => Ok(Some(n.to_string())),
                Some(Value::Bool(b)) => Ok(Some(b.to_string())),
                Some(_) => Err(rec.error(
                    field,
                    "a string or a number",
                    crate::error::describe(rec.get(field)),
                )),
            }
        };
        let mut raw_evidence = Vec::new();
        let mut evidence = Vec::new();
        let mut dangling = Vec::new();
        for (e, ev) in rec.opt_array("evidence")?.iter().enumerate() {
            let ev = ev.as_str().ok_or_else(|| {
                rec.error(
                    &format!("evidence[{e}]"),
                    "a string",
                    crate::error::describe(Some(ev)),
                )
            })?;
            raw_evidence.push(ev.to_string());
            for r in normalize_evidence(ev) {
                let bucket = if refs.contains(&r) {
                    &mut evidence
                } else {
                    &mut dangling
                };
                if !bucket.contains(&r) {
                    bucket.push(r);
                }
            }
        }
        qa.push(QaItem {
            qa_index: q,
            question: rec.str("question")?.to_string(),
            answer: answer_text("answer")?,
            adversarial_answer: answer_text("adversarial_answer")?,
            category: category as u8,
            evidence,
            dangling_evidence: dangling,
            raw_evidence,
        });
    }
    Ok(LocomoSample {
        namespace,
        speakers,
        sessions,
        messages,
        qa,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evidence_quirks() {
        assert_eq!(normalize_evidence("D1:3"), ["D1:3"]);
        assert_eq!(normalize_evidence("D8:6; D9:17"), ["D8:6", "D9:17"]);
        assert_eq!(normalize_evidence("D:11:26"), ["D11:26"]);
        assert_eq!(normalize_evidence(" D 3 : 12 "), ["D3:12"]);
        assert_eq!(normalize_evidence("D03:05"), ["D3:5"]);
        assert_eq!(normalize_evidence("D8:6 D9:17"), ["D8:6", "D9:17"]);
        assert!(normalize_evidence("D").is_empty());
        assert!(normalize_evidence("").is_empty());
    }

    #[test]
    fn session_times() {
        let t = parse_session_time("1:56 pm on 8 May, 2023").unwrap();
        assert_eq!(t.to_string(), "2023-05-08 13:56:00");
        let t = parse_session_time("10:37 am on 27 June, 2023").unwrap();
        assert_eq!(t.to_string(), "2023-06-27 10:37:00");
        let t = parse_session_time("12:09 am on 1 January, 2024").unwrap();
        assert_eq!(t.to_string(), "2024-01-01 00:09:00");
        assert!(parse_session_time("yesterday").is_none());
        assert!(parse_session_time("25:00 pm on 8 May, 2023").is_none());
    }

    fn doc(qa: &str, session1: &str) -> String {
        format!(
            r#"[{{"sample_id": "s1", "conversation": {{"speaker_a": "Ann", "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": {session1},
            "session_2_date_time": "2:00 pm on 9 May, 2023"}}, "qa": {qa}}}]"#
        )
    }

    #[test]
    fn sample_with_quirks() {
        let text = doc(
            r#"[{"question": "q?", "answer": 2022, "evidence": ["D1:2; D1:1", "D", "D1:9"], "category": 2},
                {"question": "adv?", "adversarial_answer": "x", "evidence": [], "category": 5}]"#,
            r#"[{"speaker": "Ann", "dia_id": "D1:1", "text": "Hi"},
                {"speaker": "Bob", "dia_id": "D1:2", "text": "Look", "img_url": ["http://x/y.jpg"], "blip_caption": "a photo of a dog"}]"#,
        );
        let samples = parse_locomo(Path::new("t.json"), &text).unwrap();
        let s = &samples[0];
        assert_eq!(s.messages.len(), 2);
        assert_eq!(s.sessions.len(), 2);
        assert_eq!(s.sessions[1].turns, 0);
        assert_eq!(
            s.messages[1].attachments[0].caption.as_deref(),
            Some("a photo of a dog")
        );
        assert_eq!(s.qa[0].answer.as_deref(), Some("2022"));
        assert_eq!(s.qa[0].evidence, ["D1:2", "D1:1"]);
        assert_eq!(s.qa[0].dangling_evidence, ["D1:9"]);
        assert_eq!(s.qa[1].answer, None);
        assert_eq!(s.qa[1].adversarial_answer.as_deref(), Some("x"));
    }

    /// A conversation whose second session has the key `key`.
    fn with_session(key: &str) -> String {
        format!(
            r#"[{{"sample_id": "s1", "conversation": {{"speaker_a": "Ann", "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [{{"speaker": "Ann", "dia_id": "D1:1", "text": "Hi"}}],
            "{key}_date_time": "2:00 pm on 9 May, 2023",
            "{key}": [{{"speaker": "Bob", "dia_id": "D2:1", "text": "Yo"}}]}}, "qa": []}}]"#
        )
    }

    #[test]
    fn session_keys_follow_one_rule() {
        for bad in [
            "session_-3",
            "session_01",
            "session_4294967296",
            "session_99999999999999999999",
            "session_+2",
            "session_",
            "Session_2",
        ] {
            let err = parse_locomo(Path::new("t.json"), &with_session(bad))
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("record s1")
                    && err.contains(bad)
                    && err.contains("from 0 to 4294967295 written without sign or leading zeros"),
                "{bad}: {err}"
            );
        }
        for (good, n) in [
            ("session_0", 0),
            ("session_2", 2),
            ("session_4294967295", u32::MAX),
        ] {
            let samples = parse_locomo(Path::new("t.json"), &with_session(good)).unwrap();
            assert_eq!(samples[0].messages.len(), 2, "{good}");
            assert!(samples[0].messages.iter().any(|m| m.session == n), "{good}");
        }
        // Turns without a date: the date is asked for, the turns are not dropped.
        let undated = with_session("session_2")
            .replace(r#""session_2_date_time": "2:00 pm on 9 May, 2023","#, "");
        let err = parse_locomo(Path::new("t.json"), &undated)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("conversation.session_2_date_time") && err.contains("missing"),
            "{err}"
        );
    }

    #[test]
    fn errors_name_the_place() {
        let text = doc("[]", r#"[{"speaker": "Ann", "dia_id": "D1:1"}]"#);
        let err = parse_locomo(Path::new("t.json"), &text)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("t.json")
                && err.contains("record s1")
                && err.contains("conversation.session_1[0].text"),
            "{err}"
        );
        let err = parse_locomo(Path::new("t.json"), &text[..40]).unwrap_err();
        assert!(
            matches!(
                err,
                IngestError::Syntax {
                    at: Location::Line { line: 1, .. },
                    ..
                }
            ),
            "{err}"
        );
        let bad_time = doc("[]", "[]").replace("1:56 pm on 8 May, 2023", "soon");
        let err = parse_locomo(Path::new("t.json"), &bad_time)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("session_1_date_time") && err.contains("\"soon\""),
            "{err}"
        );
    }
}
