//! `trajwiki serve`: the memory over HTTP, as JSON. Every route but `/health` is scoped to one
//! namespace (a record of another namespace is not found there, whatever its id), so one
//! server can hold the memories of many users. Requests run the store and retrieval work on
//! blocking threads beside the async runtime; each takes a store connection from the engine's
//! small pool. The state between requests is one [`Engine`](crate::Engine)'s: loaded indexes in a
//! byte-bounded LRU cache, each with the state of its namespace it was loaded at
//! ([`IndexState`](trajwiki_store::IndexState): the last message's ingest position and the
//! build record); a request reads that state (two indexed lookups) and loads the index again when
//! it changed, whoever wrote: another process or this server's appends. A write to one namespace
//! leaves the other namespaces' indexes in place. Writes to a namespace go through its
//! [`NamespaceHandle`](crate::engine::NamespaceHandle)'s writer lock.
//!
//! Routes (JSON in and out; errors as `{"error": {"code", "message"}}` with a stable code):
//!
//! | method and path | what |
//! |---|---|
//! | `GET /health` | `{"status": "ok", "version"}` (no token needed) |
//! | `GET /openapi.json` | this table as an OpenAPI 3.1 document (no token needed) |
//! | `GET /v1/namespaces` | every namespace with its message and run counts |
//! | `DELETE /v1/namespaces/{ns}` | deletes a namespace for good (as `trajwiki delete`) |
//! | `POST /v1/embeddings` | OpenAI-compatible: `{"input": text or [texts], "model"?}` → `{"data": [{"embedding"}]}` |
//! | `POST /v1/namespaces/{ns}/messages` | `{"messages": [...], "build"?: true, "flush"?: false}`: append (the ingest fields; `seq` continues the session), then build incrementally |
//! | `POST /v1/namespaces/{ns}/search` | `{"question", "budget"?, "mode"?}` → context, evidence, retrieval path |
//! | `POST /v1/namespaces/{ns}/ask` | `{"question", "budget"?, "mode"?, "rerank"?}` → the answer (or abstention) with its cited sources, checked, and the evidence (as `trajwiki ask --json`) |
//! | `GET /v1/namespaces/{ns}/pages` | the current wiki pages (id, kind, title, trajectories) |
//! | `GET /v1/namespaces/{ns}/records/{id}` | any record by id: page, trajectory, snapshot, claim (with its status), op, message, run, compilation, insight |
//! | `GET /v1/namespaces/{ns}/history/{id}?as_of=T` | a trajectory's or claim's ADD / REVISE / DEPRECATE timeline with sources |
//! | `POST /v1/namespaces/{ns}/build` | `{"rebuild"?, "flush"?}`: a build as a job (202 with its id; 409 while one runs) |
//! | `GET /v1/jobs/{id}` | a job: its stage, texts embedded of those to embed, elapsed time, then its build report or error |
//! | `POST /v1/namespaces/{ns}/runs` | `{"runs": [...], "compile"?: true}`: append agent runs (the runs JSONL fields) and compile them (deterministic compiler) |
//! | `POST /v1/namespaces/{ns}/runs/context` | `{"task", "similar"?, "budget"?}`: the first context for a new task from the compiled runs |
//! | `GET /v1/namespaces/{ns}/insights/{id}` | an insight with its compilation, its run and the steps it cites |
//! | `GET /v1/namespaces/{ns}/runs/{id}` | a run with every step, its compilation and insights |
//! | `GET /v1/namespaces/{ns}/runs/grep?pattern=P&limit=N` | exact search of every run's task, actions and observations |
//!
//! `GET /` redirects to the viewer (`/view`). With a token, `/v1/` routes need
//! `Authorization: Bearer <token>`; request bodies are bounded. Every route is behind the
//! perimeter (`src/server/perimeter.rs`): the `Host` (and `Origin`) must name this server, a POST needs
//! `Content-Type: application/json`, and requests and connections have deadlines.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use trajwiki_compute::ScoringBackend;
use trajwiki_core::{Embedder, Namespace};
use trajwiki_retrieve::{Mode, RetrievalConfig};
use trajwiki_store::{Store, StoreError};

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use crate::api::{self, ApiError};
use crate::cache::{current_or_made, AtState, LruCache};
use crate::engine::Model;
use crate::pipeline::{BuildOptions, PipelineError};
use crate::trace::TraceError;
use crate::Engine;
pub use mcp::McpOptions;
use mcp::MemoryTools;
pub use perimeter::{serve, AllowedHostError, AllowedHosts, Limits};

mod jobs;
mod mcp;
mod perimeter;
mod stdio;

/// What a server is started with.
pub struct ServerConfig {
    /// The store directory (it must exist).
    pub store: PathBuf,
    /// The embedding model every namespace it searches was built with.
    pub embedder: Arc<dyn Embedder>,
    /// Where retrieval scores.
    pub backend: Arc<dyn ScoringBackend>,
    /// A bearer token the `/v1/` routes require, if any.
    pub token: Option<String>,
    /// The largest request body accepted, in bytes.
    pub max_body_bytes: usize,
    /// The bytes of loaded indexes kept between requests.
    pub index_cache_bytes: usize,
    /// How the MCP tools are offered (at `/mcp` by [`router`], on stdio by [`serve_mcp_stdio`]).
    pub mcp: McpOptions,
    /// The language model `POST …/ask` answers with; without one it answers with the evidence
    /// alone (status `no_answer_model`).
    pub llm: Option<trajwiki_llm::LlmConfig>,
    /// The `Host` names requests must carry (against DNS rebinding).
    pub allowed_hosts: AllowedHosts,
    /// The deadlines of requests and the most connections served at once.
    pub limits: Limits,
}

/// The state the handlers share: the engine, and what only a server has.
struct AppState {
    /// The store, the model, the loaded indexes and each namespace's writer.
    engine: Engine,
    token: Option<String>,
    retrieval: RetrievalConfig,
    /// The viewer's pages of each namespace: its markdown export by path, made once per index
    /// state.
    views: Mutex<LruCache<AtState<HashMap<String, String>>>>,
    /// Build jobs, by id: the running ones and the last finished ones.
    jobs: Mutex<jobs::Jobs>,
    llm: Option<trajwiki_llm::LlmConfig>,
    /// The store's location as it may appear in an error's text (as given, and absolute),
    /// longest first: taken out of every message a client sees.
    store_names: Vec<String>,
}

