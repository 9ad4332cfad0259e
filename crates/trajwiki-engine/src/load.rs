//! A namespace's index over its life: loaded from its segment when there is a usable one, else
//! from the records; written back as a segment after a build. Above both ways of loading it
//! (`retrieval`, from the records and in place; `segment`, the stored index), which know
//! nothing of each other's callers.

use std::time::Instant;

use trajwiki_core::{Embedder, Namespace};
use trajwiki_retrieve::Derived;
use trajwiki_store::Store;

use crate::pipeline::PipelineError;
use crate::retrieval::{index_config, load_records, Earlier, Laps, Loaded};
use crate::segment::{
    file_stamp, load_segment, segment_due, write_loaded, Due, Unused, Watched, Written,
};

/// Loads a namespace's index (see [`crate::retrieval`] for how the records are read and what
/// `derived` and `earlier` reuse).
///
/// Without `earlier`, the namespace's index segment is read first when there is a usable one
/// (see [`crate::segment`]): the index as a build stored it, with what changed since applied in
/// place; the index is the same as one loaded from the records. The stages then say `segment`
/// (reading it) and `apply`; a segment left aside says why in a stage named
/// `segment not used: <reason>` (the time spent on it), and the load reads the records.
pub fn load_index(
    store: &Store,
    ns: &Namespace,
    embedder: &dyn Embedder,
    derived: &mut Derived,
    earlier: Option<Earlier<'_>>,
) -> Result<Loaded, PipelineError> {
    let mut laps = Laps::start();
    let config = index_config(store, ns, embedder.model_id())?;
    if earlier.is_none() {
        match load_segment(store, ns, embedder, derived, config.entity_min_count) {
            Ok(loaded) => return Ok(loaded),
            Err(Unused::Missing) => {}
            Err(Unused::Because(reason)) => {
                derived.forget_records();
                laps.lap(&format!("segment not used: {reason}"));
            }
        }
    }
    load_records(store, ns, embedder, derived, earlier, &config, laps)
}

/// Loads the index of `ns` as a load gives it now (from its segment when usable, else from the
/// records) and writes it as the namespace's segment; `None` on a store that keeps none.
pub fn write_segment(
    store: &Store,
    ns: &Namespace,
    embedder: &dyn Embedder,
) -> Result<Option<Written>, PipelineError> {
    if store.segment_path(ns, embedder.model_id()).is_none() {
        return Ok(None);
    }
    let started = Instant::now();
    let mut derived = Derived::default();
    let loaded = load_index(store, ns, embedder, &mut derived, None)?;
    write_loaded(store, ns, embedder, &loaded, &derived, started)
}

/// What [`refresh_segment`] did and found.
#[derive(Debug)]
pub struct Refreshed {
    /// The segment written, when it was due.
    pub written: Option<Written>,
    /// What an engine keeps of the segment for the appends that follow (see [`Watched`]);
    /// `None` when it is to be looked at again.
    pub watched: Option<Watched>,
}

/// Writes the segment of `ns` when [`segment_due`] says so (with the namespace's message count
/// now).
pub fn refresh_segment(
    store: &Store,
    ns: &Namespace,
    embedder: &dyn Embedder,
) -> Result<Refreshed, PipelineError> {
    let model = embedder.model_id();
    let path = store.segment_path(ns, model);
    if path.is_none() {
        return Ok(Refreshed {
            written: None,
            watched: Some(Watched::NoSegments),
        });
    }
    let messages = store.namespace_counts(ns)?.0 as usize;
    if messages == 0 {
        return Ok(Refreshed {
            written: None,
            watched: None,
        });
    }
    let (written, due) = match segment_due(store, ns, model, embedder.dim(), messages)? {
        Due::Because(_) => {
            let written = write_segment(store, ns, embedder)?;
            let due = written.as_ref().map(|w| Due::No {
                held: w.messages,
                stamp: file_stamp(&w.path),
            });
            (written, due)
        }
        due => (None, Some(due)),
    };
    let messages = written
        .as_ref()
        .map_or(messages, |w| w.messages.max(messages));
    Ok(Refreshed {
        written,
        watched: due.and_then(|due| Watched::of(due, path, messages)),
    })
}
