//! [`Engine`]: one store's application state, shared by whoever serves it (the CLI for one
//! command, a server for its lifetime, a Python `Memory` for the object's), and the
//! [`NamespaceHandle`] through which a namespace is read and written.
//!
//! The state kept between calls is the engine's alone: the store connections (idle ones are
//! pooled), the embedding model (loaded on first use when named rather than given), the loaded
//! indexes (a byte-bounded LRU, each kept with the [`IndexState`](trajwiki_store::IndexState) of
//! its namespace it was loaded at and loaded again when that moved, whoever wrote) and, per
//! namespace, its writer lock holding the construction fold its last build left.
//!
//! ```
//! use std::sync::Arc;
//! use trajwiki_core::Namespace;
//! use trajwiki_engine::{api, Engine, Model};
//! use trajwiki_store::Store;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let store = Store::open(dir.path()).unwrap();
//! let model = Model::Loaded(api::load_embedder("hashing-64").unwrap().into());
//! let engine = Engine::new(store, model, Arc::new(trajwiki_compute::CpuScoring), 1 << 20);
//! let ns = Namespace::new("alice").unwrap();
//! let err = engine.with_store(|store| engine.namespace(&ns).index(store).map(|_| ()));
//! assert!(matches!(err, Err(api::ApiError::UnknownNamespace { .. })));
//! ```

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use trajwiki_compute::ScoringBackend;
use trajwiki_core::{EmbedError, Embedder, Namespace, Run, SourceMessage};
use trajwiki_cuda::Device;
use trajwiki_embed::EmbedOptions;
use trajwiki_memory::{BuildReport, MemoryConfig};
use trajwiki_store::{Append, Deleted, IngestReport, Opened, Store, StoreError};

use crate::api::{self, ApiError, Asked, LoadedIndex, Query, Search};
use crate::build::{BuildPlan, Built, EmbeddedAhead};
use crate::cache::{current_or_updated, AtState, BoundedCache, Stale};
use crate::load::Refreshed;
use crate::pipeline::{
    build_in_turn, BuildOptions, KeptFold, PipelineError, Prefill, Progress, Stage,
};
use crate::segment::Watched;
use crate::trace::{CompileReport, TraceError};
use trajwiki_trace::DeterministicCompiler;

/// At most this many idle store connections are kept.
const POOL_SIZE: usize = 8;

/// Where the engine's embedding model comes from.
pub enum Model {
    /// A model loaded by the caller.
    Loaded(Arc<dyn Embedder>),
    /// A model named as [`api::load_model`] takes it, loaded for `device` on first use (reading
    /// or deleting records needs none).
    Named {
        /// The model's name (a folder, a name in the model cache, `hashing[-DIM]`).
        spec: String,
        /// The device it is loaded for.
        device: Device,
    },
}

/// A loaded index and the state of its namespace it was loaded at.
pub type KeptIndex = AtState<LoadedIndex>;

/// One store's application state; see the [module documentation](self).
pub struct Engine {
    /// How the store was opened: every further connection reaches the same store or is
    /// refused (a store moved or replaced while the engine holds it is not followed by path).
    opened: Opened,
    /// Idle store connections.
    pool: Mutex<Vec<Store>>,
    model: Model,
    /// A named model once loaded.
    embedder: Mutex<Option<Arc<dyn Embedder>>>,
    scoring: Arc<dyn ScoringBackend>,
    indexes: Mutex<BoundedCache<KeptIndex>>,
    /// One writer per namespace: its lock, holding the construction fold its last build left
    /// (so that the next build folds on from it instead of reading the namespace again).
    writers: Mutex<HashMap<Namespace, Arc<Mutex<Option<KeptFold>>>>>,
    /// One lock per namespace for making its index: one caller loads or updates it, the
    /// others wait for that and search it.
    loaders: Mutex<HashMap<Namespace, Arc<Mutex<()>>>>,
    /// Whether a load keeps what it derived from single records for the next load of its
    /// namespace (see [`trajwiki_retrieve::Derived`]).
    reloads: bool,
    /// The namespaces whose index segment a thread is writing (see [`crate::segment`]).
    segmenting: Arc<Mutex<HashSet<Namespace>>>,
    /// What the last look at each namespace's segment found, with the messages appended
    /// since (see [`Watched`]).
    watched: Arc<Mutex<HashMap<Namespace, Watched>>>,
    /// Whether a build writes its namespace's segment before it returns (a process that ends
    /// with its command) rather than on a thread of its own.
    segments_inline: bool,
}