impl AppState {
    /// Runs `work` with a store connection, on a blocking thread.
    async fn with_store<T: Send + 'static>(
        self: &Arc<Self>,
        work: impl FnOnce(&AppState, &mut Store) -> Result<T, Failure> + Send + 'static,
    ) -> Result<T, Failure> {
        let state = Arc::clone(self);
        tokio::task::spawn_blocking(move || state.engine.with_store(|store| work(&state, store)))
            .await
            .map_err(|e| Failure::internal(format!("the request's worker failed: {e}")))?
            .map_err(|f| self.public(f))
    }

    /// `failure` as a client may see it: the store's location (a directory of the server's
    /// machine, or a database URL) taken out of its message.
    fn public(&self, mut failure: Failure) -> Failure {
        for name in &self.store_names {
            failure.message = without_name(&failure.message, name);
        }
        failure
    }

    /// The server's embedding model.
    fn embedder(&self) -> Result<Arc<dyn Embedder>, Failure> {
        self.engine
            .embedder()
            .map_err(|e| Failure::from(ApiError::Model(e)))
    }

    /// One search of `ns` with its kept index (the load's time and stages are in `timings`
    /// when it was loaded for this search).
    fn search(
        &self,
        store: &Store,
        ns: &Namespace,
        question: &str,
        mode: Mode,
        budget: usize,
    ) -> Result<api::Search, Failure> {
        let query = api::Query {
            question,
            mode,
            budget,
            config: &self.retrieval,
        };
        Ok(self.engine.namespace(ns).search(store, &query)?)
    }
}

impl AppState {
    /// Appends `messages` (a JSON list of message objects) to `ns` and, when `build`, folds them
    /// into its memory from the construction fold its last append kept. One writer per
    /// namespace: appends to it wait for each other; other namespaces and readers go on. `via`
    /// names the way in (`http`, `mcp`) in the ingest log. A message without `seq` goes after
    /// the last of its session, a position the store chooses under its write lock.
    fn append(
        &self,
        via: &str,
        store: &mut Store,
        ns: &Namespace,
        messages: Value,
        build: bool,
        flush: bool,
    ) -> Result<Value, Failure> {
        self.append_keyed(via, store, ns, messages, None, build, flush)
    }

