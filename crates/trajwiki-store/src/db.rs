//! The connection under a store: SQLite (a directory) or PostgreSQL (a server), behind one set of
//! statements.
//!
//! The store's SQL is written once, in the subset both databases read the same way (`?N`
//! parameters, `INSERT … ON CONFLICT`, `RETURNING`, an explicit `rowid` column where ingest
//! order matters). On PostgreSQL each statement is rewritten once (`?N` → `$N`) and prepared
//! once per connection.
//!
//! Values cross in SQLite's model, for both: parameters are anything [`rusqlite::ToSql`]
//! (`params!` as before), columns are read as [`rusqlite::types::FromSql`], and a PostgreSQL
//! value is converted to the SQLite value of the same meaning (a BIGINT or BOOLEAN to an
//! integer, BYTEA to a blob, NUMERIC to an integer or a real). Errors are `rusqlite::Error`s too:
//! a PostgreSQL constraint violation (SQLSTATE class 23, which the immutability triggers raise)
//! is SQLite's `ConstraintViolation`, so every caller tells a conflict from a failure one way;
//! the server's message is kept.

use std::cell::RefCell;
use std::collections::HashMap;
use std::error::Error as StdError;
use std::sync::Arc;

use bytes::BytesMut;
use postgres::types::{FromSql, IsNull, ToSql as PgToSql, Type};
use rusqlite::types::{ToSqlOutput, Value, ValueRef};
use rusqlite::ToSql;

type SqlResult<T> = rusqlite::Result<T>;

/// A connection to the store's database.
pub(crate) enum Db {
    Sqlite(rusqlite::Connection),
    Postgres(Box<Pg>),
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Db::Sqlite(c) => c.fmt(f),
            Db::Postgres(_) => f.write_str("Db::Postgres"),
        }
    }
}

/// A PostgreSQL connection, the statements it prepared (by their SQLite text) and the rows its
/// open transaction inserted, by table.
pub(crate) struct Pg {
    client: RefCell<postgres::Client>,
    prepared: RefCell<HashMap<String, Prepared>>,
    grown: RefCell<HashMap<Arc<str>, u64>>,
    /// Whether a transaction is open (SQLite's connection knows it; PostgreSQL's client does
    /// not say).
    open: std::cell::Cell<bool>,
}

/// A statement PostgreSQL prepared, and the table it inserts into (`INSERT INTO t …`).
#[derive(Clone)]
pub(crate) struct Prepared {
    stmt: postgres::Statement,
    inserts: Option<Arc<str>>,
}

/// How many rows one transaction inserts into a table before the commit has PostgreSQL analyse
/// it (see [`Pg::analyse_grown`]).
const ANALYSE_AFTER_ROWS: u64 = 1_000;

/// Statement parameters: `params![…]`, an array of one type, or `()` for none.
pub(crate) trait Params {
    fn list(&self) -> Vec<&dyn ToSql>;
}

impl Params for () {
    fn list(&self) -> Vec<&dyn ToSql> {
        Vec::new()
    }
}

impl Params for &[&dyn ToSql] {
    fn list(&self) -> Vec<&dyn ToSql> {
        self.to_vec()
    }
}

impl<T: ToSql, const N: usize> Params for [T; N] {
    fn list(&self) -> Vec<&dyn ToSql> {
        self.iter().map(|p| p as &dyn ToSql).collect()
    }
}

impl<T: ToSql, const N: usize> Params for &[T; N] {
    fn list(&self) -> Vec<&dyn ToSql> {
        self.iter().map(|p| p as &dyn ToSql).collect()
    }
}

/// One result row, of either database.
pub(crate) enum Row<'a> {
    Sqlite(&'a rusqlite::Row<'a>),
    Postgres(&'a postgres::Row),
}

impl Row<'_> {
    /// Column `idx` as `T`.
    pub(crate) fn get<T: rusqlite::types::FromSql>(&self, idx: usize) -> SqlResult<T> {
        match self {
            Row::Sqlite(r) => r.get(idx),
            Row::Postgres(r) => {
                if idx >= r.len() {
                    return Err(rusqlite::Error::InvalidColumnIndex(idx));
                }
                let AnyValue(value) = r.try_get(idx).map_err(|e| {
                    rusqlite::Error::FromSqlConversionFailure(
                        idx,
                        rusqlite::types::Type::Null,
                        Box::new(e),
                    )
                })?;
                T::column_result(ValueRef::from(&value)).map_err(|e| match e {
                    rusqlite::types::FromSqlError::InvalidType => {
                        rusqlite::Error::InvalidColumnType(
                            idx,
                            r.columns()[idx].name().to_string(),
                            ValueRef::from(&value).data_type(),
                        )
                    }
                    rusqlite::types::FromSqlError::OutOfRange(i) => {
                        rusqlite::Error::IntegralValueOutOfRange(idx, i)
                    }
                    other => rusqlite::Error::FromSqlConversionFailure(
                        idx,
                        ValueRef::from(&value).data_type(),
                        Box::new(other),
                    ),
                })
            }
        }
    }
}

