//! Derived memory: snapshots, claims, the claim op log, trajectories, wiki pages, and the
//! WikiTrace compilations and insights.

use std::collections::{BTreeMap, HashMap, HashSet};

use rusqlite::{params, OptionalExtension, ToSql};

use crate::db::{insert_rows, insert_rows_returning, known_ids, Begin, Db, Tx};
use trajwiki_core::{
    replay_ops, Claim, ClaimId, ClaimOp, ClaimStatus, Compilation, CompilationId, Insight,
    InsightId, MessageId, Namespace, OpId, PageId, RunId, Snapshot, SnapshotId, Trajectory,
    TrajectoryId, WikiPage,
};

use crate::changes::{advance, cursor_in, Cursor};
use crate::conflict::{conflict, Differences};
use crate::error::{Result, SqlContext, StoreError};
use crate::fold::{check_from, write_fold, Arrived, FoldWrite};
use crate::page_write::{retire_pages, upsert_pages};
use crate::read::{self, Pages, Scope};
use crate::{fmt_ts, parse_stored, to_json, Store};

/// A namespace's memory records as [`Store::namespace_read`] reads them, with the [`Cursor`] of
/// the state they were read at (what [`Store::namespace_changes`] counts changes from and
/// [`MemoryRecords::apply`] moves). Equal records compare equal, cursor included.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemoryRecords {
    /// The state of the namespace these records are.
    pub cursor: Cursor,
    /// Snapshots, by trajectory and version.
    pub snapshots: Vec<Snapshot>,
    /// Claims sorted by id, each with its current status.
    pub claims: Vec<(Claim, ClaimStatus)>,
    /// Trajectories sorted by id.
    pub trajectories: Vec<Trajectory>,
    /// Current page revisions, by kind then id, with the fields retrieval routes on (kind,
    /// title, routing text, links); body, keywords, terms and items are left empty
    /// ([`Store::page`] reads a whole page).
    pub pages: Vec<WikiPage>,
    /// The messages that restate a deprecated claim without being its source ("still living
    /// in Austin"), by claim id, then in op order: a reader marks them as it marks the claim's
    /// sources.
    pub restatements: Vec<(ClaimId, MessageId)>,
}

/// Everything one memory build (or increment) writes for a namespace, committed at once.
///
/// Immutable records (snapshots, claims, ops) that are already stored with equal content are
/// skipped, so a deterministic rebuild can hand the whole memory again; different content under a
/// stored id is a [`StoreError::Conflict`]. Trajectories are inserted or have their derived fields
/// (summary, signals) replaced. When `pages` is `Some`, it is the complete set of current pages:
/// changed pages get a new revision, pages left out are retired, older revisions stay.
#[derive(Debug, Clone)]
pub struct MemoryBatch {
    /// The namespace every record belongs to.
    pub namespace: Namespace,
    /// Trajectories to insert or refresh.
    pub trajectories: Vec<Trajectory>,
    /// Snapshots, in an order where each trajectory's versions ascend.
    pub snapshots: Vec<Snapshot>,
    /// Claims.
    pub claims: Vec<Claim>,
    /// Ops, in seq order, continuing the stored log.
    pub ops: Vec<ClaimOp>,
    /// The complete current page set, or `None` to leave pages as they are.
    pub pages: Option<Vec<WikiPage>>,
    /// Pages changed and pages retired since the last commit (what an append changes), applied
    /// after `pages`.
    pub page_updates: Option<PageUpdates>,
    /// Replace the namespace's derived memory: clear it first, in the same transaction, so that a
    /// rebuild is atomic too.
    pub replace: bool,
    /// The construction fold's state after this batch, written in the same transaction.
    pub fold: Option<FoldWrite>,
}

/// The pages an append changed: new current revisions, and pages retired.
#[derive(Debug, Clone, Default)]
pub struct PageUpdates {
    /// Pages whose content changed (or that are new).
    pub changed: Vec<WikiPage>,
    /// Pages that no longer exist in the wiki.
    pub retired: Vec<PageId>,
}

pub(crate) fn check_ns(batch_ns: &Namespace, what: &str, ns: &Namespace) -> Result<()> {
    if batch_ns != ns {
        return Err(StoreError::Dangling {
            what: format!("{what} of namespace {ns} in a batch for {batch_ns}"),
            missing: batch_ns.to_string(),
        });
    }
    Ok(())
}

fn exists(tx: &Db, sql: &str, id: &str) -> Result<bool> {
    Ok(tx
        .query_row(sql, [id], |_| Ok(()))
        .optional()
        .ctx("looking up a record")?
        .is_some())
}

