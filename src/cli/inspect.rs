//! `trajwiki stats`, `show` and `check`.

use trajwiki::api::{get, get_in, ApiError, Record};
use trajwiki_core::{IdKind, Namespace, SourceMessage};

use super::{Global, StoreArg, UsageError};
use trajwiki::safe::line;

#[derive(Debug, clap::Args)]
pub(crate) struct StatsArgs {
    #[command(flatten)]
    store: StoreArg,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) fn stats(args: &StatsArgs, global: Global) -> anyhow::Result<()> {
    let engine = args.store.engine()?;
    let (stats, per_ns) = engine
        .with_store(|store| Ok::<_, ApiError>((engine.stats(store)?, engine.namespaces(store)?)))?;
    if args.json {
        let mut value = serde_json::to_value(&stats)?;
        value["store"] = serde_json::json!(engine.dir());
        value["per_namespace"] = serde_json::json!(per_ns);
        let backend = super::device::scoring(global.device)?;
        value["compute"] = serde_json::json!({
            "device": global.device.to_string(),
            "scoring_backend": backend.name(),
            "built_with_cuda": trajwiki::cuda::BUILT_WITH_CUDA,
        });
        outjson!(serde_json::to_string_pretty(&value)?)?;
    } else {
        outln!(
            "store {} (schema v{})",
            engine.dir().display(),
            stats.schema_version
        )?;
        let rows = [
            ("namespaces", stats.namespaces),
            ("messages", stats.messages),
            ("runs", stats.runs),
            ("snapshots", stats.snapshots),
            ("claims", stats.claims),
            ("claim ops", stats.claim_ops),
            ("trajectories", stats.trajectories),
            ("wiki pages", stats.pages),
            ("page revisions", stats.page_revisions),
            ("page chunks", stats.page_chunks),
            ("compilations", stats.compilations),
            ("insights", stats.insights),
            ("cached embeddings", stats.embeddings),
            ("ingest batches", stats.ingest_batches),
        ];
        for (name, n) in rows {
            outln!("  {name:<18} {n:>8}")?;
        }
        for l in per_ns {
            outln!(
                "  - {}: {} messages, {} runs",
                l.namespace,
                l.messages,
                l.runs
            )?;
        }
    }
    Ok(())
}

#[derive(Debug, clap::Args)]
pub(crate) struct ShowArgs {
    #[command(flatten)]
    store: StoreArg,
    /// A record id (msg_…, run_…, snp_…, clm_…, op_…, trj_…, pg_…, cmp_…, ins_…), or an external
    /// ref such as `D3:12` together with --namespace.
    id: String,
    /// Namespace: a message is looked up by its external ref there, and a record id is found
    /// only when the record belongs to it.
    #[arg(long)]
    namespace: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) fn show(args: &ShowArgs) -> anyhow::Result<()> {
    let engine = args.store.engine()?;
    let id = args.id.as_str();
    match (IdKind::of(id), &args.namespace) {
        (Ok(_), _) => {}
        (Err(_), Some(ns)) => {
            let ns = Namespace::new(ns.as_str())?;
            let msg = engine
                .with_store(|store| engine.namespace(&ns).message_by_ref(store, id))?
                .ok_or_else(|| UsageError(format!("no message with ref {id} in namespace {ns}")))?;
            return print_message(&msg, args.json);
        }
        (Err(e), None) => return Err(e.into()),
    }
    let json = |v: serde_json::Value| -> anyhow::Result<()> {
        outjson!(serde_json::to_string_pretty(&v)?)?;
        Ok(())
    };
    // With --namespace, ids resolve inside it only.
    let ns = args.namespace.as_deref().map(Namespace::new).transpose()?;
    let record = engine.with_store(|store| match &ns {
        Some(ns) => get_in(store, ns, id),
        None => get(store, id),
    })?;
    if args.json {
        if let Record::Message(m) = &record {
            return print_message(m, true);
        }
        return json(record.to_json());
    }
    if let Record::Op(op) = &record {
        // Ops are shown as their JSON, exactly.
        return json(serde_json::to_value(op)?);
    }
    let text = engine.with_store(|store| trajwiki::render::record(store, &record))?;
    outln!("{}", text.trim_end())?;
    Ok(())
}

fn print_message(m: &SourceMessage, json: bool) -> anyhow::Result<()> {
    if json {
        outjson!(serde_json::to_string_pretty(m)?)?;
    } else {
        outln!("{}", trajwiki::render::message(m).trim_end())?;
    }
    Ok(())
}

#[derive(Debug, clap::Args)]
pub(crate) struct CheckArgs {
    #[command(flatten)]
    store: StoreArg,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Integrity problems found by `check` (exit code 1).
#[derive(Debug, thiserror::Error)]
#[error("store check failed: {0} problem(s)")]
struct CheckFailed(usize);

pub(crate) fn check(args: &CheckArgs, global: Global) -> anyhow::Result<()> {
    let engine = args.store.engine()?;
    let report = engine.with_store(|store| engine.check(store))?;
    if args.json {
        outjson!(serde_json::to_string_pretty(&report)?)?;
    } else {
        let examined: Vec<String> = report
            .examined
            .iter()
            .map(|(t, n)| format!("{n} {t}"))
            .collect();
        global.say(format!("examined {}", examined.join(", ")));
        outln!("sqlite integrity: {}", report.sqlite_integrity)?;
        for p in &report.problems {
            outln!(
                "problem [{}] {}: {}",
                p.invariant,
                line(&p.id),
                line(&p.detail)
            )?;
        }
        if report.ok() {
            outln!("ok: every invariant holds")?;
        }
    }
    if report.ok() {
        Ok(())
    } else {
        Err(CheckFailed(report.problems.len().max(1)).into())
    }
}
