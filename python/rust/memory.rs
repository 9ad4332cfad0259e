//! `Memory`: one store, its embedding model, and the operations of the command line.

use std::path::{Path, PathBuf};

use pyo3::prelude::*;
use pyo3::types::PyString;
use serde_json::Value;
use trajwiki_core::{InsightId, Namespace, RunId};
use trajwiki_engine::api::{self, namespaces_with_messages, Query};
use trajwiki_engine::layers::cuda::Device;
use trajwiki_engine::layers::ingest::jsonl;
use trajwiki_engine::layers::llm::{ApiKey, LlmConfig};
use trajwiki_engine::layers::memory::MemoryConfig;
use trajwiki_engine::layers::retrieve::{Mode, RetrievalConfig};
use trajwiki_engine::layers::store::VectorDtype;
use trajwiki_engine::layers::store::{IngestReport, Store};
use trajwiki_engine::layers::trace::ContextOptions;
use trajwiki_engine::pipeline::{BuildOptions, Progress};
use trajwiki_engine::trace;
use trajwiki_engine::{Engine, Model};

use crate::convert::{memory_config, string, to_json_text, to_python};
use crate::errors::{raise, Kind, OrRaise};
use crate::results::SearchResult;

/// The name inputs from Python carry in error messages, in place of a file.
const MESSAGES: &str = "<messages>";

/// A long-term memory in a store directory (created when absent): add conversations, build the
/// memory, search it with provenance, and read any record and its history.
///
/// The state between calls (store connections, the model, loaded indexes, each namespace's
/// writer lock and construction fold) is the [`Engine`]'s, as in `trajwiki serve`: indexes are
/// kept up to `index_cache_bytes` and loaded again when their namespace changed, whoever wrote.
#[pyclass(module = "trajwiki._trajwiki", frozen)]
pub struct Memory {
    engine: Engine,
    model: String,
    device: Device,
    config: MemoryConfig,
}

impl Memory {
    /// Runs `work` with one of the engine's store connections.
    fn with_store<T>(&self, work: impl FnOnce(&mut Store) -> PyResult<T>) -> PyResult<T> {
        self.engine
            .with_store(|store| Ok::<_, trajwiki_engine::layers::store::StoreError>(work(store)))
            .or_raise()?
    }

    /// Builds `namespaces` incrementally with this memory's model and configuration, each
    /// from its kept fold under its writer lock.
    fn build_in(
        &self,
        store: &mut Store,
        namespaces: &[Namespace],
        options: BuildOptions,
        progress: Option<&Py<PyAny>>,
    ) -> PyResult<Vec<trajwiki_engine::layers::memory::BuildReport>> {
        namespaces
            .iter()
            .map(|ns| {
                let told = Told::new(progress, ns);
                let tell = |p: Progress| told.tell(p);
                let report = self
                    .engine
                    .namespace(ns)
                    .build_told(store, &self.config, options, told.callback(&tell))
                    .or_raise();
                told.finish(report)
            })
            .collect()
    }
}

/// A Python progress callback as the engine's `progress`: called as `callback(namespace,
/// stage, done, total)` with the interpreter's lock taken for the call. The first exception it
/// raises is raised once the work is done ([`Told::finish`]): the work is not cut short half
/// way, and the callback is not called again.
struct Told<'a> {
    callback: Option<&'a Py<PyAny>>,
    ns: &'a Namespace,
    raised: std::sync::Mutex<Option<PyErr>>,
}

impl<'a> Told<'a> {
    fn new(callback: Option<&'a Py<PyAny>>, ns: &'a Namespace) -> Self {
        Told {
            callback,
            ns,
            raised: std::sync::Mutex::new(None),
        }
    }

    fn tell(&self, p: Progress) {
        let Some(callback) = self.callback else {
            return;
        };
        let mut raised = self.raised.lock().unwrap_or_else(|e| e.into_inner());
        if raised.is_some() {
            return;
        }
        Python::attach(|py| {
            let told = (self.ns.as_str(), p.stage.name(), p.done, p.total);
            if let Err(e) = callback.call1(py, told) {
                *raised = Some(e);
            }
        });
    }

