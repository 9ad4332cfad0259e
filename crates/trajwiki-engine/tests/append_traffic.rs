//! What one append with its build asks of the store (issue 51, "an append writes once"):
//! entries (transactions, and statements outside one) and write transactions, counted by
//! `trajwiki_store::traffic` on the appending thread, for an append to a namespace that is built
//! and searched already (its fold and index kept, as a server's are). The search that follows
//! is counted too: the append took the kept index to its state inside its transaction, so the
//! search reads the namespace's state and nothing else (it read the append's changes back, 3
//! entries, before).
//!
//! Before issue 51 the same append entered the store 9 times with 3 write transactions (10 on
//! PostgreSQL, and a connection opened for the build lock): the settings, the messages, the fold's read, the cache, the commit, the vector
//! file's state, the cache again and the vector rows, each on its own.

use std::sync::Arc;

use serde_json::{json, Value};
use trajwiki_core::Namespace;
use trajwiki_engine::api::{load_embedder, Query};
use trajwiki_engine::messages::parse_messages;
use trajwiki_engine::pipeline::BuildOptions;
use trajwiki_engine::{Engine, Model};
use trajwiki_retrieve::{Mode, RetrievalConfig};
use trajwiki_store::traffic::{self, Traffic};
use trajwiki_store::Store;

#[path = "../../trajwiki-store/tests/support/pg.rs"]
mod pg;

fn messages(ns: &Namespace, from: usize, n: usize) -> Vec<trajwiki_store::Append> {
    let batch: Vec<Value> = (from..from + n)
        .map(|i| {
            let speaker = ["Maya", "Leo"][i % 2];
            json!({
                "session": 1 + i / 20,
                "speaker": speaker,
                "text": format!("Message {i}: I went to the pottery workshop in Lisbon with my sister {i}."),
                "timestamp": format!("2024-01-{:02}T10:{:02}:00", 1 + i / 20, i % 60),
            })
        })
        .collect();
    parse_messages(json!(batch), Some(ns), "<test>", None).unwrap()
}

fn search(engine: &Engine, ns: &Namespace) {
    let config = RetrievalConfig::default();
    let query = Query {
        question: "Where is the pottery workshop?",
        mode: Mode::Full,
        budget: 700,
        config: &config,
    };
    engine
        .with_store(|store| engine.namespace(ns).search(store, &query))
        .unwrap();
}

/// Messages `at..at + n` appended to `ns` with their build.
fn append_built(engine: &Engine, ns: &Namespace, at: usize, n: usize) {
    let batch = messages(ns, at, n);
    let appended = engine
        .with_store(|store| {
            engine
                .namespace(ns)
                .append(store, "test", &batch, Some(BuildOptions::default()))
        })
        .unwrap();
    appended.build.unwrap().unwrap();
}

/// One append of a reply (closing an exchange) with its build, counted.
fn append_counted(engine: &Engine, ns: &Namespace, at: usize) -> Traffic {
    traffic::during(|| append_built(engine, ns, at, 2)).1
}

/// One append of a reply (closing an exchange) with its build, then a search, counted.
fn counted(engine: &Engine, ns: &Namespace, at: usize) -> (Traffic, Traffic) {
    let append = append_counted(engine, ns, at);
    let ((), search) = traffic::during(|| search(engine, ns));
    (append, search)
}

/// The counts of one append with build on `store`, and of the search after it.
fn measured(store: Store) -> (Traffic, Traffic) {
    let model = Model::Loaded(load_embedder("hashing-64").unwrap().into());
    let engine = Engine::new(
        store,
        model,
        Arc::new(trajwiki_compute::CpuScoring),
        64 << 20,
    );
    let ns = Namespace::new("traffic").unwrap();
    // A built, searched namespace: its fold and index are kept.
    append_built(&engine, &ns, 0, 40);
    search(&engine, &ns);
    let first = counted(&engine, &ns, 40);
    let second = counted(&engine, &ns, 42);
    // Each append of the same shape costs the same: nothing accumulates.
    assert_eq!(first, second);
    second
}

