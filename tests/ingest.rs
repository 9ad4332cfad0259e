//! End-to-end ingestion through the `trajwiki` binary: LoCoMo, runs, the demo conversation,
//! malformed inputs, export round trips.

mod common;

use common::{demo, ok, s, shared_data, stats, trajwiki};

#[test]
fn locomo7_ingests_once() {
    let Some(locomo) = shared_data("locomo/locomo7.json") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let out = ok(&["ingest", "--store", s(&store), s(&locomo)]);
    assert!(out.contains("4124 new messages"), "{out}");
    let st = stats(&store);
    assert_eq!(st["namespaces"], 7);
    assert_eq!(st["messages"], 4124);
    let out = ok(&["ingest", "--store", s(&store), s(&locomo)]);
    assert!(
        out.contains("0 new messages (4124 already stored)"),
        "{out}"
    );
    assert_eq!(stats(&store)["messages"], 4124);
    assert_eq!(
        stats(&store)["ingest_batches"],
        1,
        "a no-op ingest leaves no batch behind"
    );
    ok(&["check", "--store", s(&store)]);

    // The loader that feeds the evaluation parses every question.
    let samples = trajwiki::ingest::locomo::read_locomo(&locomo).unwrap();
    let qa: usize = samples.iter().map(|s| s.qa.len()).sum();
    assert_eq!(qa, 1347);
    let scored = samples
        .iter()
        .flat_map(|s| &s.qa)
        .filter(|q| q.category != 5)
        .count();
    assert_eq!(scored, 1035);
    let adversarial = samples
        .iter()
        .flat_map(|s| &s.qa)
        .filter(|q| q.category == 5);
    assert!(adversarial
        .clone()
        .all(|q| q.adversarial_answer.is_some() || q.answer.is_some()));
    // Every normalised evidence ref resolves to a stored message or is reported dangling.
    let conv26 = &samples[0];
    let shown = ok(&[
        "show",
        "--store",
        s(&store),
        "--namespace",
        conv26.namespace.as_str(),
        "D1:3",
        "--json",
    ]);
    let msg: serde_json::Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(
        msg["text"],
        "I went to a LGBTQ support group yesterday and it was so powerful."
    );
    assert_eq!(msg["timestamp"], "2023-05-08T13:56:00");
    let captions = samples
        .iter()
        .flat_map(|s| &s.messages)
        .filter(|m| !m.attachments.is_empty())
        .count();
    assert!(
        captions > 800,
        "image captions are attachments ({captions})"
    );
    assert!(
        samples
            .iter()
            .any(|s| s.sessions.iter().any(|x| x.turns == 0)),
        "sessions with a date and no turns"
    );
}

#[test]
fn runs_ingest_and_show() {
    let Some(runs) = shared_data("runs/react_webshop_500.jsonl") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let out = ok(&["ingest", "--store", s(&store), "--format", "runs", s(&runs)]);
    assert!(out.contains("500 new runs"), "{out}");
    assert_eq!(stats(&store)["runs"], 500);
    let exported = ok(&["export", "--store", s(&store), "--namespace", "webshop"]);
    let first: serde_json::Value = serde_json::from_str(exported.lines().next().unwrap()).unwrap();
    let id = trajwiki::core::RunId::derive(
        &trajwiki::core::Namespace::new("webshop").unwrap(),
        first["id"].as_str().unwrap(),
    );
    let shown = ok(&["show", "--store", s(&store), id.as_str()]);
    assert!(
        shown.contains("task: ") && shown.contains("steps (") && shown.contains("outcome: "),
        "{shown}"
    );
    // Export round-trips: a fresh store ingesting the export exports the same bytes.
    let file = dir.path().join("webshop.jsonl");
    std::fs::write(&file, &exported).unwrap();
    let other = dir.path().join("other");
    ok(&["ingest", "--store", s(&other), s(&file)]);
    assert_eq!(
        ok(&["export", "--store", s(&other), "--namespace", "webshop"]),
        exported
    );
}

#[test]
fn demo_round_trips_through_export() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    ok(&["ingest", "--store", s(&store), s(&demo())]);
    let exported = ok(&["export", "--store", s(&store), "--namespace", "demo"]);
    assert_eq!(exported.lines().count(), 12);
    let file = dir.path().join("again.jsonl");
    std::fs::write(&file, &exported).unwrap();
    let out = ok(&["ingest", "--store", s(&store), s(&file)]);
    assert!(out.contains("0 new messages (12 already stored)"), "{out}");
    let other = dir.path().join("other");
    ok(&["ingest", "--store", s(&other), s(&file)]);
    assert_eq!(
        ok(&["export", "--store", s(&other), "--namespace", "demo"]),
        exported
    );
}

const GOOD: &str = r#"{"namespace": "n", "session": 1, "speaker": "Ann", "text": "I live in Oslo.", "timestamp": "2024-01-01T10:00:00", "ref": "A1"}"#;

