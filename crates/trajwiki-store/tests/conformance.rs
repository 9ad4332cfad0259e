//! Store conformance: every record type round-trips, immutability holds at the API and SQL level,
//! migrations apply to an empty store, a newer schema is refused, bad references are refused and
//! leave nothing behind — on both backends: each test runs once on an SQLite store directory and
//! once on a PostgreSQL database (a server the tests start; see `support/pg.rs`).

use std::collections::BTreeMap;

use chrono::NaiveDate;
use rusqlite::Connection;
use trajwiki_core::*;
use trajwiki_store::{
    Append, Cursor, MemoryBatch, MemoryRecords, NamespaceDelta, PageUpdates, Place, Store,
    StoreError, VectorDtype, DB_FILE, POSTGRES_SCHEMA_VERSION, SCHEMA_VERSION,
};

#[path = "support/pg.rs"]
mod pg;

/// Where a test's store lives.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Backend {
    Sqlite,
    Postgres,
}

/// A fresh, empty store location of a backend, removed with it.
struct Fresh {
    backend: Backend,
    location: std::path::PathBuf,
    _dir: Option<tempfile::TempDir>,
}

impl Fresh {
    /// `None` where the backend cannot run here (said on stderr).
    fn new(backend: Backend) -> Option<Fresh> {
        match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                Some(Fresh {
                    backend,
                    location: dir.path().to_path_buf(),
                    _dir: Some(dir),
                })
            }
            Backend::Postgres => Some(Fresh {
                backend,
                location: pg::server()?.database().into(),
                _dir: None,
            }),
        }
    }

    fn open(&self) -> Store {
        Store::open(&self.location).unwrap()
    }

    /// Runs SQL beside the store, as an outside tool could; the error's text when it fails.
    fn raw(&self, sql: &str) -> Result<(), String> {
        match self.backend {
            Backend::Sqlite => Connection::open(self.location.join(DB_FILE))
                .unwrap()
                .execute_batch(sql)
                .map_err(|e| e.to_string()),
            Backend::Postgres => {
                let url = self.location.to_str().unwrap();
                let mut client = ::postgres::Client::connect(url, ::postgres::NoTls).unwrap();
                client.batch_execute(sql).map_err(|e| {
                    e.as_db_error()
                        .map_or_else(|| e.to_string(), |d| d.message().to_string())
                })
            }
        }
    }
}

/// Each test, once per backend: `sqlite::name` and `postgres::name`.
macro_rules! on_both {
    ($($name:ident),+ $(,)?) => {
        mod sqlite {
            $(#[test]
            fn $name() {
                super::$name(super::Fresh::new(super::Backend::Sqlite).unwrap());
            })+
        }
        mod postgres {
            $(#[test]
            fn $name() {
                if let Some(fresh) = super::Fresh::new(super::Backend::Postgres) {
                    super::$name(fresh);
                }
            })+
        }
    };
}

on_both!(
    a_read_sees_one_moment_of_the_store,
    every_record_round_trips,
    rebuild_is_idempotent_and_pages_keep_revisions,
    a_grown_page_stores_the_chunks_it_changed,
    a_page_that_links_one_more_trajectory_stores_the_link_chunk_it_changed,
    builds_of_one_namespace_take_turns,
    a_build_in_one_transaction_takes_its_turn,
    writes_made_one_commit_together_and_a_failed_part_is_undone_alone,
    changed_immutable_record_is_a_conflict,
    snapshots_and_trajectories_keep_their_order_and_continuation,
    the_embedding_cache_answers_every_hash_asked,
    sql_refuses_to_change_immutable_records,
    failed_batch_leaves_nothing,
    migrations_and_newer_schema,
    embedding_dimension_is_enforced,
    check_finds_tampering,
    check_finds_trajectories_out_of_order,
    delete_namespace_removes_everything,
    index_state_moves_for_any_connections_writes,
    vectors_round_trip_and_append,
    appends_take_the_next_position_and_refs_recognise_retries,
    conflicts_name_the_fields_that_differ,
    concurrent_appends_take_distinct_positions,
    changes_since_a_cursor_merge_into_a_full_read,
);

fn ts(day: u32) -> Timestamp {
    NaiveDate::from_ymd_opt(2023, 5, day)
        .unwrap()
        .and_hms_opt(13, 56, 0)
        .unwrap()
}

fn ns() -> Namespace {
    Namespace::new("conf").unwrap()
}

fn messages() -> Vec<SourceMessage> {
    vec![
        SourceMessage::new(
            ns(),
            1,
            1,
            "Ann".into(),
            "I live in Oslo.".into(),
            ts(8),
            vec![],
            Some("D1:1".into()),
        ),
        SourceMessage::new(
            ns(),
            1,
            2,
            "Bob".into(),
            "Nice! Look at my dog.".into(),
            ts(8),
            vec![Attachment {
                kind: "image".into(),
                caption: Some("a photo of a dog".into()),
                url: None,
            }],
            Some("D1:2".into()),
        ),
        SourceMessage::new(
            ns(),
            2,
            1,
            "Ann".into(),
            "I moved to Bergen last week.".into(),
            ts(20),
            vec![],
            Some("D2:1".into()),
        ),
    ]
}

/// A small but complete memory: one trajectory of two snapshots, an ADD, a REVISE and a
/// DEPRECATE, and two pages.
fn memory(msgs: &[SourceMessage]) -> MemoryBatch {
    let t = TrajectoryId::derive(&ns(), "t1");
    let s1 = SnapshotId::derive(&ns(), "s1");
    let s2 = SnapshotId::derive(&ns(), "s2");
    let c1 = ClaimId::derive(&ns(), "c1");
    let c2 = ClaimId::derive(&ns(), "c2");
    let c3 = ClaimId::derive(&ns(), "c3");
    let claim = |id: &ClaimId,
                 snap: &SnapshotId,
                 text: &str,
                 quote: &str,
                 src: &SourceMessage,
                 from: Option<&ClaimId>| Claim {
        id: id.clone(),
        namespace: ns(),
        snapshot: snap.clone(),
        text: text.into(),
        status: ClaimStatus::Active,
        source_message_ids: vec![src.id.clone()],
        quote: quote.into(),
        revised_from: from.cloned(),
    };
    let op = |seq: u64,
              kind: OpKind,
              target: Option<&ClaimId>,
              new: Option<&ClaimId>,
              snap: &SnapshotId,
              src: &SourceMessage| ClaimOp {
        id: OpId::derive(&ns(), &seq.to_string()),
        namespace: ns(),
        seq,
        op: kind,
        target: target.cloned(),
        new_claim: new.cloned(),
        new_status: (kind == OpKind::Deprecate).then_some(ClaimStatus::Deprecated),
        source_message_ids: vec![src.id.clone()],
        rationale: format!("{} at {seq}", kind.as_str()),
        snapshot: snap.clone(),
    };
    let page = |key: &str, kind: PageKind, title: &str| WikiPage {
        id: PageId::derive(&ns(), key),
        namespace: ns(),
        kind,
        title: title.into(),
        body: format!("# {title}\n\n## Overview\nAnn's home."),
        routing_text: title.into(),
        keywords: vec!["home".into(), "oslo".into()],
        trajectory_ids: vec![t.clone()],
        terms: vec!["Oslo".into()],
        items: vec![ItemCount {
            item: "dog".into(),
            count: 1,
        }],
        revision: 1,
    };
    MemoryBatch {
        namespace: ns(),
        trajectories: vec![Trajectory {
            id: t.clone(),
            namespace: ns(),
            snapshot_ids: vec![s1.clone(), s2.clone()],
            continues: None,
            summary: "Ann's home".into(),
            signals: Signals {
                keywords: vec!["home".into()],
                entities: vec!["ann".into()],
                terms: vec!["oslo".into()],
                facets: vec![Facet {
                    tag: "home_city".into(),
                    value: "bergen".into(),
                }],
            },
        }],
        snapshots: vec![
            Snapshot {
                id: s1.clone(),
                namespace: ns(),
                trajectory: t.clone(),
                version: 1,
                timestamp: ts(8),
                summary: "Ann lives in Oslo".into(),
                context: "session 1".into(),
                keywords: vec!["oslo".into()],
                claim_ids: vec![c1.clone(), c3.clone()],
                source_message_ids: vec![msgs[0].id.clone(), msgs[1].id.clone()],
            },
            Snapshot {
                id: s2.clone(),
                namespace: ns(),
                trajectory: t.clone(),
                version: 2,
                timestamp: ts(20),
                summary: "Ann moved to Bergen".into(),
                context: "session 2".into(),
                keywords: vec!["bergen".into()],
                claim_ids: vec![c2.clone()],
                source_message_ids: vec![msgs[2].id.clone()],
            },
        ],
        claims: vec![
            claim(
                &c1,
                &s1,
                "Ann lives in Oslo",
                "I live in Oslo",
                &msgs[0],
                None,
            ),
            claim(
                &c3,
                &s1,
                "Bob has a dog",
                "a photo of a dog",
                &msgs[1],
                None,
            ),
            claim(
                &c2,
                &s2,
                "Ann lives in Bergen",
                "moved to Bergen",
                &msgs[2],
                Some(&c1),
            ),
        ],
        ops: vec![
            op(1, OpKind::Add, None, Some(&c1), &s1, &msgs[0]),
            op(2, OpKind::Add, None, Some(&c3), &s1, &msgs[1]),
            op(3, OpKind::Revise, Some(&c1), Some(&c2), &s2, &msgs[2]),
            op(4, OpKind::Deprecate, Some(&c3), None, &s2, &msgs[2]),
        ],
        pages: Some(vec![
            page("ann", PageKind::Entity, "Ann"),
            page("index", PageKind::Index, "Index"),
        ]),
        replace: false,
        fold: None,
        page_updates: None,
    }
}