/// Ok when the record whose id an insert found taken is `incoming`; a conflict otherwise, and
/// when nothing can be read under the id.
fn same_as_stored<T: PartialEq + serde::Serialize>(
    kind: &'static str,
    id: &str,
    stored: Option<T>,
    incoming: &T,
) -> Result<()> {
    match stored {
        Some(stored) if &stored == incoming => Ok(()),
        Some(stored) => Err(conflict(kind, id, &stored, incoming)),
        None => Err(conflict(kind, id, "an unreadable record", incoming)),
    }
}

/// `records` with each id once: a record given again must equal the first (else a conflict).
fn once_each<'a, T: PartialEq + serde::Serialize>(
    kind: &'static str,
    records: &'a [T],
    id: impl Fn(&T) -> &str,
) -> Result<Vec<&'a T>> {
    let mut first: HashMap<&str, &T> = HashMap::new();
    let mut once = Vec::with_capacity(records.len());
    for r in records {
        match first.get(id(r)) {
            Some(&earlier) if earlier != r => return Err(conflict(kind, id(r), earlier, r)),
            Some(_) => {}
            None => {
                first.insert(id(r), r);
                once.push(r);
            }
        }
    }
    Ok(once)
}

/// Inserts each owner's list as rows (namespace, owner, position, item) of `into`, in
/// multi-row statements. Every item must be `known` (stored, or written by this commit), else
/// the error names the owner and the item missing.
fn insert_lists(
    tx: &Tx<'_>,
    into: &str,
    ns: &Namespace,
    lists: &[(&str, Vec<&str>)],
    known: impl Fn(&str) -> bool,
) -> Result<()> {
    for (owner, list) in lists {
        if let Some(missing) = list.iter().find(|item| !known(item)) {
            return Err(StoreError::Dangling {
                what: owner.to_string(),
                missing: missing.to_string(),
            });
        }
    }
    let ns = &ns.as_str();
    let longest = lists.iter().map(|(_, l)| l.len()).max().unwrap_or(0);
    let positions: Vec<i64> = (0..longest as i64).collect();
    let rows: Vec<Vec<&dyn ToSql>> = lists
        .iter()
        .flat_map(|(owner, list)| {
            list.iter()
                .zip(&positions)
                .map(move |(item, i)| vec![ns as &dyn ToSql, owner, i, item])
        })
        .collect();
    insert_rows(tx, into, 4, "", &rows, "inserting a list")
}