    /// `tell` as the engine takes it: none without a callback.
    fn callback<'t>(
        &self,
        tell: &'t (dyn Fn(Progress) + Sync),
    ) -> Option<&'t (dyn Fn(Progress) + Sync)> {
        self.callback.map(|_| tell)
    }

    /// The work's `result`, unless the callback raised first.
    fn finish<T>(self, result: PyResult<T>) -> PyResult<T> {
        let value = result?;
        match self.raised.into_inner().unwrap_or_else(|e| e.into_inner()) {
            Some(e) => Err(e),
            None => Ok(value),
        }
    }
}

/// Checks that `progress`, when given, is callable.
fn callable(progress: Option<&Py<PyAny>>, py: Python<'_>) -> PyResult<()> {
    match progress {
        Some(callback) if !callback.bind(py).is_callable() => {
            Err(raise(Kind::Input, "progress: expected a callable"))
        }
        _ => Ok(()),
    }
}

/// What `add` and `add_runs` return: counts of new and unchanged records, new namespaces.
fn ingest_report(py: Python<'_>, report: &IngestReport) -> PyResult<Py<PyAny>> {
    to_python(
        py,
        &serde_json::json!({
            "added": report.added,
            "unchanged": report.unchanged,
            "new_namespaces": report.new_namespaces,
        }),
    )
}

/// The question, namespace and mode of `search` and `ask`, checked with their budget.
fn question_args(
    query: &Bound<'_, PyAny>,
    namespace: &str,
    budget: usize,
    mode: &str,
) -> PyResult<(String, Namespace, Mode)> {
    let question = string(query, "query")?;
    let ns = self::namespace(namespace)?;
    let mode = parse_mode(mode)?;
    if budget == 0 {
        return Err(raise(
            Kind::Input,
            "budget must be a positive number of tokens",
        ));
    }
    Ok((question, ns, mode))
}

fn namespace(name: &str) -> PyResult<Namespace> {
    Namespace::new(name).or_raise()
}

