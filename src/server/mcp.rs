//! The memory as MCP tools (the `rmcp` crate), for agents: `trajwiki mcp` serves them on stdio,
//! `trajwiki serve` on streamable HTTP at `/mcp`. Each tool answers with text that names the ids
//! an agent can open next (pages → trajectories → snapshots and claims → source messages;
//! insights → compilations → runs → steps), over the same state as the JSON API: the same
//! kept indexes, the same one writer per namespace.
//!
//! A server started with a namespace serves that one alone (a call naming another finds
//! nothing); a tool's `namespace` may be left out then, or when the store holds a single
//! namespace. Failures come back as tool errors (`isError`) with the JSON API's
//! stable code, so that the agent reads them; stored text is escaped as the CLI prints it.

use std::fmt::Write as _;
use std::sync::Arc;

use crate::retrieve::Mode;
use crate::store::Store;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{Implementation, ServerCapabilities, ServerConfig};
use rmcp::{tool, tool_handler, tool_router, ServerHandler};
use schemars::JsonSchema;
use serde::Deserialize;
use trajwiki_core::{IdKind, Namespace};

use super::{AppState, Code, Failure};
use crate::api::{self, ApiError, Record};
use crate::render::{self, first_line};
use crate::trace::TraceError;
use crate::Engine;

/// How the tools are offered.
#[derive(Debug, Clone, Default)]
pub struct McpOptions {
    /// The one namespace served: a call without one works in it, a call naming another finds
    /// nothing. `None`: every namespace of the store.
    pub namespace: Option<Namespace>,
    /// Whether `add_messages` is offered.
    pub allow_write: bool,
}

/// The tools over one server state.
#[derive(Clone)]
pub(super) struct MemoryTools {
    state: Arc<AppState>,
    options: McpOptions,
    /// The tools offered (without `add_messages` unless writes are allowed).
    tool_router: ToolRouter<Self>,
}