fn run() -> Run {
    let mut metadata = BTreeMap::new();
    metadata.insert("env".to_string(), serde_json::json!("shop"));
    Run::new(
        ns(),
        "r1".into(),
        "buy a lamp".into(),
        vec![Step {
            action: "search[lamp]".into(),
            observation: "3 results".into(),
        }],
        Outcome {
            success: Some(true),
            reward: Some(1.0),
        },
        metadata,
    )
}

fn filled_store(fresh: Fresh) -> (Fresh, Store, Vec<SourceMessage>, MemoryBatch) {
    let mut store = fresh.open();
    let msgs = messages();
    store.ingest_messages("test", &msgs).unwrap();
    let batch = memory(&msgs);
    store.commit_memory(&batch).unwrap();
    (fresh, store, msgs, batch)
}

fn every_record_round_trips(fresh: Fresh) {
    let (_dir, mut store, msgs, batch) = filled_store(fresh);
    assert_eq!(store.messages(&ns()).unwrap(), msgs);
    assert_eq!(
        store.message_by_ref(&ns(), "D1:2").unwrap().as_ref(),
        Some(&msgs[1])
    );
    for t in &batch.trajectories {
        assert_eq!(store.trajectory(&t.id).unwrap().as_ref(), Some(t));
    }
    for s in &batch.snapshots {
        assert_eq!(store.snapshot(&s.id).unwrap().as_ref(), Some(s));
    }
    for c in &batch.claims {
        assert_eq!(store.claim(&c.id).unwrap().as_ref(), Some(c));
    }
    assert_eq!(store.claim_ops(&ns()).unwrap(), batch.ops);
    for p in batch.pages.as_ref().unwrap() {
        assert_eq!(store.page(&p.id).unwrap().as_ref(), Some(p));
    }
    // One namespace read: the messages in arrival order, handed to the side closure as well, and
    // every record, claims with their current status.
    let (arrived, records, seen) = store
        .namespace_read(&ns(), |arrived| {
            arrived
                .iter()
                .map(|(_, m)| m.id.clone())
                .collect::<Vec<_>>()
        })
        .unwrap();
    assert_eq!(
        arrived.iter().map(|(_, m)| m.clone()).collect::<Vec<_>>(),
        msgs
    );
    assert_eq!(seen, msgs.iter().map(|m| m.id.clone()).collect::<Vec<_>>());
    assert_eq!(records.snapshots.len(), batch.snapshots.len());
    assert_eq!(records.trajectories.len(), batch.trajectories.len());
    assert_eq!(records.claims.len(), batch.claims.len());
    assert_eq!(
        records
            .claims
            .iter()
            .find(|(c, _)| c.id == batch.claims[0].id)
            .map(|(_, s)| *s),
        Some(ClaimStatus::Deprecated)
    );
    // Derived claim state follows the op log.
    let [c1, c3, c2] = [
        &batch.claims[0].id,
        &batch.claims[1].id,
        &batch.claims[2].id,
    ];
    assert_eq!(
        store.claim_status(c1).unwrap(),
        Some(ClaimStatus::Deprecated)
    );
    assert_eq!(store.claim_status(c2).unwrap(), Some(ClaimStatus::Active));
    assert_eq!(
        store.claim_status(c3).unwrap(),
        Some(ClaimStatus::Deprecated)
    );

    let r = run();
    assert_eq!(
        store
            .ingest_runs("test", std::slice::from_ref(&r))
            .unwrap()
            .added,
        1
    );
    assert_eq!(store.run(&r.id).unwrap().as_ref(), Some(&r));
    let comp = Compilation {
        id: CompilationId::derive(&ns(), "r1"),
        run: r.id.clone(),
        diagnosis: "searched precisely".into(),
        compiler: "deterministic".into(),
    };
    let insights: Vec<Insight> = (0..3)
        .map(|i| Insight {
            id: InsightId::derive(&ns(), &format!("r1/{i}")),
            compilation: comp.id.clone(),
            run: r.id.clone(),
            guideline: format!("lesson {i}"),
            applies_when: "shopping".into(),
        })
        .collect();
    // A fourth insight is refused before anything is written.
    let mut four = insights.clone();
    four.push(Insight {
        id: InsightId::derive(&ns(), "r1/3"),
        guideline: "lesson 3".into(),
        ..insights[0].clone()
    });
    let err = store.commit_compilation(&comp, &four).unwrap_err();
    assert!(
        err.to_string().contains("has 4 insights; at most 3"),
        "{err}"
    );
    assert_eq!(store.compilation(&comp.id).unwrap(), None);
    store.commit_compilation(&comp, &insights).unwrap();
    store.commit_compilation(&comp, &insights).unwrap();
    assert_eq!(
        store.compilations(&ns()).unwrap(),
        vec![(comp.clone(), insights.clone())]
    );
    assert_eq!(
        store.compilation(&comp.id).unwrap(),
        Some((comp.clone(), insights.clone()))
    );
    assert_eq!(
        store.insight(&insights[1].id).unwrap().as_ref(),
        Some(&insights[1])
    );

    store
        .put_embeddings("m", 3, &[("h1", &[1.0, 0.0, 0.0])])
        .unwrap();
    assert_eq!(
        store.cached_embeddings("m", 3, &["h1", "h2"]).unwrap(),
        vec![Some(vec![1.0, 0.0, 0.0]), None]
    );
    assert!(store.check().unwrap().ok(), "{:?}", store.check().unwrap());
}

fn rebuild_is_idempotent_and_pages_keep_revisions(fresh: Fresh) {
    let (_dir, mut store, _msgs, mut batch) = filled_store(fresh);
    let before = store.stats().unwrap();
    store.commit_memory(&batch).unwrap();
    assert_eq!(
        store.stats().unwrap(),
        before,
        "same batch twice changes nothing"
    );

    let pages = batch.pages.as_mut().unwrap();
    pages[0].body.push_str("\nMore.");
    let entity = pages[0].id.clone();
    let index = pages.pop().unwrap().id;
    store.commit_memory(&batch).unwrap();
    let page = store.page(&entity).unwrap().unwrap();
    assert_eq!(page.revision, 2);
    assert!(store
        .page_revision(&entity, 1)
        .unwrap()
        .unwrap()
        .body
        .ends_with("Ann's home."));
    assert_eq!(
        store.page(&index).unwrap(),
        None,
        "a page left out is retired"
    );
    assert_eq!(
        store.page_revision(&index, 1).unwrap().map(|p| p.revision),
        Some(1),
        "its history stays"
    );
    assert!(store.check().unwrap().ok());
}

/// A build lock waits for another connection's hold on the same namespace, not for another
/// namespace's, and is taken once the holder lets go.
fn builds_of_one_namespace_take_turns(fresh: Fresh) {
    let store = fresh.open();
    let a = Namespace::new("a").unwrap();
    let first = store.lock_builds(&a).unwrap();
    assert!(first.is_held());
    let other = store.lock_builds(&Namespace::new("b").unwrap()).unwrap();
    assert!(other.is_held());
    let (tx, rx) = std::sync::mpsc::channel();
    let location = fresh.location.clone();
    let waiter = std::thread::spawn(move || {
        let store = Store::open_existing(&location).unwrap();
        let lock = store.lock_builds(&Namespace::new("a").unwrap()).unwrap();
        tx.send(lock.is_held()).unwrap();
    });
    assert!(
        rx.recv_timeout(std::time::Duration::from_millis(500))
            .is_err(),
        "a second build of the namespace did not wait"
    );
    drop(first);
    let held = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the waiting build took the lock once the first let go");
    assert!(held);
    waiter.join().unwrap();
}

/// A failure of the caller's own, for the tests of [`Store::write_as_one`].
fn failure(what: &str) -> StoreError {
    StoreError::Dangling {
        what: what.to_string(),
        missing: "nothing".into(),
    }
}

/// A build made inside one transaction ([`Store::build_as_one`]) waits for a build that holds
/// the namespace's lock, and a build waits for it while it runs.
fn a_build_in_one_transaction_takes_its_turn(fresh: Fresh) {
    let store = fresh.open();
    let a = Namespace::new("a").unwrap();
    let held = store.lock_builds(&a).unwrap();
    assert!(held.is_held());
    let (tx, rx) = std::sync::mpsc::channel();
    let location = fresh.location.clone();
    let ended = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let waiter = std::thread::spawn({
        let ended = std::sync::Arc::clone(&ended);
        move || {
            let mut store = Store::open_existing(&location).unwrap();
            let ns = Namespace::new("a").unwrap();
            store
                .build_as_one("test", &ns, |_| {
                    tx.send("inside").unwrap();
                    // Hold the turn a while: the build below waits for it.
                    std::thread::sleep(std::time::Duration::from_millis(300));
                    ended.store(true, std::sync::atomic::Ordering::SeqCst);
                    Ok::<_, StoreError>(())
                })
                .unwrap();
        }
    });
    assert!(
        rx.recv_timeout(std::time::Duration::from_millis(500))
            .is_err(),
        "a build in one transaction did not wait for the held build lock"
    );
    drop(held);
    assert_eq!(
        rx.recv_timeout(std::time::Duration::from_secs(60)).unwrap(),
        "inside"
    );
    // It holds the lock now: a build waits until its transaction ends.
    let next = store.lock_builds(&a).unwrap();
    assert!(next.is_held());
    assert!(
        ended.load(std::sync::atomic::Ordering::SeqCst),
        "a build did not wait for the transaction's turn"
    );
    waiter.join().unwrap();
}