/// Each malformed input exits 2 with an error naming the file, the place and the field, and
/// leaves the store as it was.
#[test]
fn malformed_inputs_are_refused_whole() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    ok(&["ingest", "--store", s(&store), s(&demo())]);
    let before = (
        stats(&store),
        ok(&["export", "--store", s(&store), "--namespace", "demo"]),
    );
    let line2 = |second: &str| format!("{GOOD}\n{second}\n");
    let cases: Vec<(&str, String, &str, Vec<&str>)> = vec![
        ("truncated.json", r#"[{"sample_id": "x", "conversation": {"speaker_a": "A""#.to_string(), "locomo", vec!["truncated.json", "line 1", "invalid JSON"]),
        (
            "missing.jsonl",
            line2(r#"{"namespace": "n", "session": 1, "speaker": "Ann", "timestamp": "2024-01-01T10:00:00"}"#),
            "messages",
            vec!["missing.jsonl", "line 2", "field `text`", "expected a string", "missing"],
        ),
        (
            "wrongtype.jsonl",
            line2(r#"{"namespace": "n", "session": "two", "speaker": "Ann", "text": "x", "timestamp": "2024-01-01T10:00:00"}"#),
            "messages",
            vec!["wrongtype.jsonl", "line 2", "field `session`", "an integer from 0 to 4294967295", "string \"two\""],
        ),
        (
            "badtime.jsonl",
            line2(r#"{"namespace": "n", "session": 1, "speaker": "Ann", "text": "x", "timestamp": "next Tuesday"}"#),
            "messages",
            vec!["badtime.jsonl", "line 2", "field `timestamp`", "\"next Tuesday\""],
        ),
        (
            "dupref.jsonl",
            line2(r#"{"namespace": "n", "session": 1, "speaker": "Ann", "text": "I live in Paris.", "timestamp": "2024-01-01T10:00:00", "ref": "A1"}"#),
            "messages",
            vec!["dupref.jsonl", "line 2", "line 1 has the same ref", "I live in Oslo.", "I live in Paris."],
        ),
        (
            "badrun.jsonl",
            "{\"id\": \"r\", \"task\": \"t\", \"steps\": [{\"observation\": \"o\"}]}\n".to_string(),
            "runs",
            vec!["badrun.jsonl", "line 1", "field `steps[0].action`"],
        ),
        (
            "badlocomo.json",
            r#"[{"sample_id": "x", "conversation": {"speaker_a": "A", "speaker_b": "B", "session_1_date_time": "noon-ish", "session_1": []}, "qa": []}]"#.to_string(),
            "locomo",
            vec!["badlocomo.json", "record x", "field `conversation.session_1_date_time`", "\"noon-ish\""],
        ),
    ];
    for (name, content, format, expected) in cases {
        let file = dir.path().join(name);
        std::fs::write(&file, content).unwrap();
        let (code, _out, err) =
            trajwiki(&["ingest", "--store", s(&store), "--format", format, s(&file)]);
        assert_eq!(code, 2, "{name}: exit code, stderr:\n{err}");
        for part in expected {
            assert!(err.contains(part), "{name}: expected {part:?} in:\n{err}");
        }
        let after = (
            stats(&store),
            ok(&["export", "--store", s(&store), "--namespace", "demo"]),
        );
        assert_eq!(before, after, "{name} changed the store");
        ok(&["check", "--store", s(&store)]);
    }
    // A conflict with what the store already holds names both versions too.
    let file = dir.path().join("conflict.jsonl");
    let demo_line = std::fs::read_to_string(demo())
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .replace("pottery workshop", "yoga class");
    std::fs::write(&file, demo_line).unwrap();
    let (code, _, err) = trajwiki(&["ingest", "--store", s(&store), s(&file)]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("pottery workshop") && err.contains("yoga class"),
        "{err}"
    );
    assert_eq!(before.0, stats(&store));
}

#[test]
fn usage_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nothing");
    assert_eq!(trajwiki(&["stats", "--store", s(&missing)]).0, 2);
    assert_eq!(trajwiki(&["frobnicate"]).0, 2);
    let store = dir.path().join("store");
    ok(&["ingest", "--store", s(&store), s(&demo())]);
    let (code, _, err) = trajwiki(&["show", "--store", s(&store), "not-an-id"]);
    assert_eq!(code, 2);
    assert!(err.contains("not a trajwiki id"), "{err}");
    assert_eq!(
        trajwiki(&["show", "--store", s(&store), "msg_0123456789abcdef"]).0,
        2
    );
    assert_eq!(
        trajwiki(&["export", "--store", s(&store), "--namespace", "nope"]).0,
        2
    );
    let shown = ok(&["show", "--store", s(&store), "--namespace", "demo", "S1:3"]);
    assert!(shown.contains("lopsided blue clay bowl"), "{shown}");
}
