//! Appends that are right: over HTTP a message without `seq` is a new message at the next
//! position of its session, whatever its text (people say "ok" many times); retries are
//! recognised by a key the client gives (`ref`, or an `Idempotency-Key` header), never by
//! content; several `trajwiki serve` processes appending to one store (SQLite or PostgreSQL)
//! never take one position twice; a conflict names the field that differs.

mod common;

#[path = "../crates/trajwiki-store/tests/support/pg.rs"]
mod pg;

use std::path::Path;

use common::{ok, s, serve_hashing, Served};
use serde_json::{json, Value};

/// A store at `dir/store` holding one message of namespace `seed`, for servers to open.
fn seeded(dir: &Path) -> String {
    let store = dir.join("store");
    let file = dir.join("seed.jsonl");
    std::fs::write(
        &file,
        "{\"namespace\": \"seed\", \"session\": 1, \"seq\": 1, \"speaker\": \"A\", \"text\": \"hello\", \"timestamp\": \"2024-01-01T00:00:00\"}\n",
    )
    .unwrap();
    ok(&["ingest", "--store", s(&store), s(&file)]);
    s(&store).to_string()
}

/// (status, body) of `POST {server}{path}` with `body`, and an `Idempotency-Key` when `key`.
fn post(server: &Served, path: &str, body: &Value, key: Option<&str>) -> (u16, Value) {
    let mut req =
        ureq::post(&format!("{}{path}", server.url)).set("Content-Type", "application/json");
    if let Some(k) = key {
        req = req.set("Idempotency-Key", k);
    }
    let res = match req.send_string(&body.to_string()) {
        Ok(r) | Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("{path}: {e}"),
    };
    let status = res.status();
    let text = res.into_string().unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// The stored messages of `ns` as `export` writes them: (session, seq, text, ref) each.
fn stored(store: &str, ns: &str) -> Vec<(u64, u64, String, Option<String>)> {
    ok(&[
        "export",
        "--store",
        store,
        "--namespace",
        ns,
        "--what",
        "messages",
    ])
    .lines()
    .map(|l| {
        let m: Value = serde_json::from_str(l).unwrap();
        (
            m["session"].as_u64().unwrap(),
            m["seq"].as_u64().unwrap(),
            m["text"].as_str().unwrap().to_string(),
            m["ref"].as_str().map(str::to_string),
        )
    })
    .collect()
}

fn append_body(messages: Value) -> Value {
    json!({"messages": messages, "build": false})
}

#[test]
fn messages_without_seq_over_http_are_new_messages_and_keys_make_retries_no_ops() {
    let dir = tempfile::tempdir().unwrap();
    let store = seeded(dir.path());
    let server = serve_hashing(&store, &[]);
    let path = "/v1/namespaces/chat/messages";
    let okay =
        json!({"session": 5, "speaker": "Ann", "text": "ok", "timestamp": "2024-05-01T10:00:00"});
    // Three requests of the same words: three messages.
    for _ in 0..3 {
        let (status, report) = post(&server, path, &append_body(json!([okay])), None);
        assert_eq!(status, 200, "{report}");
        assert_eq!(
            (&report["added"], &report["unchanged"]),
            (&json!(1), &json!(0))
        );
    }
    // The same message twice in one request: two more.
    let (status, report) = post(&server, path, &append_body(json!([okay, okay])), None);
    assert_eq!((status, &report["added"]), (200, &json!(2)), "{report}");
    let positions: Vec<(u64, u64)> = stored(&store, "chat")
        .iter()
        .map(|(session, seq, text, _)| {
            assert_eq!(text, "ok");
            (*session, *seq)
        })
        .collect();
    assert_eq!(positions, [(5, 1), (5, 2), (5, 3), (5, 4), (5, 5)]);

    // A message with a ref is idempotent by it: again (wherever the session is now) unchanged;
    // a new ref with the same words is a new message, never a conflict.
    let with_ref = |r: &str| json!({"session": 5, "speaker": "Ann", "text": "ok", "timestamp": "2024-05-01T10:00:00", "ref": r});
    let (status, report) = post(&server, path, &append_body(json!([with_ref("r1")])), None);
    assert_eq!((status, &report["added"]), (200, &json!(1)), "{report}");
    post(&server, path, &append_body(json!([okay])), None);
    let (status, report) = post(&server, path, &append_body(json!([with_ref("r1")])), None);
    assert_eq!(
        (status, &report["added"], &report["unchanged"]),
        (200, &json!(0), &json!(1)),
        "{report}"
    );
    let (status, report) = post(&server, path, &append_body(json!([with_ref("r2")])), None);
    assert_eq!((status, &report["added"]), (200, &json!(1)), "{report}");

    // An Idempotency-Key: the retried request adds nothing; the key used again for other
    // messages is a conflict that names the field.
    let two = json!([
        {"session": 6, "speaker": "Ann", "text": "thanks", "timestamp": "2024-05-02T10:00:00"},
        {"session": 6, "speaker": "Bob", "text": "thanks", "timestamp": "2024-05-02T10:00:01"},
    ]);
    let (status, report) = post(&server, path, &append_body(two.clone()), Some("req-42"));
    assert_eq!((status, &report["added"]), (200, &json!(2)), "{report}");
    let (status, report) = post(&server, path, &append_body(two), Some("req-42"));
    assert_eq!(
        (status, &report["added"], &report["unchanged"]),
        (200, &json!(0), &json!(2)),
        "{report}"
    );
    let other = json!([{"session": 6, "speaker": "Ann", "text": "bye", "timestamp": "2024-05-02T10:00:00"}]);
    let (status, report) = post(&server, path, &append_body(other), Some("req-42"));
    assert_eq!(status, 409, "{report}");
    let message = report["error"]["message"].as_str().unwrap();
    assert!(message.contains("field `text` differs"), "{message}");
    let (status, report) = post(&server, path, &append_body(json!([okay])), Some("a key"));
    assert_eq!(status, 400, "{report}");
    assert!(
        report["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Idempotency-Key"),
        "{report}"
    );
    let session6: Vec<(u64, Option<String>)> = stored(&store, "chat")
        .into_iter()
        .filter(|m| m.0 == 6)
        .map(|(_, seq, _, r)| (seq, r))
        .collect();
    assert_eq!(
        session6,
        [(1, Some("req-42#1".into())), (2, Some("req-42#2".into()))]
    );
    ok(&["check", "--store", &store]);
}

#[test]
fn a_conflict_names_the_field_that_differs() {
    let dir = tempfile::tempdir().unwrap();
    let store = seeded(dir.path());
    let server = serve_hashing(&store, &[]);
    let path = "/v1/namespaces/pics/messages";
    let photo = |caption: &str| {
        json!({"seq": 1, "speaker": "Ann", "text": "look", "timestamp": "2024-05-01T10:00:00",
               "attachments": [{"kind": "image", "caption": caption}]})
    };
    let (status, report) = post(&server, path, &append_body(json!([photo("a cat")])), None);
    assert_eq!(status, 200, "{report}");
    let (status, report) = post(&server, path, &append_body(json!([photo("a dog")])), None);
    assert_eq!(status, 409, "{report}");
    let message = report["error"]["message"].as_str().unwrap();
    assert!(message.contains("field `attachments` differs"), "{message}");
    assert!(
        message.contains("a cat") && message.contains("a dog"),
        "{message}"
    );
}

/// Eight clients spread over two servers append to one namespace of `store`, each message
/// without `seq`: every append is stored, none conflicts, and the positions are 1..N.
fn two_servers_append_without_conflicts(store: &str) {
    let servers = [serve_hashing(store, &[]), serve_hashing(store, &[])];
    let (clients, each) = (8, 25);
    let outcomes: Vec<(u16, Value)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                let servers = &servers;
                scope.spawn(move || {
                    (0..each)
                        .map(|i| {
                            let m = json!({"speaker": format!("client{c}"), "text": format!("message {i} of client {c}"),
                                           "timestamp": "2024-05-01T10:00:00"});
                            post(
                                &servers[(c + i) % 2],
                                "/v1/namespaces/busy/messages",
                                &append_body(json!([m])),
                                None,
                            )
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let failed: Vec<&(u16, Value)> = outcomes.iter().filter(|(st, _)| *st != 200).collect();
    assert!(
        failed.is_empty(),
        "{} of {} appends failed, first: {:?}",
        failed.len(),
        outcomes.len(),
        failed.first()
    );
    let messages = stored(store, "busy");
    let seqs: Vec<u64> = messages.iter().map(|m| m.1).collect();
    let n = (clients * each) as u64;
    assert_eq!(seqs, (1..=n).collect::<Vec<_>>());
    let mut texts: Vec<&str> = messages.iter().map(|m| m.2.as_str()).collect();
    texts.sort_unstable();
    texts.dedup();
    assert_eq!(texts.len() as u64, n, "every append is stored once");
    ok(&["check", "--store", store]);
}

#[test]
fn two_servers_over_one_sqlite_store_take_turns_for_positions() {
    let dir = tempfile::tempdir().unwrap();
    let store = seeded(dir.path());
    two_servers_append_without_conflicts(&store);
}

#[test]
fn two_servers_over_one_postgres_database_take_turns_for_positions() {
    let Some(server) = pg::server() else { return };
    let url = server.database();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("seed.jsonl");
    std::fs::write(
        &file,
        "{\"namespace\": \"seed\", \"session\": 1, \"seq\": 1, \"speaker\": \"A\", \"text\": \"hello\", \"timestamp\": \"2024-01-01T00:00:00\"}\n",
    )
    .unwrap();
    ok(&["ingest", "--store", &url, s(&file)]);
    two_servers_append_without_conflicts(&url);
}
