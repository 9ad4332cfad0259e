//! The operations that the command line and the Python bindings share: loading an embedder by
//! name, looking a record up by id, searching a namespace with its evidence, and reading the claim
//! history of a trajectory or a claim.
//!
//! Each returns plain data (serializable, no printing), so that `trajwiki query --json` and
//! `Memory.search` in Python are one code path with two presentations.
//!
//! ```
//! use trajwiki_engine::api::{get, load_embedder, ApiError};
//! use trajwiki_store::Store;
//!
//! let embedder = load_embedder("hashing-64").unwrap();
//! assert_eq!(embedder.dim(), 64);
//! let dir = tempfile::tempdir().unwrap();
//! let store = Store::open(dir.path()).unwrap();
//! let missing = get(&store, "trj_0123456789abcdef");
//! assert!(matches!(missing, Err(ApiError::NotFound { .. })));
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;
use std::sync::PoisonError;
use trajwiki_compute::ScoringBackend;
use trajwiki_core::{
    replay_ops, Claim, ClaimId, ClaimOp, ClaimStatus, Compilation, CompilationId, EmbedError,
    Embedder, HashingEmbedder, IdError, IdKind, Insight, InsightId, MessageId, Namespace, OpId,
    PageId, ReplayError, Run, RunId, Snapshot, SnapshotId, SourceMessage, Timestamp, Trajectory,
    TrajectoryId, WikiPage, TIMESTAMP_FORMAT,
};
use trajwiki_cuda::{CudaBertEmbedder, CudaQwen3Embedder, Device};
use trajwiki_embed::{Architecture, EmbedOptions, Precision};
use trajwiki_retrieve::{Context, Derived, Index, IndexError, Mode, Ranking, RetrievalConfig};
use trajwiki_store::{Cursor, Store, StoreError};

use crate::pipeline::PipelineError;
use crate::retrieval::{
    embed_query, load_index, update_index as update_index_in_place, Earlier, Held, Updated,
};

