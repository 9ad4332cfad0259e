//! Retrieval over a store: loading a namespace's index (message vectors memory-mapped from the
//! namespace's vector file, the rest embedded through the store's cache) and answering questions
//! with a context under a budget.

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::Instant;

use trajwiki_ann::{AnnIndex, AnnParams};
use trajwiki_compute::MatrixView;
use trajwiki_core::{EmbedKind, Embedder, Namespace, SourceMessage};
use trajwiki_retrieve::{
    Applied, Derived, Index, IndexDelta, LevelTexts, LevelVectors, MessageSide, MessageVectors,
    NamespaceRecords, PageChanges, SharedRows,
};
use trajwiki_store::{Arrived, Cursor, MappedVectors, MemoryRecords, Store, StoreError};

use crate::pipeline::{embed_read, PipelineError};

/// Where a load's time went: milliseconds per stage, each from the end of the one before.
pub(crate) struct Laps {
    stages: BTreeMap<String, f64>,
    clock: Instant,
}

impl Laps {
    pub(crate) fn start() -> Self {
        Laps {
            stages: BTreeMap::new(),
            clock: Instant::now(),
        }
    }

    /// Ends `stage` now.
    pub(crate) fn lap(&mut self, stage: &str) {
        let now = Instant::now();
        let ms = (now - self.clock).as_secs_f64() * 1000.0;
        self.stages.insert(stage.to_string(), ms);
        self.clock = now;
    }
}

/// A vector file's committed rows (or its first rows) as the index's shared segment.
pub(crate) struct MappedRows(MappedVectors, usize);

impl MappedRows {
    /// Wraps `mapped` when its rows can serve a model of dimension `dim`.
    pub(crate) fn new(mapped: MappedVectors, dim: usize) -> Option<Self> {
        let rows = mapped.info().rows;
        Self::first(mapped, dim, rows)
    }

    /// Wraps the first `rows` rows of `mapped` when it has them and they can serve a model of
    /// dimension `dim`.
    pub(crate) fn first(mapped: MappedVectors, dim: usize, rows: usize) -> Option<Self> {
        (mapped.info().dim == dim
            && rows <= mapped.info().rows
            && Self::view_of(&mapped, rows).is_some())
        .then_some(MappedRows(mapped, rows))
    }

    /// The mapped file's extent.
    pub(crate) fn info(&self) -> &trajwiki_store::VectorFileInfo {
        self.0.info()
    }

    fn view_of(m: &MappedVectors, rows: usize) -> Option<MatrixView<'_>> {
        let dim = m.info().dim;
        match (m.f16(), m.f32()) {
            (Some(d), _) => MatrixView::f16(d.get(..rows * dim)?, dim).ok(),
            (_, Some(d)) => MatrixView::f32(d.get(..rows * dim)?, dim).ok(),
            _ => None,
        }
    }
}

impl SharedRows for MappedRows {
    fn view(&self) -> MatrixView<'_> {
        Self::view_of(&self.0, self.1).expect("checked when the rows were wrapped")
    }

    fn intact(&self) -> bool {
        self.0.intact()
    }
}

/// A namespace's index as a load built it ([`crate::load::load_index`]).
pub struct Loaded {
    /// The index.
    pub index: Index,
    /// Each message's ingest position, in the index's order.
    pub rowids: Vec<i64>,
    /// The state of the namespace the index was read at.
    pub cursor: Cursor,
    /// Texts that had to be embedded (not in the vector file or the cache).
    pub embedded: usize,
    /// Where the time went, in milliseconds: `records` (reading the messages and the memory's
    /// records, or what changed since an earlier load merged into its records; the messages'
    /// side of the index prepared meanwhile), `vectors` (mapping the
    /// vector file, embedding what it lacks), `index` (building the index from them).
    pub stages: BTreeMap<String, f64>,
}

