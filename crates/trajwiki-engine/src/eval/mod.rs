//! The LoCoMo retrieval evaluation (SPEC §6): gold source-reference coverage at a context
//! budget, per category and overall, for every retrieval mode — no LLM needed.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;
use serde_json::json;
use trajwiki_compute::ScoringBackend;
use trajwiki_core::Embedder;
use trajwiki_ingest::locomo::{category_name, read_locomo, LocomoSample};
use trajwiki_memory::MemoryConfig;
use trajwiki_retrieve::{Derived, Mode, RetrievalConfig};
use trajwiki_store::Store;

pub mod answers;
pub mod regression;

pub use answers::{AnswerOptions, AnswerSummary};

use crate::load::load_index;
use crate::pipeline::{build_namespace, BuildOptions, PipelineError};
use crate::retrieval::embed_query;

/// Default context budgets, in whitespace tokens.
pub const DEFAULT_BUDGETS: [usize; 5] = [700, 1500, 2700, 4000, 8000];

/// What to evaluate.
pub struct EvalOptions<'a> {
    /// The LoCoMo-layout file.
    pub data: PathBuf,
    /// Output folder.
    pub out: PathBuf,
    /// Store to (re)use; ingest and build are no-ops when already done.
    pub store: PathBuf,
    /// Budgets.
    pub budgets: Vec<usize>,
    /// Modes.
    pub modes: Vec<Mode>,
    /// Memory construction constants.
    pub memory: MemoryConfig,
    /// The element type of the message vector files the build writes (f16 or f32).
    pub vectors: trajwiki_store::VectorDtype,
    /// Retrieval constants.
    pub retrieval: RetrievalConfig,
    /// The embedder.
    pub embedder: &'a dyn Embedder,
    /// The scoring backend retrieval runs on (`trajwiki_compute::CpuScoring` for the reference).
    pub scoring: &'a dyn ScoringBackend,
    /// Progress callback: (sample done, samples).
    pub progress: &'a dyn Fn(usize, usize),
    /// Answers to score too (`answers.jsonl`), when a model is given.
    pub answers: Option<AnswerOptions>,
}

/// Errors of the evaluation.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// Reading the data failed.
    #[error(transparent)]
    Input(#[from] trajwiki_ingest::IngestError),
    /// Store, build or index failed.
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] trajwiki_store::StoreError),
    /// Retrieval failed.
    #[error(transparent)]
    Retrieve(#[from] trajwiki_retrieve::IndexError),
    /// The data file holds no conversation.
    #[error("the data file holds no conversation")]
    NoSamples,
    /// The answer model's cache could not be opened.
    #[error(transparent)]
    Api(#[from] Box<crate::api::ApiError>),
    /// A context budget of zero tokens.
    #[error("a context budget must be a positive number of tokens")]
    ZeroBudget,
    /// Writing the results failed.
    #[error("cannot write {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// Aggregates of one (mode, budget, category) cell.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Cell {
    /// Questions with gold evidence.
    pub questions: usize,
    /// Mean gold source-reference coverage.
    pub coverage: f64,
    /// Share of questions with every gold ref in the context.
    pub all_refs: f64,
    /// Mean gold trajectory recall@k (structured modes).
    pub trajectory_recall: Option<f64>,
    /// Mean context tokens.
    pub context_tokens: f64,
    /// Mean candidate universe size.
    pub candidate_universe: f64,
    /// Latency p50 (ms, query embedding included).
    pub latency_p50_ms: f64,
    /// Latency p95 (ms).
    pub latency_p95_ms: f64,
}

#[derive(Default)]
struct Acc {
    cov: Vec<f64>,
    all: Vec<f64>,
    recall: Vec<f64>,
    tokens: Vec<f64>,
    universe: Vec<f64>,
    latency: Vec<f64>,
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        f64::NAN
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

fn percentile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    s[((s.len() - 1) as f64 * p).round() as usize]
}

/// The evaluation's result: per (mode, budget, category) cells; category "all" is 1–4.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The data file.
    pub data: String,
    /// The embedding model.
    pub model: String,
    /// Samples evaluated.
    pub samples: Vec<String>,
    /// mode → budget → category → cell.
    pub cells: BTreeMap<String, BTreeMap<usize, BTreeMap<String, Cell>>>,
    /// Seconds spent ingesting and building.
    pub build_seconds: f64,
    /// Seconds spent retrieving.
    pub eval_seconds: f64,
    /// Answer metrics, when answers were evaluated.
    pub answers: Option<AnswerSummary>,
}