impl Store {
    /// Commits a [`MemoryBatch`] in one transaction and re-derives claim state from the full
    /// op log of the namespace.
    pub fn commit_memory(&mut self, batch: &MemoryBatch) -> Result<()> {
        let ns = &batch.namespace;
        let tx = self.write_tx("starting a memory commit", &[ns.as_str()])?;
        check_from(&tx, ns, batch.fold.as_ref())?;
        if batch.replace {
            crate::delete_in(&tx, ns, false)?;
        }
        // The generation this commit stamps on every row it inserts or changes.
        let generation = advance(&tx, ns, batch.replace)?;
        // Trajectories as one multi-row upsert, in the batch's order (a continuation after the
        // trajectory it continues; an id given again takes the first one's place and the last
        // one's content): a new one is inserted, a stored one with the same continuation takes
        // the new summary and signals (stamped only when they change: an unchanged trajectory
        // is no change). Only the ones neither inserted nor changed are read back, to tell
        // unchanged from a continuation that differs.
        let mut trajectories: Vec<(&str, &Trajectory)> = Vec::new();
        let mut place: HashMap<&str, usize> = HashMap::new();
        for t in &batch.trajectories {
            check_ns(ns, "trajectory", &t.namespace)?;
            match place.get(t.id.as_str()) {
                Some(&i) => trajectories[i].1 = t,
                None => {
                    place.insert(t.id.as_str(), trajectories.len());
                    trajectories.push((t.id.as_str(), t));
                }
            }
        }
        let cells: Vec<(Option<String>, String)> = trajectories
            .iter()
            .map(|(_, t)| {
                (
                    t.continues.as_ref().map(|c| c.to_string()),
                    to_json(&t.signals),
                )
            })
            .collect();
        let ns_id = ns.as_str();
        let rows: Vec<Vec<&dyn ToSql>> = trajectories
            .iter()
            .zip(&cells)
            .map(|((id, t), (continues, signals))| {
                vec![
                    id as &dyn ToSql,
                    &ns_id,
                    continues,
                    &t.summary,
                    signals,
                    &generation,
                ]
            })
            .collect();
        let written = insert_rows_returning(
            &tx,
            "trajectories (id, namespace, continues, summary, signals, generation)",
            6,
            "ON CONFLICT (id) DO UPDATE SET summary = excluded.summary,
               signals = excluded.signals, generation = excluded.generation
             WHERE coalesce(trajectories.continues, '') = coalesce(excluded.continues, '')
               AND (trajectories.summary <> excluded.summary OR trajectories.signals <> excluded.signals)
             RETURNING id",
            &rows,
            "writing trajectories",
        )?;
        for ((id, _), (continues, _)) in trajectories.iter().zip(&cells) {
            if written.contains(*id) {
                continue;
            }
            let stored: Option<String> = tx
                .query_row(
                    "SELECT continues FROM trajectories WHERE id = ?1",
                    [id],
                    |row| row.get(0),
                )
                .ctx("looking up a trajectory")?;
            if stored != *continues {
                return Err(conflict("trajectory continuation", id, &stored, continues));
            }
        }
        // The messages the batch's records cite, read once: each list is checked against them
        // before it is written, so that an error names the record and the message missing.
        let cited: Vec<&str> = batch
            .snapshots
            .iter()
            .flat_map(|s| &s.source_message_ids)
            .chain(batch.claims.iter().flat_map(|c| &c.source_message_ids))
            .chain(batch.ops.iter().flat_map(|op| &op.source_message_ids))
            .map(|m| m.as_str())
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        let messages = known_ids(&tx, "messages", &cited)?;
        // Snapshots first (claims point at them), then their claim lists once claims exist.
        let mut new_snapshots = Vec::new();
        for s in &batch.snapshots {
            check_ns(ns, "snapshot", &s.namespace)?;
            // Inserted when its id is free and it is its trajectory's next version, in one
            // statement; read back only when it is not.
            let inserted = tx
                .query_row(
                    "INSERT INTO snapshots (id, namespace, trajectory, version, timestamp, summary, context, keywords, generation)
                     SELECT ?1, ?2, ?3, CAST(?4 AS BIGINT), ?5, ?6, ?7, ?8, CAST(?9 AS BIGINT)
                     WHERE (SELECT coalesce(max(version), 0) + 1 FROM snapshots WHERE trajectory = ?3) = ?4
                     ON CONFLICT (id) DO NOTHING RETURNING id",
                    params![
                        s.id.as_str(),
                        ns.as_str(),
                        s.trajectory.as_str(),
                        s.version,
                        fmt_ts(&s.timestamp),
                        s.summary,
                        s.context,
                        to_json(&s.keywords),
                        generation
                    ],
                    |_| Ok(()),
                )
                .optional()
                .map_err(|source| match source {
                    rusqlite::Error::SqliteFailure(e, _) if e.code == rusqlite::ErrorCode::ConstraintViolation => {
                        StoreError::Dangling { what: format!("snapshot {}", s.id), missing: s.trajectory.to_string() }
                    }
                    source => crate::error::sql_error("inserting a snapshot", source),
                })?;
            if inserted.is_none() {
                if let Some(stored) = read_snapshot(&tx, &s.id)? {
                    if &stored != s {
                        return Err(conflict("snapshot", s.id.as_str(), &stored, s));
                    }
                    continue;
                }
                let next: u32 = tx
                    .query_row(
                        "SELECT coalesce(max(version), 0) + 1 FROM snapshots WHERE trajectory = ?1",
                        [s.trajectory.as_str()],
                        |row| row.get(0),
                    )
                    .ctx("reading a trajectory's length")?;
                return Err(StoreError::Conflict {
                    kind: "snapshot version",
                    id: s.id.to_string(),
                    fields: vec!["version".into()],
                    existing: format!("trajectory {} expects version {next}", s.trajectory),
                    incoming: format!("version {}", s.version),
                });
            }
            new_snapshots.push(s);
        }
        let sources: Vec<(&str, Vec<&str>)> = new_snapshots
            .iter()
            .map(|s| {
                (
                    s.id.as_str(),
                    s.source_message_ids.iter().map(|i| i.as_str()).collect(),
                )
            })
            .collect();
        insert_lists(
            &tx,
            "snapshot_messages (namespace, snapshot, position, message)",
            ns,
            &sources,
            |m| messages.contains(m),
        )?;
        // Claims and ops are inserted unless their id is stored, and only those not inserted
        // are read back to be compared: a few statements for any number of new records.
        for c in &batch.claims {
            check_ns(ns, "claim", &c.namespace)?;
        }
        let claims = once_each("claim", &batch.claims, |c| c.id.as_str())?;
        let cells: Vec<[Option<&str>; 4]> = claims
            .iter()
            .map(|c| {
                [
                    Some(c.id.as_str()),
                    Some(c.snapshot.as_str()),
                    Some(c.status.as_str()),
                    c.revised_from.as_ref().map(|r| r.as_str()),
                ]
            })
            .collect();
        let ns_id = ns.as_str();
        let rows: Vec<Vec<&dyn ToSql>> = claims
            .iter()
            .zip(&cells)
            .map(|(c, [id, snapshot, status, revised_from])| {
                vec![
                    id as &dyn ToSql,
                    &ns_id,
                    snapshot,
                    &c.text,
                    status,
                    &c.quote,
                    revised_from,
                    &generation,
                ]
            })
            .collect();
        let inserted = insert_rows_returning(
            &tx,
            "claims (id, namespace, snapshot, text, status, quote, revised_from, generation)",
            8,
            "ON CONFLICT (id) DO NOTHING RETURNING id",
            &rows,
            "inserting claims",
        )?;
        let mut sources = Vec::new();
        for c in &claims {
            if inserted.contains(c.id.as_str()) {
                sources.push((
                    c.id.as_str(),
                    c.source_message_ids.iter().map(|i| i.as_str()).collect(),
                ));
            } else {
                same_as_stored("claim", c.id.as_str(), read_claim(&tx, &c.id)?, *c)?;
            }
        }
        insert_lists(
            &tx,
            "claim_sources (namespace, claim, position, message)",
            ns,
            &sources,
            |m| messages.contains(m),
        )?;
        let lists: Vec<(&str, Vec<&str>)> = new_snapshots
            .iter()
            .map(|s| {
                (
                    s.id.as_str(),
                    s.claim_ids.iter().map(|i| i.as_str()).collect(),
                )
            })
            .collect();
        // A snapshot's claims are this batch's (just written) or stored ones.
        let written: HashSet<&str> = claims.iter().map(|c| c.id.as_str()).collect();
        let others: Vec<&str> = lists
            .iter()
            .flat_map(|(_, l)| l.iter().copied())
            .filter(|c| !written.contains(c))
            .collect();
        let stored = known_ids(&tx, "claims", &others)?;
        insert_lists(
            &tx,
            "snapshot_claims (namespace, snapshot, position, claim)",
            ns,
            &lists,
            |c| written.contains(c) || stored.contains(c),
        )?;
        for op in &batch.ops {
            check_ns(ns, "claim op", &op.namespace)?;
        }
        let ops = once_each("claim op", &batch.ops, |op| op.id.as_str())?;
        let fields: Vec<(i64, [Option<&str>; 6])> = ops
            .iter()
            .map(|op| {
                (
                    op.seq as i64,
                    [
                        Some(op.id.as_str()),
                        Some(op.op.as_str()),
                        op.target.as_ref().map(|c| c.as_str()),
                        op.new_claim.as_ref().map(|c| c.as_str()),
                        op.new_status.map(|s| s.as_str()),
                        Some(op.snapshot.as_str()),
                    ],
                )
            })
            .collect();
        let rows: Vec<Vec<&dyn ToSql>> = ops
            .iter()
            .zip(&fields)
            .map(
                |(op, (seq, [id, kind, target, new_claim, new_status, snapshot]))| {
                    vec![
                        id as &dyn ToSql,
                        &ns_id,
                        seq,
                        kind,
                        target,
                        new_claim,
                        new_status,
                        &op.rationale,
                        snapshot,
                    ]
                },
            )
            .collect();
        let inserted = insert_rows_returning(
            &tx,
            "claim_ops (id, namespace, seq, op, target, new_claim, new_status, rationale, snapshot)",
            9,
            "ON CONFLICT (id) DO NOTHING RETURNING id",
            &rows,
            "inserting claim ops",
        )?;
        let mut new_ops = Vec::new();
        let mut sources = Vec::new();
        for op in ops {
            if inserted.contains(op.id.as_str()) {
                new_ops.push(op);
                sources.push((
                    op.id.as_str(),
                    op.source_message_ids.iter().map(|i| i.as_str()).collect(),
                ));
            } else {
                same_as_stored("claim op", op.id.as_str(), read_op(&tx, &op.id)?, op)?;
            }
        }
        insert_lists(
            &tx,
            "op_sources (namespace, op, position, message)",
            ns,
            &sources,
            |m| messages.contains(m),
        )?;
        // Claim state is derived from the op log: the new ops are applied to it (a replay of
        // the whole log gives the same, as `check` verifies).
        apply_ops(&tx, ns, &new_ops, &batch.claims, generation)?;
        if let Some(pages) = &batch.pages {
            write_pages(&tx, ns, pages, generation)?;
        }
        if let Some(updates) = &batch.page_updates {
            upsert_pages(&tx, ns, &updates.changed, generation)?;
            let retired: Vec<&str> = updates.retired.iter().map(|id| id.as_str()).collect();
            retire_pages(&tx, &retired, generation)?;
        }
        if let Some(fold) = &batch.fold {
            write_fold(&tx, ns, fold)?;
        }
        tx.commit().ctx("committing a memory batch")
    }