impl Engine {
    /// The engine of the store `store` is a connection to; more connections are opened as
    /// calls need them, read only when `store` is. Loaded indexes are kept up to
    /// `index_cache_bytes` in all (0 keeps none).
    pub fn new(
        store: Store,
        model: Model,
        scoring: Arc<dyn ScoringBackend>,
        index_cache_bytes: usize,
    ) -> Self {
        Engine {
            opened: store.opened(),
            pool: Mutex::new(vec![store]),
            model,
            embedder: Mutex::new(None),
            scoring,
            indexes: Mutex::new(BoundedCache::new(index_cache_bytes)),
            writers: Mutex::new(HashMap::new()),
            loaders: Mutex::new(HashMap::new()),
            reloads: true,
            segmenting: Arc::default(),
            watched: Arc::default(),
            segments_inline: false,
        }
    }

    /// The engine of a command that writes and reads records but embeds and scores nothing
    /// (ingest, compile, delete): the default model is named, loaded only should an operation
    /// need it, on the CPU; no index is kept.
    pub fn for_records(store: Store) -> Self {
        let model = Model::Named {
            spec: trajwiki_embed::DEFAULT_MODEL.to_string(),
            device: Device::Cpu,
        };
        Engine::new(store, model, Arc::new(trajwiki_compute::CpuScoring), 0).building_once()
    }

    /// This engine for a command that answers and exits: no namespace is written and loaded
    /// again, so a load keeps nothing for a next one (less memory, a shorter load).
    pub fn answering_once(mut self) -> Self {
        self.reloads = false;
        self
    }

    /// This engine for a command that builds and exits: a build writes its namespace's index
    /// segment before it returns, where a long-lived engine leaves it to a thread.
    pub fn building_once(mut self) -> Self {
        self.segments_inline = true;
        self
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        self.opened.dir()
    }

    /// The scoring backend retrieval runs on.
    pub fn scoring(&self) -> &Arc<dyn ScoringBackend> {
        &self.scoring
    }

    /// The embedding model, loaded now when it was named and this is its first use.
    pub fn embedder(&self) -> Result<Arc<dyn Embedder>, EmbedError> {
        let (spec, device) = match &self.model {
            Model::Loaded(e) => return Ok(Arc::clone(e)),
            Model::Named { spec, device } => (spec, device),
        };
        let mut slot = lock(&self.embedder);
        if let Some(e) = slot.as_ref() {
            return Ok(Arc::clone(e));
        }
        let loaded: Arc<dyn Embedder> = api::load_model(spec, &EmbedOptions::default(), *device)?
            .embedder
            .into();
        *slot = Some(Arc::clone(&loaded));
        Ok(loaded)
    }

    /// Runs `work` with a store connection: an idle one, or one opened now (kept for the next
    /// call afterwards, up to a few).
    pub fn with_store<T, E: From<StoreError>>(
        &self,
        work: impl FnOnce(&mut Store) -> Result<T, E>,
    ) -> Result<T, E> {
        let taken = lock(&self.pool).pop();
        let mut store = match taken {
            Some(s) => s,
            None => self.connect()?,
        };
        let out = work(&mut store);
        let mut pool = lock(&self.pool);
        if pool.len() < POOL_SIZE {
            pool.push(store);
        }
        out
    }

    /// A new connection to the store, read only when the engine's first one was;
    /// [`StoreError::Relocated`] when the store's path no longer leads to the directory the
    /// engine opened (see [`Opened::connect`]).
    pub fn connect(&self) -> Result<Store, StoreError> {
        self.opened.connect()
    }