/// The threads that prepare a namespace's message side while its records are read: those the
/// read leaves (one on a 2-core machine; more would only slow the read down), made once.
fn side_pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(rayon::current_num_threads().saturating_sub(1).max(1))
            .thread_name(|i| format!("trajwiki-side-{i}"))
            .build()
            .ok()
    })
    .as_ref()
}

/// The vector file of `ns` for `model` as the index's shared rows, when it serves a model of
/// dimension `dim` and its committed rows are the first of the namespace's `messages` in ingest
/// order (`rowid(r)` the ingest position of row `r`); otherwise (another model's dimension, a
/// file out of step) it is left aside and every vector comes through the cache. A damaged file
/// is left aside too (`trajwiki check` reports it, the next build rewrites it).
fn mapped_rows(
    store: &Store,
    ns: &Namespace,
    model: &str,
    dim: usize,
    messages: usize,
    rowid: impl Fn(usize) -> i64,
) -> Result<Option<MappedRows>, PipelineError> {
    let mapped = match store.map_vectors(ns, model) {
        Ok(mapped) => mapped,
        Err(StoreError::Corrupt { .. } | StoreError::VectorFile { .. }) => None,
        Err(e) => return Err(e.into()),
    };
    Ok(mapped
        .filter(|m| {
            let rows = m.info().rows;
            rows <= messages && (rows == 0 || rowid(rows - 1) == m.info().last_rowid)
        })
        .and_then(|m| MappedRows::new(m, dim)))
}

/// The approximate index of `shared`, when the build made one and it covers committed rows only
/// (it is written before its row count is committed, so it may be newer than the record says).
pub(crate) fn approximate_index(shared: &MappedRows, dim: usize) -> Option<AnnIndex> {
    let info = shared.0.info();
    (AnnIndex::available() && info.ann_rows > 0)
        .then(|| AnnIndex::load(&info.ann_path(), AnnParams::default()).ok())
        .flatten()
        .filter(|a| a.rows() <= info.rows && a.dim() == dim)
}

/// An earlier load of a namespace, for a load that follows its writes: its records and the
/// state they were read at.
#[derive(Clone, Copy)]
pub struct Earlier<'a> {
    /// The records.
    pub records: &'a NamespaceRecords,
    /// Each message's ingest position, in the records' order.
    pub rowids: &'a [i64],
    /// The state of the namespace they were read at.
    pub cursor: &'a Cursor,
}

/// The messages in ingest order and the memory's records of `ns` now: `earlier`'s with the
/// changes the store reports since its cursor merged in, or `None` when the store says to read
/// the namespace again (it was rebuilt, cleared, or deleted and made again since).
fn read_changes(
    store: &Store,
    ns: &Namespace,
    earlier: Earlier<'_>,
) -> Result<Option<(Vec<Arrived>, MemoryRecords)>, StoreError> {
    let delta = store.namespace_changes(ns, earlier.cursor)?;
    if delta.reload {
        return Ok(None);
    }
    let r = earlier.records;
    let mut memory = MemoryRecords {
        cursor: *earlier.cursor,
        snapshots: r.snapshots.clone(),
        claims: r.claims.clone(),
        trajectories: r.trajectories.clone(),
        pages: r.pages.clone(),
        restatements: r.restatements.clone(),
    };
    match memory.apply(&delta) {
        Ok(()) => {}
        Err(StoreError::Reload { .. }) => return Ok(None),
        Err(e) => return Err(e),
    }
    let mut arrived: Vec<Arrived> = earlier
        .rowids
        .iter()
        .copied()
        .zip(r.messages.iter().cloned())
        .collect();
    arrived.sort_unstable_by_key(|(rowid, _)| *rowid);
    arrived.extend(delta.messages.iter().cloned());
    Ok(Some((arrived, memory)))
}

