//! The system of record: one SQLite database per store directory, or one PostgreSQL database
//! shared by several processes and machines (a `postgres://` store URI; see the `pg` module).
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

mod build_lock;
mod changes;
mod check;
mod conflict;
mod db;
mod embeddings;
mod error;
mod fold;
mod llm;
mod mapped;
mod memory;
mod migrate;
mod page_chunks;
mod page_write;
mod pg;
mod raw;
mod read;
mod segments;
pub mod traffic;
mod vectors;

use std::path::{Path, PathBuf};

use db::{Begin, Db, Tx};
use rusqlite::{Connection, OpenFlags, OptionalExtension};
use serde::{de::DeserializeOwned, Serialize};

pub use build_lock::BuildLock;
pub use changes::{Cursor, NamespaceDelta};
pub use check::{CheckReport, Problem};
pub use error::{Result, StoreError};
pub use fold::{Arrived, FoldRecord, FoldWrite, IndexState};
pub use memory::{MemoryBatch, MemoryRecords, PageUpdates};
pub use raw::{Append, IngestReport, Place};
pub use segments::{
    Payload as SegmentPayload, Segment, SegmentHeader, PAUSE_ENV as SEGMENT_PAUSE_ENV,
    SEGMENT_VERSION,
};

pub use db::postgres_write_lock;
pub use pg::SCHEMA_VERSION as POSTGRES_SCHEMA_VERSION;
pub use vectors::{MappedVectors, VectorDtype, VectorFileInfo, VECTOR_DIR};

use error::SqlContext;

/// The database file inside a store directory.
pub const DB_FILE: &str = "trajwiki.db";

/// SQLite's application id of a trajwiki database ("TWKI"), set by migration 5.
const APPLICATION_ID: i64 = 0x5457_4b49;

/// Prepared statements a connection keeps: about as many as the texts the store runs, so that
/// none is parsed twice.
const STATEMENT_CACHE: usize = 256;

/// How long a writer waits for another one before giving up.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// The newest schema version this build reads and writes.
pub const SCHEMA_VERSION: u32 = migrate::SQLITE.latest();

/// Where a store lives: a directory (SQLite) or a PostgreSQL server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreLocation {
    /// A store directory.
    Dir(PathBuf),
    /// A PostgreSQL connection URL (`postgres://user@host:port/database`).
    Postgres(String),
}

/// The store a location names: a path as it is, or a store URI — `sqlite://` followed by the
/// path (`sqlite:///srv/memory` is absolute, `sqlite://memory` relative) or a `postgres://` /
/// `postgresql://` URL. Another scheme is [`StoreError::Location`], naming it: a path never
/// silently becomes a directory called `s3:`.
pub fn store_location(location: &Path) -> Result<StoreLocation> {
    let Some(text) = location.to_str() else {
        return Ok(StoreLocation::Dir(location.to_path_buf()));
    };
    let refuse = |reason: String| StoreError::Location {
        location: text.to_string(),
        reason,
    };
    let Some((scheme, rest)) = text.split_once("://") else {
        return Ok(StoreLocation::Dir(location.to_path_buf()));
    };
    // A scheme is a letter then letters, digits, `+`, `-` or `.` (RFC 3986); anything else
    // before `://` is part of a path.
    let is_scheme = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !is_scheme {
        return Ok(StoreLocation::Dir(location.to_path_buf()));
    }
    match scheme.to_ascii_lowercase().as_str() {
        "sqlite" | "file" if rest.is_empty() => Err(refuse("the URI names no path".into())),
        "sqlite" | "file" => Ok(StoreLocation::Dir(PathBuf::from(rest))),
        "postgres" | "postgresql" => Ok(StoreLocation::Postgres(text.to_string())),
        other => Err(refuse(format!(
            "unknown scheme `{other}://`; expected a directory, sqlite:///path or postgres://…"
        ))),
    }
}

/// A store: one directory holding one SQLite database, or one PostgreSQL database.
#[derive(Debug)]
pub struct Store {
    conn: Db,
    /// The directory, or the PostgreSQL URL as given (what reopens the store).
    dir: PathBuf,
    /// Where derived files live: the directory's `vectors/`; for PostgreSQL (whose vectors are
    /// rows) a local folder for approximate indexes only.
    files: PathBuf,
    read_only: bool,
    /// Which directory `dir` led to when the store was opened (`None` for PostgreSQL): a write
    /// first checks that it still does (see [`Store::in_place`]).
    home: Option<DirId>,
    /// The dimension of each embedding model this connection has seen recorded (a model's row
    /// is immutable: read once).
    dims: std::cell::RefCell<std::collections::HashMap<String, usize>>,
}

/// Which directory a path leads to: its device and inode, which stay with the directory when it
/// is moved or renamed and differ for another directory put in its place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct DirId {
    device: u64,
    inode: u64,
}