    /// Writes a compilation and its insights (at most 3) in one transaction. An identical
    /// compilation already stored is a no-op.
    pub fn commit_compilation(
        &mut self,
        compilation: &Compilation,
        insights: &[Insight],
    ) -> Result<()> {
        if insights.len() > crate::error::MAX_INSIGHTS {
            return Err(StoreError::TooManyInsights {
                compilation: compilation.id.to_string(),
                count: insights.len(),
            });
        }
        // The namespace to lock is the run's (a run's records never change).
        let ns: Option<String> = self
            .conn
            .query_row(
                "SELECT namespace FROM runs WHERE id = ?1",
                [compilation.run.as_str()],
                |r| r.get(0),
            )
            .optional()
            .ctx("reading a compilation's run")?;
        let locked: Vec<&str> = ns.as_deref().into_iter().collect();
        let tx = self.write_tx("starting a compilation commit", &locked)?;
        if let Some((stored, stored_insights)) = read_compilation(&tx, &compilation.id)? {
            if &stored != compilation || stored_insights != insights {
                let with_insights = |c: &Compilation, i: &[Insight]| {
                    let mut v = serde_json::to_value(c).unwrap_or_default();
                    v["insights"] = serde_json::to_value(i).unwrap_or_default();
                    v
                };
                return Err(Differences::of_values(
                    &with_insights(&stored, &stored_insights),
                    &with_insights(compilation, insights),
                    &["id"],
                )
                .conflict("compilation", compilation.id.as_str(), None));
            }
            return Ok(());
        }
        if !exists(
            &tx,
            "SELECT 1 FROM runs WHERE id = ?1",
            compilation.run.as_str(),
        )? {
            return Err(StoreError::Dangling {
                what: format!("compilation {}", compilation.id),
                missing: compilation.run.to_string(),
            });
        }
        tx.execute(
            "INSERT INTO compilations (id, run, diagnosis, compiler) VALUES (?1, ?2, ?3, ?4)",
            params![
                compilation.id.as_str(),
                compilation.run.as_str(),
                compilation.diagnosis,
                compilation.compiler
            ],
        )
        .ctx("inserting a compilation")?;
        for (i, insight) in insights.iter().enumerate() {
            if insight.compilation != compilation.id || insight.run != compilation.run {
                return Err(StoreError::Dangling {
                    what: format!("insight {}", insight.id),
                    missing: format!("compilation {} of run {}", insight.compilation, insight.run),
                });
            }
            tx.execute(
                "INSERT INTO insights (id, compilation, run, position, guideline, applies_when) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    insight.id.as_str(),
                    insight.compilation.as_str(),
                    insight.run.as_str(),
                    i as i64,
                    insight.guideline,
                    insight.applies_when
                ],
            )
            .ctx("inserting an insight")?;
        }
        tx.commit().ctx("committing a compilation")
    }

    /// One snapshot.
    pub fn snapshot(&self, id: &SnapshotId) -> Result<Option<Snapshot>> {
        read_snapshot(&self.conn, id)
    }

    /// One claim, as created (see [`claim_status`](Store::claim_status) for its current status).
    pub fn claim(&self, id: &ClaimId) -> Result<Option<Claim>> {
        read_claim(&self.conn, id)
    }

    /// The current (derived) status of a claim.
    pub fn claim_status(&self, id: &ClaimId) -> Result<Option<ClaimStatus>> {
        read_claim_status(&self.conn, id)
    }

    /// One op.
    pub fn claim_op(&self, id: &OpId) -> Result<Option<ClaimOp>> {
        read_op(&self.conn, id)
    }

    /// A namespace's op log in seq order.
    pub fn claim_ops(&self, ns: &Namespace) -> Result<Vec<ClaimOp>> {
        read::ops(&self.conn, Scope::Namespace(ns.as_str()))
    }

    /// One trajectory, with its snapshot order.
    pub fn trajectory(&self, id: &TrajectoryId) -> Result<Option<Trajectory>> {
        read_trajectory(&self.conn, id)
    }

    /// A namespace's trajectories, sorted by id.
    pub fn trajectories(&self, ns: &Namespace) -> Result<Vec<Trajectory>> {
        read::trajectories(&self.conn, Scope::Namespace(ns.as_str()))
    }

    /// A namespace's snapshots, by trajectory and version.
    pub fn snapshots(&self, ns: &Namespace) -> Result<Vec<Snapshot>> {
        read::snapshots(&self.conn, Scope::Namespace(ns.as_str()))
    }

    /// A namespace's claims, sorted by id.
    pub fn claims(&self, ns: &Namespace) -> Result<Vec<Claim>> {
        read::claims(&self.conn, Scope::Namespace(ns.as_str()))
    }

    /// The current (derived) status of each claim of a namespace, read at once.
    pub fn claim_states(&self, ns: &Namespace) -> Result<HashMap<ClaimId, ClaimStatus>> {
        read::claim_states(&self.conn, ns)
    }

    /// A namespace's messages (in arrival order, with their row ids) and memory records, read
    /// in one transaction, so that every message a record cites is among the messages even
    /// while another process ingests and builds: what retrieval loads. The records carry the
    /// [`Cursor`] of that state, read in the same transaction (a read transaction on SQLite, a
    /// REPEATABLE READ snapshot on PostgreSQL): [`Store::namespace_changes`] after it reports
    /// exactly what later writes changed. `with_messages` runs on
    /// a thread of its own with the messages while the records are read; what it returns comes
    /// back beside them.
    pub fn namespace_read<T: Send>(
        &self,
        ns: &Namespace,
        with_messages: impl FnOnce(&[Arrived]) -> T + Send,
    ) -> Result<(Vec<Arrived>, MemoryRecords, T)> {
        let tx = self
            .conn
            .begin(Begin::Read)
            .ctx("starting a namespace read")?;
        let arrived = self.messages_after(ns, 0)?;
        let (records, prepared) = std::thread::scope(|scope| {
            let side = scope.spawn(|| with_messages(&arrived));
            let records = self.records_in(&tx, ns);
            let prepared = side
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (records, prepared)
        });
        let records = records?;
        tx.commit().ctx("ending a namespace read")?;
        Ok((arrived, records, prepared))
    }

    fn records_in(&self, tx: &Tx<'_>, ns: &Namespace) -> Result<MemoryRecords> {
        let scope = Scope::Namespace(ns.as_str());
        let cursor = cursor_in(tx, ns)?;
        let snapshots = read::snapshots(tx, scope)?;
        let claims = read::claims_with_states(tx, scope)?;
        let trajectories = read::trajectories_of(tx, ns.as_str(), &snapshots)?;
        let pages = read::pages(tx, Pages::Routing(ns.as_str()))?;
        let restatements = read::restatements(tx, scope)?;
        Ok(MemoryRecords {
            cursor,
            claims,
            trajectories,
            pages,
            snapshots,
            restatements,
        })
    }

    /// The current revision of a page (`None` when unknown or retired).
    pub fn page(&self, id: &PageId) -> Result<Option<WikiPage>> {
        let rev: Option<Option<u32>> = self
            .conn
            .query_row(
                "SELECT current_revision FROM pages WHERE id = ?1",
                [id.as_str()],
                |row| row.get(0),
            )
            .optional()
            .ctx("reading a page")?;
        match rev.flatten() {
            Some(rev) => read_page_revision(&self.conn, id, rev),
            None => Ok(None),
        }
    }

    /// A given revision of a page.
    pub fn page_revision(&self, id: &PageId, revision: u32) -> Result<Option<WikiPage>> {
        read_page_revision(&self.conn, id, revision)
    }

    /// A namespace's current pages, sorted by kind then id.
    pub fn pages(&self, ns: &Namespace) -> Result<Vec<WikiPage>> {
        read::pages(&self.conn, Pages::Current(ns.as_str()))
    }

    /// A namespace's compilations with their insights, by run id then compiler.
    pub fn compilations(&self, ns: &Namespace) -> Result<Vec<(Compilation, Vec<Insight>)>> {
        list(
            &self.conn,
            "SELECT c.id FROM compilations c JOIN runs r ON r.id = c.run WHERE r.namespace = ?1 ORDER BY c.run, c.compiler",
            ns,
            "compilations",
            CompilationId::parse,
            read_compilation,
        )
    }

    /// One compilation with its insights.
    pub fn compilation(&self, id: &CompilationId) -> Result<Option<(Compilation, Vec<Insight>)>> {
        read_compilation(&self.conn, id)
    }

    /// One insight.
    pub fn insight(&self, id: &InsightId) -> Result<Option<Insight>> {
        let row = self
            .conn
            .query_row(
                "SELECT compilation, run, guideline, applies_when FROM insights WHERE id = ?1",
                [id.as_str()],
                |row| {
                    Ok((
                        row.get::<String>(0)?,
                        row.get::<String>(1)?,
                        row.get(2)?,
                        row.get(3)?,
                    ))
                },
            )
            .optional()
            .ctx("reading an insight")?;
        row.map(|(compilation, run, guideline, applies_when)| {
            Ok(Insight {
                id: id.clone(),
                compilation: parse_stored(
                    CompilationId::parse(&compilation),
                    "insights",
                    "compilation",
                    id.as_str(),
                )?,
                run: parse_stored(RunId::parse(&run), "insights", "run", id.as_str())?,
                guideline,
                applies_when,
            })
        })
        .transpose()
    }
}