    /// [`append`](AppState::append) with the request's idempotency key, if any (see
    /// [`IdempotencyKey`](crate::messages::IdempotencyKey)).
    #[allow(clippy::too_many_arguments)]
    fn append_keyed(
        &self,
        via: &str,
        store: &mut Store,
        ns: &Namespace,
        messages: Value,
        key: Option<&crate::messages::IdempotencyKey>,
        build: bool,
        flush: bool,
    ) -> Result<Value, Failure> {
        let parsed = crate::messages::parse_messages(messages, Some(ns), "messages", key)
            .map_err(|e| Failure::bad_request(e.to_string()))?;
        let options = build.then_some(BuildOptions {
            flush,
            ..BuildOptions::default()
        });
        let (report, built) = self
            .engine
            .namespace(ns)
            .append(store, via, &parsed, options)?;
        let mut value = json!({
            "namespace": ns, "added": report.added, "unchanged": report.unchanged,
        });
        if let Some(built) = built {
            value["built"] = serde_json::to_value(&built)
                .map_err(|e| Failure::internal(format!("serializing the build report: {e}")))?;
        }
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::without_name;

    #[test]
    fn the_store_location_is_taken_out_of_messages() {
        let cut = without_name("cannot use vector file /srv/st/vectors/a.f16", "/srv/st");
        assert_eq!(cut, "cannot use vector file <store>/vectors/a.f16");
        assert_eq!(without_name("in /srv/st.", "/srv/st"), "in <store>.");
        assert_eq!(without_name("in /srv/st.db", "/srv/st"), "in /srv/st.db");
        assert_eq!(without_name("at /srv/st2/x", "/srv/st"), "at /srv/st2/x");
        // A bare name is cut only as a path: the word stays.
        let cut = without_name("the store holds store/vectors/a.f16", "store");
        assert_eq!(cut, "the store holds <store>/vectors/a.f16");
    }
}

/// The forms in which the store at `location` may appear in an error's text: as given, absolute
/// and with links resolved; longest first.
fn store_names(location: &std::path::Path) -> Vec<String> {
    let mut names = vec![location.display().to_string()];
    if let Ok(absolute) = std::path::absolute(location) {
        names.push(absolute.display().to_string());
    }
    if let Ok(resolved) = std::fs::canonicalize(location) {
        names.push(resolved.display().to_string());
    }
    names.retain(|n| !n.is_empty());
    names.sort_by_key(|n| std::cmp::Reverse(n.len()));
    names.dedup();
    names
}

/// `text` with every occurrence of `name` that stands as a path of its own (not inside a longer
/// word or file name; a path below it counts) replaced by `<store>`. A bare name (`--store
/// store`, no separator in it) is a path only with a path below it: the word alone is left.
fn without_name(text: &str, name: &str) -> String {
    let bare = !name.contains(std::path::MAIN_SEPARATOR);
    let part_of_name = |c: char| c.is_alphanumeric() || "_-.~".contains(c);
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(name) {
        let before = rest[..at].chars().next_back();
        let mut next = rest[at + name.len()..].chars();
        let after = next.next();
        // A full stop ends a sentence unless a name goes on after it (`st.db`).
        let after_is_name = match after {
            Some('.') => next.next().is_some_and(char::is_alphanumeric),
            other => other.is_some_and(part_of_name),
        };
        let (head, tail) = rest.split_at(at);
        out.push_str(head);
        let below = after == Some(std::path::MAIN_SEPARATOR);
        if before.is_some_and(part_of_name) || after_is_name || (bare && !below) {
            out.push_str(name);
        } else {
            out.push_str("<store>");
        }
        rest = &tail[name.len()..];
    }
    out.push_str(rest);
    out
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A failed request: its HTTP status, a stable code and a message.
#[derive(Debug)]
pub struct Failure {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl Failure {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Failure {
            status,
            code,
            message: message.into(),
        }
    }

    fn bad_request(message: impl Into<String>) -> Self {
        Failure::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    fn internal(message: impl Into<String>) -> Self {
        Failure::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    fn from_store(e: StoreError) -> Self {
        Failure::from(e)
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        let (status, code) =
            store_status(&e).unwrap_or((StatusCode::INTERNAL_SERVER_ERROR, "internal"));
        Failure::new(status, code, e.to_string())
    }
}

/// The status and code of a store error that a client or the disk caused, when it is one: a
/// conflicting write, a read-only store, a full session, a full disk.
fn store_status(e: &StoreError) -> Option<(StatusCode, &'static str)> {
    Some(match e {
        StoreError::Conflict { .. } => (StatusCode::CONFLICT, "conflict"),
        StoreError::ReadOnly { .. } => (StatusCode::FORBIDDEN, "read_only"),
        StoreError::SessionFull { .. } => (StatusCode::CONFLICT, "session_full"),
        e if e.is_storage_full() => (StatusCode::INSUFFICIENT_STORAGE, "storage_full"),
        _ => return None,
    })
}

/// A namespace without messages (or one outside an MCP server's scope), as a client is told:
/// without the store's path, which the CLI's message names.
fn unknown_namespace(ns: &Namespace) -> Failure {
    Failure::new(
        StatusCode::NOT_FOUND,
        "unknown_namespace",
        format!("namespace {ns} has no messages"),
    )
}

impl From<ApiError> for Failure {
    fn from(e: ApiError) -> Self {
        if let ApiError::UnknownNamespace { namespace, .. } = &e {
            return unknown_namespace(namespace);
        }
        let message = e.to_string();
        let (status, code) = match &e {
            ApiError::Id(_) => (StatusCode::BAD_REQUEST, "bad_id"),
            ApiError::NotFound { .. } => (StatusCode::NOT_FOUND, "not_found"),
            ApiError::NotBuilt(_) => (StatusCode::CONFLICT, "not_built"),
            ApiError::NoHistory(_) => (StatusCode::BAD_REQUEST, "no_history"),
            ApiError::Limit(_) => (StatusCode::PAYLOAD_TOO_LARGE, "too_large"),
            ApiError::Pipeline(PipelineError::ModelMismatch { .. }) => {
                (StatusCode::CONFLICT, "model_mismatch")
            }
            ApiError::Pipeline(PipelineError::Stale { .. }) => (StatusCode::CONFLICT, "stale"),
            // Nothing to build from: the namespace holds no messages (yet).
            ApiError::Pipeline(PipelineError::Empty(_)) => {
                (StatusCode::NOT_FOUND, "unknown_namespace")
            }
            ApiError::Store(e) | ApiError::Pipeline(PipelineError::Store(e)) => {
                store_status(e).unwrap_or((StatusCode::INTERNAL_SERVER_ERROR, "internal"))
            }
            _ => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        };
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            // What failed inside, so that an operator can tell one failure from another.
            return Failure::internal(chain(&e));
        }
        Failure::new(status, code, message)
    }
}

/// An error with its causes: `what: why: …`.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = c.source();
    }
    out
}

impl From<TraceError> for Failure {
    fn from(e: TraceError) -> Self {
        let message = e.to_string();
        match e {
            TraceError::NoRuns(_) => Failure::new(StatusCode::NOT_FOUND, "no_runs", message),
            TraceError::NotCompiled(_) => {
                Failure::new(StatusCode::CONFLICT, "not_compiled", message)
            }
            TraceError::NotInNamespace { .. } | TraceError::Unknown { .. } => {
                Failure::new(StatusCode::NOT_FOUND, "not_found", message)
            }
            TraceError::Pipeline(e) => Failure::from(ApiError::Pipeline(e)),
            // The cause's status (a full disk is 507), with what was committed before it.
            TraceError::Partial { source, .. } => {
                let cause = Failure::from(*source);
                Failure::new(
                    cause.status,
                    cause.code,
                    format!("{message}: {}", cause.message),
                )
            }
            _ => Failure::internal(message),
        }
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let body = json!({"error": {"code": self.code, "message": self.message}});
        (self.status, Json(body)).into_response()
    }
}

/// The routes over `config`'s store, behind the perimeter (Host and Origin checks, JSON-only
/// bodies, deadlines; see `src/server/perimeter.rs`). Fails when the store cannot be opened.
pub fn router(config: ServerConfig) -> Result<Router, StoreError> {
    let max_body_bytes = config.max_body_bytes;
    let limits = config.limits;
    let allowed_hosts = Arc::new(config.allowed_hosts.clone());
    let (state, mcp_options) = app_state(config)?;
    let deadline = |limit: std::time::Duration| {
        axum::middleware::from_fn_with_state(limit, perimeter::deadline)
    };
    let authorized = || axum::middleware::from_fn_with_state(Arc::clone(&state), authorize);
    let mcp = {
        let state = Arc::clone(&state);
        let config = StreamableHttpServerConfig::default()
            // One JSON answer per request, no sessions: every call stands alone.
            .with_legacy_session_mode(false)
            .with_json_response(true)
            .with_sse_keep_alive(None)
            .with_max_request_body_bytes(max_body_bytes)
            // The perimeter checks Host and Origin on every route, /mcp included, by one rule.
            .disable_allowed_hosts();
        StreamableHttpService::new(
            move || Ok(MemoryTools::new(Arc::clone(&state), mcp_options.clone())),
            Arc::new(LocalSessionManager::default()),
            config,
        )
    };
    let mcp = Router::new()
        .nest_service("/mcp", mcp)
        .route_layer(deadline(limits.request_timeout))
        .route_layer(authorized());
    let v1 = Router::new()
        .route("/namespaces", get(namespaces))
        .route("/namespaces/{ns}", axum::routing::delete(delete_namespace))
        .route("/embeddings", post(embeddings))
        .route("/namespaces/{ns}/search", post(search))
        .route("/namespaces/{ns}/messages", post(append))
        .route("/namespaces/{ns}/pages", get(pages))
        .route("/namespaces/{ns}/records/{id}", get(record))
        .route("/namespaces/{ns}/history/{id}", get(history))
        .route("/namespaces/{ns}/runs", post(append_runs))
        .route("/namespaces/{ns}/build", post(jobs::start_build))
        .route("/jobs/{id}", get(jobs::job))
        .route("/namespaces/{ns}/runs/context", post(run_context))
        .route("/namespaces/{ns}/runs/grep", get(run_grep))
        .route("/namespaces/{ns}/runs/{id}", get(run))
        .route("/namespaces/{ns}/insights/{id}", get(insight))
        .route_layer(deadline(limits.request_timeout))
        // An answer from a language model may take several of its calls.
        .route(
            "/namespaces/{ns}/ask",
            post(ask).route_layer(deadline(limits.ask_timeout)),
        )
        .route_layer(authorized());
    let view = Router::new()
        .route("/view", get(view_namespaces))
        .route("/view/{ns}/", get(view_index))
        .route("/view/{ns}/query", get(view_query))
        .route("/view/{ns}/{*path}", get(view_file))
        .route_layer(deadline(limits.request_timeout))
        .route_layer(authorized());
    Ok(Router::new()
        .route("/", get(to_viewer))
        .route("/health", get(health))
        .route("/openapi.json", get(openapi))
        .merge(view)
        .merge(mcp)
        .nest("/v1", v1)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .layer(axum::middleware::from_fn_with_state(
            max_body_bytes,
            refuse_declared_oversize,
        ))
        .layer(axum::middleware::from_fn(perimeter::require_json))
        .layer(axum::middleware::from_fn_with_state(
            allowed_hosts,
            perimeter::check_host,
        ))
        .with_state(state))
}

/// The handlers' state over `config`'s store, and the MCP options.
fn app_state(config: ServerConfig) -> Result<(Arc<AppState>, McpOptions), StoreError> {
    let first = Store::open_existing(&config.store)?;
    let engine = Engine::new(
        first,
        Model::Loaded(config.embedder),
        config.backend,
        config.index_cache_bytes,
    );
    let state = Arc::new(AppState {
        engine,
        token: config.token,
        retrieval: RetrievalConfig::default(),
        views: Mutex::new(LruCache::new(config.index_cache_bytes / 4)),
        jobs: Mutex::new(jobs::Jobs::default()),
        llm: config.llm,
        store_names: store_names(&config.store),
    });
    Ok((state, config.mcp))
}

/// Serves the MCP tools over `config`'s store on standard input and output until the client
/// closes them. Fails when the store cannot be opened.
pub fn serve_mcp_stdio(config: ServerConfig) -> std::io::Result<()> {
    use rmcp::ServiceExt as _;
    let (state, options) = app_state(config).map_err(std::io::Error::other)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("trajwiki-mcp")
        .build()?;
    runtime.block_on(async move {
        // Lines that are not JSON are answered with parse errors before the service reads.
        let stdio = stdio::checked_stdio();
        let service = MemoryTools::new(state, options)
            .serve((stdio.read, stdio.write))
            .await
            .map_err(std::io::Error::other)?;
        service.waiting().await.map_err(std::io::Error::other)?;
        // What is still queued for standard output is written before the process ends.
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), stdio.output).await;
        Ok(())
    })
}

