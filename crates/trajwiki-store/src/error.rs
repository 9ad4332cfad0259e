//! Store errors.

use std::path::PathBuf;

/// Everything that can go wrong in the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite failed.
    #[error("database error while {context}")]
    Sqlite {
        /// What the store was doing.
        context: &'static str,
        /// The SQLite error.
        #[source]
        source: rusqlite::Error,
    },
    /// The disk holding the store (or the PostgreSQL server's) is full: the write was rolled
    /// back, nothing of it is kept.
    #[error("the disk holding the store is full (no space left) while {context}; free space and try again")]
    StorageFull {
        /// What the store was doing.
        context: &'static str,
        /// The database's error.
        #[source]
        source: rusqlite::Error,
    },
    /// The store directory could not be created or read. The message ends with the operating
    /// system's reason (as the source's own text), so that it tells why wherever it is shown
    /// alone.
    #[error("cannot use store directory {path}: {source}")]
    Io {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A vector file (or an index segment) could not be read or written. The message ends with
    /// the operating system's reason (`Permission denied (os error 13)`), as for
    /// [`StoreError::Io`].
    #[error("cannot use vector file {path}: {source}")]
    VectorFile {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// No store at the given place.
    #[error("no trajwiki store at {path} (create one with `trajwiki ingest --store {path} FILE`)")]
    NotAStore {
        /// The directory.
        path: PathBuf,
    },
    /// The store's database is not a trajwiki database: another program's SQLite file, an empty
    /// file, a damaged one. Nothing was changed in it.
    #[error("{path} is not a trajwiki store: {reason}")]
    Foreign {
        /// The database file.
        path: PathBuf,
        /// What it is instead.
        reason: String,
    },
    /// The store's files cannot be read by this user as they are: another user's store whose
    /// write-ahead log holds commits (they are read once its owner opens the store), or files
    /// this user may not read.
    #[error("store database {path} cannot be read by this user (its directory does not let this user share its write-ahead log, or its files are not readable); ask its owner to open it once (which folds the log into the database), or give this user read access")]
    Access {
        /// The database file.
        path: PathBuf,
        /// SQLite's error.
        #[source]
        source: rusqlite::Error,
    },
    /// A store of an older schema opened read only: it cannot be upgraded.
    #[error("store {path} has schema version {found} and this trajwiki needs {supported}; opened read only it cannot be upgraded (any command that writes, run by a user who may write it, upgrades it)")]
    NeedsUpgrade {
        /// The database file.
        path: PathBuf,
        /// The version found.
        found: u32,
        /// The version this build writes.
        supported: u32,
    },
    /// A write to a store opened read only.
    #[error("store {path} is open read only ({what} needs to write)")]
    ReadOnly {
        /// The store directory.
        path: PathBuf,
        /// What wanted to write.
        what: &'static str,
    },
    /// A build's commit found the namespace built further by another process meanwhile.
    #[error("namespace {namespace} was built by another process meanwhile")]
    Moved {
        /// The namespace.
        namespace: String,
    },
    /// The store's path no longer leads to the directory this connection opened: the directory
    /// was moved or renamed, or another one took its place. The database file the connection
    /// holds open went with the directory, the files the store names by path would not: the
    /// write was refused before anything of it was written, here or there.
    #[error("the store at {path} was moved or replaced while it was open (the path no longer leads to the directory opened there); nothing was written: open the store at its new place")]
    Relocated {
        /// The store directory as it was opened.
        path: PathBuf,
    },
    /// Changes read after a cursor cannot be merged into records held at another, or the
    /// namespace was replaced meanwhile: the records are to be read again.
    #[error(
        "changes cannot be applied to records held at {held}: {reason}; read the namespace again"
    )]
    Reload {
        /// The cursor of the records held.
        held: String,
        /// Why not.
        reason: String,
    },
    /// A store location (`--store`, a store URI) that names no store this build can open.
    #[error("store location {location:?}: {reason}")]
    Location {
        /// The location as given.
        location: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The database was written by a newer trajwiki.
    #[error("store {path} has schema version {found}, but this trajwiki supports at most {supported}; upgrade trajwiki to open it")]
    NewerSchema {
        /// The database file.
        path: PathBuf,
        /// The version found.
        found: u32,
        /// The newest version this build knows.
        supported: u32,
    },
    /// An incoming record has the identity of a stored one but different content.
    #[error(
        "conflicting {kind} {id}{}: the store holds {existing}, the input has {incoming}",
        differing(fields)
    )]
    Conflict {
        /// What kind of record.
        kind: &'static str,
        /// Its id.
        id: String,
        /// The fields whose values differ, by their JSON names (empty when the two are not
        /// records of one kind, or nothing tells them apart field by field).
        fields: Vec<String>,
        /// The stored version, described.
        existing: String,
        /// The incoming version, described.
        incoming: String,
    },
    /// A session holds a message at the last position there is: no message comes after it.
    #[error("session {session} of namespace {namespace} has a message at position {last}, the last there is; give the message another session")]
    SessionFull {
        /// The namespace.
        namespace: String,
        /// The session.
        session: u32,
        /// Its last position.
        last: u32,
    },
    /// Vectors of another dimension than the one recorded for the model.
    #[error("embedding model `{model}` is recorded with dimension {stored}, got vectors of dimension {got}")]
    EmbeddingDimension {
        /// The model id.
        model: String,
        /// The recorded dimension.
        stored: usize,
        /// The dimension offered.
        got: usize,
    },
    /// A compilation with more insights than SPEC §4 allows.
    #[error("compilation {compilation} has {count} insights; at most {MAX_INSIGHTS} are allowed")]
    TooManyInsights {
        /// The compilation.
        compilation: String,
        /// Insights offered.
        count: usize,
    },
    /// A record refers to one that does not exist.
    #[error("{what} refers to {missing}, which is not in the store")]
    Dangling {
        /// The referring record.
        what: String,
        /// The missing id.
        missing: String,
    },
    /// A stored value could not be decoded: the database was changed outside trajwiki.
    #[error("corrupt value in {table}.{column} of {id}: {reason}")]
    Corrupt {
        /// The table.
        table: &'static str,
        /// The column.
        column: &'static str,
        /// The row's id.
        id: String,
        /// What is wrong.
        reason: String,
    },
}

