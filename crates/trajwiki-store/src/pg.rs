//! A store in a PostgreSQL database (`postgres://user@host:port/database`), shared by any
//! number of processes on any number of machines.
//!
//! The records, their immutability (triggers) and the statements are the SQLite store's (see
//! `db` and `migrations/postgres/`); what differs:
//! - **Writers of one namespace take turns** through a transaction-scoped advisory lock per
//!   namespace (SQLite has one writer per store), so that every write sees its namespace as the
//!   last one left it, and writes to other namespaces go on meanwhile.
//! - **Readers tell that another process wrote** to a namespace by its
//!   [`IndexState`](crate::IndexState), as on SQLite.
//! - **Vectors are rows** (`vector_chunks`, one BYTEA per append) read into memory when a
//!   namespace is loaded; approximate indexes, derived files, live in a local folder of each
//!   machine and are rebuilt where missing.
//! - **The generation clock is a sequence** (SQLite's is a one-row table): writers of different
//!   namespaces do not wait for one another on it; one namespace's writers draw theirs under its
//!   advisory lock, so its generations increase in commit order (see the `changes` module).
//! - **Schema versions are its own** (1 = the SQLite store's version 6, 2 = its version 7).

use std::path::PathBuf;

use crate::db::Db;
use crate::error::{Result, SqlContext, StoreError};
use crate::{Access, Store};

/// The newest PostgreSQL schema version this build reads and writes.
pub const SCHEMA_VERSION: u32 = crate::migrate::POSTGRES.latest();

/// The URL without its password, for messages.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (authority, tail) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    match authority.rsplit_once('@') {
        Some((user, host)) if user.contains(':') => {
            let name = user.split(':').next().unwrap_or_default();
            format!("{scheme}://{name}:***@{host}{tail}")
        }
        _ => url.to_string(),
    }
}

pub(crate) fn open(url: &str, access: Access) -> Result<Store> {
    let shown = PathBuf::from(redact(url));
    let conn = Db::connect_postgres(url).map_err(|e| StoreError::Location {
        location: redact(url),
        reason: format!("cannot connect: {e}"),
    })?;
    let version = identify(&conn, &shown, access == Access::Create)?;
    if version > SCHEMA_VERSION {
        return Err(StoreError::NewerSchema {
            path: shown,
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    let read_only = access == Access::ReadOnly;
    if read_only && version < SCHEMA_VERSION {
        return Err(StoreError::NeedsUpgrade {
            path: shown,
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    if read_only {
        conn.execute_batch("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
            .ctx("opening the database read only")?;
    } else {
        crate::migrate::POSTGRES.apply(&conn, &shown)?;
    }
    let files = std::env::temp_dir()
        .join("trajwiki-postgres")
        .join(&trajwiki_core::content_hash([url])[..16]);
    Ok(Store {
        conn,
        dir: PathBuf::from(url),
        files,
        read_only,
        home: None,
        dims: Default::default(),
    })
}

/// The schema version of a trajwiki database, 0 for an empty one that `may_create` allows to
/// become one; [`StoreError::Foreign`] for a database holding anything else, and
/// [`StoreError::NotAStore`] for an empty one that may not be created.
pub(crate) fn identify(conn: &Db, shown: &std::path::Path, may_create: bool) -> Result<u32> {
    let ours: bool = conn
        .query_row(
            "SELECT to_regclass('trajwiki_schema') IS NOT NULL",
            (),
            |r| r.get(0),
        )
        .ctx("reading the schema")?;
    if ours {
        return schema_version(conn);
    }
    let tables: i64 = conn
        .query_row(
            "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()",
            (),
            |r| r.get(0),
        )
        .ctx("reading the schema")?;
    match (tables, may_create) {
        (0, true) => Ok(0),
        (0, false) => Err(StoreError::NotAStore {
            path: shown.to_path_buf(),
        }),
        (n, _) => Err(StoreError::Foreign {
            path: shown.to_path_buf(),
            reason: format!(
                "its schema holds {n} tables of another program (no trajwiki_schema table)"
            ),
        }),
    }
}

pub(crate) fn schema_version(conn: &Db) -> Result<u32> {
    let v: i64 = conn
        .query_row("SELECT version FROM trajwiki_schema", (), |r| r.get(0))
        .ctx("reading the schema version")?;
    u32::try_from(v).map_err(|_| StoreError::Corrupt {
        table: "trajwiki_schema",
        column: "version",
        id: "1".into(),
        reason: format!("{v}"),
    })
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn passwords_are_not_shown() {
        assert_eq!(
            redact("postgres://ann:secret@db.example:5432/memory"),
            "postgres://ann:***@db.example:5432/memory"
        );
        assert_eq!(
            redact("postgres://ann@localhost/memory"),
            "postgres://ann@localhost/memory"
        );
        assert_eq!(redact("postgres://h/db?x=a:b@c"), "postgres://h/db?x=a:b@c");
    }
}