impl DirId {
    /// The directory `path` leads to now (links followed).
    fn of(path: &Path) -> std::io::Result<DirId> {
        let meta = std::fs::metadata(path)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            Ok(DirId {
                device: meta.dev(),
                inode: meta.ino(),
            })
        }
        #[cfg(not(unix))]
        {
            // No inode to tell one directory from another: every directory is the one opened.
            let _ = meta;
            Ok(DirId {
                device: 0,
                inode: 0,
            })
        }
    }
}

/// How an open store was opened: its location, which directory that led to, and whether it was
/// opened read only; what opens another connection to the same store
/// ([`Opened::connect`]) for a process that keeps it open (a server, a Python `Memory`).
#[derive(Debug, Clone)]
pub struct Opened {
    dir: PathBuf,
    home: Option<DirId>,
    read_only: bool,
}

impl Opened {
    /// The store directory (or PostgreSQL URL) as given.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether the store was opened read only.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Another connection to the store, read only when the first was. The location is opened
    /// again by its path, so when that path now leads elsewhere (the directory moved away, or
    /// another store put in its place) this is [`StoreError::Relocated`]: never a connection to
    /// another store, never a store made at the old place.
    pub fn connect(&self) -> Result<Store> {
        let opened = if self.read_only {
            Store::open_read_only(&self.dir)
        } else {
            Store::open_existing(&self.dir)
        };
        let relocated = || StoreError::Relocated {
            path: self.dir.clone(),
        };
        match (opened, self.home) {
            (Ok(store), Some(home)) if store.home != Some(home) => Err(relocated()),
            (Err(e), Some(home)) => match DirId::of(&self.dir) {
                Ok(now) if now == home => Err(e),
                _ => Err(relocated()),
            },
            (opened, _) => opened,
        }
    }
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
    /// Chunks of page bodies, each stored once per namespace.
    pub page_chunks: u64,
    /// Compilations.
    pub compilations: u64,
    /// Insights.
    pub insights: u64,
    /// Cached embeddings.
    pub embeddings: u64,
    /// Ingest batches committed.
    pub ingest_batches: u64,
}

/// What [`Store::delete_namespace`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Deleted {
    /// Whether the namespace existed (nothing is removed otherwise).
    pub existed: bool,
    /// Its messages.
    pub messages: u64,
    /// Its runs.
    pub runs: u64,
    /// Cached embeddings of its texts that no other namespace holds.
    pub embeddings: u64,
    /// Vector files, approximate indexes and index segments removed.
    pub files: usize,
    /// Whether the freed space was overwritten, so that no file of the store holds the deleted
    /// text any more.
    pub scrubbed: bool,
    /// Why it was not, when it was not (and the namespace existed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_scrubbed: Option<NotScrubbed>,
}

/// Why the space a delete freed still holds deleted bytes (see [`Store::scrub`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NotScrubbed {
    /// A PostgreSQL store: its own vacuum reuses the space, when it does; not trajwiki's to
    /// promise.
    Postgres,
    /// Another process was reading the store, which holds the write-ahead log back.
    Busy,
    /// The disk is full: the database could not be rewritten without the freed pages.
    StorageFull,
    /// The rewrite failed otherwise: SQLite's message.
    Failed(String),
}

impl std::fmt::Display for NotScrubbed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotScrubbed::Postgres => f.write_str(
                "PostgreSQL keeps deleted rows' bytes until its own vacuum reuses their space",
            ),
            NotScrubbed::Busy => f.write_str("another process is reading the store"),
            NotScrubbed::StorageFull => f.write_str(
                "the disk holding the store is full (rewriting the database needs free space about its size)",
            ),
            NotScrubbed::Failed(e) => write!(f, "rewriting the database failed: {e}"),
        }
    }
}

/// How a store is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    /// Read and write; the store is created when absent.
    Create,
    /// Read and write an existing store; read only when its files are write-protected.
    Existing,
    /// Read only, whatever the files allow.
    ReadOnly,
}

impl Store {
    /// Opens the store in `dir`, creating the directory and database when absent and applying
    /// pending migrations. Any number of processes may do this at once: a new database is made
    /// whole under a temporary name and linked into place, so none sees half of one.
    ///
    /// `dir` is a directory or a store URI: `sqlite:///abs/path` or `sqlite://relative/path`
    /// (see [`store_location`]).
    pub fn open(dir: impl AsRef<Path>) -> Result<Store> {
        let dir = match store_location(dir.as_ref())? {
            StoreLocation::Dir(dir) => dir,
            StoreLocation::Postgres(url) => return pg::open(&url, Access::Create),
        };
        std::fs::create_dir_all(&dir).map_err(|source| StoreError::Io {
            path: dir.clone(),
            source,
        })?;
        if !dir.join(DB_FILE).exists() {
            create(&dir)?;
        }
        Self::connect(dir, Access::Create)
    }

    /// Opens an existing store; [`StoreError::NotAStore`] when `dir` holds none. A store whose
    /// database file or directory is write-protected is opened read only (see
    /// [`Store::open_read_only`]).
    pub fn open_existing(dir: impl AsRef<Path>) -> Result<Store> {
        Self::locate(dir.as_ref(), Access::Existing)
    }