impl StoreError {
    /// Whether the error is a full disk: the database's own (SQLite's `SQLITE_FULL`, PostgreSQL's
    /// `disk_full`) or a file's (`ENOSPC`).
    pub fn is_storage_full(&self) -> bool {
        match self {
            StoreError::StorageFull { .. } => true,
            StoreError::Io { source, .. } | StoreError::VectorFile { source, .. } => {
                source.kind() == std::io::ErrorKind::StorageFull
            }
            _ => false,
        }
    }
}

/// ` (`a`, `b` differ)` naming the fields of a conflict, or nothing.
fn differing(fields: &[String]) -> String {
    match fields {
        [] => String::new(),
        [one] => format!(" (field `{one}` differs)"),
        many => {
            let names: Vec<String> = many.iter().map(|f| format!("`{f}`")).collect();
            format!(" (fields {} differ)", names.join(", "))
        }
    }
}

/// Whether a database error is a full disk.
pub(crate) fn is_full(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::DiskFull)
}

/// Result alias of the store.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Attaches a context to SQLite errors.
pub(crate) trait SqlContext<T> {
    fn ctx(self, context: &'static str) -> Result<T>;
}

impl<T> SqlContext<T> for std::result::Result<T, rusqlite::Error> {
    fn ctx(self, context: &'static str) -> Result<T> {
        self.map_err(|source| sql_error(context, source))
    }
}

/// A database error as the store's: a full disk named as such.
pub(crate) fn sql_error(context: &'static str, source: rusqlite::Error) -> StoreError {
    if is_full(&source) {
        StoreError::StorageFull { context, source }
    } else {
        StoreError::Sqlite { context, source }
    }
}

/// Insights one compilation may hold (SPEC §4).
pub const MAX_INSIGHTS: usize = 3;