    /// The handle of `ns`.
    pub fn namespace(&self, ns: &Namespace) -> NamespaceHandle<'_> {
        let writer = Arc::clone(lock(&self.writers).entry(ns.clone()).or_default());
        let loader = Arc::clone(lock(&self.loaders).entry(ns.clone()).or_default());
        NamespaceHandle {
            engine: self,
            ns: ns.clone(),
            writer,
            loader,
        }
    }

    /// Writes the index segment of `ns` when it is due (see [`crate::load::refresh_segment`]),
    /// after a build has committed: for an engine [`building once`](Engine::building_once), on
    /// `store` before this returns; otherwise on a thread of its own, off the caller's path, one
    /// per namespace at a time (a build meanwhile leaves it to the next). `appended`: the
    /// messages this engine appended to `ns` since its last look, all of them built, none
    /// replaced — then, while what the last look found says the segment cannot be due
    /// ([`Watched::may_be_due`]), nothing is asked of the store; `None` (a build of what
    /// others may have written, a rebuild) looks again. What fails is said on standard error:
    /// the segment is derived state, and loads read the records without it.
    pub fn refresh_segment(&self, store: &Store, ns: &Namespace, appended: Option<usize>) {
        if self.opened.is_read_only() {
            return;
        }
        {
            let mut watched = lock(&self.watched);
            match appended {
                Some(n) => {
                    if let Some(w) = watched.get_mut(ns) {
                        w.appended(n);
                        if !w.may_be_due() {
                            return;
                        }
                    }
                }
                None => {
                    watched.remove(ns);
                }
            }
        }
        let Ok(embedder) = self.embedder() else {
            return;
        };
        if self.segments_inline {
            keep_look(
                &self.watched,
                ns,
                crate::load::refresh_segment(store, ns, embedder.as_ref()),
            );
            return;
        }
        if !lock(&self.segmenting).insert(ns.clone()) {
            return;
        }
        let (opened, ns, running, watched) = (
            self.opened.clone(),
            ns.clone(),
            Arc::clone(&self.segmenting),
            Arc::clone(&self.watched),
        );
        let spawned = std::thread::Builder::new()
            .name("trajwiki-segment".into())
            .spawn({
                let ns = ns.clone();
                let running = Arc::clone(&running);
                move || {
                    let refreshed =
                        opened
                            .connect()
                            .map_err(PipelineError::from)
                            .and_then(|store| {
                                crate::load::refresh_segment(&store, &ns, embedder.as_ref())
                            });
                    keep_look(&watched, &ns, refreshed);
                    lock(&running).remove(&ns);
                }
            });
        if spawned.is_err() {
            lock(&running).remove(&ns);
        }
    }

    /// Counts `added` messages appended to `ns` without a build, for the next look at its
    /// segment (see [`Engine::refresh_segment`]).
    fn count_appended(&self, ns: &Namespace, added: usize) {
        if let Some(w) = lock(&self.watched).get_mut(ns) {
            w.appended(added);
        }
    }

    /// Forgets what was found of the segments of `namespaces`, to which messages were written
    /// that no look counted: the next build's looks at the store.
    fn unwatch(&self, namespaces: &[Namespace]) {
        let mut watched = lock(&self.watched);
        for ns in namespaces {
            watched.remove(ns);
        }
    }

    /// Embeds the messages of `namespaces` that the embedding cache lacks, all of them together,
    /// before they are built (see [`crate::pipeline::prefill_messages`]): on a GPU, full
    /// batches whatever the namespaces' sizes, two chunks of `chunk` texts in flight.
    /// `progress` is told the texts embedded of the total.
    pub fn prefill(
        &self,
        store: &mut Store,
        namespaces: &[Namespace],
        chunk: usize,
        progress: &(dyn Fn(usize, usize) + Sync),
    ) -> Result<Prefill, ApiError> {
        let embedder = self.embedder()?;
        Ok(crate::pipeline::prefill_messages(
            store,
            namespaces,
            embedder.as_ref(),
            chunk,
            true,
            progress,
        )?)
    }

    /// Appends `messages`, which may belong to several namespaces, in one transaction (see
    /// [`Store::append_messages`]) under their writer locks (see [`Engine::writing`]).
    pub fn append(
        &self,
        store: &mut Store,
        via: &str,
        messages: &[Append],
    ) -> Result<IngestReport, StoreError> {
        let touched = api::namespaces_of(messages.iter().map(|a| &a.message));
        let appended = self.writing(&touched, || store.append_messages(via, messages));
        self.unwatch(&touched);
        appended
    }

    /// Ingests `messages`, each at its own position, in one transaction (see
    /// [`Store::ingest_messages`]) under their namespaces' writer locks; `progress` hears of the
    /// messages gone through ([`Stage::Storing`]).
    pub fn ingest_messages(
        &self,
        store: &mut Store,
        source: &str,
        messages: &[SourceMessage],
        progress: Option<&(dyn Fn(Progress) + Sync)>,
    ) -> Result<IngestReport, StoreError> {
        let touched = api::namespaces_of(messages);
        let told = Progress::teller(progress, Stage::Storing);
        let ingested = self.writing(&touched, || {
            store.ingest_messages_told(source, messages, &told)
        });
        self.unwatch(&touched);
        ingested
    }

    /// Ingests agent runs in one transaction (see [`Store::ingest_runs`]) under their
    /// namespaces' writer locks; `progress` hears of the runs gone through
    /// ([`Stage::Storing`]).
    pub fn ingest_runs(
        &self,
        store: &mut Store,
        source: &str,
        runs: &[Run],
        progress: Option<&(dyn Fn(Progress) + Sync)>,
    ) -> Result<IngestReport, StoreError> {
        let touched: Vec<Namespace> = runs.iter().map(|r| r.namespace.clone()).collect();
        let told = Progress::teller(progress, Stage::Storing);
        self.writing(&touched, || store.ingest_runs_told(source, runs, &told))
    }

    /// Runs `write` holding the writer lock of each of `namespaces`, taken in name order (so
    /// that two writes of several namespaces never wait for each other crosswise): a write of
    /// several namespaces is serialised with their builds as one of one namespace is.
    fn writing<T>(&self, namespaces: &[Namespace], write: impl FnOnce() -> T) -> T {
        let mut namespaces = namespaces.to_vec();
        namespaces.sort();
        namespaces.dedup();
        let handles: Vec<_> = namespaces.iter().map(|ns| self.namespace(ns)).collect();
        let _writers: Vec<_> = handles.iter().map(|h| h.writer()).collect();
        write()
    }

    /// The index cache's namespaces, bytes held and capacity.
    pub fn index_cache(&self) -> (Vec<Namespace>, usize, usize) {
        let cache = lock(&self.indexes);
        (cache.namespaces(), cache.bytes(), cache.capacity())
    }
}

