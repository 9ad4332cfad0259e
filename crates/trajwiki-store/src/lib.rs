//! The system of record: one SQLite database per store directory.
//!
//! A store holds raw inputs (source messages, agent runs), the memory derived from them
//! (snapshots, claims and their op log, trajectories, wiki pages and their revisions,
//! compilations and insights) and an embedding cache keyed by (model id, text hash).
//!
//! Guarantees:
//! - **Atomic batches.** Every write API call is one transaction: a crash leaves the state before
//!   or after it, never a mix. The database runs in WAL mode with foreign keys on.
//! - **Immutability.** There is no API to update or delete an immutable record, and triggers refuse
//!   it at the SQL level too. Derived state (claim status, trajectory summaries, the current page
//!   revision) is recomputed from immutable history, and [`Store::check`] verifies that it is.
//! - **Content addressing.** Ingesting a record whose id is already stored is a no-op when the
//!   content is equal and a [`StoreError::Conflict`] naming both versions when it is not.
//! - **Versioned schema.** Migrations are applied in order on open; a database written by a newer
//!   trajwiki is refused with [`StoreError::NewerSchema`].
//!
//! ```
//! use trajwiki_core::{Namespace, SourceMessage};
//! use trajwiki_store::Store;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let mut store = Store::open(dir.path()).unwrap();
//! let ns = Namespace::new("demo").unwrap();
//! let ts = chrono::NaiveDate::from_ymd_opt(2023, 5, 8).unwrap().and_hms_opt(13, 56, 0).unwrap();
//! let msg = SourceMessage::new(ns, 1, 1, "Ann".into(), "Hi!".into(), ts, vec![], None);
//! assert_eq!(store.ingest_messages("example", &[msg.clone()]).unwrap().added, 1);
//! assert_eq!(store.ingest_messages("example", &[msg.clone()]).unwrap().added, 0);
//! assert_eq!(store.message(&msg.id).unwrap(), Some(msg));
//! ```

mod check;
mod embeddings;
mod error;
mod fold;
mod memory;
mod raw;
mod read;
mod vectors;

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, OptionalExtension};
use serde::{de::DeserializeOwned, Serialize};

pub use check::{CheckReport, Problem};
pub use error::{Result, StoreError};
pub use fold::{Arrived, FoldRecord, FoldWrite};
pub use memory::{MemoryBatch, MemoryRecords, PageUpdates};
pub use raw::IngestReport;
pub use vectors::{MappedVectors, VectorDtype, VectorFileInfo, VECTOR_DIR};

use error::SqlContext;

/// The database file inside a store directory.
pub const DB_FILE: &str = "trajwiki.db";

/// Schema migrations, in order; the schema version is the number applied.
const MIGRATIONS: &[&str] = &[
    include_str!("../migrations/0001_init.sql"),
    include_str!("../migrations/0002_fold.sql"),
    include_str!("../migrations/0003_vectors.sql"),
    include_str!("../migrations/0004_namespace_lists.sql"),
];

/// The newest schema version this build reads and writes.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// A store: one directory holding one SQLite database.
#[derive(Debug)]
pub struct Store {
    conn: Connection,
    dir: PathBuf,
}

/// Counts of every record kind, per store.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Stats {
    /// Schema version of the database.
    pub schema_version: u32,
    /// Namespaces.
    pub namespaces: u64,
    /// Source messages.
    pub messages: u64,
    /// Agent runs.
    pub runs: u64,
    /// Snapshots.
    pub snapshots: u64,
    /// Claims.
    pub claims: u64,
    /// Claim ops.
    pub claim_ops: u64,
    /// Trajectories.
    pub trajectories: u64,
    /// Wiki pages (current, not retired).
    pub pages: u64,
    /// Page revisions, all kept.
    pub page_revisions: u64,
    /// Compilations.
    pub compilations: u64,
    /// Insights.
    pub insights: u64,
    /// Cached embeddings.
    pub embeddings: u64,
    /// Ingest batches committed.
    pub ingest_batches: u64,
}

impl Store {
    /// Opens the store in `dir`, creating the directory and database when absent and applying
    /// pending migrations.
    pub fn open(dir: impl AsRef<Path>) -> Result<Store> {
        let dir = dir.as_ref().to_path_buf();
        std::fs::create_dir_all(&dir).map_err(|source| StoreError::Io {
            path: dir.clone(),
            source,
        })?;
        Self::connect(
            dir,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE,
        )
    }

    /// Opens an existing store; [`StoreError::NotAStore`] when `dir` holds none.
    pub fn open_existing(dir: impl AsRef<Path>) -> Result<Store> {
        let dir = dir.as_ref().to_path_buf();
        if !dir.join(DB_FILE).is_file() {
            return Err(StoreError::NotAStore { path: dir });
        }
        Self::connect(dir, OpenFlags::SQLITE_OPEN_READ_WRITE)
    }