/// Writes inside [`Store::write_as_one`] are one transaction: another connection sees none of
/// them until it returns, all of them after; a part that fails (a nested `write_as_one`)
/// is undone alone, the rest kept; work that fails or panics leaves nothing.
fn writes_made_one_commit_together_and_a_failed_part_is_undone_alone(fresh: Fresh) {
    let mut store = fresh.open();
    let other = fresh.open();
    let msgs = messages();
    let (first, rest) = msgs.split_at(1);
    let count = |s: &Store| s.namespace_counts(&ns()).unwrap().0;
    let kept = store.write_as_one("test", &["conf"], |store| {
        store.ingest_messages("test", first)?;
        assert_eq!(
            count(&other),
            0,
            "a part was seen before the whole committed"
        );
        // A part that fails is undone to its savepoint; the outer work goes on.
        let failed = store.write_as_one("part", &[], |store| {
            store.ingest_messages("test", rest)?;
            Err::<(), StoreError>(failure("a test's failing part"))
        });
        assert!(failed.is_err());
        assert_eq!(count(store), 1, "the failed part's writes were not undone");
        Ok::<_, StoreError>(())
    });
    kept.unwrap();
    assert_eq!(count(&other), 1);
    // Work that fails leaves nothing, and the connection takes the next write.
    let failed = store.write_as_one("test", &["conf"], |store| {
        store.ingest_messages("test", rest)?;
        Err::<(), StoreError>(failure("a test's failing work"))
    });
    assert!(failed.is_err());
    assert_eq!(count(&other), 1);
    // So does work that panics; the panic goes on.
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = store.write_as_one("test", &["conf"], |store| {
            store.ingest_messages("test", rest)?;
            panic!("a test's panic");
            #[allow(unreachable_code)]
            Ok::<(), StoreError>(())
        });
    }));
    assert!(panicked.is_err());
    assert_eq!(count(&other), 1);
    store.ingest_messages("test", rest).unwrap();
    assert_eq!(count(&other), msgs.len() as u64);
}

/// A page body is stored in chunks, each once: a page that grows by a line gets a revision
/// that stores the chunk it changed, not the body again, and every revision reads back whole.
fn a_grown_page_stores_the_chunks_it_changed(fresh: Fresh) {
    let (_dir, mut store, _msgs, mut batch) = filled_store(fresh);
    let pages = batch.pages.as_mut().unwrap();
    let id = pages[0].id.clone();
    let mut body = String::from("# Ann\n\n## Events\n");
    for i in 0..400 {
        if i % 4 == 0 {
            body.push_str(&format!("\n### Section {}\n", i / 4));
        }
        body.push_str(&format!("- {i} May 2023: Ann said thing {i}. (D{i}:1)\n"));
    }
    pages[0].body = body.clone();
    store.commit_memory(&batch).unwrap();
    let before = store.stats().unwrap();
    let grown = format!("{body}- 1 June 2023: Ann said one thing more. (D401:1)\n");
    batch.pages.as_mut().unwrap()[0].body = grown.clone();
    store.commit_memory(&batch).unwrap();
    let after = store.stats().unwrap();
    assert_eq!(after.page_revisions, before.page_revisions + 1);
    assert!(before.page_chunks > 50, "{} chunks", before.page_chunks);
    assert!(
        (1..=2).contains(&(after.page_chunks - before.page_chunks)),
        "{} new chunks for one line",
        after.page_chunks - before.page_chunks
    );
    let page = store.page(&id).unwrap().unwrap();
    assert_eq!(page.body, grown);
    assert_eq!(
        store
            .page_revision(&id, page.revision - 1)
            .unwrap()
            .unwrap()
            .body,
        body
    );
    assert!(store.check().unwrap().ok(), "{:?}", store.check().unwrap());
    // The same body again is no revision.
    store.commit_memory(&batch).unwrap();
    assert_eq!(store.stats().unwrap(), after);
}

/// The trajectories a page revision links are stored in chunks too (schema 10): a page that
/// links one trajectory more gets a revision that stores the chunk of its links that changed,
/// not a row per link, and every revision reads back with its links in order.
fn a_page_that_links_one_more_trajectory_stores_the_link_chunk_it_changed(fresh: Fresh) {
    let (_dir, mut store, _msgs, mut batch) = filled_store(fresh);
    // Forty trajectories more (of no snapshot yet) for the page to link.
    let first = batch.trajectories[0].clone();
    batch.trajectories.extend((0..40).map(|i| Trajectory {
        id: TrajectoryId::derive(&ns(), &format!("linked {i}")),
        snapshot_ids: Vec::new(),
        ..first.clone()
    }));
    let known: Vec<TrajectoryId> = batch.trajectories.iter().map(|t| t.id.clone()).collect();
    let pages = batch.pages.as_mut().unwrap();
    let id = pages[0].id.clone();
    // A long list of links (the batch's few trajectories over and over: a list, not a set).
    let links: Vec<TrajectoryId> = (0..600)
        .map(|i| known[(i * 7 / 3) % known.len()].clone())
        .collect();
    pages[0].trajectory_ids = links.clone();
    store.commit_memory(&batch).unwrap();
    let before = store.stats().unwrap();
    let page = store.page(&id).unwrap().unwrap();
    assert_eq!(page.trajectory_ids, links);
    let mut more = links.clone();
    more.push(known[1].clone());
    batch.pages.as_mut().unwrap()[0].trajectory_ids = more.clone();
    store.commit_memory(&batch).unwrap();
    let after = store.stats().unwrap();
    assert_eq!(after.page_revisions, before.page_revisions + 1);
    // The body is the same: the new chunks are the links'.
    assert!(
        (1..=2).contains(&(after.page_chunks - before.page_chunks)),
        "{} new chunks for one link",
        after.page_chunks - before.page_chunks
    );
    let page = store.page(&id).unwrap().unwrap();
    assert_eq!(page.trajectory_ids, more);
    let earlier = store
        .page_revision(&id, page.revision - 1)
        .unwrap()
        .unwrap();
    assert_eq!(earlier.trajectory_ids, links);
    // The namespace's pages, read whole, hold the same links.
    let all = store.pages(&ns()).unwrap();
    assert_eq!(
        all.iter().find(|p| p.id == id).unwrap().trajectory_ids,
        more
    );
    assert!(store.check().unwrap().ok(), "{:?}", store.check().unwrap());
    // The same links again are no revision.
    store.commit_memory(&batch).unwrap();
    assert_eq!(store.stats().unwrap(), after);
    // A link to a trajectory that is not stored is refused, and nothing is written.
    let mut dangling = more;
    dangling.push(TrajectoryId::derive(&ns(), "no such trajectory"));
    batch.pages.as_mut().unwrap()[0].trajectory_ids = dangling;
    assert!(store.commit_memory(&batch).is_err());
    assert_eq!(store.stats().unwrap(), after);
}

fn changed_immutable_record_is_a_conflict(fresh: Fresh) {
    let (_dir, mut store, _msgs, mut batch) = filled_store(fresh);
    batch.claims[0].text = "Ann lives in Paris".into();
    assert!(matches!(
        store.commit_memory(&batch),
        Err(StoreError::Conflict { kind: "claim", .. })
    ));
}

/// The commit writes a snapshot and a trajectory in one statement each and reads them back only
/// when that statement wrote nothing: a snapshot stored with other content, a new snapshot that
/// is not its trajectory's next version and a trajectory continuing another one are conflicts
/// (and change nothing); the same batch again is no change; a trajectory's new summary is kept.
fn snapshots_and_trajectories_keep_their_order_and_continuation(fresh: Fresh) {
    let (_dir, mut store, _msgs, batch) = filled_store(fresh);
    let before = store.stats().unwrap();
    store.commit_memory(&batch).unwrap();
    assert_eq!(store.stats().unwrap(), before);

    let mut changed = batch.clone();
    changed.snapshots[1].summary = "Ann moved to Tromsø".into();
    assert!(matches!(
        store.commit_memory(&changed),
        Err(StoreError::Conflict {
            kind: "snapshot",
            ..
        })
    ));

    let mut skipped = batch.clone();
    skipped.snapshots[1].id = SnapshotId::derive(&ns(), "s4");
    skipped.snapshots[1].version = 4;
    match store.commit_memory(&skipped) {
        Err(StoreError::Conflict {
            kind: "snapshot version",
            existing,
            ..
        }) => assert!(existing.contains("expects version 3"), "{existing}"),
        other => panic!("expected a snapshot version conflict, got {other:?}"),
    }

    let mut continued = batch.clone();
    continued.trajectories[0].continues = Some(TrajectoryId::derive(&ns(), "t0"));
    assert!(matches!(
        store.commit_memory(&continued),
        Err(StoreError::Conflict {
            kind: "trajectory continuation",
            ..
        })
    ));
    assert_eq!(store.stats().unwrap(), before);

    let mut renamed = batch.clone();
    renamed.trajectories[0].summary = "Ann's homes".into();
    store.commit_memory(&renamed).unwrap();
    let stored = store
        .trajectory(&batch.trajectories[0].id)
        .unwrap()
        .unwrap();
    assert_eq!(stored.summary, "Ann's homes");
}

