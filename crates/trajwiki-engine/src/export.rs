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
    let mut n = 0;
    let mut line = |value: serde_json::Value| -> Result<(), ExportError> {
        serde_json::to_writer(&mut *out, &value).map_err(std::io::Error::from)?;
        out.write_all(b"\n")?;
        n += 1;
        Ok(())
    };
    for t in store.trajectories(ns)? {
        line(json!({"record": "trajectory", "value": t}))?;
    }
    for s in store.snapshots(ns)? {
        line(json!({"record": "snapshot", "value": s}))?;
    }
    let states = store.claim_states(ns)?;
    for c in store.claims(ns)? {
        let status = states.get(&c.id);
        line(json!({"record": "claim", "current_status": status, "value": c}))?;
    }
    for op in store.claim_ops(ns)? {
        line(json!({"record": "claim_op", "value": op}))?;
    }
    for p in store.pages(ns)? {
        let mut value = serde_json::to_value(&p).map_err(std::io::Error::from)?;
        if let Some(fields) = value.as_object_mut() {
            fields.remove("revision");
        }
        line(json!({"record": "page", "value": value}))?;
    }
    Ok(n)
}