impl Row<'_> {
    /// The row as a tuple of its columns, in order.
    pub(crate) fn tuple<T: FromRow>(&self) -> SqlResult<T> {
        T::from_row(self)
    }
}

/// A tuple read from a row's columns.
pub(crate) trait FromRow: Sized {
    fn from_row(row: &Row<'_>) -> SqlResult<Self>;
}

macro_rules! from_row {
    ($($t:ident $i:tt),+) => {
        impl<$($t: rusqlite::types::FromSql),+> FromRow for ($($t,)+) {
            fn from_row(row: &Row<'_>) -> SqlResult<Self> {
                Ok(($(row.get::<$t>($i)?,)+))
            }
        }
    };
}

from_row!(A 0, B 1);
from_row!(A 0, B 1, C 2);
from_row!(A 0, B 1, C 2, D 3);
from_row!(A 0, B 1, C 2, D 3, E 4);
from_row!(A 0, B 1, C 2, D 3, E 4, F 5);
from_row!(A 0, B 1, C 2, D 3, E 4, F 5, G 6);
from_row!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);
from_row!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8);
from_row!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9);
from_row!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10);
from_row!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11);

/// A prepared statement.
pub(crate) enum Stmt<'a> {
    Sqlite(rusqlite::Statement<'a>),
    SqliteCached(rusqlite::CachedStatement<'a>),
    Postgres(&'a Pg, Prepared),
}

impl<'a> Stmt<'a> {
    /// The statement and its parameters' values: SQLite's, or PostgreSQL's.
    fn split(&mut self) -> Result<&mut rusqlite::Statement<'a>, (&'a Pg, &Prepared)> {
        match self {
            Stmt::Sqlite(s) => Ok(s),
            Stmt::SqliteCached(s) => Ok(s),
            Stmt::Postgres(pg, stmt) => Err((*pg, stmt)),
        }
    }

    /// Runs the statement; the number of rows it changed.
    pub(crate) fn execute(&mut self, params: impl Params) -> SqlResult<usize> {
        let list = params.list();
        match self.split() {
            Ok(s) => s.execute(rusqlite::params_from_iter(list)),
            Err((pg, stmt)) => pg.execute_prepared(stmt, &list),
        }
    }

    /// The rows of the query, each through `f`.
    pub(crate) fn query_map<'s, T, F>(
        &'s mut self,
        params: impl Params,
        mut f: F,
    ) -> SqlResult<Box<dyn Iterator<Item = SqlResult<T>> + 's>>
    where
        F: FnMut(&Row<'_>) -> SqlResult<T> + 's,
        T: 's,
    {
        let list = params.list();
        match self.split() {
            Ok(s) => {
                let rows = s.query_map(rusqlite::params_from_iter(list), move |r| {
                    f(&Row::Sqlite(r))
                })?;
                Ok(Box::new(rows))
            }
            Err((pg, stmt)) => {
                let rows = pg.query_prepared(stmt, &list)?;
                let out: Vec<SqlResult<T>> = rows.iter().map(|r| f(&Row::Postgres(r))).collect();
                Ok(Box::new(out.into_iter()))
            }
        }
    }

    /// The first row through `f`; [`rusqlite::Error::QueryReturnedNoRows`] when there is none.
    pub(crate) fn query_row<T>(
        &mut self,
        params: impl Params,
        f: impl FnOnce(&Row<'_>) -> SqlResult<T>,
    ) -> SqlResult<T> {
        let list = params.list();
        match self.split() {
            Ok(s) => s.query_row(rusqlite::params_from_iter(list), |r| f(&Row::Sqlite(r))),
            Err((pg, stmt)) => match pg.query_prepared(stmt, &list)?.first() {
                Some(r) => f(&Row::Postgres(r)),
                None => Err(rusqlite::Error::QueryReturnedNoRows),
            },
        }
    }

    /// Whether the query returns a row.
    pub(crate) fn exists(&mut self, params: impl Params) -> SqlResult<bool> {
        let list = params.list();
        match self.split() {
            Ok(s) => s.exists(rusqlite::params_from_iter(list)),
            Err((pg, stmt)) => Ok(!pg.query_prepared(stmt, &list)?.is_empty()),
        }
    }
}

/// How a transaction starts.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Begin<'a> {
    /// A write to these namespaces. SQLite takes its write lock at once (one writer per store);
    /// PostgreSQL takes an advisory lock per namespace, held until the end of the transaction, so
    /// that the writers of one namespace take turns and those of others go on meanwhile. A write
    /// that names none (content-addressed caches: embeddings) takes no lock on PostgreSQL.
    Write(&'a [&'a str]),
    /// [`Begin::Write`] that also holds, on PostgreSQL, the build lock of each namespace (the
    /// advisory lock [`Store::lock_builds`](crate::Store::lock_builds) holds for a session)
    /// until the end of the transaction: taken before the write locks, as every builder takes
    /// them, so a build made inside one transaction needs no connection of its own for it.
    Building(&'a [&'a str]),
    /// Reads that see one state of the store throughout.
    Read,
}