    /// Opens an existing store read only: nothing is written, not even a migration (a store of
    /// an older schema is refused with [`StoreError::NeedsUpgrade`]). When the directory does not
    /// even allow SQLite's shared-memory file, the database is read as immutable.
    pub fn open_read_only(dir: impl AsRef<Path>) -> Result<Store> {
        Self::locate(dir.as_ref(), Access::ReadOnly)
    }

    fn locate(location: &Path, access: Access) -> Result<Store> {
        match store_location(location)? {
            StoreLocation::Dir(dir) => Self::connect(dir, access),
            StoreLocation::Postgres(url) => pg::open(&url, access),
        }
    }

    /// Whether the store is a PostgreSQL database.
    pub fn is_postgres(&self) -> bool {
        self.conn.is_postgres()
    }

    /// Whether this store was opened read only.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    fn connect(dir: PathBuf, access: Access) -> Result<Store> {
        let shown = dir.clone();
        Self::connect_to(dir, access).map_err(|e| match e {
            // SQLite sizes its shared-memory file as it opens a store, and says only "disk I/O
            // error" when the disk has no room for it.
            StoreError::Sqlite { context, source }
                if source.sqlite_error_code() == Some(rusqlite::ErrorCode::SystemIoFailure)
                    && disk_is_full(&shown) =>
            {
                StoreError::StorageFull { context, source }
            }
            e => e,
        })
    }

    fn connect_to(dir: PathBuf, access: Access) -> Result<Store> {
        // Taken before the database is opened: a directory put in the place after this is
        // another than the one whose database the connection holds, and is refused as one.
        let home = DirId::of(&dir).ok();
        let path = dir.join(DB_FILE);
        let meta = match std::fs::metadata(&path) {
            Ok(meta) if meta.is_file() => meta,
            _ => return Err(StoreError::NotAStore { path: dir }),
        };
        check_header(&path, meta.len())?;
        let protected = meta.permissions().readonly()
            || std::fs::metadata(&dir).is_ok_and(|m| m.permissions().readonly());
        let read_only = access == Access::ReadOnly || protected;
        let (conn, read_only) = if read_only {
            (open_read_only(&path)?, true)
        } else {
            let conn = Connection::open_with_flags(
                &path,
                OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
            .ctx("opening the database")?;
            conn.busy_timeout(BUSY_TIMEOUT)
                .ctx("setting the busy timeout")?;
            match probe(&conn) {
                // A store this user may not write (another user's, on a read-only mount) whose
                // mode bits do not say so: read only, as one whose bits do.
                Err(e) if is_access_error(&e) => (open_read_only(&path)?, true),
                // SQLite opens a file it may not write read only without saying so.
                _ => {
                    let read_only = conn.is_readonly(rusqlite::MAIN_DB).unwrap_or(true);
                    (conn, read_only)
                }
            }
        };
        conn.busy_timeout(BUSY_TIMEOUT)
            .ctx("setting the busy timeout")?;
        // Every statement the store runs is kept prepared (an append runs a few dozen).
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        // Whose database is it? Read before anything is changed in it.
        let version = identify(&conn, &path, access == Access::Create)?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::NewerSchema {
                path: path.to_path_buf(),
                found: version,
                supported: SCHEMA_VERSION,
            });
        }
        if read_only && version < SCHEMA_VERSION {
            return Err(StoreError::NeedsUpgrade {
                path: path.to_path_buf(),
                found: version,
                supported: SCHEMA_VERSION,
            });
        }
        if !read_only {
            conn.pragma_update(None, "journal_mode", "WAL")
                .ctx("enabling WAL mode")?;
            conn.pragma_update(None, "synchronous", "NORMAL")
                .ctx("setting synchronous mode")?;
        }
        conn.pragma_update(None, "foreign_keys", true)
            .ctx("enabling foreign keys")?;
        // Reads through a memory map instead of a system call per page, and a page cache that
        // holds a large namespace's records (both bounds, not allocations).
        conn.pragma_update(None, "mmap_size", 1i64 << 30)
            .ctx("enabling memory-mapped reads")?;
        conn.pragma_update(None, "cache_size", -65536)
            .ctx("sizing the page cache")?;
        let conn = Db::Sqlite(conn);
        if !read_only {
            migrate::SQLITE.apply(&conn, &path)?;
        }
        Ok(Store {
            conn,
            files: dir.join(VECTOR_DIR),
            dir,
            read_only,
            home,
            dims: Default::default(),
        })
    }

    /// Starts a write: a transaction that takes the write lock at once, waiting up to the busy
    /// timeout for another writer (a deferred one could fail on its first write instead, after
    /// its reads). [`StoreError::ReadOnly`] on a store opened read only,
    /// [`StoreError::Relocated`] on one moved away meanwhile (checked again once the lock is
    /// held: a move while this waited is seen before anything is written).
    /// `namespaces` are those it writes to (see [`Begin::Write`]).
    pub(crate) fn write_tx(&mut self, what: &'static str, namespaces: &[&str]) -> Result<Tx<'_>> {
        self.writable(what)?;
        let tx = self.conn.begin(Begin::Write(namespaces)).ctx(what)?;
        self.in_place()?;
        Ok(tx)
    }

    /// Runs `work` as one write transaction taking the write locks of `namespaces` (see
    /// [`Begin::Write`](db::Begin)): the writes it makes through this store, each of which
    /// would otherwise be a transaction of its own, become savepoints of this one, so that they
    /// commit together or not at all. Committed when `work` returns `Ok`, rolled back when it
    /// returns `Err` or panics (the panic goes on). Inside another transaction, a savepoint of
    /// that one.
    pub fn write_as_one<T, E: From<StoreError>>(
        &mut self,
        what: &'static str,
        namespaces: &[&str],
        work: impl FnOnce(&mut Store) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        self.as_one(what, db::Begin::Write(namespaces), work)
    }

    /// [`Store::write_as_one`] for a build of `ns` inside the transaction: the namespace's build
    /// lock held throughout, as [`Store::lock_builds`] holds it — on PostgreSQL taken by the
    /// transaction itself (no connection of its own), before its write lock.
    pub fn build_as_one<T, E: From<StoreError>>(
        &mut self,
        what: &'static str,
        ns: &trajwiki_core::Namespace,
        work: impl FnOnce(&mut Store) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        if self.conn.is_postgres() {
            return self.as_one(what, db::Begin::Building(&[ns.as_str()]), work);
        }
        let _turn = self.lock_builds(ns)?;
        self.as_one(what, db::Begin::Write(&[ns.as_str()]), work)
    }

    fn as_one<T, E: From<StoreError>>(
        &mut self,
        what: &'static str,
        how: db::Begin<'_>,
        work: impl FnOnce(&mut Store) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        self.writable(what)?;
        let nested = self.conn.begin(how).ctx(what)?.detach();
        let done = match self.in_place() {
            Ok(()) => std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(self))),
            Err(e) => Ok(Err(E::from(e))),
        };
        match done {
            Ok(Ok(value)) => {
                self.conn.end(true, nested).ctx(what)?;
                Ok(value)
            }
            Ok(Err(e)) => {
                let _ = self.conn.end(false, nested);
                Err(e)
            }
            Err(panic) => {
                let _ = self.conn.end(false, nested);
                std::panic::resume_unwind(panic)
            }
        }
    }

    /// Whether this connection may write now: [`StoreError::ReadOnly`] on a store opened read
    /// only, [`StoreError::Relocated`] on one whose path no longer leads to it.
    pub(crate) fn writable(&self, what: &'static str) -> Result<()> {
        if self.read_only {
            return Err(StoreError::ReadOnly {
                path: self.dir.clone(),
                what,
            });
        }
        self.in_place()
    }

    /// [`StoreError::Relocated`] when the store's path no longer leads to the directory this
    /// connection opened: it was moved or renamed, or another directory took its place. The
    /// database this connection holds open went with the directory, but vector files, index
    /// segments and approximate indexes are reached by path, so a write now would split the
    /// store in two (the records at the new place, the files at the old one); every write
    /// checks this first.
    pub(crate) fn in_place(&self) -> Result<()> {
        let Some(home) = self.home else {
            return Ok(());
        };
        match DirId::of(&self.dir) {
            Ok(now) if now == home => Ok(()),
            Ok(_) => Err(self.relocated()),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) =>
            {
                Err(self.relocated())
            }
            Err(source) => Err(StoreError::Io {
                path: self.dir.clone(),
                source,
            }),
        }
    }

    fn relocated(&self) -> StoreError {
        StoreError::Relocated {
            path: self.dir.clone(),
        }
    }

    /// `e`, or [`StoreError::Relocated`] when the store moved: a file operation that failed
    /// because the store's directory went away while it ran says so.
    pub(crate) fn relocated_or(&self, e: StoreError) -> StoreError {
        match self.in_place() {
            Err(moved @ StoreError::Relocated { .. }) => moved,
            _ => e,
        }
    }

    /// The folder of vector files and index segments, made when absent. Made alone, not with
    /// its parents: its parent is the store's directory, there while the store is where it was
    /// opened; when the store was moved away, nothing is made at its old place.
    pub(crate) fn vector_dir(&self) -> Result<&Path> {
        match std::fs::create_dir(&self.files) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                Err(self.relocated_or(StoreError::VectorFile {
                    path: self.files.clone(),
                    source: e,
                }))
            }
            _ => Ok(&self.files),
        }
    }

    /// How this store was opened: what opens another connection to it (see [`Opened`]).
    pub fn opened(&self) -> Opened {
        Opened {
            dir: self.dir.clone(),
            home: self.home,
            read_only: self.read_only,
        }
    }

    /// The store directory (for a PostgreSQL store, its URL as given: what opens it again).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The schema version of the open database (PostgreSQL stores count their own versions).
    pub fn schema_version(&self) -> Result<u32> {
        match &self.conn {
            Db::Sqlite(c) => c
                .pragma_query_value(None, "user_version", |row| row.get(0))
                .ctx("reading the schema version"),
            Db::Postgres(_) => pg::schema_version(&self.conn),
        }
    }

    /// Every namespace, sorted.
    pub fn namespaces(&self) -> Result<Vec<trajwiki_core::Namespace>> {
        let mut stmt = self
            .conn
            .prepare("SELECT id FROM namespaces ORDER BY id")
            .ctx("listing namespaces")?;
        let names = stmt
            .query_map((), |row| row.get::<String>(0))
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
                .query_row(sql, (), |row| row.get::<i64>(0))
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
            page_chunks: count("SELECT count(*) FROM page_chunks")?,
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
                .query_row(sql, [ns.as_str()], |row| row.get::<i64>(0))
                .map(|n| n as u64)
                .ctx("counting records")
        };
        Ok((
            count("SELECT count(*) FROM messages WHERE namespace = ?1")?,
            count("SELECT count(*) FROM runs WHERE namespace = ?1")?,
        ))
    }

    /// Removes a namespace and everything in it, for good: every record of every table (raw
    /// messages and runs, the memory, the wiki and its page history), its vector files and
    /// approximate indexes, and the cached embeddings of its texts that no other namespace
    /// holds; in one transaction. Then the freed space is overwritten (`secure_delete` during
    /// the delete, the write-ahead log truncated, the database rewritten by `VACUUM`), so that
    /// the deleted text's bytes are in no file of the store; [`Deleted::scrubbed`] says whether
    /// that completed (another process reading the store at that moment can hold it back; the
    /// records are deleted either way, and the next delete scrubs again).
    pub fn delete_namespace(&mut self, ns: &trajwiki_core::Namespace) -> Result<Deleted> {
        self.writable("deleting a namespace")?;
        let (messages, runs) = self.namespace_counts(ns)?;
        let embeddings = self.embeddings_only_of(ns)?;
        let files: Vec<PathBuf> = self
            .vector_paths(ns)?
            .into_iter()
            .filter(|f| f.exists())
            .collect();
        // Index segments hold the namespace's text and are derived state. They are set aside
        // first, under names no load opens, so that no reader takes up the index of a
        // namespace being deleted, and removed once the delete is committed, before the
        // overwrite, whose space they free. They are not removed before the transaction: one
        // that fails (a full disk) would leave the namespace's records without their segment,
        // so a failed delete puts them back. (A segment a build writes meanwhile is removed
        // after the commit, or by its writer.)
        let aside = self.set_segments_aside(ns)?;
        let (existed, removed) = match self.delete_records(ns, &embeddings) {
            Ok(done) => done,
            Err(e) => {
                aside.restore();
                return Err(e);
            }
        };
        let segments = aside.remove()?;
        vectors::remove_files(&files)?;
        let late = self.segment_paths(ns)?;
        vectors::remove_files(&late)?;
        let not_scrubbed = if existed { self.scrub().err() } else { None };
        Ok(Deleted {
            existed,
            messages,
            runs,
            embeddings: removed as u64,
            files: files.len() + segments + late.len(),
            scrubbed: existed && not_scrubbed.is_none(),
            not_scrubbed,
        })
    }

    /// The transaction of [`Store::delete_namespace`]: every record of `ns` and the cached
    /// embeddings `embeddings` (text hashes) removed, with `secure_delete` on. Returns whether
    /// the namespace existed and how many cached embeddings were removed.
    fn delete_records(
        &mut self,
        ns: &trajwiki_core::Namespace,
        embeddings: &[String],
    ) -> Result<(bool, usize)> {
        if let Some(c) = self.conn.sqlite() {
            c.pragma_update(None, "secure_delete", true)
                .ctx("enabling secure delete")?;
        }
        let tx = self.write_tx("starting a delete", &[ns.as_str()])?;
        let existed = delete_in(&tx, ns, true)?;
        let mut removed = 0;
        if existed {
            tx.execute("UPDATE guard SET allow_delete = 1", ())
                .ctx("opening the delete guard")?;
            let mut stmt = tx
                .prepare("DELETE FROM embeddings WHERE text_hash = ?1")
                .ctx("deleting cached embeddings")?;
            for hash in embeddings {
                removed += stmt.execute([hash]).ctx("deleting cached embeddings")?;
            }
            drop(stmt);
            tx.execute("UPDATE guard SET allow_delete = 0", ())
                .ctx("closing the delete guard")?;
        }
        tx.commit().ctx("committing a delete")?;
        Ok((existed, removed))
    }

    /// Overwrites what deletes freed: the log checkpointed into the database and truncated,
    /// the database rewritten without its free pages, the log truncated again, so that no file
    /// of the store holds deleted bytes. [`Store::delete_namespace`] does this after each
    /// delete; called again, it finishes one that could not (a full disk, another reader).
    pub fn scrub(&mut self) -> std::result::Result<(), NotScrubbed> {
        let Some(conn) = self.conn.sqlite() else {
            return Err(NotScrubbed::Postgres);
        };
        let why = |e: rusqlite::Error| match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DiskFull) => NotScrubbed::StorageFull,
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
                NotScrubbed::Busy
            }
            _ => NotScrubbed::Failed(e.to_string()),
        };
        let checkpoint = |conn: &Connection| -> std::result::Result<(), NotScrubbed> {
            match conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", (), |r| {
                r.get::<_, i64>(0)
            }) {
                Ok(0) => Ok(()),
                Ok(_) => Err(NotScrubbed::Busy),
                Err(e) => Err(why(e)),
            }
        };
        let done = checkpoint(conn)
            .and_then(|()| conn.execute_batch("VACUUM").map_err(why))
            .and_then(|()| checkpoint(conn));
        let _ = conn.pragma_update(None, "secure_delete", false);
        done
    }

    /// The hashes of the cached embeddings of `ns`'s texts (its messages, page routing texts
    /// and run tasks) that no other namespace's texts share.
    fn embeddings_only_of(&self, ns: &trajwiki_core::Namespace) -> Result<Vec<String>> {
        let mut ours = std::collections::BTreeSet::new();
        let mut theirs = std::collections::HashSet::new();
        for other in self.namespaces()? {
            let set: &mut dyn FnMut(String) = if other == *ns {
                &mut |h| {
                    ours.insert(h);
                }
            } else {
                &mut |h| {
                    theirs.insert(h);
                }
            };
            for m in self.messages(&other)? {
                set(trajwiki_core::text_hash(&m.embedding_text()));
            }
            let mut stmt = self
                .conn
                .prepare(
                    "SELECT r.routing_text FROM page_revisions r JOIN pages p ON p.id = r.page
                     WHERE p.namespace = ?1
                     UNION SELECT task FROM runs WHERE namespace = ?1",
                )
                .ctx("reading texts")?;
            let texts = stmt
                .query_map([other.as_str()], |r| r.get::<String>(0))
                .ctx("reading texts")?;
            for t in texts {
                set(trajwiki_core::text_hash(&t.ctx("reading texts")?));
            }
        }
        let mut cached = self
            .conn
            .prepare("SELECT 1 FROM embeddings WHERE text_hash = ?1 LIMIT 1")
            .ctx("looking up cached embeddings")?;
        let mut found = Vec::new();
        for h in ours.into_iter().filter(|h| !theirs.contains(h)) {
            if cached.exists([&h]).ctx("looking up cached embeddings")? {
                found.push(h);
            }
        }
        Ok(found)
    }

    /// Removes the derived memory of a namespace (snapshots, claims, ops, trajectories, pages
    /// and their revisions), keeping its raw messages and runs, in one transaction, so that it can
    /// be rebuilt from them. Returns whether the namespace exists.
    pub fn clear_memory(&mut self, ns: &trajwiki_core::Namespace) -> Result<bool> {
        let tx = self.write_tx("starting a delete", &[ns.as_str()])?;
        let exists = delete_in(&tx, ns, false)?;
        if exists {
            // Readers holding the memory read it again.
            changes::advance(&tx, ns, true)?;
        }
        tx.commit().ctx("committing a delete")?;
        Ok(exists)
    }
}