/// The messages' order in the index (by session and position) and their side of it.
fn message_side(
    arrived: &[Arrived],
    min_count: usize,
    derived: &mut Derived,
) -> (Vec<u32>, MessageSide) {
    let mut prepare = || {
        let mut order: Vec<u32> = (0..arrived.len() as u32).collect();
        order.sort_by_key(|&i| {
            let m = &arrived[i as usize].1;
            (m.session, m.seq)
        });
        let sorted: Vec<&SourceMessage> = order.iter().map(|&i| &arrived[i as usize].1).collect();
        let side = MessageSide::new(&sorted, min_count, derived);
        (order, side)
    };
    match side_pool() {
        Some(pool) => pool.install(prepare),
        None => prepare(),
    }
}

/// The build settings a load of `ns` applies (the build's model and settings apply at query
/// time): [`PipelineError::ModelMismatch`] when it was built with another model than `model`.
pub(crate) fn index_config(
    store: &Store,
    ns: &Namespace,
    model: &str,
) -> Result<trajwiki_memory::MemoryConfig, PipelineError> {
    Ok(match store.built_with(ns)? {
        Some((model_id, config)) => {
            if model_id != model {
                return Err(PipelineError::ModelMismatch {
                    namespace: ns.clone(),
                    built: model_id,
                    asked: model.to_string(),
                });
            }
            serde_json::from_str(&config).map_err(|e| {
                PipelineError::Store(StoreError::Corrupt {
                    table: "memory_builds",
                    column: "config",
                    id: ns.to_string(),
                    reason: e.to_string(),
                })
            })?
        }
        None => trajwiki_memory::MemoryConfig::default(),
    })
}

/// Reads a namespace's records and builds its retrieval index (built with `config`, the times
/// going on in `laps`): message vectors from the namespace's vector file as far as it reaches,
/// the rest (messages ingested since the last build) and the pages embedded through the cache.
/// What `derived` kept of the records from an earlier load of the namespace is reused, and what
/// is derived now is kept in it (see [`Derived`]): after an append, only the new and changed
/// records are derived. With `earlier`, the records are `earlier`'s and what changed since
/// ([`Store::namespace_changes`]), not a read of the whole namespace; the index is the same.
/// [`crate::load::load_index`] reads a segment first when there is one.
pub(crate) fn load_records(
    store: &Store,
    ns: &Namespace,
    embedder: &dyn Embedder,
    derived: &mut Derived,
    earlier: Option<Earlier<'_>>,
    config: &trajwiki_memory::MemoryConfig,
    mut laps: Laps,
) -> Result<Loaded, PipelineError> {
    let model = embedder.model_id().to_string();
    // The messages and the records: what changed since an earlier load merged into its records,
    // else one read, while which the messages' side of the index is prepared from them (ingest
    // order is the vector file's row order; the index lists messages by session and position).
    let changed = match earlier {
        Some(e) => {
            let changed = read_changes(store, ns, e)?;
            if changed.is_none() {
                derived.forget_records();
            }
            changed
        }
        None => None,
    };
    let (arrived, read, (order, side)) = match changed {
        Some((arrived, read)) => {
            let prepared = message_side(&arrived, config.entity_min_count, derived);
            (arrived, read, prepared)
        }
        None => store.namespace_read(ns, |arrived| {
            message_side(arrived, config.entity_min_count, derived)
        })?,
    };
    let cursor = read.cursor;
    let rowids: Vec<i64> = order.iter().map(|&i| arrived[i as usize].0).collect();
    laps.lap("records");
    if arrived.is_empty() {
        return Err(PipelineError::Empty(ns.clone()));
    }
    // The file serves the rows it has committed when they are the first messages in ingest
    // order; otherwise (another model's dimension, a file out of step) it is left aside and
    // every vector comes through the cache.
    // A damaged file is left aside too (`trajwiki check` reports it, the next build rewrites it).
    let shared = mapped_rows(store, ns, &model, embedder.dim(), arrived.len(), |r| {
        arrived[r].0
    })?;
    let covered = shared.as_ref().map_or(0, |s| s.0.info().rows);
    let mut computed = 0;
    let tail_texts: Vec<String> = arrived[covered..]
        .iter()
        .map(|(_, m)| m.embedding_text())
        .collect();
    let tail = {
        let refs: Vec<&str> = tail_texts.iter().map(String::as_str).collect();
        let (rows, n) = embed_read(store, embedder, &refs)?;
        computed += n;
        rows.into_iter().flatten().collect()
    };
    let messages: Vec<SourceMessage> = {
        let mut slots: Vec<Option<SourceMessage>> =
            arrived.into_iter().map(|(_, m)| Some(m)).collect();
        order
            .iter()
            .map(|&i| slots[i as usize].take().expect("a permutation"))
            .collect()
    };
    let ann = shared
        .as_ref()
        .and_then(|s| approximate_index(s, embedder.dim()));
    let mut message_vectors = MessageVectors::new(
        embedder.dim(),
        shared.map(|s| Box::new(s) as Box<dyn SharedRows>),
        tail,
        order,
    )
    .map_err(|e| PipelineError::Index(Box::new(e)))?;
    if let Some(ann) = ann {
        message_vectors = message_vectors
            .with_ann(ann)
            .map_err(|e| PipelineError::Index(Box::new(e)))?;
    }
    laps.lap("vectors");

    let mut records = NamespaceRecords {
        messages,
        snapshots: read.snapshots,
        trajectories: read.trajectories,
        pages: read.pages,
        claims: read.claims,
        restatements: read.restatements,
        entity_min_count: config.entity_min_count,
    };
    records.sort_for_index();
    // No page is embedded: the index derives the pages' rows from their trajectories'.
    let page_texts = Index::page_texts(&records);
    let (snapshots, trajectories) = Index::part_texts(&records);
    let texts = LevelTexts {
        snapshots,
        trajectories,
        pages: page_texts,
    };
    laps.lap("levels");
    let vectors = LevelVectors {
        dim: embedder.dim(),
        messages: message_vectors,
    };
    let index = Index::new(records, side, vectors, &texts, derived)
        .map_err(|e| PipelineError::Index(Box::new(e)))?;
    laps.lap("index");
    Ok(Loaded {
        index,
        rowids,
        cursor,
        embedded: computed,
        stages: laps.stages,
    })
}

