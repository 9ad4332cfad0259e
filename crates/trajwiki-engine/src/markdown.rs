//! Markdown export: a namespace's memory as a folder of markdown files with relative links, so
//! that an agent with file tools, or a person, can browse it offline and follow every path down
//! to the evidence.
//!
//! The dialogue memory ([`wiki`]): `index.md`; `pages/<page>.md` (a wiki page, its linked
//! trajectories and its stored text); `trajectories/<trajectory>.md` (the current claims, then
//! the timeline: each snapshot with the claim edits made while integrating it, each claim and
//! edit with its source messages); `sources/session-<n>.md` (a session's messages, each with an
//! anchor named by its id, and the snapshots that cite it).
//!
//! The run memory ([`runs`]): `index.md`; `insights/<insight>.md` → `compilations/<compilation>.md`
//! → `runs/<run>.md` (every step, each with an anchor `step-<n>`), the cited steps linked.
//!
//! Every text that came from outside (messages, speakers, runs, and the summaries and pages made
//! from them) is escaped, so that it reads as text and never as markup: no link, image or HTML
//! in a message becomes one in the export. The files are in a fixed order and content: the same
//! memory gives the same folder.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use trajwiki_core::{
    Claim, ClaimId, ClaimOp, ClaimStatus, MessageId, Namespace, OpKind, PageKind, SnapshotId,
    SourceMessage, Timestamp, TrajectoryId, WikiPage,
};
use trajwiki_store::{Store, StoreError};
use trajwiki_trace::compile::citations;
use trajwiki_trace::{OutcomeClass, RunEntry};

use crate::trace::TraceError;

/// One file of an export: its path inside the folder (`/`-separated) and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkdownFile {
    /// The path relative to the export folder.
    pub path: String,
    /// The markdown.
    pub text: String,
}

/// A failure while exporting.
#[derive(Debug, thiserror::Error)]
pub enum MarkdownError {
    /// Reading the store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Reading the run memory failed.
    #[error(transparent)]
    Trace(Box<TraceError>),
    /// The namespace holds nothing to export.
    #[error("namespace {namespace} has {what}")]
    Empty {
        /// The namespace.
        namespace: Namespace,
        /// What it lacks, as words.
        what: &'static str,
    },
}

/// The dialogue memory of `ns` as markdown files: the index, one file per current wiki page,
/// per trajectory and per session of source messages.
pub fn wiki(store: &Store, ns: &Namespace) -> Result<Vec<MarkdownFile>, MarkdownError> {
    let messages = store.messages(ns)?;
    if messages.is_empty() {
        return Err(MarkdownError::Empty {
            namespace: ns.clone(),
            what: "no messages",
        });
    }
    let trajectories = store.trajectories(ns)?;
    if trajectories.is_empty() {
        return Err(MarkdownError::Empty {
            namespace: ns.clone(),
            what: "no memory; build it first",
        });
    }
    let snapshots = store.snapshots(ns)?;
    let claims: HashMap<ClaimId, Claim> = store
        .claims(ns)?
        .into_iter()
        .map(|c| (c.id.clone(), c))
        .collect();
    let states = store.claim_states(ns)?;
    let ops = store.claim_ops(ns)?;
    let pages = store.pages(ns)?;
    let wiki = Wiki::new(&messages, &snapshots, &claims, &states, &ops, &pages);

    let mut files = vec![MarkdownFile {
        path: "index.md".into(),
        text: wiki.index(ns, &trajectories),
    }];
    for page in &pages {
        files.push(MarkdownFile {
            path: format!("pages/{}.md", page.id),
            text: wiki.page(page, &trajectories),
        });
    }
    for t in &trajectories {
        files.push(MarkdownFile {
            path: format!("trajectories/{}.md", t.id),
            text: wiki.trajectory(t),
        });
    }
    for (session, members) in &wiki.sessions {
        files.push(MarkdownFile {
            path: format!("sources/{}", session_file(*session)),
            text: wiki.session(*session, members, &trajectories),
        });
    }
    Ok(files)
}