fn holds_to_the_bound((append, search): (Traffic, Traffic), backend: &str, bound: Traffic) {
    eprintln!("{backend}: one append with build: {append:?}; the search after it: {search:?}");
    assert!(append.write_transactions >= 1, "{append:?}");
    assert!(
        append.write_transactions <= bound.write_transactions && append.entries <= bound.entries,
        "{backend}: one append with build costs more than {bound:?}: {append:?}"
    );
    assert_eq!(search.write_transactions, 0, "{search:?}");
    // The kept index was taken to the append's state inside its transaction: the search only
    // reads the namespace's state, finds the index current, and answers.
    assert_eq!(
        search.entries, 1,
        "{backend}: the search after an append: {search:?}"
    );
}

#[test]
fn one_append_with_its_build_enters_the_store_a_bounded_number_of_times() {
    let dir = tempfile::tempdir().unwrap();
    holds_to_the_bound(measured(Store::open(dir.path()).unwrap()), "SQLite", SQLITE);
}

#[test]
fn one_append_with_its_build_enters_postgres_a_bounded_number_of_times() {
    let Some(server) = pg::server() else { return };
    holds_to_the_bound(
        measured(Store::open(server.database()).unwrap()),
        "PostgreSQL",
        POSTGRES,
    );
}

/// On SQLite an append with its build is one write transaction, entered once: the build
/// settings read, the messages' write, the fold's read of what arrived, the embedding cache,
/// the memory's commit and the vector rows all inside it (issue 51's target: at most 3 entries,
/// one write transaction).
const SQLITE: Traffic = Traffic {
    entries: 1,
    write_transactions: 1,
    statements: 0,
};

/// On PostgreSQL the same: the namespace's build lock is taken by the transaction itself
/// (before its write lock), where it was a session lock on a connection of its own.
const POSTGRES: Traffic = Traffic {
    entries: 1,
    write_transactions: 1,
    statements: 0,
};

/// The segment files of the store at `dir`, with their bytes.
fn segments(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut found = Vec::new();
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "seg") {
                let bytes = std::fs::read(&path).unwrap();
                found.push((path, bytes));
            }
        }
    }
    found
}

/// After a build the engine looks at the namespace's index segment (written when due: missing,
/// or the namespace grown by an eighth since it was written). An append whose messages cannot
/// make it due, by what the last look found and the messages appended since, asks the store
/// nothing for it (that look counted every message of the namespace, on a thread of its own
/// beside the search that followed the append); the append that makes it due writes it, and
/// so does the next one after its file changed under the engine. Segments written in line here
/// (an engine building once), so that the look is counted on the appending thread.
#[test]
fn an_append_looks_at_the_segment_only_when_it_may_be_due() {
    let dir = tempfile::tempdir().unwrap();
    let model = Model::Loaded(load_embedder("hashing-64").unwrap().into());
    let engine = Engine::new(
        Store::open(dir.path()).unwrap(),
        model,
        Arc::new(trajwiki_compute::CpuScoring),
        64 << 20,
    )
    .building_once();
    let ns = Namespace::new("segmented").unwrap();
    let append = |at: usize| append_counted(&engine, &ns, at);
    append_built(&engine, &ns, 0, 40);
    let written = segments(dir.path());
    assert_eq!(written.len(), 1, "the build wrote the segment");
    // 42 and 44 messages: under 40 + 40/8, nothing asked, nothing written.
    for at in [40, 42] {
        let traffic = append(at);
        assert_eq!(traffic.entries, 1, "{} messages: {traffic:?}", at + 2);
        assert_eq!(segments(dir.path()), written, "{} messages", at + 2);
    }
    // 46: due, looked at and written again.
    let traffic = append(44);
    assert!(traffic.entries > 1, "46 messages: {traffic:?}");
    let rewritten = segments(dir.path());
    assert_eq!(rewritten.len(), 1);
    assert_ne!(
        rewritten, written,
        "46 messages: the segment is written again"
    );
    // 48: under 46 + 46/8 again.
    assert_eq!(append(46).entries, 1);
    assert_eq!(segments(dir.path()), rewritten);
    // The file changed under the engine (removed, as a delete of another process does): the
    // next append looks, and writes it.
    std::fs::remove_file(&rewritten[0].0).unwrap();
    assert!(append(48).entries > 1);
    assert_eq!(segments(dir.path()).len(), 1, "written again");
    assert_eq!(append(50).entries, 1);
}
