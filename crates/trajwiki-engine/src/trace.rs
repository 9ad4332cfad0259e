//! WikiTrace over the store: compiling a namespace's runs, and assembling the run memory an
//! agent reads (task vectors through the store's embedding cache).

use std::time::Instant;

use serde::Serialize;
use trajwiki_core::{Embedder, InsightId, Namespace, RunId};
use trajwiki_store::Store;
use trajwiki_trace::{
    CompileError, ContextOptions, FirstContext, OpenedInsight, OutcomeClass, RunCompiler, RunEntry,
    RunMemory,
};

use crate::pipeline::{embed_cached, embed_read, PipelineError};

/// A failure of the run memory.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The store or the embedding failed.
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    /// A compiler wrote an invalid compilation; nothing of that run was stored.
    #[error(transparent)]
    Compile(#[from] CompileError),
    /// The memory could not be assembled.
    #[error(transparent)]
    Memory(#[from] trajwiki_trace::MemoryError),
    /// The namespace holds no runs.
    #[error("namespace {0} has no agent runs (ingest a runs JSONL file first)")]
    NoRuns(Namespace),
    /// The namespace's runs were never compiled.
    #[error("the runs of namespace {0} are not compiled yet; run `trajwiki trace compile --namespace {0}`")]
    NotCompiled(Namespace),
    /// A run named for a namespace that does not hold it.
    #[error("no run {run} in namespace {namespace}")]
    NotInNamespace {
        /// The run.
        run: RunId,
        /// The namespace.
        namespace: Namespace,
    },
    /// Compiling stopped at a run: those before it are committed (each with its insights),
    /// the rest are not. Compiling again keeps the committed ones and does the rest.
    #[error("compiling the runs of namespace {namespace} stopped at run {failed} ({committed} of {runs} compilations are committed; compiling again does the rest)")]
    Partial {
        /// The namespace.
        namespace: Namespace,
        /// Compilations committed before the failure.
        committed: usize,
        /// Runs to compile.
        runs: usize,
        /// The run that failed (its external ref).
        failed: String,
        /// Why.
        #[source]
        source: Box<TraceError>,
    },
    /// No run or insight with this id.
    #[error("no {kind} {id} in this store")]
    Unknown {
        /// `run` or `insight`.
        kind: &'static str,
        /// The id asked for.
        id: String,
    },
}

impl From<trajwiki_store::StoreError> for TraceError {
    fn from(e: trajwiki_store::StoreError) -> Self {
        TraceError::Pipeline(e.into())
    }
}

/// What compiling a namespace did.
#[derive(Debug, Clone, Serialize)]
pub struct CompileReport {
    /// The namespace.
    pub namespace: Namespace,
    /// Runs read.
    pub runs: usize,
    /// Insights written (or found written before).
    pub insights: usize,
    /// Runs by outcome: solved, partial, failed, unknown.
    pub success: usize,
    /// Runs with a reward strictly between 0 and 1.
    pub partial: usize,
    /// Runs not solved.
    pub failure: usize,
    /// Runs without a recorded outcome.
    pub unknown: usize,
    /// The compiler.
    pub compiler: String,
    /// Runs (external refs) another compiler wrote instead (a model's fallback to the
    /// deterministic compiler).
    pub fallbacks: Vec<String>,
    /// Wall time in milliseconds.
    pub ms: u128,
}

/// The namespaces of a store that hold runs, in name order.
pub fn namespaces_with_runs(store: &Store) -> Result<Vec<Namespace>, TraceError> {
    let mut out = Vec::new();
    for ns in store.namespaces()? {
        if store.namespace_counts(&ns)?.1 > 0 {
            out.push(ns);
        }
    }
    Ok(out)
}

/// Compiles every run of `ns` and stores each compilation with its insights in one transaction
/// per run. Compiling again with the same compiler is a no-op; a compilation that fails
/// validation (or a commit that fails: a full disk) stops the namespace before that run is
/// written, with [`TraceError::Partial`] saying how many were committed.
pub fn compile_namespace(
    store: &mut Store,
    ns: &Namespace,
    compiler: &dyn RunCompiler,
    told: &dyn Fn(usize, usize),
) -> Result<CompileReport, TraceError> {
    let runs = store.runs(ns)?;
    if runs.is_empty() {
        return Err(TraceError::NoRuns(ns.clone()));
    }
    compile_runs(store, ns, &runs, compiler, told)
}

/// Compiles `runs` (of namespace `ns`, already in the store) and commits each compilation with
/// its insights: the work of these runs, whatever else the namespace holds. A run compiled
/// before by the same compiler gets the same records again, which the store keeps as they are.
/// `told(done, total)` hears of each run committed (and of none, first).
pub fn compile_runs(
    store: &mut Store,
    ns: &Namespace,
    runs: &[trajwiki_core::Run],
    compiler: &dyn RunCompiler,
    told: &dyn Fn(usize, usize),
) -> Result<CompileReport, TraceError> {
    let started = Instant::now();
    let mut report = CompileReport {
        namespace: ns.clone(),
        runs: runs.len(),
        insights: 0,
        success: 0,
        partial: 0,
        failure: 0,
        unknown: 0,
        compiler: compiler.name().to_string(),
        fallbacks: Vec::new(),
        ms: 0,
    };
    told(0, runs.len());
    for (done, run) in runs.iter().enumerate() {
        let stopped = |source: TraceError| TraceError::Partial {
            namespace: ns.clone(),
            committed: done,
            runs: runs.len(),
            failed: run.external_ref.clone(),
            source: Box::new(source),
        };
        let compiled = compiler.compile(run).map_err(|e| stopped(e.into()))?;
        trajwiki_trace::validate(run, &compiled).map_err(|e| stopped(e.into()))?;
        store
            .commit_compilation(&compiled.compilation, &compiled.insights)
            .map_err(|e| stopped(e.into()))?;
        if compiled.compilation.compiler != compiler.name() {
            report.fallbacks.push(run.external_ref.clone());
        }
        report.insights += compiled.insights.len();
        match OutcomeClass::of(&run.outcome) {
            OutcomeClass::Success => report.success += 1,
            OutcomeClass::Partial { .. } => report.partial += 1,
            OutcomeClass::Failure => report.failure += 1,
            OutcomeClass::Unknown => report.unknown += 1,
        }
        told(done + 1, runs.len());
    }
    report.ms = started.elapsed().as_millis();
    Ok(report)
}

/// Run tasks and steps embedded through the cache, which keeps what it misses when the store is
/// writable (the first search over a run set embeds its steps once; a read-only store embeds
/// them in memory every time).
fn embed_cached_if_writable(
    store: &mut Store,
    embedder: &dyn Embedder,
    texts: &[&str],
) -> Result<(Vec<Vec<f32>>, usize), PipelineError> {
    if store.is_read_only() {
        embed_read(store, embedder, texts)
    } else {
        embed_cached(store, embedder, texts)
    }
}

/// The run memory of `ns`: its runs with their stored compilations (the first by compiler name
/// when several compilers wrote one), and their task statements embedded through the cache.
/// Without an embedder the memory opens and searches records but ranks nothing (every task
/// vector is zero), and nothing is written to the store.
pub fn load_run_memory(
    store: &mut Store,
    ns: &Namespace,
    embedder: Option<&dyn Embedder>,
) -> Result<RunMemory, TraceError> {
    let runs = store.runs(ns)?;
    if runs.is_empty() {
        return Err(TraceError::NoRuns(ns.clone()));
    }
    let mut compiled: std::collections::HashMap<_, _> = std::collections::HashMap::new();
    for (c, insights) in store.compilations(ns)? {
        compiled.entry(c.run.clone()).or_insert((c, insights));
    }
    let vectors = match embedder {
        Some(embedder) => {
            let tasks: Vec<&str> = runs.iter().map(|r| r.task.as_str()).collect();
            embed_cached_if_writable(store, embedder, &tasks)?.0
        }
        None => vec![vec![0.0]; runs.len()],
    };
    let entries = runs
        .into_iter()
        .map(|run| {
            let (compilation, insights) = match compiled.remove(&run.id) {
                Some((c, i)) => (Some(c), i),
                None => (None, Vec::new()),
            };
            RunEntry {
                run,
                compilation,
                insights,
            }
        })
        .collect();
    Ok(RunMemory::new(entries, vectors)?)
}

/// [`load_run_memory`] for reading: an error when nothing of the namespace was compiled.
pub fn compiled_run_memory(
    store: &mut Store,
    ns: &Namespace,
    embedder: Option<&dyn Embedder>,
) -> Result<RunMemory, TraceError> {
    let memory = load_run_memory(store, ns, embedder)?;
    if memory.entries().iter().all(|e| e.compilation.is_none()) {
        return Err(TraceError::NotCompiled(ns.clone()));
    }
    Ok(memory)
}

/// The first context for `task` from the compiled runs of `ns` (see
/// [`RunMemory::first_context`]); a run to exclude must be one of the namespace's.
pub fn first_context(
    store: &mut Store,
    ns: &Namespace,
    embedder: &dyn Embedder,
    task: &str,
    opts: &ContextOptions,
) -> Result<FirstContext, TraceError> {
    let memory = compiled_run_memory(store, ns, Some(embedder))?;
    if let Some(id) = &opts.exclude {
        if memory.open_run(id).is_none() {
            return Err(TraceError::NotInNamespace {
                run: id.clone(),
                namespace: ns.clone(),
            });
        }
    }
    let q = embedder
        .embed(&[task], trajwiki_core::EmbedKind::Query)
        .map_err(|source| embed_error("query", source))?;
    Ok(memory.first_context(task, q.row(0), opts))
}

fn embed_error(stage: &'static str, source: trajwiki_core::EmbedError) -> TraceError {
    PipelineError::Build(trajwiki_memory::BuildError::Embed { stage, source }).into()
}

/// The run memory (unranked, see [`load_run_memory`]) of the namespace holding run `id`.
pub fn memory_of_run(store: &mut Store, id: &RunId) -> Result<RunMemory, TraceError> {
    let ns = store
        .run(id)?
        .ok_or_else(|| TraceError::Unknown {
            kind: "run",
            id: id.to_string(),
        })?
        .namespace;
    compiled_run_memory(store, &ns, None)
}

/// The run memory (unranked) of the namespace holding insight `id`.
pub fn memory_of_insight(store: &mut Store, id: &InsightId) -> Result<RunMemory, TraceError> {
    let insight = store.insight(id)?.ok_or_else(|| TraceError::Unknown {
        kind: "insight",
        id: id.to_string(),
    })?;
    memory_of_run(store, &insight.run)
}

/// An opened insight as JSON: the insight, its compilation, its run (summary) and the steps it
/// cites with their actions and observations.
pub fn opened_insight_json(opened: &OpenedInsight<'_>) -> serde_json::Value {
    let run = &opened.entry.run;
    let steps: Vec<_> = opened
        .cited_steps
        .iter()
        .map(|&p| {
            serde_json::json!({
                "step": p,
                "action": run.steps[p - 1].action,
                "observation": run.steps[p - 1].observation,
            })
        })
        .collect();
    serde_json::json!({
        "insight": opened.insight,
        "compilation": opened.compilation,
        "run": {
            "id": run.id,
            "namespace": run.namespace,
            "external_ref": run.external_ref,
            "task": run.task,
            "outcome": opened.entry.outcome(),
            "steps": run.steps.len(),
        },
        "cited_steps": steps,
    })
}

/// A run with its compilation and insights as JSON.
pub fn run_entry_json(entry: &RunEntry) -> serde_json::Value {
    serde_json::json!({
        "run": entry.run,
        "outcome": entry.outcome(),
        "compilation": entry.compilation,
        "insights": entry.insights,
    })
}

/// Text embedded for a step in semantic run search: its action and the start of its
/// observation.
pub fn step_text(action: &str, observation: &str) -> String {
    let obs: String = observation.chars().take(300).collect();
    format!("{action}\n{obs}")
}

/// A step found by meaning.
#[derive(Debug, Clone, Serialize)]
pub struct SemanticHit {
    /// The run.
    pub run: trajwiki_core::RunId,
    /// 1-based step.
    pub step: usize,
    /// Cosine similarity to the query.
    pub score: f32,
    /// The step's action.
    pub action: String,
}

/// Searches every step of the memory's runs by meaning: the query against each step's
/// [`step_text`] (embedded once, then cached in the store); the best `limit`, ties by run and
/// step.
pub fn grep_semantic(
    store: &mut Store,
    memory: &RunMemory,
    embedder: &dyn Embedder,
    query: &str,
    limit: usize,
) -> Result<Vec<SemanticHit>, TraceError> {
    let mut at = Vec::new();
    let mut texts = Vec::new();
    for e in memory.entries() {
        for (i, s) in e.run.steps.iter().enumerate() {
            at.push((e, i));
            texts.push(step_text(&s.action, &s.observation));
        }
    }
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let (vectors, _) = embed_cached_if_writable(store, embedder, &refs)?;
    let q = embedder
        .embed(&[query], trajwiki_core::EmbedKind::Query)
        .map_err(|source| embed_error("query", source))?;
    let q = q.row(0);
    let mut hits: Vec<SemanticHit> = at
        .iter()
        .zip(&vectors)
        .map(|((e, i), v)| SemanticHit {
            run: e.run.id.clone(),
            step: i + 1,
            score: v.iter().zip(q).map(|(a, b)| a * b).sum(),
            action: e.run.steps[*i].action.clone(),
        })
        .collect();
    hits.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.run.cmp(&b.run))
            .then(a.step.cmp(&b.step))
    });
    hits.truncate(limit);
    Ok(hits)
}
