//! The glue between store, embedder and memory construction: embedding with the store's cache,
//! building a namespace and committing it in one transaction.

use rayon::prelude::*;
use trajwiki_ann::{AnnIndex, AnnParams};
use trajwiki_core::{EmbedError, EmbedKind, Embedder, Embeddings, Namespace, SourceMessage};
use trajwiki_memory::{
    exchanges, fold_exchanges_told, BuildError, BuildReport, Builders, DeterministicDecider,
    DeterministicExtractor, DeterministicJudge, Fold, MemoryConfig, TrajState, TrajStateV1,
};
use trajwiki_store::{
    Arrived, FoldRecord, FoldWrite, MemoryBatch, PageUpdates, Store, StoreError, VectorDtype,
    VectorFileInfo,
};

/// A failure of [`build_namespace`].
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Construction failed.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// The retrieval index could not be built.
    #[error(transparent)]
    Index(Box<trajwiki_retrieve::IndexError>),
    /// A query with another embedding model than the build's.
    #[error("namespace {namespace} was built with model {built}; it cannot be queried with {asked} (pass the --model it was built with, e.g. `minilm@bf16` for an id ending in -bf16, or rebuild it with the model you pass and `trajwiki build --rebuild`)")]
    ModelMismatch {
        /// The namespace.
        namespace: Namespace,
        /// The build's model.
        built: String,
        /// The model asked for.
        asked: String,
    },
    /// The namespace has no messages.
    #[error("namespace {0} has no messages to build from (ingest a conversation first)")]
    Empty(Namespace),
    /// The namespace was built before with another model or configuration.
    #[error("namespace {namespace} already holds a memory built differently ({detail}); `trajwiki build --rebuild` replaces it")]
    Stale {
        /// The namespace.
        namespace: Namespace,
        /// The conflict found.
        detail: String,
    },
    /// The build committed its memory (searchable from then on), and bringing a derived file up
    /// to date after the commit failed; the next build does it.
    #[error("the memory of namespace {namespace} is built and committed, but updating its {step} failed (the next build brings it up to date)")]
    Unfinished {
        /// The namespace.
        namespace: Namespace,
        /// What failed after the commit: `vector file` or `approximate index`.
        step: &'static str,
        /// The committed build's report.
        report: Box<BuildReport>,
        /// Why it failed.
        #[source]
        source: Box<PipelineError>,
    },
}

impl PipelineError {
    /// [`PipelineError::Stale`]: `ns` holds a memory built with model `built`, and a build with
    /// `asked` was asked for.
    pub fn built_with_another_model(ns: &Namespace, built: &str, asked: &str) -> Self {
        PipelineError::Stale {
            namespace: ns.clone(),
            detail: format!("built with model {built}, asked for {asked}"),
        }
    }

    /// The error a build's failure comes down to: for [`PipelineError::Unfinished`], the
    /// failure after the commit; for any other, itself.
    pub fn cause(&self) -> &PipelineError {
        match self {
            PipelineError::Unfinished { source, .. } => source.cause(),
            other => other,
        }
    }
}

/// Embeds texts as documents through the store's cache: cached vectors are reused, the rest is
/// embedded in one batch and cached. Returns the rows and how many were computed.
pub fn embed_cached(
    store: &mut Store,
    embedder: &dyn Embedder,
    texts: &[&str],
) -> Result<(Vec<Vec<f32>>, usize), PipelineError> {
    let (rows, computed) = embed_through_cache(store, embedder, texts)?;
    if !computed.is_empty() {
        let items: Vec<(&str, &[f32])> = computed
            .iter()
            .map(|(hash, v)| (hash.as_str(), v.as_slice()))
            .collect();
        store.put_embeddings(embedder.model_id(), embedder.dim(), &items)?;
    }
    Ok((rows, computed.len()))
}

/// [`embed_cached`] for readers: what the cache misses is embedded and kept in memory, never
/// written, so that a query or a read leaves the store as it was (and works on a store opened
/// read only).
pub fn embed_read(
    store: &Store,
    embedder: &dyn Embedder,
    texts: &[&str],
) -> Result<(Vec<Vec<f32>>, usize), PipelineError> {
    let (rows, computed) = embed_through_cache(store, embedder, texts)?;
    Ok((rows, computed.len()))
}

/// Embeds `batch` as documents, checking that a row of the model's dimension came back for each
/// text.
fn embed_documents(embedder: &dyn Embedder, batch: &[&str]) -> Result<Embeddings, PipelineError> {
    let vectors = embedder
        .embed(batch, EmbedKind::Document)
        .map_err(|source| BuildError::Embed {
            stage: "documents",
            source,
        })?;
    if vectors.len() != batch.len() || vectors.dim() != embedder.dim() {
        return Err(BuildError::Embed {
            stage: "documents",
            source: EmbedError::WrongDimension {
                expected: embedder.dim(),
                got: vectors.dim(),
            },
        }
        .into());
    }
    Ok(vectors)
}

/// The (text hash, vector) of each text a call embedded because the cache lacked it.
type Embedded = Vec<(String, Vec<f32>)>;

