//! The read side lives: a server's index after an append — its records and the store's
//! changes since (`Store::namespace_changes`), and what the previous load derived from single
//! records (`trajwiki::retrieve::Derived`) — answers exactly as an index loaded cold from the
//! store. Random messages are appended over HTTP, one request at a time — one message or
//! several, built, flushed or not built — to the current session, to a new one and to an older
//! one (a backfill), through the searched server
//! or through another one over the same store; after each, the server's search is compared with
//! a fresh server's (whose index is loaded cold): context, the ranking of every level and
//! evidence, byte for byte. On SQLite, and on PostgreSQL when a server can be started
//! (`crates/trajwiki-store/tests/support/pg.rs`).

mod common;

#[path = "../crates/trajwiki-store/tests/support/pg.rs"]
mod pg;

#[path = "../crates/trajwiki-engine/tests/support/appends.rs"]
mod appends;
use appends::{Numbers, SPEAKERS, WORDS};

use common::{ok, s, serve_hashing, Served};
use serde_json::{json, Value};

/// Questions about the demo's speakers and about the appended ones (whose names the lexicon
/// learns from the appends).
const QUESTIONS: [&str; 5] = [
    "Where is the pottery workshop?",
    "What did Maya plant in the garden?",
    "When did Leo go to Lisbon?",
    "What did Ines say about the beach?",
    "How many books did Leo and Ines read?",
];

/// One random message: mostly to the newest session, sometimes to a new one or an older one.
fn message(numbers: &mut Numbers, step: usize, newest: &mut u32) -> Value {
    let session = match numbers.below(6) {
        0 => {
            *newest += 1;
            *newest
        }
        1 => 1 + numbers.below(*newest as usize) as u32,
        _ => *newest,
    };
    let words: Vec<&str> = (0..4 + numbers.below(8))
        .map(|_| WORDS[numbers.below(WORDS.len())])
        .collect();
    json!({
        "session": session,
        "speaker": SPEAKERS[numbers.below(SPEAKERS.len())],
        "text": format!("Step {step}: I {}.", words.join(" ")),
        "timestamp": format!("2024-0{}-1{}T10:00:00", 1 + session % 9, step % 10),
    })
}

/// A search's answer without what depends on when and how it was computed.
fn comparable(mut search: Value) -> Value {
    let o = search.as_object_mut().expect("a search answers an object");
    o.remove("timings");
    o.remove("embedded_on_load");
    o["ranking"]
        .as_object_mut()
        .expect("a search has its ranking")
        .remove("timings");
    search
}

/// The answer of `server` to `question`: context, ranking (every message's rank included),
/// evidence.
fn search(server: &Served, question: &str) -> Value {
    comparable(answer(server, question))
}

/// The whole answer of `server` to `question`.
fn answer(server: &Served, question: &str) -> Value {
    let (status, body) = common::http(
        &format!("{}/v1/namespaces/demo/search", server.url),
        Some(&json!({ "question": question, "budget": 400 }).to_string()),
        None,
    );
    assert_eq!(status, 200, "{body}");
    body
}

/// Whether the index that answered was not loaded whole: brought up to date in place by this
/// search (its load stages are those of an update), or current already (an append through this
/// server takes the kept index to the state it leaves; nothing is loaded).
fn taken_in_place(answer: &Value) -> bool {
    match answer["timings"]["index_load_stages"].as_object() {
        Some(stages) if !stages.is_empty() => stages.contains_key("apply"),
        _ => true,
    }
}

/// The answer of a server started now, whose index is loaded cold from `store`.
fn cold_search(store: &str, question: &str) -> Value {
    search(&serve_hashing(store, &[]), question)
}

/// Appends `steps` random messages to `store`'s demo namespace through a server, comparing its
/// searches after each append with a cold load's.
fn appends_answer_as_a_cold_load(store: &str, seed: u64, steps: usize) {
    let server = serve_hashing(store, &[]);
    // Every other append goes through another server over the same store: the first picks the
    // write up from the store's changes, not from its own.
    let other = serve_hashing(store, &[]);
    let mut numbers = Numbers(seed);
    let mut newest = 3;
    let mut in_place = 0;
    // The first search loads the index; every later one follows the appends.
    for q in QUESTIONS {
        assert_eq!(
            search(&server, q),
            cold_search(store, q),
            "seed {seed}, {q}"
        );
    }
    for step in 0..steps {
        // One message or several of one session; built waiting for the reply, flushed, or
        // not built.
        let first = message(&mut numbers, step, &mut newest);
        let mut m = vec![first.clone()];
        for _ in 0..[0, 0, 0, 1, 2][numbers.below(5)] {
            let mut more = message(&mut numbers, step, &mut newest);
            more["session"] = first["session"].clone();
            m.push(more);
        }
        let (build, flush) =
            [(true, false), (true, false), (true, true), (false, false)][numbers.below(4)];
        let (status, body) = common::http(
            &format!(
                "{}/v1/namespaces/demo/messages",
                [&server, &other][step % 2].url
            ),
            Some(&json!({ "messages": m, "build": build, "flush": flush }).to_string()),
            None,
        );
        assert_eq!(status, 200, "{body}");
        let q = QUESTIONS[numbers.below(QUESTIONS.len())];
        let live = answer(&server, q);
        in_place += usize::from(taken_in_place(&live));
        assert_eq!(
            comparable(live),
            cold_search(store, q),
            "seed {seed}, after step {step} ({m:?}): {q}"
        );
    }
    // Most appends go on the conversation and are taken in place; a backfill loads it whole.
    assert!(
        in_place >= steps / 2,
        "seed {seed}: {in_place} of {steps} appends taken in place"
    );
    eprintln!("seed {seed}: {in_place} of {steps} appends taken in place");
}

#[test]
fn a_search_after_each_append_is_a_cold_loads_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::demo_store(dir.path());
    appends_answer_as_a_cold_load(s(&store), 7, 24);
}

#[test]
fn a_search_after_each_append_is_a_cold_loads_on_postgres() {
    let Some(server) = pg::server() else { return };
    let url = server.database();
    ok(&["ingest", "--store", &url, s(&common::demo())]);
    common::build_hashing(&url, "demo");
    appends_answer_as_a_cold_load(&url, 11, 12);
}
