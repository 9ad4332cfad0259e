//! Deterministic exports of derived memory.

use std::io::Write;

use serde_json::json;
use trajwiki_core::Namespace;
use trajwiki_store::Store;

/// A failure while exporting.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// Reading the store failed.
    #[error(transparent)]
    Store(#[from] trajwiki_store::StoreError),
    /// Writing failed.
    #[error("cannot write the export")]
    Io(#[from] std::io::Error),
}

/// What an export writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Export {
    /// The source messages, as `trajwiki ingest` reads them back.
    Messages,
    /// The agent runs, as `trajwiki ingest` reads them back.
    Runs,
    /// The derived memory (see [`write_memory`]).
    Memory,
}

/// Records written between two tellings of an export's progress.
const TELL_EVERY: usize = 1_000;

/// Writes `what` of `ns` as JSON lines, telling `told(records written, records in all)` every
/// 1,000 records and at the end; returns the number of lines.
pub fn write(
    store: &Store,
    ns: &Namespace,
    what: Export,
    out: &mut impl Write,
    told: &dyn Fn(usize, usize),
) -> Result<usize, ExportError> {
    match what {
        Export::Messages => {
            let messages = store.messages(ns)?;
            in_chunks(&messages, told, |chunk| {
                trajwiki_ingest::jsonl::write_messages(out, chunk)
            })
        }
        Export::Runs => {
            let runs = store.runs(ns)?;
            in_chunks(&runs, told, |chunk| {
                trajwiki_ingest::jsonl::write_runs(out, chunk)
            })
        }
        Export::Memory => write_memory_told(store, ns, out, told),
    }
}

/// Writes `records` a chunk at a time, telling after each; returns their number.
fn in_chunks<T>(
    records: &[T],
    told: &dyn Fn(usize, usize),
    mut write: impl FnMut(&[T]) -> std::io::Result<()>,
) -> Result<usize, ExportError> {
    told(0, records.len());
    let mut done = 0;
    for chunk in records.chunks(TELL_EVERY) {
        write(chunk)?;
        done += chunk.len();
        told(done, records.len());
    }
    Ok(records.len())
}

/// Writes a namespace's derived memory as JSONL: trajectories (by id), snapshots (by trajectory
/// and version), claims (by id, with their current status), ops (by seq), current pages (by kind
/// and id). Returns the number of records. The content of the memory only, never its build
/// history (no page revision numbers): the same memory always gives the same bytes, whether it
/// was built at once or message by message.
pub fn write_memory(
    store: &Store,
    ns: &Namespace,
    out: &mut impl Write,
) -> Result<usize, ExportError> {
    write_memory_told(store, ns, out, &|_, _| {})
}

/// [`write_memory`], telling `told(records written, records in all)` as [`write`] does.
fn write_memory_told(
    store: &Store,
    ns: &Namespace,
    out: &mut impl Write,
    told: &dyn Fn(usize, usize),
) -> Result<usize, ExportError> {
    let trajectories = store.trajectories(ns)?;
    let snapshots = store.snapshots(ns)?;
    let states = store.claim_states(ns)?;
    let claims = store.claims(ns)?;
    let ops = store.claim_ops(ns)?;
    let pages = store.pages(ns)?;
    let total = trajectories.len() + snapshots.len() + claims.len() + ops.len() + pages.len();
    told(0, total);
    let mut n = 0;
    let mut line = |value: serde_json::Value| -> Result<(), ExportError> {
        serde_json::to_writer(&mut *out, &value).map_err(std::io::Error::from)?;
        out.write_all(b"\n")?;
        n += 1;
        if n % TELL_EVERY == 0 || n == total {
            told(n, total);
        }
        Ok(())
    };
    for t in trajectories {
        line(json!({"record": "trajectory", "value": t}))?;
    }
    for s in snapshots {
        line(json!({"record": "snapshot", "value": s}))?;
    }
    for c in claims {
        let status = states.get(&c.id);
        line(json!({"record": "claim", "current_status": status, "value": c}))?;
    }
    for op in ops {
        line(json!({"record": "claim_op", "value": op}))?;
    }
    for p in pages {
        let mut value = serde_json::to_value(&p).map_err(std::io::Error::from)?;
        if let Some(fields) = value.as_object_mut() {
            fields.remove("revision");
        }
        line(json!({"record": "page", "value": value}))?;
    }
    Ok(n)
}