/// The rows of `texts` (cached ones from the store, the others embedded in one batch, each
/// distinct text once) and what was embedded.
fn embed_through_cache(
    store: &Store,
    embedder: &dyn Embedder,
    texts: &[&str],
) -> Result<(Vec<Vec<f32>>, Embedded), PipelineError> {
    let model = embedder.model_id().to_string();
    let dim = embedder.dim();
    let hashes: Vec<String> = texts.iter().map(|t| trajwiki_core::text_hash(t)).collect();
    let hash_refs: Vec<&str> = hashes.iter().map(String::as_str).collect();
    let mut rows = store.cached_embeddings(&model, dim, &hash_refs)?;
    let missing: Vec<usize> = (0..texts.len()).filter(|&i| rows[i].is_none()).collect();
    if missing.is_empty() {
        return Ok((
            rows.into_iter().map(|r| r.expect("cached")).collect(),
            Vec::new(),
        ));
    }
    // Unique texts only.
    let mut unique: Vec<usize> = Vec::new();
    let mut seen = std::collections::HashMap::new();
    for &i in &missing {
        seen.entry(hashes[i].as_str()).or_insert_with(|| {
            unique.push(i);
            unique.len() - 1
        });
    }
    let batch: Vec<&str> = unique.iter().map(|&i| texts[i]).collect();
    let vectors = embed_documents(embedder, &batch)?;
    for &i in &missing {
        let k = seen[hashes[i].as_str()];
        rows[i] = Some(vectors.row(k).to_vec());
    }
    let computed = unique
        .iter()
        .zip(vectors.rows())
        .map(|(&i, v)| (hashes[i].clone(), v.to_vec()))
        .collect();
    Ok((
        rows.into_iter().map(|r| r.expect("filled")).collect(),
        computed,
    ))
}

/// What [`prefill_messages`] did.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Prefill {
    /// Messages not yet in their namespace's vector file.
    pub messages: usize,
    /// Distinct texts the cache lacked, embedded now.
    pub embedded: usize,
    /// Seconds spent, lookups and cache writes included.
    pub seconds: f64,
}

