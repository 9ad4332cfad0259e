//! What changed in a namespace since a reader's state (schema version 7): a [`Cursor`] names the
//! state a namespace read saw, [`Store::namespace_changes`] reads what was written after it, and
//! [`MemoryRecords::apply`] merges that into the records read at the cursor.
//!
//! Every write that changes a namespace's memory records draws the next generation of a
//! store-wide clock, never reused (SQLite: a one-row table, written by the one writer; PostgreSQL:
//! a sequence, drawn by a writer holding its namespace's advisory lock, so that one namespace's
//! generations increase in commit order), stamps it on the rows it inserts or changes and records
//! it as the namespace's generation. A write that replaces the namespace's memory (a rebuild, a
//! clear) or creates the namespace records it as its reset too. Messages need no stamp: their
//! ingest position (`rowid`) already increases in commit order within a namespace.

use std::cmp::Ordering;

use crate::db::{Begin, Db, Tx};
use crate::error::{Result, SqlContext, StoreError};
use crate::fold::Arrived;
use crate::memory::MemoryRecords;
use crate::read::{self, Pages, Scope};
use crate::Store;
use trajwiki_core::{ClaimId, Namespace, PageId};

/// The state of a namespace a read saw: the generation of the last write of its memory records
/// and the ingest position of its last message. Read in the same transaction as the records it
/// goes with (a read transaction on SQLite, a REPEATABLE READ snapshot on PostgreSQL), so that
/// no write falls between them: everything a later [`Store::namespace_changes`] reports was
/// written after the records were read, and everything written after is reported.
///
/// The default cursor is that of a reader that holds nothing: changes since it of an existing
/// namespace say [`reload`](NamespaceDelta::reload).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Cursor {
    generation: i64,
    last_message: i64,
}

impl Cursor {
    /// The generation of the namespace's last memory write seen (0: none).
    pub fn generation(&self) -> i64 {
        self.generation
    }

    /// The ingest position of the namespace's last message seen (0: none).
    pub fn last_message(&self) -> i64 {
        self.last_message
    }

    /// The cursor of [`generation`](Self::generation) and
    /// [`last_message`](Self::last_message): a cursor stored with what was read at it (an index
    /// segment) and read back.
    pub fn from_parts(generation: i64, last_message: i64) -> Self {
        Cursor {
            generation,
            last_message,
        }
    }
}

/// What changed in a namespace after a cursor ([`Store::namespace_changes`]), read with the same
/// code and in the same orders as [`Store::namespace_read`], so that
/// [`MemoryRecords::apply`] of it to the records read at `since` gives, record for record, what a
/// namespace read at `cursor` gives.
#[derive(Debug, Clone, Default)]
pub struct NamespaceDelta {
    /// The cursor the changes are counted from.
    pub since: Cursor,
    /// The cursor after them: the namespace's state when they were read.
    pub cursor: Cursor,
    /// The namespace's memory was replaced (a rebuild, a clear) or the namespace deleted or
    /// created after `since`: the changes cannot be applied, the caller reads the namespace
    /// again. The lists are then empty.
    pub reload: bool,
    /// Messages ingested after `since`, in arrival order.
    pub messages: Vec<Arrived>,
    /// The records written after `since`: snapshots new, claims new or with a changed status
    /// (each with its current status), trajectories new or changed (a new summary or signals, a
    /// new snapshot), pages with a new current revision; each list in the namespace read's order.
    /// `records.cursor` is `cursor`.
    pub records: MemoryRecords,
    /// Pages retired after `since`, by id.
    pub retired_pages: Vec<PageId>,
}

impl NamespaceDelta {
    /// Whether nothing changed after `since`.
    pub fn is_empty(&self) -> bool {
        !self.reload && self.since == self.cursor
    }
}