async fn authorize(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    if let Some(token) = &state.token {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if !given.is_some_and(|g| constant_time_eq(g.as_bytes(), token.as_bytes())) {
            return Failure::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "this server needs `Authorization: Bearer <token>`",
            )
            .into_response();
        }
    }
    next.run(request).await
}

/// Answers 413 at once to a request that declares a body over the limit, rather than reading
/// up to the limit first (bodies without a declared length are cut at the limit as they are
/// read).
async fn refuse_declared_oversize(
    State(max): State<usize>,
    request: Request,
    next: Next,
) -> Response {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        let mut response = Failure::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!("the request body is over the limit of {max} bytes"),
        )
        .into_response();
        response.headers_mut().insert(
            header::CONNECTION,
            header::HeaderValue::from_static("close"),
        );
        return response;
    }
    next.run(request).await
}

/// Compares without stopping at the first difference, so the time taken does not tell how much
/// of a guessed token was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn not_found() -> Failure {
    Failure::new(StatusCode::NOT_FOUND, "no_route", "no such route")
}

/// A route asked with a method it does not take (405, as JSON).
async fn method_not_allowed(method: axum::http::Method) -> Failure {
    Failure::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("this route does not take {method}"),
    )
}

/// `GET /`: a person opening the server's address in a browser gets the viewer.
async fn to_viewer() -> axum::response::Redirect {
    axum::response::Redirect::to("/view")
}

async fn health() -> Json<Value> {
    Json(json!({"status": "ok", "version": env!("CARGO_PKG_VERSION")}))
}

fn namespace(name: &str) -> Result<Namespace, Failure> {
    Namespace::new(name).map_err(|e| Failure::from(ApiError::Id(e)))
}

/// Every namespace of `store` with its message and run counts.
fn listed(store: &Store) -> Result<Vec<(Namespace, u64, u64)>, Failure> {
    let mut out = Vec::new();
    for ns in store.namespaces().map_err(Failure::from_store)? {
        let (messages, runs) = store.namespace_counts(&ns).map_err(Failure::from_store)?;
        out.push((ns, messages, runs));
    }
    Ok(out)
}

