//! Hostile input, as a careless or malicious user would give it: every case must end in exit
//! code 2 with an error that names what is wrong and where, and leave the store exactly as it
//! was (its stats, its messages and its memory, exported before and after, are equal). Then the
//! output cases: stored text with escape sequences is printed escaped, and output files never
//! replace a store's files.

mod common;

use std::path::Path;

use common::{demo, demo_store, ok, s, stats, trajwiki};

/// What must not change: the counts, and every namespace's messages and memory.
fn snapshot(store: &Path) -> (serde_json::Value, Vec<String>) {
    let st = stats(store);
    let mut exports = Vec::new();
    for ns in st["per_namespace"].as_array().unwrap() {
        let ns = ns["namespace"].as_str().unwrap();
        for what in ["messages", "memory"] {
            let (_, out, _) = trajwiki(&[
                "export",
                "--store",
                s(store),
                "--namespace",
                ns,
                "--what",
                what,
            ]);
            exports.push(out);
        }
    }
    (st, exports)
}

/// A case: the files it writes into the case's folder, its arguments (`{store}` and `{dir}`
/// are replaced), and what its error must say.
struct Case {
    name: &'static str,
    files: Vec<(&'static str, Vec<u8>)>,
    env: Vec<(&'static str, &'static str)>,
    args: Vec<&'static str>,
    expect: Vec<&'static str>,
}

fn case(name: &'static str, args: &[&'static str], expect: &[&'static str]) -> Case {
    Case {
        name,
        files: Vec::new(),
        env: Vec::new(),
        args: args.to_vec(),
        expect: expect.to_vec(),
    }
}

impl Case {
    fn file(mut self, name: &'static str, content: impl Into<Vec<u8>>) -> Case {
        self.files.push((name, content.into()));
        self
    }

    fn env(mut self, var: &'static str, value: &'static str) -> Case {
        self.env.push((var, value));
        self
    }
}

fn run_cases(cases: Vec<Case>) {
    let dir = tempfile::tempdir().unwrap();
    let store = demo_store(dir.path());
    let before = snapshot(&store);
    let mut failures = Vec::new();
    for c in &cases {
        let work = dir.path().join(c.name);
        std::fs::create_dir_all(&work).unwrap();
        for (name, content) in &c.files {
            let path = work.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
        let args: Vec<String> = c
            .args
            .iter()
            .map(|a| a.replace("{store}", s(&store)).replace("{dir}", s(&work)))
            .collect();
        let out = common::bin()
            .args(&args)
            .envs(c.env.iter().copied())
            .output()
            .unwrap();
        let code = out.status.code().unwrap_or(-1);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        if code != 2 {
            failures.push(format!("{}: exit code {code}, stderr:\n{err}", c.name));
        }
        for part in &c.expect {
            if !err.contains(part) {
                failures.push(format!("{}: expected {part:?} in:\n{err}", c.name));
            }
        }
        if err.contains("panicked") {
            failures.push(format!("{}: panicked:\n{err}", c.name));
        }
        if err.len() > 4000 {
            failures.push(format!("{}: an error of {} bytes", c.name, err.len()));
        }
        if snapshot(&store) != before {
            failures.push(format!("{}: changed the store", c.name));
        }
    }
    ok(&["check", "--store", s(&store)]);
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// Output files: never one of a store's files, never a directory.
#[test]
fn outputs_never_replace_a_store() {
    run_cases(vec![
        case(
            "export-over-db",
            &[
                "export",
                "--store",
                "{store}",
                "--namespace",
                "demo",
                "-o",
                "{store}/trajwiki.db",
            ],
            &["refusing to write", "trajwiki.db", "inside the store"],
        ),
        case(
            "export-into-vectors",
            &[
                "export",
                "--store",
                "{store}",
                "--namespace",
                "demo",
                "-o",
                "{store}/vectors/x.jsonl",
            ],
            &["refusing to write", "inside the store"],
        ),
        case(
            "export-over-dir",
            &[
                "export",
                "--store",
                "{store}",
                "--namespace",
                "demo",
                "-o",
                "{dir}",
            ],
            &["refusing to write", "is a directory"],
        ),
        case(
            "export-over-sqlite",
            &[
                "export",
                "--store",
                "{store}",
                "--namespace",
                "demo",
                "-o",
                "{dir}/other.db",
            ],
            &["refusing to write", "SQLite database"],
        )
        .file("other.db", b"SQLite format 3\0rest of a database".to_vec()),
        case(
            "export-no-folder",
            &[
                "export",
                "--store",
                "{store}",
                "--namespace",
                "demo",
                "-o",
                "{dir}/none/x.jsonl",
            ],
            &["refusing to write", "is not usable"],
        ),
        case(
            "embed-over-db",
            &[
                "embed",
                "--model",
                "hashing",
                "--output",
                "{store}/trajwiki.db",
                "--input",
                "{dir}/t.txt",
            ],
            &["refusing to write", "inside the store"],
        )
        .file("t.txt", "one line\n"),
    ]);
}

/// An export into a pipe is written into it; over an earlier export, it replaces it whole.
#[test]
fn outputs_reach_pipes_and_replace_files() {
    let dir = tempfile::tempdir().unwrap();
    let store = demo_store(dir.path());
    let out = dir.path().join("out.jsonl");
    for _ in 0..2 {
        ok(&[
            "export",
            "--store",
            s(&store),
            "--namespace",
            "demo",
            "-o",
            s(&out),
        ]);
        assert_eq!(std::fs::read_to_string(&out).unwrap().lines().count(), 12);
    }
    let fifo = dir.path().join("pipe");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    ok(&[
        "export",
        "--store",
        s(&store),
        "--namespace",
        "demo",
        "-o",
        s(&fifo),
    ]);
    assert_eq!(reader.join().unwrap().lines().count(), 12);
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".partial"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// Stored text that carries escape sequences, NUL, CR/LF or bidirectional overrides is printed
/// escaped by every text command; JSON output stays exact.
#[test]
fn stored_text_is_printed_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let file = dir.path().join("evil.jsonl");
    let speaker = "Ma\u{1b}]0;pwned\u{7}ya\r\nerror: forged";
    let text = "Hi \u{1b}[2J there\u{0} \u{9b}31m red \u{202e}txet, I moved to Lisbon.";
    let lines = [
        serde_json::json!({"namespace": "evil", "session": 1, "seq": 1, "speaker": speaker,
            "text": text, "timestamp": "2024-03-02T10:15:00", "ref": "S1:1",
            "attachments": [{"kind": "image", "caption": "a \u{1b}[31mred\u{1b}[0m photo"}]}),
        serde_json::json!({"namespace": "evil", "session": 1, "seq": 2, "speaker": "Tom",
            "text": "Where did you move?", "timestamp": "2024-03-02T10:16:00", "ref": "S1:2"}),
    ];
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&file, body).unwrap();
    ok(&["ingest", "--store", s(&store), s(&file)]);
    ok(&[
        "build",
        "--store",
        s(&store),
        "--namespace",
        "evil",
        "--model",
        "hashing",
        "--flush",
        "-q",
    ]);
    let hazardous = |out: &str| {
        out.chars()
            .find(|&c| (c.is_control() && c != '\n') || ('\u{202a}'..='\u{202e}').contains(&c))
    };
    let texts = [
        ok(&["show", "--store", s(&store), "--namespace", "evil", "S1:1"]),
        ok(&[
            "query",
            "--store",
            s(&store),
            "--namespace",
            "evil",
            "--model",
            "hashing",
            "where did Maya move",
        ]),
        ok(&["export", "--store", s(&store), "--namespace", "evil"]),
        ok(&[
            "show",
            "--store",
            s(&store),
            "--namespace",
            "evil",
            "S1:1",
            "--json",
        ]),
    ];
    for out in &texts {
        assert_eq!(hazardous(out), None, "{out:?}");
        assert!(!out.contains("\nerror: forged"), "a forged line: {out}");
    }
    assert!(texts[0].contains("\\u{1b}[2J"), "{}", texts[0]);
    assert!(texts[1].contains("Lisbon"), "{}", texts[1]);
    // JSON parses back to the stored text.
    let shown: serde_json::Value = serde_json::from_str(&texts[3]).unwrap();
    assert_eq!(shown["text"], text);
    assert_eq!(shown["speaker"], speaker);
    let exported: serde_json::Value =
        serde_json::from_str(texts[2].lines().next().unwrap()).unwrap();
    assert_eq!(exported["text"], text);
}

/// One JSON line of `fields` (name, raw JSON) with `field` set to `value`, or removed when
/// `value` is empty.
fn json_line<'a>(mut fields: Vec<(&'a str, &'a str)>, field: &'a str, value: &'a str) -> String {
    match fields.iter_mut().find(|(k, _)| *k == field) {
        Some(slot) => slot.1 = value,
        None => fields.push((field, value)),
    }
    let body: Vec<String> = fields
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("\"{k}\": {v}"))
        .collect();
    format!("{{{}}}\n", body.join(", "))
}