impl MemoryRecords {
    /// Merges `delta` into records read at `delta.since`: each changed record replaces the one
    /// of its id or is inserted where the namespace read puts it, retired pages are removed, and
    /// the cursor becomes `delta.cursor`. The held records may be in any order (an index keeps
    /// them in its own, [`crate::MemoryRecords`] as the store reads them): they are put in the
    /// store's order first, which costs a pass when they are in it already. Linear in the
    /// records held and the changes otherwise.
    ///
    /// [`StoreError::Reload`] when the delta says the namespace is to be read again or was not
    /// counted from these records' cursor; the records are then unchanged.
    pub fn apply(&mut self, delta: &NamespaceDelta) -> Result<()> {
        if delta.reload || delta.since != self.cursor {
            return Err(StoreError::Reload {
                held: format!("{:?}", self.cursor),
                reason: if delta.reload {
                    "the namespace was rebuilt, cleared, deleted or created after it".into()
                } else {
                    format!("the changes are counted from {:?}", delta.since)
                },
            });
        }
        let changes = &delta.records;
        merge(&mut self.snapshots, &changes.snapshots, |a, b| {
            (&a.trajectory, a.version).cmp(&(&b.trajectory, b.version))
        });
        merge(&mut self.claims, &changes.claims, |a, b| {
            a.0.id.cmp(&b.0.id)
        });
        // A changed claim's restatements are all in the change (none, if it holds).
        if !changes.claims.is_empty() {
            let changed: std::collections::HashSet<&ClaimId> =
                changes.claims.iter().map(|(c, _)| &c.id).collect();
            self.restatements.retain(|(c, _)| !changed.contains(c));
            self.restatements
                .extend(changes.restatements.iter().cloned());
            self.restatements.sort_by(|a, b| a.0.cmp(&b.0));
        }
        merge(&mut self.trajectories, &changes.trajectories, |a, b| {
            a.id.cmp(&b.id)
        });
        if !delta.retired_pages.is_empty() {
            let retired: std::collections::HashSet<&PageId> = delta.retired_pages.iter().collect();
            self.pages.retain(|p| !retired.contains(&p.id));
        }
        merge(&mut self.pages, &changes.pages, |a, b| {
            (a.kind.as_str(), &a.id).cmp(&(b.kind.as_str(), &b.id))
        });
        self.cursor = delta.cursor;
        Ok(())
    }
}

/// Merges `changes` (sorted by `order`, a total order on the records' ids) into `held` (in
/// any order; sorted by `order` first): a change equal to a held record replaces it, the others
/// are inserted in order. Merging into records in another order would keep both the old record
/// and its change, one id twice.
fn merge<T: Clone>(held: &mut Vec<T>, changes: &[T], order: impl Fn(&T, &T) -> Ordering) {
    if changes.is_empty() {
        return;
    }
    held.sort_by(&order);
    let old = std::mem::take(held);
    held.reserve(old.len() + changes.len());
    let mut old = old.into_iter().peekable();
    for change in changes {
        while let Some(h) = old.next_if(|h| order(h, change) == Ordering::Less) {
            held.push(h);
        }
        if old
            .peek()
            .is_some_and(|h| order(h, change) == Ordering::Equal)
        {
            old.next();
        }
        held.push(change.clone());
    }
    held.extend(old);
}

/// A namespace's generation row: (generation, reset), `None` where it has none (it does not
/// exist), and the ingest position of its last message; one statement, so one state of the store.
fn state_of(conn: &Db, ns: &Namespace) -> Result<(Option<(i64, i64)>, i64)> {
    let (generation, reset, last): (Option<i64>, Option<i64>, Option<i64>) = conn
        .query_row(
            "SELECT (SELECT generation FROM namespace_generations WHERE namespace = ?1),
                    (SELECT reset FROM namespace_generations WHERE namespace = ?1),
                    (SELECT max(rowid) FROM messages WHERE namespace = ?1)",
            [ns.as_str()],
            |r| r.tuple(),
        )
        .ctx("reading a namespace's generation")?;
    Ok((generation.zip(reset), last.unwrap_or(0)))
}

/// The cursor of a namespace's state as `conn` sees it now.
pub(crate) fn cursor_in(conn: &Db, ns: &Namespace) -> Result<Cursor> {
    let (row, last_message) = state_of(conn, ns)?;
    Ok(Cursor {
        generation: row.map_or(0, |(g, _)| g),
        last_message,
    })
}

/// Draws the next generation for a write to `ns` inside `tx`, records it as the namespace's
/// (and as its reset when `reset`: the write replaces its memory or creates it) and returns it,
/// for the write to stamp on the rows it inserts or changes.
pub(crate) fn advance(tx: &Tx<'_>, ns: &Namespace, reset: bool) -> Result<i64> {
    let keep_reset = if reset {
        ", reset = excluded.reset"
    } else {
        ""
    };
    if tx.is_postgres() {
        // Drawn and recorded in one round trip.
        return tx
            .query_row(
                &format!(
                    "INSERT INTO namespace_generations (namespace, generation, reset)
                     SELECT ?1, g, g FROM nextval('generation_clock') AS g
                     ON CONFLICT (namespace) DO UPDATE SET generation = excluded.generation{keep_reset}
                     RETURNING generation"
                ),
                [ns.as_str()],
                |r| r.get(0),
            )
            .ctx("drawing a generation");
    }
    let generation: i64 = tx
        .query_row(
            "UPDATE generation_clock SET generation = generation + 1 WHERE id = 1 RETURNING generation",
            (),
            |r| r.get(0),
        )
        .ctx("drawing a generation")?;
    tx.execute(
        &format!(
            "INSERT INTO namespace_generations (namespace, generation, reset) VALUES (?1, ?2, ?2)
             ON CONFLICT (namespace) DO UPDATE SET generation = excluded.generation{keep_reset}"
        ),
        rusqlite::params![ns.as_str(), generation],
    )
    .ctx("recording a namespace's generation")?;
    Ok(generation)
}