/// The embedding cache is read and written in multi-row statements: vectors put at once are
/// counted once each, and every hash asked for is answered, twice when asked twice.
fn the_embedding_cache_answers_every_hash_asked(fresh: Fresh) {
    let mut store = fresh.open();
    let (x, y) = ([1.0, 0.0, 0.0], [0.0, 1.0, 0.0]);
    assert_eq!(store.put_embeddings("m", 3, &[("h1", &x)]).unwrap(), 1);
    assert_eq!(
        store
            .put_embeddings("m", 3, &[("h2", &y), ("h1", &x), ("h2", &y)])
            .unwrap(),
        1
    );
    assert_eq!(
        store
            .cached_embeddings("m", 3, &["h1", "h2", "h1", "h3"])
            .unwrap(),
        vec![Some(x.to_vec()), Some(y.to_vec()), Some(x.to_vec()), None]
    );
    assert_eq!(
        store.has_embeddings("m", &["h3", "h2", "h2"]).unwrap(),
        vec![false, true, true]
    );
    // More hashes than one statement takes.
    let hashes: Vec<String> = (0..600).map(|i| format!("k{i}")).collect();
    let items: Vec<(&str, &[f32])> = hashes.iter().map(|h| (h.as_str(), &x[..])).collect();
    assert_eq!(store.put_embeddings("m", 3, &items).unwrap(), 600);
    let asked: Vec<&str> = hashes.iter().map(String::as_str).collect();
    let found = store.cached_embeddings("m", 3, &asked).unwrap();
    assert!(found.iter().all(|v| v.as_deref() == Some(&x[..])));
}

fn sql_refuses_to_change_immutable_records(fresh: Fresh) {
    let (fresh, store, _msgs, _batch) = filled_store(fresh);
    drop(store);
    for sql in [
        "UPDATE messages SET text = 'x'",
        "DELETE FROM messages",
        "UPDATE snapshots SET summary = 'x'",
        "DELETE FROM claims",
        "UPDATE claim_ops SET rationale = 'x'",
        "DELETE FROM page_revisions",
    ] {
        let err = fresh.raw(sql).unwrap_err();
        assert!(err.contains("immutable record"), "{sql}: {err}");
    }
}

fn failed_batch_leaves_nothing(fresh: Fresh) {
    let (fresh, mut store, msgs, _batch) = filled_store(fresh);
    let before = store.stats().unwrap();
    // A batch whose last message conflicts with a stored one: the new first message must not stay.
    let new = SourceMessage::new(
        ns(),
        3,
        1,
        "Ann".into(),
        "new".into(),
        ts(25),
        vec![],
        Some("D3:1".into()),
    );
    let mut changed = msgs[0].clone();
    changed.text = "I live in Paris.".into();
    let err = store
        .ingest_messages("test", &[new.clone(), changed])
        .unwrap_err();
    match err {
        StoreError::Conflict {
            existing, incoming, ..
        } => {
            assert!(existing.contains("I live in Oslo.") && incoming.contains("I live in Paris."));
        }
        other => panic!("expected a conflict, got {other}"),
    }
    assert_eq!(store.stats().unwrap(), before);
    assert_eq!(store.message(&new.id).unwrap(), None);
    // A memory batch with a claim citing an unknown message fails whole.
    let ghost = SourceMessage::new(ns(), 9, 9, "X".into(), "x".into(), ts(1), vec![], None);
    let mut batch = memory(&msgs);
    batch.namespace = ns();
    batch.claims[0].source_message_ids = vec![ghost.id];
    let other = Fresh::new(fresh.backend).unwrap();
    let mut fresh = other.open();
    drop(store);
    fresh.ingest_messages("t", &msgs).unwrap();
    let before = fresh.stats().unwrap();
    assert!(matches!(
        fresh.commit_memory(&batch),
        Err(StoreError::Dangling { .. })
    ));
    assert_eq!(fresh.stats().unwrap(), before);
}

fn migrations_and_newer_schema(fresh: Fresh) {
    let location = &fresh.location;
    let newest = match fresh.backend {
        Backend::Sqlite => SCHEMA_VERSION,
        Backend::Postgres => POSTGRES_SCHEMA_VERSION,
    };
    assert!(matches!(
        Store::open_existing(location),
        Err(StoreError::NotAStore { .. })
    ));
    let store = Store::open(location).unwrap();
    assert_eq!(store.schema_version().unwrap(), newest);
    assert!(store.check().unwrap().ok());
    drop(store);
    // Reopening applies nothing new.
    assert_eq!(
        Store::open_existing(location)
            .unwrap()
            .schema_version()
            .unwrap(),
        newest
    );
    fresh
        .raw(&match fresh.backend {
            Backend::Sqlite => format!("PRAGMA user_version = {}", newest + 1),
            Backend::Postgres => format!("UPDATE trajwiki_schema SET version = {}", newest + 1),
        })
        .unwrap();
    match Store::open(location) {
        Err(StoreError::NewerSchema {
            found, supported, ..
        }) => {
            assert_eq!((found, supported), (newest + 1, newest));
        }
        other => panic!("expected NewerSchema, got {other:?}"),
    }
}

fn embedding_dimension_is_enforced(fresh: Fresh) {
    let mut store = fresh.open();
    store
        .put_embeddings("minilm", 2, &[("a", &[0.6, 0.8])])
        .unwrap();
    assert!(matches!(
        store.put_embeddings("minilm", 3, &[("b", &[1.0, 0.0, 0.0])]),
        Err(StoreError::EmbeddingDimension {
            stored: 2,
            got: 3,
            ..
        })
    ));
    assert!(matches!(
        store.put_embeddings("minilm", 2, &[("b", &[1.0, 0.0, 0.0])]),
        Err(StoreError::EmbeddingDimension { .. })
    ));
    assert!(matches!(
        store.cached_embeddings("minilm", 4, &["a"]),
        Err(StoreError::EmbeddingDimension { .. })
    ));
    assert_eq!(
        store
            .put_embeddings("minilm", 2, &[("a", &[0.6, 0.8])])
            .unwrap(),
        0
    );
}

fn check_finds_tampering(fresh: Fresh) {
    let (fresh, store, _msgs, _batch) = filled_store(fresh);
    drop(store);
    // Bypass the triggers the way an outside tool could: drop one and edit.
    let drop_trigger = match fresh.backend {
        Backend::Sqlite => "DROP TRIGGER messages_no_update",
        Backend::Postgres => "DROP TRIGGER messages_no_update ON messages",
    };
    fresh
        .raw(&format!("{drop_trigger}; UPDATE messages SET text = 'edited' WHERE external_ref = 'D1:1'; UPDATE claim_state SET status = 'active'"))
        .unwrap();
    let report = Store::open_existing(&fresh.location)
        .unwrap()
        .check()
        .unwrap();
    let invariants: Vec<&str> = report.problems.iter().map(|p| p.invariant).collect();
    assert!(
        invariants.contains(&"message content matches its hash"),
        "{invariants:?}"
    );
    assert!(
        invariants.contains(&"claim quote occurs in a source"),
        "{invariants:?}"
    );
    assert!(
        invariants.contains(&"op log replays to the stored claim state"),
        "{invariants:?}"
    );
}

/// The invariants of `check` that a problem names, sorted.
fn violated(fresh: &Fresh) -> Vec<&'static str> {
    let report = Store::open_existing(&fresh.location)
        .unwrap()
        .check()
        .unwrap();
    let mut invariants: Vec<&str> = report.problems.iter().map(|p| p.invariant).collect();
    invariants.sort_unstable();
    invariants
}

/// A trajectory whose versions go back in time, or do not follow the arrival of their messages,
/// fails `check`, each with its own invariant named (the memory's one trajectory: version 1 from
/// messages 1 and 2 on day 8, version 2 from message 3 on day 20).
fn check_finds_trajectories_out_of_order(fresh: Fresh) {
    let (fresh, store, _msgs, batch) = filled_store(fresh);
    drop(store);
    assert_eq!(violated(&fresh), Vec::<&str>::new());
    let (s1, s2) = (
        batch.snapshots[0].id.as_str(),
        batch.snapshots[1].id.as_str(),
    );
    let drop_trigger = match fresh.backend {
        Backend::Sqlite => "DROP TRIGGER snapshots_no_update",
        Backend::Postgres => "DROP TRIGGER snapshots_no_update ON snapshots",
    };
    // Version 2 said before version 1.
    fresh
        .raw(&format!(
            "{drop_trigger}; UPDATE snapshots SET timestamp = '2023-05-01T13:56:00' WHERE id = '{s2}'"
        ))
        .unwrap();
    assert_eq!(
        violated(&fresh),
        vec!["trajectory timestamps do not go back"]
    );
    // The versions swapped, said at one time: version 2's messages arrived before version 1's.
    fresh
        .raw(&format!(
            "UPDATE snapshots SET timestamp = '2023-05-08T13:56:00' WHERE id = '{s2}';
             UPDATE snapshots SET version = 3 WHERE id = '{s1}';
             UPDATE snapshots SET version = 1 WHERE id = '{s2}';
             UPDATE snapshots SET version = 2 WHERE id = '{s1}'"
        ))
        .unwrap();
    assert_eq!(violated(&fresh), vec!["trajectory versions follow arrival"]);
}

fn delete_namespace_removes_everything(fresh: Fresh) {
    let (_dir, mut store, _msgs, _batch) = filled_store(fresh);
    store.ingest_runs("t", &[run()]).unwrap();
    let other = SourceMessage::new(
        Namespace::new("other").unwrap(),
        1,
        1,
        "Z".into(),
        "z".into(),
        ts(1),
        vec![],
        None,
    );
    store
        .ingest_messages("t", std::slice::from_ref(&other))
        .unwrap();
    let deleted = store.delete_namespace(&ns()).unwrap();
    // PostgreSQL's own vacuum reuses the freed space: the store promises no scrub there.
    let scrubs = !store.is_postgres();
    assert!(deleted.existed && deleted.scrubbed == scrubs, "{deleted:?}");
    let stats = store.stats().unwrap();
    assert_eq!(
        (
            stats.namespaces,
            stats.messages,
            stats.runs,
            stats.snapshots,
            stats.claims
        ),
        (1, 1, 0, 0, 0)
    );
    assert_eq!(
        (stats.claim_ops, stats.trajectories, stats.page_revisions),
        (0, 0, 0)
    );
    assert_eq!(store.message(&other.id).unwrap(), Some(other));
    assert!(!store.delete_namespace(&ns()).unwrap().existed);
    assert!(store.check().unwrap().ok());
}