/// The schema version of a trajwiki database, 0 for an empty database that `may_create` allows
/// to become one; [`StoreError::Foreign`] for anything else. Reads only.
fn identify(conn: &Connection, path: &Path, may_create: bool) -> Result<u32> {
    let found = (|| -> rusqlite::Result<(i64, u32, i64, bool)> {
        let app = conn.pragma_query_value(None, "application_id", |r| r.get(0))?;
        let version = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
        let objects = conn.query_row("SELECT count(*) FROM sqlite_master", (), |r| r.get(0))?;
        let ours = conn.query_row(
            "SELECT count(*) = 1 FROM sqlite_master WHERE type = 'table' AND name = 'namespaces'",
            (),
            |r| r.get(0),
        )?;
        Ok((app, version, objects, ours))
    })();
    let foreign = |reason: String| StoreError::Foreign {
        path: path.to_path_buf(),
        reason,
    };
    let (app, version, objects, ours) = found.map_err(|e| match e.sqlite_error_code() {
        // The header was checked: only a damaged file is called one.
        Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase) => {
            foreign(format!("it is damaged ({e})"))
        }
        _ if is_access_error(&e) => StoreError::Access {
            path: path.to_path_buf(),
            source: e,
        },
        _ => error::sql_error("reading the schema", e),
    })?;
    let empty = app == 0 && version == 0 && objects == 0;
    // Schema 5 sets the application id; earlier stores are told by their version and tables.
    let known = app == APPLICATION_ID || (app == 0 && version >= 1 && ours);
    if known || (empty && may_create) {
        return Ok(version);
    }
    Err(foreign(if empty {
        "it is an empty SQLite database".into()
    } else {
        format!("it is an SQLite database of another program (application id {app}, user version {version})")
    }))
}