/// The compiled run memory of `ns` as markdown files: the index, one file per insight, per
/// compilation and per run.
pub fn runs(store: &mut Store, ns: &Namespace) -> Result<Vec<MarkdownFile>, MarkdownError> {
    let memory = crate::trace::compiled_run_memory(store, ns, None).map_err(|e| match e {
        TraceError::NoRuns(_) => MarkdownError::Empty {
            namespace: ns.clone(),
            what: "no agent runs",
        },
        TraceError::NotCompiled(_) => MarkdownError::Empty {
            namespace: ns.clone(),
            what: "no compiled runs; run `trajwiki trace compile` first",
        },
        e => MarkdownError::Trace(Box::new(e)),
    })?;
    let entries = memory.entries();
    let mut files = vec![MarkdownFile {
        path: "index.md".into(),
        text: runs_index(ns, entries),
    }];
    for entry in entries {
        files.push(MarkdownFile {
            path: format!("runs/{}.md", entry.run.id),
            text: run_file(entry),
        });
        if let Some(c) = &entry.compilation {
            files.push(MarkdownFile {
                path: format!("compilations/{}.md", c.id),
                text: compilation_file(entry, c),
            });
            for insight in &entry.insights {
                files.push(MarkdownFile {
                    path: format!("insights/{}.md", insight.id),
                    text: insight_file(entry, c, insight),
                });
            }
        }
    }
    Ok(files)
}

/// The records of a dialogue memory, indexed for the files that link them.
struct Wiki<'a> {
    messages: HashMap<&'a MessageId, &'a SourceMessage>,
    /// Messages by session, in position order.
    sessions: BTreeMap<u32, Vec<&'a SourceMessage>>,
    snapshots: HashMap<&'a SnapshotId, &'a trajwiki_core::Snapshot>,
    claims: &'a HashMap<ClaimId, Claim>,
    states: &'a HashMap<ClaimId, ClaimStatus>,
    /// The ops emitted while integrating each snapshot, in seq order.
    ops_of: HashMap<&'a SnapshotId, Vec<&'a ClaimOp>>,
    /// The pages that link each trajectory, in page order.
    pages_of: HashMap<&'a TrajectoryId, Vec<&'a WikiPage>>,
    pages: &'a [WikiPage],
    /// The snapshots citing each message, in trajectory and version order.
    cited_by: HashMap<&'a MessageId, Vec<&'a trajwiki_core::Snapshot>>,
    /// Messages by the ref a page cites them by ("D3:4").
    by_ref: HashMap<String, &'a SourceMessage>,
    /// Pages by title (a page's `[[Title]]` links).
    by_title: HashMap<&'a str, &'a WikiPage>,
}

impl<'a> Wiki<'a> {
    fn new(
        messages: &'a [SourceMessage],
        snapshots: &'a [trajwiki_core::Snapshot],
        claims: &'a HashMap<ClaimId, Claim>,
        states: &'a HashMap<ClaimId, ClaimStatus>,
        ops: &'a [ClaimOp],
        pages: &'a [WikiPage],
    ) -> Self {
        let mut sessions: BTreeMap<u32, Vec<&SourceMessage>> = BTreeMap::new();
        for m in messages {
            sessions.entry(m.session).or_default().push(m);
        }
        let mut ops_of: HashMap<&SnapshotId, Vec<&ClaimOp>> = HashMap::new();
        for op in ops {
            ops_of.entry(&op.snapshot).or_default().push(op);
        }
        let mut pages_of: HashMap<&TrajectoryId, Vec<&WikiPage>> = HashMap::new();
        for p in pages {
            for t in &p.trajectory_ids {
                pages_of.entry(t).or_default().push(p);
            }
        }
        let mut cited_by: HashMap<&MessageId, Vec<&trajwiki_core::Snapshot>> = HashMap::new();
        for s in snapshots {
            for m in &s.source_message_ids {
                cited_by.entry(m).or_default().push(s);
            }
        }
        Wiki {
            messages: messages.iter().map(|m| (&m.id, m)).collect(),
            sessions,
            snapshots: snapshots.iter().map(|s| (&s.id, s)).collect(),
            claims,
            states,
            ops_of,
            pages_of,
            pages,
            cited_by,
            by_ref: messages.iter().map(|m| (message_ref(m), m)).collect(),
            by_title: pages.iter().map(|p| (p.title.as_str(), p)).collect(),
        }
    }

