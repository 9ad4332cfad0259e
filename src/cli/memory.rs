//! `trajwiki build`, `wiki` and `history`.

use std::collections::BTreeSet;
use std::path::PathBuf;

use trajwiki_core::{
    replay_ops, ClaimId, ClaimOp, ClaimStatus, Embedder, HashingEmbedder, IdKind, Namespace,
    PageId, Timestamp, TrajectoryId, TIMESTAMP_FORMAT,
};
use trajwiki_memory::MemoryConfig;

use super::device::{load_model, LoadedEmbedder};
use super::{Global, StoreArg, UsageError};
use trajwiki::pipeline::build_namespace;

/// Loads the embedding model named on the command line, on the device of `--device`.
pub(crate) fn load_embedder(spec: &str, global: Global) -> anyhow::Result<Box<dyn Embedder>> {
    Ok(load_embedder_on(spec, global)?.embedder)
}

/// [`load_embedder`], with the backend the model runs on.
pub(crate) fn load_embedder_on(spec: &str, global: Global) -> anyhow::Result<LoadedEmbedder> {
    if let Some(rest) = spec.strip_prefix("hashing") {
        let dim = match rest.strip_prefix('-') {
            Some(d) => d
                .parse()
                .map_err(|_| UsageError(format!("--model {spec}: expected hashing-<dimension>")))?,
            None if rest.is_empty() => 384,
            None => return Err(UsageError(format!("unknown model {spec}")).into()),
        };
        return Ok(LoadedEmbedder {
            embedder: Box::new(HashingEmbedder::new(dim)),
            backend: "cpu",
        });
    }
    let opts = trajwiki_embed::EmbedOptions::default();
    load_model(spec, &opts, global.device, global)
}

/// Reads `--config FILE`, or the defaults.
pub(crate) fn load_config(path: Option<&PathBuf>) -> anyhow::Result<MemoryConfig> {
    Ok(match path {
        Some(p) => MemoryConfig::from_file(p).map_err(|e| UsageError(e.to_string()))?,
        None => MemoryConfig::default(),
    })
}

