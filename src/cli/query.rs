//! `trajwiki query` and `trajwiki eval locomo`.

use std::mem::ManuallyDrop;
use std::path::PathBuf;

use trajwiki::api::{Query, Search};
use trajwiki::engine::Model;
use trajwiki::eval::{grid, run_locomo, summary_table, AnswerOptions, EvalOptions};
use trajwiki::retrieve::{Mode, RetrievalConfig};
use trajwiki::Engine;
use trajwiki_core::Namespace;

use super::device::scoring;
use super::memory::{load_config, load_embedder, load_embedder_on};
use super::{Global, StoreArg, UsageError};
use trajwiki::safe::line;

fn parse_mode(s: &str) -> Result<Mode, String> {
    Mode::parse(s).ok_or_else(|| {
        format!(
            "unknown mode {s}; one of {}",
            Mode::ALL
                .iter()
                .map(|m| m.name())
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

#[derive(Debug, clap::Args)]
pub(crate) struct QueryArgs {
    #[command(flatten)]
    store: StoreArg,
    /// The namespace to search.
    #[arg(long)]
    namespace: String,
    /// The question.
    #[arg(required_unless_present = "questions")]
    question: Option<String>,
    /// A file of questions, one per line: the index is loaded once and each answer is printed
    /// as one line of JSON (as `--json` prints it, on one line).
    #[arg(long, conflicts_with = "question")]
    questions: Option<PathBuf>,
    #[command(flatten)]
    retrieval: RetrievalArgs,
    /// Print JSON: context, path and diagnostics.
    #[arg(long)]
    json: bool,
}

/// How a question is searched: `query` and `ask` alike.
#[derive(Debug, clap::Args)]
pub(crate) struct RetrievalArgs {
    /// Context budget in whitespace tokens.
    #[arg(long, default_value_t = 2700)]
    pub(crate) budget: usize,
    /// Retrieval mode.
    #[arg(long, default_value = "full", value_parser = parse_mode)]
    pub(crate) mode: Mode,
    /// Embedding model (the one the memory was built with).
    #[arg(long, env = "TRAJWIKI_MODEL", default_value = trajwiki::embed::DEFAULT_MODEL)]
    pub(crate) model: String,
}

/// A search as `--json` prints it.
fn search_json(
    args: &QueryArgs,
    found: &Search,
    global: Global,
    scoring_backend: &str,
    embedding_backend: &str,
) -> serde_json::Value {
    let (ctx, ranking) = (&found.context, &found.ranking);
    serde_json::json!({
        "question": found.question,
        "mode": args.retrieval.mode.name(),
        "budget": args.retrieval.budget,
        "context": ctx.text,
        "source_refs": ctx.source_refs,
        "context_tokens": ctx.tokens,
        "evidence": found.evidence,
        "candidate_universe": ranking.candidate_universe,
        "candidates": ranking.candidates,
        "shape": ranking.shape,
        "pages": ranking.pages,
        "trajectories": ranking.trajectories,
        "snapshots": ranking.snapshots,
        "timings_ms": found.timings,
        "embedded_on_load": found.embedded_on_load,
        "unbuilt_messages": found.unbuilt_messages,
        "compute": {"device": global.device.to_string(), "scoring_backend": scoring_backend, "embedding_backend": embedding_backend},
    })
}

pub(crate) fn query(args: &QueryArgs, global: Global) -> anyhow::Result<()> {
    if let Some(question) = &args.question {
        trajwiki_core::limits::QUESTION_BYTES.check(question.len())?;
    }
    let store = args.store.open()?;
    let ns = Namespace::new(args.namespace.as_str())?;
    let backend = scoring(global.device)?;
    let loaded = load_embedder_on(&args.retrieval.model, global)?;
    let embedding_backend = loaded.backend;
    let config = RetrievalConfig::default();
    // The process ends with this command: freeing a large index (millions of allocations) would
    // only delay the exit, so the engine holding it is never dropped. Its index is kept for
    // every question (loaded by the first).
    let engine = ManuallyDrop::new(
        Engine::new(
            store,
            Model::Loaded(loaded.embedder.into()),
            std::sync::Arc::clone(&backend),
            usize::MAX,
        )
        .answering_once(),
    );
    let search =
        |query: &Query<'_>| engine.with_store(|store| engine.namespace(&ns).search(store, query));
    if let Some(path) = &args.questions {
        let text = std::fs::read_to_string(path).map_err(|e| {
            UsageError(format!(
                "cannot read questions file {}: {e}",
                path.display()
            ))
        })?;
        for question in text.lines().filter(|l| !l.trim().is_empty()) {
            let query = Query {
                question,
                mode: args.retrieval.mode,
                budget: args.retrieval.budget,
                config: &config,
            };
            let found = search(&query)?;
            let value = search_json(args, &found, global, backend.name(), embedding_backend);
            outjson!(serde_json::to_string(&value)?)?;
        }
        return Ok(());
    }
    let question = args.question.as_deref().unwrap_or_default();
    let found = search(&Query {
        question,
        mode: args.retrieval.mode,
        budget: args.retrieval.budget,
        config: &config,
    })?;
    let (ctx, ranking, timings) = (&found.context, &found.ranking, &found.timings);
    if args.json {
        let value = search_json(args, &found, global, backend.name(), embedding_backend);
        outjson!(serde_json::to_string_pretty(&value)?)?;
        return Ok(());
    }
    outln!("{}", ctx.text)?;
    if found.unbuilt_messages > 0 {
        global.say(format!(
            "note: {} message(s) of {} are not built yet; only the direct turn routes reach them (`trajwiki build`, with `--flush` for an exchange still waiting for its reply)",
            found.unbuilt_messages, args.namespace
        ));
    }
    outln!(
        "\n--- retrieval path ({} mode, {} of {} tokens) ---",
        args.retrieval.mode.name(),
        ctx.tokens,
        args.retrieval.budget
    )?;
    for p in &ranking.pages {
        outln!("page {} {:.4} {}", p.id, p.score, line(&p.label))?;
    }
    for t in &ranking.trajectories {
        outln!("trajectory {} {:.4} {}", t.id, t.score, line(&t.label))?;
    }
    outln!(
        "snapshots: {}",
        ranking
            .snapshots
            .iter()
            .map(|s| s.id.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    )?;
    outln!("source refs: {}", line(&ctx.source_refs.join(" ")))?;
    let stages: Vec<String> = timings
        .stages
        .iter()
        .map(|(k, v)| format!("{k} {v:.2}"))
        .collect();
    outln!(
        "candidate universe {} · query embedding {:.1} ms · {} · render {:.2} ms · index load {:.0} ms",
        ranking.candidate_universe,
        timings.query_embedding,
        stages.join(" · "),
        timings.render,
        timings.index_load
    )?;
    Ok(())
}

#[derive(Debug, clap::Subcommand)]
pub(crate) enum EvalCommand {
    /// Gold source-reference coverage on a file in LoCoMo layout.
    Locomo(Box<EvalLocomoArgs>),
    /// WikiTrace's regression: the share of the tasks an agent solved without memory that it
    /// fails with memory, from two result files (JSON lines with `id` and `success` or `reward`).
    Regression(EvalRegressionArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct EvalRegressionArgs {
    /// The agent's results without memory.
    base: PathBuf,
    /// Its results on the same tasks with memory.
    with: PathBuf,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

fn regression(args: &EvalRegressionArgs, global: Global) -> anyhow::Result<()> {
    use trajwiki::eval::regression::{read_results, regression};
    let read = |p: &PathBuf| read_results(p).map_err(|e| UsageError(e.to_string()));
    let r = regression(&read(&args.base)?, &read(&args.with)?);
    if !r.unmatched.is_empty() {
        global.say(format!(
            "warning: {} task(s) are in one file only and are left out",
            r.unmatched.len()
        ));
    }
    if args.json {
        outjson!(serde_json::to_string_pretty(&r)?)?;
        return Ok(());
    }
    outln!(
        "tasks {} · solved without memory {} · with memory {} · regressed {} · improved {} · regression {:.3}",
        r.tasks, r.solved_without, r.solved_with, r.regressed, r.improved, r.regression
    )?;
    Ok(())
}

#[derive(Debug, clap::Args)]
pub(crate) struct EvalLocomoArgs {
    /// The LoCoMo-layout JSON file.
    #[arg(long)]
    data: PathBuf,
    /// Output folder (retrieval.jsonl, summary.json, report.md, coverage.png).
    #[arg(long)]
    out: PathBuf,
    /// Store to reuse (default: OUT/store).
    #[arg(long)]
    store: Option<PathBuf>,
    /// Element type of the message vector files the build writes: f16 or f32.
    #[arg(long, default_value = "f16", value_parser = super::memory::parse_dtype)]
    vectors: trajwiki::store::VectorDtype,
    /// Context budgets (repeatable).
    #[arg(long = "budget")]
    budgets: Vec<usize>,
    /// Modes (repeatable; default: all).
    #[arg(long = "mode", value_parser = parse_mode)]
    modes: Vec<Mode>,
    /// Leave a technique out, for an ablation row (repeatable): `turn-model` orders a search's
    /// turns by the weighted RRF of its routes times the length prior, as before the turn model.
    #[arg(long = "without", value_parser = ["turn-model"])]
    without: Vec<String>,
    /// Embedding model.
    #[arg(long, env = "TRAJWIKI_MODEL", default_value = trajwiki::embed::DEFAULT_MODEL)]
    model: String,
    /// Memory configuration (TOML).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Also answer every question of categories 1–4 with the language model (see `--llm-*`)
    /// and score the answers: token F1, BLEU-1 and a judge's verdict (`answers.jsonl`).
    #[arg(long)]
    answer: bool,
    /// The retrieval mode answers are written from.
    #[arg(long, default_value = "full", value_parser = parse_mode, requires = "answer")]
    answer_mode: Mode,
    /// The context budget answers are written from.
    #[arg(long, default_value_t = 2700, requires = "answer")]
    answer_budget: usize,
    /// The judge model, on the same endpoint (default: the answer model).
    #[arg(long, requires = "answer")]
    judge_model: Option<String>,
    #[command(flatten)]
    llm: super::ask::LlmArgs,
}

pub(crate) fn eval(cmd: &EvalCommand, global: Global) -> anyhow::Result<()> {
    let args = match cmd {
        EvalCommand::Locomo(args) => args,
        EvalCommand::Regression(args) => return regression(args, global),
    };
    super::check_dir_arg(
        "--out",
        &args.out,
        &args.out,
        "the results are written into a folder (created when absent)",
    )?;
    let store = args.store.clone().unwrap_or_else(|| args.out.join("store"));
    super::check_store_path(&store)?;
    let backend = scoring(global.device)?;
    let embedder = load_embedder(&args.model, global)?;
    let (budgets, modes) = grid(&args.budgets, &args.modes)?;
    let answers = if args.answer {
        let Some(llm) = args.llm.config()? else {
            return Err(UsageError(format!(
                "--answer needs a language model: {}",
                trajwiki::answer::NO_MODEL
            ))
            .into());
        };
        if args.answer_budget == 0 {
            return Err(
                UsageError("--answer-budget must be a positive number of tokens".into()).into(),
            );
        }
        Some(AnswerOptions {
            llm,
            judge_model: args.judge_model.clone(),
            mode: args.answer_mode,
            budget: args.answer_budget,
        })
    } else {
        None
    };
    let bar = global.bar(0, "evaluating");
    let progress = |done: usize, total: usize| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    };
    let summary = run_locomo(&EvalOptions {
        data: args.data.clone(),
        out: args.out.clone(),
        store,
        budgets: budgets.clone(),
        modes: modes.clone(),
        memory: load_config(args.config.as_ref())?,
        vectors: args.vectors,
        retrieval: RetrievalConfig {
            turn_model: !args.without.iter().any(|w| w == "turn-model"),
            ..RetrievalConfig::default()
        },
        embedder: embedder.as_ref(),
        scoring: backend.as_ref(),
        progress: &progress,
        answers,
    })?;
    bar.finish_and_clear();
    trajwiki::plot::coverage_png(&summary, &args.out.join("coverage.png"))?;
    global.say(format!("retrieval scored on {}", backend.name()));
    outln!("{}", summary_table(&summary, &modes, &budgets).trim_end())?;
    global.say(format!(
        "wrote {}/retrieval.jsonl, summary.json, report.md, coverage.png (build {:.1} s, retrieval {:.1} s)",
        args.out.display(),
        summary.build_seconds,
        summary.eval_seconds
    ));
    Ok(())
}