    fn connect(dir: PathBuf, flags: OpenFlags) -> Result<Store> {
        let path = dir.join(DB_FILE);
        let conn = Connection::open_with_flags(&path, flags | OpenFlags::SQLITE_OPEN_NO_MUTEX)
            .ctx("opening the database")?;
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .ctx("setting the busy timeout")?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .ctx("enabling WAL mode")?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .ctx("setting synchronous mode")?;
        conn.pragma_update(None, "foreign_keys", true)
            .ctx("enabling foreign keys")?;
        // Reads through a memory map instead of a system call per page, and a page cache that
        // holds a large namespace's records (both bounds, not allocations).
        conn.pragma_update(None, "mmap_size", 1i64 << 30)
            .ctx("enabling memory-mapped reads")?;
        conn.pragma_update(None, "cache_size", -65536)
            .ctx("sizing the page cache")?;
        let mut store = Store { conn, dir };
        store.migrate(&path)?;
        Ok(store)
    }

    fn migrate(&mut self, path: &Path) -> Result<()> {
        let found: u32 = self
            .conn
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .ctx("reading the schema version")?;
        if found > SCHEMA_VERSION {
            return Err(StoreError::NewerSchema {
                path: path.to_path_buf(),
                found,
                supported: SCHEMA_VERSION,
            });
        }
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
            let tx = self.conn.transaction().ctx("starting a migration")?;
            tx.execute_batch(sql).ctx("applying a migration")?;
            tx.pragma_update(None, "user_version", i as u32 + 1)
                .ctx("recording the schema version")?;
            tx.commit().ctx("committing a migration")?;
        }
        Ok(())
    }

    /// The store directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// SQLite's `data_version`: it changes when another connection (another process, or another
    /// `Store` on the same directory) commits, and not for this connection's own writes. A
    /// reader that caches what it read compares it to tell whether someone else wrote since.
    pub fn data_version(&self) -> Result<i64> {
        self.conn
            .pragma_query_value(None, "data_version", |row| row.get(0))
            .ctx("reading the data version")
    }

    /// The schema version of the open database.
    pub fn schema_version(&self) -> Result<u32> {
        self.conn
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .ctx("reading the schema version")
    }

    /// Every namespace, sorted.
    pub fn namespaces(&self) -> Result<Vec<trajwiki_core::Namespace>> {
        let mut stmt = self
            .conn
            .prepare("SELECT id FROM namespaces ORDER BY id")
            .ctx("listing namespaces")?;
        let names = stmt
            .query_map([], |row| row.get::<_, String>(0))
            .ctx("listing namespaces")?
            .collect::<rusqlite::Result<Vec<_>>>()
            .ctx("listing namespaces")?;
        names
            .into_iter()
            .map(|name| {
                trajwiki_core::Namespace::new(name.clone()).map_err(|e| StoreError::Corrupt {
                    table: "namespaces",
                    column: "id",
                    id: name,
                    reason: e.to_string(),
                })
            })
            .collect()
    }

    /// Counts of every record kind.
    pub fn stats(&self) -> Result<Stats> {
        let count = |sql: &str| -> Result<u64> {
            self.conn
                .query_row(sql, [], |row| row.get::<_, i64>(0))
                .map(|n| n as u64)
                .ctx("counting records")
        };
        Ok(Stats {
            schema_version: self.schema_version()?,
            namespaces: count("SELECT count(*) FROM namespaces")?,
            messages: count("SELECT count(*) FROM messages")?,
            runs: count("SELECT count(*) FROM runs")?,
            snapshots: count("SELECT count(*) FROM snapshots")?,
            claims: count("SELECT count(*) FROM claims")?,
            claim_ops: count("SELECT count(*) FROM claim_ops")?,
            trajectories: count("SELECT count(*) FROM trajectories")?,
            pages: count("SELECT count(*) FROM pages WHERE current_revision IS NOT NULL")?,
            page_revisions: count("SELECT count(*) FROM page_revisions")?,
            compilations: count("SELECT count(*) FROM compilations")?,
            insights: count("SELECT count(*) FROM insights")?,
            embeddings: count("SELECT count(*) FROM embeddings")?,
            ingest_batches: count("SELECT count(*) FROM ingest_batches")?,
        })
    }

    /// Message and run counts of one namespace.
    pub fn namespace_counts(&self, ns: &trajwiki_core::Namespace) -> Result<(u64, u64)> {
        let count = |sql: &str| -> Result<u64> {
            self.conn
                .query_row(sql, [ns.as_str()], |row| row.get::<_, i64>(0))
                .map(|n| n as u64)
                .ctx("counting records")
        };
        Ok((
            count("SELECT count(*) FROM messages WHERE namespace = ?1")?,
            count("SELECT count(*) FROM runs WHERE namespace = ?1")?,
        ))
    }

    /// Removes a namespace and everything in it from every table, in one transaction. Returns
    /// whether it existed. Cached embeddings are shared between namespaces and stay.
    pub fn delete_namespace(&mut self, ns: &trajwiki_core::Namespace) -> Result<bool> {
        self.delete_where(ns, true)
    }

    /// Removes the derived memory of a namespace (snapshots, claims, ops, trajectories, pages
    /// and their revisions), keeping its raw messages and runs, in one transaction, so that it can
    /// be rebuilt from them. Returns whether the namespace exists.
    pub fn clear_memory(&mut self, ns: &trajwiki_core::Namespace) -> Result<bool> {
        self.delete_where(ns, false)
    }

    fn delete_where(&mut self, ns: &trajwiki_core::Namespace, raw_too: bool) -> Result<bool> {
        // Vectors derive from the messages alone: they go with the messages, not the memory.
        let files = if raw_too {
            self.vector_paths(ns)?
        } else {
            Vec::new()
        };
        let tx = self.conn.transaction().ctx("starting a delete")?;
        let exists = delete_in(&tx, ns, raw_too)?;
        tx.commit().ctx("committing a delete")?;
        vectors::remove_files(&files)?;
        Ok(exists)
    }
}