fn in_namespace(name: &str) -> Vec<SourceMessage> {
    messages()
        .into_iter()
        .map(|m| {
            let ns = Namespace::new(name).unwrap();
            SourceMessage::new(
                ns,
                m.session,
                m.seq,
                m.speaker,
                m.text,
                m.timestamp,
                m.attachments,
                m.external_ref,
            )
        })
        .collect()
}

fn index_state_moves_for_any_connections_writes(fresh: Fresh) {
    let mut a = fresh.open();
    let b = fresh.open();
    let other = Namespace::new("other").unwrap();
    let (conf0, other0) = (
        b.index_state(&ns()).unwrap(),
        b.index_state(&other).unwrap(),
    );
    assert!(!conf0.has_messages());
    a.ingest_messages("test", &messages()).unwrap();
    // Another connection sees the namespace move, and only that one.
    let conf1 = b.index_state(&ns()).unwrap();
    assert!(conf1.has_messages());
    assert_ne!(conf1, conf0);
    assert_eq!(b.index_state(&other).unwrap(), other0);
    a.ingest_messages("test", &in_namespace("other")).unwrap();
    assert_eq!(b.index_state(&ns()).unwrap(), conf1);
    assert_ne!(b.index_state(&other).unwrap(), other0);
}

#[test]
fn a_store_uri_names_its_directory() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let uri = format!("sqlite://{}", path.display());
    let mut store = Store::open(&uri).unwrap();
    assert_eq!(store.dir(), path);
    store.ingest_messages("uri", &messages()).unwrap();
    drop(store);
    let again = Store::open_existing(&uri).unwrap();
    assert_eq!(again.dir(), path);
    assert_eq!(
        Store::open_read_only(&path)
            .unwrap()
            .stats()
            .unwrap()
            .messages,
        3
    );
    for (location, says) in [
        ("sqlite://", "names no path"),
        // Port 1: nothing listens; the URL is a PostgreSQL store's, refused for that reason.
        ("postgres://u:pw@127.0.0.1:1/db", "cannot connect"),
        ("s3://bucket/store", "unknown scheme `s3://`"),
    ] {
        let err = Store::open(location).unwrap_err();
        assert!(matches!(err, StoreError::Location { .. }), "{err}");
        assert!(err.to_string().contains(says), "{location}: {err}");
    }
    // Nothing was created for the refused locations.
    assert!(!std::path::Path::new("s3:").exists());
    assert!(!std::path::Path::new("postgres:").exists());
}

fn vectors_round_trip_and_append(fresh: Fresh) {
    let (fresh, mut store, _msgs, _batch) = filled_store(fresh);
    let arrived = store.messages_after(&ns(), 0).unwrap();
    let row = |i: usize| -> Vec<f32> { vec![i as f32 * 0.25, 1.0, -0.5] };
    let rows: Vec<Vec<f32>> = (0..arrived.len()).map(row).collect();
    let first: Vec<(i64, &[f32])> = arrived[..2]
        .iter()
        .zip(&rows)
        .map(|((rowid, _), v)| (*rowid, v.as_slice()))
        .collect();
    store
        .append_vectors(&ns(), "m", VectorDtype::F32, 3, &first)
        .unwrap();
    let early = store.map_vectors(&ns(), "m").unwrap().unwrap();
    let rest: Vec<(i64, &[f32])> = arrived[2..]
        .iter()
        .zip(&rows[2..])
        .map(|((rowid, _), v)| (*rowid, v.as_slice()))
        .collect();
    let info = store
        .append_vectors(&ns(), "m", VectorDtype::F32, 3, &rest)
        .unwrap();
    assert_eq!(info.rows, arrived.len());
    // A row for a message already covered is refused and changes nothing.
    assert!(matches!(
        store.append_vectors(&ns(), "m", VectorDtype::F32, 3, &first),
        Err(StoreError::Conflict { .. })
    ));
    let mapped = store.map_vectors(&ns(), "m").unwrap().unwrap();
    assert_eq!(mapped.info().rows, arrived.len());
    let want: Vec<f32> = rows.concat();
    assert_eq!(mapped.f32().unwrap(), want.as_slice());
    // The rows mapped before the append read as they did; a file grows at its end, and on
    // SQLite the rows mapped after it are read through the same mapping (its pages stay mapped).
    assert_eq!(early.f32().unwrap(), &want[..6]);
    if !store.is_postgres() {
        assert_eq!(
            early.f32().unwrap().as_ptr(),
            mapped.f32().unwrap().as_ptr()
        );
        // A mapping that read a page the file had lost (cut by another hand) is not shared
        // again: once the file is whole, a new mapping reads it.
        let path = mapped.info().path.clone();
        let whole = std::fs::read(&path).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(0)
            .unwrap();
        assert_eq!(mapped.f32().unwrap()[0], 0.0);
        assert!(!mapped.intact() && !early.intact());
        std::fs::write(&path, &whole).unwrap();
        let again = store.map_vectors(&ns(), "m").unwrap().unwrap();
        assert!(again.intact());
        assert_eq!(again.f32().unwrap(), want.as_slice());
        assert_ne!(
            again.f32().unwrap().as_ptr(),
            mapped.f32().unwrap().as_ptr()
        );
    }
    drop((early, mapped));
    assert!(store.check().unwrap().ok());
    let checked = store.checked_vector_file(&ns(), "m").unwrap().unwrap();
    assert_eq!(
        (checked.rows, checked.last_rowid),
        (info.rows, info.last_rowid)
    );
    // A record claiming a row that nothing holds: found without reading the rows, as mapping
    // them finds it.
    fresh
        .raw("UPDATE vector_files SET rows = rows + 1")
        .unwrap();
    for found in [
        store.checked_vector_file(&ns(), "m").map(|_| ()),
        store.map_vectors(&ns(), "m").map(|_| ()),
    ] {
        assert!(
            matches!(found, Err(StoreError::Corrupt { .. })),
            "{found:?}"
        );
    }
    store.reset_vectors(&ns(), "m").unwrap();
    assert!(store.map_vectors(&ns(), "m").unwrap().is_none());
    assert!(store.checked_vector_file(&ns(), "m").unwrap().is_none());
}

/// PostgreSQL: the writers of one namespace take turns (its advisory lock), those of another go
/// on meanwhile.
#[test]
fn postgres_writers_take_turns_per_namespace() {
    let Some(fresh) = Fresh::new(Backend::Postgres) else {
        return;
    };
    let url = fresh.location.to_str().unwrap().to_string();
    fresh.open().ingest_messages("seed", &messages()).unwrap();
    // An outside session holds the lock of `conf`, as a writer in another process would.
    let mut holder = ::postgres::Client::connect(&url, ::postgres::NoTls).unwrap();
    let mut held = holder.transaction().unwrap();
    let (class, key) = trajwiki_store::postgres_write_lock("conf");
    held.execute("SELECT pg_advisory_xact_lock($1, $2)", &[&class, &key])
        .unwrap();
    let write = |name: &'static str| {
        let url = url.clone();
        let (done, wait) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut store = Store::open(&url).unwrap();
            // New messages (later sessions) of `name`.
            let batch: Vec<SourceMessage> = in_namespace(name)
                .into_iter()
                .map(|m| {
                    SourceMessage::new(
                        m.namespace,
                        m.session + 10,
                        m.seq,
                        m.speaker,
                        m.text,
                        m.timestamp,
                        m.attachments,
                        None,
                    )
                })
                .collect();
            done.send(store.ingest_messages("turns", &batch).map(|r| r.added))
                .unwrap();
        });
        wait
    };
    let elsewhere = write("elsewhere");
    let conf = write("conf");
    let wait = std::time::Duration::from_secs(60);
    let added = messages().len() as u64;
    assert_eq!(elsewhere.recv_timeout(wait).unwrap().unwrap(), added);
    // `conf` waits for the lock: nothing of it lands while the holder has it.
    assert!(conf
        .recv_timeout(std::time::Duration::from_millis(500))
        .is_err());
    held.commit().unwrap();
    assert_eq!(conf.recv_timeout(wait).unwrap().unwrap(), added);
}

/// A message of namespace `chat` without a position of its own (`seq` 0, which
/// [`Place::Next`] replaces).
fn said(text: &str, external_ref: Option<&str>) -> SourceMessage {
    SourceMessage::new(
        Namespace::new("chat").unwrap(),
        5,
        0,
        "Ann".into(),
        text.into(),
        ts(1),
        vec![],
        external_ref.map(str::to_string),
    )
}

/// (seq, text, ref) of each message of session 5 of `chat`.
fn session5(store: &Store) -> Vec<(u32, String, Option<String>)> {
    store
        .session_messages(&Namespace::new("chat").unwrap(), 5)
        .unwrap()
        .into_iter()
        .map(|m| (m.seq, m.text, m.external_ref))
        .collect()
}

/// [`Store::reading`] sees the store as one moment left it: a write another connection
/// commits meanwhile is seen after the read, not inside it (issue 49: a build that read its
/// fold's record before another process's commit and its groups after it panicked).
fn a_read_sees_one_moment_of_the_store(fresh: Fresh) {
    let (mut writer, reader) = (fresh.open(), fresh.open());
    let ns = Namespace::new("chat").unwrap();
    writer
        .append_messages("t", &[Append::next(said("one", None))])
        .unwrap();
    let count = |store: &Store| store.messages_after(&ns, 0).map(|m| m.len());
    let inside = reader
        .reading(|store| {
            let before = count(store)?;
            writer
                .append_messages("t", &[Append::next(said("two", None))])
                .unwrap();
            Ok::<_, StoreError>((before, count(store)?))
        })
        .unwrap();
    assert_eq!(inside, (1, 1), "a read saw another connection's commit");
    assert_eq!(count(&reader).unwrap(), 2);
}

