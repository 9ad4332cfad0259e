//! Memory at scale on disk: a store written by schema 2 upgrades in place (to the vector files of
//! schema 3 and the namespace-keyed lists of schema 4); the vector file stays
//! consistent with the database through SIGKILLs during builds and through a torn tail.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{bin, demo, ok, stats, trajwiki};
use trajwiki::store::{Store, DB_FILE, VECTOR_DIR};

/// The vector files (and approximate indexes) of a store; not its index segments (`*.seg`,
/// `tests/segments.rs`).
fn vector_files(store: &Path) -> Vec<PathBuf> {
    match std::fs::read_dir(store.join(VECTOR_DIR)) {
        Ok(dir) => dir
            .map(|e| e.unwrap().path())
            .filter(|p| !p.to_string_lossy().contains(".seg"))
            .collect(),
        Err(_) => Vec::new(),
    }
}

fn query_refs(store: &Path, ns: &str, question: &str) -> Vec<String> {
    let out = ok(&[
        "query",
        "--store",
        store.to_str().unwrap(),
        "--namespace",
        ns,
        "--model",
        "hashing",
        "--json",
        question,
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v["source_refs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_string())
        .collect()
}

/// The list tables as schema 3 had them (keyed by owner id alone, with a rowid), with the
/// columns they share with schema 4.
const SCHEMA_3_LISTS: &[(&str, &str, &str)] = &[
    (
        "snapshot_messages",
        "snapshot TEXT NOT NULL REFERENCES snapshots (id), position INTEGER NOT NULL,
         message TEXT NOT NULL REFERENCES messages (id), PRIMARY KEY (snapshot, position)",
        "snapshot, position, message",
    ),
    (
        "claim_sources",
        "claim TEXT NOT NULL REFERENCES claims (id), position INTEGER NOT NULL,
         message TEXT NOT NULL REFERENCES messages (id), PRIMARY KEY (claim, position)",
        "claim, position, message",
    ),
    (
        "snapshot_claims",
        "snapshot TEXT NOT NULL REFERENCES snapshots (id), position INTEGER NOT NULL,
         claim TEXT NOT NULL REFERENCES claims (id), PRIMARY KEY (snapshot, position)",
        "snapshot, position, claim",
    ),
    (
        "op_sources",
        "op TEXT NOT NULL REFERENCES claim_ops (id), position INTEGER NOT NULL,
         message TEXT NOT NULL REFERENCES messages (id), PRIMARY KEY (op, position)",
        "op, position, message",
    ),
    (
        "claim_state",
        "claim TEXT PRIMARY KEY REFERENCES claims (id), status TEXT NOT NULL",
        "claim, status",
    ),
    (
        "page_trajectories",
        "page TEXT NOT NULL, revision INTEGER NOT NULL, position INTEGER NOT NULL,
         trajectory TEXT NOT NULL REFERENCES trajectories (id),
         PRIMARY KEY (page, revision, position),
         FOREIGN KEY (page, revision) REFERENCES page_revisions (page, revision)",
        "page, revision, position, trajectory",
    ),
];

/// Turns a current store into the one schema 2 wrote. Migration 10 stores a revision's links
/// in chunks, so they are written back as `page_trajectories` rows and the column dropped;
/// migrations 9, 8 and 7 only add (page chunks; an index of ops by claim; the generation clock
/// and columns, their indexes), so dropping them undoes them (a chunked page's body is then
/// empty: no answer reads it); migration 4 only rekeys the list tables (their rows unchanged),
/// so rebuilding them in schema 3's shape undoes it; migration 3 only adds (the vector file
/// table, an index), so removing what it added leaves exactly schema 2's database.
fn downgrade_to_schema_2(store: &Path) {
    let conn = rusqlite::Connection::open(store.join(DB_FILE)).unwrap();
    let chunked: Vec<(String, String, i64, String)> = conn
        .prepare(
            "SELECT p.namespace, r.page, r.revision, r.link_chunks
             FROM page_revisions r JOIN pages p ON p.id = r.page WHERE r.link_chunks IS NOT NULL",
        )
        .unwrap()
        .query_map((), |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(
        !chunked.is_empty(),
        "a build writes its pages' links in chunks"
    );
    for (ns, page, revision, list) in chunked {
        let mut position = 0;
        for hash in list.split(',').filter(|h| !h.is_empty()) {
            let text: String = conn
                .query_row(
                    "SELECT text FROM page_chunks WHERE namespace = ?1 AND hash = ?2",
                    (&ns, hash),
                    |row| row.get(0),
                )
                .unwrap();
            for trajectory in text.lines() {
                conn.execute(
                    "INSERT INTO page_trajectories (namespace, page, revision, position, trajectory)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    (&ns, &page, revision, position, trajectory),
                )
                .unwrap();
                position += 1;
            }
        }
    }
    conn.execute_batch("ALTER TABLE page_revisions DROP COLUMN link_chunks;")
        .unwrap();
    conn.execute_batch("DROP TABLE generation_clock; DROP TABLE namespace_generations;")
        .unwrap();
    for table in [
        "snapshots",
        "claims",
        "claim_state",
        "trajectories",
        "pages",
    ] {
        conn.execute_batch(&format!(
            "DROP INDEX {table}_by_generation; ALTER TABLE {table} DROP COLUMN generation;"
        ))
        .unwrap();
    }
    for (table, columns, names) in SCHEMA_3_LISTS {
        conn.execute_batch(&format!(
            "CREATE TABLE {table}_v3 ({columns}) STRICT;
             INSERT INTO {table}_v3 ({names}) SELECT {names} FROM {table};
             DROP TABLE {table};
             ALTER TABLE {table}_v3 RENAME TO {table};"
        ))
        .unwrap();
        if *table != "claim_state" {
            conn.execute_batch(&format!(
                "CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table}
                 BEGIN SELECT RAISE(ABORT, 'immutable record'); END;
                 CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table}
                 WHEN (SELECT allow_delete FROM guard) = 0
                 BEGIN SELECT RAISE(ABORT, 'immutable record'); END;"
            ))
            .unwrap();
        }
    }
    conn.execute_batch(
        "CREATE INDEX snapshot_messages_by_message ON snapshot_messages (message);
         DROP INDEX claim_ops_by_new_claim;
         DROP TABLE page_chunks; ALTER TABLE page_revisions DROP COLUMN chunks;
         DROP TABLE vector_files; DROP INDEX messages_by_arrival; DROP TABLE llm_responses;
         PRAGMA user_version = 2;",
    )
    .unwrap();
    drop(conn);
    std::fs::remove_dir_all(store.join(VECTOR_DIR)).unwrap();
}

#[test]
fn a_schema_2_store_upgrades_in_place_and_passes_check() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let s = store.to_str().unwrap();
    ok(&["ingest", "--store", s, demo().to_str().unwrap()]);
    // A second namespace, so that the rekeyed lists hold rows of two.
    let other = dir.path().join("other.jsonl");
    conversation(&other, 60, 0);
    ok(&["ingest", "--store", s, other.to_str().unwrap()]);
    ok(&["build", "--store", s, "--model", "hashing", "--flush"]);
    let question = "What did Maya decide about the race?";
    let before = query_refs(&store, "demo", question);
    let other_question = "Who talked about the roses in Oslo?";
    let other_before = query_refs(&store, "long", other_question);
    downgrade_to_schema_2(&store);
    assert!(vector_files(&store).is_empty());

    // Opening upgrades; the store is sound and answers as before, its vectors from the cache.
    ok(&["check", "--store", s]);
    assert_eq!(query_refs(&store, "long", other_question), other_before);
    assert_eq!(
        stats(&store)["schema_version"],
        trajwiki::store::SCHEMA_VERSION
    );
    assert_eq!(query_refs(&store, "demo", question), before);
    assert!(
        vector_files(&store).is_empty(),
        "a query writes no vector file"
    );

    // The next build writes the vector file for every message, and the answer stays.
    ok(&["build", "--store", s, "--model", "hashing"]);
    let files = vector_files(&store);
    assert_eq!(files.len(), 2, "one per namespace");
    let messages = stats(&store)["messages"].as_u64().unwrap() as usize - 60;
    let opened = Store::open(&store).unwrap();
    let ns = trajwiki::core::Namespace::new("demo").unwrap();
    let info = opened.vector_file(&ns, "hashing-384").unwrap().unwrap();
    assert_eq!(info.rows, messages);
    assert_eq!(
        std::fs::metadata(&info.path).unwrap().len() as usize,
        messages * 384 * 2,
        "f16 rows by default"
    );
    ok(&["check", "--store", s]);
    assert_eq!(query_refs(&store, "demo", question), before);
    assert_eq!(query_refs(&store, "long", other_question), other_before);
}

/// One namespace of `n` messages, as JSONL.
fn conversation(path: &Path, n: usize, from: usize) {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for i in from..from + n {
        writeln!(
            out,
            r#"{{"namespace": "long", "session": {}, "seq": {}, "speaker": "S{}", "text": "Turn {i}: we talked about the garden, the {} and a trip to {}.", "timestamp": "2024-01-01T10:00:00", "ref": "R{i}"}}"#,
            1 + i / 50,
            1 + i % 50,
            i % 2,
            ["roses", "tomatoes", "pond", "fence"][i % 4],
            ["Lisbon", "Oslo", "Kyoto"][i % 3],
        )
        .unwrap();
    }
}

fn vector_rows(store: &Path) -> Option<usize> {
    let opened = Store::open(store).unwrap();
    let ns = trajwiki::core::Namespace::new("long").unwrap();
    opened
        .vector_file(&ns, "hashing-384")
        .unwrap()
        .map(|f| f.rows)
}

#[test]
fn sigkill_during_builds_leaves_store_and_vector_file_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let s = store.to_str().unwrap().to_string();
    let data = dir.path().join("conv.jsonl");
    conversation(&data, 4000, 0);
    ok(&["ingest", "--quiet", "--store", &s, data.to_str().unwrap()]);
    let build = [
        "build", "--quiet", "--store", &s, "--model", "hashing", "--flush",
    ];

    // Time one complete build (in a copy) to place the kills inside it.
    let reference = dir.path().join("reference");
    let r = reference.to_str().unwrap().to_string();
    ok(&["ingest", "--quiet", "--store", &r, data.to_str().unwrap()]);
    let started = Instant::now();
    ok(&[
        "build", "--quiet", "--store", &r, "--model", "hashing", "--flush",
    ]);
    let total = started.elapsed();

    for fraction in [0.3, 0.6, 0.8, 0.9, 0.95, 0.99] {
        let mut child = bin().args(build).spawn().unwrap();
        std::thread::sleep(total.mul_f64(fraction).max(Duration::from_millis(5)));
        let _ = child.kill(); // SIGKILL on Unix
        let _ = child.wait();
        // Whatever the kill interrupted, the database and the vector file agree.
        ok(&["check", "--store", &s]);
        if let Some(rows) = vector_rows(&store) {
            assert!(rows == 0 || rows == 4000, "{rows} rows after a kill");
        }
    }
    ok(&build);
    assert_eq!(vector_rows(&store), Some(4000));
    ok(&["check", "--store", &s]);

    // A crash between writing rows and committing them leaves a tail past the committed rows:
    // ignored by readers and `check`, cut by the next append.
    let file = vector_files(&store).pop().unwrap();
    let committed = std::fs::metadata(&file).unwrap().len();
    std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap()
        .write_all(&[0xAB; 1000])
        .unwrap();
    ok(&["check", "--store", &s]);
    assert!(!query_refs(&store, "long", "What about the trip to Kyoto?").is_empty());
    let more = dir.path().join("more.jsonl");
    conversation(&more, 100, 4000);
    ok(&["ingest", "--quiet", "--store", &s, more.to_str().unwrap()]);
    ok(&build);
    assert_eq!(vector_rows(&store), Some(4100));
    assert_eq!(
        std::fs::metadata(&file).unwrap().len(),
        committed + 100 * 384 * 2,
        "the torn tail was cut before the new rows"
    );
    ok(&["check", "--store", &s]);
    let refs = query_refs(&store, "long", "What about the trip to Kyoto?");

    // A file cut short is reported by `check`, left aside by queries, and rewritten by a build.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .unwrap()
        .set_len(1000)
        .unwrap();
    let (code, _, err) = trajwiki(&["check", "--store", &s]);
    assert_ne!(code, 0);
    assert!(err.contains("vector") || err.contains("committed"), "{err}");
    // (From the cache's f32 vectors: near ties may order differently than from f16 rows.)
    assert!(!query_refs(&store, "long", "What about the trip to Kyoto?").is_empty());
    ok(&build);
    assert_eq!(vector_rows(&store), Some(4100));
    ok(&["check", "--store", &s]);
    assert_eq!(
        query_refs(&store, "long", "What about the trip to Kyoto?"),
        refs
    );
}

#[test]
fn a_namespace_past_the_threshold_is_searched_through_its_approximate_index() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let s = store.to_str().unwrap().to_string();
    let data = dir.path().join("conv.jsonl");
    conversation(&data, 600, 0);
    ok(&["ingest", "--quiet", "--store", &s, data.to_str().unwrap()]);
    let build = |threshold: &str| -> serde_json::Value {
        let out = ok(&[
            "build",
            "--store",
            &s,
            "--model",
            "hashing",
            "--flush",
            "--ann-threshold",
            threshold,
            "--json",
        ]);
        serde_json::from_str(&out).unwrap()
    };
    assert_eq!(build("100000")["namespaces"][0]["ann_rows"], 0);
    let exact = query_refs(&store, "long", "What about the trip to Kyoto?");
    let report = build("500");
    let ann_rows = report["namespaces"][0]["ann_rows"].as_u64().unwrap();
    let ann_file = vector_files(&store)
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "hnsw"));
    if !trajwiki::ann::AnnIndex::available() {
        eprintln!("approximate search is not in this build (`--features faiss`): exact only");
        assert_eq!(ann_rows, 0);
        assert!(ann_file.is_none());
        return;
    }
    assert_eq!(ann_rows, 600);
    assert!(ann_file.is_some());
    let opened = Store::open(&store).unwrap();
    let ns = trajwiki::core::Namespace::new("long").unwrap();
    let embedder = trajwiki::core::HashingEmbedder::new(384);
    let loaded =
        trajwiki::engine::load::load_index(&opened, &ns, &embedder, &mut Default::default(), None)
            .unwrap();
    assert_eq!(loaded.index.vectors().ann_rows(), 600);
    drop(opened);
    // The approximate search finds what the exact one found (a few hundred clear-cut rows).
    let approximate = query_refs(&store, "long", "What about the trip to Kyoto?");
    let shared = approximate.iter().filter(|r| exact.contains(r)).count();
    assert!(
        shared * 10 >= exact.len() * 9,
        "{shared} of {} refs in common",
        exact.len()
    );
    // Appending a little keeps the index (the new rows are scanned exactly); past a tenth more,
    // it is rebuilt.
    let more = dir.path().join("more.jsonl");
    conversation(&more, 50, 600);
    ok(&["ingest", "--quiet", "--store", &s, more.to_str().unwrap()]);
    assert_eq!(build("500")["namespaces"][0]["ann_rows"], 600);
    let more = dir.path().join("more2.jsonl");
    conversation(&more, 50, 650);
    ok(&["ingest", "--quiet", "--store", &s, more.to_str().unwrap()]);
    assert_eq!(build("500")["namespaces"][0]["ann_rows"], 700);
    ok(&["check", "--store", &s]);
}
