//! `trajwiki build`, `wiki` and `history`.

use std::path::PathBuf;
use std::sync::Arc;

use trajwiki::memory::MemoryConfig;
use trajwiki::store::VectorDtype;
use trajwiki_core::{Embedder, Namespace, PageId, PageKind, Timestamp, WikiPage};

use super::device::load_model;
use super::{Global, StoreArg, UsageError};
use trajwiki::api::LoadedModel;
use trajwiki::compute::CpuScoring;
use trajwiki::engine::{BuildPlan, Engine, Model, ModelPart};
use trajwiki::llm::Usage;
use trajwiki::pipeline::BuildOptions;
use trajwiki::safe::line;
use trajwiki::store::Store;

/// Texts per chunk of the GPU prefill: several device batches, so that the next chunk is
/// tokenised while this one runs.
const PREFILL_CHUNK: usize = 8192;

/// Loads the embedding model named on the command line, on the device of `--device`.
pub(crate) fn load_embedder(spec: &str, global: Global) -> anyhow::Result<Box<dyn Embedder>> {
    Ok(load_embedder_on(spec, global)?.embedder)
}

/// [`load_embedder`], with the backend the model runs on.
pub(crate) fn load_embedder_on(spec: &str, global: Global) -> anyhow::Result<LoadedModel> {
    load_model(
        spec,
        &trajwiki::embed::EmbedOptions::default(),
        global.device,
        global,
    )
}

/// Says where a model-driven build of `ns` fell back to the rules, and what the model cost.
fn say_model_part(ns: &Namespace, model: &ModelPart, global: Global) {
    let fell_back = [
        (model.extracted_by_rules, "exchange(s) extracted deterministically (the model was unreachable or none of its claims valid)"),
        (model.matched_by_rules, "trajectory match(es) left to the deterministic decider (the model was unreachable or its choice invalid)"),
        (model.pages_by_rules, "page(s) kept their deterministic text (the model was unreachable or its page invalid)"),
        (model.judged_by_rules, "claim transition(s) fell back to ADD (the model was unreachable or its decision invalid; see the ops' rationale)"),
    ];
    for (n, what) in fell_back {
        if n > 0 {
            global.say(format!("warning: {ns}: {n} {what}"));
        }
    }
    let total = |f: fn(&Usage) -> u64| model.usage.values().map(f).sum::<u64>();
    global.say(format!(
        "{ns}: model {}: {} request(s), {} answered from the cache, {} prompt and {} completion token(s), {} failed",
        model.model,
        total(|u| u.requests),
        total(|u| u.cached),
        total(|u| u.prompt_tokens),
        total(|u| u.completion_tokens),
        total(|u| u.failed),
    ));
}

/// Reads `--config FILE`, or the defaults.
pub(crate) fn load_config(path: Option<&PathBuf>) -> anyhow::Result<MemoryConfig> {
    Ok(match path {
        Some(p) => MemoryConfig::from_file(p).map_err(|e| UsageError(e.to_string()))?,
        None => MemoryConfig::default(),
    })
}

/// What a build is made with: shared by `build` and `ingest --build`.
#[derive(Debug, clap::Args)]
pub(crate) struct BuildFlags {
    /// Embedding model: a model folder, a name in the model cache (`minilm`), or
    /// `hashing[-DIM]` (lexical, no model files; for tests).
    #[arg(long, env = "TRAJWIKI_MODEL", default_value = trajwiki::embed::DEFAULT_MODEL)]
    model: String,
    /// Memory configuration (TOML); keys left out keep their defaults.
    #[arg(long)]
    pub(crate) config: Option<PathBuf>,
    /// Replace a memory built with another model or configuration (folds every message again).
    #[arg(long)]
    pub(crate) rebuild: bool,
    /// Build the last exchange too, instead of waiting for the message that closes it.
    #[arg(long)]
    pub(crate) flush: bool,
    /// Element type of a namespace's vector file, when this build creates it: f16 (half the
    /// size) or f32. An existing file keeps its type.
    #[arg(long, default_value = "f16", value_parser = parse_dtype)]
    pub(crate) vectors: VectorDtype,
    /// Vectors a namespace needs before its build adds an approximate index (HNSW, in a build
    /// with the `faiss` feature); smaller namespaces are scanned exactly.
    #[arg(long, default_value_t = trajwiki::pipeline::ANN_THRESHOLD)]
    pub(crate) ann_threshold: usize,
    /// A language model extracts claims and judges their transitions (ADD / REVISE /
    /// DEPRECATE) when one is given (`--llm-*`, or the environment); the deterministic path
    /// otherwise.
    #[command(flatten)]
    pub(crate) llm: super::ask::LlmArgs,
}

/// Parses `--vectors`.
pub(crate) fn parse_dtype(s: &str) -> Result<VectorDtype, String> {
    VectorDtype::parse(s).ok_or_else(|| format!("expected f16 or f32, got {s:?}"))
}