    fn index(&self, ns: &Namespace, trajectories: &[trajwiki_core::Trajectory]) -> String {
        let mut out = String::new();
        let active = self
            .claims
            .keys()
            .filter(|id| self.status(id) == Some(ClaimStatus::Active))
            .count();
        let _ = writeln!(out, "# Memory of {}\n", inline(ns.as_str()));
        let _ = writeln!(
            out,
            "{} messages in {} sessions; {} trajectories of {} snapshots; {} claims ({} active); {} wiki pages.\n",
            self.messages.len(),
            self.sessions.len(),
            trajectories.len(),
            self.snapshots.len(),
            self.claims.len(),
            active,
            self.pages.len()
        );
        let _ = writeln!(out, "## Wiki pages\n");
        // One page per thing: people, pets and places first (the most linked first), then
        // topics, item lists, and the index pages that list every trajectory.
        for (kind, heading) in [
            (PageKind::Entity, "People, pets and places"),
            (PageKind::Topic, "Topics"),
            (PageKind::Inventory, "Items and counts"),
            (PageKind::Index, "Index pages"),
        ] {
            let mut of_kind: Vec<&WikiPage> =
                self.pages.iter().filter(|p| p.kind == kind).collect();
            if of_kind.is_empty() {
                continue;
            }
            if kind != PageKind::Index {
                of_kind.sort_by(|a, b| {
                    b.trajectory_ids
                        .len()
                        .cmp(&a.trajectory_ids.len())
                        .then(a.title.cmp(&b.title))
                });
            }
            let _ = writeln!(out, "### {heading}\n");
            for p in of_kind {
                let _ = writeln!(
                    out,
                    "- [{}](pages/{}.md) — {}",
                    inline(&p.title),
                    p.id,
                    counted(p.trajectory_ids.len(), "trajectory", "trajectories")
                );
            }
            out.push('\n');
        }
        let _ = writeln!(out, "## Trajectories\n");
        for t in trajectories {
            let _ = writeln!(
                out,
                "- [{}](trajectories/{}.md) — {}{}",
                inline(&title(&t.summary)),
                t.id,
                counted(t.snapshot_ids.len(), "snapshot", "snapshots"),
                self.span(&t.snapshot_ids)
            );
        }
        let _ = writeln!(out, "\n## Sources\n");
        for (session, members) in &self.sessions {
            let _ = writeln!(
                out,
                "- [Session {session}](sources/{}) — {}, {}",
                session_file(*session),
                counted(members.len(), "message", "messages"),
                date(&members[0].timestamp)
            );
        }
        out
    }