/// Embeds, before `namespaces` are built, the messages of all of them that the embedding cache
/// lacks (those past the end of each namespace's vector file), together: the texts are sorted by
/// length and embedded `chunk` at a time, so that a batch is full whatever the namespaces' sizes.
/// With `overlap`, two chunks are in flight at once — one tokenised on the CPU while the other
/// runs on the device (a GPU embedder serialises its forward passes); each chunk's vectors are
/// cached as it completes, so an interrupted run keeps what it embedded. The builds then find
/// every message vector in the cache. `progress` is told the texts embedded so far and the total.
pub fn prefill_messages(
    store: &mut Store,
    namespaces: &[Namespace],
    embedder: &dyn Embedder,
    chunk: usize,
    overlap: bool,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Prefill, PipelineError> {
    let started = std::time::Instant::now();
    let model = embedder.model_id().to_string();
    let mut texts: Vec<String> = Vec::new();
    for ns in namespaces {
        let after = match store.vector_file(ns, &model) {
            Ok(info) => info.map_or(0, |i| i.last_rowid),
            // A damaged record: the build rewrites the file; every message is embedded again.
            Err(StoreError::Corrupt { .. } | StoreError::VectorFile { .. }) => 0,
            Err(e) => return Err(e.into()),
        };
        texts.extend(
            store
                .messages_after(ns, after)?
                .into_iter()
                .map(|(_, m)| m.embedding_text()),
        );
    }
    let messages = texts.len();
    let total = embed_missing(store, embedder, &texts, chunk, overlap, progress)?;
    Ok(Prefill {
        messages,
        embedded: total,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Embeds the distinct texts of `texts` that the embedding cache lacks, shortest first, `chunk`
/// at a time, caching each chunk as it completes (an interrupted run keeps what it embedded) and
/// telling `progress` the texts embedded of those to embed; with `overlap`, two chunks are in
/// flight at once. Returns how many texts were embedded.
fn embed_missing(
    store: &mut Store,
    embedder: &dyn Embedder,
    texts: &[String],
    chunk: usize,
    overlap: bool,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<usize, PipelineError> {
    let model = embedder.model_id().to_string();
    let hashes: Vec<String> = texts.iter().map(|t| trajwiki_core::text_hash(t)).collect();
    let hash_refs: Vec<&str> = hashes.iter().map(String::as_str).collect();
    let present = store.has_embeddings(&model, &hash_refs)?;
    let mut seen = std::collections::HashSet::new();
    let mut missing: Vec<usize> = (0..texts.len())
        .filter(|&i| !present[i] && seen.insert(hashes[i].as_str()))
        .collect();
    missing.sort_by_key(|&i| texts[i].len());
    let total = missing.len();
    progress(0, total);
    let chunks: Vec<&[usize]> = missing.chunks(chunk.max(1)).collect();
    let embed = |part: &[usize]| {
        let batch: Vec<&str> = part.iter().map(|&i| texts[i].as_str()).collect();
        embed_documents(embedder, &batch)
    };
    let mut done = 0;
    let mut put = |store: &mut Store, part: &[usize], vectors: Embeddings| {
        let items: Vec<(&str, &[f32])> = part
            .iter()
            .zip(vectors.rows())
            .map(|(&i, v)| (hashes[i].as_str(), v))
            .collect();
        store.put_embeddings(&model, embedder.dim(), &items)?;
        done += part.len();
        progress(done, total);
        Ok::<_, PipelineError>(())
    };
    if overlap && chunks.len() > 1 {
        // Two embedding threads take chunks in turn; this thread caches each as it arrives.
        use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
        let next = AtomicUsize::new(0);
        let (tx, rx) = std::sync::mpsc::sync_channel(2);
        std::thread::scope(|scope| -> Result<(), PipelineError> {
            for _ in 0..2 {
                let (tx, next, chunks, embed) = (tx.clone(), &next, &chunks, &embed);
                scope.spawn(move || {
                    while let Some(&part) = chunks.get(next.fetch_add(1, Relaxed)) {
                        let out = embed(part);
                        let failed = out.is_err();
                        // After a failure, or once the receiver has stopped, nothing more.
                        if tx.send((part, out)).is_err() || failed {
                            break;
                        }
                    }
                });
            }
            drop(tx);
            for (part, out) in rx {
                if let Err(e) = out.and_then(|v| put(store, part, v)) {
                    // The threads find no chunk left, and no receiver once this returns.
                    next.store(chunks.len(), Relaxed);
                    return Err(e);
                }
            }
            Ok(())
        })?;
    } else {
        for part in &chunks {
            let vectors = embed(part)?;
            put(store, part, vectors)?;
        }
    }
    Ok(total)
}

/// Appends to the vector file of `ns` (for `embedder`'s model) the vectors of every message
/// ingested since its last row, taking them from the embedding cache where the fold left them.
/// Returns how many rows it appended, and the vector file's record as it left it (`None`
/// without one).
pub fn sync_vectors(
    store: &mut Store,
    ns: &Namespace,
    embedder: &dyn Embedder,
    dtype: VectorDtype,
) -> Result<(usize, Option<VectorFileInfo>), PipelineError> {
    sync_vectors_from(store, ns, embedder, dtype, None)
}

/// [`sync_vectors`], with `read`: a position and the messages of `ns` ingested after it, in
/// arrival order, as a build just read them. When the file's last row is at or past that
/// position, the messages after the row are taken from `read` instead of read again.
fn sync_vectors_from(
    store: &mut Store,
    ns: &Namespace,
    embedder: &dyn Embedder,
    dtype: VectorDtype,
    read: Option<(i64, &[Arrived])>,
) -> Result<(usize, Option<VectorFileInfo>), PipelineError> {
    let model = embedder.model_id().to_string();
    let held = match store.checked_vector_file(ns, &model) {
        Ok(info) => info,
        // A damaged file (cut short, unreadable) is derived state: written again.
        Err(StoreError::Corrupt { .. } | StoreError::VectorFile { .. }) => {
            store.reset_vectors(ns, &model)?;
            None
        }
        Err(e) => return Err(e.into()),
    };
    let after = held.as_ref().map_or(0, |i| i.last_rowid);
    let arrived = match read {
        Some((from, read)) if after >= from => read
            .iter()
            .filter(|(rowid, _)| *rowid > after)
            .cloned()
            .collect(),
        _ => store.messages_after(ns, after)?,
    };
    if arrived.is_empty() {
        return Ok((0, held));
    }
    let texts: Vec<String> = arrived.iter().map(|(_, m)| m.embedding_text()).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    // What the cache lacked is cached in the append's own transaction: one commit for both.
    let (vectors, computed) = embed_through_cache(store, embedder, &refs)?;
    let rows: Vec<(i64, &[f32])> = arrived
        .iter()
        .zip(&vectors)
        .map(|((rowid, _), v)| (*rowid, v.as_slice()))
        .collect();
    let cache: Vec<(&str, &[f32])> = computed
        .iter()
        .map(|(hash, v)| (hash.as_str(), v.as_slice()))
        .collect();
    match store.append_vectors_caching(ns, &model, dtype, embedder.dim(), &rows, &cache) {
        Ok(info) => Ok((rows.len(), Some(info))),
        // Another process appended the same messages' rows first: the file is current up to
        // them, and what it lacks, if anything, is appended from there.
        Err(StoreError::Conflict {
            kind: "vector row", ..
        }) => sync_vectors_from(store, ns, embedder, dtype, None),
        Err(e) => Err(e.into()),
    }
}

/// Builds the approximate index of `ns`'s vector file when the file holds at least `threshold`
/// rows and the index is missing or covers less than ten elevenths of them (so that it is
/// rebuilt after every 10 % of growth: a bounded cost per message on average); the rows past it
/// are scanned exactly until then, decided on the file's record `held` (as [`sync_vectors`]
/// returns it). Returns the rows the index covers (0 without one, or in a build without
/// approximate search).
pub fn sync_ann(
    store: &mut Store,
    ns: &Namespace,
    embedder: &dyn Embedder,
    threshold: usize,
    held: Option<VectorFileInfo>,
) -> Result<usize, PipelineError> {
    let model = embedder.model_id().to_string();
    // Decided on the record alone: an append that needs no new index maps nothing.
    let Some(info) = held else {
        return Ok(0);
    };
    let fresh = info.ann_rows > 0 && info.rows - info.ann_rows <= info.ann_rows / 10;
    if !AnnIndex::available() || info.rows < threshold.max(1) || fresh {
        return Ok(info.ann_rows);
    }
    let Some(mapped) = store.map_vectors(ns, &model)? else {
        return Ok(0);
    };
    let info = mapped.info().clone();
    let mut rows = vec![0f32; info.rows * info.dim];
    for (i, row) in rows.chunks_exact_mut(info.dim).enumerate() {
        mapped.row_f32(i, row);
    }
    drop(mapped);
    let ann = AnnIndex::build(&rows, info.dim, AnnParams::default())
        .map_err(|e| PipelineError::Index(Box::new(e.into())))?;
    ann.save(&info.ann_path())
        .map_err(|e| PipelineError::Index(Box::new(e.into())))?;
    store.set_ann_rows(ns, &model, info.rows)?;
    Ok(info.rows)
}

/// How [`build_namespace`] treats what it finds.
#[derive(Debug, Clone, Copy)]
pub struct BuildOptions {
    /// Replace a memory built with another model or configuration (or by an earlier version),
    /// folding every message again.
    pub rebuild: bool,
    /// Build the open exchange too (its reply may never come), instead of keeping it pending.
    pub flush: bool,
    /// The element type of a namespace's vector file when a build creates it (an existing file
    /// keeps its type).
    pub vectors: VectorDtype,
    /// Vectors a namespace needs before its build adds an approximate index (in a build with
    /// the `faiss` feature; without it, searches stay exact at any size).
    pub ann_threshold: usize,
}

/// [`BuildOptions::ann_threshold`]'s default: below it the exact scan is fast enough.
pub const ANN_THRESHOLD: usize = 50_000;

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            rebuild: false,
            flush: false,
            vectors: VectorDtype::default(),
            ann_threshold: ANN_THRESHOLD,
        }
    }
}

fn encode<T: serde::Serialize>(value: &T) -> Vec<u8> {
    postcard::to_allocvec(value).expect("fold state serialises")
}

fn decode<T: serde::de::DeserializeOwned>(
    ns: &Namespace,
    (table, column): (&'static str, &'static str),
    bytes: &[u8],
) -> Result<T, PipelineError> {
    postcard::from_bytes(bytes).map_err(|e| {
        PipelineError::Store(StoreError::Corrupt {
            table,
            column,
            id: ns.to_string(),
            reason: format!("fold state: {e}"),
        })
    })
}

/// Builds what arrived in `ns` since its last build and commits it in one transaction.
///
/// Construction is a fold over exchanges in ingest order (SPEC §2.6): the fold's state is read
/// back from the store, the messages ingested since are grouped into exchanges after the pending
/// tail, every closed exchange is appended (snapshots, claims and ops are only ever added), the
/// changed trajectories and the wiki are updated, and the fold's state is written back. The last
/// exchange stays pending (its reply may yet come) unless `flush`. A memory built with another
/// model or configuration is an error unless `rebuild`, which replaces it.
pub fn build_namespace(
    store: &mut Store,
    ns: &Namespace,
    embedder: &dyn Embedder,
    config: &MemoryConfig,
    options: BuildOptions,
) -> Result<BuildReport, PipelineError> {
    build_namespace_kept(store, ns, embedder, config, options, &mut None)
}

/// A namespace's fold kept in memory between builds by a long-lived caller (the Python `Memory`,
/// a server), with the position it was committed at: the next build of the namespace starts from
/// it instead of reading the fold's state back from the store, so an append costs what it adds.
pub struct KeptFold {
    fold: Fold,
    model_id: String,
    config: String,
    cursor: i64,
    /// The messages of the pending exchange (immutable once stored: an append reads none of
    /// them back).
    pending: Vec<SourceMessage>,
}

impl KeptFold {
    /// Whether the store's fold is the one kept: same settings, same position.
    fn matches(&self, ns: &Namespace, r: &FoldRecord) -> bool {
        self.fold.namespace == *ns
            && self.model_id == r.model_id
            && self.config == r.config
            && self.cursor == r.cursor
            && self.pending.iter().map(|m| &m.id).eq(&r.pending)
    }
}

/// [`build_namespace`], starting from `kept` when it is the fold the store holds (another writer
/// that appended since makes it stale, and it is read back instead) and leaving the fold there
/// after a successful build.
pub fn build_namespace_kept(
    store: &mut Store,
    ns: &Namespace,
    embedder: &dyn Embedder,
    config: &MemoryConfig,
    options: BuildOptions,
    kept: &mut Option<KeptFold>,
) -> Result<BuildReport, PipelineError> {
    build_namespace_kept_driven(
        store,
        ns,
        embedder,
        config,
        options,
        kept,
        Drivers::default(),
    )
}

/// Writes a wiki page's body from the deterministic page and its trajectories' summaries
/// (aligned with its `trajectory_ids`), or leaves it (`None`).
pub trait PageWriter: Sync {
    /// A name for reports.
    fn name(&self) -> &str;
    /// The new body, checked by the writer.
    fn rewrite(&self, page: &trajwiki_core::WikiPage, summaries: &[&str]) -> Option<String>;
}

/// The model-driven parts of a build, each in place of its deterministic counterpart when given.
#[derive(Clone, Copy, Default)]
pub struct Drivers<'a> {
    /// Exchange → snapshot draft (`crate::llm::extract::LlmExtractor`).
    pub extractor: Option<&'a dyn trajwiki_memory::Extractor>,
    /// Which trajectory a snapshot continues, or a new one (`crate::llm::matching::LlmDecider`).
    pub decider: Option<&'a dyn trajwiki_memory::MatchDecider>,
    /// Claim transitions: ADD / REVISE / DEPRECATE (`crate::llm::judge::LlmJudge`).
    pub judge: Option<&'a dyn trajwiki_memory::ClaimJudge>,
    /// The bodies of changed wiki pages (`crate::llm::pages::LlmPageWriter`).
    pub pages: Option<&'a dyn PageWriter>,
    /// Told where the build is as it goes (a face's progress bar or job status).
    pub progress: Option<&'a (dyn Fn(Progress) + Sync)>,
}

/// Where a long operation is (a build, an ingest, a compile, an export): its stage and, for a
/// stage that counts, the units done of the total (texts embedded, messages folded, records
/// stored or written, runs compiled; 0 of 0 for one that counts nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Progress {
    /// The stage.
    pub stage: Stage,
    /// Units done.
    pub done: usize,
    /// Units in all.
    pub total: usize,
}