fn appends_take_the_next_position_and_refs_recognise_retries(fresh: Fresh) {
    let mut store = fresh.open();
    let next = |m: SourceMessage| Append::next(m);
    // "ok" three times, in three batches, then twice in one: five messages, in order.
    for _ in 0..3 {
        let r = store
            .append_messages("t", &[next(said("ok", None))])
            .unwrap();
        assert_eq!((r.added, r.unchanged), (1, 0));
    }
    let r = store
        .append_messages("t", &[next(said("ok", None)), next(said("ok", None))])
        .unwrap();
    assert_eq!(r.added, 2);
    let seqs: Vec<u32> = session5(&store).iter().map(|m| m.0).collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5]);
    // A message at its own position, then one after it.
    let mut at9 = said("nine", None);
    at9 = SourceMessage::new(
        at9.namespace,
        5,
        9,
        at9.speaker,
        at9.text,
        at9.timestamp,
        vec![],
        None,
    );
    store
        .append_messages("t", &[Append::given(at9.clone()), next(said("ten", None))])
        .unwrap();
    assert_eq!(session5(&store).last().unwrap().0, 10);
    // Re-ingesting positioned messages stays a no-op.
    assert_eq!(store.ingest_messages("t", &[at9]).unwrap().unchanged, 1);
    // A ref: the first time a new message; again, wherever the session is now, unchanged; a new
    // ref with the same words, a new message.
    assert_eq!(
        store
            .append_messages("t", &[next(said("ok", Some("r1")))])
            .unwrap()
            .added,
        1
    );
    store
        .append_messages("t", &[next(said("more", None))])
        .unwrap();
    let again = store
        .append_messages(
            "t",
            &[next(said("ok", Some("r1"))), next(said("ok", Some("r1")))],
        )
        .unwrap();
    assert_eq!((again.added, again.unchanged), (0, 2));
    assert_eq!(
        store
            .append_messages("t", &[next(said("ok", Some("r2")))])
            .unwrap()
            .added,
        1
    );
    let all = session5(&store);
    let seqs: Vec<u32> = all.iter().map(|m| m.0).collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5, 9, 10, 11, 12, 13]);
    assert_eq!(all[7], (11, "ok".into(), Some("r1".into())));
    // The stored ref with other words: a conflict naming the field, nothing stored.
    let before = store.stats().unwrap();
    match store
        .append_messages(
            "t",
            &[next(said("new", None)), next(said("not ok", Some("r1")))],
        )
        .unwrap_err()
    {
        StoreError::Conflict { fields, .. } => assert_eq!(fields, ["text"]),
        other => panic!("expected a conflict, got {other}"),
    }
    assert_eq!(store.stats().unwrap(), before);
    assert!(store.check().unwrap().ok());
    assert_eq!(Place::Next, next(said("x", None)).place);
}

fn conflicts_name_the_fields_that_differ(fresh: Fresh) {
    let (fresh, mut store, msgs, _batch) = filled_store(fresh);
    // Only the attachment's caption differs: the versions read apart.
    let mut changed = msgs[1].clone();
    changed.attachments[0].caption = Some("a photo of a cat".into());
    let err = store.ingest_messages("t", &[changed]).unwrap_err();
    let text = err.to_string();
    match &err {
        StoreError::Conflict { fields, .. } => assert_eq!(fields, &["attachments"]),
        other => panic!("expected a conflict, got {other}"),
    }
    assert!(text.contains("field `attachments` differs"), "{text}");
    assert!(
        text.contains("a photo of a dog") && text.contains("a photo of a cat"),
        "{text}"
    );
    // A run whose outcome differs: named in words and JSON, no Rust debug text.
    store.ingest_runs("t", &[run()]).unwrap();
    let mut failed = run();
    failed.outcome = Outcome {
        success: Some(false),
        reward: None,
    };
    let err = store.ingest_runs("t", &[failed]).unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(&err, StoreError::Conflict { fields, .. } if fields == &["outcome"]),
        "{text}"
    );
    for debug in ["Outcome {", "Some(", "None"] {
        assert!(!text.contains(debug), "{text}");
    }
    assert!(
        text.contains("success false") && text.contains("success true, reward 1"),
        "{text}"
    );
    // A derived record: its fields, as JSON.
    let (_dir2, mut store2, _, mut batch) = filled_store(Fresh::new(fresh.backend).unwrap());
    batch.claims[0].text = "Ann lives in Paris".into();
    let text = store2.commit_memory(&batch).unwrap_err().to_string();
    assert!(
        text.contains("field `text` differs") && text.contains("\"Ann lives in Paris\""),
        "{text}"
    );
    assert!(!text.contains("Claim {"), "{text}");
}

fn concurrent_appends_take_distinct_positions(fresh: Fresh) {
    // The namespace exists before the writers start.
    fresh
        .open()
        .append_messages("seed", &[Append::next(said("first", None))])
        .unwrap();
    let (writers, each) = (4, 10);
    std::thread::scope(|scope| {
        for w in 0..writers {
            let fresh = &fresh;
            scope.spawn(move || {
                let mut store = fresh.open();
                for i in 0..each {
                    store
                        .append_messages("w", &[Append::next(said(&format!("{w}/{i}"), None))])
                        .unwrap();
                }
            });
        }
    });
    let store = fresh.open();
    let all = session5(&store);
    let seqs: Vec<u32> = all.iter().map(|m| m.0).collect();
    let n = 1 + writers * each;
    assert_eq!(seqs, (1..=n as u32).collect::<Vec<_>>());
    assert!(store.check().unwrap().ok());
}

/// A memory written by hand as builds write one, at random (a fixed seed): messages appended,
/// builds that add snapshots to new or existing trajectories with their claims (ADD, REVISE,
/// DEPRECATE), refresh a trajectory's signals, add, change and retire pages; rebuilds that
/// replace the whole memory; clears.
struct RandomMemory {
    rng: u64,
    ns: Namespace,
    next: u64,
    messages: Vec<SourceMessage>,
    unbuilt: Vec<SourceMessage>,
    trajectories: Vec<Trajectory>,
    snapshots: Vec<Snapshot>,
    claims: Vec<Claim>,
    live_claims: Vec<ClaimId>,
    ops: Vec<ClaimOp>,
    pages: BTreeMap<PageId, WikiPage>,
}

/// What one step did, as far as a reader's cursor is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Did {
    Append,
    Build,
    Rebuild,
    Clear,
}

impl RandomMemory {
    fn new(seed: u64) -> RandomMemory {
        RandomMemory {
            rng: seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
            ns: Namespace::new("changes").unwrap(),
            next: 0,
            messages: Vec::new(),
            unbuilt: Vec::new(),
            trajectories: Vec::new(),
            snapshots: Vec::new(),
            claims: Vec::new(),
            live_claims: Vec::new(),
            ops: Vec::new(),
            pages: BTreeMap::new(),
        }
    }