    fn page(&self, page: &WikiPage, trajectories: &[trajwiki_core::Trajectory]) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "# {}\n", inline(&page.title));
        let _ = writeln!(
            out,
            "{} page `{}`, revision {} · [memory index](../index.md)\n",
            capitalised(page.kind.as_str()),
            page.id,
            page.revision
        );
        out.push_str(&self.body(page));
        out.push('\n');
        list_line(&mut out, "Keywords", &page.keywords);
        list_line(&mut out, "Terms", &page.terms);
        if !page.items.is_empty() {
            let _ = writeln!(out, "\n## Items and counts\n");
            for i in &page.items {
                let _ = writeln!(out, "- {} ×{}", inline(&i.item), i.count);
            }
        }
        let _ = writeln!(out, "\n## Linked trajectories\n");
        let by_id: HashMap<&TrajectoryId, &trajwiki_core::Trajectory> =
            trajectories.iter().map(|t| (&t.id, t)).collect();
        for id in &page.trajectory_ids {
            match by_id.get(id) {
                Some(t) => {
                    let _ = writeln!(
                        out,
                        "- [{}](../trajectories/{id}.md) — {}",
                        inline(&title(&t.summary)),
                        counted(t.snapshot_ids.len(), "snapshot", "snapshots")
                    );
                }
                None => {
                    let _ = writeln!(out, "- `{id}` (not in this memory)");
                }
            }
        }
        out
    }

    /// A page's text as a reader follows it: its sections as headings, every stored text
    /// escaped, each source ref a link to its message, each `[[Title]]` a link to that page.
    /// (Its own title line and linked trajectories are written above.)
    fn body(&self, page: &WikiPage) -> String {
        let mut out = String::new();
        let mut skipping = false;
        for line in page.body.lines().skip_while(|l| l.starts_with("# ")) {
            if let Some(h) = line.strip_prefix("## ") {
                // Items and linked trajectories are listed from the page's fields.
                skipping = h == "Linked trajectories" || h == "Items and counts";
                if !skipping {
                    let _ = writeln!(out, "\n## {}\n", inline(h));
                }
                continue;
            }
            if skipping || line.trim().is_empty() {
                continue;
            }
            if let Some(h) = line.strip_prefix("### ") {
                let _ = writeln!(out, "\n### {}\n", inline(h));
                continue;
            }
            let (lead, text) = match line.strip_prefix("- ") {
                Some(rest) => ("- ", rest),
                None => ("", line),
            };
            let linked = self.linked_line(text);
            let _ = writeln!(out, "{lead}{linked}");
        }
        out
    }

    /// One line of a page's text, escaped, its `(REF)` sources and `[[Title]]` pages linked.
    fn linked_line(&self, text: &str) -> String {
        let mut out = String::new();
        let mut rest = text;
        while !rest.is_empty() {
            let next_ref = rest.find('(');
            let next_page = rest.find("[[");
            let at = match (next_ref, next_page) {
                (Some(a), Some(b)) => a.min(b),
                (Some(a), None) | (None, Some(a)) => a,
                (None, None) => rest.len(),
            };
            out.push_str(&inline(&rest[..at]));
            rest = &rest[at..];
            if rest.is_empty() {
                break;
            }
            if let Some(inner) = rest.strip_prefix("[[") {
                if let Some((title, after)) = inner.split_once("]]") {
                    match self.by_title.get(title) {
                        Some(p) => {
                            let _ = write!(out, "[{}]({}.md)", inline(title), p.id);
                        }
                        None => out.push_str(&inline(title)),
                    }
                    rest = after;
                    continue;
                }
            }
            // "(D3:4)": a link to the message, in its session's file.
            let cited = rest[1..]
                .split_once(')')
                .and_then(|(r, after)| self.by_ref.get(r).map(|m| (r, m, after)));
            match cited {
                Some((r, m, after)) => {
                    let _ = write!(
                        out,
                        "([{}](../sources/{}#{}))",
                        inline(r),
                        session_file(m.session),
                        m.id
                    );
                    rest = after;
                }
                None => {
                    out.push_str(&inline(&rest[..1]));
                    rest = &rest[1..];
                }
            }
        }
        out
    }

    fn trajectory(&self, t: &trajwiki_core::Trajectory) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "# {}\n", inline(&title(&t.summary)));
        let _ = write!(
            out,
            "Trajectory `{}`, {}{}",
            t.id,
            counted(t.snapshot_ids.len(), "snapshot", "snapshots"),
            self.span(&t.snapshot_ids)
        );
        if let Some(c) = &t.continues {
            let _ = write!(out, " · continues [{c}]({c}.md)");
        }
        let _ = writeln!(out, " · [memory index](../index.md)\n");
        list_line(&mut out, "Keywords", &t.signals.keywords);
        list_line(&mut out, "Entities", &t.signals.entities);
        list_line(&mut out, "Terms", &t.signals.terms);
        let facets: Vec<String> = t
            .signals
            .facets
            .iter()
            .map(|f| format!("{} = {}", f.tag, f.value))
            .collect();
        list_line(&mut out, "Facets", &facets);
        let _ = writeln!(out, "\n## Summary\n");
        out.push_str(&fenced(&t.summary));
        if let Some(pages) = self.pages_of.get(&t.id) {
            let _ = writeln!(out, "\n## On the wiki\n");
            for p in pages {
                let _ = writeln!(
                    out,
                    "- [{}](../pages/{}.md) ({})",
                    inline(&p.title),
                    p.id,
                    p.kind.as_str()
                );
            }
        }
        // The claims the trajectory holds, current status first.
        let held: Vec<&Claim> = t
            .snapshot_ids
            .iter()
            .filter_map(|s| self.snapshots.get(s))
            .flat_map(|s| &s.claim_ids)
            .filter_map(|c| self.claims.get(c))
            .collect();
        let _ = writeln!(out, "\n## Claims\n");
        for status in ClaimStatus::ALL {
            for c in held.iter().filter(|c| self.status(&c.id) == Some(status)) {
                let _ = writeln!(
                    out,
                    "- **{}** {} <a id=\"{}\"></a>— sources: {}",
                    status.as_str(),
                    inline(&c.text),
                    c.id,
                    self.sources(&c.source_message_ids)
                );
            }
        }
        let _ = writeln!(out, "\n## Timeline\n");
        for sid in &t.snapshot_ids {
            let Some(s) = self.snapshots.get(sid) else {
                continue;
            };
            let _ = writeln!(
                out,
                "### Version {} · {} <a id=\"{}\"></a>\n",
                s.version,
                stamp(&s.timestamp),
                s.id
            );
            let _ = writeln!(out, "{}\n", inline(&s.summary));
            if !s.context.is_empty() {
                let _ = writeln!(out, "*{}*\n", inline(&s.context));
            }
            let _ = writeln!(out, "Messages: {}\n", self.sources(&s.source_message_ids));
            for op in self.ops_of.get(sid).into_iter().flatten() {
                let _ = writeln!(out, "- {}", self.op_line(op));
            }
            out.push('\n');
        }
        out
    }

    /// One claim edit: what it did, the claims it touched, why and on what evidence.
    fn op_line(&self, op: &ClaimOp) -> String {
        let claim = |id: &ClaimId| match self.claims.get(id) {
            Some(c) => format!("\u{201c}{}\u{201d} (`{id}`)", inline(&c.text)),
            None => format!("`{id}`"),
        };
        let what = match (op.op, &op.target, &op.new_claim) {
            (OpKind::Add, _, Some(new)) => format!("**ADD** {}", claim(new)),
            (OpKind::Revise, Some(old), Some(new)) => {
                format!("**REVISE** {} → {}", claim(old), claim(new))
            }
            (OpKind::Deprecate, Some(old), _) => format!(
                "**DEPRECATE** {} → {}",
                claim(old),
                op.new_status.map_or("", ClaimStatus::as_str)
            ),
            (kind, target, new) => format!(
                "**{}** {}",
                kind.as_str(),
                target
                    .iter()
                    .chain(new)
                    .map(claim)
                    .collect::<Vec<_>>()
                    .join(" → ")
            ),
        };
        let mut line = format!("#{} {what}", op.seq);
        if !op.rationale.is_empty() {
            let _ = write!(line, " — why: {}", inline(&op.rationale));
        }
        if !op.source_message_ids.is_empty() {
            let _ = write!(line, " — sources: {}", self.sources(&op.source_message_ids));
        }
        line
    }

    fn session(
        &self,
        session: u32,
        members: &[&SourceMessage],
        trajectories: &[trajwiki_core::Trajectory],
    ) -> String {
        let summary_of: HashMap<&TrajectoryId, &str> = trajectories
            .iter()
            .map(|t| (&t.id, t.summary.as_str()))
            .collect();
        let mut out = String::new();
        let _ = writeln!(out, "# Session {session}\n");
        let _ = writeln!(
            out,
            "{}, {} · [memory index](../index.md)\n",
            counted(members.len(), "message", "messages"),
            date(&members[0].timestamp)
        );
        for m in members {
            let _ = write!(
                out,
                "<a id=\"{}\"></a>**{}** · {} · **{}:** {}",
                m.id,
                inline(&message_ref(m)),
                stamp(&m.timestamp),
                inline(&m.speaker),
                inline(&m.text)
            );
            for a in &m.attachments {
                let what = a.caption.as_deref().unwrap_or("");
                let _ = write!(out, "\\\n\\[{}: {}\\]", inline(&a.kind), inline(what));
            }
            if let Some(citing) = self.cited_by.get(&m.id) {
                let links: Vec<String> = citing
                    .iter()
                    .map(|s| {
                        let summary = summary_of.get(&s.trajectory).copied().unwrap_or("");
                        format!(
                            "[{} v{}](../trajectories/{}.md#{})",
                            inline(&title(summary)),
                            s.version,
                            s.trajectory,
                            s.id
                        )
                    })
                    .collect();
                let _ = write!(out, "\\\ncited by {}", links.join(", "));
            }
            out.push_str("\n\n");
        }
        out
    }

    fn status(&self, id: &ClaimId) -> Option<ClaimStatus> {
        self.states
            .get(id)
            .copied()
            .or_else(|| self.claims.get(id).map(|c| c.status))
    }

    /// Links to messages in their session files, from a trajectory's folder.
    fn sources(&self, ids: &[MessageId]) -> String {
        let links: Vec<String> = ids
            .iter()
            .map(|id| match self.messages.get(id) {
                Some(m) => format!(
                    "[{}](../sources/{}#{id})",
                    inline(&message_ref(m)),
                    session_file(m.session)
                ),
                None => format!("`{id}` (not in this memory)"),
            })
            .collect();
        links.join(", ")
    }

    /// `, <first date> to <last date>` of some snapshots (nothing when none is known).
    fn span(&self, ids: &[SnapshotId]) -> String {
        let times: Vec<&Timestamp> = ids
            .iter()
            .filter_map(|s| self.snapshots.get(s).map(|s| &s.timestamp))
            .collect();
        match (times.iter().min(), times.iter().max()) {
            (Some(a), Some(b)) if date(a) == date(b) => format!(", {}", date(a)),
            (Some(a), Some(b)) => format!(", {} to {}", date(a), date(b)),
            _ => String::new(),
        }
    }
}