/// Deletes a namespace's derived memory (and with `raw_too` its raw records and itself) inside
/// `tx`. Returns whether the namespace exists.
pub(crate) fn delete_in(
    tx: &rusqlite::Transaction<'_>,
    ns: &trajwiki_core::Namespace,
    raw_too: bool,
) -> Result<bool> {
    const MEMORY: &[&str] = &[
        "DELETE FROM page_trajectories WHERE namespace = ?1",
        "DELETE FROM page_revisions WHERE page IN (SELECT id FROM pages WHERE namespace = ?1)",
        "DELETE FROM pages WHERE namespace = ?1",
        "DELETE FROM op_sources WHERE namespace = ?1",
        "DELETE FROM claim_ops WHERE namespace = ?1",
        "DELETE FROM claim_state WHERE namespace = ?1",
        "DELETE FROM snapshot_claims WHERE namespace = ?1",
        "DELETE FROM claim_sources WHERE namespace = ?1",
        "DELETE FROM claims WHERE namespace = ?1",
        "DELETE FROM snapshot_messages WHERE namespace = ?1",
        "DELETE FROM snapshots WHERE namespace = ?1",
        "DELETE FROM trajectories WHERE namespace = ?1",
        "DELETE FROM fold_trajectories WHERE namespace = ?1",
        "DELETE FROM fold_groups WHERE namespace = ?1",
        "DELETE FROM memory_builds WHERE namespace = ?1",
    ];
    const RAW: &[&str] = &[
        "DELETE FROM insights WHERE run IN (SELECT id FROM runs WHERE namespace = ?1)",
        "DELETE FROM compilations WHERE run IN (SELECT id FROM runs WHERE namespace = ?1)",
        "DELETE FROM run_steps WHERE run IN (SELECT id FROM runs WHERE namespace = ?1)",
        "DELETE FROM runs WHERE namespace = ?1",
        "DELETE FROM vector_files WHERE namespace = ?1",
        "DELETE FROM messages WHERE namespace = ?1",
        "DELETE FROM namespaces WHERE id = ?1",
    ];
    let exists = tx
        .query_row(
            "SELECT 1 FROM namespaces WHERE id = ?1",
            [ns.as_str()],
            |_| Ok(()),
        )
        .optional()
        .ctx("looking up a namespace")?
        .is_some();
    if exists {
        tx.execute("UPDATE guard SET allow_delete = 1", [])
            .ctx("opening the delete guard")?;
        tx.execute("PRAGMA defer_foreign_keys = ON", [])
            .ctx("deferring foreign keys")?;
        let raw: &[&str] = if raw_too { RAW } else { &[] };
        for sql in MEMORY.iter().chain(raw) {
            tx.execute(sql, [ns.as_str()]).ctx("deleting records")?;
        }
        tx.execute("UPDATE guard SET allow_delete = 0", [])
            .ctx("closing the delete guard")?;
    }
    Ok(exists)
}

/// Encodes a value as JSON for a TEXT column.
pub(crate) fn to_json<T: Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).expect("store values serialize to JSON")
}

/// Decodes a JSON TEXT column, naming the place on failure.
pub(crate) fn from_json<T: DeserializeOwned>(
    text: &str,
    table: &'static str,
    column: &'static str,
    id: &str,
) -> Result<T> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt {
        table,
        column,
        id: id.to_string(),
        reason: e.to_string(),
    })
}

/// Parses a stored id or enum value, naming the place on failure.
pub(crate) fn parse_stored<T, E: std::fmt::Display>(
    value: std::result::Result<T, E>,
    table: &'static str,
    column: &'static str,
    id: &str,
) -> Result<T> {
    value.map_err(|e| StoreError::Corrupt {
        table,
        column,
        id: id.to_string(),
        reason: e.to_string(),
    })
}

/// Formats a timestamp for storage.
pub(crate) fn fmt_ts(ts: &trajwiki_core::Timestamp) -> String {
    ts.format(trajwiki_core::TIMESTAMP_FORMAT).to_string()
}

/// Parses a stored timestamp.
pub(crate) fn parse_ts(
    text: &str,
    table: &'static str,
    id: &str,
) -> Result<trajwiki_core::Timestamp> {
    parse_stored(
        chrono::NaiveDateTime::parse_from_str(text, trajwiki_core::TIMESTAMP_FORMAT),
        table,
        "timestamp",
        id,
    )
}
