//! The cost of reading what changed against a full namespace read, on a copy of a store:
//! `cargo run -p trajwiki-store --example delta_read -- STORE NAMESPACE`.
//!
//! Opens the store (migrating it), times a full [`Store::namespace_read`], appends one message
//! and commits one build of it (a snapshot on a new trajectory, a claim, its ADD op), then times
//! [`Store::namespace_changes`] from the cursor of the full read, checks that the merged records
//! equal a new full read, and runs `check`. Writes to the store: give it a copy.

use std::time::Instant;

use trajwiki_core::{
    Claim, ClaimId, ClaimOp, ClaimStatus, Namespace, OpId, OpKind, Signals, Snapshot, SnapshotId,
    SourceMessage, Trajectory, TrajectoryId,
};
use trajwiki_store::{MemoryBatch, Store};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(dir), Some(ns)) = (args.next(), args.next()) else {
        return Err("usage: delta_read STORE NAMESPACE".into());
    };
    let ns = Namespace::new(ns)?;
    let mut store = Store::open_existing(&dir)?;
    let full = |store: &Store| -> Result<_, Box<dyn std::error::Error>> {
        let start = Instant::now();
        let (arrived, records, ()) = store.namespace_read(&ns, |_| ())?;
        Ok((start.elapsed(), arrived, records))
    };
    let mut times = Vec::new();
    for _ in 0..5 {
        times.push(full(&store)?.0);
    }
    let (_, mut arrived, mut records) = full(&store)?;
    println!(
        "full read: {} messages, {} snapshots, {} claims, {} trajectories, {} pages; {:?} (5 runs: {times:?})",
        arrived.len(),
        records.snapshots.len(),
        records.claims.len(),
        records.trajectories.len(),
        records.pages.len(),
        times.iter().min().unwrap()
    );
    let last = &arrived.last().ok_or("the namespace has no messages")?.1;
    let msg = SourceMessage::new(
        ns.clone(),
        last.session,
        last.seq + 1,
        "Ann".into(),
        "delta probe: I moved to Oslo.".into(),
        last.timestamp,
        vec![],
        None,
    );
    store.ingest_messages("delta_read", std::slice::from_ref(&msg))?;
    let tid = TrajectoryId::derive(&ns, "delta-probe");
    let sid = SnapshotId::derive(&ns, "delta-probe");
    let cid = ClaimId::derive(&ns, "delta-probe");
    let next_seq = store.claim_ops(&ns)?.last().map_or(1, |o| o.seq + 1);
    store.commit_memory(&MemoryBatch {
        namespace: ns.clone(),
        trajectories: vec![Trajectory {
            id: tid.clone(),
            namespace: ns.clone(),
            snapshot_ids: vec![sid.clone()],
            continues: None,
            summary: "Ann moved to Oslo".into(),
            signals: Signals::default(),
        }],
        snapshots: vec![Snapshot {
            id: sid.clone(),
            namespace: ns.clone(),
            trajectory: tid,
            version: 1,
            timestamp: msg.timestamp,
            summary: "Ann moved to Oslo".into(),
            context: String::new(),
            keywords: vec![],
            claim_ids: vec![cid.clone()],
            source_message_ids: vec![msg.id.clone()],
        }],
        claims: vec![Claim {
            id: cid.clone(),
            namespace: ns.clone(),
            snapshot: sid.clone(),
            text: "Ann moved to Oslo".into(),
            status: ClaimStatus::Active,
            source_message_ids: vec![msg.id.clone()],
            quote: "moved to Oslo".into(),
            revised_from: None,
        }],
        ops: vec![ClaimOp {
            id: OpId::derive(&ns, "delta-probe"),
            namespace: ns.clone(),
            seq: next_seq,
            op: OpKind::Add,
            target: None,
            new_claim: Some(cid),
            new_status: None,
            source_message_ids: vec![msg.id.clone()],
            rationale: "delta probe".into(),
            snapshot: sid,
        }],
        pages: None,
        page_updates: None,
        replace: false,
        fold: None,
    })?;
    let mut times = Vec::new();
    let mut delta = None;
    for _ in 0..5 {
        let start = Instant::now();
        delta = Some(store.namespace_changes(&ns, &records.cursor)?);
        times.push(start.elapsed());
    }
    let delta = delta.expect("five reads");
    println!(
        "delta read after one append + build: {} messages, {} snapshots, {} claims, {} trajectories, {} pages; {:?} (5 runs: {times:?})",
        delta.messages.len(),
        delta.records.snapshots.len(),
        delta.records.claims.len(),
        delta.records.trajectories.len(),
        delta.records.pages.len(),
        times.iter().min().unwrap()
    );
    let start = Instant::now();
    arrived.extend(delta.messages.iter().cloned());
    records.apply(&delta)?;
    println!("merge: {:?}", start.elapsed());
    let (time, now_arrived, now) = full(&store)?;
    println!("full read now: {time:?}");
    if now_arrived != arrived || now != records {
        return Err("the merged records differ from a full read".into());
    }
    println!("merged = full read: yes");
    let report = store.check()?;
    println!("check: {}", if report.ok() { "ok" } else { "PROBLEMS" });
    if !report.ok() {
        println!("{:?}", report.problems);
    }
    Ok(())
}