fn runs_index(ns: &Namespace, entries: &[RunEntry]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Run memory of {}\n", inline(ns.as_str()));
    let compiled = entries.iter().filter(|e| e.compilation.is_some()).count();
    let insights: usize = entries.iter().map(|e| e.insights.len()).sum();
    let _ = writeln!(
        out,
        "{} runs, {compiled} compiled, {insights} insights.\n",
        entries.len()
    );
    let _ = writeln!(out, "## Insights\n");
    for e in entries {
        for i in &e.insights {
            let _ = writeln!(
                out,
                "- [{}](insights/{}.md) — from a run that ended in {}",
                inline(&i.guideline),
                i.id,
                e.outcome()
            );
        }
    }
    let _ = writeln!(out, "\n## Runs\n");
    for e in entries {
        let compiled = match &e.compilation {
            Some(c) => format!(" · [compilation](compilations/{}.md)", c.id),
            None => " · not compiled".into(),
        };
        let _ = writeln!(
            out,
            "- [{}](runs/{}.md) — {}, {}{compiled}",
            inline(&e.run.task),
            e.run.id,
            e.outcome(),
            counted(e.run.steps.len(), "step", "steps")
        );
    }
    out
}

fn run_file(e: &RunEntry) -> String {
    let run = &e.run;
    let mut out = String::new();
    let _ = writeln!(out, "# Run {}\n", inline(&run.external_ref));
    let _ = writeln!(
        out,
        "Run `{}` · {} · {} · [run memory index](../index.md)\n",
        run.id,
        outcome(e.outcome()),
        counted(run.steps.len(), "step", "steps")
    );
    let _ = writeln!(out, "**Task:** {}\n", inline(&run.task));
    if let Some(c) = &e.compilation {
        let _ = writeln!(
            out,
            "Compiled by {}: [diagnosis](../compilations/{}.md)\n",
            inline(&c.compiler),
            c.id
        );
        for i in &e.insights {
            let _ = writeln!(
                out,
                "- insight: [{}](../insights/{}.md)",
                inline(&i.guideline),
                i.id
            );
        }
        out.push('\n');
    }
    if !run.metadata.is_empty() {
        let _ = writeln!(out, "## Recorded with the run\n");
        let json = serde_json::to_string_pretty(&run.metadata).expect("JSON values serialize");
        out.push_str(&fenced(&json));
        out.push('\n');
    }
    let _ = writeln!(out, "## Steps\n");
    for (i, step) in run.steps.iter().enumerate() {
        let _ = writeln!(out, "### Step {} <a id=\"step-{}\"></a>\n", i + 1, i + 1);
        let _ = writeln!(out, "Action:\n");
        out.push_str(&fenced(&step.action));
        let _ = writeln!(out, "\nObservation:\n");
        out.push_str(&fenced(&step.observation));
        out.push('\n');
    }
    out
}