#[derive(Debug, clap::Args)]
pub(crate) struct BuildArgs {
    #[command(flatten)]
    store: StoreArg,
    /// Namespaces to build (default: every namespace with messages).
    #[arg(long)]
    namespace: Vec<String>,
    #[command(flatten)]
    flags: BuildFlags,
    /// Print the build reports as JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) fn build(args: &BuildArgs, global: Global) -> anyhow::Result<()> {
    let store = args.store.open()?;
    let namespaces: Vec<Namespace> = if args.namespace.is_empty() {
        trajwiki::api::namespaces_with_messages(&store)?
    } else {
        args.namespace
            .iter()
            .map(|n| Namespace::new(n.as_str()))
            .collect::<Result<_, _>>()?
    };
    if namespaces.is_empty() {
        return Err(UsageError(
            "no namespace with messages to build; ingest a conversation first".into(),
        )
        .into());
    }
    build_and_report(store, &namespaces, &args.flags, args.json, global)
}

/// Builds `namespaces` incrementally and prints one report line (or JSON object) each.
pub(crate) fn build_and_report(
    store: Store,
    namespaces: &[Namespace],
    flags: &BuildFlags,
    json: bool,
    global: Global,
) -> anyhow::Result<()> {
    let config = load_config(flags.config.as_ref())?;
    let loaded = load_embedder_on(&flags.model, global)?;
    let on_gpu = loaded.backend == "cuda";
    let embedder: Arc<dyn Embedder> = loaded.embedder.into();
    let options = BuildOptions {
        rebuild: flags.rebuild,
        flush: flags.flush,
        vectors: flags.vectors,
        ann_threshold: flags.ann_threshold,
    };
    let llm = flags.llm.config()?;
    if llm.is_none() {
        global.say(
            "building with the deterministic extractor and judge (no language model configured)",
        );
    }
    // A build scores nothing; the engine writes each namespace's segment before this ends.
    let engine = Engine::new(
        store,
        Model::Loaded(Arc::clone(&embedder)),
        Arc::new(CpuScoring),
        0,
    )
    .building_once();
    let started = std::time::Instant::now();
    // On a GPU, the new messages of every namespace are embedded together first: full batches
    // whatever the namespaces' sizes; the builds then find their vectors in the cache.
    let prefill = if on_gpu {
        let bar = global.bar(0, "embedding messages");
        let progress = |done: usize, total: usize| {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
            let rate = done as f64 / started.elapsed().as_secs_f64().max(1e-9);
            bar.set_message(format!("embedding messages, {rate:.0} texts/s"));
        };
        let prefill = engine
            .with_store(|store| engine.prefill(store, namespaces, PREFILL_CHUNK, &progress))?;
        bar.finish_and_clear();
        global.say(format!(
            "embedded {} message text(s) of {} namespace(s) on the GPU in {:.1} s ({:.0} texts/s)",
            prefill.embedded,
            namespaces.len(),
            prefill.seconds,
            prefill.embedded as f64 / prefill.seconds.max(1e-9)
        ));
        Some(prefill)
    } else {
        None
    };
    // One bar that follows each namespace's build through its stages: texts embedded of those
    // to embed, then messages folded of those to fold, then the steps that count nothing.
    let bar = global.bar(0, "building");
    let mut reports = Vec::new();
    // Model calls and tokens per namespace and phase (the cost table), when a model builds.
    let mut usage = std::collections::BTreeMap::new();
    for (i, ns) in namespaces.iter().enumerate() {
        let which = Global::which(i, namespaces.len());
        let progress = global.follow(&bar, format!("{ns}{which}"));
        let plan = BuildPlan {
            llm: llm.as_ref(),
            progress: Some(&progress),
            ..BuildPlan::new(&config, options)
        };
        let built = engine.with_store(|store| engine.namespace(ns).build_with(store, &plan))?;
        if let Some(model) = built.model {
            say_model_part(ns, &model, global);
            usage.insert(ns.to_string(), model.usage);
        }
        reports.push(built.report);
    }
    bar.finish_and_clear();
    if json {
        outjson!(serde_json::to_string_pretty(&serde_json::json!({
            "model": embedder.model_id(),
            "seconds": started.elapsed().as_secs_f64(),
            "prefill": prefill,
            "namespaces": reports,
            "llm": llm.as_ref().map(|c| serde_json::json!({
                "model": c.model,
                "usage": usage,
            })),
        }))?)?;
        return Ok(());
    }
    outln!(
        "{:<12} {:>8} {:>7} {:>9} {:>7} {:>6} {:>7} {:>6} {:>6} {:>8} {:>8}",
        "namespace",
        "messages",
        "pending",
        "snapshots",
        "claims",
        "trajs",
        "revises",
        "pages",
        "embed",
        "embed ms",
        "total ms"
    )?;
    for r in &reports {
        let total = r.load_ms + r.embed_ms + r.match_ms + r.wiki_ms + r.commit_ms;
        outln!(
            "{:<12} {:>8} {:>7} {:>9} {:>7} {:>6} {:>7} {:>6} {:>6} {:>8} {:>8}",
            r.namespace,
            r.messages,
            r.pending_messages,
            r.snapshots,
            r.claims,
            r.trajectories,
            r.revises,
            r.pages.values().sum::<usize>(),
            r.embedded_texts,
            r.embed_ms,
            total
        )?;
        if let Some(replaced) = &r.replaced {
            global.say(format!("{}: replaced {replaced}", r.namespace));
        }
    }
    let pending: usize = reports.iter().map(|r| r.pending_messages).sum();
    if pending > 0 {
        global.say(format!(
            "{pending} message(s) of open exchanges wait for their reply (searchable now; `--flush` builds them)"
        ));
    }
    global.say(format!(
        "built {} namespace(s) with {} in {:.1} s",
        reports.len(),
        embedder.model_id(),
        started.elapsed().as_secs_f64()
    ));
    Ok(())
}

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct WikiArgs {
    #[command(subcommand)]
    action: Option<WikiAction>,
    #[command(flatten)]
    store: StoreArg,
    /// The namespace whose wiki to list.
    #[arg(long)]
    namespace: Option<String>,
    /// Print one page (its current revision, or --revision).
    #[arg(long)]
    page: Option<String>,
    /// With --page: an older revision.
    #[arg(long)]
    revision: Option<u32>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Subcommand)]