impl Store {
    /// The [`Cursor`] of `ns` now: one statement. [`Store::namespace_read`] returns the cursor
    /// of its records with them (`MemoryRecords::cursor`); this one is for a caller that only
    /// asks whether anything changed.
    pub fn cursor(&self, ns: &Namespace) -> Result<Cursor> {
        cursor_in(&self.conn, ns)
    }

    /// Whether changes of `ns` since `since` would say [`reload`](NamespaceDelta::reload) (the
    /// namespace was rebuilt, cleared, deleted or made again after it): one statement, without
    /// reading the changes.
    pub fn replaced_since(&self, ns: &Namespace, since: &Cursor) -> Result<bool> {
        let (row, last_message) = state_of(&self.conn, ns)?;
        let generation = row.map_or(0, |(g, _)| g);
        Ok(match row {
            None => *since != Cursor::default(),
            Some((_, reset)) => reset > since.generation,
        } || generation < since.generation
            || last_message < since.last_message)
    }

    /// Everything that changed in `ns` after `since` (a cursor of an earlier read of this store):
    /// new messages, new snapshots, claims new or with a changed status, trajectories new or
    /// changed, pages with a new current revision, pages retired — or
    /// [`reload`](NamespaceDelta::reload) when the namespace's memory was replaced, or it was
    /// deleted or created, after `since`. Read in one transaction (a REPEATABLE READ snapshot on
    /// PostgreSQL) with its cursor. The work is proportional to the changes: every list is read
    /// by the (namespace, generation) indexes and the id keys, not by scanning the namespace.
    pub fn namespace_changes(&self, ns: &Namespace, since: &Cursor) -> Result<NamespaceDelta> {
        let tx = self
            .conn
            .begin(Begin::Read)
            .ctx("starting a read of changes")?;
        let (row, last_message) = state_of(&tx, ns)?;
        let cursor = Cursor {
            generation: row.map_or(0, |(g, _)| g),
            last_message,
        };
        let reload = match row {
            // Deleted (or never created): a reader that held any of it reloads.
            None => *since != Cursor::default(),
            Some((_, reset)) => reset > since.generation,
        } || cursor.generation < since.generation
            || cursor.last_message < since.last_message;
        let mut delta = NamespaceDelta {
            since: *since,
            cursor,
            reload,
            records: MemoryRecords {
                cursor,
                ..MemoryRecords::default()
            },
            ..NamespaceDelta::default()
        };
        if reload || cursor == *since {
            tx.commit().ctx("ending a read of changes")?;
            return Ok(delta);
        }
        if cursor.last_message > since.last_message {
            delta.messages = self.messages_after(ns, since.last_message)?;
        }
        if cursor.generation > since.generation {
            let changed = Scope::Changed(ns.as_str(), since.generation);
            let records = &mut delta.records;
            records.snapshots = read::snapshots(&tx, changed)?;
            records.claims = read::claims_with_states(&tx, changed)?;
            records.restatements = read::restatements(&tx, changed)?;
            records.trajectories = read::trajectories(&tx, changed)?;
            records.pages = read::pages(&tx, Pages::ChangedRouting(ns.as_str(), since.generation))?;
            delta.retired_pages = read::retired_pages(&tx, ns.as_str(), since.generation)?;
        }
        tx.commit().ctx("ending a read of changes")?;
        Ok(delta)
    }
}

#[cfg(test)]
mod tests {
    use super::merge;
    use crate::db::recorded;
    use crate::{MemoryBatch, Store, DB_FILE};
    use trajwiki_core::{Namespace, SourceMessage};