impl Begin<'_> {
    /// The advisory locks a PostgreSQL transaction begun so takes, in the one order every
    /// writer takes them (so that two cannot deadlock): a namespace's build lock (its class
    /// is the lower) before the write locks.
    fn postgres_locks(self) -> Vec<(i32, i32)> {
        let (namespaces, building): (&[&str], bool) = match self {
            Begin::Write(namespaces) => (namespaces, false),
            Begin::Building(namespaces) => (namespaces, true),
            Begin::Read => (&[], false),
        };
        let mut keys: Vec<(i32, i32)> = namespaces
            .iter()
            .map(|ns| postgres_write_lock(ns))
            .collect();
        if building {
            keys.extend(namespaces.iter().map(|ns| postgres_build_lock(ns)));
        }
        keys.sort_unstable();
        keys.dedup();
        keys
    }
}

/// The advisory lock the builds of namespace `ns` take turns by on PostgreSQL (see
/// [`Store::lock_builds`](crate::Store::lock_builds)): the write lock's second key, a class of
/// its own.
pub(crate) fn postgres_build_lock(ns: &str) -> (i32, i32) {
    (
        crate::build_lock::POSTGRES_BUILD_CLASS,
        postgres_write_lock(ns).1,
    )
}

/// The advisory lock a PostgreSQL store's writers of namespace `ns` hold for the length of each
/// write transaction, as the two keys of `pg_advisory_xact_lock(int, int)`: a fixed first key and
/// FNV-1a of the name, so that every process locks the same one for it (two namespaces sharing
/// one only take turns). An operator's script that holds it keeps the namespace's writers waiting.
pub fn postgres_write_lock(ns: &str) -> (i32, i32) {
    let hash = ns.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    (0x5457_4b49, hash as i32)
}

/// A transaction: rolled back when dropped without [`commit`](Tx::commit). One begun while
/// another is open on the connection (an operation that makes several writes one transaction,
/// [`Store::write_as_one`](crate::Store::write_as_one)) is a savepoint of it: committing
/// releases the savepoint, rolling back undoes what was done since it, and the outer
/// transaction decides.
pub(crate) struct Tx<'a> {
    db: &'a Db,
    open: bool,
    nested: bool,
}

/// The savepoint a nested [`Tx`] is (savepoints of one name stack).
const NESTED: &str = "trajwiki_nested";

impl std::ops::Deref for Tx<'_> {
    type Target = Db;

    fn deref(&self) -> &Db {
        self.db
    }
}

impl Tx<'_> {
    pub(crate) fn commit(mut self) -> SqlResult<()> {
        self.open = false;
        self.db.end(true, self.nested)
    }

    pub(crate) fn rollback(mut self) -> SqlResult<()> {
        self.open = false;
        self.db.end(false, self.nested)
    }

    /// Leaves the transaction open past this value's life: the caller ends it with
    /// [`Db::end`].
    pub(crate) fn detach(mut self) -> bool {
        self.open = false;
        self.nested
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        if self.open {
            let _ = self.db.end(false, self.nested);
        }
    }
}

impl Db {
    /// Connects to the PostgreSQL server `url` names.
    pub(crate) fn connect_postgres(url: &str) -> SqlResult<Db> {
        let client = postgres::Client::connect(url, postgres::NoTls).map_err(pg_error)?;
        Ok(Db::Postgres(Box::new(Pg {
            client: RefCell::new(client),
            prepared: RefCell::new(HashMap::new()),
            grown: RefCell::new(HashMap::new()),
            open: std::cell::Cell::new(false),
        })))
    }

    /// Rows counted towards [`Pg::analyse_grown`] by a transaction that did not commit.
    fn forget_grown(&self) {
        if let Db::Postgres(pg) = self {
            pg.grown.borrow_mut().clear();
        }
    }

    pub(crate) fn is_postgres(&self) -> bool {
        matches!(self, Db::Postgres(_))
    }

    /// The SQLite connection (SQLite-only maintenance: pragmas, checkpoints, `VACUUM`).
    pub(crate) fn sqlite(&self) -> Option<&rusqlite::Connection> {
        match self {
            Db::Sqlite(c) => Some(c),
            Db::Postgres(_) => None,
        }
    }

    /// Starts a transaction.
    /// Whether a transaction is open on this connection.
    pub(crate) fn in_transaction(&self) -> bool {
        match self {
            Db::Sqlite(c) => !c.is_autocommit(),
            Db::Postgres(pg) => pg.open.get(),
        }
    }