/// A failure of one of the shared operations.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// A malformed id or namespace name.
    #[error(transparent)]
    Id(#[from] IdError),
    /// A well-formed id that names no record of this store.
    #[error("no {kind} with id {id} in this store")]
    NotFound {
        /// The kind the id names.
        kind: IdKind,
        /// The id.
        id: String,
    },
    /// A namespace without messages.
    #[error("namespace {namespace} has no messages in {}", store.display())]
    UnknownNamespace {
        /// The namespace.
        namespace: Namespace,
        /// The store directory.
        store: PathBuf,
    },
    /// A namespace whose memory has not been built.
    #[error("namespace {0} is not built; build it first (`trajwiki build --namespace {0}`)")]
    NotBuilt(Namespace),
    /// `history` of a record that has none.
    #[error("history takes a trajectory or a claim id, not a {0}")]
    NoHistory(IdKind),
    /// An input past one of the limits (a question too long; see `trajwiki_core::limits`).
    #[error(transparent)]
    Limit(#[from] trajwiki_core::limits::LimitError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Building the index or embedding the question failed.
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    /// Retrieval refused its input.
    #[error(transparent)]
    Retrieve(#[from] IndexError),
    /// The claim op log could not be replayed.
    #[error(transparent)]
    Replay(#[from] ReplayError),
    /// The embedding model could not be loaded.
    #[error("cannot load the embedding model")]
    Model(#[from] EmbedError),
    /// A step panicked (a defect): what it said. The step's work was rolled back; what was
    /// committed before it stays.
    #[error("{step} failed unexpectedly (a defect, please report it): {message}")]
    Panicked {
        /// The step.
        step: &'static str,
        /// The panic's message.
        message: String,
    },
    /// The build settings stored with a namespace do not parse.
    #[error("the stored build settings of namespace {namespace} do not parse")]
    StoredConfig {
        /// The namespace.
        namespace: Namespace,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
}

impl ApiError {
    /// Whether the error is in what the caller asked for (an id, a namespace) rather than in the
    /// store or the machinery.
    pub fn is_input(&self) -> bool {
        matches!(
            self,
            ApiError::Id(_)
                | ApiError::NotFound { .. }
                | ApiError::UnknownNamespace { .. }
                | ApiError::NotBuilt(_)
                | ApiError::NoHistory(_)
                | ApiError::Limit(_)
                | ApiError::Pipeline(
                    PipelineError::Stale { .. } | PipelineError::ModelMismatch { .. }
                )
        )
    }
}

/// Loads an embedding model by name, on the CPU: a model folder, a name in the model cache
/// (`minilm`), or `hashing[-DIM]` (lexical, no model files; 384 dimensions unless given).
pub fn load_embedder(spec: &str) -> Result<Box<dyn Embedder>, EmbedError> {
    Ok(load_model(spec, &EmbedOptions::default(), Device::Cpu)?.embedder)
}

/// An embedding model loaded for a device.
pub struct LoadedModel {
    /// The model.
    pub embedder: Box<dyn Embedder>,
    /// Where it runs: `cpu` or `cuda`.
    pub backend: &'static str,
    /// Set when a GPU was asked for but the model runs on the CPU, to tell the user once.
    pub note: Option<CpuOnly>,
}

/// A model that runs on the CPU although `cuda` was asked for; the GPU still scores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuOnly {
    /// The model as it was named.
    pub model: String,
    /// Why it stays on the CPU, e.g. "is lexical".
    pub reason: &'static str,
}

impl CpuOnly {
    /// The note, naming the device setting as the caller spells it (`--device cuda` on the
    /// command line, `device="cuda"` in Python).
    pub fn message(&self, device_setting: &str) -> String {
        format!(
            "note: {} {}, which runs on the CPU; {device_setting} applies to scoring",
            self.model, self.reason
        )
    }
}

/// Loads model `spec` (as [`load_embedder`]) for `device`. Qwen3-Embedding and BERT-family models
/// (MiniLM) run on the GPU with `cuda`, and with `auto` when a GPU is usable; the hashing
/// embedder always runs on the CPU (with a [`LoadedModel::note`] when `cuda` was asked for).
/// `cuda` for a model without a usable GPU, or in a build without the `cuda` feature, is
/// [`EmbedError::DeviceUnavailable`].
pub fn load_model(
    spec: &str,
    opts: &EmbedOptions,
    device: Device,
) -> Result<LoadedModel, EmbedError> {
    let loaded = load_model_unchecked(spec, opts, device)?;
    trajwiki_core::limits::EMBEDDING_DIM.check(loaded.embedder.dim())?;
    Ok(loaded)
}

fn load_model_unchecked(
    spec: &str,
    opts: &EmbedOptions,
    device: Device,
) -> Result<LoadedModel, EmbedError> {
    let cpu = |embedder: Box<dyn Embedder>, reason: Option<&'static str>| LoadedModel {
        embedder,
        backend: "cpu",
        note: reason
            .filter(|_| device == Device::Cuda)
            .map(|reason| CpuOnly {
                model: spec.to_owned(),
                reason,
            }),
    };
    if let Some(rest) = spec.strip_prefix("hashing") {
        let dim = match rest.strip_prefix('-') {
            None if rest.is_empty() => Some(384),
            Some(d) => d.parse().ok().filter(|&d: &usize| d > 0),
            None => None,
        };
        return match dim {
            // The dimension is checked by `load_model`, before anything is embedded.
            Some(dim) => Ok(cpu(Box::new(HashingEmbedder::new(dim)), Some("is lexical"))),
            None => Err(EmbedError::ModelNotFound {
                path: PathBuf::from(spec),
                hint: "the lexical model is named hashing or hashing-<dimension>".into(),
            }),
        };
    }
    if device == Device::Cpu {
        return Ok(cpu(trajwiki_embed::load_embedder(spec, opts)?, None));
    }
    // The CUDA encoders run their own formats; bf16 and int8 name the CPU kernels.
    let (name, precision) = trajwiki_embed::split_precision(spec)?;
    match precision.unwrap_or(opts.precision) {
        Precision::F32 => {}
        _ if device == Device::Auto => {
            return Ok(cpu(trajwiki_embed::load_embedder(spec, opts)?, None));
        }
        p => {
            return Err(EmbedError::DeviceUnavailable {
                reason: format!(
                "precision {} runs on the CPU (model {spec}); name the model without @{} on CUDA",
                p.name(),
                p.name()
            ),
            })
        }
    }
    let dir = trajwiki_embed::resolve_model(name)?;
    let on_gpu = match trajwiki_embed::architecture_of(&dir)? {
        Architecture::Qwen3 => {
            CudaQwen3Embedder::load(&dir, opts, 0).map(|m| Box::new(m) as Box<dyn Embedder>)
        }
        Architecture::Bert => {
            CudaBertEmbedder::load(&dir, opts, 0).map(|m| Box::new(m) as Box<dyn Embedder>)
        }
    };
    match on_gpu {
        Ok(embedder) => Ok(LoadedModel {
            embedder,
            backend: "cuda",
            note: None,
        }),
        Err(EmbedError::DeviceUnavailable { .. }) if device == Device::Auto => {
            Ok(cpu(trajwiki_embed::load_embedder(spec, opts)?, None))
        }
        Err(e) => Err(e),
    }
}

/// The namespaces of a store that hold messages, in name order.
pub fn namespaces_with_messages(store: &Store) -> Result<Vec<Namespace>, StoreError> {
    let mut out = Vec::new();
    for ns in store.namespaces()? {
        if store.namespace_counts(&ns)?.0 > 0 {
            out.push(ns);
        }
    }
    Ok(out)
}

/// The namespaces `messages` belong to, in the order first seen (what an ingest followed by a
/// build has to build).
pub fn namespaces_of<'a>(messages: impl IntoIterator<Item = &'a SourceMessage>) -> Vec<Namespace> {
    let mut seen = std::collections::HashSet::new();
    messages
        .into_iter()
        .filter(|m| seen.insert(&m.namespace))
        .map(|m| m.namespace.clone())
        .collect()
}

/// Any record, as looked up by [`get`].
#[derive(Debug, Clone)]
pub enum Record {
    /// A source message.
    Message(SourceMessage),
    /// An agent run.
    Run(Run),
    /// A snapshot.
    Snapshot(Snapshot),
    /// A claim and its current status (derived from the op log).
    Claim {
        /// The claim as created.
        claim: Claim,
        /// Its status now.
        status: ClaimStatus,
    },
    /// A claim op.
    Op(ClaimOp),
    /// A trajectory.
    Trajectory(Trajectory),
    /// A wiki page, current revision.
    Page(WikiPage),
    /// A compilation and its insights.
    Compilation {
        /// The compilation.
        compilation: Compilation,
        /// Its insights.
        insights: Vec<Insight>,
    },
    /// An insight.
    Insight(Insight),
}

impl Record {
    /// The kind of record.
    pub fn kind(&self) -> IdKind {
        match self {
            Record::Message(_) => IdKind::Message,
            Record::Run(_) => IdKind::Run,
            Record::Snapshot(_) => IdKind::Snapshot,
            Record::Claim { .. } => IdKind::Claim,
            Record::Op(_) => IdKind::Op,
            Record::Trajectory(_) => IdKind::Trajectory,
            Record::Page(_) => IdKind::Page,
            Record::Compilation { .. } => IdKind::Compilation,
            Record::Insight(_) => IdKind::Insight,
        }
    }

    /// The record as JSON: its fields; a claim adds `current_status`, a compilation is
    /// `{"compilation": …, "insights": […]}`.
    pub fn to_json(&self) -> serde_json::Value {
        let value = match self {
            Record::Message(m) => serde_json::to_value(m),
            Record::Run(r) => serde_json::to_value(r),
            Record::Snapshot(s) => serde_json::to_value(s),
            Record::Claim { claim, status } => serde_json::to_value(claim).map(|mut v| {
                v["current_status"] = serde_json::json!(status);
                v
            }),
            Record::Op(o) => serde_json::to_value(o),
            Record::Trajectory(t) => serde_json::to_value(t),
            Record::Page(p) => serde_json::to_value(p),
            Record::Compilation {
                compilation,
                insights,
            } => Ok(serde_json::json!({"compilation": compilation, "insights": insights})),
            Record::Insight(i) => serde_json::to_value(i),
        };
        value.expect("records serialize")
    }
}

/// Looks a record up by its id; the prefix tells the kind.
pub fn get(store: &Store, id: &str) -> Result<Record, ApiError> {
    let kind = IdKind::of(id)?;
    let found = match kind {
        IdKind::Message => store.message(&MessageId::parse(id)?)?.map(Record::Message),
        IdKind::Run => store.run(&RunId::parse(id)?)?.map(Record::Run),
        IdKind::Snapshot => store
            .snapshot(&SnapshotId::parse(id)?)?
            .map(Record::Snapshot),
        IdKind::Claim => {
            let cid = ClaimId::parse(id)?;
            match store.claim(&cid)? {
                Some(claim) => {
                    let status = store.claim_status(&cid)?.unwrap_or(claim.status);
                    Some(Record::Claim { claim, status })
                }
                None => None,
            }
        }
        IdKind::Op => store.claim_op(&OpId::parse(id)?)?.map(Record::Op),
        IdKind::Trajectory => store
            .trajectory(&TrajectoryId::parse(id)?)?
            .map(Record::Trajectory),
        IdKind::Page => store.page(&PageId::parse(id)?)?.map(Record::Page),
        IdKind::Compilation => {
            store
                .compilation(&CompilationId::parse(id)?)?
                .map(|(compilation, insights)| Record::Compilation {
                    compilation,
                    insights,
                })
        }
        IdKind::Insight => store.insight(&InsightId::parse(id)?)?.map(Record::Insight),
    };
    found.ok_or_else(|| ApiError::NotFound {
        kind,
        id: id.to_string(),
    })
}

/// [`get`] inside one namespace: a record of another namespace is not found, whatever its id
/// (ids derive from namespace and content, so they can be guessed; a command that names a
/// namespace must not reach outside it).
pub fn get_in(store: &Store, ns: &Namespace, id: &str) -> Result<Record, ApiError> {
    let record = get(store, id)?;
    let owner = match &record {
        Record::Message(m) => Some(m.namespace.clone()),
        Record::Run(r) => Some(r.namespace.clone()),
        Record::Snapshot(s) => Some(s.namespace.clone()),
        Record::Claim { claim, .. } => Some(claim.namespace.clone()),
        Record::Op(o) => Some(o.namespace.clone()),
        Record::Trajectory(t) => Some(t.namespace.clone()),
        Record::Page(p) => Some(p.namespace.clone()),
        Record::Compilation { compilation, .. } => {
            store.run(&compilation.run)?.map(|r| r.namespace)
        }
        Record::Insight(i) => store.run(&i.run)?.map(|r| r.namespace),
    };
    if owner.as_ref() != Some(ns) {
        return Err(ApiError::NotFound {
            kind: IdKind::of(id)?,
            id: id.to_string(),
        });
    }
    Ok(record)
}

/// A claim a piece of evidence supports.
#[derive(Debug, Clone, Serialize)]
pub struct EvidenceClaim {
    /// The claim.
    pub id: ClaimId,
    /// Its text.
    pub text: String,
    /// Its current status.
    pub status: ClaimStatus,
}

/// One source message of a context, with the memory records it belongs to.
#[derive(Debug, Clone, Serialize)]
pub struct Evidence {
    /// The ref the context cites it by (its external ref, else its id).
    #[serde(rename = "ref")]
    pub source_ref: String,
    /// The message.
    pub message: SourceMessage,
    /// The snapshot that holds it (a selected one when several do).
    pub snapshot: Option<SnapshotId>,
    /// That snapshot's trajectory.
    pub trajectory: Option<TrajectoryId>,
    /// The claims grounded in it.
    pub claims: Vec<EvidenceClaim>,
}

/// Where the time of a search went, in milliseconds.
#[derive(Debug, Clone, Serialize)]
pub struct SearchTimings {
    /// Reading the records and building the index.
    pub index_load: f64,
    /// The same, by stage: messages, vectors, records, index.
    pub index_load_stages: BTreeMap<String, f64>,
    /// Embedding the question.
    pub query_embedding: f64,
    /// The ranking stages.
    pub stages: BTreeMap<String, f64>,
    /// Packing and rendering the context.
    pub render: f64,
}

/// The answer to [`search`]: the context, its evidence and the retrieval path.
#[derive(Debug, Clone, Serialize)]
pub struct Search {
    /// The question.
    pub question: String,
    /// The budget, in whitespace tokens.
    pub budget: usize,
    /// The rendered context.
    pub context: Context,
    /// The context's source messages, in order of appearance.
    pub evidence: Vec<Evidence>,
    /// How the messages were reached: pages, trajectories, snapshots, shape, universe.
    pub ranking: Ranking,
    /// Timings.
    pub timings: SearchTimings,
    /// Texts that had to be embedded to load the index (not in the cache).
    pub embedded_on_load: usize,
    /// Messages of the namespace not built yet (found through the direct turn routes only).
    pub unbuilt_messages: usize,
}

/// One question to a namespace.
#[derive(Debug, Clone, Copy)]
pub struct Query<'a> {
    /// The question.
    pub question: &'a str,
    /// The retrieval mode.
    pub mode: Mode,
    /// The context budget, in whitespace tokens.
    pub budget: usize,
    /// The retrieval constants.
    pub config: &'a RetrievalConfig,
}

/// A namespace's retrieval index, read from the store once and searched any number of times.
pub struct LoadedIndex {
    /// The index.
    pub index: Index,
    /// What the load derived from single records, for the next load of the namespace to reuse
    /// (see [`Derived`]): taken by [`reopen_index`].
    pub derived: std::sync::Mutex<Derived>,
    /// Each message's ingest position, in the index's order.
    pub rowids: Vec<i64>,
    /// The state of the namespace the index was read at: the next load reads what changed
    /// since.
    pub cursor: Cursor,
    /// Milliseconds spent reading the records and building the index.
    pub load_ms: f64,
    /// The same, by stage (see [`crate::retrieval::Loaded::stages`]).
    pub load_stages: BTreeMap<String, f64>,
    /// Texts that had to be embedded to build it (not in the embedding cache).
    pub embedded_on_load: usize,
    /// Approximate heap bytes (see [`LoadedIndex::fitted_bytes`]).
    bytes: usize,
}

/// Loads the retrieval index of a built namespace, to be searched and dropped (what the load
/// derives is not kept for another).
pub fn open_index(
    store: &Store,
    ns: &Namespace,
    embedder: &dyn Embedder,
) -> Result<LoadedIndex, ApiError> {
    load(store, ns, embedder, Derived::transient(), None)
}

/// Loads the retrieval index of a namespace whose index is kept and loaded again after each
/// write (a server's, a Python `Memory`'s): `earlier`, the namespace's previous load, gives its
/// records, to which only what changed since is read and merged
/// ([`trajwiki_store::Store::namespace_changes`]), and what it derived from single records,
/// which is taken and reused, so that the load after an append derives the new and changed
/// records only; what this load derives is kept in the result for the next.
pub fn reopen_index(
    store: &Store,
    ns: &Namespace,
    embedder: &dyn Embedder,
    earlier: Option<&LoadedIndex>,
) -> Result<LoadedIndex, ApiError> {
    let derived = earlier
        .map(|e| std::mem::take(&mut *e.derived.lock().unwrap_or_else(PoisonError::into_inner)))
        .unwrap_or_default();
    let earlier = earlier.map(|e| Earlier {
        records: &e.index.records,
        rowids: &e.rowids,
        cursor: &e.cursor,
    });
    load(store, ns, embedder, derived, earlier)
}

/// Applies what changed in `ns` since `held` was loaded (or last updated) to it in place (see
/// [`crate::retrieval::update_index`]); `false`, `held` unchanged, when it cannot take the
/// change (a backfill, a rebuild): the namespace is then loaded again. On an error `held` is to
/// be dropped.
pub fn update_index(
    store: &Store,
    ns: &Namespace,
    embedder: &dyn Embedder,
    held: &mut LoadedIndex,
) -> Result<bool, ApiError> {
    let t0 = Instant::now();
    let derived = held
        .derived
        .get_mut()
        .unwrap_or_else(PoisonError::into_inner);
    let updated = update_index_in_place(
        store,
        ns,
        embedder,
        Held {
            index: &mut held.index,
            rowids: &mut held.rowids,
            cursor: &mut held.cursor,
            derived,
        },
    )?;
    match updated {
        Updated::InPlace {
            stages,
            embedded,
            grown,
        } => {
            held.bytes += grown;
            held.load_ms = t0.elapsed().as_secs_f64() * 1000.0;
            held.load_stages = stages;
            held.embedded_on_load = embedded;
            Ok(true)
        }
        Updated::Refused(_) => Ok(false),
    }
}

impl LoadedIndex {
    /// With its bytes counted.
    fn counted(mut self) -> Self {
        self.bytes = self.heap_bytes();
        self
    }

    /// Its approximate heap bytes once it fits in `capacity` bytes: what it keeps for the next
    /// load is let go of when the index fits only without it — first what it keeps per record
    /// and text (the index still takes its namespace's changes in place), then all of it (a
    /// reload then derives every record again, as a cold one does) — but the index is kept and
    /// its searches stay warm. The bytes are counted once per load and grown by each change
    /// taken in place, not counted again.
    pub fn fitted_bytes(&mut self, capacity: usize) -> usize {
        if self.bytes <= capacity {
            return self.bytes;
        }
        let derived = self
            .derived
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        derived.shed();
        self.bytes = self.heap_bytes();
        if self.bytes > capacity {
            let derived = std::mem::take(
                self.derived
                    .get_mut()
                    .unwrap_or_else(PoisonError::into_inner),
            );
            crate::cache::drop_later(derived);
            self.bytes = self.heap_bytes();
        }
        self.bytes
    }

    /// Approximate heap bytes: the index's and what it keeps for the next load.
    pub fn heap_bytes(&self) -> usize {
        self.index.heap_bytes()
            + self
                .derived
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .heap_bytes()
    }
}

fn load(
    store: &Store,
    ns: &Namespace,
    embedder: &dyn Embedder,
    mut derived: Derived,
    earlier: Option<Earlier<'_>>,
) -> Result<LoadedIndex, ApiError> {
    if store.namespace_counts(ns)?.0 == 0 {
        return Err(ApiError::UnknownNamespace {
            namespace: ns.clone(),
            store: store.dir().to_path_buf(),
        });
    }
    // Built once is enough: what arrived since (or waits for its reply) is reached through the
    // direct turn routes, and the answer says how much that is.
    if store.built_with(ns)?.is_none() && store.pages(ns)?.is_empty() {
        return Err(ApiError::NotBuilt(ns.clone()));
    }
    let t0 = Instant::now();
    let loaded = load_index(store, ns, embedder, &mut derived, earlier)?;
    Ok(LoadedIndex {
        index: loaded.index,
        derived: std::sync::Mutex::new(derived),
        rowids: loaded.rowids,
        cursor: loaded.cursor,
        load_ms: t0.elapsed().as_secs_f64() * 1000.0,
        load_stages: loaded.stages,
        embedded_on_load: loaded.embedded,
        bytes: 0,
    }
    .counted())
}

/// Answers a question from a built namespace: a context of at most `budget` whitespace tokens,
/// each of its source messages with its snapshot, trajectory and claims, and the retrieval path.
/// Loads the index first; [`search_index`] answers from one already loaded.
pub fn search(
    store: &Store,
    ns: &Namespace,
    embedder: &dyn Embedder,
    query: &Query<'_>,
    backend: &dyn ScoringBackend,
) -> Result<Search, ApiError> {
    let loaded = open_index(store, ns, embedder)?;
    search_index(&loaded, true, embedder, query, backend)
}

/// [`search`] on a loaded index. `loaded_now` says whether the index was loaded for this search:
/// its load time and embedded texts are then reported in the answer, else they are zero.
/// `embedder` must be the model the index was loaded with.
pub fn search_index(
    loaded: &LoadedIndex,
    loaded_now: bool,
    embedder: &dyn Embedder,
    query: &Query<'_>,
    backend: &dyn ScoringBackend,
) -> Result<Search, ApiError> {
    search_index_reranked(loaded, loaded_now, embedder, query, backend, &|_, _| None)
}

/// [`search_index`] with the routed pages and the selected trajectories reordered by `rerank`
/// (see `trajwiki_retrieve::Index::rank_reranked`).
pub fn search_index_reranked(
    loaded: &LoadedIndex,
    loaded_now: bool,
    embedder: &dyn Embedder,
    query: &Query<'_>,
    backend: &dyn ScoringBackend,
    rerank: &trajwiki_retrieve::Rerank<'_>,
) -> Result<Search, ApiError> {
    let index = &loaded.index;
    let Query {
        question,
        mode,
        budget,
        config,
    } = *query;
    trajwiki_core::limits::QUESTION_BYTES.check(question.len())?;
    let (qvec, query_embedding) = embed_query(embedder, question)?;
    let ranking = index.rank_reranked(question, &qvec, mode, config, backend, rerank)?;
    let t1 = Instant::now();
    let context = index.render(&ranking, budget);
    let render = t1.elapsed().as_secs_f64() * 1000.0;

    // Only the context's messages are looked at: the maps from a message to its snapshots and
    // claims were built with the index.
    let records = &index.records;
    let selected: BTreeSet<&str> = ranking.snapshots.iter().map(|s| s.id.as_str()).collect();
    let evidence = context
        .source_refs
        .iter()
        .zip(&context.messages)
        .map(|(r, &i)| {
            let held_by = index.snapshots_of(i);
            let snapshot = held_by
                .iter()
                .find(|&&s| selected.contains(records.snapshots[s].id.as_str()))
                .or(held_by.first())
                .map(|&s| &records.snapshots[s]);
            Evidence {
                source_ref: r.clone(),
                message: records.messages[i].clone(),
                snapshot: snapshot.map(|s| s.id.clone()),
                trajectory: snapshot.map(|s| s.trajectory.clone()),
                claims: index
                    .claims_of(i)
                    .iter()
                    .map(|&c| {
                        let (claim, status) = &records.claims[c];
                        EvidenceClaim {
                            id: claim.id.clone(),
                            text: claim.text.clone(),
                            status: *status,
                        }
                    })
                    .collect(),
            }
        })
        .collect();
    let stages = ranking.timings.clone();
    Ok(Search {
        question: question.to_string(),
        budget,
        context,
        evidence,
        ranking,
        timings: SearchTimings {
            index_load: if loaded_now { loaded.load_ms } else { 0.0 },
            index_load_stages: if loaded_now {
                loaded.load_stages.clone()
            } else {
                BTreeMap::new()
            },
            query_embedding,
            stages,
            render,
        },
        embedded_on_load: if loaded_now {
            loaded.embedded_on_load
        } else {
            0
        },
        unbuilt_messages: index.unbuilt,
    })
}

/// A source message of a claim op, as history shows it.
#[derive(Debug, Clone, Serialize)]
pub struct HistorySource {
    /// Its external ref, else its id.
    #[serde(rename = "ref")]
    pub source_ref: String,
    /// When it was said.
    pub timestamp: String,
    /// Who said it.
    pub speaker: String,
    /// What was said.
    pub text: String,
}

/// One claim op of a history, with the state it leads to.
#[derive(Debug, Clone, Serialize)]
pub struct HistoryEntry {
    /// The op's position in the namespace's log.
    pub seq: u64,
    /// ADD, REVISE or DEPRECATE (the stored name).
    pub op: &'static str,
    /// When it happened: its snapshot's time.
    pub at: Option<String>,
    /// The claim the op creates, else the one it changes.
    pub claim: ClaimId,
    /// That claim's text.
    pub text: Option<String>,
    /// That claim's status at the end of the history.
    pub status: Option<ClaimStatus>,
    /// The claim the op changes.
    pub target: Option<ClaimId>,
    /// Its text.
    pub target_text: Option<String>,
    /// Its status at the end of the history.
    pub target_status: Option<ClaimStatus>,
    /// Why.
    pub rationale: String,
    /// The messages the op rests on.
    pub sources: Vec<HistorySource>,
}

/// The claim timeline of a trajectory or a claim.
#[derive(Debug, Clone, Serialize)]
pub struct History {
    /// The namespace.
    pub namespace: Namespace,
    /// The ops, in log order.
    pub entries: Vec<HistoryEntry>,
}

/// The claim ops of a trajectory (every claim of its snapshots) or of a claim (its revision
/// chain, both ways), optionally only those up to `as_of`, with the statuses they lead to.
pub fn history(store: &Store, id: &str, as_of: Option<Timestamp>) -> Result<History, ApiError> {
    let not_found = |kind| ApiError::NotFound {
        kind,
        id: id.to_string(),
    };
    let (ns, claims): (Namespace, BTreeSet<ClaimId>) = match IdKind::of(id)? {
        IdKind::Trajectory => {
            let t = store
                .trajectory(&TrajectoryId::parse(id)?)?
                .ok_or_else(|| not_found(IdKind::Trajectory))?;
            let mut ids = BTreeSet::new();
            for s in &t.snapshot_ids {
                if let Some(s) = store.snapshot(s)? {
                    ids.extend(s.claim_ids);
                }
            }
            (t.namespace, ids)
        }
        IdKind::Claim => {
            let cid = ClaimId::parse(id)?;
            let c = store.claim(&cid)?.ok_or_else(|| not_found(IdKind::Claim))?;
            let all = store.claims(&c.namespace)?;
            let mut chain: BTreeSet<ClaimId> = [cid].into();
            loop {
                let before = chain.len();
                for other in &all {
                    if let Some(from) = &other.revised_from {
                        if chain.contains(from) || chain.contains(&other.id) {
                            chain.insert(from.clone());
                            chain.insert(other.id.clone());
                        }
                    }
                }
                if chain.len() == before {
                    break;
                }
            }
            (c.namespace, chain)
        }
        other => return Err(ApiError::NoHistory(other)),
    };
    let mut ops: Vec<(ClaimOp, Option<Timestamp>)> = Vec::new();
    for op in store.claim_ops(&ns)? {
        if !op
            .target
            .iter()
            .chain(&op.new_claim)
            .any(|c| claims.contains(c))
        {
            continue;
        }
        let at = store.snapshot(&op.snapshot)?.map(|s| s.timestamp);
        if as_of.is_none_or(|cut| at.is_some_and(|at| at <= cut)) {
            ops.push((op, at));
        }
    }
    // The statuses at the end of the shown ops: their claims' initial statuses, replayed.
    let mut initial = BTreeMap::new();
    for (op, _) in &ops {
        for c in op.target.iter().chain(&op.new_claim) {
            if let Some(claim) = store.claim(c)? {
                initial.insert(c.clone(), claim.status);
            }
        }
    }
    let state = replay_ops(
        ops.iter()
            .map(|(op, _)| op)
            .filter(|op| op.target.as_ref().is_none_or(|t| initial.contains_key(t))),
        |c| initial.get(c).copied(),
    )?;
    let mut entries = Vec::with_capacity(ops.len());
    for (op, at) in &ops {
        let claim = op
            .new_claim
            .as_ref()
            .or(op.target.as_ref())
            .expect("an op names a claim");
        let mut sources = Vec::new();
        for m in &op.source_message_ids {
            if let Some(m) = store.message(m)? {
                sources.push(HistorySource {
                    source_ref: m.external_ref.clone().unwrap_or_else(|| m.id.to_string()),
                    timestamp: m.timestamp.format(TIMESTAMP_FORMAT).to_string(),
                    speaker: m.speaker,
                    text: m.text,
                });
            }
        }
        let target_text = match &op.target {
            Some(t) => store.claim(t)?.map(|c| c.text),
            None => None,
        };
        entries.push(HistoryEntry {
            seq: op.seq,
            op: op.op.as_str(),
            at: at.map(|t| t.format(TIMESTAMP_FORMAT).to_string()),
            claim: claim.clone(),
            text: store.claim(claim)?.map(|c| c.text),
            status: state.get(claim).copied(),
            target: op.target.clone(),
            target_text,
            target_status: op.target.as_ref().and_then(|t| state.get(t)).copied(),
            rationale: op.rationale.clone(),
            sources,
        });
    }
    Ok(History {
        namespace: ns,
        entries,
    })
}

/// A store's cache of model responses for one namespace, on a connection of its own (so that a
/// client can use it from any thread). Nothing is written to a store opened read only.
pub struct StoreResponses {
    store: std::sync::Mutex<Store>,
    namespace: std::sync::Mutex<Namespace>,
}

impl StoreResponses {
    /// The cache of `ns` in the store at `dir`, opened as `read_only` says.
    pub fn open(dir: &std::path::Path, ns: &Namespace, read_only: bool) -> Result<Self, ApiError> {
        let store = if read_only {
            Store::open_read_only(dir)?
        } else {
            Store::open_existing(dir)?
        };
        Ok(Self::on(store, ns))
    }

    /// The cache of `ns` on the connection `store` (one of its own: see
    /// [`Opened::connect`](trajwiki_store::Opened::connect)).
    pub fn on(store: Store, ns: &Namespace) -> Self {
        StoreResponses {
            store: std::sync::Mutex::new(store),
            namespace: std::sync::Mutex::new(ns.clone()),
        }
    }

    /// Keeps the responses stored from now on under namespace `ns` (an evaluation goes from one
    /// namespace to the next).
    pub fn set_namespace(&self, ns: &Namespace) {
        *self.namespace.lock().unwrap_or_else(|e| e.into_inner()) = ns.clone();
    }
}

impl trajwiki_llm::ResponseCache for StoreResponses {
    fn get(&self, key: &str) -> Option<String> {
        let store = self.store.lock().unwrap_or_else(|e| e.into_inner());
        store.llm_response(key).ok().flatten()
    }

    fn put(&self, key: &str, model: &str, response: &str) -> Result<(), String> {
        let mut store = self.store.lock().unwrap_or_else(|e| e.into_inner());
        if store.is_read_only() {
            return Ok(());
        }
        let ns = self
            .namespace
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        store
            .put_llm_response(&ns, key, model, response)
            .map_err(|e| e.to_string())
    }
}

/// A search and the answer written from its context.
#[derive(Debug, Clone, Serialize)]
pub struct Asked {
    /// The retrieval.
    pub search: Search,
    /// The checked answer (see [`crate::answer`]).
    pub answer: crate::answer::Answer,
}

impl Asked {
    /// As `trajwiki ask --json` prints it and `POST …/ask` answers: the question, the answer and
    /// its status, the context, its evidence and route, and the model's identity and usage.
    pub fn to_json(&self, client: Option<&trajwiki_llm::Client>) -> serde_json::Value {
        let (answer, search) = (&self.answer, &self.search);
        serde_json::json!({
            "question": search.question,
            "status": answer.status,
            "answer": answer,
            "context": search.context.text,
            "source_refs": search.context.source_refs,
            "context_tokens": search.context.tokens,
            "evidence": search.evidence,
            "pages": search.ranking.pages,
            "trajectories": search.ranking.trajectories,
            "llm": client.map(|c| serde_json::json!({
                "model": c.config().model,
                "base_url": c.config().base_url,
                "usage": c.usage(),
            })),
        })
    }
}

/// Answers a question from a loaded index: the search of [`search_index`] (its selected
/// trajectories reordered by the model first when `rerank`, one more call), then an answer from
/// its context by `client`'s model, checked (see [`crate::answer`]). Without a client the answer
/// is [`crate::answer::AnswerStatus::NoAnswerModel`] and the evidence is all there is.
pub fn ask_index(
    loaded: &LoadedIndex,
    loaded_now: bool,
    embedder: &dyn Embedder,
    query: &Query<'_>,
    backend: &dyn ScoringBackend,
    client: Option<&trajwiki_llm::Client>,
    rerank_selected: bool,
) -> Result<Asked, ApiError> {
    use crate::answer::{answer_searching, rerank, Answer, AnswerStatus, NO_MODEL};
    let Some(client) = client else {
        let search = search_index(loaded, loaded_now, embedder, query, backend)?;
        let answer = Answer::without_model(AnswerStatus::NoAnswerModel, NO_MODEL.to_string());
        return Ok(Asked { search, answer });
    };
    // The model reorders the routed pages and the selected trajectories.
    let reranker = |what, texts: &[&str]| {
        rerank_selected
            .then(|| rerank(client, query.question, what, texts))
            .flatten()
    };
    let first = search_index_reranked(loaded, loaded_now, embedder, query, backend, &reranker)?;
    let (mut search, answer) = answer_searching(
        client,
        query.question,
        query.mode,
        first,
        |s: &Search| (s.context.text.as_str(), s.context.source_refs.as_slice()),
        |question, mode| {
            let again = Query {
                question,
                mode,
                ..*query
            };
            search_index(loaded, false, embedder, &again, backend)
        },
    )?;
    // A later route searched other words for the same question.
    search.question = query.question.to_string();
    Ok(Asked { search, answer })
}
