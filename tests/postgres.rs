//! A PostgreSQL store through the CLI and through several `trajwiki serve` processes: the memory
//! it builds is the SQLite store's, byte for byte; two servers over one database serve any
//! namespace, see each other's appends, keep namespaces apart, and one goes on serving with
//! nothing lost when the other is killed. The server is started by the tests
//! (`crates/trajwiki-store/tests/support/pg.rs`).

mod common;

#[path = "../crates/trajwiki-store/tests/support/pg.rs"]
mod pg;

use std::path::Path;

use common::{ok, s, serve_hashing, Served};
use serde_json::{json, Value};

fn call(server: &Served, path: &str, body: Option<&Value>) -> (u16, Value) {
    let body = body.map(Value::to_string);
    common::http(&format!("{}{path}", server.url), body.as_deref(), None)
}

fn demo_messages() -> Vec<Value> {
    std::fs::read_to_string(common::demo())
        .unwrap()
        .lines()
        .map(|l| {
            let mut m: Value = serde_json::from_str(l).unwrap();
            m.as_object_mut().unwrap().remove("namespace");
            m
        })
        .collect()
}

#[test]
fn the_cli_builds_on_postgres_what_it_builds_on_sqlite() {
    let Some(server) = pg::server() else { return };
    let url = server.database();
    let dir = tempfile::tempdir().unwrap();
    let sqlite = common::demo_store(dir.path());
    ok(&["ingest", "--store", &url, s(&common::demo())]);
    common::build_hashing(&url, "demo");
    let memory = common::export_memory(&url, "demo");
    assert!(memory.lines().count() > 20);
    assert_eq!(memory, common::export_memory(s(&sqlite), "demo"));
    let check = ok(&["check", "--store", &url]);
    assert!(check.contains("ok"), "{check}");
    // A search answers from the same evidence.
    let search = |store: &str| {
        ok(&[
            "query",
            "--store",
            store,
            "--namespace",
            "demo",
            "--model",
            "hashing",
            "--json",
            "Where is the pottery workshop?",
        ])
    };
    let (a, b): (Value, Value) = (
        serde_json::from_str(&search(&url)).unwrap(),
        serde_json::from_str(&search(s(&sqlite))).unwrap(),
    );
    assert_eq!(a["evidence"], b["evidence"]);
    // A store URL is never a directory: nothing was created under the working directory.
    assert!(!Path::new("postgres:").exists());
}

#[test]
fn two_servers_over_one_database_serve_every_namespace() {
    let Some(pg) = pg::server() else { return };
    let url = pg.database();
    // A store to serve: the schema is made by the first writer.
    let seed = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        seed.path(),
        "{\"namespace\": \"seed\", \"session\": 1, \"seq\": 1, \"speaker\": \"A\", \"text\": \"hello\", \"timestamp\": \"2024-01-01T00:00:00\"}\n",
    )
    .unwrap();
    ok(&["ingest", "--store", &url, s(seed.path())]);
    let a = serve_hashing(&url, &[]);
    let b = serve_hashing(&url, &[]);
    let messages = demo_messages();
    // Message by message, through one server then the other: each append builds on what the
    // other server committed.
    for (i, m) in messages.iter().enumerate() {
        let via = if i % 2 == 0 { &a } else { &b };
        let last = i + 1 == messages.len();
        let (status, report) = call(
            via,
            "/v1/namespaces/live/messages",
            Some(&json!({"messages": [m], "flush": last})),
        );
        assert_eq!(status, 200, "{report}");
        assert_eq!(report["added"], 1, "{report}");
    }
    // The memory is what one batch builds, in a store of its own.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("live.jsonl");
    common::write_in_namespace(&file, &messages, "live");
    let batch = dir.path().join("batch");
    ok(&["ingest", "--store", s(&batch), s(&file)]);
    common::build_hashing(s(&batch), "live");
    assert_eq!(
        common::export_memory(&url, "live"),
        common::export_memory(s(&batch), "live")
    );

    // Read through the other server: the same answer from either.
    let question = json!({"question": "Where is the pottery workshop?"});
    let (sa, found_a) = call(&a, "/v1/namespaces/live/search", Some(&question));
    let (sb, found_b) = call(&b, "/v1/namespaces/live/search", Some(&question));
    assert_eq!((sa, sb), (200, 200), "{found_a} {found_b}");
    assert_eq!(found_a["evidence"], found_b["evidence"]);
    assert!(found_a["evidence"]
        .as_array()
        .is_some_and(|e| !e.is_empty()));

    // Namespace isolation: another namespace's records are not found through this one.
    let (status, report) = call(
        &b,
        "/v1/namespaces/other/messages",
        Some(
            &json!({"messages": [{"session": 1, "seq": 1, "speaker": "Zed",
            "text": "My pottery kiln is in Reykjavik.", "timestamp": "2024-05-01T09:00:00"}]}),
        ),
    );
    assert_eq!(status, 200, "{report}");
    let (_, found) = call(&a, "/v1/namespaces/live/search", Some(&question));
    assert!(
        !found["evidence"].to_string().contains("Reykjavik"),
        "{found}"
    );
    let (_, found) = call(&a, "/v1/namespaces/other/search", Some(&question));
    let evidence = found["evidence"].to_string();
    assert!(evidence.contains("Reykjavik"), "{found}");
    assert!(!evidence.contains("Maya"), "{found}");
    let (status, _) = call(&a, "/v1/namespaces/nobody/search", Some(&question));
    assert_eq!(status, 404);
    let (_, namespaces) = call(&a, "/v1/namespaces", None);
    let names: Vec<&str> = namespaces["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["namespace"].as_str())
        .collect();
    assert_eq!(names, ["live", "other", "seed"], "{namespaces}");

    // Kill one server: the other keeps serving, appends included, and nothing is lost.
    let before = common::stats(Path::new(&url));
    drop(a);
    let (status, report) = call(
        &b,
        "/v1/namespaces/live/messages",
        Some(
            &json!({"messages": [{"session": 9, "seq": 1, "speaker": "Maya",
            "text": "The workshop moved to Tuesdays.", "timestamp": "2024-06-01T10:00:00"}],
            "flush": true}),
        ),
    );
    assert_eq!(status, 200, "{report}");
    let (status, found) = call(&b, "/v1/namespaces/live/search", Some(&question));
    assert_eq!(status, 200, "{found}");
    let after = common::stats(Path::new(&url));
    assert_eq!(
        after["messages"].as_u64(),
        before["messages"].as_u64().map(|n| n + 1),
        "{before} {after}"
    );
    assert_eq!(after["namespaces"], before["namespaces"]);
    let check = ok(&["check", "--store", &url]);
    assert!(check.contains("ok"), "{check}");
}
