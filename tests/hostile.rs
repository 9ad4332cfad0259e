//! Hostile input, as a careless or malicious user would give it: every case must end in exit
//! code 2 with an error that names what is wrong and where, and leave the store exactly as it
//! was (its stats, its messages and its memory, exported before and after, are equal). Then the
//! output cases: stored text with escape sequences is printed escaped, and output files never
//! replace a store's files.

mod common;

use std::path::{Path, PathBuf};

use common::{demo, ok, stats, trajwiki};

fn s(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// A store holding the demo conversation, built, in `dir`.
fn demo_store(dir: &Path) -> PathBuf {
    let store = dir.join("store");
    ok(&["ingest", "--store", s(&store), s(&demo())]);
    ok(&[
        "build",
        "--store",
        s(&store),
        "--namespace",
        "demo",
        "--model",
        "hashing",
        "--flush",
        "-q",
    ]);
    store
}

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
    args: Vec<&'static str>,
    expect: Vec<&'static str>,
}

fn case(name: &'static str, args: &[&'static str], expect: &[&'static str]) -> Case {
    Case {
        name,
        files: Vec::new(),
        args: args.to_vec(),
        expect: expect.to_vec(),
    }
}

impl Case {
    fn file(mut self, name: &'static str, content: impl Into<Vec<u8>>) -> Case {
        self.files.push((name, content.into()));
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
            std::fs::write(work.join(name), content).unwrap();
        }
        let args: Vec<String> = c
            .args
            .iter()
            .map(|a| a.replace("{store}", s(&store)).replace("{dir}", s(&work)))
            .collect();
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, _out, err) = trajwiki(&refs);
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