/// [`StoreError::Foreign`] unless the file of `len` bytes at `path` starts as an SQLite
/// database does.
fn check_header(path: &Path, len: u64) -> Result<()> {
    let foreign = |reason: &str| StoreError::Foreign {
        path: path.to_path_buf(),
        reason: reason.into(),
    };
    if len == 0 {
        return Err(foreign("the file is empty"));
    }
    let mut head = [0u8; 16];
    let sqlite = std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
        .is_ok_and(|()| head == *b"SQLite format 3\0");
    if !sqlite {
        return Err(foreign("it is not an SQLite database"));
    }
    Ok(())
}

/// Makes a new store's database in `dir`: written whole under a name of its own, then linked
/// into place unless another process was first (its database is then the store's).
fn create(dir: &Path) -> Result<()> {
    let path = dir.join(DB_FILE);
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let tmp = dir.join(format!(".{DB_FILE}.{}.{stamp}.new", std::process::id()));
    let io = |source| StoreError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let made = (|| -> Result<()> {
        let conn = Connection::open(&tmp).ctx("creating the database")?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .ctx("enabling WAL mode")?;
        let db = Db::Sqlite(conn);
        migrate::SQLITE.apply(&db, &path)?;
        if let Db::Sqlite(conn) = db {
            // Closing checkpoints the log into the file and removes it.
            conn.close()
                .map_err(|(_, e)| e)
                .ctx("closing the new database")?;
        }
        match std::fs::hard_link(&tmp, &path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            // A file system without hard links: renamed, unless another process was first.
            Err(_) if !path.exists() => std::fs::rename(&tmp, &path).map_err(io),
            Err(e) => Err(io(e)),
        }
    })();
    for leftover in ["", "-wal", "-shm"] {
        let mut name = tmp.clone().into_os_string();
        name.push(leftover);
        let _ = std::fs::remove_file(name);
    }
    made
}