fn ids(conn: &Db, sql: &str, arg: &str) -> Result<Vec<String>> {
    let mut stmt = conn.prepare_cached(sql).ctx("listing ids")?;
    let rows = stmt
        .query_map([arg], |row| row.get::<String>(0))
        .ctx("listing ids")?
        .collect::<rusqlite::Result<Vec<_>>>()
        .ctx("listing ids")?;
    Ok(rows)
}

/// Reads the records whose ids `sql` lists for a namespace; a record that vanished between the
/// listing and the read (another process deleted its namespace) is left out.
fn list<I, T>(
    conn: &Db,
    sql: &str,
    ns: &Namespace,
    table: &'static str,
    parse: impl Fn(&str) -> std::result::Result<I, trajwiki_core::IdError>,
    read: impl Fn(&Db, &I) -> Result<Option<T>>,
) -> Result<Vec<T>> {
    let mut out = Vec::new();
    for id in ids(conn, sql, ns.as_str())? {
        let id = parse_stored(parse(&id), table, "id", &id)?;
        out.extend(read(conn, &id)?);
    }
    Ok(out)
}

/// The current (derived) status of a claim, from `claim_state`.
fn read_claim_status(conn: &Db, id: &ClaimId) -> Result<Option<ClaimStatus>> {
    read_status(
        conn,
        "SELECT status FROM claim_state
         WHERE namespace = (SELECT namespace FROM claims WHERE id = ?1) AND claim = ?1",
        "claim_state",
        id,
    )
}

