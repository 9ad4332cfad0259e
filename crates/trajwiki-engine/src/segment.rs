//! Index segments, the engine's side: a namespace's index as a load builds it, stored after a
//! build (see `trajwiki_store`'s segment files) and read by a cold load instead of the records.
//!
//! - **Written by builds**: after a build commits, [`crate::load::refresh_segment`] writes the namespace's
//!   segment when it has none (or one it cannot use) or when the namespace's messages grew by
//!   an eighth since it was written ([`segment_due`]). The CLI's `build` does it in line; the
//!   engine's builds (server appends, Python) on a thread of their own, after the build
//!   returns, one per namespace at a time. The index written is the one a load gives now. An
//!   engine keeps what its last look found ([`Watched`]) and counts the messages it appends
//!   since, so that an append that cannot make the segment due asks the store nothing.
//! - **Read by cold loads** ([`load_segment`], from [`crate::load::load_index`]): the
//!   segment's index, its message vectors mapped from the vector file as a load maps them (the
//!   rows the stored load embedded are embedded again through the cache), then what changed in
//!   the namespace since the segment's cursor applied in place
//!   ([`crate::retrieval::update_index`]). A segment that is damaged, of another version or
//!   model, older than a rebuild of the namespace, out of step with the vector file, or whose
//!   changes the index cannot take in place is left aside: the load reads the records.
//! - **Removed by delete** with the namespace's vector files; **verified by check**; **rebuilt**
//!   by the next build when missing or damaged.
//!
//! A PostgreSQL store keeps no segments (its vectors are rows, it has no folder of its own):
//! its loads read the records.
//!
//! The payload is the message rows' ingest positions and how many of them the vector file
//! served, then the stored index ([`Index::store_into`]).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};
use std::time::{Instant, SystemTime};

use serde::{Deserialize, Serialize};
use trajwiki_core::{Embedder, Namespace};
use trajwiki_retrieve::{Derived, Index, MessageVectors, SharedRows, SharedSketch, StoredIndex};
use trajwiki_store::{SegmentHeader, Store, StoreError};

use crate::pipeline::{embed_read, PipelineError};
use crate::retrieval::{approximate_index, update_index, Held, Loaded, MappedRows, Updated};

/// A segment is written again when the namespace's messages grew by this share of those it
/// holds.
pub const SEGMENT_GROWTH: usize = 8;

/// What the payload holds beside the stored index.
#[derive(Serialize, Deserialize)]
struct Rows {
    /// Each message's ingest position, in the index's order.
    rowids: Vec<i64>,
    /// How many messages' rows (the first in ingest order) the vector file served.
    shared: u64,
}

/// Why a load did not use a segment.
#[derive(Debug)]
pub enum Unused {
    /// There is none (or the store keeps none): nothing to say.
    Missing,
    /// There is one, left aside for this reason.
    Because(String),
}

impl From<PipelineError> for Unused {
    fn from(e: PipelineError) -> Self {
        Unused::Because(e.to_string())
    }
}

/// What [`crate::load::write_segment`] wrote.
#[derive(Debug, Clone)]
pub struct Written {
    /// The file.
    pub path: PathBuf,
    /// The messages the segment holds.
    pub messages: usize,
    /// Its bytes.
    pub bytes: usize,
    /// Milliseconds spent: loading the index, encoding and writing it.
    pub ms: f64,
}