async fn namespaces(State(state): State<Arc<AppState>>) -> Result<Json<Value>, Failure> {
    state
        .with_store(|_, store| {
            let out: Vec<Value> = listed(store)?
                .into_iter()
                .map(|(ns, messages, runs)| {
                    json!({"namespace": ns, "messages": messages, "runs": runs})
                })
                .collect();
            Ok(Json(json!({"namespaces": out})))
        })
        .await
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchRequest {
    question: String,
    #[serde(default = "default_budget")]
    budget: usize,
    #[serde(default)]
    mode: Option<String>,
}

fn default_budget() -> usize {
    2700
}

async fn search(
    State(state): State<Arc<AppState>>,
    Segments(ns): Segments<String>,
    body: Result<Json<SearchRequest>, JsonRejection>,
) -> Result<Json<Value>, Failure> {
    let Json(req) = body.map_err(rejected)?;
    let ns = namespace(&ns)?;
    let mode = parse_mode(req.mode.as_deref())?;
    if req.budget == 0 {
        return Err(Failure::bad_request("field `budget`: must be at least 1"));
    }
    state
        .with_store(move |state, store| {
            let found = state.search(store, &ns, &req.question, mode, req.budget)?;
            let mut value = serde_json::to_value(&found)
                .map_err(|e| Failure::internal(format!("serializing the search: {e}")))?;
            value["mode"] = json!(mode.name());
            value["namespace"] = json!(ns);
            Ok(Json(value))
        })
        .await
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AskRequest {
    question: String,
    #[serde(default = "default_budget")]
    budget: usize,
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    rerank: bool,
}

/// A question answered by the server's language model from the namespace's kept index (the
/// CLI's `ask`: the answer checked against its sources, abstaining when they do not hold it);
/// without a model, the evidence alone.
async fn ask(
    State(state): State<Arc<AppState>>,
    Segments(ns): Segments<String>,
    body: Result<Json<AskRequest>, JsonRejection>,
) -> Result<Json<Value>, Failure> {
    let Json(req) = body.map_err(rejected)?;
    let ns = namespace(&ns)?;
    let mode = parse_mode(req.mode.as_deref())?;
    if req.budget == 0 {
        return Err(Failure::bad_request("field `budget`: must be at least 1"));
    }
    state
        .with_store(move |state, store| {
            trajwiki_core::limits::QUESTION_BYTES
                .check(req.question.len())
                .map_err(|e| Failure::from(ApiError::Limit(e)))?;
            let query = api::Query {
                question: &req.question,
                mode,
                budget: req.budget,
                config: &state.retrieval,
            };
            let (asked, client) =
                state
                    .engine
                    .namespace(&ns)
                    .ask(store, &query, state.llm.clone(), req.rerank)?;
            let mut value = asked.to_json(client.as_ref());
            value["namespace"] = json!(ns);
            value["mode"] = json!(mode.name());
            Ok(Json(value))
        })
        .await
}

/// A retrieval mode by name (`full` when none).
fn parse_mode(name: Option<&str>) -> Result<Mode, Failure> {
    match name {
        None => Ok(Mode::Full),
        Some(m) => Mode::parse(m).ok_or_else(|| {
            Failure::bad_request(format!(
                "field `mode`: unknown mode {m:?}; one of {}",
                Mode::ALL.map(Mode::name).join(", ")
            ))
        }),
    }
}

async fn pages(
    State(state): State<Arc<AppState>>,
    Segments(ns): Segments<String>,
) -> Result<Json<Value>, Failure> {
    let ns = namespace(&ns)?;
    state
        .with_store(move |_, store| {
            let pages = store.pages(&ns).map_err(Failure::from_store)?;
            // Only a namespace without pages is counted (a count reads the whole namespace).
            if pages.is_empty()
                && store.namespace_counts(&ns).map_err(Failure::from_store)? == (0, 0)
            {
                return Err(ApiError::UnknownNamespace {
                    namespace: ns,
                    store: store.dir().to_path_buf(),
                }
                .into());
            }
            let pages: Vec<Value> = pages
                .iter()
                .map(|p| {
                    json!({
                        "id": p.id, "kind": p.kind, "title": p.title, "revision": p.revision,
                        "trajectories": p.trajectory_ids.len(),
                    })
                })
                .collect();
            Ok(Json(json!({"namespace": ns, "pages": pages})))
        })
        .await
}

async fn record(
    State(state): State<Arc<AppState>>,
    Segments((ns, id)): Segments<(String, String)>,
) -> Result<Json<Value>, Failure> {
    let ns = namespace(&ns)?;
    state
        .with_store(move |_, store| {
            let found = api::get_in(store, &ns, &id)?;
            Ok(Json(
                json!({"kind": found.kind().name(), "record": found.to_json()}),
            ))
        })
        .await
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HistoryQuery {
    as_of: Option<String>,
}

async fn history(
    State(state): State<Arc<AppState>>,
    Segments((ns, id)): Segments<(String, String)>,
    Params(q): Params<HistoryQuery>,
) -> Result<Json<Value>, Failure> {
    let ns = namespace(&ns)?;
    let as_of = match &q.as_of {
        Some(t) => Some(trajwiki_ingest::jsonl::parse_timestamp(t).ok_or_else(|| {
            Failure::bad_request(format!(
                "as_of {t:?}: expected a time like 2023-05-08T13:56:00 or a date"
            ))
        })?),
        None => None,
    };
    state
        .with_store(move |_, store| {
            let h = api::history(store, &id, as_of)?;
            if h.namespace != ns {
                let kind = trajwiki_core::IdKind::of(&id).map_err(ApiError::Id)?;
                return Err(ApiError::NotFound { kind, id }.into());
            }
            Ok(Json(
                json!({"namespace": h.namespace, "id": id, "entries": h.entries}),
            ))
        })
        .await
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AppendRequest {
    messages: Value,
    #[serde(default = "yes")]
    build: bool,
    #[serde(default)]
    flush: bool,
}

fn yes() -> bool {
    true
}

/// Appends messages to a namespace and (unless `build` is false) folds them into its memory:
/// the work of one message, not of the history, when the namespace's fold is kept from the last
/// append. Appends to one namespace are serialised; other namespaces and readers go on.
///
/// An `Idempotency-Key` header makes a retried request a no-op: each of its messages without
/// `seq` or `ref` is stored with the ref `KEY#N` (N its place in the list, from 1), by which the
/// retry finds it (`unchanged`).
async fn append(
    State(state): State<Arc<AppState>>,
    Segments(ns): Segments<String>,
    headers: axum::http::HeaderMap,
    body: Result<Json<AppendRequest>, JsonRejection>,
) -> Result<Json<Value>, Failure> {
    let Json(req) = body.map_err(rejected)?;
    let ns = namespace(&ns)?;
    if !req.messages.is_array() {
        return Err(Failure::bad_request(
            "field `messages`: expected a list of message objects",
        ));
    }
    let key = match headers.get("idempotency-key") {
        None => None,
        Some(v) => Some(
            v.to_str()
                .map_err(|_| {
                    Failure::bad_request("header `Idempotency-Key`: expected visible ASCII text")
                })
                .and_then(|k| {
                    crate::messages::IdempotencyKey::new(k)
                        .map_err(|e| Failure::bad_request(format!("header `Idempotency-Key`: {e}")))
                })?,
        ),
    };
    state
        .with_store(move |state, store| {
            state
                .append_keyed(
                    "http",
                    store,
                    &ns,
                    req.messages,
                    key.as_ref(),
                    req.build,
                    req.flush,
                )
                .map(Json)
        })
        .await
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AppendRunsRequest {
    runs: Vec<Value>,
    #[serde(default = "yes")]
    compile: bool,
}

/// Appends agent runs to a namespace and (unless `compile` is false) compiles them with the
/// deterministic compiler: the work of these runs, not of the namespace's others. Serialised
/// with the namespace's other writes.
async fn append_runs(
    State(state): State<Arc<AppState>>,
    Segments(ns): Segments<String>,
    body: Result<Json<AppendRunsRequest>, JsonRejection>,
) -> Result<Json<Value>, Failure> {
    let Json(req) = body.map_err(rejected)?;
    let ns = namespace(&ns)?;
    let mut text = String::new();
    for (i, run) in req.runs.iter().enumerate() {
        let Some(fields) = run.as_object() else {
            return Err(Failure::bad_request(format!(
                "field `runs`, item {}: expected a run object",
                i + 1
            )));
        };
        if let Some(theirs) = fields.get("namespace") {
            if theirs.as_str() != Some(ns.as_str()) {
                return Err(Failure::bad_request(format!(
                    "field `runs`, item {}: namespace {theirs} is not {ns}, the namespace of this route",
                    i + 1
                )));
            }
        }
        text.push_str(&run.to_string());
        text.push('\n');
    }
    state
        .with_store(move |state, store| {
            let handle = state.engine.namespace(&ns);
            let _writing = handle.writer();
            // Errors name the item as a line of `runs`: line N is item N.
            let runs =
                trajwiki_ingest::jsonl::parse_runs(std::path::Path::new("runs"), &text, Some(&ns))
                    .map_err(|e| Failure::bad_request(e.to_string()))?;
            let report = store
                .ingest_runs("http", &runs)
                .map_err(Failure::from_store)?;
            let mut value = json!({
                "namespace": ns, "added": report.added, "unchanged": report.unchanged,
            });
            if req.compile && !runs.is_empty() {
                let compiled = crate::trace::compile_runs(
                    store,
                    &ns,
                    &runs,
                    &trajwiki_trace::DeterministicCompiler,
                )?;
                value["compiled"] = serde_json::to_value(&compiled).map_err(|e| {
                    Failure::internal(format!("serializing the compile report: {e}"))
                })?;
            }
            Ok(Json(value))
        })
        .await
}

/// The route's path parameters, as [`Path`] reads them; one that cannot be read (a segment
/// that is not UTF-8 once decoded) is a JSON failure like every other.
pub(super) struct Segments<T>(pub T);

impl<T, S> axum::extract::FromRequestParts<S> for Segments<T>
where
    T: serde::de::DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = Failure;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Failure> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(value)) => Ok(Segments(value)),
            Err(e) => Err(Failure::new(e.status(), "bad_request", e.body_text())),
        }
    }
}

/// The request's query string, as [`Query`] reads it; one that cannot be read (an unknown
/// parameter, a number that is not one) is a JSON failure like every other.
struct Params<T>(T);

impl<T, S> axum::extract::FromRequestParts<S> for Params<T>
where
    T: serde::de::DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = Failure;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Failure> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(value)) => Ok(Params(value)),
            Err(e) => Err(Failure::new(e.status(), "bad_request", e.body_text())),
        }
    }
}

