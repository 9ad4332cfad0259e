//! The construction fold's persisted state (schema version 2): what a namespace's memory was
//! built with, where the fold stands in the namespace's messages, and the fold's own state as
//! opaque blobs (a header and one per trajectory). Derived state: replaced by a rebuild, removed
//! with the namespace's memory.

use std::collections::BTreeMap;

use rusqlite::{params, OptionalExtension, ToSql};

use crate::db::{insert_rows, Begin, Tx};
use trajwiki_core::{MessageId, Namespace, SourceMessage};

use crate::error::{Result, SqlContext, StoreError};
use crate::raw::{decode_message, message_row_at, MESSAGE_SELECT};
use crate::{from_json, to_json, Store};

/// What a namespace's memory was built with and where its construction fold stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoldRecord {
    /// The embedding model's fingerprint.
    pub model_id: String,
    /// The memory configuration, as JSON.
    pub config: String,
    /// Ingest position (`messages.rowid`) of the last message the fold consumed.
    pub cursor: i64,
    /// Messages of the exchange still open, in arrival order: consumed but not built.
    pub pending: Vec<MessageId>,
    /// The fold's header state.
    pub header: Vec<u8>,
}

/// The fold state a memory commit writes: its record and the trajectories it changed.
#[derive(Debug, Clone)]
pub struct FoldWrite {
    /// The position (cursor, pending) of the record the build started from (`None`: there was
    /// none). The commit is refused with [`StoreError::Moved`] when the stored record is no
    /// longer there: another process built the namespace meanwhile, and this build is to be done
    /// again from where that one left it.
    pub from: Option<(i64, Vec<MessageId>)>,
    /// The record (replaced whole).
    pub record: FoldRecord,
    /// (position, state) of every trajectory changed or added.
    pub trajectories: Vec<(usize, Vec<u8>)>,
    /// (key, state) of every wiki group changed or added.
    pub groups: Vec<(String, Vec<u8>)>,
}

/// A message with its ingest position.
pub type Arrived = (i64, SourceMessage);

/// What a namespace's retrieval index is made from, as a value that changes whenever a message
/// of the namespace arrives, a build of it commits, or it is deleted or cleared (see
/// [`Store::index_state`]). Equal states: the same index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexState {
    last_message: Option<i64>,
    build: Option<String>,
}

impl IndexState {
    /// Whether the namespace holds messages.
    pub fn has_messages(&self) -> bool {
        self.last_message.is_some()
    }
}

impl Store {
    /// The [`IndexState`] of `ns`: the ingest position of its last message and its build record
    /// (fold cursor, open exchange, model, settings). One indexed lookup in each table, whatever
    /// the history, so that a long-lived reader can tell per namespace whether a kept index is
    /// still current, instead of dropping every namespace's on any commit.
    pub fn index_state(&self, ns: &Namespace) -> Result<IndexState> {
        self.conn
            .query_row(
                "SELECT (SELECT max(rowid) FROM messages WHERE namespace = ?1),
                        (SELECT cursor || ' ' || pending || ' ' || model_id || ' ' || config
                         FROM memory_builds WHERE namespace = ?1)",
                [ns.as_str()],
                |r| {
                    Ok(IndexState {
                        last_message: r.get(0)?,
                        build: r.get(1)?,
                    })
                },
            )
            .ctx("reading a namespace's index state")
    }

    /// Runs `read` in one read transaction (a REPEATABLE READ snapshot on PostgreSQL): every
    /// read it makes sees the store as one moment left it. A build reads its fold's record,
    /// trajectory states and wiki groups this way, so that a build another process commits
    /// meanwhile is seen whole or not at all, never half (a record of one build with the
    /// groups of the next). `read` must not write.
    pub fn reading<T, E: From<StoreError>>(
        &self,
        read: impl FnOnce(&Store) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        let tx = self
            .conn
            .begin(Begin::Read)
            .ctx("starting a read")
            .map_err(E::from)?;
        let value = read(self)?;
        tx.commit().ctx("ending a read").map_err(E::from)?;
        Ok(value)
    }