/// The status claim `id` was created with (its `claims` row), if it is stored.
fn read_claim_initial_status(conn: &Db, id: &ClaimId) -> Result<Option<ClaimStatus>> {
    read_status(
        conn,
        "SELECT status FROM claims WHERE id = ?1",
        "claims",
        id,
    )
}

/// The status `sql` reads for claim `id` from `table`, if there is a row.
fn read_status(
    conn: &Db,
    sql: &str,
    table: &'static str,
    id: &ClaimId,
) -> Result<Option<ClaimStatus>> {
    let status: Option<String> = conn
        .query_row(sql, [id.as_str()], |row| row.get(0))
        .optional()
        .ctx("reading a claim's status")?;
    status
        .map(|s| {
            parse_stored(
                ClaimStatus::parse(&s).ok_or("unknown status"),
                table,
                "status",
                id.as_str(),
            )
        })
        .transpose()
}

/// Applies new ops, in seq order, to the stored claim state: the statuses of the claims they
/// target are read, the replay continued over them ([`trajwiki_core::apply_ops`], the one
/// definition of claim state), and what it gives written back.
fn apply_ops(
    tx: &Tx<'_>,
    ns: &Namespace,
    ops: &[&ClaimOp],
    claims: &[Claim],
    generation: i64,
) -> Result<()> {
    // The statuses new claims were created with: from the batch's claims where they are, else
    // from the store.
    let in_batch: HashMap<&ClaimId, ClaimStatus> =
        claims.iter().map(|c| (&c.id, c.status)).collect();
    let mut state = BTreeMap::new();
    let mut initial = BTreeMap::new();
    for op in ops {
        if let Some(target) = &op.target {
            if let Some(status) = read_claim_status(tx, target)? {
                state.entry(target.clone()).or_insert(status);
            }
        }
        if let Some(new) = &op.new_claim {
            let status = match in_batch.get(new) {
                Some(status) => Some(*status),
                None => read_claim_initial_status(tx, new)?,
            };
            if let Some(status) = status {
                initial.insert(new.clone(), status);
            }
        }
    }
    trajwiki_core::apply_ops(&mut state, ops.iter().copied(), |id| {
        initial.get(id).copied()
    })
    .map_err(|e| StoreError::Corrupt {
        table: "claim_ops",
        column: "op",
        id: ns.to_string(),
        reason: e.to_string(),
    })?;
    let mut stmt = tx
        .prepare_cached(
            "INSERT INTO claim_state (namespace, claim, status, generation) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (namespace, claim) DO UPDATE
             SET status = excluded.status, generation = excluded.generation
             WHERE claim_state.status <> excluded.status",
        )
        .ctx("writing claim state")?;
    for (claim, status) in &state {
        stmt.execute(params![
            ns.as_str(),
            claim.as_str(),
            status.as_str(),
            generation
        ])
        .ctx("writing claim state")?;
    }
    Ok(())
}

