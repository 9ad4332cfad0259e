//! `trajwiki stats`, `show` and `check`.

use trajwiki::api::{get, get_in, Record};
use trajwiki_core::{IdKind, Namespace, SourceMessage, TIMESTAMP_FORMAT};
use trajwiki_store::Store;

use super::safe::line;
use super::{Global, StoreArg, UsageError};

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
            "built_with_cuda": trajwiki_cuda::BUILT_WITH_CUDA,
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
            return print_message(&store, &msg, args.json);
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
            return print_message(&store, m, true);
        }
        return json(record.to_json());
    }
    match record {
        Record::Message(msg) => print_message(&store, &msg, false),
        Record::Run(run) => {
            outln!("run {} [{}] in {}", run.id, run.external_ref, run.namespace)?;
            outln!("task: {}", line(&run.task))?;
            let outcome = match (run.outcome.success, run.outcome.reward) {
                (Some(s), Some(r)) => {
                    format!("{} (reward {r})", if s { "success" } else { "failure" })
                }
                (Some(s), None) => (if s { "success" } else { "failure" }).to_string(),
                (None, Some(r)) => format!("reward {r}"),
                (None, None) => "unknown".to_string(),
            };
            outln!("outcome: {outcome}")?;
            for (k, v) in &run.metadata {
                let v = match v {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                outln!("{}: {}", line(k), first_line(&v, 100))?;
            }
            outln!("steps ({}):", run.steps.len())?;
            for (i, s) in run.steps.iter().enumerate() {
                outln!("  {:>3}. > {}", i + 1, first_line(&s.action, 160))?;
                outln!("       < {}", first_line(&s.observation, 160))?;
            }
            Ok(())
        }
        Record::Snapshot(s) => {
            outln!(
                "snapshot {} (v{} of {}) at {}",
                s.id,
                s.version,
                s.trajectory,
                s.timestamp.format(TIMESTAMP_FORMAT)
            )?;
            outln!(
                "summary: {}\ncontext: {}\nkeywords: {}",
                line(&s.summary),
                line(&s.context),
                line(&s.keywords.join(", "))
            )?;
            for c in &s.claim_ids {
                if let Some(claim) = store.claim(c)? {
                    let status = store.claim_status(c)?.unwrap_or(claim.status);
                    outln!("  claim {} [{}] {}", c, status.as_str(), line(&claim.text))?;
                }
            }
            for m in &s.source_message_ids {
                if let Some(msg) = store.message(m)? {
                    outln!("  source {}", message_line(&msg))?;
                }
            }
            Ok(())
        }
        Record::Claim { claim: c, status } => {
            outln!(
                "claim {} [{}] in snapshot {}",
                c.id,
                status.as_str(),
                c.snapshot
            )?;
            outln!("text: {}\nquote: {:?}", line(&c.text), c.quote)?;
            if let Some(prev) = &c.revised_from {
                outln!("revises: {prev}")?;
            }
            for m in &c.source_message_ids {
                if let Some(msg) = store.message(m)? {
                    outln!("  source {}", message_line(&msg))?;
                }
            }
            Ok(())
        }
        Record::Op(op) => json(serde_json::to_value(&op)?),
        Record::Trajectory(t) => {
            outln!(
                "trajectory {} in {} ({} snapshots)",
                t.id,
                t.namespace,
                t.snapshot_ids.len()
            )?;
            if let Some(prev) = &t.continues {
                outln!("continues: {prev}")?;
            }
            outln!("{}", line(&t.summary))?;
            for s in &t.snapshot_ids {
                if let Some(s) = store.snapshot(s)? {
                    outln!(
                        "  v{} {} {}",
                        s.version,
                        s.timestamp.format(TIMESTAMP_FORMAT),
                        line(&s.summary)
                    )?;
                }
            }
            Ok(())
        }
        Record::Page(p) => {
            outln!(
                "# {} ({} page {}, revision {})\n",
                line(&p.title),
                p.kind.as_str(),
                p.id,
                p.revision
            )?;
            outln!("{}", p.body)?;
            Ok(())
        }
        Record::Compilation {
            compilation: c,
            insights,
        } => {
            outln!(
                "compilation {} of run {} ({})\n{}",
                c.id,
                c.run,
                c.compiler,
                c.diagnosis
            )?;
            for i in insights {
                outln!(
                    "  insight {}: {} (when {})",
                    i.id,
                    line(&i.guideline),
                    line(&i.applies_when)
                )?;
            }
            Ok(())
        }
        Record::Insight(i) => {
            outln!(
                "insight {}\n{}\napplies when: {}\ncompilation: {}\nrun: {}",
                i.id,
                line(&i.guideline),
                line(&i.applies_when),
                i.compilation,
                i.run
            )?;
            Ok(())
        }
    }
}

fn first_line(s: &str, max: usize) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &flat[..i]),
        None => flat,
    }
}

fn message_line(m: &SourceMessage) -> String {
    format!(
        "{} | {} | {}: {}",
        line(m.external_ref.as_deref().unwrap_or(m.id.as_str())),
        m.timestamp.format("%-d %B %Y %H:%M"),
        line(&m.speaker),
        line(&m.text)
    )
}

fn print_message(store: &Store, m: &SourceMessage, json: bool) -> anyhow::Result<()> {
    let _ = store;
    if json {
        outjson!(serde_json::to_string_pretty(m)?)?;
        return Ok(());
    }
    outln!(
        "message {} in {} (session {}, #{})",
        m.id,
        m.namespace,
        m.session,
        m.seq
    )?;
    outln!("{}", message_line(m))?;
    for a in &m.attachments {
        outln!(
            "  [{}] {}{}",
            line(&a.kind),
            line(a.caption.as_deref().unwrap_or("")),
            a.url
                .as_deref()
                .map(|u| format!(" <{}>", line(u)))
                .unwrap_or_default()
        )?;
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