    /// Every statement a read of changes runs finds its rows through an index (the (namespace,
    /// generation) ones, the id keys, the namespace-first list keys): none scans a table or an
    /// index whole, so the read costs what changed, not what the namespace holds. What SQLite's
    /// planner says of each (`EXPLAIN QUERY PLAN`), printed with `--nocapture`.
    #[test]
    fn changes_are_read_through_indexes() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        let ns = Namespace::new("plan").unwrap();
        let ts = chrono::NaiveDate::from_ymd_opt(2023, 5, 8)
            .unwrap()
            .and_hms_opt(13, 56, 0)
            .unwrap();
        let msg = |seq: u32| {
            SourceMessage::new(
                ns.clone(),
                1,
                seq,
                "Ann".into(),
                "Hi".into(),
                ts,
                vec![],
                None,
            )
        };
        store.ingest_messages("t", &[msg(1)]).unwrap();
        let since = store.cursor(&ns).unwrap();
        store.ingest_messages("t", &[msg(2)]).unwrap();
        store
            .commit_memory(&MemoryBatch {
                namespace: ns.clone(),
                trajectories: vec![],
                snapshots: vec![],
                claims: vec![],
                ops: vec![],
                pages: None,
                page_updates: None,
                replace: false,
                fold: None,
            })
            .unwrap();
        let (delta, statements) = recorded::during(|| store.namespace_changes(&ns, &since));
        let delta = delta.unwrap();
        assert!(!delta.reload && delta.messages.len() == 1);
        let conn = rusqlite::Connection::open(dir.path().join(DB_FILE)).unwrap();
        let mut scans = Vec::new();
        // The generation lookups, the messages, and at least one statement per record kind.
        assert!(statements.len() >= 10, "{statements:#?}");
        for sql in &statements {
            let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            // `?1` is the namespace, any other parameter a generation or a position.
            let params: Vec<rusqlite::types::Value> = (0..stmt.parameter_count())
                .map(|i| match i {
                    0 => rusqlite::types::Value::Text(ns.to_string()),
                    _ => rusqlite::types::Value::Integer(since.generation()),
                })
                .collect();
            let plan: Vec<String> = stmt
                .query_map(rusqlite::params_from_iter(params), |r| {
                    r.get::<_, String>(3)
                })
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap();
            println!(
                "{}\n  {}",
                sql.split_whitespace().collect::<Vec<_>>().join(" "),
                plan.join("\n  ")
            );
            // A whole scan, or a search of a namespace's every row — but for its generation row
            // (its key) and the last message's position (`max(rowid)`: one step to the end of
            // the namespace's range of the arrival index).
            let max_rowid = sql.contains("max(rowid) FROM messages");
            scans.extend(plan.into_iter().filter(|line| {
                let namespace_wide = line.ends_with("(namespace=?)")
                    && !line.starts_with("SEARCH namespace_generations ")
                    && !(max_rowid && line.starts_with("SEARCH messages "));
                (line.starts_with("SCAN ") && line != "SCAN CONSTANT ROW") || namespace_wide
            }));
        }
        assert!(scans.is_empty(), "whole scans: {scans:?}");
    }

    #[test]
    fn merge_replaces_equal_and_inserts_in_order() {
        let order = |a: &(u32, char), b: &(u32, char)| a.0.cmp(&b.0);
        let mut held = vec![(1, 'a'), (3, 'a'), (5, 'a')];
        merge(&mut held, &[(0, 'b'), (3, 'b'), (4, 'b'), (9, 'b')], order);
        assert_eq!(
            held,
            vec![(0, 'b'), (1, 'a'), (3, 'b'), (4, 'b'), (5, 'a'), (9, 'b')]
        );
        merge(&mut held, &[], order);
        assert_eq!(held.len(), 6);
        let mut empty = Vec::new();
        merge(&mut empty, &[(2, 'c')], order);
        assert_eq!(empty, vec![(2, 'c')]);
    }

    /// Records held in another order than the store's (an index's: snapshots by their last
    /// message, trajectories by their first snapshot) take their changes in place of the old
    /// records, never beside them (issue 49: a trajectory held twice after a backfill).
    #[test]
    fn merge_into_records_in_another_order_keeps_each_id_once() {
        let order = |a: &(u32, char), b: &(u32, char)| a.0.cmp(&b.0);
        let mut held = vec![(5, 'a'), (1, 'a'), (3, 'a')];
        merge(&mut held, &[(1, 'b'), (4, 'b'), (5, 'b')], order);
        assert_eq!(held, vec![(1, 'b'), (3, 'a'), (4, 'b'), (5, 'b')]);
    }
}