    /// A number below `n` (xorshift64*).
    fn below(&mut self, n: usize) -> usize {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        (self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n.max(1)
    }

    fn key(&mut self, what: &str) -> String {
        self.next += 1;
        format!("{what}{}", self.next)
    }

    fn append(&mut self, store: &mut Store) {
        let n = 1 + self.below(3);
        let batch: Vec<SourceMessage> = (0..n)
            .map(|_| {
                let i = self.messages.len() as u32;
                let word = ["Oslo", "dogs", "Bergen", "lamps", "tea"][self.below(5)];
                let msg = SourceMessage::new(
                    self.ns.clone(),
                    1 + i / 10,
                    1 + i % 10,
                    ["Ann", "Bob"][self.below(2)].into(),
                    format!("{word} said {i}"),
                    ts(1) + chrono::Duration::minutes(i64::from(i)),
                    vec![],
                    None,
                );
                self.messages.push(msg.clone());
                msg
            })
            .collect();
        assert_eq!(
            store.ingest_messages("test", &batch).unwrap().added,
            n as u64
        );
        self.unbuilt.extend(batch);
    }

    fn claim(
        &mut self,
        snapshot: &SnapshotId,
        source: &SourceMessage,
        from: Option<ClaimId>,
    ) -> Claim {
        let key = self.key("c");
        let status = [ClaimStatus::Active, ClaimStatus::NeedsConfirmation][self.below(2)];
        Claim {
            id: ClaimId::derive(&self.ns, &key),
            namespace: self.ns.clone(),
            snapshot: snapshot.clone(),
            text: format!("claim {key}"),
            status,
            source_message_ids: vec![source.id.clone()],
            quote: source.text.split(' ').next().unwrap().into(),
            revised_from: from,
        }
    }

    fn op(
        &mut self,
        kind: OpKind,
        target: Option<ClaimId>,
        new: Option<ClaimId>,
        snapshot: &SnapshotId,
        source: &SourceMessage,
    ) -> ClaimOp {
        let seq = self.ops.len() as u64 + 1;
        let new_status = (kind == OpKind::Deprecate)
            .then(|| [ClaimStatus::Deprecated, ClaimStatus::Contradictory][self.below(2)]);
        let key = self.key("op");
        let op = ClaimOp {
            id: OpId::derive(&self.ns, &key),
            namespace: self.ns.clone(),
            seq,
            op: kind,
            target,
            new_claim: new,
            new_status,
            source_message_ids: vec![source.id.clone()],
            rationale: format!("{} {seq}", kind.as_str()),
            snapshot: snapshot.clone(),
        };
        self.ops.push(op.clone());
        op
    }

    fn page(&mut self, trajectory: &TrajectoryId) -> WikiPage {
        let key = self.key("p");
        WikiPage {
            id: PageId::derive(&self.ns, &key),
            namespace: self.ns.clone(),
            kind: [PageKind::Entity, PageKind::Topic, PageKind::Inventory][self.below(3)],
            title: format!("page {key}"),
            body: format!("# page {key}"),
            routing_text: format!("routing {key}"),
            keywords: vec![key.clone()],
            trajectory_ids: vec![trajectory.clone()],
            terms: vec![],
            items: vec![],
            revision: 1,
        }
    }

    /// One build over the unbuilt messages (one is appended first when there are none): a
    /// snapshot on a new or an existing trajectory, its claims and ops, page updates.
    fn build(&mut self, store: &mut Store) {
        if self.unbuilt.is_empty() {
            self.append(store);
        }
        let sources = std::mem::take(&mut self.unbuilt);
        let last = sources.last().unwrap().clone();
        let t = if self.trajectories.is_empty() || self.below(3) == 0 {
            let key = self.key("t");
            self.trajectories.push(Trajectory {
                id: TrajectoryId::derive(&self.ns, &key),
                namespace: self.ns.clone(),
                snapshot_ids: vec![],
                continues: None,
                summary: String::new(),
                signals: Signals::default(),
            });
            self.trajectories.len() - 1
        } else {
            self.below(self.trajectories.len())
        };
        let key = self.key("s");
        let sid = SnapshotId::derive(&self.ns, &key);
        let mut batch_claims = vec![self.claim(&sid, &sources[0], None)];
        let mut batch_ops = Vec::new();
        let added = batch_claims[0].id.clone();
        batch_ops.push(self.op(OpKind::Add, None, Some(added.clone()), &sid, &sources[0]));
        // A revision or a deprecation of an earlier claim, now and then.
        if !self.live_claims.is_empty() && self.below(2) == 0 {
            let at = self.below(self.live_claims.len());
            let target = self.live_claims.remove(at);
            if self.below(2) == 0 {
                let revised = self.claim(&sid, &last, Some(target.clone()));
                batch_ops.push(self.op(
                    OpKind::Revise,
                    Some(target),
                    Some(revised.id.clone()),
                    &sid,
                    &last,
                ));
                self.live_claims.push(revised.id.clone());
                batch_claims.push(revised);
            } else {
                batch_ops.push(self.op(OpKind::Deprecate, Some(target), None, &sid, &last));
            }
        }
        self.live_claims.push(added);
        let trajectory = &mut self.trajectories[t];
        trajectory.snapshot_ids.push(sid.clone());
        let snapshot = Snapshot {
            id: sid.clone(),
            namespace: self.ns.clone(),
            trajectory: trajectory.id.clone(),
            version: trajectory.snapshot_ids.len() as u32,
            timestamp: last.timestamp,
            summary: format!("snapshot of {}", last.text),
            context: String::new(),
            keywords: vec![],
            claim_ids: batch_claims.iter().map(|c| c.id.clone()).collect(),
            source_message_ids: sources.iter().map(|m| m.id.clone()).collect(),
        };
        // Half the time the trajectory's row is left as it was: the new snapshot alone changes it.
        if self.rng.is_multiple_of(2) {
            trajectory.summary = snapshot.summary.clone();
        }
        let mut batch_trajectories = vec![trajectory.clone()];
        // Another trajectory's signals refreshed, without a snapshot.
        if self.trajectories.len() > 1 && self.below(3) == 0 {
            let other = self.below(self.trajectories.len());
            let key = self.key("k");
            self.trajectories[other].signals.keywords.push(key);
            batch_trajectories.push(self.trajectories[other].clone());
        }
        let tid = self.trajectories[t].id.clone();
        let mut updates = PageUpdates::default();
        match self.below(4) {
            0 => {
                let page = self.page(&tid);
                self.pages.insert(page.id.clone(), page.clone());
                updates.changed.push(page);
            }
            1 if !self.pages.is_empty() => {
                let at = self.below(self.pages.len());
                let id = self.pages.keys().nth(at).unwrap().clone();
                let page = self.pages.get_mut(&id).unwrap();
                page.routing_text.push_str(" more");
                page.trajectory_ids.push(tid.clone());
                updates.changed.push(page.clone());
            }
            2 if !self.pages.is_empty() => {
                let at = self.below(self.pages.len());
                let id = self.pages.keys().nth(at).unwrap().clone();
                self.pages.remove(&id);
                updates.retired.push(id);
            }
            _ => {}
        }
        self.snapshots.push(snapshot.clone());
        self.claims.extend(batch_claims.iter().cloned());
        store
            .commit_memory(&MemoryBatch {
                namespace: self.ns.clone(),
                trajectories: batch_trajectories,
                snapshots: vec![snapshot],
                claims: batch_claims,
                ops: batch_ops,
                pages: None,
                page_updates: Some(updates),
                replace: false,
                fold: None,
            })
            .unwrap();
    }

    /// The whole memory again, replacing the stored one (one page fewer, when there are any).
    fn rebuild(&mut self, store: &mut Store) {
        if let Some(id) = self.pages.keys().next().cloned() {
            self.pages.remove(&id);
        }
        store
            .commit_memory(&MemoryBatch {
                namespace: self.ns.clone(),
                trajectories: self.trajectories.clone(),
                snapshots: self.snapshots.clone(),
                claims: self.claims.clone(),
                ops: self.ops.clone(),
                pages: Some(self.pages.values().cloned().collect()),
                page_updates: None,
                replace: true,
                fold: None,
            })
            .unwrap();
    }

    /// The memory cleared; the messages stay, as built as they were.
    fn clear(&mut self, store: &mut Store) {
        assert!(store.clear_memory(&self.ns).unwrap());
        self.trajectories.clear();
        self.snapshots.clear();
        self.claims.clear();
        self.live_claims.clear();
        self.ops.clear();
        self.pages.clear();
    }

    fn step(&mut self, store: &mut Store) -> Did {
        match self.below(20) {
            0..=5 => {
                self.append(store);
                Did::Append
            }
            6..=16 => {
                self.build(store);
                Did::Build
            }
            17 | 18 => {
                self.rebuild(store);
                Did::Rebuild
            }
            _ => {
                self.clear(store);
                Did::Clear
            }
        }
    }
}

/// A reader's state: the messages and records of one namespace read.
type Read = (Vec<(i64, SourceMessage)>, MemoryRecords);

fn full_read(store: &Store, ns: &Namespace) -> Read {
    let (arrived, records, ()) = store.namespace_read(ns, |_| ()).unwrap();
    (arrived, records)
}

/// `held` brought up to the store's state by the changes after its cursor; `None` when the
/// changes say to read again.
fn caught_up(store: &Store, ns: &Namespace, held: &Read) -> Option<(Read, NamespaceDelta)> {
    let delta = store.namespace_changes(ns, &held.1.cursor).unwrap();
    assert_eq!(delta.since, held.1.cursor);
    if delta.reload {
        assert!(delta.messages.is_empty() && delta.records.snapshots.is_empty());
        let mut stale = held.1.clone();
        assert!(matches!(
            stale.apply(&delta),
            Err(StoreError::Reload { .. })
        ));
        assert_eq!(stale, held.1, "a refused delta changes nothing");
        return None;
    }
    let (mut arrived, mut records) = held.clone();
    arrived.extend(delta.messages.iter().cloned());
    records.apply(&delta).unwrap();
    Some(((arrived, records), delta))
}

/// The acceptance of "what changed since": after every step of a random history, the records
/// read at a cursor merged with the changes after it equal a namespace read now, record for
/// record — from a cursor taken once (until a rebuild or clear says to read again) and from the
/// previous step's. Reload is said exactly after a rebuild, clear, delete or re-creation; a
/// step that changed nothing of the memory reports no record; a delta is only what changed.
fn changes_since_a_cursor_merge_into_a_full_read(fresh: Fresh) {
    let mut store = fresh.open();
    // What the histories exercised: steps of each kind, deltas holding a claim whose status
    // changed, a trajectory changed without being new, a retired page, a changed page.
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for seed in 1..=4 {
        let mut memory = RandomMemory::new(seed);
        let ns = Namespace::new(format!("changes{seed}")).unwrap();
        memory.ns = ns.clone();
        assert!(store
            .namespace_changes(&ns, &Cursor::default())
            .unwrap()
            .is_empty());
        memory.append(&mut store);
        memory.build(&mut store);
        // A reader that holds nothing reads the namespace.
        assert!(
            store
                .namespace_changes(&ns, &Cursor::default())
                .unwrap()
                .reload
        );
        let mut first = full_read(&store, &ns);
        let mut previous = first.clone();
        assert_eq!(store.cursor(&ns).unwrap(), first.1.cursor);
        let mut reset_since_first = false;
        for _ in 0..30 {
            let step = memory.step(&mut store);
            *seen.entry(format!("{step:?}")).or_default() += 1;
            let now = full_read(&store, &ns);
            reset_since_first |= matches!(step, Did::Rebuild | Did::Clear);
            match caught_up(&store, &ns, &first) {
                Some((merged, _)) => {
                    assert!(!reset_since_first, "seed {seed}: a reset must say reload");
                    assert_eq!(
                        merged, now,
                        "seed {seed}: changes since the first cursor, after {step:?}"
                    );
                }
                None => {
                    assert!(
                        reset_since_first,
                        "seed {seed}: reload without a reset, after {step:?}"
                    );
                    first = now.clone();
                    reset_since_first = false;
                }
            }
            match caught_up(&store, &ns, &previous) {
                Some((merged, delta)) => {
                    assert!(matches!(step, Did::Append | Did::Build), "{step:?}");
                    assert_eq!(merged, now, "seed {seed}: changes of one step, {step:?}");
                    let records = &delta.records;
                    let counts = (
                        records.snapshots.len(),
                        records.trajectories.len(),
                        records.claims.len(),
                        records.pages.len() + delta.retired_pages.len(),
                    );
                    let held = |id: &ClaimId| previous.1.claims.iter().any(|(c, _)| &c.id == id);
                    let tallies = [
                        (
                            "claim status changed",
                            records.claims.iter().any(|(c, _)| held(&c.id)),
                        ),
                        (
                            "trajectory changed",
                            records
                                .trajectories
                                .iter()
                                .any(|t| previous.1.trajectories.iter().any(|p| p.id == t.id)),
                        ),
                        ("page retired", !delta.retired_pages.is_empty()),
                        ("page revised", records.pages.iter().any(|p| p.revision > 1)),
                    ];
                    for (what, happened) in tallies {
                        *seen.entry(what.into()).or_default() += usize::from(happened);
                    }
                    if step == Did::Append {
                        assert_eq!(counts, (0, 0, 0, 0), "an append changes no record");
                        assert!(!delta.messages.is_empty());
                    } else {
                        // One snapshot, its trajectory and maybe one more, one or two new
                        // claims and maybe a changed one, at most one page.
                        assert_eq!(counts.0, 1, "{counts:?}");
                        assert!((1..=2).contains(&counts.1), "{counts:?}");
                        assert!((1..=3).contains(&counts.2), "{counts:?}");
                        assert!(counts.3 <= 1, "{counts:?}");
                    }
                }
                None => assert!(matches!(step, Did::Rebuild | Did::Clear), "{step:?}"),
            }
            previous = now;
            let unchanged = store.namespace_changes(&ns, &previous.1.cursor).unwrap();
            let nothing = MemoryRecords {
                cursor: previous.1.cursor,
                ..MemoryRecords::default()
            };
            assert!(unchanged.is_empty() && unchanged.messages.is_empty());
            assert_eq!(unchanged.records, nothing);
        }
        assert!(store.check().unwrap().ok(), "{:?}", store.check().unwrap());
        // Deleted, then created again under the same name: every earlier cursor reloads.
        store.delete_namespace(&ns).unwrap();
        assert!(
            store
                .namespace_changes(&ns, &previous.1.cursor)
                .unwrap()
                .reload
        );
        assert_eq!(store.cursor(&ns).unwrap(), Cursor::default());
        memory = RandomMemory::new(seed + 100);
        memory.ns = ns.clone();
        memory.append(&mut store);
        let again = store.namespace_changes(&ns, &previous.1.cursor).unwrap();
        assert!(again.reload, "a namespace created again is not the old one");
    }
    for what in [
        "Append",
        "Build",
        "Rebuild",
        "Clear",
        "claim status changed",
        "trajectory changed",
        "page retired",
        "page revised",
    ] {
        assert!(
            seen.get(what).copied().unwrap_or(0) > 0,
            "no {what} in {seen:?}"
        );
    }
    eprintln!("histories: {seen:?}");
}

/// A migrated database's schema: per table, its columns and its indexes' columns (the indexes of
/// primary keys and unique constraints included), each sorted, and whether each index is unique.
type Schema = BTreeMap<String, (Vec<String>, Vec<(Vec<String>, bool)>)>;

/// The rows of a one-column SQLite query.
fn column(conn: &Connection, sql: &str) -> Vec<String> {
    conn.prepare(sql)
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// The schema of the SQLite database at `path`.
fn sqlite_schema(path: &std::path::Path) -> Schema {
    let conn = Connection::open(path).unwrap();
    let mut schema = Schema::new();
    let tables = column(
        &conn,
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
    );
    for table in tables {
        let mut columns = column(
            &conn,
            &format!("SELECT name FROM pragma_table_info('{table}')"),
        );
        columns.sort();
        let mut keys: Vec<(Vec<String>, bool)> = conn
            .prepare(&format!(
                "SELECT name, \"unique\" FROM pragma_index_list('{table}')"
            ))
            .unwrap()
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, bool>(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .map(|(index, unique)| {
                let sql = format!("SELECT name FROM pragma_index_info('{index}') ORDER BY seqno");
                (column(&conn, &sql), unique)
            })
            .collect();
        // An INTEGER PRIMARY KEY is the rowid itself: a key without an index.
        let pk = column(
            &conn,
            &format!("SELECT name FROM pragma_table_info('{table}') WHERE pk > 0 ORDER BY pk"),
        );
        if !pk.is_empty() && !keys.iter().any(|(k, _)| *k == pk) {
            keys.push((pk, true));
        }
        keys.sort();
        schema.insert(table, (columns, keys));
    }
    schema
}

/// The schema of a fresh store of `fresh`'s backend, once migrated.
fn migrated_schema(fresh: &Fresh) -> Schema {
    drop(fresh.open());
    let mut schema = Schema::new();
    match fresh.backend {
        Backend::Sqlite => schema = sqlite_schema(&fresh.location.join(DB_FILE)),
        Backend::Postgres => {
            let url = fresh.location.to_str().unwrap();
            let mut client = ::postgres::Client::connect(url, ::postgres::NoTls).unwrap();
            let tables: Vec<String> = client
                .query(
                    "SELECT tablename::text FROM pg_tables WHERE schemaname = current_schema()",
                    &[],
                )
                .unwrap()
                .iter()
                .map(|r| r.get(0))
                .collect();
            for table in tables {
                let mut columns: Vec<String> = client
                    .query(
                        "SELECT column_name::text FROM information_schema.columns \
                         WHERE table_schema = current_schema() AND table_name = $1",
                        &[&table],
                    )
                    .unwrap()
                    .iter()
                    .map(|r| r.get(0))
                    .collect();
                columns.sort();
                let mut keys: Vec<(Vec<String>, bool)> = client
                    .query(
                        "SELECT array_agg(a.attname::text ORDER BY k.n), bool_and(i.indisunique) \
                         FROM pg_index i \
                         CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, n) \
                         JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum \
                         WHERE i.indrelid = $1::text::regclass GROUP BY i.indexrelid",
                        &[&table],
                    )
                    .unwrap()
                    .iter()
                    .map(|r| (r.get(0), r.get(1)))
                    .collect();
                keys.sort();
                schema.insert(table, (columns, keys));
            }
        }
    }
    schema
}

#[test]
fn both_backends_migrate_to_the_same_schema() {
    let Some(postgres) = Fresh::new(Backend::Postgres) else {
        return;
    };
    let mut sqlite = migrated_schema(&Fresh::new(Backend::Sqlite).unwrap());
    let mut postgres = migrated_schema(&postgres);
    // What each backend keeps its own way, by design: the schema version (SQLite's
    // `user_version`, a table on PostgreSQL), the generation clock (a one-row table on SQLite, a
    // sequence on PostgreSQL) and the vectors (files beside an SQLite database, rows in
    // PostgreSQL).
    assert!(sqlite.remove("generation_clock").is_some());
    assert!(postgres.remove("trajwiki_schema").is_some());
    assert!(postgres.remove("vector_chunks").is_some());
    // SQLite's implicit rowid is a column on PostgreSQL where the store reads ingest order by it:
    // a unique key there, and the last column of each SQLite index that is not unique (as SQLite
    // stores every index).
    for (table, (columns, keys)) in sqlite.iter_mut() {
        if postgres[table].0.iter().any(|c| c == "rowid") {
            columns.push("rowid".into());
            columns.sort();
            for (key, unique) in keys.iter_mut() {
                if !*unique {
                    key.push("rowid".into());
                }
            }
            keys.push((vec!["rowid".into()], true));
            keys.sort();
        }
    }
    assert_eq!(
        sqlite.keys().collect::<Vec<_>>(),
        postgres.keys().collect::<Vec<_>>()
    );
    for (table, sqlite) in &sqlite {
        assert_eq!(sqlite.0, postgres[table].0, "{table}: columns");
        // Uniqueness is compared where it is enforced alike: SQLite's non-unique indexes carry
        // the rowid, so their columns are a key either way.
        let keys = |k: &[(Vec<String>, bool)]| k.iter().map(|(c, _)| c.clone()).collect::<Vec<_>>();
        assert_eq!(
            keys(&sqlite.1),
            keys(&postgres[table].1),
            "{table}: indexes"
        );
        assert_eq!(
            sqlite.1.iter().filter(|(_, u)| *u).count(),
            postgres[table].1.iter().filter(|(_, u)| *u).count(),
            "{table}: unique indexes"
        );
    }
}

#[test]
fn a_database_of_every_earlier_sqlite_version_upgrades_to_the_same_schema() {
    let fresh = Fresh::new(Backend::Sqlite).unwrap();
    drop(fresh.open());
    let newest = sqlite_schema(&fresh.location.join(DB_FILE));
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    let mut steps: Vec<std::path::PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sql"))
        .collect();
    steps.sort();
    assert_eq!(steps.len() as u32, SCHEMA_VERSION);
    for version in 1..SCHEMA_VERSION {
        // A database as a build of that version left it: its migrations and its version.
        let old = tempfile::tempdir().unwrap();
        let conn = Connection::open(old.path().join(DB_FILE)).unwrap();
        for step in &steps[..version as usize] {
            conn.execute_batch(&std::fs::read_to_string(step).unwrap())
                .unwrap();
        }
        conn.pragma_update(None, "user_version", version).unwrap();
        drop(conn);
        let store = Store::open(old.path()).unwrap();
        assert_eq!(
            store.schema_version().unwrap(),
            SCHEMA_VERSION,
            "from {version}"
        );
        assert!(store.check().unwrap().ok(), "from {version}");
        drop(store);
        assert_eq!(
            sqlite_schema(&old.path().join(DB_FILE)),
            newest,
            "upgraded from version {version}"
        );
    }
}
