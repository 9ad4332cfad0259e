//! What a piece of code asks of the store, counted on the calling thread: how many times it
//! enters the database (a transaction, or a statement outside one), how many of those are write
//! transactions, and the statements run. The counts are what an operation costs in round trips
//! and locks (each entry is at least one round trip on PostgreSQL, each write transaction one
//! turn of the write lock), so a test can hold an operation to them (the engine's
//! `tests/append_traffic.rs`).
//!
//! Counting is always on and costs a thread-local add per statement; [`during`] reads it.

use std::cell::Cell;

/// Store traffic; see the [module documentation](self).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Traffic {
    /// Transactions begun plus statements run outside a transaction.
    pub entries: u64,
    /// Write transactions begun.
    pub write_transactions: u64,
    /// Statements run (prepared), inside transactions or not.
    pub statements: u64,
}

thread_local! {
    static COUNTED: Cell<Traffic> = const { Cell::new(Traffic { entries: 0, write_transactions: 0, statements: 0 }) };
}

/// The store traffic `f` caused on this thread (work it hands to other threads is not
/// counted).
pub fn during<T>(f: impl FnOnce() -> T) -> (T, Traffic) {
    let before = COUNTED.with(Cell::get);
    let out = f();
    let after = COUNTED.with(Cell::get);
    let traffic = Traffic {
        entries: after.entries - before.entries,
        write_transactions: after.write_transactions - before.write_transactions,
        statements: after.statements - before.statements,
    };
    (out, traffic)
}

fn add(f: impl FnOnce(&mut Traffic)) {
    COUNTED.with(|c| {
        let mut t = c.get();
        f(&mut t);
        c.set(t);
    });
}

/// A transaction begins (a savepoint of an open one is not counted).
pub(crate) fn begun(write: bool) {
    add(|t| {
        t.entries += 1;
        t.write_transactions += u64::from(write);
    });
}

/// A statement runs, inside a transaction of its connection or on its own.
pub(crate) fn statement(in_transaction: bool) {
    add(|t| {
        t.statements += 1;
        t.entries += u64::from(!in_transaction);
    });
}