/// A stage of a long operation: a build's, in the order a build passes them, then those of an
/// ingest, a compile and an export (one stage each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Reading the fold's state back from the store (none when it is kept).
    Loading,
    /// Embedding the texts the embedding cache lacks (counts texts).
    Embedding,
    /// Folding exchanges into trajectories, claims and their edits (counts messages).
    Folding,
    /// Rendering the wiki pages that changed.
    Pages,
    /// Committing the records, pages and fold state in one transaction.
    Committing,
    /// Bringing the vector file and the approximate index up to date.
    Vectors,
    /// An ingest storing its records, in one transaction (counts records gone through).
    Storing,
    /// Compiling agent runs, each committed as it is compiled (counts runs).
    Compiling,
    /// Writing an export (counts records).
    Exporting,
}

impl Stage {
    /// Its name in JSON (a job's `stage`).
    pub fn name(self) -> &'static str {
        match self {
            Stage::Loading => "loading",
            Stage::Embedding => "embedding",
            Stage::Folding => "folding",
            Stage::Pages => "pages",
            Stage::Committing => "committing",
            Stage::Vectors => "vectors",
            Stage::Storing => "storing",
            Stage::Compiling => "compiling",
            Stage::Exporting => "exporting",
        }
    }

    /// A few words for a progress line.
    pub fn label(self) -> &'static str {
        match self {
            Stage::Loading => "loading the fold",
            Stage::Embedding => "embedding",
            Stage::Folding => "folding",
            Stage::Pages => "rendering pages",
            Stage::Committing => "committing",
            Stage::Vectors => "vectors",
            Stage::Storing => "storing",
            Stage::Compiling => "compiling runs",
            Stage::Exporting => "exporting",
        }
    }

    /// What the stage counts, for a progress line ("texts", "messages"), if anything.
    pub fn unit(self) -> Option<&'static str> {
        match self {
            Stage::Embedding => Some("texts"),
            Stage::Folding => Some("messages"),
            Stage::Storing | Stage::Exporting => Some("records"),
            Stage::Compiling => Some("runs"),
            _ => None,
        }
    }
}