    /// Ends the transaction [`begin`](Db::begin) started (`nested`: the savepoint it made).
    pub(crate) fn end(&self, commit: bool, nested: bool) -> SqlResult<()> {
        if nested {
            return match commit {
                true => self.execute_batch(&format!("RELEASE SAVEPOINT {NESTED}")),
                false => self.execute_batch(&format!(
                    "ROLLBACK TO SAVEPOINT {NESTED}; RELEASE SAVEPOINT {NESTED}"
                )),
            };
        }
        if let Db::Postgres(pg) = self {
            pg.open.set(false);
        }
        if !commit {
            self.forget_grown();
            return self.execute_batch("ROLLBACK");
        }
        let committed = self.execute_batch("COMMIT");
        match (self, &committed) {
            (Db::Postgres(pg), Ok(())) => pg.analyse_grown(),
            _ => self.forget_grown(),
        }
        // A commit SQLite refused (a busy or full database) leaves the transaction open.
        if committed.is_err() && self.in_transaction() {
            let _ = self.execute_batch("ROLLBACK");
        }
        committed
    }

    /// Starts a transaction, or a savepoint of the one open (see [`Tx`]).
    pub(crate) fn begin(&self, how: Begin<'_>) -> SqlResult<Tx<'_>> {
        if self.in_transaction() {
            let mut sql = format!("SAVEPOINT {NESTED};");
            // The namespaces' write locks, for those the outer transaction did not name.
            if let Db::Postgres(_) = self {
                for (class, key) in how.postgres_locks() {
                    sql.push_str(&format!(" SELECT pg_advisory_xact_lock({class}, {key});"));
                }
            }
            self.execute_batch(&sql)?;
            return Ok(Tx {
                db: self,
                open: true,
                nested: true,
            });
        }
        match (self, how) {
            (Db::Sqlite(c), Begin::Write(_) | Begin::Building(_)) => {
                c.execute_batch("BEGIN IMMEDIATE")?
            }
            (Db::Sqlite(c), Begin::Read) => c.execute_batch("BEGIN DEFERRED")?,
            (Db::Postgres(_), Begin::Write(_) | Begin::Building(_)) => {
                let keys = how.postgres_locks();
                // The transaction and its locks in one round trip (the keys are integers).
                let mut sql = String::from("BEGIN;");
                for (class, key) in keys {
                    sql.push_str(&format!(" SELECT pg_advisory_xact_lock({class}, {key});"));
                }
                if let Err(e) = self.execute_batch(&sql) {
                    // A lock not taken (a deadlock, a cancel) leaves the transaction open.
                    let _ = self.execute_batch("ROLLBACK");
                    return Err(e);
                }
            }
            (Db::Postgres(_), Begin::Read) => {
                self.execute_batch("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")?
            }
        }
        crate::traffic::begun(!matches!(how, Begin::Read));
        if let Db::Postgres(pg) = self {
            pg.open.set(true);
        }
        Ok(Tx {
            db: self,
            open: true,
            nested: false,
        })
    }

    pub(crate) fn execute_batch(&self, sql: &str) -> SqlResult<()> {
        match self {
            Db::Sqlite(c) => c.execute_batch(sql),
            Db::Postgres(pg) => pg.client.borrow_mut().batch_execute(sql).map_err(pg_error),
        }
    }

    pub(crate) fn prepare(&self, sql: &str) -> SqlResult<Stmt<'_>> {
        crate::traffic::statement(self.in_transaction());
        #[cfg(test)]
        recorded::note(sql);
        match self {
            Db::Sqlite(c) => Ok(Stmt::Sqlite(c.prepare(sql)?)),
            Db::Postgres(pg) => Ok(Stmt::Postgres(pg, pg.prepare(sql)?)),
        }
    }

    /// [`prepare`](Db::prepare), kept for the next call with the same text.
    pub(crate) fn prepare_cached(&self, sql: &str) -> SqlResult<Stmt<'_>> {
        crate::traffic::statement(self.in_transaction());
        #[cfg(test)]
        recorded::note(sql);
        match self {
            Db::Sqlite(c) => Ok(Stmt::SqliteCached(c.prepare_cached(sql)?)),
            Db::Postgres(pg) => Ok(Stmt::Postgres(pg, pg.prepare(sql)?)),
        }
    }

    pub(crate) fn execute(&self, sql: &str, params: impl Params) -> SqlResult<usize> {
        crate::traffic::statement(self.in_transaction());
        match self {
            Db::Sqlite(c) => c
                .prepare_cached(sql)?
                .execute(rusqlite::params_from_iter(params.list())),
            Db::Postgres(pg) => {
                let stmt = pg.prepare(sql)?;
                pg.execute_prepared(&stmt, &params.list())
            }
        }
    }

    pub(crate) fn query_row<T>(
        &self,
        sql: &str,
        params: impl Params,
        f: impl FnOnce(&Row<'_>) -> SqlResult<T>,
    ) -> SqlResult<T> {
        #[cfg(test)]
        recorded::note(sql);
        match self {
            // (PostgreSQL's is counted by `prepare_cached`.)
            Db::Sqlite(c) => {
                crate::traffic::statement(self.in_transaction());
                c.prepare_cached(sql)?
            }
            .query_row(rusqlite::params_from_iter(params.list()), |r| {
                f(&Row::Sqlite(r))
            }),
            Db::Postgres(_) => self.prepare_cached(sql)?.query_row(params, f),
        }
    }
}

