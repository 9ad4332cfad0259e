//! `trajwiki stats`, `show` and `check`.

use trajwiki::api::{get, get_in, Record};
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
    let store = args.store.open()?;
    let stats = store.stats()?;
    let mut per_ns = Vec::new();
    for ns in store.namespaces()? {
        let (messages, runs) = store.namespace_counts(&ns)?;
        per_ns.push((ns, messages, runs));
    }
    if args.json {
        let namespaces: Vec<_> = per_ns
            .iter()
            .map(|(ns, m, r)| serde_json::json!({"namespace": ns, "messages": m, "runs": r}))
            .collect();
        let mut value = serde_json::to_value(&stats)?;
        value["store"] = serde_json::json!(store.dir());
        value["per_namespace"] = serde_json::json!(namespaces);
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
            store.dir().display(),
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
        for (ns, m, r) in per_ns {
            outln!("  - {ns}: {m} messages, {r} runs")?;
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
    let store = args.store.open()?;
    let id = args.id.as_str();
    match (IdKind::of(id), &args.namespace) {
        (Ok(_), _) => {}
        (Err(_), Some(ns)) => {
            let ns = Namespace::new(ns.as_str())?;
            let msg = store
                .message_by_ref(&ns, id)?
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
    let record = match &args.namespace {
        Some(ns) => get_in(&store, &Namespace::new(ns.as_str())?, id)?,
        None => get(&store, id)?,
    };
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
    outln!("{}", trajwiki::render::record(&store, &record)?.trim_end())?;
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
    let store = args.store.open()?;
    let report = store.check()?;
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