fn compilation_file(e: &RunEntry, c: &trajwiki_core::Compilation) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Diagnosis of run {}\n", inline(&e.run.external_ref));
    let _ = writeln!(
        out,
        "Compilation `{}` by {} of [run {}](../runs/{}.md) ({}) · [run memory index](../index.md)\n",
        c.id,
        inline(&c.compiler),
        inline(&e.run.external_ref),
        e.run.id,
        outcome(e.outcome())
    );
    out.push_str(&paragraphs(&c.diagnosis));
    cited_steps(&mut out, e, &c.diagnosis);
    if !e.insights.is_empty() {
        let _ = writeln!(out, "\n## Insights\n");
        for i in &e.insights {
            let _ = writeln!(out, "- [{}](../insights/{}.md)", inline(&i.guideline), i.id);
        }
    }
    out
}

fn insight_file(
    e: &RunEntry,
    c: &trajwiki_core::Compilation,
    i: &trajwiki_core::Insight,
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Insight `{}`\n", i.id);
    let _ = writeln!(out, "**Guideline:** {}\n", inline(&i.guideline));
    if !i.applies_when.is_empty() {
        let _ = writeln!(out, "**Applies when:** {}\n", inline(&i.applies_when));
    }
    let _ = writeln!(
        out,
        "From [the diagnosis](../compilations/{}.md) of [run {}](../runs/{}.md), which ended in {} · [run memory index](../index.md)",
        c.id,
        inline(&e.run.external_ref),
        e.run.id,
        outcome(e.outcome())
    );
    cited_steps(&mut out, e, &i.guideline);
    out
}