    /// The fold record of a namespace, if its memory was built by a fold.
    pub fn fold_record(&self, ns: &Namespace) -> Result<Option<FoldRecord>> {
        let row = self
            .conn
            .query_row(
                "SELECT model_id, config, cursor, pending, header FROM memory_builds WHERE namespace = ?1",
                [ns.as_str()],
                |r| {
                    Ok((
                        r.get::<String>(0)?,
                        r.get::<String>(1)?,
                        r.get::<i64>(2)?,
                        r.get::<String>(3)?,
                        r.get::<Vec<u8>>(4)?,
                    ))
                },
            )
            .optional()
            .ctx("reading a fold record")?;
        let Some((model_id, config, cursor, pending, header)) = row else {
            return Ok(None);
        };
        let pending: Vec<String> = from_json(&pending, "memory_builds", "pending", ns.as_str())?;
        let pending = pending
            .into_iter()
            .map(|id| {
                MessageId::parse(&id).map_err(|e| StoreError::Corrupt {
                    table: "memory_builds",
                    column: "pending",
                    id: ns.to_string(),
                    reason: e.to_string(),
                })
            })
            .collect::<Result<_>>()?;
        Ok(Some(FoldRecord {
            model_id,
            config,
            cursor,
            pending,
            header,
        }))
    }

    /// The model and configuration (JSON) a namespace's memory was built with, without the
    /// fold's state (what a query needs).
    pub fn built_with(&self, ns: &Namespace) -> Result<Option<(String, String)>> {
        self.conn
            .query_row(
                "SELECT model_id, config FROM memory_builds WHERE namespace = ?1",
                [ns.as_str()],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .ctx("reading what a memory was built with")
    }

    /// The fold's trajectory states of a namespace, by position.
    pub fn fold_trajectories(&self, ns: &Namespace) -> Result<Vec<Vec<u8>>> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT position, state FROM fold_trajectories WHERE namespace = ?1 ORDER BY position",
            )
            .ctx("reading fold trajectories")?;
        let rows = stmt
            .query_map([ns.as_str()], |r| {
                Ok((r.get::<i64>(0)?, r.get::<Vec<u8>>(1)?))
            })
            .ctx("reading fold trajectories")?;
        let mut out = Vec::new();
        for row in rows {
            let (position, state) = row.ctx("reading fold trajectories")?;
            if position != out.len() as i64 {
                return Err(StoreError::Corrupt {
                    table: "fold_trajectories",
                    column: "position",
                    id: ns.to_string(),
                    reason: format!("expected position {}, found {position}", out.len()),
                });
            }
            out.push(state);
        }
        Ok(out)
    }

    /// The fold's wiki groups of a namespace: (key, state), by key.
    pub fn fold_groups(&self, ns: &Namespace) -> Result<Vec<(String, Vec<u8>)>> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT key, state FROM fold_groups WHERE namespace = ?1 ORDER BY key")
            .ctx("reading fold groups")?;
        let rows = stmt
            .query_map([ns.as_str()], |r| Ok((r.get(0)?, r.get(1)?)))
            .ctx("reading fold groups")?
            .collect::<rusqlite::Result<Vec<_>>>()
            .ctx("reading fold groups")?;
        Ok(rows)
    }

    /// A namespace's messages ingested after position `cursor`, in arrival order.
    pub fn messages_after(&self, ns: &Namespace, cursor: i64) -> Result<Vec<Arrived>> {
        let mut stmt = self
            .conn
            .prepare_cached(&format!(
                "{} WHERE namespace = ?1 AND rowid > ?2 ORDER BY rowid",
                MESSAGE_SELECT.replacen("SELECT ", "SELECT rowid, ", 1)
            ))
            .ctx("listing new messages")?;
        let rows = stmt
            .query_map(params![ns.as_str(), cursor], |r| {
                let rowid: i64 = r.get(0)?;
                Ok((rowid, message_row_at(r, 1)?))
            })
            .ctx("listing new messages")?
            .collect::<rusqlite::Result<Vec<_>>>()
            .ctx("listing new messages")?;
        rows.into_iter()
            .map(|(rowid, row)| Ok((rowid, decode_message(row)?)))
            .collect()
    }

    /// Whether a namespace holds derived memory (a snapshot).
    pub fn has_memory(&self, ns: &Namespace) -> Result<bool> {
        self.conn
            .query_row(
                "SELECT 1 FROM snapshots WHERE namespace = ?1 LIMIT 1",
                [ns.as_str()],
                |_| Ok(()),
            )
            .optional()
            .map(|r| r.is_some())
            .ctx("looking for a namespace's memory")
    }

    /// How many of a namespace's messages are in no snapshot yet (ingested, not built).
    pub fn unbuilt_messages(&self, ns: &Namespace) -> Result<usize> {
        self.conn
            .query_row(
                "SELECT count(*) FROM messages m WHERE m.namespace = ?1
                 AND NOT EXISTS (SELECT 1 FROM snapshot_messages s WHERE s.message = m.id)",
                [ns.as_str()],
                |r| r.get::<i64>(0),
            )
            .map(|n| n as usize)
            .ctx("counting unbuilt messages")
    }
}