impl Progress {
    /// `progress`, told of `done` of `total` at `stage`, as a plain `(done, total)` callback
    /// for a layer below the engine (a no-op without one).
    pub fn teller<'a>(
        progress: Option<&'a (dyn Fn(Progress) + Sync)>,
        stage: Stage,
    ) -> impl Fn(usize, usize) + Sync + 'a {
        move |done, total| {
            if let Some(progress) = progress {
                progress(Progress { stage, done, total });
            }
        }
    }
}

impl Drivers<'_> {
    fn tell(&self, stage: Stage, done: usize, total: usize) {
        if let Some(progress) = self.progress {
            progress(Progress { stage, done, total });
        }
    }
}

/// [`build_namespace`] with model-driven `drivers` in place of the deterministic extractor and
/// judge: what they produce is checked where it is applied, and every op's rationale names the
/// judge that decided it.
pub fn build_namespace_driven(
    store: &mut Store,
    ns: &Namespace,
    embedder: &dyn Embedder,
    config: &MemoryConfig,
    options: BuildOptions,
    drivers: Drivers<'_>,
) -> Result<BuildReport, PipelineError> {
    build_namespace_kept_driven(store, ns, embedder, config, options, &mut None, drivers)
}

/// [`build_namespace_kept`] with `drivers` (models in place of the deterministic parts, a
/// progress sink): the one build every other calls.
pub fn build_namespace_kept_driven(
    store: &mut Store,
    ns: &Namespace,
    embedder: &dyn Embedder,
    config: &MemoryConfig,
    options: BuildOptions,
    kept: &mut Option<KeptFold>,
    drivers: Drivers<'_>,
) -> Result<BuildReport, PipelineError> {
    // Builds of one namespace take turns (the store's build lock); where the lock could not be
    // taken, another process that builds the namespace at the same time may commit first: this
    // build is then done again from where that one left the fold (each retry follows a commit
    // of someone else's).
    let _turn = store.lock_builds(ns)?;
    build_in_turn(store, ns, embedder, config, options, kept, drivers)
}

/// [`build_namespace_kept_driven`] for a caller holding the namespace's build lock
/// ([`Store::lock_builds`]).
pub(crate) fn build_in_turn(
    store: &mut Store,
    ns: &Namespace,
    embedder: &dyn Embedder,
    config: &MemoryConfig,
    options: BuildOptions,
    kept: &mut Option<KeptFold>,
    drivers: Drivers<'_>,
) -> Result<BuildReport, PipelineError> {
    let mut tries = 0;
    loop {
        match build_once(store, ns, embedder, config, options, kept, drivers) {
            Err(PipelineError::Store(StoreError::Moved { .. })) if tries < MOVED_RETRIES => {
                tries += 1;
            }
            done => return done,
        }
    }
}

/// How many times a build whose commit found the namespace built by another process is done
/// again before the error is returned.
const MOVED_RETRIES: usize = 16;

