//! `trajwiki trace`: WikiTrace, the memory of past agent runs: compile runs into diagnoses and
//! insights, read the first context for a new task, and descend to an insight's compilation and
//! raw run, or search every run.

use trajwiki::trace::{
    compiled_run_memory, first_context, grep_semantic, memory_of_insight, memory_of_run,
    namespaces_with_runs, opened_insight_json, run_entry_json, CompileReport, TraceError,
};

use trajwiki::engine::Engine;
use trajwiki::wikitrace::ContextOptions;
use trajwiki_core::{InsightId, Namespace, RunId};

use super::memory::load_embedder;
use super::{Global, StoreArg, UsageError};
use trajwiki::render;
use trajwiki::safe::line;

#[derive(Debug, clap::Subcommand)]
pub(crate) enum TraceCommand {
    /// Compile ingested runs into a diagnosis and at most 3 insights each (deterministic, or by
    /// a language model with --llm-*).
    Compile(CompileArgs),
    /// The first context for a new task: every insight tagged with its run's outcome, and the
    /// most similar past runs.
    Context(ContextArgs),
    /// Open an insight: its guideline, its compilation, its run and the steps it cites.
    Insight(OpenArgs),
    /// Open a run: every step, its compilation and insights.
    Run(OpenArgs),
    /// Search every run's task, actions and observations (exact, or by meaning).
    Grep(GrepArgs),
    /// Write a namespace's compiled runs as a folder of linked markdown files: index.md, the
    /// insights, their compilations and runs, every step.
    Export(super::markdown::MarkdownArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct CompileArgs {
    #[command(flatten)]
    store: StoreArg,
    /// Namespaces to compile (default: every namespace with runs).
    #[arg(long)]
    namespace: Vec<String>,
    /// Print the reports as JSON.
    #[arg(long)]
    json: bool,
    /// A language model compiles the runs when one is given (`--llm-*`, or the environment);
    /// the deterministic compiler otherwise, and for every run the model fails on.
    #[command(flatten)]
    llm: super::ask::LlmArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ContextArgs {
    #[command(flatten)]
    store: StoreArg,
    /// The namespace of the runs.
    #[arg(long)]
    namespace: String,
    /// The new task.
    task: String,
    /// Whitespace tokens the insights may take (default: every insight).
    #[arg(long)]
    budget: Option<usize>,
    /// Similar past runs to show.
    #[arg(long, default_value_t = 3)]
    similar: usize,
    /// Leave this run out (replaying a past task without its own lessons).
    #[arg(long)]
    exclude: Option<String>,
    /// Embedding model for task similarity.
    #[arg(long, env = "TRAJWIKI_MODEL", default_value = trajwiki::embed::DEFAULT_MODEL)]
    model: String,
    /// Print the context as JSON (insights, omitted, similar runs, text).
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct OpenArgs {
    #[command(flatten)]
    store: StoreArg,
    /// The insight (`ins_…`) or run (`run_…`) id.
    id: String,
    /// Print as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct GrepArgs {
    #[command(flatten)]
    store: StoreArg,
    /// The namespace of the runs.
    #[arg(long)]
    namespace: String,
    /// Text to find (case-insensitive), or a query with --semantic.
    pattern: String,
    /// Rank steps by meaning instead of matching text.
    #[arg(long)]
    semantic: bool,
    /// Hits to print at most (1 or more).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    limit: u32,
    /// Embedding model for --semantic.
    #[arg(long, env = "TRAJWIKI_MODEL", default_value = trajwiki::embed::DEFAULT_MODEL)]
    model: String,
    /// Print as JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(cmd: &TraceCommand, global: Global) -> anyhow::Result<()> {
    match cmd {
        TraceCommand::Compile(args) => compile(args, global),
        TraceCommand::Context(args) => context(args, global),
        TraceCommand::Insight(args) => insight(args),
        TraceCommand::Run(args) => open_run(args),
        TraceCommand::Grep(args) => grep(args, global),
        TraceCommand::Export(args) => {
            super::markdown::run(args, super::markdown::Which::Runs, global)
        }
    }
}

fn namespace(name: &str) -> anyhow::Result<Namespace> {
    Namespace::new(name).map_err(|e| UsageError(e.to_string()).into())
}

fn compile(args: &CompileArgs, global: Global) -> anyhow::Result<()> {
    let store = args.store.open()?;
    let namespaces = if args.namespace.is_empty() {
        namespaces_with_runs(&store)?
    } else {
        args.namespace
            .iter()
            .map(|n| namespace(n))
            .collect::<anyhow::Result<_>>()?
    };
    if namespaces.is_empty() {
        return Err(
            UsageError("no namespace with runs; ingest a runs JSONL file first".into()).into(),
        );
    }
    let llm = args.llm.config()?;
    if llm.is_none() {
        global.say("compiling with the deterministic compiler (no language model configured)");
    }
    let engine = Engine::for_records(store);
    // One bar that follows each namespace's runs as they are compiled.
    let bar = global.bar(0, "compiling");
    let mut reports: Vec<CompileReport> = Vec::new();
    for (i, ns) in namespaces.iter().enumerate() {
        let which = Global::which(i, namespaces.len());
        let progress = global.follow(&bar, format!("{ns}{which}"));
        let compiled = engine
            .with_store(|store| {
                engine
                    .namespace(ns)
                    .compile(store, llm.as_ref(), Some(&progress))
            })
            .map_err(|e| stopped(e, &reports))?;
        for (run, why) in &compiled.fell_back {
            global.say(format!(
                "warning: run {} of {ns} compiled deterministically: {why}",
                line(run)
            ));
        }
        reports.push(compiled.report);
    }
    bar.finish_and_clear();
    if args.json {
        outjson!(serde_json::to_string_pretty(&reports)?)?;
        return Ok(());
    }
    outln!(
        "{:<12} {:>6} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "namespace",
        "runs",
        "insights",
        "success",
        "partial",
        "failure",
        "unknown",
        "ms"
    )?;
    for r in &reports {
        outln!(
            "{:<12} {:>6} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
            r.namespace.as_str(),
            r.runs,
            r.insights,
            r.success,
            r.partial,
            r.failure,
            r.unknown,
            r.ms
        )?;
    }
    Ok(())
}

/// A failed compile, with the namespaces compiled whole before it (the failure itself says how
/// many runs of its namespace were committed).
fn stopped(e: TraceError, done: &[CompileReport]) -> anyhow::Error {
    let e = anyhow::Error::from(e);
    if done.is_empty() {
        return e;
    }
    let names: Vec<String> = done
        .iter()
        .map(|r| format!("{} ({} runs)", r.namespace, r.runs))
        .collect();
    e.context(format!(
        "trace compile stopped; compiled and committed before: {}",
        names.join(", ")
    ))
}

/// Trace errors a user can fix (unknown ids or namespaces, nothing compiled) exit with 2.
fn usage(e: TraceError) -> anyhow::Error {
    match e {
        TraceError::NoRuns(_)
        | TraceError::NotCompiled(_)
        | TraceError::NotInNamespace { .. }
        | TraceError::Unknown { .. } => UsageError(e.to_string()).into(),
        other => other.into(),
    }
}

fn context(args: &ContextArgs, global: Global) -> anyhow::Result<()> {
    let mut store = args.store.open()?;
    let ns = namespace(&args.namespace)?;
    let exclude = args
        .exclude
        .as_deref()
        .map(RunId::parse)
        .transpose()
        .map_err(|e| UsageError(e.to_string()))?;
    let embedder = load_embedder(&args.model, global)?;
    let ctx = first_context(
        &mut store,
        &ns,
        embedder.as_ref(),
        &args.task,
        &ContextOptions {
            similar_runs: args.similar,
            budget: args.budget,
            exclude,
        },
    )
    .map_err(usage)?;
    if args.json {
        outjson!(serde_json::to_string_pretty(&ctx)?)?;
    } else {
        outln!("{}", ctx.text.trim_end())?;
    }
    Ok(())
}

fn insight(args: &OpenArgs) -> anyhow::Result<()> {
    let mut store = args.store.open()?;
    let id = InsightId::parse(&args.id).map_err(|e| UsageError(e.to_string()))?;
    let memory = memory_of_insight(&mut store, &id).map_err(usage)?;
    let opened = memory
        .open_insight(&id)
        .ok_or_else(|| UsageError(format!("insight {id} has no compilation in this store")))?;
    if args.json {
        outjson!(serde_json::to_string_pretty(&opened_insight_json(&opened))?)?;
        return Ok(());
    }
    outln!("{}", render::opened_insight(&opened).trim_end())?;
    Ok(())
}

fn open_run(args: &OpenArgs) -> anyhow::Result<()> {
    let mut store = args.store.open()?;
    let id = RunId::parse(&args.id).map_err(|e| UsageError(e.to_string()))?;
    let memory = memory_of_run(&mut store, &id).map_err(usage)?;
    let e = memory
        .open_run(&id)
        .ok_or_else(|| UsageError(format!("no run {id} in this store")))?;
    if args.json {
        outjson!(serde_json::to_string_pretty(&run_entry_json(e))?)?;
        return Ok(());
    }
    outln!("{}", render::run(e).trim_end())?;
    Ok(())
}

fn grep(args: &GrepArgs, global: Global) -> anyhow::Result<()> {
    let mut store = args.store.open()?;
    let ns = namespace(&args.namespace)?;
    if args.semantic {
        let embedder = load_embedder(&args.model, global)?;
        let memory =
            compiled_run_memory(&mut store, &ns, Some(embedder.as_ref())).map_err(usage)?;
        let hits = grep_semantic(
            &mut store,
            &memory,
            embedder.as_ref(),
            &args.pattern,
            args.limit as usize,
        )?;
        if args.json {
            outjson!(serde_json::to_string_pretty(&hits)?)?;
        } else {
            for h in &hits {
                outln!(
                    "{} [step {}] {:.3} {}",
                    h.run,
                    h.step,
                    h.score,
                    line(&h.action)
                )?;
            }
        }
        return Ok(());
    }
    let memory = compiled_run_memory(&mut store, &ns, None).map_err(usage)?;
    let hits = memory.grep(&args.pattern, args.limit as usize);
    if args.json {
        outjson!(serde_json::to_string_pretty(&hits)?)?;
    } else {
        if !hits.is_empty() {
            outln!("{}", render::grep_hits(&hits).trim_end())?;
        }
        if hits.is_empty() {
            global.say(format!("no run in {ns} contains {:?}", args.pattern));
        }
    }
    Ok(())
}
