//! Records as text: what `trajwiki show` and the `trace` commands print and what the MCP
//! server's tools answer with. Every one-line field of stored text is escaped with
//! [`line`](fn@line); the caller prints or sends the whole through [`crate::safe::block`]. Each text names
//! the ids of the records it mentions, so that a reader (a person or an agent) can open them next.

use std::fmt::Write as _;

use trajwiki_core::{
    ClaimStatus, Namespace, SourceMessage, Timestamp, Trajectory, WikiPage, TIMESTAMP_FORMAT,
};
use trajwiki_store::{Store, StoreError};
use trajwiki_trace::{GrepHit, OpenedInsight, RunEntry};

use crate::api::{History, Record};
use crate::safe::line;

/// Pushes one line.
macro_rules! put {
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

/// A record as `trajwiki show` prints it, with the records it points to (a snapshot's claims and
/// sources, a trajectory's snapshots, a compilation's insights) read from `store`.
pub fn record(store: &Store, record: &Record) -> Result<String, StoreError> {
    let mut out = String::new();
    match record {
        Record::Message(m) => out.push_str(&message(m)),
        Record::Run(run) => {
            put!(
                out,
                "run {} [{}] in {}",
                run.id,
                line(&run.external_ref),
                run.namespace
            );
            put!(out, "task: {}", line(&run.task));
            let outcome = match (run.outcome.success, run.outcome.reward) {
                (Some(s), Some(r)) => {
                    format!("{} (reward {r})", if s { "success" } else { "failure" })
                }
                (Some(s), None) => (if s { "success" } else { "failure" }).to_string(),
                (None, Some(r)) => format!("reward {r}"),
                (None, None) => "unknown".to_string(),
            };
            put!(out, "outcome: {outcome}");
            for (k, v) in &run.metadata {
                let v = match v {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                put!(out, "{}: {}", line(k), first_line(&v, 100));
            }
            put!(out, "steps ({}):", run.steps.len());
            for (i, s) in run.steps.iter().enumerate() {
                put!(out, "  {:>3}. > {}", i + 1, first_line(&s.action, 160));
                put!(out, "       < {}", first_line(&s.observation, 160));
            }
        }
        Record::Snapshot(s) => {
            put!(
                out,
                "snapshot {} (v{} of {}) at {}",
                s.id,
                s.version,
                s.trajectory,
                s.timestamp.format(TIMESTAMP_FORMAT)
            );
            put!(
                out,
                "summary: {}\ncontext: {}\nkeywords: {}",
                line(&s.summary),
                line(&s.context),
                line(&s.keywords.join(", "))
            );
            for c in &s.claim_ids {
                if let Some(claim) = store.claim(c)? {
                    let status = store.claim_status(c)?.unwrap_or(claim.status);
                    put!(
                        out,
                        "  claim {} [{}] {}",
                        c,
                        status.as_str(),
                        line(&claim.text)
                    );
                }
            }
            for m in &s.source_message_ids {
                if let Some(msg) = store.message(m)? {
                    put!(out, "  source {}", message_line(&msg));
                }
            }
        }
        Record::Claim { claim: c, status } => {
            put!(
                out,
                "claim {} [{}] in snapshot {}",
                c.id,
                status.as_str(),
                c.snapshot
            );
            put!(out, "text: {}\nquote: {:?}", line(&c.text), c.quote);
            if let Some(prev) = &c.revised_from {
                put!(out, "revises: {prev}");
            }
            for m in &c.source_message_ids {
                if let Some(msg) = store.message(m)? {
                    put!(out, "  source {}", message_line(&msg));
                }
            }
        }
        Record::Op(op) => {
            let text = serde_json::to_string_pretty(op)
                .unwrap_or_else(|e| format!("op {} cannot be shown: {e}", op.id));
            put!(out, "{text}");
        }
        Record::Trajectory(t) => {
            put!(
                out,
                "trajectory {} in {} ({} snapshots)",
                t.id,
                t.namespace,
                t.snapshot_ids.len()
            );
            if let Some(prev) = &t.continues {
                put!(out, "continues: {prev}");
            }
            for l in t.summary.lines() {
                put!(out, "{}", line(l));
            }
            put!(out, "snapshots:");
            for s in &t.snapshot_ids {
                if let Some(s) = store.snapshot(s)? {
                    put!(
                        out,
                        "  v{} {} {} {}",
                        s.version,
                        s.id,
                        s.timestamp.format(TIMESTAMP_FORMAT),
                        line(&s.summary)
                    );
                }
            }
        }
        Record::Page(p) => {
            put!(
                out,
                "# {} ({} page {}, revision {})\n",
                line(&p.title),
                p.kind.as_str(),
                p.id,
                p.revision
            );
            put!(out, "{}", p.body);
        }
        Record::Compilation {
            compilation: c,
            insights,
        } => {
            put!(
                out,
                "compilation {} of run {} ({})\n{}",
                c.id,
                c.run,
                c.compiler,
                c.diagnosis
            );
            for i in insights {
                put!(
                    out,
                    "  insight {}: {} (when {})",
                    i.id,
                    line(&i.guideline),
                    line(&i.applies_when)
                );
            }
        }
        Record::Insight(i) => {
            put!(
                out,
                "insight {}\n{}\napplies when: {}\ncompilation: {}\nrun: {}",
                i.id,
                line(&i.guideline),
                line(&i.applies_when),
                i.compilation,
                i.run
            );
        }
    }
    Ok(out)
}

/// A message: where it sits (namespace, session, position), its line and its attachments.
pub fn message(m: &SourceMessage) -> String {
    let mut out = String::new();
    put!(
        out,
        "message {} in {} (session {}, #{})",
        m.id,
        m.namespace,
        m.session,
        m.seq
    );
    put!(out, "{}", message_line(m));
    for a in &m.attachments {
        put!(
            out,
            "  [{}] {}{}",
            line(&a.kind),
            line(a.caption.as_deref().unwrap_or("")),
            a.url
                .as_deref()
                .map(|u| format!(" <{}>", line(u)))
                .unwrap_or_default()
        );
    }
    out
}

/// A message on one line: its ref (else its id), time, speaker and text.
pub fn message_line(m: &SourceMessage) -> String {
    format!(
        "{} | {} | {}: {}",
        line(m.external_ref.as_deref().unwrap_or(m.id.as_str())),
        m.timestamp.format("%-d %B %Y %H:%M"),
        line(&m.speaker),
        line(&m.text)
    )
}

/// The lines naming a run, its outcome and length, then its task.
pub fn run_header(entry: &RunEntry) -> String {
    let run = &entry.run;
    let mut out = String::new();
    put!(
        out,
        "run {} [{}] in {}: {} — {} steps",
        run.id,
        line(&run.external_ref),
        run.namespace,
        entry.outcome(),
        run.steps.len()
    );
    put!(out, "task: {}", line(&run.task));
    out
}

/// A run's steps (only those numbered in `only`, 1-based, when given): each action, then its
/// observation's non-empty lines.
pub fn steps(entry: &RunEntry, only: Option<&[usize]>) -> String {
    let mut out = String::new();
    for (i, s) in entry.run.steps.iter().enumerate() {
        if only.is_some_and(|o| !o.contains(&(i + 1))) {
            continue;
        }
        put!(out, "[step {}] > {}", i + 1, line(&s.action));
        for l in s.observation.lines().filter(|l| !l.trim().is_empty()) {
            put!(out, "           {}", line(l.trim_end()));
        }
    }
    out
}

/// An insight opened down to its evidence: the guideline, its compilation's diagnosis, its run
/// and the steps it cites.
pub fn opened_insight(opened: &OpenedInsight<'_>) -> String {
    let mut out = String::new();
    put!(
        out,
        "insight {} (compilation {})",
        opened.insight.id,
        opened.compilation.id
    );
    put!(out, "guideline: {}", line(&opened.insight.guideline));
    put!(out, "applies when: {}", line(&opened.insight.applies_when));
    out.push_str(&run_header(opened.entry));
    put!(
        out,
        "diagnosis ({}): {}",
        opened.compilation.compiler,
        line(&opened.compilation.diagnosis)
    );
    put!(out, "cited steps:");
    out.push_str(&steps(opened.entry, Some(&opened.cited_steps)));
    out
}

/// A run with its diagnosis, its insights and every step.
pub fn run(entry: &RunEntry) -> String {
    let mut out = run_header(entry);
    if let Some(c) = &entry.compilation {
        put!(out, "diagnosis ({}): {}", c.compiler, line(&c.diagnosis));
    }
    for (i, ins) in entry.insights.iter().enumerate() {
        put!(
            out,
            "insight {} {}: {}",
            i + 1,
            ins.id,
            line(&ins.guideline)
        );
    }
    out.push_str(&steps(entry, None));
    out
}

/// Exact-search hits in runs, one line each: the run, where (task or step and field), the
/// excerpt.
pub fn grep_hits(hits: &[GrepHit]) -> String {
    let mut out = String::new();
    for h in hits {
        let at = match h.step {
            0 => "task".to_string(),
            s => format!("[step {s}] {}", h.field),
        };
        put!(out, "{} {at}: {}", h.run, line(&h.excerpt));
    }
    out
}

/// The claim timeline of `id` (a trajectory or a claim), as of `as_of` when given: each op
/// with its claim, the status it leads to, what it replaced, why, and its source messages.
pub fn history(id: &str, history: &History, as_of: Option<Timestamp>) -> String {
    let mut out = String::new();
    put!(
        out,
        "history of {} in {} ({} ops{})",
        line(id),
        history.namespace,
        history.entries.len(),
        as_of
            .map(|t| format!(", as of {}", t.format(TIMESTAMP_FORMAT)))
            .unwrap_or_default()
    );
    let status = |s: Option<ClaimStatus>| s.map_or("", ClaimStatus::as_str);
    for e in &history.entries {
        put!(
            out,
            "#{} {} {} {} [{}] {}",
            e.seq,
            e.at.as_deref().unwrap_or(""),
            e.op,
            e.claim,
            status(e.status),
            line(e.text.as_deref().unwrap_or(""))
        );
        if let (Some(target), Some(t)) = (&e.target, &e.target_text) {
            put!(
                out,
                "     was {target} [{}] {}",
                status(e.target_status),
                line(t)
            );
        }
        put!(out, "     why: {}", line(&e.rationale));
        for src in &e.sources {
            put!(
                out,
                "     source {} | {} | {}: {}",
                line(&src.source_ref),
                src.timestamp,
                line(&src.speaker),
                line(&src.text)
            );
        }
    }
    out
}

/// `s` on one line (whitespace runs made one space), cut after `max` characters.
pub fn first_line(s: &str, max: usize) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let flat = line(&flat).into_owned();
    match flat.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &flat[..i]),
        None => flat,
    }
}