/// A namespace, when the call does not go to the server's own.
#[derive(Debug, Deserialize, JsonSchema)]
struct InNamespace {
    /// The namespace (a user's or an agent's memory). Optional when the server has one.
    #[serde(default)]
    namespace: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct SearchArgs {
    /// What to find in the memory, as a question.
    question: String,
    /// The most whitespace tokens the context may take (default 2700).
    #[serde(default)]
    budget: Option<usize>,
    #[serde(flatten)]
    ns: InNamespace,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct IdArgs {
    /// The record's id, as a previous answer named it.
    id: String,
    #[serde(flatten)]
    ns: InNamespace,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct SourceArgs {
    /// A message id (msg_…) or the ref a context cites it by (such as D1:3).
    id: String,
    #[serde(flatten)]
    ns: InNamespace,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct HistoryArgs {
    /// A trajectory id (trj_…) or a claim id (clm_…).
    id: String,
    /// Only the ops up to this time (2023-05-08T13:56:00 or a date).
    #[serde(default)]
    as_of: Option<String>,
    #[serde(flatten)]
    ns: InNamespace,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct ContextArgs {
    /// The new task, as the agent was given it.
    task: String,
    /// How many similar past runs to show (default 3).
    #[serde(default)]
    similar: Option<usize>,
    /// The most whitespace tokens the context may take.
    #[serde(default)]
    budget: Option<usize>,
    #[serde(flatten)]
    ns: InNamespace,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct GrepArgs {
    /// The exact text to find (case-insensitive) in every run's task, actions and observations.
    pattern: String,
    /// The most hits to return (default 20, at most 1000).
    #[serde(default)]
    limit: Option<usize>,
    #[serde(flatten)]
    ns: InNamespace,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct AddArgs {
    /// The messages, each with `session`, `speaker` and `text` (or `role` and `content`), and
    /// optionally `timestamp`, `ref`, `seq`, `attachments`.
    messages: Vec<serde_json::Value>,
    /// Fold them into the memory now (default true).
    #[serde(default)]
    build: Option<bool>,
    #[serde(flatten)]
    ns: InNamespace,
}

/// Work a tool runs with a store connection, in the namespace it resolved.
type Work = dyn FnOnce(&AppState, &mut Store, Namespace) -> Result<String, Failure> + Send;

impl MemoryTools {
    pub(super) fn new(state: Arc<AppState>, options: McpOptions) -> Self {
        let mut tool_router = Self::tool_router();
        if !options.allow_write {
            tool_router.remove_route("add_messages");
        }
        MemoryTools {
            state,
            options,
            tool_router,
        }
    }

    /// Runs `work` on a blocking thread with a store connection in the call's namespace; its
    /// text, or the failure with its code, comes back escaped.
    async fn run(&self, ns: InNamespace, work: Box<Work>) -> Result<String, String> {
        let default = self.options.namespace.clone();
        self.state
            .with_store(move |state, store| {
                let ns = resolve(&state.engine, store, ns.namespace, default)?;
                work(state, store, ns)
            })
            .await
            .map(|text| crate::safe::block(text.trim_end()).into_owned())
            .map_err(|f| {
                format!(
                    "error {}: {}",
                    f.code,
                    crate::safe::block(&f.message).into_owned()
                )
            })
    }
}

/// The namespace a call works in: the one it names, else the server's, else the store's only
/// one. A server started with a namespace is scoped to it: another is not found, as a
/// namespace without messages is not.
fn resolve(
    engine: &Engine,
    store: &Store,
    named: Option<String>,
    scope: Option<Namespace>,
) -> Result<Namespace, Failure> {
    if let Some(name) = named.filter(|n| !n.is_empty()) {
        let ns = super::namespace(&name)?;
        return match scope {
            Some(scope) if scope != ns => Err(super::unknown_namespace(&ns)),
            _ => Ok(ns),
        };
    }
    if let Some(ns) = scope {
        return Ok(ns);
    }
    let all = engine.namespace_names(store)?;
    match all.as_slice() {
        [only] => Ok(only.clone()),
        [] => Err(Failure::bad_request("the store holds no namespace yet")),
        many => Err(Failure::bad_request(format!(
            "give `namespace`: the store holds {} ({})",
            many.len(),
            many.iter()
                .take(20)
                .map(Namespace::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// Pushes one line.
macro_rules! put {
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

#[tool_router]
impl MemoryTools {
    #[tool(
        description = "List the namespaces of the store (one per user or agent memory) with their message and run counts."
    )]
    async fn list_namespaces(&self) -> Result<String, String> {
        let scope = self.options.namespace.clone();
        self.state
            .with_store(move |state, store| {
                let mut out = String::new();
                let listed = state
                    .engine
                    .namespaces(store)?
                    .into_iter()
                    .filter(|l| scope.as_ref().is_none_or(|scope| *scope == l.namespace));
                for l in listed {
                    put!(
                        out,
                        "{}: {} messages, {} runs",
                        l.namespace,
                        l.messages,
                        l.runs
                    );
                }
                if out.is_empty() {
                    out.push_str("the store holds no namespace yet");
                }
                Ok(out)
            })
            .await
            .map(|text| crate::safe::block(text.trim_end()).into_owned())
            .map_err(|f| format!("error {}: {}", f.code, crate::safe::block(&f.message)))
    }

    #[tool(
        description = "Search the dialogue memory: the context for a question (source messages cited by ref), then the retrieval path (wiki pages, trajectories, snapshots with scores) and each source with its snapshot, trajectory and claims. Follow up with open_source, open_trajectory, open_page or claim_history on the ids given."
    )]
    async fn search_memory(&self, Parameters(a): Parameters<SearchArgs>) -> Result<String, String> {
        let budget = a.budget.unwrap_or_else(super::default_budget);
        let question = a.question;
        self.run(
            a.ns,
            Box::new(move |state, store, ns| {
                if budget == 0 {
                    return Err(Failure::bad_request("`budget`: must be at least 1"));
                }
                let found = state.search(store, &ns, &question, Mode::Full, budget)?;
                Ok(search_text(&ns, &found))
            }),
        )
        .await
    }

    #[tool(
        description = "Open a wiki page (pg_…): its body and the trajectories it organises, with their ids."
    )]
    async fn open_page(&self, Parameters(a): Parameters<IdArgs>) -> Result<String, String> {
        let id = a.id;
        self.run(
            a.ns,
            Box::new(move |_, store, ns| {
                let record = record_of_kind(store, &ns, &id, IdKind::Page)?;
                let mut out = record_text(store, &record)?;
                if let Record::Page(page) = &record {
                    out.push_str(&render::page_members(store, page).map_err(Failure::from_store)?);
                }
                Ok(out)
            }),
        )
        .await
    }

    #[tool(
        description = "Open a trajectory (trj_…): its summary, its snapshots in order, and each snapshot's claims (with their current status: current, revised, deprecated) and source messages. claim_history gives the ADD / REVISE / DEPRECATE timeline."
    )]
    async fn open_trajectory(&self, Parameters(a): Parameters<IdArgs>) -> Result<String, String> {
        let id = a.id;
        self.run(
            a.ns,
            Box::new(move |_, store, ns| {
                let record = record_of_kind(store, &ns, &id, IdKind::Trajectory)?;
                let mut out = record_text(store, &record)?;
                if let Record::Trajectory(t) = &record {
                    out.push_str(
                        &render::trajectory_claims(store, t).map_err(Failure::from_store)?,
                    );
                }
                Ok(out)
            }),
        )
        .await
    }

    #[tool(
        description = "Open a source message by id (msg_…) or by the ref a context cites (such as D1:3): who said what and when, its attachments, and the messages around it in its session."
    )]
    async fn open_source(&self, Parameters(a): Parameters<SourceArgs>) -> Result<String, String> {
        let id = a.id;
        self.run(
            a.ns,
            Box::new(move |state, store, ns| {
                let message = match IdKind::of(&id) {
                    Ok(_) => match api::get_in(store, &ns, &id)? {
                        Record::Message(m) => m,
                        other => {
                            return Err(Failure::bad_request(format!(
                                "{id} is a {}, not a message; open it with its own tool",
                                other.kind().name()
                            )))
                        }
                    },
                    Err(_) => state
                        .engine
                        .namespace(&ns)
                        .message_by_ref(store, &id)?
                        .ok_or_else(|| {
                            Failure::new(
                                axum::http::StatusCode::NOT_FOUND,
                                Code::NotFound,
                                format!("no message with id or ref {id:?} in namespace {ns}"),
                            )
                        })?,
                };
                render::message_in_session(store, &ns, &message).map_err(Failure::from_store)
            }),
        )
        .await
    }

    #[tool(
        description = "The claim timeline of a trajectory (trj_…) or a claim (clm_…): each ADD, REVISE and DEPRECATE with its time, the claim, what it replaced, why, and its source messages. With as_of, only what was known by then."
    )]
    async fn claim_history(
        &self,
        Parameters(a): Parameters<HistoryArgs>,
    ) -> Result<String, String> {
        let (id, as_of) = (a.id, a.as_of);
        self.run(
            a.ns,
            Box::new(move |_, store, ns| {
                let as_of = match &as_of {
                    Some(t) => Some(crate::ingest::jsonl::parse_timestamp(t).ok_or_else(|| {
                        Failure::bad_request(format!(
                            "`as_of` {t:?}: expected a time like 2023-05-08T13:56:00 or a date"
                        ))
                    })?),
                    None => None,
                };
                let history = api::history(store, &id, as_of)?;
                if history.namespace != ns {
                    let kind = IdKind::of(&id).map_err(ApiError::Id)?;
                    return Err(ApiError::NotFound { kind, id }.into());
                }
                Ok(render::history(&id, &history, as_of))
            }),
        )
        .await
    }

    #[tool(
        description = "The first context for a new agent task from the compiled past runs: the insights that apply (guideline, when it applies, the run it came from) and the most similar past runs. open_insight and open_run descend to the evidence."
    )]
    async fn first_context(
        &self,
        Parameters(a): Parameters<ContextArgs>,
    ) -> Result<String, String> {
        let (task, similar, budget) = (a.task, a.similar, a.budget);
        self.run(
            a.ns,
            Box::new(move |state, store, ns| {
                trajwiki_core::limits::QUESTION_BYTES
                    .check(task.len())
                    .map_err(|e| Failure::from(ApiError::Limit(e)))?;
                let defaults = crate::wikitrace::ContextOptions::default();
                let options = crate::wikitrace::ContextOptions {
                    similar_runs: similar.unwrap_or(defaults.similar_runs),
                    budget: budget.or(defaults.budget),
                    exclude: None,
                };
                let found = crate::trace::first_context(
                    store,
                    &ns,
                    state.embedder()?.as_ref(),
                    &task,
                    &options,
                )?;
                // The context names every insight and run by id already.
                let out = found.text;
                Ok(out)
            }),
        )
        .await
    }