/// Keeps what a look at the segment of `ns` found for the appends that follow, or forgets what
/// was kept when it found nothing to keep; says on standard error what failed.
fn keep_look(
    watched: &Mutex<HashMap<Namespace, Watched>>,
    ns: &Namespace,
    refreshed: Result<Refreshed, PipelineError>,
) {
    let mut watched = lock(watched);
    match refreshed {
        Ok(Refreshed {
            watched: Some(w), ..
        }) => {
            watched.insert(ns.clone(), w);
        }
        Ok(_) => {
            watched.remove(ns);
        }
        Err(e) => {
            watched.remove(ns);
            eprintln!("trajwiki: {ns}: the index segment was not written: {e}");
        }
    }
}

/// One namespace of an [`Engine`]: its loaded index, its writer lock and the operations on it.
/// Store work runs on the connection passed in (see [`Engine::with_store`]).
pub struct NamespaceHandle<'e> {
    engine: &'e Engine,
    ns: Namespace,
    writer: Arc<Mutex<Option<KeptFold>>>,
    loader: Arc<Mutex<()>>,
}

impl<'e> NamespaceHandle<'e> {
    /// The namespace.
    pub fn name(&self) -> &Namespace {
        &self.ns
    }

    /// The engine.
    pub fn engine(&self) -> &'e Engine {
        self.engine
    }

    /// The namespace's index at the store's current state, and whether it was loaded for this
    /// call: the one kept while the namespace's [`IndexState`](trajwiki_store::IndexState) is
    /// the one it was loaded at, else loaded again (a write to one namespace leaves the others'
    /// indexes in place). This is the one place where an index is obtained.
    pub fn index(&self, store: &Store) -> Result<(Arc<KeptIndex>, bool), ApiError> {
        // Read before the load: a commit in between makes the kept state older than the index,
        // which costs one reload, never a stale answer.
        let current = store.index_state(&self.ns)?;
        let embedder = self.engine.embedder()?;
        let capacity = lock(&self.engine.indexes).capacity();
        let making = &*self.loader;
        current_or_updated(&self.engine.indexes, &self.ns, current, making, |stale| {
            let (store, ns, embedder) = (store, &self.ns, embedder.as_ref());
            let mut loaded = match (stale, self.engine.reloads) {
                // What changed since is applied to the index in place when it can take it.
                (Stale::Owned(mut held), true) => {
                    if api::update_index(store, ns, embedder, &mut held)? {
                        held
                    } else {
                        api::reopen_index(store, ns, embedder, Some(&held))?
                    }
                }
                (Stale::Shared(held), true) => api::reopen_index(store, ns, embedder, Some(held))?,
                (Stale::None, true) => api::reopen_index(store, ns, embedder, None)?,
                (_, false) => api::open_index(store, ns, embedder)?,
            };
            let bytes = loaded.fitted_bytes(capacity);
            Ok((loaded, bytes))
        })
    }

    /// Searches the namespace with its kept index (the load's time and stages are in the
    /// timings when it was loaded for this search).
    pub fn search(&self, store: &Store, query: &Query<'_>) -> Result<Search, ApiError> {
        // Checked before an index is loaded for it (the search checks it again).
        trajwiki_core::limits::QUESTION_BYTES.check(query.question.len())?;
        let embedder = self.engine.embedder()?;
        self.with_whole_index(store, |kept, loaded_now| {
            api::search_index(
                &kept.value,
                loaded_now,
                embedder.as_ref(),
                query,
                self.engine.scoring.as_ref(),
            )
        })
    }

    /// Runs `work` on the kept index. When another process cut the index's mapped vector file
    /// meanwhile, what `work` read of it was zeros (see `trajwiki_store`'s guard of mapped
    /// files): its answer is thrown away, the index forgotten, and `work` runs once more on the
    /// namespace loaded again, a load which finds the file short and leaves it aside (`check`
    /// reports it, the next build writes it again). Other namespaces are not touched.
    fn with_whole_index<T>(
        &self,
        store: &Store,
        mut work: impl FnMut(&KeptIndex, bool) -> Result<T, ApiError>,
    ) -> Result<T, ApiError> {
        for _ in 0..2 {
            let (kept, loaded_now) = self.index(store)?;
            let answer = work(&kept, loaded_now);
            if kept.value.index.intact() {
                return answer;
            }
            let mut indexes = lock(&self.engine.indexes);
            if let Some((held, bytes)) = indexes.take(&self.ns) {
                if !Arc::ptr_eq(&held, &kept) {
                    // Another caller replaced it already: that one stays.
                    indexes.insert(self.ns.clone(), held, bytes);
                }
            }
        }
        Err(ApiError::Store(StoreError::Corrupt {
            table: "vector_files",
            column: "rows",
            id: self.ns.to_string(),
            reason: "the vector file was cut short while it was read, twice; `trajwiki check` \
                     reports it and a build writes it again"
                .into(),
        }))
    }

    /// Answers a question from the kept index with the model `llm` names, checked (see
    /// [`api::ask_index`]); without one, the evidence alone. Returns the client too, for its
    /// identity and usage.
    pub fn ask(
        &self,
        store: &Store,
        query: &Query<'_>,
        llm: Option<trajwiki_llm::LlmConfig>,
        rerank: bool,
    ) -> Result<(Asked, Option<trajwiki_llm::Client>), ApiError> {
        trajwiki_core::limits::QUESTION_BYTES.check(query.question.len())?;
        let client = llm.map(|c| self.llm_client(store, c)).transpose()?;
        let embedder = self.engine.embedder()?;
        let asked = self.with_whole_index(store, |kept, loaded_now| {
            api::ask_index(
                &kept.value,
                loaded_now,
                embedder.as_ref(),
                query,
                self.engine.scoring.as_ref(),
                client.as_ref(),
                rerank,
            )
        })?;
        Ok((asked, client))
    }

    /// A client of the model `config` names whose responses are cached in the store under
    /// this namespace (nothing is written to a read-only store).
    pub fn llm_client(
        &self,
        store: &Store,
        config: trajwiki_llm::LlmConfig,
    ) -> Result<trajwiki_llm::Client, ApiError> {
        Ok(llm_client(store, &self.ns, config)?)
    }

    /// Takes the namespace's writer lock: appends, builds and deletes of the namespace wait
    /// for each other; other namespaces and readers go on.
    pub fn writer(&self) -> Writer<'_> {
        Writer {
            ns: &self.ns,
            engine: self.engine,
            kept: lock(&self.writer),
        }
    }

    /// Appends `messages` (all of this namespace) under the writer lock and, with `build`,
    /// folds them into the memory from the kept fold, with the namespace's own build settings
    /// ([`build_config`]).
    ///
    /// An append with its build is one write transaction (the build lock of the namespace taken
    /// first): the settings read, the messages stored, the fold's commit and the vector rows
    /// commit together. An error means nothing was stored. What could keep the build from
    /// running — its model not loading, another model's or configuration's memory in the
    /// namespace, settings that do not parse — is found before the messages are stored, so
    /// such an append stores nothing; a build that fails once they are (a full disk, a panic)
    /// is undone to its savepoint and reported in [`Appended::build`], beside the messages,
    /// which are kept.
    pub fn append(
        &self,
        store: &mut Store,
        via: &str,
        messages: &[Append],
        build: Option<BuildOptions>,
    ) -> Result<Appended, ApiError> {
        self.append_configured(store, via, messages, build, None)
    }

    /// [`NamespaceHandle::append`], building with `config` when given instead of the
    /// namespace's own settings (a Python `Memory` builds with its configuration): a memory
    /// built otherwise is then the build's error, beside the stored messages.
    pub fn append_configured(
        &self,
        store: &mut Store,
        via: &str,
        messages: &[Append],
        build: Option<BuildOptions>,
        config: Option<&MemoryConfig>,
    ) -> Result<Appended, ApiError> {
        let mut writer = self.writer();
        let Some(options) = build else {
            let ingest = store.append_messages(via, messages)?;
            self.engine.count_appended(&self.ns, ingest.added as usize);
            return Ok(Appended {
                ingest,
                build: None,
            });
        };
        let embedder = self.engine.embedder()?;
        let phantom = ForgetUnlessSettled {
            engine: self.engine,
            ns: &self.ns,
            settled: false,
        };
        // The messages' vectors are computed before the transaction, which then holds the
        // store's write lock only while it folds and writes.
        let texts: Vec<String> = messages
            .iter()
            .map(|a| a.message.embedding_text())
            .collect();
        // A model that panics stores nothing, and says so.
        let ahead = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            EmbeddedAhead::new(embedder.as_ref(), &texts)
        }))
        .map_err(|panic| ApiError::Panicked {
            step: "embedding the messages",
            message: panic_message(panic.as_ref()),
        })??;
        let appended = store.build_as_one("appending and building", &self.ns, |store| {
            let ready = self.build_ready(store, embedder.model_id(), options)?;
            let config = config.unwrap_or(&ready);
            let ingest = store.append_messages(via, messages)?;
            // The messages are stored: whatever the build does, even panic, they stay and the
            // caller is told so.
            let built = store.write_as_one("building", &[], |store| {
                let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    let plan = BuildPlan::new(config, options);
                    writer.build_now(store, &ahead, &plan)
                }));
                let built = built.unwrap_or_else(|panic| {
                    Err(ApiError::Panicked {
                        step: "the build",
                        message: panic_message(panic.as_ref()),
                    })
                });
                // Undone to the savepoint, a build that failed after its commit committed
                // nothing: its error is the failure itself.
                built.map_err(|e| match e {
                    ApiError::Pipeline(PipelineError::Unfinished { source, .. }) => {
                        ApiError::Pipeline(*source)
                    }
                    e => e,
                })
            });
            // A kept index is taken to the state this transaction leaves, inside it: the
            // search after the append finds it current, and reads the append's changes
            // from no one.
            // (One that fails to, or panics, is left for that search to load.)
            if built.is_ok() && lock(&self.engine.indexes).holds(&self.ns) {
                let updated = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    self.index(store).is_ok()
                }));
                if updated.ok() != Some(true) {
                    let forgotten = lock(&self.engine.indexes).take(&self.ns);
                    drop(forgotten);
                }
            }
            Ok::<_, ApiError>(Appended {
                ingest,
                build: Some(built.map(|b| b.report)),
            })
        });
        // Not committed after all: an index kept at the state the transaction would have left
        // is forgotten (a later commit could reach a state of the same numbers).
        let appended = phantom.settle(appended)?;
        let added = appended.ingest.added as usize;
        match &appended.build {
            Some(Ok(report)) => {
                let replaced = options.rebuild || report.replaced.is_some();
                let appended = (!replaced).then_some(added);
                self.engine.refresh_segment(store, &self.ns, appended);
            }
            _ => self.engine.count_appended(&self.ns, added),
        }
        Ok(appended)
    }

    /// The settings a build of the namespace with `model` runs with, once it is known to be
    /// able to run: the memory, if any, was built with that model and these settings (or
    /// `options` replace it).
    fn build_ready(
        &self,
        store: &Store,
        model: &str,
        options: BuildOptions,
    ) -> Result<MemoryConfig, ApiError> {
        let built = store.built_with(&self.ns)?;
        let config = stored_config(&self.ns, built.as_ref().map(|(_, c)| c.as_str()))?;
        match built {
            Some((built, _)) if built != model && !options.rebuild => {
                Err(PipelineError::built_with_another_model(&self.ns, &built, model).into())
            }
            _ => Ok(config),
        }
    }

    /// Builds what arrived since the last build, from the kept fold (under the writer lock).
    pub fn build(
        &self,
        store: &mut Store,
        config: &MemoryConfig,
        options: BuildOptions,
    ) -> Result<BuildReport, ApiError> {
        self.writer().build(store, config, options)
    }

    /// [`NamespaceHandle::build`], telling `progress` where the build is as it goes.
    pub fn build_told(
        &self,
        store: &mut Store,
        config: &MemoryConfig,
        options: BuildOptions,
        progress: Option<&(dyn Fn(Progress) + Sync)>,
    ) -> Result<BuildReport, ApiError> {
        self.writer().build_told(store, config, options, progress)
    }

    /// Builds as `plan` says (see [`Writer::build_with`]) under the writer lock.
    pub fn build_with(&self, store: &mut Store, plan: &BuildPlan<'_>) -> Result<Built, ApiError> {
        self.writer().build_with(store, plan)
    }

    /// Deletes the namespace for good (see [`Store::delete_namespace`]) under the writer lock;
    /// its kept fold goes with it.
    pub fn delete(&self, store: &mut Store) -> Result<Deleted, StoreError> {
        self.writer().delete(store)
    }

    /// Stores `runs` (all of this namespace) and, with `compile`, compiles them with the
    /// deterministic compiler, under the writer lock; returns the ingest and, when asked, the
    /// compilation's report.
    pub fn add_runs(
        &self,
        store: &mut Store,
        source: &str,
        runs: &[Run],
        compile: bool,
    ) -> Result<(IngestReport, Option<CompileReport>), TraceError> {
        let _writer = self.writer();
        let ingested = store
            .ingest_runs(source, runs)
            .map_err(PipelineError::from)?;
        let compiled = match compile && !runs.is_empty() {
            true => Some(crate::trace::compile_runs(
                store,
                &self.ns,
                runs,
                &DeterministicCompiler,
                &|_, _| {},
            )?),
            false => None,
        };
        Ok((ingested, compiled))
    }

    /// Compiles the namespace's runs not yet compiled (see
    /// [`crate::trace::compile_namespace`]) under the writer lock: with a language model when
    /// `llm` names one (validated; a run whose compilation is not valid is compiled
    /// deterministically, and named in [`Compiled::fell_back`]), else deterministically.
    /// `progress` hears of each run committed ([`Stage::Compiling`]).
    pub fn compile(
        &self,
        store: &mut Store,
        llm: Option<&trajwiki_llm::LlmConfig>,
        progress: Option<&(dyn Fn(Progress) + Sync)>,
    ) -> Result<Compiled, TraceError> {
        let _writer = self.writer();
        let told = Progress::teller(progress, Stage::Compiling);
        let Some(config) = llm else {
            let report =
                crate::trace::compile_namespace(store, &self.ns, &DeterministicCompiler, &told)?;
            return Ok(Compiled {
                report,
                fell_back: Vec::new(),
            });
        };
        let client = llm_client(store, &self.ns, config.clone()).map_err(PipelineError::from)?;
        let compiler = crate::llm::compile::LlmCompiler::new(&client);
        let report = crate::trace::compile_namespace(store, &self.ns, &compiler, &told)?;
        Ok(Compiled {
            report,
            fell_back: compiler.fallbacks(),
        })
    }

    /// Writes `what` of the namespace as JSON lines (see [`crate::export::write`]) and returns
    /// the number of lines; `progress` hears of the records written ([`Stage::Exporting`]).
    pub fn export(
        &self,
        store: &Store,
        what: crate::export::Export,
        out: &mut impl std::io::Write,
        progress: Option<&(dyn Fn(Progress) + Sync)>,
    ) -> Result<usize, crate::export::ExportError> {
        let told = Progress::teller(progress, Stage::Exporting);
        crate::export::write(store, &self.ns, what, out, &told)
    }
}