#[pymethods]
impl Memory {
    /// Opens (or creates) the store at `path`. `model` names the embedding model (a model
    /// folder, a name in the model cache such as `minilm`, or `hashing[-DIM]`); it is loaded when
    /// first needed. `config` is a memory configuration file (TOML). Loaded namespace indexes
    /// are kept for the next search, `index_cache_bytes` in all (2 GiB by default; one asked for
    /// once goes before those in steady use; 0 keeps none).
    #[new]
    #[pyo3(signature = (path, model = "minilm", device = "auto", config = None, index_cache_bytes = 2_147_483_648))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        model: &str,
        device: &str,
        config: Option<PathBuf>,
        index_cache_bytes: usize,
    ) -> PyResult<Self> {
        let device = crate::convert::device(device)?;
        let scoring = crate::convert::scoring(device)?;
        let config = memory_config(config)?;
        let store = py.detach(|| Store::open(&path)).or_raise()?;
        let named = Model::Named {
            spec: model.to_string(),
            device,
        };
        Ok(Memory {
            engine: Engine::new(store, named, scoring, index_cache_bytes),
            model: model.to_string(),
            device,
            config,
        })
    }

    /// The store directory.
    #[getter]
    fn path(&self) -> PathBuf {
        self.engine.dir().to_path_buf()
    }

    /// The embedding model name.
    #[getter]
    fn model(&self) -> &str {
        &self.model
    }

    /// The device asked for (`cpu`, `cuda` or `auto`).
    #[getter]
    fn device(&self) -> String {
        self.device.to_string()
    }

    /// Where retrieval candidates are scored: `cpu` or `cuda`.
    #[getter]
    fn scoring_backend(&self) -> &'static str {
        self.engine.scoring().name()
    }

    /// The index cache: `{"namespaces": [...], "bytes": held, "capacity": bytes}`.
    #[getter]
    fn index_cache(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let (namespaces, bytes, capacity) = self.engine.index_cache();
        let value = serde_json::json!({
            "namespaces": namespaces.iter().map(|n| n.to_string()).collect::<Vec<_>>(),
            "bytes": bytes,
            "capacity": capacity,
        });
        to_python(py, &value)
    }

    /// The namespaces that hold messages.
    fn namespaces(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let names = py
            .detach(|| {
                self.engine
                    .with_store(|store| namespaces_with_messages(store))
            })
            .or_raise()?;
        Ok(names.into_iter().map(|n| n.to_string()).collect())
    }

    /// Adds messages in one transaction and returns `{"added", "unchanged", "new_namespaces"}`.
    ///
    /// `messages` is a list of dicts with `speaker` (or `role`), `text` (or `content`) and
    /// `timestamp`, and optionally `session` (default 1), `seq` (default: after the session's
    /// last stored message, at the time of the write), `ref` and `attachments`; or a LoCoMo
    /// sample (a dict with `conversation`), or a list of them. `namespace` applies to every
    /// message (and renames a single LoCoMo sample); messages may instead name their own. A
    /// message without `seq` is always a new message, even when its text repeats an earlier one
    /// ("ok" said twice is two messages); to make a retry a no-op give it a `ref` (a stored ref
    /// is that message: unchanged when equal but for its position) or a `seq`. Other content
    /// under a stored identity is an `InputError` naming the field that differs. Dates and
    /// other non-JSON values are read as their `str`.
    #[pyo3(signature = (messages, namespace = None, source = "python", build = false))]
    fn add(
        &self,
        py: Python<'_>,
        messages: &Bound<'_, PyAny>,
        namespace: Option<&str>,
        source: &str,
        build: bool,
    ) -> PyResult<Py<PyAny>> {
        let text = to_json_text(messages, "messages")?;
        let ns = namespace.map(self::namespace).transpose()?;
        let (report, built) = py.detach(|| -> PyResult<_> {
            let value: Value = serde_json::from_str(&text)
                .map_err(|e| raise(Kind::Input, format!("messages: {e}")))?;
            let parsed =
                trajwiki_engine::messages::parse_messages(value, ns.as_ref(), MESSAGES, None)
                    .or_raise()?;
            let touched = api::namespaces_of(parsed.iter().map(|a| &a.message));
            self.with_store(|store| match touched.as_slice() {
                // One namespace: the messages and their build are one transaction; a build that
                // fails leaves the messages stored and raises once they are.
                [ns] if build => {
                    let appended = self
                        .engine
                        .namespace(ns)
                        .append_configured(
                            store,
                            source,
                            &parsed,
                            Some(BuildOptions::default()),
                            Some(&self.config),
                        )
                        .or_raise()?;
                    let built = match appended.build {
                        Some(built) => vec![built.or_raise()?],
                        None => Vec::new(),
                    };
                    Ok((appended.ingest, built))
                }
                // Several: stored in one transaction, then each built.
                _ => {
                    let report = self.engine.append(store, source, &parsed).or_raise()?;
                    let mut built = Vec::new();
                    if build {
                        built = self.build_in(store, &touched, BuildOptions::default(), None)?;
                    }
                    Ok((report, built))
                }
            })
        })?;
        let mut value = serde_json::json!({
            "added": report.added,
            "unchanged": report.unchanged,
            "new_namespaces": report.new_namespaces,
        });
        if build {
            value["built"] = serde_json::to_value(&built)
                .map_err(|e| raise(Kind::Input, format!("build report: {e}")))?;
        }
        to_python(py, &value)
    }

    /// Builds what arrived since the last build of `namespace`, or of every namespace with
    /// messages, and returns one build report per namespace. Construction is a fold over the
    /// messages in arrival order: adding and building message by message gives the same memory as
    /// building once. The last exchange waits for its reply unless `flush=True`. A namespace built
    /// with another model or configuration needs `rebuild=True`, which replaces its memory.
    /// `vectors` ("f16" or "f32") is the element type of a namespace's vector file when this
    /// build creates it. `progress`, a callable, is called as the build goes with the namespace,
    /// the stage ("loading", "embedding", "folding", "pages", "committing", "vectors") and the
    /// units done of the total (texts embedded, messages folded; 0 of 0 for a stage that counts
    /// nothing); an exception it raises is raised once the build is done.
    #[pyo3(signature = (namespace = None, rebuild = false, flush = false, vectors = "f16", progress = None))]
    fn build(
        &self,
        py: Python<'_>,
        namespace: Option<&str>,
        rebuild: bool,
        flush: bool,
        vectors: &str,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        callable(progress.as_ref(), py)?;
        let chosen = namespace.map(self::namespace).transpose()?;
        let vectors = VectorDtype::parse(vectors).ok_or_else(|| {
            raise(
                Kind::Input,
                format!("vectors: expected \"f16\" or \"f32\", got {vectors:?}"),
            )
        })?;
        let reports = py.detach(|| -> PyResult<_> {
            // The model first: a model that does not load fails before the store is read.
            self.engine.embedder().or_raise()?;
            self.with_store(|store| {
                let namespaces = match chosen {
                    Some(ns) => vec![ns],
                    None => namespaces_with_messages(store).or_raise()?,
                };
                if namespaces.is_empty() {
                    return Err(raise(
                        Kind::NotFound,
                        "no namespace with messages to build; add a conversation first",
                    ));
                }
                self.build_in(
                    store,
                    &namespaces,
                    BuildOptions {
                        rebuild,
                        flush,
                        vectors,
                        ..BuildOptions::default()
                    },
                    progress.as_ref(),
                )
            })
        })?;
        to_python(py, &reports)
    }

    /// Searches a built namespace: a context of at most `budget` whitespace tokens, its
    /// evidence with provenance, the retrieval path and diagnostics. `k` is the number of
    /// trajectories selected (default 15); `mode` one of the retrieval modes (default `full`).
    #[pyo3(signature = (query, namespace, k = None, budget = 2700, mode = "full"))]
    fn search(
        &self,
        py: Python<'_>,
        query: &Bound<'_, PyAny>,
        namespace: &str,
        k: Option<usize>,
        budget: usize,
        mode: &str,
    ) -> PyResult<SearchResult> {
        let (question, ns, mode) = question_args(query, namespace, budget, mode)?;
        let mut config = RetrievalConfig::default();
        if let Some(k) = k {
            if k == 0 {
                return Err(raise(Kind::Input, "k must be at least 1"));
            }
            config.trajectories = k;
        }
        let found = py.detach(|| -> PyResult<_> {
            let query = Query {
                question: &question,
                mode,
                budget,
                config: &config,
            };
            self.engine
                .with_store(|store| self.engine.namespace(&ns).search(store, &query))
                .or_raise()
        })?;
        SearchResult::from_search(py, found)
    }

    /// Answers a question from a built namespace with a language model: `{"status", "answer",
    /// "context", "source_refs", "evidence", "llm"}`. `status` is `answered`, `abstained`,
    /// `no_answer_model` (no endpoint given, here or in `TRAJWIKI_LLM_BASE_URL` and
    /// `TRAJWIKI_LLM_MODEL`) or `model_unavailable`; the evidence is there in every case. The
    /// answer is checked as `trajwiki ask` checks it, and responses are kept in the store.
    /// `rerank=True` has the model reorder the routed pages and the selected trajectories
    /// (`trajwiki ask --rerank`).
    #[pyo3(signature = (query, namespace, budget = 2700, mode = "full", llm_base_url = None, llm_model = None, llm_api_key = None, timeout = 60.0, rerank = false))]
    #[allow(clippy::too_many_arguments)]
    fn ask(
        &self,
        py: Python<'_>,
        query: &Bound<'_, PyAny>,
        namespace: &str,
        budget: usize,
        mode: &str,
        llm_base_url: Option<String>,
        llm_model: Option<String>,
        llm_api_key: Option<String>,
        timeout: f64,
        rerank: bool,
    ) -> PyResult<Py<PyAny>> {
        let (question, ns, mode) = question_args(query, namespace, budget, mode)?;
        if !(timeout.is_finite() && timeout > 0.0) {
            return Err(raise(
                Kind::Input,
                "timeout must be a positive number of seconds",
            ));
        }
        let llm = match (llm_base_url, llm_model) {
            (Some(url), Some(model)) => {
                let mut config = LlmConfig::new(url, model);
                config.api_key = llm_api_key.map(ApiKey::new);
                Some(config)
            }
            (None, None) => LlmConfig::from_env().map(|mut c| {
                if let Some(key) = llm_api_key {
                    c.api_key = Some(ApiKey::new(key));
                }
                c
            }),
            _ => return Err(raise(Kind::Input, "llm_base_url and llm_model go together")),
        }
        .map(|mut c| {
            c.timeout = std::time::Duration::from_secs_f64(timeout);
            c
        });
        let config = RetrievalConfig::default();
        let value = py.detach(|| -> PyResult<Value> {
            let query = Query {
                question: &question,
                mode,
                budget,
                config: &config,
            };
            let (asked, client) = self
                .engine
                .with_store(|store| self.engine.namespace(&ns).ask(store, &query, llm, rerank))
                .or_raise()?;
            Ok(serde_json::json!({
                "status": asked.answer.status,
                "answer": asked.answer,
                "context": asked.search.context.text,
                "source_refs": asked.search.context.source_refs,
                "evidence": asked.search.evidence,
                "llm": client.as_ref().map(|c| serde_json::json!({
                    "model": c.config().model,
                    "usage": c.usage(),
                })),
            }))
        })?;
        to_python(py, &value)
    }

    /// Any record by id (`msg_`, `run_`, `snp_`, `clm_`, `op_`, `trj_`, `pg_`, `cmp_`, `ins_`),
    /// as a dict with its `kind` (`message`, `run`, `snapshot`, `claim`, `op`, `trajectory`,
    /// `page`, `compilation`, `insight`). A claim carries its `current_status`. With `namespace`,
    /// only that namespace's records are found (a serving layer passes the caller's namespace).
    #[pyo3(signature = (id, namespace = None))]
    fn get(
        &self,
        py: Python<'_>,
        id: &Bound<'_, PyAny>,
        namespace: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        let id = string(id, "id")?;
        let ns = namespace.map(self::namespace).transpose()?;
        let record = py
            .detach(|| {
                self.engine.with_store(|store| match &ns {
                    Some(ns) => api::get_in(store, ns, &id),
                    None => api::get(store, &id),
                })
            })
            .or_raise()?;
        let mut value = record.to_json();
        value["kind"] = serde_json::to_value(record.kind()).expect("kinds serialize");
        to_python(py, &value)
    }

    /// The claim timeline of a trajectory (`trj_…`) or a claim (`clm_…`, with its revision
    /// chain): one dict per op with the claim, its status, the target it changes, the rationale
    /// and the source messages. `as_of` (a `datetime`, a `date` or a string such as
    /// `2023-05-08T13:56:00`) keeps the ops up to that time.
    #[pyo3(signature = (id, as_of = None))]
    fn history(
        &self,
        py: Python<'_>,
        id: &Bound<'_, PyAny>,
        as_of: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let id = string(id, "id")?;
        let as_of = match as_of {
            None => None,
            Some(t) => {
                let text = if t.is_instance_of::<PyString>() {
                    t.extract::<String>()?
                } else if t.hasattr("isoformat")? {
                    t.call_method0("isoformat")?.extract::<String>()?
                } else {
                    return Err(raise(
                        Kind::Input,
                        "as_of must be a datetime, a date or a str",
                    ));
                };
                Some(jsonl::parse_timestamp(&text).ok_or_else(|| {
                    raise(
                        Kind::Input,
                        format!(
                            "as_of {text:?}: expected a time like 2023-05-08T13:56:00 or a date"
                        ),
                    )
                })?)
            }
        };
        let history = py
            .detach(|| {
                self.engine
                    .with_store(|store| api::history(store, &id, as_of))
            })
            .or_raise()?;
        to_python(py, &history.entries)
    }

    /// The wiki of a built namespace: its pages (current revisions) as dicts.
    fn wiki(&self, py: Python<'_>, namespace: &str) -> PyResult<Py<PyAny>> {
        let ns = self::namespace(namespace)?;
        let pages = py
            .detach(|| {
                self.engine
                    .with_store(|store| self.engine.namespace(&ns).pages(store))
            })
            .or_raise()?;
        if pages.is_empty() {
            return Err(raise(
                Kind::NotFound,
                format!("namespace {ns} has no wiki; build it first"),
            ));
        }
        to_python(py, &pages)
    }

    /// Removes a namespace and everything in it for good (messages, runs, memory, wiki and their
    /// history, vector files, the cached embeddings of texts no other namespace holds), in one
    /// transaction, then overwrites the freed space so that no file of the store keeps the
    /// deleted text. Returns whether it existed. Raises `StoreError` when the records are
    /// deleted but the freed space could not be overwritten (a full disk, another process
    /// reading), naming why; deleting again (or `trajwiki delete --scrub`) finishes it.
    fn delete(&self, py: Python<'_>, namespace: &str) -> PyResult<bool> {
        let ns = self::namespace(namespace)?;
        let deleted = py
            .detach(|| {
                self.engine
                    .with_store(|store| self.engine.namespace(&ns).delete(store))
            })
            .or_raise()?;
        match deleted.not_scrubbed {
            None | Some(trajwiki_engine::layers::store::NotScrubbed::Postgres) => Ok(deleted.existed),
            Some(why) => Err(raise(
                Kind::Store,
                format!(
                    "deleted namespace {ns}, but its text is still in the files of the store: the freed space could not be overwritten because {why}"
                ),
            )),
        }
    }

    /// Adds agent runs: dicts in the runs JSONL layout (`id`, `task`, `steps` of `action` and
    /// `observation`, `success`, `reward`; every other key is kept as metadata). The namespace is
    /// `namespace`, else each run's `namespace`, else its `env`. Adding the same runs again
    /// changes nothing. Returns counts like `add`.
    #[pyo3(signature = (runs, namespace = None, source = "python"))]
    fn add_runs(
        &self,
        py: Python<'_>,
        runs: &Bound<'_, PyAny>,
        namespace: Option<&str>,
        source: &str,
    ) -> PyResult<Py<PyAny>> {
        let text = to_json_text(runs, "runs")?;
        let ns = namespace.map(self::namespace).transpose()?;
        let report = py.detach(|| -> PyResult<_> {
            let value: Value = serde_json::from_str(&text)
                .map_err(|e| raise(Kind::Input, format!("runs: {e}")))?;
            let Value::Array(items) = value else {
                return Err(raise(Kind::Input, "runs must be a list of dicts"));
            };
            let lines: Vec<String> = items.iter().map(Value::to_string).collect();
            let parsed = jsonl::parse_runs(Path::new("<runs>"), &lines.join("\n"), ns.as_ref())
                .or_raise()?;
            self.engine
                .with_store(|store| self.engine.ingest_runs(store, source, &parsed, None))
                .or_raise()
        })?;
        ingest_report(py, &report)
    }

    /// Compiles the runs of `namespace`, or of every namespace with runs, into a diagnosis and
    /// at most 3 insights each (the deterministic compiler); returns one report per namespace.
    /// Compiling again changes nothing. `progress`, a callable, is called as each run is
    /// committed with the namespace, `"compiling"`, the runs done and the runs in all.
    #[pyo3(signature = (namespace = None, progress = None))]
    fn compile_runs(
        &self,
        py: Python<'_>,
        namespace: Option<&str>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        callable(progress.as_ref(), py)?;
        let chosen = namespace.map(self::namespace).transpose()?;
        let reports = py.detach(|| -> PyResult<_> {
            self.with_store(|store| {
                let namespaces = match chosen {
                    Some(ns) => vec![ns],
                    None => trace::namespaces_with_runs(store).or_raise()?,
                };
                if namespaces.is_empty() {
                    return Err(raise(
                        Kind::NotFound,
                        "no namespace with runs to compile; add runs first",
                    ));
                }
                namespaces
                    .iter()
                    .map(|ns| {
                        let told = Told::new(progress.as_ref(), ns);
                        let tell = |p: Progress| told.tell(p);
                        let compiled = self
                            .engine
                            .namespace(ns)
                            .compile(store, None, told.callback(&tell))
                            .or_raise();
                        told.finish(compiled.map(|c| c.report))
                    })
                    .collect::<PyResult<Vec<_>>>()
            })
        })?;
        to_python(py, &reports)
    }

    /// The first context for a new task from the compiled runs of `namespace`: every insight
    /// (within `budget` whitespace tokens when given), most similar task first, each with its
    /// run's `outcome` and the reasons to `descend` before trusting it; the `similar` most
    /// similar past runs with their diagnoses; and the rendered `text`. `exclude` leaves one run
    /// (`run_…`) out, to replay a past task without its own lessons.
    #[pyo3(signature = (task, namespace, budget = None, similar = 3, exclude = None))]
    fn first_context(
        &self,
        py: Python<'_>,
        task: &Bound<'_, PyAny>,
        namespace: &str,
        budget: Option<usize>,
        similar: usize,
        exclude: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        let task = string(task, "task")?;
        let ns = self::namespace(namespace)?;
        let exclude = exclude.map(RunId::parse).transpose().or_raise()?;
        let ctx = py.detach(|| -> PyResult<_> {
            let embedder = self.engine.embedder().or_raise()?;
            let opts = ContextOptions {
                similar_runs: similar,
                budget,
                exclude,
            };
            self.engine
                .with_store(|store| {
                    trace::first_context(store, &ns, embedder.as_ref(), &task, &opts)
                })
                .or_raise()
        })?;
        to_python(py, &ctx)
    }

    /// Descends from an insight (`ins_…`): the insight, its compilation, its run and the steps
    /// it cites (action and observation).
    fn open_insight(&self, py: Python<'_>, id: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let id = InsightId::parse(&string(id, "id")?).or_raise()?;
        let value = py.detach(|| -> PyResult<_> {
            let memory = self
                .engine
                .with_store(|store| trace::memory_of_insight(store, &id))
                .or_raise()?;
            let opened = memory.open_insight(&id).ok_or_else(|| {
                raise(
                    Kind::NotFound,
                    format!("insight {id} has no compilation in this store"),
                )
            })?;
            Ok(trace::opened_insight_json(&opened))
        })?;
        to_python(py, &value)
    }

    /// A raw run (`run_…`) with every step, its outcome, compilation and insights.
    fn open_run(&self, py: Python<'_>, id: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let id = RunId::parse(&string(id, "id")?).or_raise()?;
        let value = py.detach(|| -> PyResult<_> {
            let memory = self
                .engine
                .with_store(|store| trace::memory_of_run(store, &id))
                .or_raise()?;
            let entry = memory
                .open_run(&id)
                .ok_or_else(|| raise(Kind::NotFound, format!("no run {id} in this store")))?;
            Ok(trace::run_entry_json(entry))
        })?;
        to_python(py, &value)
    }

    /// Searches every run of `namespace`: case-insensitive text in tasks, actions and
    /// observations (hits with `run`, `step` (0 for the task), `field`, `excerpt`), or with
    /// `semantic=True` steps ranked by meaning (`run`, `step`, `score`, `action`).
    #[pyo3(signature = (text, namespace, semantic = false, limit = 20))]
    fn grep_runs(
        &self,
        py: Python<'_>,
        text: &Bound<'_, PyAny>,
        namespace: &str,
        semantic: bool,
        limit: usize,
    ) -> PyResult<Py<PyAny>> {
        let text = string(text, "text")?;
        let ns = self::namespace(namespace)?;
        let hits = py.detach(|| -> PyResult<Value> {
            if semantic {
                let embedder = self.engine.embedder().or_raise()?;
                let hits = self
                    .engine
                    .with_store(|store| {
                        let memory =
                            trace::compiled_run_memory(store, &ns, Some(embedder.as_ref()))?;
                        trace::grep_semantic(store, &memory, embedder.as_ref(), &text, limit)
                    })
                    .or_raise()?;
                return Ok(serde_json::to_value(hits).expect("hits serialize"));
            }
            let memory = self
                .engine
                .with_store(|store| trace::compiled_run_memory(store, &ns, None))
                .or_raise()?;
            Ok(serde_json::to_value(memory.grep(&text, limit)).expect("hits serialize"))
        })?;
        to_python(py, &hits)
    }

    fn __repr__(&self) -> String {
        format!(
            "Memory({:?}, model={:?}, device={:?})",
            self.engine.dir().display().to_string(),
            self.model,
            self.device.to_string()
        )
    }
}

/// A retrieval mode by name.
pub fn parse_mode(name: &str) -> PyResult<Mode> {
    Mode::parse(name).ok_or_else(|| {
        let names: Vec<&str> = Mode::ALL.iter().map(|m| m.name()).collect();
        raise(
            Kind::Input,
            format!("unknown mode {name:?}; one of {}", names.join(", ")),
        )
    })
}