pub(crate) fn replayed_state(conn: &Db, ns: &Namespace) -> Result<BTreeMap<ClaimId, ClaimStatus>> {
    let ops = read::ops(conn, Scope::Namespace(ns.as_str()))?;
    let initial: HashMap<ClaimId, ClaimStatus> = read::claims(conn, Scope::Namespace(ns.as_str()))?
        .into_iter()
        .map(|c| (c.id, c.status))
        .collect();
    replay_ops(&ops, |id| initial.get(id).copied()).map_err(|e| StoreError::Corrupt {
        table: "claim_ops",
        column: "op",
        id: ns.to_string(),
        reason: e.to_string(),
    })
}

pub(crate) fn read_snapshot(conn: &Db, id: &SnapshotId) -> Result<Option<Snapshot>> {
    Ok(read::snapshots(conn, Scope::Id(id.as_str()))?.pop())
}

pub(crate) fn read_claim(conn: &Db, id: &ClaimId) -> Result<Option<Claim>> {
    Ok(read::claims(conn, Scope::Id(id.as_str()))?.pop())
}

pub(crate) fn read_op(conn: &Db, id: &OpId) -> Result<Option<ClaimOp>> {
    Ok(read::ops(conn, Scope::Id(id.as_str()))?.pop())
}

pub(crate) fn read_trajectory(conn: &Db, id: &TrajectoryId) -> Result<Option<Trajectory>> {
    Ok(read::trajectories(conn, Scope::Id(id.as_str()))?.pop())
}