/// Forgets the kept index of `ns` when dropped before [`settle`](Self::settle) was told the
/// transaction committed: an append that failed or panicked after it updated that index inside
/// its transaction leaves none behind at a state the store never reached.
struct ForgetUnlessSettled<'a> {
    engine: &'a Engine,
    ns: &'a Namespace,
    settled: bool,
}

impl ForgetUnlessSettled<'_> {
    /// `outcome`, the transaction's; the kept index stays only when it committed.
    fn settle<T, E>(mut self, outcome: Result<T, E>) -> Result<T, E> {
        self.settled = outcome.is_ok();
        outcome
    }
}

impl Drop for ForgetUnlessSettled<'_> {
    fn drop(&mut self) {
        if !self.settled {
            let forgotten = lock(&self.engine.indexes).take(self.ns);
            drop(forgotten);
        }
    }
}

/// What [`NamespaceHandle::compile`] did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Compiled {
    /// The compilation's report.
    pub report: CompileReport,
    /// The runs a model's compilation of was not valid, compiled deterministically instead,
    /// each with why.
    pub fell_back: Vec<(String, String)>,
}

/// What [`NamespaceHandle::append`] did: the messages are stored; the build, when one was
/// asked, has its report or the reason it did not run or finish.
#[derive(Debug)]
pub struct Appended {
    /// The messages stored and those found stored already.
    pub ingest: IngestReport,
    /// The build that followed: its report, or why it failed once the messages were stored
    /// (the build undone whole, its vector rows with it).
    pub build: Option<Result<BuildReport, ApiError>>,
}