/// The first thing a memory commit does, in one statement: [`StoreError::Dangling`] unless the
/// namespace is stored, and [`StoreError::Moved`] unless its fold record is still where `fold`
/// (when given) started from.
pub(crate) fn check_from(tx: &Tx<'_>, ns: &Namespace, fold: Option<&FoldWrite>) -> Result<()> {
    let found: Option<(Option<i64>, Option<String>)> = tx
        .query_row(
            "SELECT b.cursor, b.pending FROM namespaces n
             LEFT JOIN memory_builds b ON b.namespace = n.id WHERE n.id = ?1",
            [ns.as_str()],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()
        .ctx("reading a fold record")?;
    let Some((cursor, pending)) = found else {
        return Err(StoreError::Dangling {
            what: "memory batch".into(),
            missing: format!("namespace {ns}"),
        });
    };
    let Some(fold) = fold else {
        return Ok(());
    };
    let stored = cursor.zip(pending);
    let from = fold.from.as_ref().map(|(cursor, pending)| {
        let pending: Vec<&str> = pending.iter().map(|m| m.as_str()).collect();
        (*cursor, to_json(&pending))
    });
    if stored != from {
        return Err(StoreError::Moved {
            namespace: ns.to_string(),
        });
    }
    Ok(())
}

/// Writes a fold's record and changed trajectories inside a memory commit.
pub(crate) fn write_fold(tx: &Tx<'_>, ns: &Namespace, fold: &FoldWrite) -> Result<()> {
    let r = &fold.record;
    let pending: Vec<&str> = r.pending.iter().map(|m| m.as_str()).collect();
    tx.execute(
        "INSERT INTO memory_builds (namespace, model_id, config, cursor, pending, header)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (namespace) DO UPDATE SET model_id = excluded.model_id, config = excluded.config,
           cursor = excluded.cursor, pending = excluded.pending, header = excluded.header",
        params![ns.as_str(), r.model_id, r.config, r.cursor, to_json(&pending), r.header],
    )
    .ctx("writing a fold record")?;
    // One row a key (the last state given wins, as when they were written one by one): a
    // multi-row upsert may not touch a row twice.
    let ns = ns.as_str();
    let trajectories: BTreeMap<i64, &Vec<u8>> = fold
        .trajectories
        .iter()
        .map(|(p, state)| (*p as i64, state))
        .collect();
    let rows: Vec<Vec<&dyn ToSql>> = trajectories
        .iter()
        .map(|(position, state)| vec![&ns as &dyn ToSql, position, *state])
        .collect();
    insert_rows(
        tx,
        "fold_trajectories (namespace, position, state)",
        3,
        "ON CONFLICT (namespace, position) DO UPDATE SET state = excluded.state",
        &rows,
        "writing fold trajectories",
    )?;
    let groups: BTreeMap<&str, &Vec<u8>> = fold
        .groups
        .iter()
        .map(|(key, state)| (key.as_str(), state))
        .collect();
    let rows: Vec<Vec<&dyn ToSql>> = groups
        .iter()
        .map(|(key, state)| vec![&ns as &dyn ToSql, key, *state])
        .collect();
    insert_rows(
        tx,
        "fold_groups (namespace, key, state)",
        3,
        "ON CONFLICT (namespace, key) DO UPDATE SET state = excluded.state",
        &rows,
        "writing fold groups",
    )?;
    Ok(())
}