/// The budgets and modes to evaluate: those given, else [`DEFAULT_BUDGETS`] and every mode.
pub fn grid(budgets: &[usize], modes: &[Mode]) -> Result<(Vec<usize>, Vec<Mode>), EvalError> {
    if budgets.contains(&0) {
        return Err(EvalError::ZeroBudget);
    }
    let budgets = if budgets.is_empty() {
        DEFAULT_BUDGETS.to_vec()
    } else {
        budgets.to_vec()
    };
    let modes = if modes.is_empty() {
        Mode::ALL.to_vec()
    } else {
        modes.to_vec()
    };
    Ok((budgets, modes))
}

/// The summary as the command line prints it: per mode and budget, coverage on category 1 and
/// on 1–4, and the median latency. One line per row, each ending in a newline.
pub fn summary_table(s: &Summary, modes: &[Mode], budgets: &[usize]) -> String {
    let mut out = format!(
        "{:<16} {:>6} {:>8} {:>8} {:>8}\n",
        "mode", "budget", "cat1", "all", "p50 ms"
    );
    for m in modes {
        for b in budgets {
            let cell = |c: &str| {
                s.cells
                    .get(m.name())
                    .and_then(|x| x.get(b))
                    .and_then(|x| x.get(c))
            };
            if let (Some(c1), Some(all)) = (cell("1"), cell("all")) {
                out.push_str(&format!(
                    "{:<16} {:>6} {:>8.3} {:>8.3} {:>8.1}\n",
                    m.name(),
                    b,
                    c1.coverage,
                    all.coverage,
                    all.latency_p50_ms
                ));
            }
        }
    }
    out
}