/// One build: the fold resumed (or started), what arrived since folded in, the pages
/// re-derived, the change committed in one transaction, then the vector files and the
/// approximate index brought up to date. The fold is left in `kept`.
fn build_once(
    store: &mut Store,
    ns: &Namespace,
    embedder: &dyn Embedder,
    config: &MemoryConfig,
    options: BuildOptions,
    kept: &mut Option<KeptFold>,
    drivers: Drivers<'_>,
) -> Result<BuildReport, PipelineError> {
    let held = kept.take();
    let model_id = embedder.model_id().to_string();
    let config_json = serde_json::to_string(config).expect("configuration serialises");
    let started = std::time::Instant::now();
    drivers.tell(Stage::Loading, 0, 0);
    // The record and the states it leads to in one read: another process's build committed
    // between the two would give the record of one build with the groups of the next.
    let Start {
        mut fold,
        cursor,
        pending,
        from,
        replaced,
    } = store
        .reading(|store| start_fold(store, ns, held, &model_id, &config_json, config, options))?;
    let waited = pending.len();
    let replace = replaced.is_some();
    let load_ms = started.elapsed().as_millis();

    let start_cursor = cursor;
    let (mut sequence, fresh) = arrived(store, ns, pending, cursor)?;
    let cursor = fresh.last().map_or(cursor, |(rowid, _)| *rowid);
    sequence.extend(fresh.iter().map(|(_, m)| m.clone()));
    if sequence.is_empty() && fold.header.messages == 0 {
        return Err(PipelineError::Empty(ns.clone()));
    }
    let mut groups: Vec<Vec<&SourceMessage>> = exchanges(&sequence)
        .into_iter()
        .map(|g| g.into_iter().map(|i| &sequence[i]).collect())
        .collect();
    let tail: Vec<&SourceMessage> = if options.flush {
        Vec::new()
    } else {
        groups.pop().unwrap_or_default()
    };
    // No exchange closed: the one waiting for its reply only grew (or nothing arrived). The
    // fold is as stored, and so is its record: the next build reads the waiting messages again
    // from the record's position, so an append that only waits for its reply commits nothing.
    // (The first build commits its record whatever it folded: the namespace is built from then.)
    let waiting = groups.is_empty() && !replace && from.is_some();

    let mut report = BuildReport {
        load_ms,
        ..BuildReport::default()
    };
    let (delta, computed) = fold_in(
        store,
        embedder,
        config,
        drivers,
        &mut fold,
        &groups,
        &mut report,
    )?;
    drivers.tell(Stage::Pages, 0, 0);
    let (changed, retired) = pages_of(&mut fold, drivers.pages, &mut report);
    report.count(&fold);
    report.pending_messages = tail.len();
    report.messages += tail.len();
    report.appended = groups.len();
    report.replaced = replaced;
    report.embedded_texts = computed;
    // Where the store's fold record is after this build, and the messages it names pending.
    let (cursor, pending) = if waiting {
        (start_cursor, sequence[..waited].to_vec())
    } else {
        (cursor, tail.into_iter().cloned().collect::<Vec<_>>())
    };
    if !waiting {
        let record = FoldRecord {
            model_id: model_id.clone(),
            config: config_json.clone(),
            cursor,
            pending: pending.iter().map(|m| m.id.clone()).collect(),
            header: encode(&fold.header),
        };
        let batch = memory_batch(
            ns,
            &mut fold,
            delta,
            PageUpdates { changed, retired },
            replace,
            FoldWrite {
                from,
                record,
                trajectories: Vec::new(),
                groups: Vec::new(),
            },
        );
        drivers.tell(Stage::Committing, 0, 0);
        report.commit_ms = commit(store, ns, &batch)?;
    }
    // From here on the memory is committed: a failure says so ([`PipelineError::Unfinished`]).
    let unfinished = |step, report: &BuildReport, source| PipelineError::Unfinished {
        namespace: ns.clone(),
        step,
        report: Box::new(report.clone()),
        source: Box::new(source),
    };
    // The vector file's record as the append left it decides the approximate index.
    drivers.tell(Stage::Vectors, 0, 0);
    let (appended, held) = sync_vectors_from(
        store,
        ns,
        embedder,
        options.vectors,
        Some((start_cursor, &fresh)),
    )
    .map_err(|e| unfinished("vector file", &report, e))?;
    report.vectors_appended = appended;
    report.ann_rows = sync_ann(store, ns, embedder, options.ann_threshold, held)
        .map_err(|e| unfinished("approximate index", &report, e))?;
    *kept = Some(KeptFold {
        fold,
        model_id,
        config: config_json,
        cursor,
        pending,
    });
    Ok(report)
}

/// Where a build starts: the fold, the ingest position it consumed up to, the messages of its
/// pending exchange, the position the commit must find unchanged, and what a rebuild replaces.
struct Start {
    fold: Fold,
    cursor: i64,
    pending: Pending,
    from: Option<(i64, Vec<trajwiki_core::MessageId>)>,
    replaced: Option<String>,
}

/// The messages of the exchange a build starts with, still waiting for its reply.
enum Pending {
    /// As a kept fold holds them.
    Held(Vec<SourceMessage>),
    /// By id, as the fold record names them: read from the store.
    Stored(Vec<trajwiki_core::MessageId>),
}

impl Pending {
    fn len(&self) -> usize {
        match self {
            Pending::Held(messages) => messages.len(),
            Pending::Stored(ids) => ids.len(),
        }
    }
}