impl Pg {
    fn prepare(&self, sql: &str) -> SqlResult<Prepared> {
        if let Some(s) = self.prepared.borrow().get(sql) {
            return Ok(s.clone());
        }
        let stmt = self
            .client
            .borrow_mut()
            .prepare(&to_postgres(sql))
            .map_err(pg_error)?;
        let mut words = sql.split_whitespace();
        let inserts = match (words.next(), words.next(), words.next()) {
            (Some(i), Some(into), Some(table))
                if i.eq_ignore_ascii_case("INSERT") && into.eq_ignore_ascii_case("INTO") =>
            {
                Some(Arc::from(table.split('(').next().unwrap_or(table)))
            }
            _ => None,
        };
        let prepared = Prepared { stmt, inserts };
        self.prepared
            .borrow_mut()
            .insert(sql.to_string(), prepared.clone());
        Ok(prepared)
    }

    /// Counts `rows` inserted by `stmt` towards its table's growth in this transaction.
    fn grew(&self, stmt: &Prepared, rows: u64) {
        if let Some(table) = &stmt.inserts {
            *self.grown.borrow_mut().entry(table.clone()).or_default() += rows;
        }
    }

    /// After a commit, has PostgreSQL analyse the tables the transaction grew by at least
    /// [`ANALYSE_AFTER_ROWS`] rows. A connection keeps its statements prepared, and PostgreSQL
    /// keeps the plan it made for a statement once it has run a few times: a statement first run
    /// while its tables were empty (a store's first ingest and build) keeps a plan that scans
    /// them whole — 0.9 ms for one message's look-up at 4,000 messages, growing with them —
    /// until the tables' statistics change, which autovacuum does a minute or more later. Fresh
    /// statistics replace those plans at once. A failure (a role that does not own the tables is
    /// only warned) leaves the plans to autovacuum: the commit stands.
    fn analyse_grown(&self) {
        let mut tables: Vec<Arc<str>> = self
            .grown
            .borrow_mut()
            .drain()
            .filter(|(_, rows)| *rows >= ANALYSE_AFTER_ROWS)
            .map(|(table, _)| table)
            .collect();
        if tables.is_empty() {
            return;
        }
        tables.sort_unstable();
        let sql = format!("ANALYZE {}", tables.join(", "));
        let _ = self.client.borrow_mut().batch_execute(&sql);
    }

    fn values(params: &[&dyn ToSql]) -> SqlResult<Vec<PgValue>> {
        params
            .iter()
            .map(|p| match p.to_sql()? {
                ToSqlOutput::Borrowed(v) => Ok(PgValue(owned(v))),
                ToSqlOutput::Owned(v) => Ok(PgValue(v)),
                _ => Err(rusqlite::Error::ToSqlConversionFailure(
                    "a parameter PostgreSQL cannot take".into(),
                )),
            })
            .collect()
    }

    fn execute_prepared(&self, stmt: &Prepared, params: &[&dyn ToSql]) -> SqlResult<usize> {
        let values = Self::values(params)?;
        let refs: Vec<&(dyn PgToSql + Sync)> =
            values.iter().map(|v| v as &(dyn PgToSql + Sync)).collect();
        let n = self
            .client
            .borrow_mut()
            .execute(&stmt.stmt, &refs)
            .map_err(pg_error)?;
        self.grew(stmt, n);
        Ok(n as usize)
    }

    fn query_prepared(
        &self,
        stmt: &Prepared,
        params: &[&dyn ToSql],
    ) -> SqlResult<Vec<postgres::Row>> {
        let values = Self::values(params)?;
        let refs: Vec<&(dyn PgToSql + Sync)> =
            values.iter().map(|v| v as &(dyn PgToSql + Sync)).collect();
        let rows = self
            .client
            .borrow_mut()
            .query(&stmt.stmt, &refs)
            .map_err(pg_error)?;
        // An insert that returns rows returns the ones it inserted.
        self.grew(stmt, rows.len() as u64);
        Ok(rows)
    }
}

/// The statement as PostgreSQL reads it: `?N` → `$N`, a bare `?` → the next number; quoted text
/// is left as it is.
pub(crate) fn to_postgres(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut chars = sql.chars().peekable();
    let (mut quote, mut next) = (None::<char>, 1usize);
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => {
                quote = None;
                out.push(c);
            }
            (Some(_), c) => out.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                out.push(c);
            }
            (None, '?') => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                let n = digits.parse().unwrap_or(next);
                next = n + 1;
                out.push('$');
                out.push_str(&n.to_string());
            }
            (None, c) => out.push(c),
        }
    }
    out
}