/// The index of `ns` from its segment, with what changed since applied: [`Unused`] when there
/// is no usable segment (the caller loads from the records; `derived` is then to be cleared
/// of records, as it may hold the segment's lexicon counts).
pub fn load_segment(
    store: &Store,
    ns: &Namespace,
    embedder: &dyn Embedder,
    derived: &mut Derived,
    entity_min_count: usize,
) -> Result<Loaded, Unused> {
    let t0 = Instant::now();
    let model = embedder.model_id();
    let dim = embedder.dim();
    let segment = match store.read_segment(ns, model) {
        Ok(Some(s)) => s,
        Ok(None) => return Err(Unused::Missing),
        Err(e) => return Err(Unused::Because(e.to_string())),
    };
    let header = &segment.header;
    if header.dim != dim {
        return Err(Unused::Because(format!(
            "written for dimension {}, the model has {dim}",
            header.dim
        )));
    }
    if store
        .replaced_since(ns, &header.cursor)
        .map_err(PipelineError::from)?
    {
        return Err(Unused::Because(
            "the namespace was rebuilt, cleared or made again since it was written".into(),
        ));
    }
    let damaged =
        |e: &dyn std::fmt::Display| Unused::Because(format!("{}: {e}", segment.path.display()));
    let (rows, rest): (Rows, &[u8]) =
        postcard::take_from_bytes(&segment.payload).map_err(|e| damaged(&e))?;
    let t1 = Instant::now();
    let shared = shared_rows(store, ns, model, dim, &rows)?;
    let mut vectors_ms = t1.elapsed().as_secs_f64() * 1000.0;
    // The shared rows are sketched while the records decode.
    let (stored, (sketch, sketch_ms)) = rayon::join(
        || StoredIndex::decode(rest, ns),
        || {
            let t = Instant::now();
            let sketch = shared
                .mapped
                .as_ref()
                .and_then(|m| MessageVectors::sketch_shared(m));
            (sketch, t.elapsed().as_secs_f64() * 1000.0)
        },
    );
    let (stored, rest) = stored.map_err(|e| damaged(&e))?;
    if !rest.is_empty() || stored.dim() != dim {
        return Err(damaged(
            &"bytes past the stored index, or another dimension",
        ));
    }
    if !segment.payload.intact() {
        return Err(damaged(&"the file was cut short while it was read"));
    }
    if stored.messages().len() != header.messages || rows.rowids.len() != header.messages {
        return Err(damaged(&"its message counts disagree"));
    }
    if stored.messages().is_empty() {
        return Err(damaged(&"it holds no messages"));
    }
    let mut t_segment = t0.elapsed().as_secs_f64() * 1000.0 - vectors_ms;
    let t1 = Instant::now();
    let (vectors, embedded) = message_vectors(store, embedder, &stored, &rows, shared, sketch)?;
    vectors_ms += t1.elapsed().as_secs_f64() * 1000.0;
    let t2 = Instant::now();
    // The lexicon's counts go with the index (an index takes appends in place only with them),
    // even for a caller that keeps nothing: they are let go of with it.
    let mut kept = Derived::default();
    let derived = if derived.keeps() { derived } else { &mut kept };
    let mut index = stored
        .into_index(vectors, derived)
        .map_err(|e| damaged(&e))?;
    if index.records.entity_min_count != entity_min_count {
        return Err(Unused::Because(format!(
            "written with entity_min_count {}, the build's is {entity_min_count}",
            index.records.entity_min_count
        )));
    }
    t_segment += t2.elapsed().as_secs_f64() * 1000.0;
    let mut stages = BTreeMap::new();
    stages.insert("segment".to_string(), t_segment);
    stages.insert("vectors".to_string(), vectors_ms);
    stages.insert("message sketch (beside segment)".to_string(), sketch_ms);
    let mut rowids = rows.rowids;
    let mut cursor = header.cursor;
    let mut embedded = embedded;
    let now = store.cursor(ns).map_err(PipelineError::from)?;
    let file_rows = store
        .vector_file(ns, model)
        .map_err(PipelineError::from)?
        .map_or(0, |f| f.rows);
    if now != cursor || file_rows as u64 != rows.shared {
        let held = Held {
            index: &mut index,
            rowids: &mut rowids,
            cursor: &mut cursor,
            derived,
        };
        match update_index(store, ns, embedder, held)? {
            Updated::InPlace {
                stages: applied,
                embedded: more,
                ..
            } => {
                embedded += more;
                for (stage, ms) in applied {
                    *stages.entry(format!("apply {stage}")).or_default() += ms;
                }
            }
            Updated::Refused(reason) => {
                return Err(Unused::Because(format!(
                    "the changes since it cannot be applied: {reason}"
                )))
            }
        }
    }
    Ok(Loaded {
        index,
        rowids,
        cursor,
        embedded,
        stages,
    })
}

/// The vector file's rows a stored index's messages share, mapped, with the map between
/// them and the index's messages.
struct Shared {
    /// Row `r` (ingest order) is message `by_rowid[r]` (index order).
    by_rowid: Vec<u32>,
    /// Message `i`'s row.
    row_of: Vec<u32>,
    /// The vector file's first `rows.shared` rows, when it serves some.
    mapped: Option<MappedRows>,
}

/// [`Shared`] for `rows`: the vector file mapped as the load that stored them had it.
fn shared_rows(
    store: &Store,
    ns: &Namespace,
    model: &str,
    dim: usize,
    rows: &Rows,
) -> Result<Shared, Unused> {
    let n = rows.rowids.len();
    let mut by_rowid: Vec<u32> = (0..n as u32).collect();
    by_rowid.sort_unstable_by_key(|&i| rows.rowids[i as usize]);
    if by_rowid
        .windows(2)
        .any(|w| rows.rowids[w[0] as usize] == rows.rowids[w[1] as usize])
    {
        return Err(Unused::Because("its ingest positions repeat".into()));
    }
    let mut row_of = vec![0u32; n];
    for (r, &i) in by_rowid.iter().enumerate() {
        row_of[i as usize] = r as u32;
    }
    let shared = rows.shared as usize;
    let out_of_step = || Unused::Because("the vector file is out of step with it".into());
    if shared > n {
        return Err(out_of_step());
    }
    let mapped = if shared == 0 {
        None
    } else {
        let mapped = store
            .map_vectors(ns, model)
            .map_err(|e| Unused::Because(e.to_string()))?
            .ok_or_else(out_of_step)?;
        let info = mapped.info().clone();
        let last = rows.rowids[by_rowid[shared - 1] as usize];
        if info.rows < shared || (info.rows == shared && info.last_rowid != last) {
            return Err(out_of_step());
        }
        Some(MappedRows::first(mapped, dim, shared).ok_or_else(out_of_step)?)
    };
    Ok(Shared {
        by_rowid,
        row_of,
        mapped,
    })
}