/// A body that could not be read as the route's JSON.
fn rejected(e: JsonRejection) -> Failure {
    let code = if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        "too_large"
    } else {
        "bad_request"
    };
    Failure::new(e.status(), code, e.body_text())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ContextRequest {
    task: String,
    #[serde(default)]
    similar: Option<usize>,
    #[serde(default)]
    budget: Option<usize>,
}

async fn run_context(
    State(state): State<Arc<AppState>>,
    Segments(ns): Segments<String>,
    body: Result<Json<ContextRequest>, JsonRejection>,
) -> Result<Json<Value>, Failure> {
    let Json(req) = body.map_err(rejected)?;
    let ns = namespace(&ns)?;
    trajwiki_core::limits::QUESTION_BYTES
        .check(req.task.len())
        .map_err(|e| Failure::from(ApiError::Limit(e)))?;
    state
        .with_store(move |state, store| {
            let defaults = trajwiki_trace::ContextOptions::default();
            let options = trajwiki_trace::ContextOptions {
                similar_runs: req.similar.unwrap_or(defaults.similar_runs),
                budget: req.budget.or(defaults.budget),
                exclude: None,
            };
            let found = crate::trace::first_context(
                store,
                &ns,
                state.embedder()?.as_ref(),
                &req.task,
                &options,
            )?;
            let mut value = serde_json::to_value(&found)
                .map_err(|e| Failure::internal(format!("serializing the context: {e}")))?;
            value["namespace"] = json!(ns);
            Ok(Json(value))
        })
        .await
}

async fn run(
    State(state): State<Arc<AppState>>,
    Segments((ns, id)): Segments<(String, String)>,
) -> Result<Json<Value>, Failure> {
    let ns = namespace(&ns)?;
    let id = trajwiki_core::RunId::parse(&id).map_err(|e| Failure::from(ApiError::Id(e)))?;
    state
        .with_store(move |_, store| {
            let memory = crate::trace::compiled_run_memory(store, &ns, None)?;
            let entry = memory.open_run(&id).ok_or(TraceError::NotInNamespace {
                run: id.clone(),
                namespace: ns.clone(),
            })?;
            Ok(Json(crate::trace::run_entry_json(entry)))
        })
        .await
}

async fn insight(
    State(state): State<Arc<AppState>>,
    Segments((ns, id)): Segments<(String, String)>,
) -> Result<Json<Value>, Failure> {
    let ns = namespace(&ns)?;
    let id = trajwiki_core::InsightId::parse(&id).map_err(|e| Failure::from(ApiError::Id(e)))?;
    state
        .with_store(move |_, store| {
            let memory = crate::trace::compiled_run_memory(store, &ns, None)?;
            let opened = memory.open_insight(&id).ok_or(TraceError::Unknown {
                kind: "insight",
                id: id.to_string(),
            })?;
            Ok(Json(crate::trace::opened_insight_json(&opened)))
        })
        .await
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GrepQuery {
    pattern: String,
    #[serde(default = "default_grep_limit")]
    limit: usize,
}

fn default_grep_limit() -> usize {
    20
}

async fn run_grep(
    State(state): State<Arc<AppState>>,
    Segments(ns): Segments<String>,
    Params(q): Params<GrepQuery>,
) -> Result<Json<Value>, Failure> {
    let ns = namespace(&ns)?;
    if q.pattern.is_empty() {
        return Err(Failure::bad_request("`pattern`: must not be empty"));
    }
    state
        .with_store(move |_, store| {
            let memory = crate::trace::compiled_run_memory(store, &ns, None)?;
            let hits = memory.grep(&q.pattern, q.limit.min(1000));
            Ok(Json(
                json!({"namespace": ns, "pattern": q.pattern, "hits": hits}),
            ))
        })
        .await
}

async fn delete_namespace(
    State(state): State<Arc<AppState>>,
    Segments(ns): Segments<String>,
) -> Result<Json<Value>, Failure> {
    let ns = namespace(&ns)?;
    state
        .with_store(move |state, store| {
            // Not while the namespace is being appended to; its kept fold goes with it.
            let deleted = state.engine.namespace(&ns).delete(store)?;
            if !deleted.existed {
                return Err(ApiError::UnknownNamespace {
                    namespace: ns,
                    store: store.dir().to_path_buf(),
                }
                .into());
            }
            if deleted.not_scrubbed == Some(trajwiki_store::NotScrubbed::StorageFull) {
                // The records are gone, their bytes not yet: the client must hear it.
                return Err(Failure::new(
                    StatusCode::INSUFFICIENT_STORAGE,
                    "storage_full",
                    format!(
                        "namespace {ns} is deleted, but the store's files still hold its text: {} (free space, then `trajwiki delete --scrub`)",
                        trajwiki_store::NotScrubbed::StorageFull
                    ),
                ));
            }
            Ok(Json(json!({
                "namespace": ns, "deleted": true, "messages": deleted.messages, "runs": deleted.runs,
                "scrubbed": deleted.scrubbed,
                "not_scrubbed": deleted.not_scrubbed.as_ref().map(ToString::to_string),
            })))
        })
        .await
}

#[derive(Debug, Deserialize)]
struct EmbeddingsRequest {
    input: Value,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    encoding_format: Option<String>,
}

/// At most this many texts in one embeddings request.
const MAX_EMBED_INPUTS: usize = 2048;

/// OpenAI's `POST /v1/embeddings`, so that existing embedding clients can use the engine: the
/// server's model embeds the texts as documents (unit vectors, as float lists).
async fn embeddings(
    State(state): State<Arc<AppState>>,
    body: Result<Json<EmbeddingsRequest>, JsonRejection>,
) -> Result<Response, Failure> {
    let Json(req) = body.map_err(rejected)?;
    let embedder = state.embedder()?;
    let served = embedder.model_id().to_string();
    if let Some(m) = req.model.as_deref().filter(|m| *m != served) {
        return Err(Failure::bad_request(format!(
            "field `model`: this server embeds with {served:?}, not {m:?}"
        )));
    }
    if let Some(f) = req.encoding_format.as_deref().filter(|f| *f != "float") {
        return Err(Failure::bad_request(format!(
            "field `encoding_format`: only \"float\" is served, not {f:?}"
        )));
    }
    let texts: Vec<String> = match req.input {
        Value::String(t) => vec![t],
        Value::Array(items) => items
            .into_iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::String(t) => Ok(t),
                other => Err(Failure::bad_request(format!(
                    "field `input[{i}]`: expected a string, found {other}"
                ))),
            })
            .collect::<Result<_, _>>()?,
        other => {
            return Err(Failure::bad_request(format!(
                "field `input`: expected a string or a list of strings, found {other}"
            )))
        }
    };
    if texts.is_empty() || texts.len() > MAX_EMBED_INPUTS {
        return Err(Failure::bad_request(format!(
            "field `input`: 1 to {MAX_EMBED_INPUTS} texts, not {}",
            texts.len()
        )));
    }
    for (i, t) in texts.iter().enumerate() {
        trajwiki_core::limits::MESSAGE_BYTES
            .check(t.len())
            .map_err(|e| {
                Failure::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "too_large",
                    format!("`input[{i}]`: {e}"),
                )
            })?;
    }
    let rows = tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let tokens: usize = refs.iter().map(|t| t.split_whitespace().count()).sum();
        embedder
            .embed(&refs, trajwiki_core::EmbedKind::Document)
            .map(|e| (e, tokens))
    })
    .await
    .map_err(|e| Failure::internal(format!("the embedding worker failed: {e}")))?;
    let (rows, tokens) = rows.map_err(|e| Failure::internal(format!("embedding failed: {e}")))?;
    let data: Vec<EmbeddingItem> = rows
        .rows()
        .enumerate()
        .map(|(index, row)| EmbeddingItem {
            object: "embedding",
            index,
            embedding: row.to_vec(),
        })
        .collect();
    // Serialized from f32, so each value is written as the shortest text of its f32.
    let body = serde_json::to_vec(&EmbeddingsResponse {
        object: "list",
        data,
        model: served,
        usage: Usage {
            prompt_tokens: tokens,
            total_tokens: tokens,
        },
    })
    .map_err(|e| Failure::internal(format!("serializing the embeddings: {e}")))?;
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