/// The fold a build of `ns` starts from: `held` when it is the one the store holds, else read
/// back from the store, else a new one (replacing a memory built otherwise only with
/// `options.rebuild`; without it that memory is [`PipelineError::Stale`]).
/// Called inside one read transaction ([`Store::reading`]), so that the record and the states
/// it leads to are one commit's.
fn start_fold(
    store: &Store,
    ns: &Namespace,
    held: Option<KeptFold>,
    model_id: &str,
    config_json: &str,
    config: &MemoryConfig,
    options: BuildOptions,
) -> Result<Start, PipelineError> {
    let stale = |detail: String| PipelineError::Stale {
        namespace: ns.clone(),
        detail,
    };
    let record = store.fold_record(ns)?;
    let from = record.as_ref().map(|r| (r.cursor, r.pending.clone()));
    let mut replaced = None;
    // A memory without a fold record was built before memory could be appended to.
    let legacy = record.is_none() && store.has_memory(ns)?;
    let (fold, cursor, pending) = match record {
        Some(r) if r.model_id == model_id && same_config(&r.config, config_json) => {
            if let Some(k) = held.filter(|k| k.matches(ns, &r)) {
                (k.fold, r.cursor, Pending::Held(k.pending))
            } else {
                let fold = read_fold(store, ns, &r, config)?;
                (fold, r.cursor, Pending::Stored(r.pending))
            }
        }
        Some(r) if !options.rebuild => {
            return Err(if r.model_id != model_id {
                PipelineError::built_with_another_model(ns, &r.model_id, model_id)
            } else {
                stale(format!("built with another configuration: {}", r.config))
            });
        }
        None if legacy && !options.rebuild => {
            return Err(stale(
                "built by an earlier version of trajwiki, which cannot be appended to".into(),
            ));
        }
        Some(r) => {
            replaced = Some(format!("a memory built with model {}", r.model_id));
            (Fold::new(ns.clone()), 0, Pending::Stored(Vec::new()))
        }
        None if legacy => {
            replaced = Some("a memory built by an earlier version".into());
            (Fold::new(ns.clone()), 0, Pending::Stored(Vec::new()))
        }
        None => (Fold::new(ns.clone()), 0, Pending::Stored(Vec::new())),
    };
    Ok(Start {
        fold,
        cursor,
        pending,
        from,
        replaced,
    })
}

/// The fold of `ns` as the store holds it at `record`: its header, trajectories and wiki groups.
fn read_fold(
    store: &Store,
    ns: &Namespace,
    record: &FoldRecord,
    config: &MemoryConfig,
) -> Result<Fold, PipelineError> {
    let header = decode(ns, ("memory_builds", "header"), &record.header)?;
    // Decoded side by side (a state in the current form needs nothing else); one a fold stored
    // before late arrival was defined is read again with the store, in its place.
    let stored = store.fold_trajectories(ns)?;
    let decoded: Vec<Result<TrajState, PipelineError>> = stored
        .par_iter()
        .map(|bytes| decode::<TrajState>(ns, ("fold_trajectories", "state"), bytes))
        .collect();
    let trajectories = decoded
        .into_iter()
        .zip(&stored)
        .map(|(state, bytes)| state.or_else(|now| earlier_state(store, bytes, now)))
        .collect::<Result<_, _>>()?;
    let groups = store
        .fold_groups(ns)?
        .into_iter()
        .map(|(key, bytes)| Ok((key, decode(ns, ("fold_groups", "state"), &bytes)?)))
        .collect::<Result<_, PipelineError>>()?;
    Ok(Fold::resume(
        ns.clone(),
        header,
        trajectories,
        groups,
        config,
    ))
}

/// A trajectory's fold state that does not decode in the current form (`now`, the error it gave):
/// as a fold stored it before late arrival was defined, with the time of its latest snapshot read
/// back ([`TrajStateV1`]); else `now`.
fn earlier_state(
    store: &Store,
    bytes: &[u8],
    now: PipelineError,
) -> Result<TrajState, PipelineError> {
    let Ok(earlier) = postcard::from_bytes::<TrajStateV1>(bytes) else {
        return Err(now);
    };
    let latest = earlier
        .latest()
        .and_then(|id| store.snapshot(id).transpose())
        .transpose()?;
    match latest {
        Some(s) => Ok(earlier.at(s.timestamp)),
        None => Err(now),
    }
}

/// Whether a stored configuration is `config_json`: read as a configuration (settings added
/// since it was stored take their defaults) and written again, or else as it is.
fn same_config(stored: &str, config_json: &str) -> bool {
    stored == config_json
        || serde_json::from_str::<MemoryConfig>(stored)
            .ok()
            .and_then(|c| serde_json::to_string(&c).ok())
            .is_some_and(|c| c == config_json)
}

/// The messages a build folds, in arrival order: those of the pending exchange, and what arrived
/// after `cursor` with their ingest positions.
fn arrived(
    store: &Store,
    ns: &Namespace,
    pending: Pending,
    cursor: i64,
) -> Result<(Vec<SourceMessage>, Vec<Arrived>), PipelineError> {
    let sequence = match pending {
        Pending::Held(messages) => messages,
        Pending::Stored(ids) => {
            let mut sequence = Vec::with_capacity(ids.len());
            for id in ids {
                let m = store.message(&id)?.ok_or_else(|| StoreError::Dangling {
                    what: format!("pending exchange of namespace {ns}"),
                    missing: id.to_string(),
                })?;
                sequence.push(m);
            }
            sequence
        }
    };
    Ok((sequence, store.messages_after(ns, cursor)?))
}