#[derive(Debug, clap::Args)]
pub(crate) struct BuildArgs {
    #[command(flatten)]
    store: StoreArg,
    /// Namespaces to build (default: every namespace with messages).
    #[arg(long)]
    namespace: Vec<String>,
    /// Embedding model: a model folder, a name in the model cache (`minilm`), or
    /// `hashing[-DIM]` (lexical, no model files; for tests).
    #[arg(long, env = "TRAJWIKI_MODEL", default_value = trajwiki_embed::DEFAULT_MODEL)]
    model: String,
    /// Memory configuration (TOML); keys left out keep their defaults.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Replace memory built before (differently) instead of refusing.
    #[arg(long)]
    rebuild: bool,
    /// Print the build reports as JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) fn build(args: &BuildArgs, global: Global) -> anyhow::Result<()> {
    let mut store = args.store.open()?;
    let config = load_config(args.config.as_ref())?;
    let embedder = load_embedder(&args.model, global)?;
    let namespaces: Vec<Namespace> = if args.namespace.is_empty() {
        let mut with_messages = Vec::new();
        for ns in store.namespaces()? {
            if store.namespace_counts(&ns)?.0 > 0 {
                with_messages.push(ns);
            }
        }
        with_messages
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
    let started = std::time::Instant::now();
    let bar = global.bar(namespaces.len() as u64, "building");
    let mut reports = Vec::new();
    for ns in &namespaces {
        bar.set_message(format!("building {ns}"));
        let (_, report) =
            build_namespace(&mut store, ns, embedder.as_ref(), &config, args.rebuild)?;
        bar.inc(1);
        reports.push(report);
    }
    bar.finish_and_clear();
    if args.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "model": embedder.model_id(),
                "seconds": started.elapsed().as_secs_f64(),
                "namespaces": reports,
            }))?
        )?;
        return Ok(());
    }
    outln!(
        "{:<12} {:>8} {:>9} {:>7} {:>6} {:>7} {:>6} {:>6} {:>8} {:>8}",
        "namespace",
        "messages",
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
        let total = r.extract_ms + r.embed_ms + r.match_ms + r.wiki_ms;
        outln!(
            "{:<12} {:>8} {:>9} {:>7} {:>6} {:>7} {:>6} {:>6} {:>8} {:>8}",
            r.namespace,
            r.messages,
            r.snapshots,
            r.claims,
            r.trajectories,
            r.revises,
            r.pages.values().sum::<usize>(),
            r.embedded_texts,
            r.embed_ms,
            total
        )?;
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
pub(crate) struct WikiArgs {
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

pub(crate) fn wiki(args: &WikiArgs) -> anyhow::Result<()> {
    let store = args.store.open()?;
    if let Some(id) = &args.page {
        let id = PageId::parse(id)?;
        let page = match args.revision {
            Some(r) => store.page_revision(&id, r)?,
            None => store.page(&id)?,
        }
        .ok_or_else(|| {
            UsageError(format!(
                "no page {id}{} in this store",
                args.revision
                    .map(|r| format!(" revision {r}"))
                    .unwrap_or_default()
            ))
        })?;
        if args.json {
            outln!("{}", serde_json::to_string_pretty(&page)?)?;
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
    let pages = store.pages(&ns)?;
    if pages.is_empty() {
        return Err(UsageError(format!(
            "namespace {ns} has no wiki; run `trajwiki build --namespace {ns}`"
        ))
        .into());
    }
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&pages)?)?;
        return Ok(());
    }
    for p in pages {
        outln!(
            "{:<9} {} r{:<2} {:>3} trajectories  {}",
            p.kind.as_str(),
            p.id,
            p.revision,
            p.trajectory_ids.len(),
            p.title
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
        Some(t) => Some(trajwiki_ingest::jsonl::parse_timestamp(t).ok_or_else(|| {
            UsageError(format!(
                "--as-of {t:?}: expected a time like 2023-05-08T13:56:00 or a date"
            ))
        })?),
        None => None,
    };
    // The claims whose history is shown, and their namespace.
    let (ns, claims): (Namespace, BTreeSet<ClaimId>) = match IdKind::of(&args.id)? {
        IdKind::Trajectory => {
            let t = store
                .trajectory(&TrajectoryId::parse(&args.id)?)?
                .ok_or_else(|| UsageError(format!("no trajectory {} in this store", args.id)))?;
            let mut ids = BTreeSet::new();
            for s in &t.snapshot_ids {
                if let Some(s) = store.snapshot(s)? {
                    ids.extend(s.claim_ids);
                }
            }
            (t.namespace, ids)
        }
        IdKind::Claim => {
            let id = ClaimId::parse(&args.id)?;
            let c = store
                .claim(&id)?
                .ok_or_else(|| UsageError(format!("no claim {id} in this store")))?;
            // Its revision chain, both ways.
            let all = store.claims(&c.namespace)?;
            let mut chain: BTreeSet<ClaimId> = [id.clone()].into();
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
        other => {
            return Err(UsageError(format!(
                "history takes a trajectory or a claim id, not a {other}"
            ))
            .into())
        }
    };
    let mut ops: Vec<ClaimOp> = store
        .claim_ops(&ns)?
        .into_iter()
        .filter(|op| {
            op.target
                .iter()
                .chain(&op.new_claim)
                .any(|c| claims.contains(c))
        })
        .collect();
    // When each op happened: its snapshot's time.
    let mut when = Vec::with_capacity(ops.len());
    for op in &ops {
        when.push(store.snapshot(&op.snapshot)?.map(|s| s.timestamp));
    }
    if let Some(t) = as_of {
        let keep: Vec<bool> = when.iter().map(|w| w.is_some_and(|w| w <= t)).collect();
        let mut k = keep.iter();
        ops.retain(|_| *k.next().expect("aligned"));
        when.retain(|w| w.is_some_and(|w| w <= t));
    }
    // State at the end of the shown ops (the whole namespace log replayed up to the cut, then
    // restricted to these claims, so statuses are exact).
    let mut initial = std::collections::BTreeMap::new();
    for op in &ops {
        for c in op.target.iter().chain(&op.new_claim) {
            if let Some(claim) = store.claim(c)? {
                initial.insert(c.clone(), claim.status);
            }
        }
    }
    let state = replay_ops(
        ops.iter()
            .filter(|op| op.target.as_ref().is_none_or(|t| initial.contains_key(t))),
        |c| initial.get(c).copied(),
    )?;
    let mut rows = Vec::new();
    for (op, at) in ops.iter().zip(&when) {
        let claim_id = op
            .new_claim
            .as_ref()
            .or(op.target.as_ref())
            .expect("an op names a claim");
        let claim = store.claim(claim_id)?;
        let mut sources = Vec::new();
        for m in &op.source_message_ids {
            if let Some(m) = store.message(m)? {
                sources.push(serde_json::json!({
                    "ref": m.external_ref.clone().unwrap_or_else(|| m.id.to_string()),
                    "timestamp": m.timestamp.format(TIMESTAMP_FORMAT).to_string(),
                    "speaker": m.speaker,
                    "text": m.text,
                }));
            }
        }
        let target_text = match &op.target {
            Some(t) => store.claim(t)?.map(|c| c.text),
            None => None,
        };
        rows.push(serde_json::json!({
            "seq": op.seq,
            "op": op.op.as_str(),
            "at": at.map(|t| t.format(TIMESTAMP_FORMAT).to_string()),
            "claim": claim_id,
            "text": claim.as_ref().map(|c| c.text.clone()),
            "status": state.get(claim_id).map(|s| s.as_str()),
            "target": op.target,
            "target_text": target_text,
            "target_status": op.target.as_ref().and_then(|t| state.get(t)).map(|s: &ClaimStatus| s.as_str()),
            "rationale": op.rationale,
            "sources": sources,
        }));
    }
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&rows)?)?;
        return Ok(());
    }
    outln!(
        "history of {} in {} ({} ops{})",
        args.id,
        ns,
        rows.len(),
        as_of
            .map(|t| format!(", as of {}", t.format(TIMESTAMP_FORMAT)))
            .unwrap_or_default()
    )?;
    for r in &rows {
        let s = |k: &str| r[k].as_str().unwrap_or("").to_string();
        outln!(
            "#{} {} {} [{}] {}",
            r["seq"],
            s("at"),
            s("op"),
            s("status"),
            s("text")
        )?;
        if let Some(t) = r["target_text"].as_str() {
            outln!("     was [{}] {}", s("target_status"), t)?;
        }
        outln!("     why: {}", s("rationale"))?;
        for src in r["sources"].as_array().into_iter().flatten() {
            outln!(
                "     source {} | {} | {}: {}",
                src["ref"].as_str().unwrap_or(""),
                src["timestamp"].as_str().unwrap_or(""),
                src["speaker"].as_str().unwrap_or(""),
                src["text"].as_str().unwrap_or("")
            )?;
        }
    }
    Ok(())
}