/// The steps `text` cites (`[step N]`), each linked to its anchor in the run's file, with its
/// action; citations past the run's end are named as such.
fn cited_steps(out: &mut String, e: &RunEntry, text: &str) {
    let mut cited = citations(text);
    cited.sort_unstable();
    cited.dedup();
    if cited.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n## Cited steps\n");
    for p in cited {
        match p.checked_sub(1).and_then(|i| e.run.steps.get(i)) {
            Some(step) => {
                let _ = writeln!(
                    out,
                    "- [step {p}](../runs/{}.md#step-{p}): {}",
                    e.run.id,
                    inline(&step.action)
                );
            }
            None => {
                let _ = writeln!(out, "- step {p}: the run has {} steps", e.run.steps.len());
            }
        }
    }
}

fn outcome(o: OutcomeClass) -> String {
    format!("outcome: {o}")
}

/// A trajectory's title: the first line of its summary, at most 100 characters.
fn title(summary: &str) -> String {
    let first = summary.lines().next().unwrap_or("").trim();
    match first.char_indices().nth(100) {
        Some((at, _)) => format!("{}…", &first[..at]),
        None => first.to_string(),
    }
}

/// `1 snapshot`, `2 snapshots`.
fn counted(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The file of a session's messages, inside `sources/`.
fn session_file(session: u32) -> String {
    format!("session-{session}.md")
}

/// A message's reference as the source gave it, else its session and position.
fn message_ref(m: &SourceMessage) -> String {
    m.external_ref
        .clone()
        .unwrap_or_else(|| format!("{}:{}", m.session, m.seq))
}

fn date(t: &Timestamp) -> String {
    t.format("%Y-%m-%d").to_string()
}

fn stamp(t: &Timestamp) -> String {
    t.format("%Y-%m-%d %H:%M").to_string()
}

fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// `**Label:** a, b, c` and a blank line, when there is anything to list.
fn list_line(out: &mut String, label: &str, values: &[String]) {
    if values.is_empty() {
        return;
    }
    let values: Vec<String> = values.iter().map(|v| inline(v).into_owned()).collect();
    let _ = writeln!(out, "**{label}:** {}\n", values.join(", "));
}

/// A character that does not belong in a text file shown to people: what a terminal acts on
/// ([`crate::safe::hazardous`]) but newline and tab.
fn hazardous(c: char) -> bool {
    c != '\n' && c != '\t' && crate::safe::hazardous(c)
}

/// Outside text inside a line of markdown: on one line, every character that markdown reads as
/// markup (emphasis, code, links and images, HTML, entity references, tables, strikethrough)
/// escaped with a backslash, and hazardous characters written as `\u{..}`. It never starts a
/// line, so line-start markup (headings, lists, quotes) cannot arise; `!` needs no escape, the
/// `[` of an image being escaped, nor `&` unless it could start an entity reference.
pub fn inline(s: &str) -> std::borrow::Cow<'_, str> {
    let special = |c: char| {
        matches!(
            c,
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '~' | '&' | '\n' | '\r' | '\t'
        ) || hazardous(c)
    };
    if !s.chars().any(special) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' | '\r' | '\t' => out.push(' '),
            c if hazardous(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            '&' if !chars
                .peek()
                .is_some_and(|n| n.is_ascii_alphanumeric() || *n == '#') =>
            {
                out.push('&')
            }
            c if special(c) => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Outside text of several lines as paragraphs: each line escaped as [`inline`] does, with a
/// backslash before what would make it a heading, list item, quote or rule at its start.
fn paragraphs(s: &str) -> String {
    let mut out = String::new();
    for line in s.lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let escaped = inline(line);
        let lead_digits = escaped.chars().take_while(char::is_ascii_digit).count();
        let starts_markup = escaped.starts_with(['#', '-', '+', '=', '>'])
            || (lead_digits > 0 && escaped[lead_digits..].starts_with(['.', ')']));
        if starts_markup {
            let at = if lead_digits > 0 { lead_digits } else { 0 };
            let _ = writeln!(out, "{}\\{}\n", &escaped[..at], &escaped[at..]);
        } else {
            let _ = writeln!(out, "{escaped}\n");
        }
    }
    out
}

/// Text shown verbatim in a fenced block, with a fence longer than any run of backticks in it,
/// so that nothing in the text can close the block; hazardous characters escaped.
fn fenced(s: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in s.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat((longest + 1).max(3));
    let mut body = String::with_capacity(s.len());
    for c in s.chars() {
        if hazardous(c) && c != '\r' {
            let _ = write!(body, "\\u{{{:x}}}", c as u32);
        } else if c != '\r' {
            body.push(c);
        }
    }
    let end = if body.ends_with('\n') { "" } else { "\n" };
    format!("{fence}text\n{body}{end}{fence}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_text_cannot_become_markup() {
        let hostile = "see [x](javascript:alert(1)) ![img](http://e/x.png) <script>alert(1)</script> *b* `c` &amp; &#60; a|b\nnext";
        assert_eq!(
            inline(hostile),
            "see \\[x\\](javascript:alert(1)) !\\[img\\](http://e/x.png) \\<script\\>alert(1)\\</script\\> \\*b\\* \\`c\\` \\&amp; \\&#60; a\\|b next"
        );
        assert_eq!(inline("plain text, 3.5 (ok)"), "plain text, 3.5 (ok)");
        assert_eq!(inline("Hi! Tom & Maya"), "Hi! Tom & Maya");
        assert_eq!(inline("a\u{1b}[2Jb"), "a\\u{1b}\\[2Jb");
    }

    #[test]
    fn paragraphs_escape_line_starts() {
        let out = paragraphs("# not a heading\n- not a list\n1. not numbered\nplain");
        assert_eq!(
            out,
            "\\# not a heading\n\n\\- not a list\n\n1\\. not numbered\n\nplain\n\n"
        );
    }

    #[test]
    fn a_fence_outlasts_the_backticks_inside() {
        let out = fenced("a ```` b");
        assert!(out.starts_with("`````text\n"), "{out}");
        assert!(out.ends_with("\n`````\n"), "{out}");
        assert_eq!(fenced("x\n"), "```text\nx\n```\n");
    }
}
