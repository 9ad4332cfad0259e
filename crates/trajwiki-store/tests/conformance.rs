//! Store conformance: every record type round-trips, immutability holds at the API and SQL level,
//! migrations apply to an empty store, a newer schema is refused, bad references are refused and
//! leave nothing behind.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use rusqlite::Connection;
use trajwiki_core::*;
use trajwiki_store::{MemoryBatch, Store, StoreError, DB_FILE, SCHEMA_VERSION};

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

fn filled_store() -> (tempfile::TempDir, Store, Vec<SourceMessage>, MemoryBatch) {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let msgs = messages();
    store.ingest_messages("test", &msgs).unwrap();
    let batch = memory(&msgs);
    store.commit_memory(&batch).unwrap();
    (dir, store, msgs, batch)
}

#[test]
fn every_record_round_trips() {
    let (_dir, mut store, msgs, batch) = filled_store();
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

#[test]
fn rebuild_is_idempotent_and_pages_keep_revisions() {
    let (_dir, mut store, _msgs, mut batch) = filled_store();
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

#[test]
fn changed_immutable_record_is_a_conflict() {
    let (_dir, mut store, _msgs, mut batch) = filled_store();
    batch.claims[0].text = "Ann lives in Paris".into();
    assert!(matches!(
        store.commit_memory(&batch),
        Err(StoreError::Conflict { kind: "claim", .. })
    ));
}

#[test]
fn sql_refuses_to_change_immutable_records() {
    let (dir, store, _msgs, _batch) = filled_store();
    drop(store);
    let conn = Connection::open(dir.path().join(DB_FILE)).unwrap();
    for sql in [
        "UPDATE messages SET text = 'x'",
        "DELETE FROM messages",
        "UPDATE snapshots SET summary = 'x'",
        "DELETE FROM claims",
        "UPDATE claim_ops SET rationale = 'x'",
        "DELETE FROM page_revisions",
    ] {
        let err = conn.execute(sql, []).unwrap_err().to_string();
        assert!(err.contains("immutable record"), "{sql}: {err}");
    }
}

#[test]
fn failed_batch_leaves_nothing() {
    let (_dir, mut store, msgs, _batch) = filled_store();
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
    let dir2 = tempfile::tempdir().unwrap();
    let mut fresh = Store::open(dir2.path()).unwrap();
    fresh.ingest_messages("t", &msgs).unwrap();
    let before = fresh.stats().unwrap();
    assert!(matches!(
        fresh.commit_memory(&batch),
        Err(StoreError::Dangling { .. })
    ));
    assert_eq!(fresh.stats().unwrap(), before);
}

#[test]
fn migrations_and_newer_schema() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        Store::open_existing(dir.path()),
        Err(StoreError::NotAStore { .. })
    ));
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    assert!(store.check().unwrap().ok());
    drop(store);
    // Reopening applies nothing new.
    assert_eq!(
        Store::open_existing(dir.path())
            .unwrap()
            .schema_version()
            .unwrap(),
        SCHEMA_VERSION
    );
    let conn = Connection::open(dir.path().join(DB_FILE)).unwrap();
    conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .unwrap();
    drop(conn);
    match Store::open(dir.path()) {
        Err(StoreError::NewerSchema {
            found, supported, ..
        }) => {
            assert_eq!((found, supported), (SCHEMA_VERSION + 1, SCHEMA_VERSION));
        }
        other => panic!("expected NewerSchema, got {other:?}"),
    }
}

#[test]
fn embedding_dimension_is_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
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

#[test]
fn check_finds_tampering() {
    let (dir, store, _msgs, _batch) = filled_store();
    drop(store);
    let conn = Connection::open(dir.path().join(DB_FILE)).unwrap();
    // Bypass the triggers the way an outside tool could: drop one and edit.
    conn.execute_batch("DROP TRIGGER messages_no_update; UPDATE messages SET text = 'edited' WHERE external_ref = 'D1:1';")
        .unwrap();
    conn.execute("UPDATE claim_state SET status = 'active'", [])
        .unwrap();
    drop(conn);
    let report = Store::open_existing(dir.path()).unwrap().check().unwrap();
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

#[test]
fn delete_namespace_removes_everything() {
    let (_dir, mut store, _msgs, _batch) = filled_store();
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
    assert!(deleted.existed && deleted.scrubbed, "{deleted:?}");
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

#[test]
fn data_version_moves_for_other_connections_only() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = Store::open(dir.path()).unwrap();
    let b = Store::open(dir.path()).unwrap();
    let (a0, b0) = (a.data_version().unwrap(), b.data_version().unwrap());
    a.ingest_messages("test", &messages()).unwrap();
    // The writer's own commit does not move its version; the other connection's does.
    assert_eq!(a.data_version().unwrap(), a0);
    assert_ne!(b.data_version().unwrap(), b0);
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
        ("postgres://u@localhost/db", "PostgreSQL"),
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