    #[tool(
        description = "Open an insight (ins_…) down to its evidence: the guideline, its compilation's diagnosis, its run and the steps it cites."
    )]
    async fn open_insight(&self, Parameters(a): Parameters<IdArgs>) -> Result<String, String> {
        let id = a.id;
        self.run(
            a.ns,
            Box::new(move |_, store, ns| {
                let id = trajwiki_core::InsightId::parse(&id)
                    .map_err(|e| Failure::from(ApiError::Id(e)))?;
                let memory = crate::trace::compiled_run_memory(store, &ns, None)?;
                let opened = memory.open_insight(&id).ok_or(TraceError::Unknown {
                    kind: "insight",
                    id: id.to_string(),
                })?;
                Ok(render::opened_insight(&opened))
            }),
        )
        .await
    }

    #[tool(
        description = "Open a past agent run (run_…): its task and outcome, its diagnosis and insights when compiled, and every step (action, observation)."
    )]
    async fn open_run(&self, Parameters(a): Parameters<IdArgs>) -> Result<String, String> {
        let id = a.id;
        self.run(
            a.ns,
            Box::new(move |_, store, ns| {
                let id =
                    trajwiki_core::RunId::parse(&id).map_err(|e| Failure::from(ApiError::Id(e)))?;
                let memory = crate::trace::compiled_run_memory(store, &ns, None)?;
                let entry = memory.open_run(&id).ok_or(TraceError::NotInNamespace {
                    run: id.clone(),
                    namespace: ns.clone(),
                })?;
                Ok(render::run(entry))
            }),
        )
        .await
    }

    #[tool(
        description = "Exact search of every past run's task, actions and observations: each hit with its run id and step."
    )]
    async fn grep_runs(&self, Parameters(a): Parameters<GrepArgs>) -> Result<String, String> {
        let (pattern, limit) = (a.pattern, a.limit.unwrap_or(20).min(1000));
        self.run(
            a.ns,
            Box::new(move |_, store, ns| {
                if pattern.is_empty() {
                    return Err(Failure::bad_request("`pattern`: must not be empty"));
                }
                let memory = crate::trace::compiled_run_memory(store, &ns, None)?;
                let hits = memory.grep(&pattern, limit);
                if hits.is_empty() {
                    return Ok(format!("no run in {ns} contains {pattern:?}"));
                }
                Ok(render::grep_hits(&hits))
            }),
        )
        .await
    }

    #[tool(
        description = "Append messages to a namespace's memory and fold them in (offered only when the server allows writes). Answers how many were added and what the build made."
    )]
    async fn add_messages(&self, Parameters(a): Parameters<AddArgs>) -> Result<String, String> {
        let (messages, build) = (a.messages, a.build.unwrap_or(true));
        self.run(
            a.ns,
            Box::new(move |state, store, ns| {
                let value = state.append("mcp", store, &ns, messages.into(), build, false)?;
                let mut out = String::new();
                put!(
                    out,
                    "{ns}: {} added, {} already held",
                    value["added"],
                    value["unchanged"]
                );
                if let Some(built) = value.get("built") {
                    put!(out, "build: {built}");
                }
                if let Some(not_done) = value.get("not_done") {
                    put!(
                        out,
                        "stored, but the {} did not follow ({}): {}",
                        not_done["step"].as_str().unwrap_or("build"),
                        not_done["code"].as_str().unwrap_or("internal"),
                        not_done["message"].as_str().unwrap_or_default()
                    );
                }
                Ok(out)
            }),
        )
        .await
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for MemoryTools {
    fn get_info(&self) -> ServerConfig {
        let mut instructions = String::from(
            "trajwiki: long-term memory. Dialogue memory: search_memory, then open_page, \
             open_trajectory, open_source and claim_history on the ids it names. Agent-run memory: \
             first_context for a new task, then open_insight, open_run and grep_runs.",
        );
        if let Some(ns) = &self.options.namespace {
            let _ = write!(instructions, " Namespace: {ns}, the only one served.");
        }
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("trajwiki", env!("CARGO_PKG_VERSION")))
            .with_instructions(instructions)
    }
}