/// A message line with `field` replaced (see [`json_line`]).
fn message(field: &str, value: &str) -> String {
    let fields = vec![
        ("namespace", r#""h""#),
        ("session", "1"),
        ("speaker", r#""Ann""#),
        ("text", r#""I live in Oslo.""#),
        ("timestamp", r#""2024-01-01T10:00:00""#),
        ("ref", r#""A1""#),
    ];
    json_line(fields, field, value)
}

/// A run line with `field` replaced (see [`json_line`]).
fn run_line(field: &str, value: &str) -> String {
    let fields = vec![
        ("id", r#""r1""#),
        ("namespace", r#""hr""#),
        ("task", r#""buy a red mug""#),
        (
            "steps",
            r#"[{"action": "search[red mug]", "observation": "3 results"}]"#,
        ),
        ("success", "true"),
        ("reward", "1.0"),
    ];
    json_line(fields, field, value)
}

/// An ingest of `content` as `file`, with the format its name says (`m.jsonl` messages,
/// `r.jsonl` runs, `l.json` LoCoMo).
fn ingest(
    name: &'static str,
    file: &'static str,
    content: String,
    expect: &[&'static str],
) -> Case {
    let path: &'static str = Box::leak(format!("{{dir}}/{file}").into_boxed_str());
    let format = match file {
        "r.jsonl" => "runs",
        "l.json" => "locomo",
        _ => "messages",
    };
    case(
        name,
        &["ingest", "--store", "{store}", "--format", format, path],
        expect,
    )
    .file(file, content)
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// A word-level tokenizer of two words: enough for a model folder to get past its tokenizer.
const TOKENIZER: &str = r#"{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [], "normalizer": null, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null, "decoder": null, "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "hello": 1}, "unk_token": "[UNK]"}}"#;

/// Malformed conversations, runs and LoCoMo files: each refused whole with its place and what
/// is wrong, the store untouched.
#[test]
fn hostile_inputs_are_refused_whole() {
    let big_text = leak(format!("\"{}\"", "x".repeat(300 << 10)));
    let deep = leak(format!("{}1{}", "[".repeat(5000), "]".repeat(5000)));
    let long_ns = leak(format!("\"{}\"", "n".repeat(1 << 20)));
    let dup = format!(
        "{}{}",
        message("text", r#""I live in Oslo.""#),
        message("text", r#""I live in Paris.""#)
    );
    let demo_changed = std::fs::read_to_string(demo())
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .replace("pottery workshop", "yoga class")
        + "\n";
    let mut cases = vec![
        ingest("truncated", "m.jsonl", r#"{"namespace": "h", "session": 1"#.into(), &["m.jsonl", "line 1", "invalid JSON"]),
        ingest("missing-text", "m.jsonl", message("text", ""), &["line 1", "field `text`", "missing"]),
        ingest("text-number", "m.jsonl", message("text", "42"), &["field `text`", "expected a string", "number 42"]),
        ingest("text-null", "m.jsonl", message("text", "null"), &["field `text`", "null"]),
        ingest("session-string", "m.jsonl", message("session", r#""two""#), &["field `session`", "an integer from 0 to 4294967295", "string \"two\""]),
        ingest("session-negative", "m.jsonl", message("session", "-1"), &["field `session`", "number -1"]),
        ingest("session-huge", "m.jsonl", message("session", "9223372036854775807"), &["field `session`", "an integer from 0 to 4294967295"]),
        ingest("session-fraction", "m.jsonl", message("session", "1.5"), &["field `session`", "number 1.5"]),
        ingest("seq-zero", "m.jsonl", message("seq", "0"), &["field `seq`", "a position from 1"]),
        // Found by tests/fuzz.rs: the position after 4294967295 overflowed.
        ingest("seq-overflow", "m.jsonl", message("seq", "4294967295") + &message("ref", r#""A2""#), &["line 2", "field `seq`", "past 4294967295"]),
        ingest("timestamp-words", "m.jsonl", message("timestamp", r#""next Tuesday""#), &["field `timestamp`", "\"next Tuesday\""]),
        ingest("timestamp-year-0", "m.jsonl", message("timestamp", r#""0000-01-01T00:00:00""#), &["field `timestamp`", "years 1 to 9999"]),
        ingest("timestamp-year-plus-262144", "m.jsonl", message("timestamp", r#""+262144-01-01T00:00:00""#), &["field `timestamp`", "+262144"]),
        ingest("timestamp-year-minus-262144", "m.jsonl", message("timestamp", r#""-262144-01-01T00:00:00""#), &["field `timestamp`", "-262144"]),
        ingest("timestamp-feb-30", "m.jsonl", message("timestamp", r#""2024-02-30T10:00:00""#), &["field `timestamp`", "2024-02-30"]),
        ingest("timestamp-number", "m.jsonl", message("timestamp", "1700000000"), &["field `timestamp`", "number 1700000000"]),
        ingest("timestamp-bad-offset", "m.jsonl", message("timestamp", r#""2024-01-01T10:00:00+25:00""#), &["field `timestamp`", "+25:00"]),
        ingest("namespace-empty", "m.jsonl", message("namespace", r#""""#), &["field `namespace`", "it is empty"]),
        ingest("namespace-megabyte", "m.jsonl", message("namespace", long_ns), &["field `namespace`", "longer than 128 characters", "(1048576 characters)"]),
        ingest("namespace-control", "m.jsonl", message("namespace", r#""a\u001bb""#), &["field `namespace`", "control characters"]),
        ingest("namespace-spaces", "m.jsonl", message("namespace", r#"" padded""#), &["field `namespace`", "leading or trailing whitespace"]),
        ingest("namespace-number", "m.jsonl", message("namespace", "7"), &["field `namespace`", "number 7"]),
        ingest("speaker-missing", "m.jsonl", message("speaker", ""), &["field `speaker`", "missing"]),
        ingest("speaker-object", "m.jsonl", message("speaker", "{}"), &["field `speaker`"]),
        // SQLite's text functions end a string at NUL: a claim, which starts with its speaker's
        // name, would read as empty (found by tests/fuzz_http.rs: a 500 on the next append).
        ingest("speaker-nul", "m.jsonl", message("speaker", r#""\u0000Ann""#), &["line 1", "field `speaker`", "without NUL characters"]),
        ingest("attachments-string", "m.jsonl", message("attachments", r#""img.png""#), &["field `attachments`"]),
        ingest("attachment-no-kind", "m.jsonl", message("attachments", r#"[{"caption": "c"}]"#), &["field `attachments[0].kind`", "missing"]),
        ingest("ref-empty", "m.jsonl", message("ref", r#""  ""#), &["field `ref`", "a non-empty string"]),
        ingest("ref-number", "m.jsonl", message("ref", "12"), &["field `ref`", "number 12"]),
        ingest("duplicate-in-file", "m.jsonl", dup, &["m.jsonl", "line 2", "line 1 has the same ref", "I live in Paris.", "I live in Oslo."]),
        ingest("conflict-with-store", "m.jsonl", demo_changed, &["conflicting message", "pottery workshop", "yoga class"]),
        ingest("text-over-limit", "m.jsonl", message("text", big_text), &["line 1", "a message (all its fields): 307225 bytes", "limit of 262144", "TRAJWIKI_MAX_MESSAGE_BYTES"]),
        ingest("deep-nesting", "m.jsonl", message("extra", deep), &["line 1", "invalid JSON", "recursion limit"]),
        ingest("line-is-array", "m.jsonl", "[1, 2]\n".into(), &["line 1", "expected an object"]),
        ingest("line-is-null", "m.jsonl", "null\n".into(), &["line 1", "expected an object"]),
        case("empty-file", &["ingest", "--store", "{store}", "{dir}/m.jsonl"], &["m.jsonl", "the file is empty", "--format"]).file("m.jsonl", ""),
        case("store-uri-scheme", &["ingest", "--store", "s3://bucket/memory", "{dir}/m.jsonl"], &["store location \"s3://bucket/memory\"", "unknown scheme `s3://`", "sqlite:///path"]).file("m.jsonl", message("text", r#""fine""#)),
        case("store-uri-postgres", &["stats", "--store", "postgres://u@localhost/db"], &["store location", "PostgreSQL"]),
        case("blank-file", &["ingest", "--store", "{store}", "{dir}/m.jsonl"], &["the file is empty"]).file("m.jsonl", "\n  \n\t\n"),
        case("undetectable", &["ingest", "--store", "{store}", "{dir}/m.jsonl"], &["cannot tell the input format", "--format locomo|messages|runs"]).file("m.jsonl", "{\"a\": 1}\n"),
        ingest("nul-byte", "m.jsonl", message("text", "\"a\0b\""), &["line 1", "invalid JSON", "control character"]),
        ingest("second-line-bad", "m.jsonl", message("text", r#""fine""#) + "{\"namespace\": \"h\"\n", &["line 2", "invalid JSON"]),
        case("invalid-utf8", &["ingest", "--store", "{store}", "{dir}/m.jsonl"], &["m.jsonl", "line 2, column 47", "not UTF-8 text (byte 0xff)"])
            .file("m.jsonl", [message("text", r#""fine""#).into_bytes(), b"{\"namespace\": \"h\", \"session\": 2, \"text\": \"bad \xff\xfe\"}\n".to_vec()].concat()),
        case("binary-file", &["ingest", "--store", "{store}", "{dir}/m.jsonl"], &["m.jsonl", "line 1 starts with byte 0x89"])
            .file("m.jsonl", vec![0x89, b'P', b'N', b'G', 0, 1, 2, 0xff, 0xfe, 10]),
        case("binary-file-as-messages", &["ingest", "--store", "{store}", "--format", "messages", "{dir}/m.jsonl"], &["m.jsonl", "line 1, column 1", "not UTF-8 text (byte 0x89)"])
            .file("m.jsonl", vec![0x89, b'P', b'N', b'G', 0, 1, 2, 0xff, 0xfe, 10]),
        case("missing-file", &["ingest", "--store", "{store}", "{dir}/none.jsonl"], &["none.jsonl", "cannot read"]),
        case("directory-as-file", &["ingest", "--store", "{store}", "{dir}"], &["cannot read"]),
        // LoCoMo JSON.
        ingest("locomo-object", "l.json", r#"{"sample_id": "x"}"#.into(), &["l.json"]),
        ingest("locomo-truncated", "l.json", r#"[{"sample_id": "x", "conversation": {"speaker_a": "A""#.into(), &["l.json", "line 1", "invalid JSON"]),
        ingest("locomo-no-sample-id", "l.json", r#"[{"conversation": {"speaker_a": "A", "speaker_b": "B"}, "qa": []}]"#.into(), &["l.json", "sample_id"]),
        ingest("locomo-no-speaker", "l.json", r#"[{"sample_id": "x", "conversation": {"speaker_b": "B", "session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": []}, "qa": []}]"#.into(), &["l.json", "record x", "speaker_a"]),
        ingest("locomo-bad-date", "l.json", r#"[{"sample_id": "x", "conversation": {"speaker_a": "A", "speaker_b": "B", "session_1_date_time": "noon-ish", "session_1": []}, "qa": []}]"#.into(), &["record x", "session_1_date_time", "\"noon-ish\""]),
        ingest("locomo-turns-object", "l.json", r#"[{"sample_id": "x", "conversation": {"speaker_a": "A", "speaker_b": "B", "session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": {}}, "qa": []}]"#.into(), &["record x", "session_1"]),
        ingest("locomo-no-dia-id", "l.json", r#"[{"sample_id": "x", "conversation": {"speaker_a": "A", "speaker_b": "B", "session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": [{"speaker": "A", "text": "hi"}]}, "qa": []}]"#.into(), &["record x", "dia_id"]),
        ingest("locomo-duplicate-dia-id", "l.json", r#"[{"sample_id": "x", "conversation": {"speaker_a": "A", "speaker_b": "B", "session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hi"}, {"speaker": "B", "dia_id": "D1:1", "text": "yo"}]}, "qa": []}]"#.into(), &["record x", "dia_id", "duplicate D1:1"]),
        // Runs.
        ingest("run-steps-object", "r.jsonl", run_line("steps", "{}"), &["r.jsonl", "line 1", "field `steps`"]),
        ingest("run-step-no-action", "r.jsonl", run_line("steps", r#"[{"observation": "o"}]"#), &["field `steps[0].action`", "missing"]),
        ingest("run-no-task", "r.jsonl", run_line("task", ""), &["field `task`", "missing"]),
        ingest("run-success-string", "r.jsonl", run_line("success", r#""yes""#), &["field `success`", "a boolean"]),
        ingest("run-reward-string", "r.jsonl", run_line("reward", r#""high""#), &["field `reward`", "string \"high\""]),
        ingest("run-reward-nan", "r.jsonl", run_line("reward", "NaN"), &["line 1", "invalid JSON"]),
        ingest("run-id-empty", "r.jsonl", run_line("id", r#""""#), &["field `id`", "a non-empty string"]),
        ingest("run-duplicate-in-file", "r.jsonl", run_line("task", r#""buy a red mug""#) + &run_line("task", r#""buy a blue mug""#), &["line 2", "field `id`", "line 1 has the same id"]),
        ingest("run-too-many-steps", "r.jsonl", run_line("steps", r#"[{"action": "a"}, {"action": "b"}, {"action": "c"}]"#), &["the steps of a run: 3 steps", "limit of 2", "TRAJWIKI_MAX_RUN_STEPS"]).env("TRAJWIKI_MAX_RUN_STEPS", "2"),
        ingest("run-too-large", "r.jsonl", run_line("task", r#""a task statement longer than forty bytes in all""#), &["a run (all its fields)", "limit of 40"]).env("TRAJWIKI_MAX_RUN_BYTES", "40"),
        ingest("limit-bad-setting", "m.jsonl", message("text", r#""ok""#), &["TRAJWIKI_MAX_MESSAGE_BYTES=\"lots\"", "not a positive whole number"]).env("TRAJWIKI_MAX_MESSAGE_BYTES", "lots"),
        ingest("limit-zero-setting", "m.jsonl", message("text", r#""ok""#), &["TRAJWIKI_MAX_MESSAGE_BYTES=\"0\"", "not a positive whole number"]).env("TRAJWIKI_MAX_MESSAGE_BYTES", "0"),
    ];
    // Configurations, models, stores and commands.
    let build = |name: &'static str, toml: &'static str, expect: &[&'static str]| {
        case(
            name,
            &[
                "build",
                "--store",
                "{store}",
                "--namespace",
                "demo",
                "--model",
                "hashing",
                "--rebuild",
                "--config",
                "{dir}/c.toml",
            ],
            expect,
        )
        .file("c.toml", toml)
    };
    cases.extend([
        build("config-nan", "delta = nan\n", &["c.toml", "delta must be a number from 0 to 1, not NaN"]),
        build("config-inf", "w_jaccard = inf\n", &["w_jaccard must be a number from 0 to 1, not inf"]),
        build("config-negative", "b_entity = -0.5\n", &["b_entity must be a number from 0 to 1"]),
        build("config-zero-length", "max_trajectory_len = 0\n", &["max_trajectory_len must be at least 1"]),
        build("config-unknown-key", "max_len = 10\n", &["c.toml", "unknown field `max_len`"]),
        build("config-negative-count", "prefilter_cap = -1\n", &["c.toml", "prefilter_cap"]),
        build("config-not-toml", "this is not = = toml\n", &["c.toml", "invalid configuration"]),
        case("model-huge-dim", &["build", "--store", "{store}", "--namespace", "demo", "--model", "hashing-4294967296", "--rebuild"], &["an embedding model: 4294967296 dimensions", "limit of 8192", "TRAJWIKI_MAX_DIM"]),
        case("model-zero-dim", &["build", "--store", "{store}", "--namespace", "demo", "--model", "hashing-0", "--rebuild"], &["hashing-0", "hashing-<dimension>"]),
        case("model-no-folder", &["build", "--store", "{store}", "--namespace", "demo", "--model", "{dir}/none", "--rebuild"], &["no embedding model", "none"]),
        case("model-bad-safetensors", &["embed", "--model", "{dir}/m", "--input", "{dir}/t.txt"], &["model.safetensors", "not a readable safetensors file"])
            .file("t.txt", "hello\n")
            .file("m/config.json", r#"{"model_type": "bert", "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 16, "vocab_size": 10, "max_position_embeddings": 16, "type_vocab_size": 2, "layer_norm_eps": 1e-12}"#)
            .file("m/tokenizer.json", TOKENIZER)
            .file("m/model.safetensors", b"\xff\xff\xff\xff\xff\xff\xff\x7f{garbage".to_vec()),
        case("model-bad-config", &["embed", "--model", "{dir}/m", "--input", "{dir}/t.txt"], &["config.json"])
            .file("t.txt", "hello\n")
            .file("m/config.json", "{not json")
            .file("m/tokenizer.json", "{}")
            .file("m/model.safetensors", b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ".to_vec()),
        case("store-empty-db", &["stats", "--store", "{dir}/s"], &["trajwiki.db is not a trajwiki store", "the file is empty"]).file("s/trajwiki.db", ""),
        case("store-foreign-sqlite", &["query", "--store", "{dir}/s", "--namespace", "demo", "q"], &["not a trajwiki store", "not an SQLite database"]).file("s/trajwiki.db", "SQLite format 2\0 or something else"),
        case("store-garbage", &["check", "--store", "{dir}/s"], &["not a trajwiki store"]).file("s/trajwiki.db", vec![7u8; 8192]),
        case("store-is-a-file", &["stats", "--store", "{dir}/f"], &["--store", "is a file, not a directory"]).file("f", "a file"),
        case("store-missing", &["stats", "--store", "{dir}/nothing"], &["no trajwiki store", "nothing"]),
        case("query-too-long", &["query", "--store", "{store}", "--namespace", "demo", "--model", "hashing", leak("why ".repeat(5000))], &["a question: 20000 bytes", "limit of 16384", "TRAJWIKI_MAX_QUESTION_BYTES"]),
        case("query-unknown-namespace", &["query", "--store", "{store}", "--namespace", "nobody", "--model", "hashing", "hi"], &["namespace nobody has no messages"]),
        case("query-other-model", &["query", "--store", "{store}", "--namespace", "demo", "--model", "hashing-128", "hi"], &["built with model hashing-384", "hashing-128"]),
        case("query-bad-namespace", &["query", "--store", "{store}", "--namespace", "", "--model", "hashing", "hi"], &["invalid namespace", "it is empty"]),
        case("show-malformed-id", &["show", "--store", "{store}", "msg_xyz"], &["`msg_xyz` is not a trajwiki id"]),
        case("show-long-id", &["show", "--store", "{store}", leak("q".repeat(100_000))], &["is not a trajwiki id", "(100000 characters)"]),
        case("show-unknown-id", &["show", "--store", "{store}", "msg_0123456789abcdef"], &["no message with id msg_0123456789abcdef"]),
        case("show-unknown-ref", &["show", "--store", "{store}", "--namespace", "demo", "S9:9"], &["no message with ref S9:9"]),
        case("history-of-message", &["history", "--store", "{store}", "msg_0123456789abcdef"], &["history takes a trajectory or a claim id"]),
        case("history-bad-time", &["history", "--store", "{store}", "trj_0123456789abcdef", "--as-of", "yesterday"], &["--as-of", "yesterday"]),
        case("export-runs-of-messages", &["export", "--store", "{store}", "--namespace", "demo", "--what", "runs"], &["namespace demo holds no runs", "--what messages"]),
        case("export-unknown-namespace", &["export", "--store", "{store}", "--namespace", "nobody"], &["namespace nobody is empty or does not exist"]),
        case("trace-grep-limit-zero", &["trace", "grep", "--store", "{store}", "--namespace", "demo", "x", "--limit", "0"], &["--limit", "0"]),
        case("delete-without-yes", &["delete", "--store", "{store}", "--namespace", "demo"], &["for good", "--yes"]),
        case("delete-unknown", &["delete", "--store", "{store}", "--namespace", "nobody", "--yes"], &["namespace nobody does not exist"]),
        case("build-unknown-namespace", &["build", "--store", "{store}", "--namespace", "nobody", "--model", "hashing"], &["nobody"]),
        case("embed-npy-to-terminal", &["embed", "--model", "hashing", "--format", "npy", "--input", "{dir}/t.txt"], &["--format npy needs --output"]).file("t.txt", "hello\n"),
        case("unknown-command", &["frobnicate"], &["frobnicate"]),
        case("unknown-flag", &["stats", "--store", "{store}", "--colour"], &["--colour"]),
    ]);
    assert!(cases.len() >= 60, "{} cases", cases.len());
    run_cases(cases);
}

/// Names that look like paths or SQL are names: stored, found and exported as given, and no
/// file is written outside the store.
#[test]
fn names_that_look_like_paths_or_sql_are_only_names() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let names = [
        "../../escape",
        "/etc/passwd",
        "x'; DROP TABLE messages; --",
        "%s%n%x",
        "名前 ünïcode",
    ];
    let mut body = String::new();
    for ns in names {
        body.push_str(&format!(
            "{{\"namespace\": {}, \"session\": 1, \"speaker\": \"Ann\", \"text\": \"I live in Oslo.\", \"timestamp\": \"2024-01-01T10:00:00\"}}\n",
            serde_json::to_string(ns).unwrap()
        ));
    }
    let file = dir.path().join("names.jsonl");
    std::fs::write(&file, body).unwrap();
    ok(&["ingest", "--store", s(&store), s(&file)]);
    for ns in names {
        common::build_hashing(s(&store), ns);
        let out = ok(&["export", "--store", s(&store), "--namespace", ns]);
        let line: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(line["namespace"], ns);
        let found = ok(&[
            "query",
            "--store",
            s(&store),
            "--namespace",
            ns,
            "--model",
            "hashing",
            "where does Ann live",
        ]);
        assert!(found.contains("Oslo"), "{ns}: {found}");
    }
    assert_eq!(stats(&store)["messages"], names.len());
    ok(&["check", "--store", s(&store)]);
    // Nothing but the input, the store and its files.
    let mut entries: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    entries.sort();
    assert_eq!(entries, ["names.jsonl", "store"]);
}

/// Inputs at the edges of what is valid are taken: a byte-order mark, the year 9999, NUL and
/// escape characters inside a string, the same message twice in one file.
#[test]
fn edge_inputs_are_taken() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let file = dir.path().join("edge.jsonl");
    let twice = message("text", r#""I live in Oslo.""#);
    let body = format!(
        "\u{feff}{twice}{twice}{}{}",
        message("ref", r#""A2""#).replace("2024-01-01T10:00:00", "9999-12-31T23:59:59"),
        message("ref", r#""A3""#).replace("I live in Oslo.", "nul \\u0000 and esc \\u001b[2J"),
    );
    std::fs::write(&file, body).unwrap();
    let out = ok(&["ingest", "--store", s(&store), s(&file)]);
    let _ = out;
    assert_eq!(stats(&store)["messages"], 3);
    let shown = ok(&["show", "--store", s(&store), "--namespace", "h", "A3"]);
    assert!(shown.contains("nul \\u{0} and esc \\u{1b}[2J"), "{shown}");
    let (code, _, err) = trajwiki(&[
        "show",
        "--store",
        s(&store),
        "--namespace",
        "h",
        "A2",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
}

/// A LoCoMo document of one sample whose second session has the key `key` (and `key_date_time`),
/// and whose one question has the category `category` (raw JSON).
fn locomo_doc(key: &str, category: &str) -> String {
    format!(
        r#"[{{"sample_id": "lc", "conversation": {{"speaker_a": "Ann", "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{{"speaker": "Ann", "dia_id": "D1:1", "text": "I moved to Oslo."}}, {{"speaker": "Bob", "dia_id": "D1:2", "text": "Nice."}}],
        "{key}_date_time": "2:00 pm on 9 May, 2023",
        "{key}": [{{"speaker": "Ann", "dia_id": "D2:1", "text": "I adopted a cat."}}]}},
        "qa": [{{"question": "Where does Ann live?", "answer": "Oslo", "evidence": ["D1:1"], "category": {category}}}]}}]"#
    )
}

/// LoCoMo session keys, values echoed in errors, ranges, `eval locomo` and `--store` on a file:
/// each refused with exit code 2, naming what is wrong, the store untouched.
#[test]
fn keys_echoes_ranges_and_store_paths_are_refused_clearly() {
    let mb = 1 << 20;
    let huge = |c: &str| leak(format!("\"{}\"", c.repeat(mb)));
    let cut = "\"… (1048576 bytes)";
    let locomo = |name: &'static str, doc: String, expect: &[&'static str]| {
        ingest(name, "l.json", doc, expect)
    };
    let ok_doc = locomo_doc("session_2", "1");
    let dup_text = |t: char| {
        message(
            "text",
            leak(format!("\"{}\"", t.to_string().repeat(200 << 10))),
        )
    };
    let run_id = run_line("id", huge("r"));
    let mut cases = vec![
        // LoCoMo session keys: one numbering rule, and any other key is named.
        locomo(
            "locomo-session-negative",
            locomo_doc("session_-3", "1"),
            &[
                "l.json",
                "record lc",
                "\"session_-3",
                "from 0 to 4294967295 written without sign or leading zeros",
            ],
        ),
        locomo(
            "locomo-session-leading-zero",
            locomo_doc("session_01", "1"),
            &["\"session_01", "without sign or leading zeros"],
        ),
        locomo(
            "locomo-session-past-u32",
            locomo_doc("session_4294967296", "1"),
            &["\"session_4294967296", "from 0 to 4294967295"],
        ),
        locomo(
            "locomo-session-20-digits",
            locomo_doc("session_99999999999999999999", "1"),
            &["\"session_99999999999999999999", "from 0 to 4294967295"],
        ),
        locomo(
            "locomo-session-other-key",
            locomo_doc("Session_2", "1"),
            &["field `conversation`", "\"Session_2"],
        ),
        locomo(
            "locomo-session-undated",
            ok_doc.replace(r#""session_2_date_time": "2:00 pm on 9 May, 2023","#, ""),
            &["conversation.session_2_date_time", "missing"],
        ),
        // Values echoed in errors are cut to a short prefix with their length.
        ingest(
            "echo-timestamp",
            "m.jsonl",
            message("timestamp", huge("9")),
            &["field `timestamp`", cut],
        ),
        ingest(
            "echo-session-string",
            "m.jsonl",
            message("session", huge("s")),
            &["field `session`", "string \"sss", cut],
        ),
        ingest(
            "echo-duplicate-text",
            "m.jsonl",
            dup_text('a') + &dup_text('b'),
            &[
                "line 2",
                "line 1 has the same ref",
                "\"… (204800 bytes) where line 1 has \"aaa",
            ],
        ),
        ingest(
            "echo-run-duplicate-id",
            "r.jsonl",
            run_id.clone() + &run_id.replace("buy a red mug", "buy a blue mug"),
            &["line 2", "field `id`", cut],
        ),
        locomo(
            "echo-locomo-date",
            ok_doc.replace("2:00 pm on 9 May, 2023", &"9".repeat(mb)),
            &["session_2_date_time", cut],
        ),
        locomo(
            "echo-locomo-dia-id",
            ok_doc.replace("\"D2:1\"", huge("?")),
            &["dia_id", cut],
        ),
        locomo(
            "echo-locomo-session-key",
            locomo_doc(&format!("session_{}", "7".repeat(mb)), "1"),
            &["\"session_777", "bytes)"],
        ),
        locomo(
            "echo-locomo-category",
            locomo_doc("session_2", huge("c")),
            &["category", cut],
        ),
        // Every field counts against the message limit: a ref too.
        ingest(
            "ref-over-limit",
            "m.jsonl",
            message("ref", huge("r")),
            &[
                "line 1",
                "a message (all its fields): 1048614 bytes",
                "limit of 262144",
            ],
        ),
        ingest(
            "ref-past-line-bound",
            "m.jsonl",
            message("ref", leak(format!("\"{}\"", "r".repeat(5 * mb)))),
            &[
                "line 1",
                "longer than 1638400 bytes",
                "TRAJWIKI_MAX_MESSAGE_BYTES",
            ],
        ),
        // Ranges say exactly what is taken.
        ingest(
            "seq-negative",
            "m.jsonl",
            message("seq", "-1"),
            &[
                "field `seq`",
                "a position from 1 to 4294967295",
                "number -1",
            ],
        ),
        ingest(
            "seq-past-u32",
            "m.jsonl",
            message("seq", "4294967296"),
            &["field `seq`", "a position from 1 to 4294967295"],
        ),
        ingest(
            "session-past-u32",
            "m.jsonl",
            message("session", "4294967296"),
            &["field `session`", "an integer from 0 to 4294967295"],
        ),
        locomo(
            "category-zero",
            locomo_doc("session_2", "0"),
            &["qa[0].category", "an integer from 1 to 5", "number 0"],
        ),
        locomo(
            "category-six",
            locomo_doc("session_2", "6"),
            &["qa[0].category", "an integer from 1 to 5"],
        ),
        locomo(
            "category-negative",
            locomo_doc("session_2", "-1"),
            &["qa[0].category", "an integer from 1 to 5"],
        ),
        locomo(
            "category-past-u32",
            locomo_doc("session_2", "4294967296"),
            &["qa[0].category", "an integer from 1 to 5"],
        ),
        // `eval locomo`: input errors exit 2 as `ingest`'s do.
        case(
            "eval-bad-data",
            &[
                "eval",
                "locomo",
                "--data",
                "{dir}/l.json",
                "--out",
                "{dir}/out",
                "--model",
                "hashing",
            ],
            &["l.json", "session_01"],
        )
        .file("l.json", locomo_doc("session_01", "1")),
        case(
            "eval-bad-category",
            &[
                "eval",
                "locomo",
                "--data",
                "{dir}/l.json",
                "--out",
                "{dir}/out",
                "--model",
                "hashing",
            ],
            &["qa[0].category", "an integer from 1 to 5"],
        )
        .file("l.json", locomo_doc("session_2", "9")),
        case(
            "eval-missing-data",
            &[
                "eval",
                "locomo",
                "--data",
                "{dir}/none.json",
                "--out",
                "{dir}/out",
                "--model",
                "hashing",
            ],
            &["none.json", "cannot read"],
        ),
        case(
            "eval-not-json",
            &[
                "eval",
                "locomo",
                "--data",
                "{dir}/l.json",
                "--out",
                "{dir}/out",
                "--model",
                "hashing",
            ],
            &["l.json", "line 1", "invalid JSON"],
        )
        .file("l.json", "{oops"),
        case(
            "eval-out-is-a-file",
            &[
                "eval",
                "locomo",
                "--data",
                "{dir}/l.json",
                "--out",
                "{dir}/f",
                "--model",
                "hashing",
            ],
            &["--out", "is a file, not a directory"],
        )
        .file("l.json", ok_doc.clone())
        .file("f", "a file"),
    ];
    // `--store` naming a file, or a path under one, for every command that takes a store.
    let store_file: &[(&str, &[&str])] = &[
        ("ingest", &["ingest", "--store", "{dir}/f", "{dir}/m.jsonl"]),
        (
            "ingest-under",
            &["ingest", "--store", "{dir}/f/s", "{dir}/m.jsonl"],
        ),
        (
            "build",
            &[
                "build",
                "--store",
                "{dir}/f",
                "--namespace",
                "demo",
                "--model",
                "hashing",
            ],
        ),
        (
            "query",
            &[
                "query",
                "--store",
                "{dir}/f",
                "--namespace",
                "demo",
                "--model",
                "hashing",
                "q",
            ],
        ),
        (
            "ask",
            &["ask", "--store", "{dir}/f", "--namespace", "demo", "q"],
        ),
        (
            "eval",
            &[
                "eval",
                "locomo",
                "--data",
                "{dir}/l.json",
                "--out",
                "{dir}/out",
                "--store",
                "{dir}/f",
                "--model",
                "hashing",
            ],
        ),
        (
            "eval-default-store",
            &[
                "eval",
                "locomo",
                "--data",
                "{dir}/l.json",
                "--out",
                "{dir}/o",
                "--model",
                "hashing",
            ],
        ),
        (
            "serve",
            &[
                "serve", "--store", "{dir}/f", "--port", "0", "--model", "hashing",
            ],
        ),
        ("mcp", &["mcp", "--store", "{dir}/f", "--model", "hashing"]),
        ("stats", &["stats", "--store", "{dir}/f"]),
        ("check", &["check", "--store", "{dir}/f"]),
        (
            "show",
            &["show", "--store", "{dir}/f", "msg_0123456789abcdef"],
        ),
        (
            "export",
            &["export", "--store", "{dir}/f", "--namespace", "demo"],
        ),
        (
            "wiki",
            &["wiki", "--store", "{dir}/f", "--namespace", "demo"],
        ),
        (
            "delete",
            &[
                "delete",
                "--store",
                "{dir}/f",
                "--namespace",
                "demo",
                "--yes",
            ],
        ),
        (
            "trace-grep",
            &[
                "trace",
                "grep",
                "--store",
                "{dir}/f",
                "--namespace",
                "demo",
                "x",
            ],
        ),
    ];
    for (name, args) in store_file {
        cases.push(
            case(
                leak(format!("store-file-{name}")),
                args,
                &["--store", "is a file, not a directory"],
            )
            .file("f", "a file")
            .file("o/store", "a file")
            .file("m.jsonl", message("text", r#""fine""#))
            .file("l.json", ok_doc.clone()),
        );
    }
    run_cases(cases);
}

/// Values at the ends of the ranges errors name are taken: sessions 0 and 4294967295, position
/// 4294967295, LoCoMo sessions 0 and 4294967295, categories 1 and 5 (and evaluated).
#[test]
fn range_ends_are_taken() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let file = dir.path().join("ends.jsonl");
    let body = [
        message("session", "0"),
        message("session", "4294967295")
            .replace("\"A1\"", "\"A2\"")
            .replace("}\n", ", \"seq\": 4294967295}\n"),
        message("seq", "1")
            .replace("\"A1\"", "\"A3\"")
            .replace("\"session\": 1", "\"session\": 7"),
    ]
    .concat();
    std::fs::write(&file, body).unwrap();
    ok(&["ingest", "--store", s(&store), s(&file)]);
    assert_eq!(stats(&store)["messages"], 3);
    let shown = ok(&[
        "show",
        "--store",
        s(&store),
        "--namespace",
        "h",
        "A2",
        "--json",
    ]);
    let shown: serde_json::Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(
        (shown["session"].as_u64(), shown["seq"].as_u64()),
        (Some(4294967295), Some(4294967295)),
        "{shown}"
    );

    let data = dir.path().join("l.json");
    let doc = locomo_doc("session_4294967295", "5")
        .replace("session_1", "session_0")
        .replace("\"D2:1\"", "\"D4294967295:1\"");
    std::fs::write(&data, doc.replacen("\"category\": 5", "\"category\": 1}, {\"question\": \"Which pet?\", \"answer\": \"cat\", \"evidence\": [\"D4294967295:1\"], \"category\": 5", 1)).unwrap();
    let out = dir.path().join("out");
    ok(&["ingest", "--store", s(&store), s(&data)]);
    assert_eq!(stats(&store)["messages"], 6);
    common::eval_locomo(&data, &out, &[50], &["flat"], &[]);
    assert!(out.join("summary.json").exists());
}

/// Runs `trajwiki` with `args` (and `env`), its address space capped at 512 MiB, its standard
/// input fed by `feed` on a thread until it stops reading; (exit code, stderr, seconds).
fn bounded_run(args: &[&str], env: &[(&str, &str)], feed: Option<Vec<u8>>) -> (i32, String, f64) {
    use std::io::Write;
    use std::process::Stdio;
    let start = std::time::Instant::now();
    let mut child = std::process::Command::new("timeout")
        .args([
            "20",
            "prlimit",
            "--as=536870912",
            "--",
            env!("CARGO_BIN_EXE_trajwiki"),
        ])
        .args(args)
        .envs(env.iter().copied())
        .stdin(if feed.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("timeout, prlimit and trajwiki run");
    let writer = feed.map(|head| {
        let mut stdin = child.stdin.take().unwrap();
        std::thread::spawn(move || {
            // The head, then `x` without end, until the reader hangs up.
            if stdin.write_all(&head).is_ok() {
                let chunk = vec![b'x'; 1 << 16];
                while stdin.write_all(&chunk).is_ok() {}
            }
        })
    });
    let out = child.wait_with_output().unwrap();
    if let Some(w) = writer {
        w.join().unwrap();
    }
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        start.elapsed().as_secs_f64(),
    )
}

/// A command given an endless input: its arguments, environment, the head of its standard input
/// (followed by `x` without end; none: no standard input), and what its error must say.
type Endless<'a> = (
    Vec<&'a str>,
    Vec<(&'a str, &'a str)>,
    Option<Vec<u8>>,
    Vec<&'a str>,
);

/// Endless inputs (`/dev/zero`, a pipe that never ends a line or a document) are refused at
/// their bound: exit code 2 within seconds, in bounded memory, naming the line and the limit,
/// and no store is created.
#[test]
fn endless_inputs_stop_at_their_bound() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let st = s(&store);
    let out = dir.path().join("out");
    let cases: Vec<Endless> = vec![
        (
            vec!["ingest", "--store", st, "/dev/zero"],
            vec![],
            None,
            vec!["/dev/zero", "line 1 starts with byte 0x00"],
        ),
        (
            vec!["ingest", "--store", st, "--format", "messages", "/dev/zero"],
            vec![],
            None,
            vec![
                "/dev/zero: line 1: longer than 1638400 bytes",
                "262144",
                "TRAJWIKI_MAX_MESSAGE_BYTES",
            ],
        ),
        (
            vec!["ingest", "--store", st, "--format", "runs", "/dev/zero"],
            vec![],
            None,
            vec![
                "/dev/zero: line 1: longer than 100728832 bytes",
                "TRAJWIKI_MAX_RUN_BYTES",
            ],
        ),
        (
            vec!["ingest", "--store", st, "--format", "locomo", "/dev/zero"],
            vec![],
            None,
            vec!["/dev/zero: line 1, column 1", "invalid JSON"],
        ),
        (
            vec!["ingest", "--store", st, "-"],
            vec![],
            Some(format!("{}{{\"text\": \"", message("text", r#""fine""#)).into_bytes()),
            vec!["<stdin>: line 2: longer than 1638400 bytes"],
        ),
        (
            vec!["ingest", "--store", st, "--format", "messages", "-"],
            vec![("TRAJWIKI_MAX_MESSAGE_BYTES", "1000")],
            Some(message("text", r#""fine""#).into_bytes()),
            vec![
                "<stdin>: line 2: longer than 71536 bytes",
                "at most 1000 bytes",
            ],
        ),
        (
            vec!["ingest", "--store", st, "-"],
            vec![("TRAJWIKI_MAX_DOCUMENT_BYTES", "1048576")],
            Some(b"[\"".to_vec()),
            vec![
                "<stdin>: longer than 1048576 bytes",
                "a JSON document (a LoCoMo file)",
                "TRAJWIKI_MAX_DOCUMENT_BYTES",
            ],
        ),
        (
            vec![
                "eval",
                "locomo",
                "--data",
                "/dev/zero",
                "--out",
                s(&out),
                "--model",
                "hashing",
            ],
            vec![],
            None,
            vec!["/dev/zero", "invalid JSON"],
        ),
    ];
    let mut failures = Vec::new();
    for (args, env, feed, expect) in cases {
        let (code, err, seconds) = bounded_run(&args, &env, feed);
        let problems: Vec<String> = [
            (code != 2).then(|| format!("exit code {code}")),
            (seconds > 10.0).then(|| format!("{seconds:.1} s")),
        ]
        .into_iter()
        .flatten()
        .chain(
            expect
                .iter()
                .filter(|e| !err.contains(*e))
                .map(|e| format!("no {e:?}")),
        )
        .collect();
        if !problems.is_empty() {
            failures.push(format!("{args:?}: {}\n{err}", problems.join(", ")));
        }
        assert!(!store.exists(), "{args:?} created the store");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