fn read_page_revision(conn: &Db, id: &PageId, revision: u32) -> Result<Option<WikiPage>> {
    Ok(read::pages(conn, Pages::Revision(id.as_str(), revision))?.pop())
}

fn write_pages(tx: &Tx<'_>, ns: &Namespace, pages: &[WikiPage], generation: i64) -> Result<()> {
    upsert_pages(tx, ns, pages, generation)?;
    let keep: std::collections::BTreeSet<&str> = pages.iter().map(|p| p.id.as_str()).collect();
    let current = ids(
        tx,
        "SELECT id FROM pages WHERE namespace = ?1 AND current_revision IS NOT NULL",
        ns.as_str(),
    )?;
    let retired: Vec<&str> = current
        .iter()
        .map(String::as_str)
        .filter(|id| !keep.contains(id))
        .collect();
    retire_pages(tx, &retired, generation)
}

fn read_compilation(conn: &Db, id: &CompilationId) -> Result<Option<(Compilation, Vec<Insight>)>> {
    let row = conn
        .query_row(
            "SELECT run, diagnosis, compiler FROM compilations WHERE id = ?1",
            [id.as_str()],
            |row| row.tuple::<(String, String, String)>(),
        )
        .optional()
        .ctx("reading a compilation")?;
    let Some((run, diagnosis, compiler)) = row else {
        return Ok(None);
    };
    let cid = id.as_str();
    let run = parse_stored(RunId::parse(&run), "compilations", "run", cid)?;
    let mut stmt = conn
        .prepare_cached("SELECT id, guideline, applies_when FROM insights WHERE compilation = ?1 ORDER BY position")
        .ctx("reading insights")?;
    let rows = stmt
        .query_map([cid], |row| row.tuple::<(String, String, String)>())
        .ctx("reading insights")?
        .collect::<rusqlite::Result<Vec<_>>>()
        .ctx("reading insights")?;
    let insights = rows
        .into_iter()
        .map(|(iid, guideline, applies_when)| {
            Ok(Insight {
                id: parse_stored(InsightId::parse(&iid), "insights", "id", &iid)?,
                compilation: id.clone(),
                run: run.clone(),
                guideline,
                applies_when,
            })
        })
        .collect::<Result<_>>()?;
    Ok(Some((
        Compilation {
            id: id.clone(),
            run,
            diagnosis,
            compiler,
        },
        insights,
    )))
}