/// A PostgreSQL error as the SQLite error of the same meaning, with the server's message.
pub(crate) fn pg_error(e: postgres::Error) -> rusqlite::Error {
    use rusqlite::ffi;
    let code = match e.code().map(|c| c.code()) {
        Some(c) if c.starts_with("23") => ffi::SQLITE_CONSTRAINT,
        // disk_full: the server has no space left for the write.
        Some("53100") => ffi::SQLITE_FULL,
        Some("40001" | "40P01" | "55P03") => ffi::SQLITE_BUSY,
        Some(c) if c.starts_with("08") => ffi::SQLITE_CANTOPEN,
        None if e.is_closed() => ffi::SQLITE_CANTOPEN,
        _ => ffi::SQLITE_ERROR,
    };
    let message = match e.as_db_error() {
        Some(db) => match db.detail() {
            Some(detail) => format!("PostgreSQL: {} ({detail})", db.message()),
            None => format!("PostgreSQL: {}", db.message()),
        },
        None => match e.source() {
            Some(source) => format!("PostgreSQL: {e}: {source}"),
            None => format!("PostgreSQL: {e}"),
        },
    };
    rusqlite::Error::SqliteFailure(ffi::Error::new(code), Some(message))
}

/// A parameter, converted to the type PostgreSQL expects at its place.
#[derive(Debug)]
struct PgValue(Value);

type BoxError = Box<dyn StdError + Sync + Send>;

impl PgToSql for PgValue {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        let mismatch = || -> BoxError {
            format!(
                "a {:?} value cannot be a parameter of type {ty}",
                self.0.data_type()
            )
            .into()
        };
        match &self.0 {
            Value::Null => Ok(IsNull::Yes),
            Value::Integer(i) => match *ty {
                Type::INT8 => put(*i, ty, out),
                Type::INT4 => put(i32::try_from(*i)?, ty, out),
                Type::INT2 => put(i16::try_from(*i)?, ty, out),
                Type::BOOL => put(*i != 0, ty, out),
                Type::FLOAT8 => put(*i as f64, ty, out),
                Type::FLOAT4 => put(*i as f32, ty, out),
                Type::TEXT | Type::VARCHAR | Type::UNKNOWN => put(i.to_string(), ty, out),
                _ => Err(mismatch()),
            },
            Value::Real(x) => match *ty {
                Type::FLOAT8 => put(*x, ty, out),
                Type::FLOAT4 => put(*x as f32, ty, out),
                _ => Err(mismatch()),
            },
            Value::Text(s) => match *ty {
                Type::TEXT | Type::VARCHAR | Type::NAME | Type::BPCHAR | Type::UNKNOWN => {
                    put(s.as_str(), &Type::TEXT, out)
                }
                _ => Err(mismatch()),
            },
            Value::Blob(b) => match *ty {
                Type::BYTEA => put(b.as_slice(), ty, out),
                _ => Err(mismatch()),
            },
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    postgres::types::to_sql_checked!();
}

fn put<T: PgToSql>(v: T, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
    v.to_sql(ty, out)
}

fn owned(v: ValueRef<'_>) -> Value {
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Integer(i),
        ValueRef::Real(x) => Value::Real(x),
        ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Value::Blob(b.to_vec()),
    }
}

/// A column of any type PostgreSQL returns for the store's queries, as a SQLite value.
struct AnyValue(Value);