#[derive(serde::Serialize)]
struct EmbeddingItem {
    object: &'static str,
    index: usize,
    embedding: Vec<f32>,
}

/// Token counts are whitespace words (the model's own tokenizer is not consulted).
#[derive(serde::Serialize)]
struct Usage {
    prompt_tokens: usize,
    total_tokens: usize,
}

#[derive(serde::Serialize)]
struct EmbeddingsResponse {
    object: &'static str,
    data: Vec<EmbeddingItem>,
    model: String,
    usage: Usage,
}

/// The routes as an OpenAPI 3.1 document.
async fn openapi() -> Json<Value> {
    Json(openapi_document())
}

/// The OpenAPI document of [`router`]'s routes (a test checks that every path it lists is
/// served).
pub fn openapi_document() -> Value {
    let ns = json!({"name": "ns", "in": "path", "required": true, "schema": {"type": "string"},
        "description": "The namespace (one user's or agent's memory)."});
    let id = json!({"name": "id", "in": "path", "required": true, "schema": {"type": "string"},
        "description": "A record id: its prefix (pg_, trj_, snp_, clm_, op_, msg_, run_, cmp_, ins_) names its kind."});
    let body = |props: Value, required: Value| {
        json!({"required": true, "content": {"application/json": {"schema": {
            "type": "object", "properties": props, "required": required,
            "additionalProperties": false}}}})
    };
    let ok = |what: &str| json!({"200": {"description": what}, "default": {"$ref": "#/components/responses/Error"}});
    json!({
        "openapi": "3.1.0",
        "info": {"title": "trajwiki", "version": env!("CARGO_PKG_VERSION"),
            "description": "Long-term memory for LLM agents that never loses the path back to its evidence."},
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "responses": {"Error": {"description": "An error with a stable code", "content": {"application/json": {"schema": {
                "type": "object", "properties": {"error": {"type": "object", "properties": {
                    "code": {"type": "string", "enum": ["bad_request", "bad_id", "not_found", "unknown_namespace",
                        "not_built", "no_runs", "not_compiled", "model_mismatch", "stale", "too_large",
                        "unauthorized", "conflict", "read_only", "no_route", "no_history", "internal",
                        "busy", "method_not_allowed", "forbidden_host", "forbidden_origin", "timeout"]},
                    "message": {"type": "string"}}}}}}}}}
        },
        "security": [{"bearer": []}],
        "paths": {
            "/health": {"get": {"summary": "Liveness", "security": [], "responses": ok("{status, version}")}},
            "/openapi.json": {"get": {"summary": "This document", "security": [], "responses": ok("OpenAPI 3.1")}},
            "/v1/namespaces": {"get": {"summary": "Every namespace with its message and run counts", "responses": ok("{namespaces}")}},
            "/v1/namespaces/{ns}": {"delete": {"summary": "Delete a namespace for good", "parameters": [ns], "responses": ok("{deleted, messages, runs}")}},
            "/v1/embeddings": {"post": {"summary": "OpenAI-compatible embeddings with the server's model",
                "requestBody": body(json!({"input": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
                    "model": {"type": "string"}, "encoding_format": {"const": "float"}}), json!(["input"])),
                "responses": ok("{object, data: [{index, embedding}], model, usage}")}},
            "/v1/namespaces/{ns}/messages": {"post": {"summary": "Append messages and fold them into the memory",
                "parameters": [ns],
                "requestBody": body(json!({"messages": {"type": "array", "items": {"type": "object"}},
                    "build": {"type": "boolean", "default": true}, "flush": {"type": "boolean", "default": false}}), json!(["messages"])),
                "responses": ok("{added, unchanged, built}")}},
            "/v1/namespaces/{ns}/search": {"post": {"summary": "Evidence for a question: context under a budget, its sources, the retrieval path",
                "parameters": [ns],
                "requestBody": body(json!({"question": {"type": "string"}, "budget": {"type": "integer", "default": 2700, "minimum": 1},
                    "mode": {"type": "string", "default": "full"}}), json!(["question"])),
                "responses": ok("{context, evidence, ranking, timings}")}},
            "/v1/namespaces/{ns}/ask": {"post": {"summary": "An answer from the server's language model with its cited sources, or an abstention; the evidence",
                "parameters": [ns],
                "requestBody": body(json!({"question": {"type": "string"}, "budget": {"type": "integer", "default": 2700, "minimum": 1},
                    "mode": {"type": "string", "default": "full"}, "rerank": {"type": "boolean", "default": false}}), json!(["question"])),
                "responses": ok("{question, status, answer, context, source_refs, evidence, pages, trajectories, llm}")}},
            "/v1/namespaces/{ns}/pages": {"get": {"summary": "The current wiki pages", "parameters": [ns], "responses": ok("{pages}")}},
            "/v1/namespaces/{ns}/records/{id}": {"get": {"summary": "Any record by id", "parameters": [ns, id], "responses": ok("{kind, record}")}},
            "/v1/namespaces/{ns}/history/{id}": {"get": {"summary": "A trajectory's or claim's ADD / REVISE / DEPRECATE timeline with sources",
                "parameters": [ns, id, {"name": "as_of", "in": "query", "schema": {"type": "string"}, "description": "Only ops up to this time"}],
                "responses": ok("{entries}")}},
            "/v1/namespaces/{ns}/build": {"post": {"summary": "Build the namespace as a job; 202 with the job's id, 409 while one runs",
                "parameters": [ns],
                "requestBody": body(json!({"rebuild": {"type": "boolean", "default": false}, "flush": {"type": "boolean", "default": false}}), json!([])),
                "responses": {"202": {"description": "{job, namespace, status}"}}}},
            "/v1/jobs/{id}": {"get": {"summary": "A build job: stage, progress, then its report or error",
                "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
                "responses": ok("{job, namespace, status, stage, embedded, to_embed, elapsed_ms, report?, error?}")}},
            "/v1/namespaces/{ns}/runs": {"post": {"summary": "Append agent runs and compile them (deterministic compiler)",
                "parameters": [ns],
                "requestBody": body(json!({"runs": {"type": "array", "items": {"type": "object"}},
                    "compile": {"type": "boolean", "default": true}}), json!(["runs"])),
                "responses": ok("{added, unchanged, compiled}")}},
            "/v1/namespaces/{ns}/runs/context": {"post": {"summary": "The first context for a new task from the compiled runs",
                "parameters": [ns],
                "requestBody": body(json!({"task": {"type": "string"}, "similar": {"type": "integer"}, "budget": {"type": "integer"}}), json!(["task"])),
                "responses": ok("{insights, omitted, similar, text}")}},
            "/v1/namespaces/{ns}/runs/grep": {"get": {"summary": "Exact search of every run's task, actions and observations",
                "parameters": [ns, {"name": "pattern", "in": "query", "required": true, "schema": {"type": "string"}},
                    {"name": "limit", "in": "query", "schema": {"type": "integer", "default": 20}}],
                "responses": ok("{hits}")}},
            "/v1/namespaces/{ns}/runs/{id}": {"get": {"summary": "A run with every step, its compilation and insights", "parameters": [ns, id], "responses": ok("{run, outcome, compilation, insights}")}},
            "/v1/namespaces/{ns}/insights/{id}": {"get": {"summary": "An insight, its compilation, its run and the steps it cites", "parameters": [ns, id], "responses": ok("{insight, compilation, run, cited_steps}")}}
        }
    })
}