/// The message vectors of a stored index as the load that stored it had them: the vector
/// file's first `rows.shared` rows (in ingest order: `shared`, sketched as `sketch`), the rest
/// embedded through the cache.
fn message_vectors(
    store: &Store,
    embedder: &dyn Embedder,
    stored: &StoredIndex,
    rows: &Rows,
    shared: Shared,
    sketch: Option<SharedSketch>,
) -> Result<(MessageVectors, usize), Unused> {
    let dim = embedder.dim();
    let Shared {
        by_rowid,
        row_of,
        mapped,
    } = shared;
    let texts: Vec<String> = by_rowid[rows.shared as usize..]
        .iter()
        .map(|&i| stored.messages()[i as usize].embedding_text())
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let (tail, embedded) = embed_read(store, embedder, &refs)?;
    let tail: Vec<f32> = tail.into_iter().flatten().collect();
    // The approximate index is the one a load attaches when the file is as the segment saw it.
    let ann = mapped
        .as_ref()
        .filter(|m| m.info().rows == rows.shared as usize)
        .and_then(|m| approximate_index(m, dim));
    let mut vectors = MessageVectors::with_sketch(
        dim,
        mapped.map(|m| Box::new(m) as Box<dyn SharedRows>),
        tail,
        row_of,
        sketch,
    )
    .map_err(|e| Unused::Because(e.to_string()))?;
    if let Some(ann) = ann {
        vectors = vectors
            .with_ann(ann)
            .map_err(|e| Unused::Because(e.to_string()))?;
    }
    Ok((vectors, embedded))
}

/// The payload of a segment of `index` (`rowids` its messages' ingest positions).
fn payload(index: &Index, rowids: &[i64], derived: &Derived) -> Result<Vec<u8>, PipelineError> {
    let rows = Rows {
        rowids: rowids.to_vec(),
        shared: index.vectors().shared_rows() as u64,
    };
    let mut out = postcard::to_allocvec(&rows).map_err(|e| {
        PipelineError::Index(Box::new(trajwiki_retrieve::IndexError::Stored(
            e.to_string(),
        )))
    })?;
    index
        .store_into(derived, &mut out)
        .map_err(|e| PipelineError::Index(Box::new(e)))?;
    Ok(out)
}

/// Writes `loaded`, the index of `ns` as a load gives it now (with what it derived, `derived`),
/// as the namespace's segment; `None` on a store that keeps none. A segment written while the
/// namespace was deleted or replaced is removed again. `started`: when the load began (the
/// time reported is the load's and the write's).
pub(crate) fn write_loaded(
    store: &Store,
    ns: &Namespace,
    embedder: &dyn Embedder,
    loaded: &Loaded,
    derived: &Derived,
    started: Instant,
) -> Result<Option<Written>, PipelineError> {
    let bytes = payload(&loaded.index, &loaded.rowids, derived)?;
    let header = SegmentHeader {
        namespace: ns.to_string(),
        model: embedder.model_id().to_string(),
        dim: embedder.dim(),
        cursor: loaded.cursor,
        messages: loaded.index.records.messages.len(),
    };
    let Some(path) = store.write_segment(ns, &header, &bytes)? else {
        return Ok(None);
    };
    if store.replaced_since(ns, &loaded.cursor)? {
        // A delete (or a rebuild) committed while this was written: what it removed must not
        // come back in a segment.
        let _ = std::fs::remove_file(&path);
        return Ok(None);
    }
    forget_verified(&path);
    Ok(Some(Written {
        path,
        messages: header.messages,
        bytes: bytes.len(),
        ms: started.elapsed().as_secs_f64() * 1000.0,
    }))
}

/// Segment files this process read back whole and found sound, by (length, modified time):
/// [`segment_due`] checks a file's checksum once, not at every build.
fn verified() -> &'static Mutex<HashMap<PathBuf, (u64, SystemTime)>> {
    static VERIFIED: OnceLock<Mutex<HashMap<PathBuf, (u64, SystemTime)>>> = OnceLock::new();
    VERIFIED.get_or_init(Default::default)
}