/// Opens a database read only. The shared-memory file of WAL mode is made beside it when the
/// directory allows; when it does not (another user's store, a read-only mount), the file is read
/// as immutable (no locks, no log) — unless a write-ahead log beside it holds commits, which an
/// immutable read would miss.
fn open_read_only(path: &Path) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let uri = |extra: &str| format!("file:{}?mode=ro{extra}", uri_path(path));
    let conn = Connection::open_with_flags(uri(""), flags).ctx("opening the database")?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .ctx("setting the busy timeout")?;
    match probe(&conn) {
        Err(e) if is_access_error(&e) => {
            let mut wal = path.as_os_str().to_owned();
            wal.push("-wal");
            if std::fs::metadata(&wal).is_ok_and(|m| m.len() > 0) {
                return Err(StoreError::Access {
                    path: path.to_path_buf(),
                    source: e,
                });
            }
            Connection::open_with_flags(uri("&immutable=1"), flags).ctx("opening the database")
        }
        _ => Ok(conn),
    }
}

/// Whether the file system holding `dir` has (next to) no space left: less than SQLite needs
/// to size a shared-memory file.
fn disk_is_full(dir: &Path) -> bool {
    #[cfg(unix)]
    {
        rustix::fs::statvfs(dir).is_ok_and(|s| s.f_bavail.saturating_mul(s.f_frsize) < 64 * 1024)
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        false
    }
}