/// An HTML answer.
fn html(status: StatusCode, body: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        body,
    )
        .into_response()
}

/// A failure as an HTML page (the viewer's errors), with the same status.
fn html_failure(f: Failure) -> Response {
    let body = format!(
        "<h1>{}</h1><p>{}</p>",
        f.status,
        crate::viewer::escape(&f.message)
    );
    html(
        f.status,
        crate::viewer::page("error", "<a href=\"/view\">namespaces</a>", &body),
    )
}

async fn view_namespaces(State(state): State<Arc<AppState>>) -> Response {
    let listed = state
        .with_store(|_, store| {
            let mut rows = String::new();
            for (ns, messages, runs) in listed(store)? {
                rows.push_str(&format!(
                    "<li><a href=\"/view/{}/\">{}</a> — {messages} messages, {runs} runs</li>",
                    url_segment(ns.as_str()),
                    crate::viewer::escape(ns.as_str())
                ));
            }
            Ok(rows)
        })
        .await;
    match listed {
        Ok(rows) => html(
            StatusCode::OK,
            crate::viewer::page(
                "namespaces",
                "<b>trajwiki</b>",
                &format!("<h1>Namespaces</h1><ul>{rows}</ul>"),
            ),
        ),
        Err(f) => html_failure(f),
    }
}

/// A namespace name as one URL path segment.
fn url_segment(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn view_nav(ns: &Namespace, question: &str, budget: usize) -> String {
    format!(
        "<a href=\"/view\">namespaces</a> · <a href=\"/view/{}/\">{}</a> {}",
        url_segment(ns.as_str()),
        crate::viewer::escape(ns.as_str()),
        crate::viewer::search_form(
            &format!("/view/{}/query", url_segment(ns.as_str())),
            question,
            budget
        )
    )
}

async fn view_index(state: State<Arc<AppState>>, Segments(ns): Segments<String>) -> Response {
    view_file(state, Segments((ns, "index.md".into()))).await
}

async fn view_file(
    State(state): State<Arc<AppState>>,
    Segments((ns, path)): Segments<(String, String)>,
) -> Response {
    let ns = match namespace(&ns) {
        Ok(ns) => ns,
        Err(f) => return html_failure(f),
    };
    let shown = state
        .with_store(move |state, store| {
            let folder = state.view_folder(store, &ns)?;
            let md = folder.value.get(&path).ok_or_else(|| {
                Failure::new(
                    StatusCode::NOT_FOUND,
                    "not_found",
                    format!("no page {path} in {ns}"),
                )
            })?;
            let title = crate::viewer::title_of(md);
            Ok(crate::viewer::page(
                &title,
                &view_nav(&ns, "", 2700),
                &crate::viewer::markdown(md),
            ))
        })
        .await;
    match shown {
        Ok(body) => html(StatusCode::OK, body),
        Err(f) => html_failure(f),
    }
}

#[derive(Debug, Deserialize)]
struct ViewQuery {
    q: Option<String>,
    budget: Option<usize>,
}

async fn view_query(
    State(state): State<Arc<AppState>>,
    Segments(ns): Segments<String>,
    Params(q): Params<ViewQuery>,
) -> Response {
    let ns = match namespace(&ns) {
        Ok(ns) => ns,
        Err(f) => return html_failure(f),
    };
    let (question, budget) = (q.q.unwrap_or_default(), q.budget.unwrap_or(2700));
    if question.trim().is_empty() || budget == 0 {
        return html_failure(Failure::bad_request(
            "give a question (q) and a budget of at least 1",
        ));
    }
    let shown = state
        .with_store(move |state, store| {
            let found = state.search(store, &ns, &question, Mode::Full, budget)?;
            Ok(crate::viewer::page(
                &question,
                &view_nav(&ns, &question, budget),
                &crate::viewer::query(&found),
            ))
        })
        .await;
    match shown {
        Ok(body) => html(StatusCode::OK, body),
        Err(f) => html_failure(f),
    }
}

impl AppState {
    /// The viewer's pages of `ns` (its markdown export by path), made again when its index
    /// state changed.
    fn view_folder(
        &self,
        store: &mut Store,
        ns: &Namespace,
    ) -> Result<Arc<AtState<HashMap<String, String>>>, Failure> {
        let current = store.index_state(ns).map_err(Failure::from_store)?;
        let made = |files: Result<Vec<crate::markdown::MarkdownFile>, _>| {
            let files = files.map_err(|e| match e {
                crate::markdown::MarkdownError::Empty { .. } => {
                    Failure::new(StatusCode::NOT_FOUND, "not_found", e.to_string())
                }
                crate::markdown::MarkdownError::Store(e) => Failure::from_store(e),
                e => Failure::internal(e.to_string()),
            })?;
            let bytes = files.iter().map(|f| f.path.len() + f.text.len()).sum();
            Ok((files.into_iter().map(|f| (f.path, f.text)).collect(), bytes))
        };
        if !current.has_messages() {
            // The index state follows messages and builds, not runs and their compilations: a
            // run memory's pages are made for each request, not kept.
            let (files, _) = made(crate::markdown::runs(store, ns))?;
            return Ok(Arc::new(AtState {
                state: current,
                value: files,
            }));
        }
        current_or_made(&self.views, ns, current, |_| {
            made(crate::markdown::wiki(store, ns))
        })
        .map(|(folder, _)| folder)
    }
}