/// The trajectories `page` organises, a line each (id and summary), after the page's text
/// (what the MCP server's `open_page` adds to [`record`]).
pub fn page_members(store: &Store, page: &WikiPage) -> Result<String, StoreError> {
    let mut out = String::new();
    put!(
        out,
        "\ntrajectories on this page ({}):",
        page.trajectory_ids.len()
    );
    for t in &page.trajectory_ids {
        if let Some(t) = store.trajectory(t)? {
            put!(out, "  {} {}", t.id, first_line(&t.summary, 160));
        }
    }
    Ok(out)
}

/// Each snapshot of `trajectory` in order, with its claims (their status now) and their source
/// messages (what the MCP server's `open_trajectory` adds to [`record`]).
pub fn trajectory_claims(store: &Store, trajectory: &Trajectory) -> Result<String, StoreError> {
    let mut out = String::new();
    for s in &trajectory.snapshot_ids {
        let Some(s) = store.snapshot(s)? else {
            continue;
        };
        put!(out, "\nsnapshot {} (v{}):", s.id, s.version);
        for c in &s.claim_ids {
            let Some(claim) = store.claim(c)? else {
                continue;
            };
            let status = store.claim_status(c)?.unwrap_or(claim.status);
            put!(
                out,
                "  claim {} [{}] {}",
                c,
                status.as_str(),
                first_line(&claim.text, 300)
            );
            let sources: Vec<String> = claim
                .source_message_ids
                .iter()
                .map(|m| m.to_string())
                .collect();
            if !sources.is_empty() {
                put!(out, "    sources: {}", sources.join(", "));
            }
        }
    }
    Ok(out)
}

/// Message `message` of `ns` as [`message`] shows it, then the messages around it in its
/// session (two before, two after), a line each, its own marked (what the MCP server's
/// `open_source` answers).
pub fn message_in_session(
    store: &Store,
    ns: &Namespace,
    message: &SourceMessage,
) -> Result<String, StoreError> {
    let mut out = self::message(message);
    let session = store.session_messages(ns, message.session)?;
    if let Some(at) = session.iter().position(|m| m.id == message.id) {
        let around = &session[at.saturating_sub(2)..(at + 3).min(session.len())];
        put!(out, "\naround it in session {}:", message.session);
        for m in around {
            let mark = if m.id == message.id { ">" } else { " " };
            put!(out, "{mark} {} {}", m.id, message_line(m));
        }
    }
    Ok(out)
}