enum WikiAction {
    /// Write a namespace's memory as a folder of linked markdown files: index.md, the wiki
    /// pages, each trajectory's claims and timeline, the source messages by session.
    Export(super::markdown::MarkdownArgs),
}

pub(crate) fn wiki(args: &WikiArgs, global: Global) -> anyhow::Result<()> {
    if let Some(WikiAction::Export(export)) = &args.action {
        return super::markdown::run(export, super::markdown::Which::Wiki, global);
    }
    let engine = args.store.engine()?;
    if let Some(id) = &args.page {
        let id = PageId::parse(id)?;
        let page = engine
            .with_store(|store| engine.page(store, &id, args.revision))?
            .ok_or_else(|| {
                UsageError(format!(
                    "no page {id}{} in this store",
                    args.revision
                        .map(|r| format!(" revision {r}"))
                        .unwrap_or_default()
                ))
            })?;
        if args.json {
            outjson!(serde_json::to_string_pretty(&page)?)?;
        } else {
            outln!("{}", page.body)?;
            outln!(
                "(page {} revision {}, {} trajectories)",
                page.id,
                page.revision,
                page.trajectory_ids.len()
            )?;
        }
        return Ok(());
    }
    let ns = args.namespace.as_deref().ok_or_else(|| {
        UsageError("give --namespace to list a wiki, or --page ID to print a page".into())
    })?;
    let ns = Namespace::new(ns)?;
    let pages = engine.with_store(|store| engine.namespace(&ns).pages(store))?;
    if pages.is_empty() {
        return Err(UsageError(format!(
            "namespace {ns} has no wiki; run `trajwiki build --namespace {ns}`"
        ))
        .into());
    }
    if args.json {
        outjson!(serde_json::to_string_pretty(&pages)?)?;
        return Ok(());
    }
    // As the memory index lists them: people, pets and places first (the most linked first),
    // then topics, item lists and the index pages.
    let rank = |k: PageKind| match k {
        PageKind::Entity => 0,
        PageKind::Topic => 1,
        PageKind::Inventory => 2,
        PageKind::Index => 3,
    };
    // (Index pages keep the store's order: a stable sort, their keys equal.)
    let key = |p: &WikiPage| match p.kind {
        PageKind::Index => (rank(p.kind), 0, String::new()),
        k => (
            rank(k),
            usize::MAX - p.trajectory_ids.len(),
            p.title.clone(),
        ),
    };
    let mut pages = pages;
    pages.sort_by_key(key);
    for p in pages {
        outln!(
            "{:<9} {} r{:<2} {:>3} trajectories  {}",
            p.kind.as_str(),
            p.id,
            p.revision,
            p.trajectory_ids.len(),
            line(&p.title)
        )?;
    }
    Ok(())
}

#[derive(Debug, clap::Args)]
pub(crate) struct HistoryArgs {
    #[command(flatten)]
    store: StoreArg,
    /// A trajectory id (trj_…) or a claim id (clm_…).
    id: String,
    /// Show the state at this time (`2023-05-08T13:56:00` or a date).
    #[arg(long)]
    as_of: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) fn history(args: &HistoryArgs) -> anyhow::Result<()> {
    let store = args.store.open()?;
    let as_of: Option<Timestamp> = match &args.as_of {
        Some(t) => Some(trajwiki::ingest::jsonl::parse_timestamp(t).ok_or_else(|| {
            UsageError(format!(
                "--as-of {t:?}: expected a time like 2023-05-08T13:56:00 or a date"
            ))
        })?),
        None => None,
    };
    let history = trajwiki::api::history(&store, &args.id, as_of)?;
    if args.json {
        outjson!(serde_json::to_string_pretty(&history.entries)?)?;
        return Ok(());
    }
    outln!(
        "{}",
        trajwiki::render::history(&args.id, &history, as_of).trim_end()
    )?;
    Ok(())
}
