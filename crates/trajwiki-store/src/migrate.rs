//! Schema migrations: one runner, one history per backend.
//!
//! A backend's history is its list of migrations in order (`migrations/*.sql` for SQLite,
//! `migrations/postgres/*.sql` for PostgreSQL); its schema version is the number applied,
//! recorded where the backend keeps it (SQLite's `user_version`, PostgreSQL's `trajwiki_schema`
//! row). The runner applies each pending migration in a transaction that holds the backend's
//! lock from its start (SQLite's write lock, a PostgreSQL advisory lock), reading the version
//! under it, so that processes opening one store at once apply each migration once. A store of
//! a newer version than this build knows is refused, untouched. The two histories end with the
//! same tables, columns and indexes (`tests/conformance.rs` compares them).

use std::path::Path;

use crate::db::Db;
use crate::error::{Result, SqlContext, StoreError};

/// One backend's migrations and where it keeps its version.
pub(crate) struct History {
    /// The migrations, in order.
    pub(crate) steps: &'static [&'static str],
    /// Starts a migration's transaction, taking the backend's lock.
    begin: fn(&Db) -> Result<()>,
    /// The version of the database, 0 for an empty one (`shown` names it in errors).
    version: fn(&Db, &Path) -> Result<u32>,
    /// Records that the database is at `version`, from `version - 1`.
    record: fn(&Db, u32) -> Result<()>,
}

/// The SQLite store's history.
pub(crate) const SQLITE: History = History {
    steps: &[
        include_str!("../migrations/0001_init.sql"),
        include_str!("../migrations/0002_fold.sql"),
        include_str!("../migrations/0003_vectors.sql"),
        include_str!("../migrations/0004_namespace_lists.sql"),
        include_str!("../migrations/0005_application_id.sql"),
        include_str!("../migrations/0006_llm_responses.sql"),
        include_str!("../migrations/0007_changes.sql"),
        include_str!("../migrations/0008_restatements.sql"),
        include_str!("../migrations/0009_page_chunks.sql"),
        include_str!("../migrations/0010_page_link_chunks.sql"),
    ],
    // The write lock at once: a deferred transaction could read a version another process is
    // about to change.
    begin: |db| {
        db.execute_batch("BEGIN IMMEDIATE")
            .ctx("starting a migration")
    },
    version: |db, _| {
        db.query_row("PRAGMA user_version", (), |row| row.get::<u32>(0))
            .ctx("reading the schema version")
    },
    record: |db, version| {
        db.execute_batch(&format!("PRAGMA user_version = {version}"))
            .ctx("recording the schema version")
    },
};

/// The advisory lock key PostgreSQL migrations hold (writers hold [`crate::db`]'s).
const POSTGRES_LOCK: i64 = 0x5457_4b4d;

/// The PostgreSQL store's history (its version 1 is the SQLite store's 6, 2 its 7, 3 its 8, 4 its 9, 5 its 10).
pub(crate) const POSTGRES: History = History {
    steps: &[
        include_str!("../migrations/postgres/0001_init.sql"),
        include_str!("../migrations/postgres/0002_changes.sql"),
        include_str!("../migrations/postgres/0003_restatements.sql"),
        include_str!("../migrations/postgres/0004_page_chunks.sql"),
        include_str!("../migrations/postgres/0005_page_link_chunks.sql"),
    ],
    begin: |db| {
        db.execute_batch("BEGIN").ctx("starting a migration")?;
        db.query_row("SELECT pg_advisory_xact_lock(?1)", [POSTGRES_LOCK], |_| {
            Ok(())
        })
        .ctx("locking the schema")
    },
    version: |db, shown| crate::pg::identify(db, shown, true),
    record: |db, version| {
        let sql = if version == 1 {
            "INSERT INTO trajwiki_schema (id, application, version) VALUES (1, 'trajwiki', ?1)"
        } else {
            "UPDATE trajwiki_schema SET version = ?1"
        };
        db.execute(sql, [i64::from(version)])
            .map(|_| ())
            .ctx("recording the schema version")
    },
};

impl History {
    /// The newest version of this history.
    pub(crate) const fn latest(&self) -> u32 {
        self.steps.len() as u32
    }

    /// Applies the pending migrations to `db` (`shown` names it in errors), one transaction each.
    pub(crate) fn apply(&self, db: &Db, shown: &Path) -> Result<()> {
        loop {
            (self.begin)(db)?;
            match self.step(db, shown) {
                Ok(more) => {
                    db.execute_batch("COMMIT").ctx("committing a migration")?;
                    if !more {
                        return Ok(());
                    }
                }
                Err(e) => {
                    let _ = db.execute_batch("ROLLBACK");
                    return Err(e);
                }
            }
        }
    }

    /// The next pending migration, applied and recorded; `false` when there was none.
    fn step(&self, db: &Db, shown: &Path) -> Result<bool> {
        let found = (self.version)(db, shown)?;
        if found > self.latest() {
            return Err(StoreError::NewerSchema {
                path: shown.to_path_buf(),
                found,
                supported: self.latest(),
            });
        }
        let Some(sql) = self.steps.get(found as usize) else {
            return Ok(false);
        };
        db.execute_batch(sql).ctx("applying a migration")?;
        (self.record)(db, found + 1)?;
        Ok(true)
    }
}