/// A namespace's writer lock, held: what is done through it is serialised with the namespace's
/// other writes.
pub struct Writer<'h> {
    ns: &'h Namespace,
    engine: &'h Engine,
    kept: MutexGuard<'h, Option<KeptFold>>,
}

impl Writer<'_> {
    /// Builds what arrived since the last build, starting from the kept fold when it is the
    /// one the store holds, and keeping the fold the build leaves.
    pub fn build(
        &mut self,
        store: &mut Store,
        config: &MemoryConfig,
        options: BuildOptions,
    ) -> Result<BuildReport, ApiError> {
        self.build_told(store, config, options, None)
    }

    /// [`Writer::build`], telling `progress` where the build is as it goes.
    pub fn build_told(
        &mut self,
        store: &mut Store,
        config: &MemoryConfig,
        options: BuildOptions,
        progress: Option<&(dyn Fn(Progress) + Sync)>,
    ) -> Result<BuildReport, ApiError> {
        let plan = BuildPlan {
            progress,
            ..BuildPlan::new(config, options)
        };
        Ok(self.build_with(store, &plan)?.report)
    }

    /// Builds what arrived since the last build as `plan` says — with a language model's
    /// drivers when it names one (their responses cached in the store under the namespace) —
    /// from the kept fold, keeping the fold the build leaves; then the namespace's index
    /// segment is written when due (on a thread of its own, or before this returns for an
    /// engine [`building once`](Engine::building_once)). This is the one build.
    pub fn build_with(
        &mut self,
        store: &mut Store,
        plan: &BuildPlan<'_>,
    ) -> Result<Built, ApiError> {
        let embedder = self.engine.embedder()?;
        let _turn = store.lock_builds(self.ns)?;
        let built = self.build_now(store, embedder.as_ref(), plan)?;
        self.engine.refresh_segment(store, self.ns, None);
        Ok(built)
    }

    /// The build of [`Writer::build_with`], its build lock held by the caller, without the
    /// segment.
    fn build_now(
        &mut self,
        store: &mut Store,
        embedder: &dyn Embedder,
        plan: &BuildPlan<'_>,
    ) -> Result<Built, ApiError> {
        let (ns, kept) = (self.ns, &mut *self.kept);
        let client = match plan.llm {
            Some(config) => Some(llm_client(store, ns, config.clone())?),
            None => None,
        };
        crate::build::with_drivers(plan, client.as_ref(), |drivers| {
            build_in_turn(
                store,
                ns,
                embedder,
                plan.config,
                plan.options,
                kept,
                drivers,
            )
        })
        .map_err(ApiError::from)
    }

    /// Deletes the namespace; the kept fold goes with it.
    pub fn delete(mut self, store: &mut Store) -> Result<Deleted, StoreError> {
        let deleted = store.delete_namespace(self.ns);
        *self.kept = None;
        deleted
    }
}