/// Runs the evaluation and writes `retrieval.jsonl`, `summary.json` and `report.md` to `out`.
pub fn run_locomo(o: &EvalOptions<'_>) -> Result<Summary, EvalError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| EvalError::Io {
            path: path.clone(),
            source,
        }
    };
    std::fs::create_dir_all(&o.out).map_err(io(&o.out))?;
    let samples: Vec<LocomoSample> = read_locomo(&o.data)?;
    let t0 = Instant::now();
    let mut store = Store::open(&o.store)?;
    for s in &samples {
        store.ingest_messages(&o.data.display().to_string(), &s.messages)?;
        build_namespace(
            &mut store,
            &s.namespace,
            o.embedder,
            &o.memory,
            BuildOptions {
                flush: true,
                vectors: o.vectors,
                ..BuildOptions::default()
            },
        )?;
    }
    let build_seconds = t0.elapsed().as_secs_f64();
    let t0 = Instant::now();
    let jsonl_path = o.out.join("retrieval.jsonl");
    let tmp = o.out.join("retrieval.jsonl.partial");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&tmp).map_err(io(&tmp))?);
    let mut acc: BTreeMap<(Mode, usize, String), Acc> = BTreeMap::new();
    for (si, sample) in samples.iter().enumerate() {
        let index = load_index(
            &store,
            &sample.namespace,
            o.embedder,
            &mut Derived::transient(),
            None,
        )?
        .index;
        let traj_of_ref: BTreeMap<String, String> = index
            .records
            .snapshots
            .iter()
            .flat_map(|s| {
                let t = s.trajectory.to_string();
                s.source_message_ids
                    .iter()
                    .map(move |m| (m.clone(), t.clone()))
            })
            .filter_map(|(m, t)| {
                index
                    .records
                    .messages
                    .iter()
                    .find(|x| x.id == m)
                    .and_then(|x| x.external_ref.clone())
                    .map(|r| (r, t))
            })
            .collect();
        // Mode-major, like a server answering one mode's queries in turn: every query is embedded
        // again for each mode, so that a mode's latency is not measured with the model weights
        // evicted from the cache by the other modes' rankings.
        for &mode in &o.modes {
            for q in sample.qa.iter().filter(|q| q.category != 5) {
                let (qvec, embed_ms) = embed_query(o.embedder, &q.question)?;
                let gold: BTreeSet<&str> = q.evidence.iter().map(String::as_str).collect();
                let t1 = Instant::now();
                let ranking = index.rank(&q.question, &qvec, mode, &o.retrieval, o.scoring)?;
                let rank_ms = t1.elapsed().as_secs_f64() * 1000.0;
                let selected: BTreeSet<&str> =
                    ranking.trajectories.iter().map(|t| t.id.as_str()).collect();
                for &budget in &o.budgets {
                    let t2 = Instant::now();
                    let ctx = index.render(&ranking, budget);
                    let latency = embed_ms + rank_ms + t2.elapsed().as_secs_f64() * 1000.0;
                    let line = json!({
                        "sample_id": sample.namespace.as_str(),
                        "qa_index": q.qa_index,
                        "category": q.category,
                        "question": q.question,
                        "mode": mode.name(),
                        "budget": budget,
                        "context": ctx.text,
                        "source_refs": ctx.source_refs,
                        "context_tokens": ctx.tokens,
                        "candidate_universe": ranking.candidate_universe,
                        "trajectories": ranking.trajectories.iter().map(|t| t.id.clone()).collect::<Vec<_>>(),
                        "pages": ranking.pages.iter().map(|p| p.id.clone()).collect::<Vec<_>>(),
                        "latency_ms": (latency * 1000.0).round() / 1000.0,
                    });
                    serde_json::to_writer(&mut out, &line).map_err(|e| EvalError::Io {
                        path: tmp.clone(),
                        source: e.into(),
                    })?;
                    out.write_all(b"\n").map_err(io(&tmp))?;
                    if gold.is_empty() {
                        continue;
                    }
                    let refs: BTreeSet<&str> = ctx.source_refs.iter().map(String::as_str).collect();
                    let found = gold.iter().filter(|g| refs.contains(**g)).count();
                    let recall = (!selected.is_empty()).then(|| {
                        let hit = gold
                            .iter()
                            .filter(|g| {
                                traj_of_ref
                                    .get(**g)
                                    .is_some_and(|t| selected.contains(t.as_str()))
                            })
                            .count();
                        hit as f64 / gold.len() as f64
                    });
                    for cat in [q.category.to_string(), "all".to_string()] {
                        let a = acc.entry((mode, budget, cat)).or_default();
                        a.cov.push(found as f64 / gold.len() as f64);
                        a.all.push(if found == gold.len() { 1.0 } else { 0.0 });
                        if let Some(r) = recall {
                            a.recall.push(r);
                        }
                        a.tokens.push(ctx.tokens as f64);
                        a.universe.push(ranking.candidate_universe as f64);
                        a.latency.push(latency);
                    }
                }
            }
        }
        (o.progress)(si + 1, samples.len());
    }
    out.flush().map_err(io(&tmp))?;
    drop(out);
    std::fs::rename(&tmp, &jsonl_path).map_err(io(&jsonl_path))?;
    let mut cells: BTreeMap<String, BTreeMap<usize, BTreeMap<String, Cell>>> = BTreeMap::new();
    for ((mode, budget, cat), a) in &acc {
        cells
            .entry(mode.name().to_string())
            .or_default()
            .entry(*budget)
            .or_default()
            .insert(
                cat.clone(),
                Cell {
                    questions: a.cov.len(),
                    coverage: mean(&a.cov),
                    all_refs: mean(&a.all),
                    trajectory_recall: (!a.recall.is_empty()).then(|| mean(&a.recall)),
                    context_tokens: mean(&a.tokens),
                    candidate_universe: mean(&a.universe),
                    latency_p50_ms: percentile(&a.latency, 0.5),
                    latency_p95_ms: percentile(&a.latency, 0.95),
                },
            );
    }
    let eval_seconds = t0.elapsed().as_secs_f64();
    let answers = match &o.answers {
        Some(a) => {
            let path = o.out.join("answers.jsonl");
            let tmp = o.out.join("answers.jsonl.partial");
            let mut out = std::io::BufWriter::new(std::fs::File::create(&tmp).map_err(io(&tmp))?);
            let index_of = |s: &LocomoSample| -> Result<trajwiki_retrieve::Index, EvalError> {
                Ok(load_index(
                    &store,
                    &s.namespace,
                    o.embedder,
                    &mut Derived::transient(),
                    None,
                )?
                .index)
            };
            let summary = answers::run(
                &samples,
                &index_of,
                a,
                &o.store,
                &o.retrieval,
                o.embedder,
                o.scoring,
                &mut out,
                &io(&tmp),
            )?;
            out.flush().map_err(io(&tmp))?;
            drop(out);
            std::fs::rename(&tmp, &path).map_err(io(&path))?;
            Some(summary)
        }
        None => None,
    };
    let summary = Summary {
        data: o.data.display().to_string(),
        model: o.embedder.model_id().to_string(),
        samples: samples.iter().map(|s| s.namespace.to_string()).collect(),
        cells,
        build_seconds,
        eval_seconds,
        answers,
    };
    let path = o.out.join("summary.json");
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&summary).expect("summary serializes"),
    )
    .map_err(io(&path))?;
    let path = o.out.join("report.md");
    let mut md = report(&summary, &o.modes, &o.budgets);
    if let Some(a) = &summary.answers {
        md.push_str(&answers::report(a));
    }
    std::fs::write(&path, md).map_err(io(&path))?;
    Ok(summary)
}