impl<'a> FromSql<'a> for AnyValue {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
        Ok(AnyValue(match *ty {
            Type::BOOL => Value::Integer(i64::from(bool::from_sql(ty, raw)?)),
            Type::INT2 => Value::Integer(i16::from_sql(ty, raw)?.into()),
            Type::INT4 => Value::Integer(i32::from_sql(ty, raw)?.into()),
            Type::INT8 => Value::Integer(i64::from_sql(ty, raw)?),
            Type::OID => Value::Integer(u32::from_sql(ty, raw)?.into()),
            Type::FLOAT4 => Value::Real(f32::from_sql(ty, raw)?.into()),
            Type::FLOAT8 => Value::Real(f64::from_sql(ty, raw)?),
            Type::NUMERIC => numeric(raw)?,
            Type::BYTEA => Value::Blob(raw.to_vec()),
            Type::TEXT | Type::VARCHAR | Type::NAME | Type::BPCHAR | Type::UNKNOWN => {
                Value::Text(String::from_sql(ty, raw)?)
            }
            _ => return Err(format!("a column of type {ty}").into()),
        }))
    }

    fn from_sql_null(_: &Type) -> Result<Self, BoxError> {
        Ok(AnyValue(Value::Null))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

/// A NUMERIC in PostgreSQL's binary form (what `sum` of integers returns): an integer when it
/// has no fraction and fits, else a real.
fn numeric(raw: &[u8]) -> Result<Value, BoxError> {
    let word = |i: usize| -> Result<i16, BoxError> {
        raw.get(2 * i..2 * i + 2)
            .map(|b| i16::from_be_bytes([b[0], b[1]]))
            .ok_or_else(|| "a truncated NUMERIC".into())
    };
    let (ndigits, weight, sign, scale) = (word(0)?, word(1)?, word(2)? as u16, word(3)?);
    if sign == 0xC000 {
        return Ok(Value::Null); // NaN
    }
    let mut value = 0f64;
    let mut exact = 0i128;
    for i in 0..ndigits as usize {
        let d = word(4 + i)?;
        let power = i32::from(weight) - i as i32;
        value += f64::from(d) * 10_000f64.powi(power);
        if power >= 0 {
            exact = exact
                .checked_mul(10_000)
                .and_then(|e| e.checked_add(d.into()))
                .unwrap_or(i128::MAX);
        }
    }
    let trailing = i32::from(weight) + 1 - i32::from(ndigits);
    if trailing > 0 {
        exact = exact
            .checked_mul(10_000i128.pow(trailing as u32))
            .unwrap_or(i128::MAX);
    }
    let negative = sign == 0x4000;
    if scale == 0 {
        if let Ok(i) = i64::try_from(if negative { -exact } else { exact }) {
            return Ok(Value::Integer(i));
        }
    }
    Ok(Value::Real(if negative { -value } else { value }))
}

/// Tests: the statements a piece of code runs on this thread, to be explained.
#[cfg(test)]
pub(crate) mod recorded {
    use std::cell::RefCell;

    thread_local! {
        static STATEMENTS: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
    }

    /// Notes `sql` while recording.
    pub(crate) fn note(sql: &str) {
        STATEMENTS.with(|s| {
            if let Some(list) = s.borrow_mut().as_mut() {
                list.push(sql.to_string());
            }
        });
    }

    /// The statements `f` prepared or ran (queries, not `execute_batch`), in order.
    pub(crate) fn during<T>(f: impl FnOnce() -> T) -> (T, Vec<String>) {
        STATEMENTS.with(|s| *s.borrow_mut() = Some(Vec::new()));
        let out = f();
        let list = STATEMENTS
            .with(|s| s.borrow_mut().take())
            .unwrap_or_default();
        (out, list)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_numbered_for_postgres() {
        assert_eq!(
            to_postgres("SELECT a FROM t WHERE b = ?1 AND c = ?2 OR d = ?1"),
            "SELECT a FROM t WHERE b = $1 AND c = $2 OR d = $1"
        );
        assert_eq!(to_postgres("VALUES (?, ?, ?)"), "VALUES ($1, $2, $3)");
        assert_eq!(
            to_postgres("SELECT '?1' || ? FROM \"a?\""),
            "SELECT '?1' || $1 FROM \"a?\""
        );
    }

    #[test]
    fn numerics_become_integers_or_reals() {
        // 12345678 = [1234, 5678], weight 1, scale 0.
        let raw = [0, 2, 0, 1, 0, 0, 0, 0, 4, 210, 22, 46];
        assert_eq!(numeric(&raw).unwrap(), Value::Integer(12_345_678));
        // -20000 = [2], weight 1, negative.
        let raw = [0, 1, 0, 1, 0x40, 0, 0, 0, 0, 2];
        assert_eq!(numeric(&raw).unwrap(), Value::Integer(-20_000));
        // 0: no digits.
        assert_eq!(
            numeric(&[0, 0, 0, 0, 0, 0, 0, 0]).unwrap(),
            Value::Integer(0)
        );
        // 1.5 = [1, 5000], weight 0, scale 1.
        let raw = [0, 2, 0, 0, 0, 0, 0, 1, 0, 1, 19, 136];
        assert_eq!(numeric(&raw).unwrap(), Value::Real(1.5));
    }
}

/// Rows a multi-row statement writes at most.
pub(crate) const MAX_ROWS: usize = 256;

/// The rows of each multi-row statement that writes `n` rows: runs of powers of two of at most
/// [`MAX_ROWS`], largest first (13 rows: 8, 4, 1). `n` rows are a few statements — a round trip
/// each on PostgreSQL — and the statement texts kept prepared stay few.
pub(crate) fn row_runs(n: usize) -> Vec<std::ops::Range<usize>> {
    let mut runs = Vec::new();
    let mut at = 0;
    while at < n {
        let left = (n - at).min(MAX_ROWS);
        let size = 1 << left.ilog2();
        runs.push(at..at + size);
        at += size;
    }
    runs
}

/// `(?first, …), (…)`: `rows` tuples of `width` numbered parameters, from `?first` on.
pub(crate) fn tuples(first: usize, width: usize, rows: usize) -> String {
    (0..rows)
        .map(|r| {
            let cells: Vec<String> = (0..width)
                .map(|c| format!("?{}", first + r * width + c))
                .collect();
            format!("({})", cells.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `?first, …`: `n` numbered parameters, for `IN (…)`.
pub(crate) fn numbered(first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `ids` in lists for `IN (…)`: runs of at most [`MAX_ROWS`], the last one padded to a power of
/// two by repeating its last id (which `IN` does not mind), so that the texts stay few.
pub(crate) fn id_lists<'a>(ids: &[&'a str]) -> Vec<Vec<&'a str>> {
    ids.chunks(MAX_ROWS)
        .map(|run| {
            let mut run = run.to_vec();
            let last = run[run.len() - 1];
            run.resize(run.len().next_power_of_two(), last);
            run
        })
        .collect()
}

/// Writes `rows` of `width` values as `INSERT INTO {into} VALUES (…), (…) {tail}`, in the runs
/// of [`row_runs`]; `what` names them in an error.
pub(crate) fn insert_rows(
    tx: &Db,
    into: &str,
    width: usize,
    tail: &str,
    rows: &[Vec<&dyn ToSql>],
    what: &'static str,
) -> crate::error::Result<()> {
    use crate::error::SqlContext;
    for (sql, params) in insert_runs(into, width, tail, rows) {
        tx.prepare_cached(&sql)
            .and_then(|mut stmt| stmt.execute(&params[..]))
            .ctx(what)?;
    }
    Ok(())
}

/// The statements of [`insert_rows`]: a text and its parameters for each run of rows.
fn insert_runs<'a>(
    into: &str,
    width: usize,
    tail: &str,
    rows: &[Vec<&'a dyn ToSql>],
) -> Vec<(String, Vec<&'a dyn ToSql>)> {
    row_runs(rows.len())
        .into_iter()
        .map(|run| {
            let sql = format!(
                "INSERT INTO {into} VALUES {} {tail}",
                tuples(1, width, run.len())
            );
            (sql, rows[run].iter().flatten().copied().collect())
        })
        .collect()
}

/// [`insert_rows`] with a `RETURNING` tail: the first column of the rows returned.
pub(crate) fn insert_rows_returning(
    tx: &Db,
    into: &str,
    width: usize,
    tail: &str,
    rows: &[Vec<&dyn ToSql>],
    what: &'static str,
) -> crate::error::Result<std::collections::HashSet<String>> {
    use crate::error::SqlContext;
    let mut returned = std::collections::HashSet::new();
    for (sql, params) in insert_runs(into, width, tail, rows) {
        let mut stmt = tx.prepare_cached(&sql).ctx(what)?;
        let found = stmt
            .query_map(&params[..], |row| row.get::<String>(0))
            .ctx(what)?
            .collect::<SqlResult<Vec<_>>>()
            .ctx(what)?;
        returned.extend(found);
    }
    Ok(returned)
}

/// Which of `ids` are ids of table `table`.
pub(crate) fn known_ids(
    tx: &Db,
    table: &str,
    ids: &[&str],
) -> crate::error::Result<std::collections::HashSet<String>> {
    use crate::error::SqlContext;
    let mut known = std::collections::HashSet::new();
    for list in id_lists(ids) {
        let params: Vec<&dyn ToSql> = list.iter().map(|id| id as &dyn ToSql).collect();
        let mut stmt = tx
            .prepare_cached(&format!(
                "SELECT id FROM {table} WHERE id IN ({})",
                numbered(1, list.len())
            ))
            .ctx("reading the ids a record refers to")?;
        let found = stmt
            .query_map(&params[..], |row| row.get::<String>(0))
            .ctx("reading the ids a record refers to")?
            .collect::<SqlResult<Vec<_>>>()
            .ctx("reading the ids a record refers to")?;
        known.extend(found);
    }
    Ok(known)
}

#[cfg(test)]
mod batch_tests {
    use super::*;

    #[test]
    fn rows_go_in_power_of_two_runs_and_ids_in_padded_lists() {
        assert_eq!(row_runs(0), Vec::<std::ops::Range<usize>>::new());
        assert_eq!(row_runs(13), vec![0..8, 8..12, 12..13]);
        assert_eq!(
            row_runs(600),
            vec![0..256, 256..512, 512..576, 576..592, 592..600]
        );
        assert_eq!(tuples(2, 2, 2), "(?2, ?3), (?4, ?5)");
        assert_eq!(numbered(3, 2), "?3, ?4");
        assert_eq!(id_lists(&["a", "b", "c"]), vec![vec!["a", "b", "c", "c"]]);
        let many: Vec<String> = (0..300).map(|i| i.to_string()).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let lists = id_lists(&many);
        assert_eq!((lists[0].len(), lists[1].len()), (256, 64));
        assert_eq!(lists[1][43], "299");
        assert_eq!(lists[1][63], "299");
    }
}