/// A loaded index that takes what changed since in place ([`update_index`]).
pub struct Held<'a> {
    /// The index.
    pub index: &'a mut Index,
    /// Each message's ingest position, in the index's order.
    pub rowids: &'a mut Vec<i64>,
    /// The state of the namespace the index is at.
    pub cursor: &'a mut Cursor,
    /// What the index's loads derived from single records.
    pub derived: &'a mut Derived,
}

/// What [`update_index`] did.
pub enum Updated {
    /// The index took what changed, in place: where the time went, in milliseconds (`changes`
    /// reading what changed, `vectors` mapping the vector file and embedding what it lacks,
    /// `apply` the index taking it), and the texts embedded.
    InPlace {
        /// Stages.
        stages: BTreeMap<String, f64>,
        /// Texts embedded.
        embedded: usize,
        /// Approximately the heap bytes the index grew by ([`IndexDelta::heap_bytes`]).
        grown: usize,
    },
    /// The index cannot take it (the reason given), and is unchanged: load the namespace.
    Refused(&'static str),
}

/// Applies what changed in `ns` since `held` was read to it, in place (see
/// [`Index::apply`]): the new messages, their vectors (the vector file's rows as far as a build
/// wrote them, the rest through the cache), the records builds wrote. On an error the index is
/// to be dropped.
pub fn update_index(
    store: &Store,
    ns: &Namespace,
    embedder: &dyn Embedder,
    held: Held<'_>,
) -> Result<Updated, PipelineError> {
    let mut laps = Laps::start();
    let delta = store.namespace_changes(ns, held.cursor)?;
    if delta.reload {
        return Ok(Updated::Refused(
            "the namespace was rebuilt, cleared or made again",
        ));
    }
    let index = held.index;
    // The new messages in the index's order; their rows follow the held ones' in ingest order.
    let before = index.records.messages.len();
    let mut order: Vec<usize> = (0..delta.messages.len()).collect();
    order.sort_by_key(|&k| {
        let m = &delta.messages[k].1;
        (m.session, m.seq)
    });
    laps.lap("changes");

    let model = embedder.model_id().to_string();
    let dim = embedder.dim();
    let total = before + delta.messages.len();
    let rowid = |r: usize| {
        if r < before {
            held.rowids[index.vectors().message_of_row(r)]
        } else {
            delta.messages[r - before].0
        }
    };
    let shared = mapped_rows(store, ns, &model, dim, total, rowid)?;
    let covered = shared.as_ref().map_or(0, |s| s.0.info().rows);
    let tail_texts: Vec<String> = (covered..total)
        .map(|r| {
            if r < before {
                index.records.messages[index.vectors().message_of_row(r)].embedding_text()
            } else {
                delta.messages[r - before].1.embedding_text()
            }
        })
        .collect();
    let refs: Vec<&str> = tail_texts.iter().map(String::as_str).collect();
    let (rows, embedded) = embed_read(store, embedder, &refs)?;
    let tail: Vec<f32> = rows.into_iter().flatten().collect();
    let mut row_of: Vec<u32> = index.vectors().rows_of().to_vec();
    row_of.extend(order.iter().map(|&k| (before + k) as u32));
    // The approximate index is read again only when the build wrote another.
    let ann_rows = shared.as_ref().map_or(0, |s| s.0.info().ann_rows);
    let keep_ann = index.vectors().ann().map(|a| a.rows()) == Some(ann_rows);
    let ann = match &shared {
        Some(s) if !keep_ann => approximate_index(s, dim),
        _ => None,
    };
    // The changed pages (their rows are derived from their trajectories' in place).
    let pages = if delta.records.pages.is_empty() && delta.retired_pages.is_empty() {
        None
    } else {
        Some(PageChanges {
            changed: delta.records.pages,
            retired: delta.retired_pages,
        })
    };
    laps.lap("vectors");

    let new_rowids: Vec<i64> = order.iter().map(|&k| delta.messages[k].0).collect();
    let messages: Vec<SourceMessage> = {
        let mut slots: Vec<Option<SourceMessage>> =
            delta.messages.into_iter().map(|(_, m)| Some(m)).collect();
        order
            .iter()
            .map(|&k| slots[k].take().expect("a permutation"))
            .collect()
    };
    let changes = IndexDelta {
        messages,
        snapshots: delta.records.snapshots,
        claims: delta.records.claims,
        restatements: delta.records.restatements,
        trajectories: delta.records.trajectories,
        pages,
    };
    let grown = changes.heap_bytes(dim);
    let grow = |held_vectors: MessageVectors| {
        let shared = shared.map(|s| Box::new(s) as Box<dyn SharedRows>);
        let grown = if keep_ann {
            held_vectors.grown(shared, tail, row_of)?
        } else {
            held_vectors.without_ann().grown(shared, tail, row_of)?
        };
        match ann {
            Some(ann) => grown.with_ann(ann),
            None => Ok(grown),
        }
    };
    let applied = index
        .apply(changes, grow, held.derived)
        .map_err(|e| PipelineError::Index(Box::new(e)))?;
    if let Applied::Refused(reason) = applied {
        return Ok(Updated::Refused(reason));
    }
    held.rowids.extend(new_rowids);
    *held.cursor = delta.cursor;
    laps.lap("apply");
    Ok(Updated::InPlace {
        stages: laps.stages,
        embedded,
        grown,
    })
}

/// Embeds one question as a query, returning the vector and the milliseconds it took.
pub fn embed_query(
    embedder: &dyn Embedder,
    question: &str,
) -> Result<(Vec<f32>, f64), PipelineError> {
    let t0 = Instant::now();
    let e = embedder
        .embed(&[question], EmbedKind::Query)
        .map_err(|source| trajwiki_memory::BuildError::Embed {
            stage: "query",
            source,
        })?;
    Ok((e.row(0).to_vec(), t0.elapsed().as_secs_f64() * 1000.0))
}