/// The markdown report: coverage per mode × budget for each category and overall.
pub fn report(s: &Summary, modes: &[Mode], budgets: &[usize]) -> String {
    let mut md = format!(
        "# LoCoMo retrieval evaluation\n\nData: `{}` ({} conversations), embedding model `{}`. Gold source-reference coverage at each context budget (whitespace tokens); categories 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop; \"all\" is 1–4. Build {:.1} s, retrieval {:.1} s.\n",
        s.data,
        s.samples.len(),
        s.model,
        s.build_seconds,
        s.eval_seconds
    );
    for cat in ["1", "2", "3", "4", "all"] {
        let name = if cat == "all" {
            "categories 1–4".to_string()
        } else {
            format!(
                "category {cat} ({})",
                category_name(cat.parse().unwrap_or(0))
            )
        };
        md.push_str(&format!("\n## Coverage, {name}\n\n| mode |"));
        for b in budgets {
            md.push_str(&format!(" {b} |"));
        }
        md.push_str("\n|---|");
        md.push_str(&"---:|".repeat(budgets.len()));
        md.push('\n');
        for m in modes {
            md.push_str(&format!("| {} |", m.name()));
            for b in budgets {
                let v = s
                    .cells
                    .get(m.name())
                    .and_then(|x| x.get(b))
                    .and_then(|x| x.get(cat))
                    .map(|c| c.coverage);
                md.push_str(&format!(
                    " {} |",
                    v.map_or("–".into(), |v| format!("{v:.3}"))
                ));
            }
            md.push('\n');
        }
    }
    md.push_str("\n## Details at each budget (categories 1–4)\n\n| mode | budget | coverage | all refs | traj recall@k | ctx tokens | universe | p50 ms | p95 ms |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for m in modes {
        for b in budgets {
            if let Some(c) = s
                .cells
                .get(m.name())
                .and_then(|x| x.get(b))
                .and_then(|x| x.get("all"))
            {
                md.push_str(&format!(
                    "| {} | {b} | {:.3} | {:.3} | {} | {:.0} | {:.0} | {:.1} | {:.1} |\n",
                    m.name(),
                    c.coverage,
                    c.all_refs,
                    c.trajectory_recall
                        .map_or("–".into(), |r| format!("{r:.3}")),
                    c.context_tokens,
                    c.candidate_universe,
                    c.latency_p50_ms,
                    c.latency_p95_ms
                ));
            }
        }
    }
    md
}
