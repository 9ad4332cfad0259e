//! Builds of one namespace take turns, across processes.
//!
//! A build reads the fold its namespace's record names, folds in what arrived since and commits
//! only if the record is still where it started ([`StoreError::Moved`] otherwise, and the build
//! is done again). That check keeps every memory right; this lock keeps builds from doing the
//! same work side by side and a build from losing every race to a faster writer of the same
//! namespace (two processes appending one message a run lost the race for their commit in seven runs of ten,
//! and one lost seventeen times in a row on a loaded machine).
//!
//! On SQLite the lock is an exclusive `flock` of an empty file in the store's `locks/` folder,
//! one per namespace; on PostgreSQL a session advisory lock held by a connection of its own.
//! Either is released when the holder ends, a process killed mid-build included. Where the lock
//! cannot be taken (a store this user may read only, a folder another user made), the build
//! goes on without it: the commit's check still stands.

use std::fs::{File, OpenOptions};
use std::path::PathBuf;

use trajwiki_core::Namespace;

use crate::db::Db;
use crate::error::{Result, SqlContext, StoreError};
use crate::Store;

/// Holds one namespace's build lock until dropped.
#[must_use = "the lock is released when this is dropped"]
pub struct BuildLock {
    held: Held,
}

enum Held {
    File(#[allow(dead_code)] File),
    Postgres(#[allow(dead_code)] Box<Db>),
    /// Not taken (see the module docs).
    None,
}

impl BuildLock {
    /// Whether the lock is held (it is not where it could not be taken).
    pub fn is_held(&self) -> bool {
        !matches!(self.held, Held::None)
    }
}

impl std::fmt::Debug for BuildLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuildLock")
            .field("held", &self.is_held())
            .finish()
    }
}

/// The folder of a SQLite store's lock files.
pub const LOCK_DIR: &str = "locks";

/// The first key of the PostgreSQL build lock: another than the write lock's
/// ([`crate::postgres_write_lock`]), whose second key it shares.
pub(crate) const POSTGRES_BUILD_CLASS: i32 = 0x5457_4b42;

impl Store {
    /// Waits for, then takes, the build lock of `ns` (see the module docs).
    pub fn lock_builds(&self, ns: &Namespace) -> Result<BuildLock> {
        let none = BuildLock { held: Held::None };
        if self.read_only {
            return Ok(none);
        }
        if self.conn.is_postgres() {
            let url = self.dir.to_string_lossy();
            let conn = Db::connect_postgres(&url).map_err(|e| StoreError::Location {
                location: crate::pg::redact(&url),
                reason: format!("cannot connect for a build lock: {e}"),
            })?;
            let (class, key) = crate::db::postgres_build_lock(ns.as_str());
            conn.query_row("SELECT pg_advisory_lock(?1, ?2)", [class, key], |_| Ok(()))
                .ctx("taking a build lock")?;
            return Ok(BuildLock {
                held: Held::Postgres(Box::new(conn)),
            });
        }
        let path = self.build_lock_path(ns);
        let io = |source| StoreError::Io {
            path: path.clone(),
            source,
        };
        let file = match self.lock_dir().and_then(|_| {
            OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
                .map_err(io)
        }) {
            Ok(file) => file,
            Err(StoreError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::PermissionDenied =>
            {
                // Another user's folder: its file, if there, can still be locked read only.
                match File::open(&path) {
                    Ok(file) => file,
                    Err(_) => return Ok(none),
                }
            }
            Err(e) => return Err(e),
        };
        file.lock().map_err(io)?;
        Ok(BuildLock {
            held: Held::File(file),
        })
    }

    /// The file whose lock the builds of `ns` take: named for a hash of the name, which may hold
    /// any character.
    fn build_lock_path(&self, ns: &Namespace) -> PathBuf {
        let hash = trajwiki_core::content_hash(["build lock", ns.as_str()]);
        self.dir
            .join(LOCK_DIR)
            .join(format!("build-{}.lock", &hash[..16]))
    }

    /// The folder of lock files, made when absent (alone, as the vector folder: nothing is made
    /// at the old place of a store moved away).
    fn lock_dir(&self) -> Result<()> {
        let dir = self.dir.join(LOCK_DIR);
        match std::fs::create_dir(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                Err(self.relocated_or(StoreError::Io {
                    path: dir,
                    source: e,
                }))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_only_store_takes_no_lock_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        drop(Store::open(dir.path()).unwrap());
        let store = Store::open_read_only(dir.path()).unwrap();
        let lock = store.lock_builds(&Namespace::new("a").unwrap()).unwrap();
        assert!(!lock.is_held());
        assert!(!dir.path().join(LOCK_DIR).exists());
    }
}