/// Folds the exchanges `groups` into `fold` with the deterministic builders or `drivers`,
/// embedding through the store's cache; returns the new records and how many texts were
/// embedded (not found in the cache).
fn fold_in(
    store: &mut Store,
    embedder: &dyn Embedder,
    config: &MemoryConfig,
    drivers: Drivers<'_>,
    fold: &mut Fold,
    groups: &[Vec<&SourceMessage>],
    report: &mut BuildReport,
) -> Result<(trajwiki_memory::Delta, usize), PipelineError> {
    let extractor = DeterministicExtractor::new(config.clone());
    let decider = DeterministicDecider::new(config.clone());
    let judge = DeterministicJudge::new(config.clone());
    let builders = Builders {
        config,
        extractor: drivers.extractor.unwrap_or(&extractor),
        decider: drivers.decider.unwrap_or(&decider),
        judge: drivers.judge.unwrap_or(&judge),
    };
    let mut computed = 0;
    // A large build, or one that tells its progress, embeds what the cache lacks first, a chunk
    // at a time; the fold then finds every vector in the cache. A small one embeds in one call
    // (one store read fewer): the same batches, since the embedder sorts a call's texts by
    // length as the chunks are sorted.
    let texts: Vec<String> = groups
        .iter()
        .flatten()
        .map(|m| m.embedding_text())
        .collect();
    if texts.len() > EMBED_CHUNK || drivers.progress.is_some() {
        let t0 = std::time::Instant::now();
        computed += embed_missing(
            store,
            embedder,
            &texts,
            EMBED_CHUNK,
            false,
            &|done, total| drivers.tell(Stage::Embedding, done, total),
        )?;
        report.embed_ms += t0.elapsed().as_millis();
    }
    let mut embed = |texts: &[&str]| -> Result<Vec<Vec<f32>>, EmbedError> {
        match embed_cached(store, embedder, texts) {
            Ok((rows, n)) => {
                computed += n;
                Ok(rows)
            }
            Err(PipelineError::Build(BuildError::Embed { source, .. })) => Err(source),
            Err(e) => Err(EmbedError::Backend {
                stage: "embedding cache",
                source: Box::new(e),
            }),
        }
    };
    let delta = fold_exchanges_told(
        fold,
        groups,
        &mut embed,
        &builders,
        report,
        &mut |done, total| drivers.tell(Stage::Folding, done, total),
    )?;
    Ok((delta, computed))
}

/// How many texts a large build embeds at a time (a multiple of the embedder's batch).
const EMBED_CHUNK: usize = 1024;

/// The wiki pages the fold's changes changed (their bodies rewritten by `writer` when there is
/// one, index pages excepted) and the pages they retired.
fn pages_of(
    fold: &mut Fold,
    writer: Option<&dyn PageWriter>,
    report: &mut BuildReport,
) -> (Vec<trajwiki_core::WikiPage>, Vec<trajwiki_core::PageId>) {
    let (changed, retired) = trajwiki_memory::wiki_with_members(fold, report);
    let changed = changed
        .into_iter()
        .map(|(mut page, members)| {
            if let Some(writer) = writer.filter(|_| page.kind != trajwiki_core::PageKind::Index) {
                let summaries: Vec<&str> = members
                    .iter()
                    .map(|&t| fold.trajectories[t].summary.as_str())
                    .collect();
                if let Some(body) = writer.rewrite(&page, &summaries) {
                    page.body = body;
                }
            }
            page
        })
        .collect();
    (changed, retired)
}

/// What a build commits: the new records, the changed trajectories and pages, and the fold's
/// changed parts under `fold_write` (its trajectories and groups taken from the fold's dirty
/// marks here).
fn memory_batch(
    ns: &Namespace,
    fold: &mut Fold,
    delta: trajwiki_memory::Delta,
    page_updates: PageUpdates,
    replace: bool,
    mut fold_write: FoldWrite,
) -> MemoryBatch {
    let dirty = fold.take_dirty();
    fold_write.trajectories = dirty
        .iter()
        .map(|&t| (t, encode(&fold.trajectories[t])))
        .collect();
    fold_write.groups = fold
        .wiki
        .take_dirty_groups()
        .into_iter()
        .map(|key| {
            let bytes = encode(&fold.wiki.groups()[&key]);
            (key, bytes)
        })
        .collect();
    MemoryBatch {
        namespace: ns.clone(),
        trajectories: dirty
            .iter()
            .map(|&t| fold.trajectories[t].record(ns))
            .collect(),
        snapshots: delta.snapshots,
        claims: delta.claims,
        ops: delta.ops,
        pages: None,
        page_updates: Some(page_updates),
        replace,
        fold: Some(fold_write),
    }
}

/// Commits `batch` in one transaction. Returns the commit's milliseconds. A record stored with
/// other content is [`PipelineError::Stale`]. Nothing is embedded: a page's vector is derived
/// from its trajectories' when an index is loaded.
fn commit(store: &mut Store, ns: &Namespace, batch: &MemoryBatch) -> Result<u128, PipelineError> {
    let committing = std::time::Instant::now();
    let committed = store.commit_memory(batch);
    let commit_ms = committing.elapsed().as_millis();
    match committed {
        Ok(()) => Ok(commit_ms),
        Err(StoreError::Conflict { kind, id, .. }) => Err(PipelineError::Stale {
            namespace: ns.clone(),
            detail: format!("{kind} {id} differs"),
        }),
        Err(e) => Err(e.into()),
    }
}