/// A first read of the database: what tells whether this user can read it as opened.
fn probe(conn: &Connection) -> rusqlite::Result<()> {
    conn.query_row("SELECT count(*) FROM sqlite_master", (), |_| Ok(()))
}

/// Whether an error says this user may not read or write the store's files (or make the
/// shared-memory file beside them), rather than anything about the database in them.
fn is_access_error(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(
            rusqlite::ErrorCode::ReadOnly
                | rusqlite::ErrorCode::CannotOpen
                | rusqlite::ErrorCode::PermissionDenied
        )
    )
}

/// A path as the path of a `file:` URI: every byte outside the unreserved set and `/`
/// percent-encoded.
fn uri_path(path: &Path) -> String {
    #[cfg(unix)]
    let bytes = std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()).to_vec();
    #[cfg(not(unix))]
    let bytes = path.to_string_lossy().into_owned().into_bytes();
    let mut out = String::new();
    for b in bytes {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Deletes a namespace's derived memory (and with `raw_too` its raw records and itself) inside
/// `tx`. Returns whether the namespace exists.
pub(crate) fn delete_in(tx: &Tx<'_>, ns: &trajwiki_core::Namespace, raw_too: bool) -> Result<bool> {
    const MEMORY: &[&str] = &[
        "DELETE FROM page_trajectories WHERE namespace = ?1",
        "DELETE FROM page_revisions WHERE page IN (SELECT id FROM pages WHERE namespace = ?1)",
        "DELETE FROM page_chunks WHERE namespace = ?1",
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
        "DELETE FROM llm_responses WHERE namespace = ?1",
        "DELETE FROM namespace_generations WHERE namespace = ?1",
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
        tx.execute("UPDATE guard SET allow_delete = 1", ())
            .ctx("opening the delete guard")?;
        let defer = if tx.is_postgres() {
            "SET CONSTRAINTS ALL DEFERRED"
        } else {
            "PRAGMA defer_foreign_keys = ON"
        };
        tx.execute_batch(defer).ctx("deferring foreign keys")?;
        let raw: &[&str] = if raw_too { RAW } else { &[] };
        let chunks: &[&str] = if raw_too && tx.is_postgres() {
            &["DELETE FROM vector_chunks WHERE namespace = ?1"]
        } else {
            &[]
        };
        for sql in MEMORY.iter().chain(chunks).chain(raw) {
            tx.execute(sql, [ns.as_str()]).ctx("deleting records")?;
        }
        tx.execute("UPDATE guard SET allow_delete = 0", ())
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

#[cfg(test)]
mod tests {
    use super::*;
    use trajwiki_core::{Namespace, SourceMessage};

    fn message(ns: &Namespace, seq: u32) -> SourceMessage {
        let ts = chrono::NaiveDate::from_ymd_opt(2024, 5, 1)
            .unwrap()
            .and_hms_opt(10, 0, 0)
            .unwrap();
        let text = format!("message {seq}");
        SourceMessage::new(ns.clone(), 1, seq, "Ann".into(), text, ts, vec![], None)
    }

    /// Every kind of write a connection makes: a message, its vector row, a segment, a delete.
    fn writes(store: &mut Store, ns: &Namespace, seq: u32) -> Vec<Result<()>> {
        let ingested = store.ingest_messages("t", &[message(ns, seq)]).map(drop);
        let rowid = store
            .messages_after(ns, 0)
            .map(|m| m.last().map_or(0, |(rowid, _)| *rowid));
        let vector = [0.5f32; 4];
        let appended = rowid.and_then(|rowid| {
            store
                .append_vectors(ns, "m", VectorDtype::F16, 4, &[(rowid, &vector[..])])
                .map(drop)
        });
        let header = SegmentHeader {
            namespace: ns.to_string(),
            model: "m".into(),
            dim: 4,
            cursor: Cursor::default(),
            messages: 1,
        };
        let segment = store.write_segment(ns, &header, b"payload").map(drop);
        let other = Namespace::new("other").unwrap();
        let deleted = store.delete_namespace(&other).map(drop);
        vec![ingested, appended, segment, deleted]
    }

    fn all_relocated(results: Vec<Result<()>>) {
        for r in results {
            assert!(matches!(r, Err(StoreError::Relocated { .. })), "{r:?}");
        }
    }

    /// A store whose directory is moved while open (issue 49, item 5): every write of the open
    /// connection is refused before anything is written, nothing is made at the old place, and
    /// another connection is refused too, not opened at the old path; moved back, it writes
    /// again. Another store put at the old path is neither written by the open connection nor
    /// reached by a new one.
    #[test]
    fn a_store_moved_or_replaced_while_open_refuses_writes() {
        let root = tempfile::tempdir().unwrap();
        let (at, away) = (root.path().join("store"), root.path().join("moved"));
        let ns = Namespace::new("alice").unwrap();
        let mut store = Store::open(&at).unwrap();
        for r in writes(&mut store, &ns, 1) {
            r.unwrap();
        }
        let opened = store.opened();

        std::fs::rename(&at, &away).unwrap();
        all_relocated(writes(&mut store, &ns, 2));
        assert!(!at.exists(), "something was made at the old place");
        let err = opened.connect().unwrap_err();
        assert!(matches!(err, StoreError::Relocated { .. }), "{err:?}");
        assert!(
            err.to_string()
                .contains("moved or replaced while it was open"),
            "{err}"
        );
        let moved = Store::open_existing(&away).unwrap();
        assert_eq!(moved.namespace_counts(&ns).unwrap(), (1, 0));
        assert!(moved.check().unwrap().ok());

        // Moved back: the same directory, written again.
        std::fs::rename(&away, &at).unwrap();
        for r in writes(&mut store, &ns, 3) {
            r.unwrap();
        }
        opened.connect().unwrap();

        // Another store in its place: the open connection holds the first one's database, a
        // new connection would open the other's; neither writes.
        std::fs::rename(&at, &away).unwrap();
        let other = Store::open(&at).unwrap();
        all_relocated(writes(&mut store, &ns, 4));
        let err = opened.connect().unwrap_err();
        assert!(matches!(err, StoreError::Relocated { .. }), "{err:?}");
        assert!(other.namespaces().unwrap().is_empty());
        assert!(!at.join(VECTOR_DIR).exists());
    }
}