/// A record of `ns` that must be of `kind`.
fn record_of_kind(
    store: &Store,
    ns: &Namespace,
    id: &str,
    kind: IdKind,
) -> Result<Record, Failure> {
    let found = IdKind::of(id).map_err(|e| Failure::from(ApiError::Id(e)))?;
    if found != kind {
        return Err(Failure::bad_request(format!(
            "{id} is a {} id, not a {} id",
            found.name(),
            kind.name()
        )));
    }
    Ok(api::get_in(store, ns, id)?)
}

fn record_text(store: &Store, record: &Record) -> Result<String, Failure> {
    render::record(store, record).map_err(Failure::from_store)
}

/// A search as text: the context, then the retrieval path and the sources with their records.
fn search_text(ns: &Namespace, found: &api::Search) -> String {
    let mut out = found.context.text.trim_end().to_string();
    put!(
        out,
        "\n\n--- retrieval path in {ns}: {} of {} tokens ---",
        found.context.tokens,
        found.budget
    );
    let items = |out: &mut String, what: &str, items: &[crate::retrieve::PathItem]| {
        if items.is_empty() {
            return;
        }
        put!(out, "{what}:");
        for item in items.iter().take(10) {
            put!(
                out,
                "  {} ({:.3}) {}",
                item.id,
                item.score,
                first_line(&item.label, 120)
            );
        }
        if items.len() > 10 {
            put!(out, "  … {} more", items.len() - 10);
        }
    };
    items(&mut out, "pages", &found.ranking.pages);
    items(&mut out, "trajectories", &found.ranking.trajectories);
    items(&mut out, "snapshots", &found.ranking.snapshots);
    if !found.evidence.is_empty() {
        put!(out, "sources:");
    }
    for e in &found.evidence {
        let mut at = String::new();
        if let Some(s) = &e.snapshot {
            let _ = write!(at, " in snapshot {s}");
        }
        if let Some(t) = &e.trajectory {
            let _ = write!(at, " of trajectory {t}");
        }
        put!(
            out,
            "  {} = {}{at}",
            crate::safe::line(&e.source_ref),
            e.message.id
        );
        for c in &e.claims {
            put!(
                out,
                "    claim {} [{}] {}",
                c.id,
                c.status.as_str(),
                first_line(&c.text, 200)
            );
        }
    }
    if found.unbuilt_messages > 0 {
        put!(
            out,
            "({} messages of {ns} are not built yet: found through the direct turn routes only)",
            found.unbuilt_messages
        );
    }
    out
}