/// A client of the model `config` names whose responses are cached in the store under `ns`, on
/// a connection of their own (nothing is written to a read-only store).
fn llm_client(
    store: &Store,
    ns: &Namespace,
    config: trajwiki_llm::LlmConfig,
) -> Result<trajwiki_llm::Client, StoreError> {
    let cache = api::StoreResponses::on(store.opened().connect()?, ns);
    Ok(trajwiki_llm::Client::new(
        config,
        Some(Arc::new(cache) as Arc<dyn trajwiki_llm::ResponseCache>),
    ))
}

/// The build settings of `ns`: its own when it was built before, else the defaults.
pub fn build_config(store: &Store, ns: &Namespace) -> Result<MemoryConfig, ApiError> {
    stored_config(ns, store.built_with(ns)?.as_ref().map(|(_, c)| c.as_str()))
}

/// The build settings of `ns` from the JSON its memory was built with, if any.
fn stored_config(ns: &Namespace, built: Option<&str>) -> Result<MemoryConfig, ApiError> {
    match built {
        Some(config) => serde_json::from_str(config).map_err(|source| ApiError::StoredConfig {
            namespace: ns.clone(),
            source,
        }),
        None => Ok(MemoryConfig::default()),
    }
}

/// What a caught panic said.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while the lock was held left the value as it was between two writes.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
