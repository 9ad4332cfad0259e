//! End-to-end ingestion through the `trajwiki` binary: LoCoMo, runs, the demo conversation,
//! malformed inputs, export round trips.

mod common;

use std::path::Path;

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

/// Runs `trajwiki` with `args` under a 30 s timeout, writing `stdin` (when given) on a thread;
/// (exit code, stdout, stderr).
fn run_fed(program: &str, args: &[&str], stdin: Option<Vec<u8>>) -> (i32, String, String) {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = std::process::Command::new("timeout")
        .arg("30")
        .arg(program)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let writer = stdin.map(|bytes| {
        let mut pipe = child.stdin.take().unwrap();
        std::thread::spawn(move || {
            let _ = pipe.write_all(&bytes);
        })
    });
    let out = child.wait_with_output().unwrap();
    if let Some(w) = writer {
        w.join().unwrap();
    }
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A case of a fed ingest: its name, arguments (the store third), standard input, what it says,
/// and which count of the store it fills, to what.
type Fed<'a> = (&'a str, Vec<String>, Option<Vec<u8>>, &'a str, &'a str, u64);

/// Inputs that can be read only once are read once: `-` (standard input, with the format told
/// from what arrives or given), `/dev/stdin` from a pipe, a process substitution, a named FIFO;
/// conversations, runs and LoCoMo alike. Each stores all its records and names its input.
#[test]
fn pipes_fifos_and_stdin_are_read_once() {
    let dir = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_trajwiki");
    let demo_text = std::fs::read(demo()).unwrap();
    let runs = demo().with_file_name("runs.jsonl");
    let locomo = dir.path().join("l.json");
    std::fs::write(
        &locomo,
        r#"[{"sample_id": "lc", "conversation": {"speaker_a": "Ann", "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "I moved to Oslo."},
                      {"speaker": "Bob", "dia_id": "D1:2", "text": "Nice."}]}, "qa": []}]"#,
    )
    .unwrap();
    let fifo = dir.path().join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let fifo_writer = {
        let (fifo, text) = (fifo.clone(), demo_text.clone());
        std::thread::spawn(move || std::fs::write(fifo, text).unwrap())
    };
    let substitute = r#"exec "$0" ingest --store "$1" <(cat "$2")"#;
    let store = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let cases: Vec<Fed> = vec![
        (
            "stdin-auto",
            vec!["ingest".into(), "--store".into(), store("a"), "-".into()],
            Some(demo_text.clone()),
            "<stdin>: 12 new messages",
            "messages",
            12,
        ),
        (
            "stdin-messages",
            vec![
                "ingest".into(),
                "--store".into(),
                store("b"),
                "--format".into(),
                "messages".into(),
                "-".into(),
            ],
            Some(demo_text.clone()),
            "<stdin>: 12 new messages",
            "messages",
            12,
        ),
        (
            "dev-stdin",
            vec![
                "ingest".into(),
                "--store".into(),
                store("c"),
                "/dev/stdin".into(),
            ],
            Some(demo_text.clone()),
            "/dev/stdin: 12 new messages",
            "messages",
            12,
        ),
        (
            "fifo",
            vec![
                "ingest".into(),
                "--store".into(),
                store("d"),
                s(&fifo).into(),
            ],
            None,
            "fifo: 12 new messages",
            "messages",
            12,
        ),
        (
            "stdin-runs",
            vec!["ingest".into(), "--store".into(), store("e"), "-".into()],
            Some(std::fs::read(&runs).unwrap()),
            "<stdin>: 3 new runs",
            "runs",
            3,
        ),
        (
            "stdin-locomo",
            vec!["ingest".into(), "--store".into(), store("f"), "-".into()],
            Some(std::fs::read(&locomo).unwrap()),
            "<stdin>: 2 new messages",
            "messages",
            2,
        ),
    ];
    for (name, args, stdin, said, what, count) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, out, err) = run_fed(bin, &args, stdin);
        assert_eq!(code, 0, "{name}: {err}");
        assert!(out.contains(said), "{name}: {out}");
        assert_eq!(stats(Path::new(args[2]))[what], count, "{name}");
    }
    fifo_writer.join().unwrap();
    // A process substitution (a pipe named /dev/fd/N), of a conversation and of a LoCoMo
    // document, told apart by their first bytes.
    for (file, count) in [(demo(), 12), (locomo.clone(), 2)] {
        let target = store(&format!("sub-{count}"));
        let (code, out, err) = run_fed("bash", &["-c", substitute, bin, &target, s(&file)], None);
        assert_eq!(code, 0, "{}: {err}", file.display());
        assert!(
            out.contains("/dev/fd/") && out.contains(&format!(": {count} new messages")),
            "{out}"
        );
        assert_eq!(stats(Path::new(&target))["messages"], count);
    }
    // Standard input twice is a usage error, before anything is read or stored.
    let twice = store("twice");
    let (code, _, err) = run_fed(
        bin,
        &["ingest", "--store", &twice, "-", "-"],
        Some(demo_text),
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("`-` (standard input) is given more than once"),
        "{err}"
    );
    assert!(!Path::new(&twice).exists());
}