pub(crate) fn file_stamp(path: &std::path::Path) -> Option<(u64, SystemTime)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.len(), m.modified().ok()?))
}

fn forget_verified(path: &std::path::Path) {
    verified()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .remove(path);
}

/// What [`segment_due`] says of a namespace's segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Due {
    /// The store keeps no segments (PostgreSQL).
    NoSegments,
    /// Not now: the segment holds `held` messages, its file of this length and modified time.
    No {
        /// The messages it holds.
        held: usize,
        /// Its file's length and modified time, when they could be read.
        stamp: Option<(u64, SystemTime)>,
    },
    /// Due, for this reason.
    Because(String),
}

/// What an engine last found of a namespace's segment, with the messages appended through the
/// engine since: while those cannot make it due and its file is the one found, an append
/// leaves the segment alone without asking the store (whose count of the namespace's messages
/// reads their whole index: ~10–25 ms at 250,000 messages, on a connection of its own, beside
/// the search that follows the append).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Watched {
    /// The store keeps no segments.
    NoSegments,
    /// The segment at `path` held `held` of the namespace's `messages`.
    Held {
        /// The segment's file.
        path: PathBuf,
        /// Its length and modified time then.
        stamp: (u64, SystemTime),
        /// The messages it held.
        held: usize,
        /// The namespace's messages then, and those appended since.
        messages: usize,
    },
}

impl Watched {
    /// What a look found: `due` of the segment at `path` (after any write), the namespace then
    /// holding `messages` messages; `None` when the segment is to be looked at again.
    pub fn of(due: Due, path: Option<PathBuf>, messages: usize) -> Option<Watched> {
        match (due, path) {
            (Due::NoSegments, _) => Some(Watched::NoSegments),
            (
                Due::No {
                    held,
                    stamp: Some(stamp),
                },
                Some(path),
            ) => Some(Watched::Held {
                path,
                stamp,
                held,
                messages,
            }),
            _ => None,
        }
    }

    /// Counts `more` messages appended to the namespace.
    pub fn appended(&mut self, more: usize) {
        if let Watched::Held { messages, .. } = self {
            *messages = messages.saturating_add(more);
        }
    }

    /// Whether the segment may be due now: outgrown by the messages counted, or because its file is not the one found (written by another process, removed
    /// by a delete). A rebuild is not seen here: its caller forgets what was watched.
    pub fn may_be_due(&self) -> bool {
        match self {
            Watched::NoSegments => false,
            Watched::Held {
                path,
                stamp,
                held,
                messages,
            } => outgrown(*held, *messages) || file_stamp(path).as_ref() != Some(stamp),
        }
    }
}

/// Whether a segment of `held` messages is outgrown by a namespace of `messages`: by an eighth
/// ([`SEGMENT_GROWTH`]) of what it holds.
fn outgrown(held: usize, messages: usize) -> bool {
    messages.saturating_sub(held) * SEGMENT_GROWTH >= held.max(1)
}

/// Whether `ns` needs its segment for `model` written now, with `messages` messages
/// ([`Due::Because`]): it has none, one it cannot read whole, one of another dimension, one
/// older than a rebuild, or one that holds fewer than `SEGMENT_GROWTH - 1` of every
/// `SEGMENT_GROWTH` messages.
pub fn segment_due(
    store: &Store,
    ns: &Namespace,
    model: &str,
    dim: usize,
    messages: usize,
) -> Result<Due, StoreError> {
    let Some(path) = store.segment_path(ns, model) else {
        return Ok(Due::NoSegments);
    };
    let header = match store.segment_header(ns, model) {
        Ok(Some(h)) => h,
        Ok(None) => return Ok(Due::Because("none written yet".into())),
        Err(e) => return Ok(Due::Because(e.to_string())),
    };
    if header.dim != dim || header.namespace != ns.as_str() || header.model != model {
        return Ok(Due::Because("written for another model".into()));
    }
    if store.replaced_since(ns, &header.cursor)? {
        return Ok(Due::Because("the namespace was rebuilt since".into()));
    }
    if outgrown(header.messages, messages) {
        return Ok(Due::Because(format!(
            "{} messages since it was written, over 1/{SEGMENT_GROWTH} of its {}",
            messages - header.messages,
            header.messages
        )));
    }
    let stamp = file_stamp(&path);
    let known = stamp.is_some()
        && verified()
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&path)
            == stamp.as_ref();
    if !known {
        match store.read_segment(ns, model) {
            Ok(Some(_)) => {
                if let Some(stamp) = stamp {
                    verified()
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .insert(path, stamp);
                }
            }
            Ok(None) => return Ok(Due::Because("none written yet".into())),
            Err(e) => return Ok(Due::Because(e.to_string())),
        }
    }
    Ok(Due::No {
        held: header.messages,
        stamp,
    })
}
