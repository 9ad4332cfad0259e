//! `trajwiki serve`: the memory over HTTP, as JSON. Every route but `/health` is scoped to one
//! namespace (a record of another namespace is not found there, whatever its id), so one
//! server can hold the memories of many users. Requests run the store and retrieval work on
//! blocking threads beside the async runtime; each takes a store connection from the engine's
//! small pool. The state between requests is one [`Engine`](crate::Engine)'s: loaded indexes in a
//! byte-bounded LRU cache, each with the state of its namespace it was loaded at
//! ([`IndexState`](crate::store::IndexState): the last message's ingest position and the
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
//! | `GET /openapi.json` | these routes as an OpenAPI 3.1 document, made with the router from the handlers and their request types (utoipa; no token needed) |
//! | `GET /v1/namespaces` | every namespace with its message and run counts |
//! | `DELETE /v1/namespaces/{ns}` | deletes a namespace for good (as `trajwiki delete`) |
//! | `POST /v1/embeddings` | OpenAI-compatible: `{"input": text or [texts], "model"?, "encoding_format"?: "float" or "base64", "dimensions"?}` → `{"data": [{"embedding"}]}` |
//! | `GET /v1/models` | OpenAI-compatible: `{"object": "list", "data": [{"id", "object": "model", "created", "owned_by"}]}`, the one model embeddings take (its `id` is their `model`) |
//! | `GET /v1/models/{id}` | that model, when `id` names it (404 otherwise) |
//! | `POST /v1/namespaces/{ns}/messages` | `{"messages": [...], "build"?: true, "flush"?: false}`: append (the ingest fields; `seq` continues the session), then build incrementally |
//! | `POST /v1/namespaces/{ns}/search` | `{"question", "budget"?, "mode"?}` → context, evidence, retrieval path |
//! | `POST /v1/namespaces/{ns}/ask` | `{"question", "budget"?, "mode"?, "rerank"?}` → the answer (or abstention) with its cited sources, checked, and the evidence (as `trajwiki ask --json`) |
//! | `GET /v1/namespaces/{ns}/pages` | the current wiki pages (id, kind, title, trajectories) |
//! | `GET /v1/namespaces/{ns}/records/{id}` | any record by id: page, trajectory, snapshot, claim (with its status), op, message, run, compilation, insight |
//! | `GET /v1/namespaces/{ns}/history/{id}?as_of=T` | a trajectory's or claim's ADD / REVISE / DEPRECATE timeline with sources |
//! | `POST /v1/namespaces/{ns}/build` | `{"rebuild"?, "flush"?}`: a build as a job (202 with its id; 409 while one runs) |
//! | `GET /v1/jobs/{id}` | a job: its stage, texts embedded of those to embed, messages folded of those to fold, elapsed time, then its build report or error |
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

use crate::compute::ScoringBackend;
use crate::memory::BuildReport;
use crate::retrieve::{Mode, RetrievalConfig};
use crate::store::{Store, StoreError};
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use trajwiki_core::{Embedder, Namespace};
use trajwiki_engine::Listed;
use utoipa::{IntoParams, OpenApi, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use crate::api::{self, ApiError};
use crate::cache::{current_or_made, AtState, BoundedCache};
use crate::engine::Model;
use crate::pipeline::BuildOptions;
use crate::trace::TraceError;
use crate::Engine;
use codes::Code;
use extract::{Body, Id, IdParam, Ns, NsParam, Params, Segments};
pub use mcp::McpOptions;
use mcp::MemoryTools;
pub use perimeter::{serve, AllowedHostError, AllowedHosts, Limits};

mod codes;
mod extract;
mod jobs;
mod mcp;
mod perimeter;
mod refusals;
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
    pub llm: Option<crate::llm::LlmConfig>,
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
    views: Mutex<BoundedCache<AtState<HashMap<String, String>>>>,
    /// Build jobs, by id: the running ones and the last finished ones.
    jobs: Mutex<jobs::Jobs>,
    llm: Option<crate::llm::LlmConfig>,
    /// The store's location as it may appear in an error's text (as given, and absolute),
    /// longest first: taken out of every message a client sees.
    store_names: Vec<String>,
    /// The OpenAPI document of the routes, made with them.
    openapi: std::sync::OnceLock<utoipa::openapi::OpenApi>,
    /// When the server started, in seconds since the Unix epoch (the `created` of its model in
    /// `GET /v1/models`).
    started: u64,
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
        let appended = self
            .engine
            .namespace(ns)
            .append(store, via, &parsed, options)?;
        let mut value = json!({
            "namespace": ns, "added": appended.ingest.added, "unchanged": appended.ingest.unchanged,
        });
        let report = |built: &BuildReport| {
            serde_json::to_value(built)
                .map_err(|e| Failure::internal(format!("serializing the build report: {e}")))
        };
        match appended.build {
            None => {}
            Some(Ok(built)) => value["built"] = report(&built)?,
            // Stored, and the build did not follow (undone whole, its files with it): the
            // reply says why.
            Some(Err(e)) => {
                let failed = self.public(Failure::from(e));
                value["not_done"] = json!({
                    "step": "build", "code": failed.code, "message": failed.message,
                });
            }
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
    code: Code,
    message: String,
}

impl Failure {
    fn new(status: StatusCode, code: Code, message: impl Into<String>) -> Self {
        Failure {
            status,
            code,
            message: message.into(),
        }
    }

    fn bad_request(message: impl Into<String>) -> Self {
        Failure::new(StatusCode::BAD_REQUEST, Code::BadRequest, message)
    }

    fn internal(message: impl Into<String>) -> Self {
        Failure::new(StatusCode::INTERNAL_SERVER_ERROR, Code::Internal, message)
    }

    fn from_store(e: StoreError) -> Self {
        Failure::from(e)
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        Failure::of(&e)
    }
}

/// A namespace without messages (or one outside an MCP server's scope), as a client is told:
/// without the store's path, which the CLI's message names.
fn unknown_namespace(ns: &Namespace) -> Failure {
    Failure::new(
        StatusCode::NOT_FOUND,
        Code::UnknownNamespace,
        format!("namespace {ns} has no messages"),
    )
}

impl From<ApiError> for Failure {
    fn from(e: ApiError) -> Self {
        if let ApiError::UnknownNamespace { namespace, .. } = &e {
            return unknown_namespace(namespace);
        }
        Failure::of(&e)
    }
}

impl From<TraceError> for Failure {
    fn from(e: TraceError) -> Self {
        match &e {
            // The cause's status (a full disk is 507), with what was committed before it.
            TraceError::Partial { source, .. } => {
                let cause = Failure::of(source.as_ref());
                Failure::new(cause.status, cause.code, format!("{e}: {}", cause.message))
            }
            _ => Failure::of(&e),
        }
    }
}

impl Failure {
    /// An engine error as a client is told it: the status and code of its kind (which the
    /// engine decides once for every face, `trajwiki::failure`) and its message; a failure of
    /// the server's own with its causes, so that an operator can tell one from another.
    fn of(e: &(dyn std::error::Error + 'static)) -> Failure {
        use crate::failure::FailureKind as K;
        let (status, code) = match crate::failure::kind(e) {
            K::BadInput => (StatusCode::BAD_REQUEST, Code::BadRequest),
            K::BadId => (StatusCode::BAD_REQUEST, Code::BadId),
            K::TooLarge => (StatusCode::PAYLOAD_TOO_LARGE, Code::TooLarge),
            K::NotFound => (StatusCode::NOT_FOUND, Code::NotFound),
            K::UnknownNamespace => (StatusCode::NOT_FOUND, Code::UnknownNamespace),
            K::NoRuns => (StatusCode::NOT_FOUND, Code::NoRuns),
            K::NotBuilt => (StatusCode::CONFLICT, Code::NotBuilt),
            K::NotCompiled => (StatusCode::CONFLICT, Code::NotCompiled),
            K::NoHistory => (StatusCode::BAD_REQUEST, Code::NoHistory),
            K::ModelMismatch => (StatusCode::CONFLICT, Code::ModelMismatch),
            K::Stale => (StatusCode::CONFLICT, Code::Stale),
            K::Conflict => (StatusCode::CONFLICT, Code::Conflict),
            K::SessionFull => (StatusCode::CONFLICT, Code::SessionFull),
            K::ReadOnly => (StatusCode::FORBIDDEN, Code::ReadOnly),
            // Not the request's fault, and not the server's to mend: it answers again once it
            // is started on the store's new place.
            K::StoreMoved => (StatusCode::SERVICE_UNAVAILABLE, Code::StoreMoved),
            K::StorageFull => (StatusCode::INSUFFICIENT_STORAGE, Code::StorageFull),
            // The server opened its store and loaded its model: what remains is its own.
            K::NoStore | K::UnusableStore | K::Store | K::NoModel | K::Model | K::Internal => {
                return Failure::internal(crate::failure::chain(e));
            }
        };
        Failure::new(status, code, e.to_string())
    }
}

/// Every failure's body: `{"error": {"code", "message"}}`.
#[derive(Serialize, ToSchema)]
struct ErrorBody {
    error: ErrorDetail,
}

/// A failure's stable code and its message.
#[derive(Serialize, ToSchema)]
struct ErrorDetail {
    /// A stable code, one of those listed (README says when each is sent).
    #[schema(schema_with = codes::schema)]
    code: Code,
    /// What went wrong, for a person.
    message: String,
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code,
                message: self.message,
            },
        };
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
    // The JSON API: each route registered with its OpenAPI operation (utoipa's `routes!` takes
    // the method and path from the handler's `#[utoipa::path]`), so the document is the router.
    let (ask_schemas, ask_paths, ask_route) = routes!(ask);
    let v1 = OpenApiRouter::new()
        .routes(routes!(namespaces))
        .routes(routes!(delete_namespace))
        .routes(routes!(embeddings))
        .routes(routes!(models))
        .routes(routes!(model))
        .routes(routes!(search))
        .routes(routes!(append))
        .routes(routes!(pages))
        .routes(routes!(record))
        .routes(routes!(history))
        .routes(routes!(append_runs))
        .routes(routes!(jobs::start_build))
        .routes(routes!(jobs::job))
        .routes(routes!(run_context))
        .routes(routes!(run_grep))
        .routes(routes!(run))
        .routes(routes!(insight))
        .route_layer(deadline(limits.request_timeout))
        // An answer from a language model may take several of its calls.
        .routes((
            ask_schemas,
            ask_paths,
            ask_route.route_layer(deadline(limits.ask_timeout)),
        ))
        .route_layer(authorized());
    let (api, document) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(health))
        .routes(routes!(openapi))
        .nest("/v1", v1)
        .split_for_parts();
    state.openapi.get_or_init(|| conventions(document));
    let view = Router::new()
        .route("/view", get(view_namespaces))
        .route("/view/{ns}/", get(view_index))
        .route("/view/{ns}/query", get(view_query))
        .route("/view/{ns}/{*path}", get(view_file))
        .route_layer(deadline(limits.request_timeout))
        .route_layer(authorized());
    Ok(api
        .route("/", get(to_viewer))
        .merge(view)
        .merge(mcp)
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
        views: Mutex::new(BoundedCache::new(config.index_cache_bytes / 4)),
        jobs: Mutex::new(jobs::Jobs::default()),
        llm: config.llm,
        store_names: store_names(&config.store),
        openapi: std::sync::OnceLock::new(),
        started: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
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
                Code::Unauthorized,
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
            Code::TooLarge,
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
    Failure::new(StatusCode::NOT_FOUND, Code::NoRoute, "no such route")
}

/// A route asked with a method it does not take (405, as JSON).
async fn method_not_allowed(method: axum::http::Method) -> Failure {
    Failure::new(
        StatusCode::METHOD_NOT_ALLOWED,
        Code::MethodNotAllowed,
        format!("this route does not take {method}"),
    )
}

/// `GET /`: a person opening the server's address in a browser gets the viewer.
async fn to_viewer() -> axum::response::Redirect {
    axum::response::Redirect::to("/view")
}

/// Liveness: the server answers.
#[utoipa::path(get, path = "/health", tag = "server", security(()),
    responses((status = 200, description = "Alive: `{status, version}`")))]
async fn health() -> Json<Value> {
    Json(json!({"status": "ok", "version": env!("CARGO_PKG_VERSION")}))
}

fn namespace(name: &str) -> Result<Namespace, Failure> {
    Namespace::new(name).map_err(|e| Failure::from(ApiError::Id(e)))
}

/// Every namespace with its message and run counts.
#[utoipa::path(get, path = "/namespaces", tag = "memory",
    responses((status = 200, description = "Every namespace with its message and run counts: `{namespaces}`")))]
async fn namespaces(State(state): State<Arc<AppState>>) -> Result<Json<Value>, Failure> {
    state
        .with_store(|state, store| {
            let out = state.engine.namespaces(store)?;
            Ok(Json(json!({"namespaces": out})))
        })
        .await
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct SearchRequest {
    /// The question.
    question: String,
    /// The context's size, in whitespace tokens.
    #[serde(default = "default_budget")]
    #[schema(default = 2700, minimum = 1)]
    budget: usize,
    /// The retrieval mode (`full` when none).
    #[serde(default)]
    #[schema(example = "full")]
    mode: Option<String>,
}

fn default_budget() -> usize {
    2700
}

/// Evidence for a question: a context under a budget, its sources, the retrieval path.
#[utoipa::path(post, path = "/namespaces/{ns}/search", tag = "memory", params(NsParam),
    request_body = SearchRequest,
    responses((status = 200, description = "Evidence for a question: `{context, evidence, ranking, timings}`")))]
async fn search(
    State(state): State<Arc<AppState>>,
    Ns(ns): Ns,
    Body(req): Body<SearchRequest>,
) -> Result<Json<Value>, Failure> {
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

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct AskRequest {
    /// The question.
    question: String,
    /// The context's size, in whitespace tokens.
    #[serde(default = "default_budget")]
    #[schema(default = 2700, minimum = 1)]
    budget: usize,
    /// The retrieval mode (`full` when none).
    #[serde(default)]
    #[schema(example = "full")]
    mode: Option<String>,
    /// Have the model reorder the routed pages and the selected trajectories first.
    #[serde(default)]
    rerank: bool,
}

/// An answer from the server's language model with its cited sources, or an abstention.
///
/// A question answered by the server's language model from the namespace's kept index (the
/// CLI's `ask`: the answer checked against its sources, abstaining when they do not hold it);
/// without a model, the evidence alone.
#[utoipa::path(post, path = "/namespaces/{ns}/ask", tag = "memory", params(NsParam),
    request_body = AskRequest,
    responses((status = 200, description = "An answer with its cited sources, or an abstention, and the evidence: `{question, status, answer, context, source_refs, evidence, llm}`")))]
async fn ask(
    State(state): State<Arc<AppState>>,
    Ns(ns): Ns,
    Body(req): Body<AskRequest>,
) -> Result<Json<Value>, Failure> {
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

/// The namespace's current wiki pages.
#[utoipa::path(get, path = "/namespaces/{ns}/pages", tag = "memory", params(NsParam),
    responses((status = 200, description = "The current wiki pages: `{pages}`")))]
async fn pages(State(state): State<Arc<AppState>>, Ns(ns): Ns) -> Result<Json<Value>, Failure> {
    state
        .with_store(move |state, store| {
            let handle = state.engine.namespace(&ns);
            let pages = handle.pages(store)?;
            // Only a namespace without pages is counted (a count reads the whole namespace).
            if pages.is_empty() {
                handle.existing(store)?;
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

/// Any record of the namespace by id.
#[utoipa::path(get, path = "/namespaces/{ns}/records/{id}", tag = "memory", params(NsParam, IdParam),
    responses((status = 200, description = "Any record by id: `{kind, record}`")))]
async fn record(
    State(state): State<Arc<AppState>>,
    Ns(ns): Ns,
    Id(id): Id,
) -> Result<Json<Value>, Failure> {
    state
        .with_store(move |_, store| {
            let found = api::get_in(store, &ns, &id)?;
            Ok(Json(
                json!({"kind": found.kind().name(), "record": found.to_json()}),
            ))
        })
        .await
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct HistoryQuery {
    /// Only the ops up to this time (`2023-05-08T13:56:00` or a date).
    as_of: Option<String>,
}

/// A trajectory's or claim's ADD / REVISE / DEPRECATE timeline with its sources.
#[utoipa::path(get, path = "/namespaces/{ns}/history/{id}", tag = "memory", params(NsParam, IdParam, HistoryQuery),
    responses((status = 200, description = "A trajectory's or claim's ADD / REVISE / DEPRECATE timeline with sources: `{entries}`")))]
async fn history(
    State(state): State<Arc<AppState>>,
    Ns(ns): Ns,
    Id(id): Id,
    Params(q): Params<HistoryQuery>,
) -> Result<Json<Value>, Failure> {
    let as_of = match &q.as_of {
        Some(t) => Some(crate::ingest::jsonl::parse_timestamp(t).ok_or_else(|| {
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

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct AppendRequest {
    /// The messages, with the ingest fields (`seq` continues the session).
    #[schema(value_type = Vec<Object>)]
    messages: Value,
    /// Fold them into the memory now.
    #[serde(default = "yes")]
    #[schema(default = true)]
    build: bool,
    /// Write the index segment through at once.
    #[serde(default)]
    flush: bool,
}

fn yes() -> bool {
    true
}

/// Appends messages and folds them into the memory.
///
/// Appends messages to a namespace and (unless `build` is false) folds them into its memory:
/// the work of one message, not of the history, when the namespace's fold is kept from the last
/// append. Appends to one namespace are serialised; other namespaces and readers go on.
///
/// An `Idempotency-Key` header makes a retried request a no-op: each of its messages without
/// `seq` or `ref` is stored with the ref `KEY#N` (N its place in the list, from 1), by which the
/// retry finds it (`unchanged`).
#[utoipa::path(post, path = "/namespaces/{ns}/messages", tag = "memory", params(NsParam,
        ("Idempotency-Key" = Option<String>, Header, description = "Makes a retried request a no-op")),
    request_body = AppendRequest,
    responses((status = 200, description = "Appended and folded into the memory: `{added, unchanged, built}`"),
        (status = 202, description = "Appended, and what was to follow did not: `{added, unchanged, not_done: {step, code, message}}` (`step` is `build`: the messages are stored, their build was undone whole, its vector rows with it)")))]
async fn append(
    State(state): State<Arc<AppState>>,
    Ns(ns): Ns,
    headers: axum::http::HeaderMap,
    Body(req): Body<AppendRequest>,
) -> Result<(StatusCode, Json<Value>), Failure> {
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
                .map(|value| {
                    // Stored, and not all that was asked followed: not a plain success.
                    let status = if value.get("not_done").is_some() {
                        StatusCode::ACCEPTED
                    } else {
                        StatusCode::OK
                    };
                    (status, Json(value))
                })
        })
        .await
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct AppendRunsRequest {
    /// The runs, with the runs JSONL fields.
    #[schema(value_type = Vec<Object>)]
    runs: Vec<Value>,
    /// Compile them now (the deterministic compiler).
    #[serde(default = "yes")]
    #[schema(default = true)]
    compile: bool,
}

/// Appends agent runs and compiles them.
///
/// Appends agent runs to a namespace and (unless `compile` is false) compiles them with the
/// deterministic compiler: the work of these runs, not of the namespace's others. Serialised
/// with the namespace's other writes.
#[utoipa::path(post, path = "/namespaces/{ns}/runs", tag = "runs", params(NsParam),
    request_body = AppendRunsRequest,
    responses((status = 200, description = "Appended and compiled: `{added, unchanged, compiled}`")))]
async fn append_runs(
    State(state): State<Arc<AppState>>,
    Ns(ns): Ns,
    Body(req): Body<AppendRunsRequest>,
) -> Result<Json<Value>, Failure> {
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
            // Errors name the item as a line of `runs`: line N is item N.
            let runs =
                crate::ingest::jsonl::parse_runs(std::path::Path::new("runs"), &text, Some(&ns))
                    .map_err(|e| Failure::bad_request(e.to_string()))?;
            let (report, compiled) =
                state
                    .engine
                    .namespace(&ns)
                    .add_runs(store, "http", &runs, req.compile)?;
            let mut value = json!({
                "namespace": ns, "added": report.added, "unchanged": report.unchanged,
            });
            if let Some(compiled) = compiled {
                value["compiled"] = serde_json::to_value(&compiled).map_err(|e| {
                    Failure::internal(format!("serializing the compile report: {e}"))
                })?;
            }
            Ok(Json(value))
        })
        .await
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct ContextRequest {
    /// The new task.
    task: String,
    /// How many similar runs to draw on.
    #[serde(default)]
    similar: Option<usize>,
    /// The context's size, in whitespace tokens.
    #[serde(default)]
    budget: Option<usize>,
}

/// The first context for a new task from the compiled runs.
#[utoipa::path(post, path = "/namespaces/{ns}/runs/context", tag = "runs", params(NsParam),
    request_body = ContextRequest,
    responses((status = 200, description = "The first context for a new task from the compiled runs: `{insights, omitted, similar, text}`")))]
async fn run_context(
    State(state): State<Arc<AppState>>,
    Ns(ns): Ns,
    Body(req): Body<ContextRequest>,
) -> Result<Json<Value>, Failure> {
    trajwiki_core::limits::QUESTION_BYTES
        .check(req.task.len())
        .map_err(|e| Failure::from(ApiError::Limit(e)))?;
    state
        .with_store(move |state, store| {
            let defaults = crate::wikitrace::ContextOptions::default();
            let options = crate::wikitrace::ContextOptions {
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

/// A run with every step, its compilation and insights.
#[utoipa::path(get, path = "/namespaces/{ns}/runs/{id}", tag = "runs", params(NsParam, IdParam),
    responses((status = 200, description = "A run with every step, its compilation and insights")))]
async fn run(
    State(state): State<Arc<AppState>>,
    Ns(ns): Ns,
    Id(id): Id,
) -> Result<Json<Value>, Failure> {
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

/// An insight with its compilation, its run and the steps it cites.
#[utoipa::path(get, path = "/namespaces/{ns}/insights/{id}", tag = "runs", params(NsParam, IdParam),
    responses((status = 200, description = "An insight, its compilation, its run and the steps it cites")))]
async fn insight(
    State(state): State<Arc<AppState>>,
    Ns(ns): Ns,
    Id(id): Id,
) -> Result<Json<Value>, Failure> {
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

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct GrepQuery {
    /// The exact text to find.
    pattern: String,
    /// At most this many hits (1,000 at most).
    #[serde(default = "default_grep_limit")]
    #[param(default = 20)]
    limit: usize,
}

fn default_grep_limit() -> usize {
    20
}

/// Exact search of every run's task, actions and observations.
#[utoipa::path(get, path = "/namespaces/{ns}/runs/grep", tag = "runs", params(NsParam, GrepQuery),
    responses((status = 200, description = "Exact matches in every run's task, actions and observations: `{hits}`")))]
async fn run_grep(
    State(state): State<Arc<AppState>>,
    Ns(ns): Ns,
    Params(q): Params<GrepQuery>,
) -> Result<Json<Value>, Failure> {
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

/// Deletes a namespace for good (as `trajwiki delete`).
#[utoipa::path(delete, path = "/namespaces/{ns}", tag = "memory", params(NsParam),
    responses((status = 200, description = "Deleted for good: `{deleted, messages, runs, scrubbed}`")))]
async fn delete_namespace(
    State(state): State<Arc<AppState>>,
    Ns(ns): Ns,
) -> Result<Json<Value>, Failure> {
    state
        .with_store(move |state, store| {
            // Not while the namespace is being appended to; its kept fold goes with it.
            let deleted = state.engine.namespace(&ns).delete(store)?;
            if !deleted.existed {
                return Err(state.engine.namespace(&ns).unknown().into());
            }
            if deleted.not_scrubbed == Some(crate::store::NotScrubbed::StorageFull) {
                // The records are gone, their bytes not yet: the client must hear it.
                return Err(Failure::new(
                    StatusCode::INSUFFICIENT_STORAGE,
                    Code::StorageFull,
                    format!(
                        "namespace {ns} is deleted, but the store's files still hold its text: {} (free space, then `trajwiki delete --scrub`)",
                        crate::store::NotScrubbed::StorageFull
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

#[derive(Debug, Deserialize, ToSchema)]
struct EmbeddingsRequest {
    /// A text or a list of texts.
    #[schema(schema_with = one_or_more_texts)]
    input: Value,
    /// The server's model, when given (another is refused).
    #[serde(default)]
    model: Option<String>,
    /// `float` (the default): each vector a list of numbers; `base64`: each vector its
    /// little-endian 32-bit floats in base64 (what OpenAI's Python client asks for).
    #[serde(default)]
    #[schema(example = "float")]
    encoding_format: Option<String>,
    /// The model's dimension, when given (the vectors are not shortened: another is refused).
    #[serde(default)]
    dimensions: Option<usize>,
    /// OpenAI's end-user id: taken and not used.
    #[serde(default)]
    #[allow(dead_code)]
    user: Option<String>,
}

/// A text or a list of texts (the embeddings request's `input`).
fn one_or_more_texts() -> utoipa::openapi::Schema {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, Type};
    let text = || ObjectBuilder::new().schema_type(Type::String);
    utoipa::openapi::Schema::OneOf(
        OneOfBuilder::new()
            .item(text())
            .item(ArrayBuilder::new().items(text()))
            .build(),
    )
}

/// At most this many texts in one embeddings request.
const MAX_EMBED_INPUTS: usize = 2048;

/// OpenAI-compatible embeddings with the server's model.
///
/// OpenAI's `POST /v1/embeddings`, so that existing embedding clients can use the engine: the
/// server's model embeds the texts as documents (unit vectors, as float lists).
#[utoipa::path(post, path = "/embeddings", tag = "embeddings", request_body = EmbeddingsRequest,
    responses((status = 200, description = "OpenAI-compatible embeddings with the server's model", body = EmbeddingsResponse)))]
async fn embeddings(
    State(state): State<Arc<AppState>>,
    Body(req): Body<EmbeddingsRequest>,
) -> Result<Response, Failure> {
    let embedder = state.embedder()?;
    let served = embedder.model_id().to_string();
    if let Some(m) = req.model.as_deref().filter(|m| *m != served) {
        return Err(Failure::bad_request(format!(
            "field `model`: this server embeds with {served:?}, not {m:?} (`GET /v1/models` lists it)"
        )));
    }
    let base64 = match req.encoding_format.as_deref() {
        None | Some("float") => false,
        Some("base64") => true,
        Some(f) => {
            return Err(Failure::bad_request(format!(
                "field `encoding_format`: \"float\" or \"base64\", not {f:?}"
            )))
        }
    };
    if let Some(d) = req.dimensions.filter(|d| *d != embedder.dim()) {
        return Err(Failure::bad_request(format!(
            "field `dimensions`: {served:?} gives vectors of {} dimensions, not {d}",
            embedder.dim()
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
                    Code::TooLarge,
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
            embedding: if base64 {
                Vector::Base64(base64_floats(row))
            } else {
                Vector::Float(row.to_vec())
            },
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

#[derive(serde::Serialize, ToSchema)]
struct EmbeddingItem {
    #[schema(value_type = String, example = "embedding")]
    object: &'static str,
    index: usize,
    embedding: Vector,
}

/// One embedding, in the request's `encoding_format`.
#[derive(serde::Serialize, ToSchema)]
#[serde(untagged)]
enum Vector {
    /// `float`: the values.
    Float(Vec<f32>),
    /// `base64`: the values as little-endian 32-bit floats, in standard base64.
    Base64(String),
}

/// `row` as little-endian 32-bit floats in standard base64 (OpenAI's `encoding_format:
/// "base64"`).
fn base64_floats(row: &[f32]) -> String {
    use base64::Engine as _;
    let bytes: Vec<u8> = row.iter().flat_map(|x| x.to_le_bytes()).collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Token counts are whitespace words (the model's own tokenizer is not consulted).
#[derive(serde::Serialize, ToSchema)]
struct Usage {
    prompt_tokens: usize,
    total_tokens: usize,
}

#[derive(serde::Serialize, ToSchema)]
struct EmbeddingsResponse {
    #[schema(value_type = String, example = "list")]
    object: &'static str,
    data: Vec<EmbeddingItem>,
    model: String,
    usage: Usage,
}

/// A model as OpenAI's `GET /v1/models` lists it.
#[derive(Debug, Clone, serde::Serialize, ToSchema)]
struct ModelCard {
    /// The name `POST /v1/embeddings` takes in `model`.
    id: String,
    #[schema(value_type = String, example = "model")]
    object: &'static str,
    /// When the server started with the model loaded, in seconds since the Unix epoch.
    created: u64,
    #[schema(value_type = String, example = "trajwiki")]
    owned_by: &'static str,
}

#[derive(serde::Serialize, ToSchema)]
struct ModelList {
    #[schema(value_type = String, example = "list")]
    object: &'static str,
    data: Vec<ModelCard>,
}

impl AppState {
    /// The model `POST /v1/embeddings` embeds with, as OpenAI's model list shows it.
    fn model_card(&self) -> Result<ModelCard, Failure> {
        Ok(ModelCard {
            id: self.embedder()?.model_id().to_string(),
            object: "model",
            created: self.started,
            owned_by: "trajwiki",
        })
    }
}

/// The embedding model, as OpenAI's model list.
///
/// OpenAI's `GET /v1/models`: the one model this server embeds with, by the name
/// `POST /v1/embeddings` takes in `model`, so that a client can find it.
#[utoipa::path(get, path = "/models", tag = "embeddings",
    responses((status = 200, description = "The server's embedding model, in OpenAI's list shape", body = ModelList)))]
async fn models(State(state): State<Arc<AppState>>) -> Result<Json<ModelList>, Failure> {
    Ok(Json(ModelList {
        object: "list",
        data: vec![state.model_card()?],
    }))
}

/// The embedding model by its id.
///
/// OpenAI's `GET /v1/models/{id}`: the server's embedding model when `id` is its name; 404
/// `not_found` naming the model served otherwise.
#[utoipa::path(get, path = "/models/{id}", tag = "embeddings",
    params(("id" = String, Path, description = "A model's name, as `GET /v1/models` lists it")),
    responses((status = 200, description = "The server's embedding model", body = ModelCard)))]
async fn model(
    State(state): State<Arc<AppState>>,
    Segments(id): Segments<String>,
) -> Result<Json<ModelCard>, Failure> {
    let card = state.model_card()?;
    if id != card.id {
        return Err(Failure::new(
            StatusCode::NOT_FOUND,
            Code::NotFound,
            format!(
                "no model {:?}: this server embeds with {:?} alone",
                id.chars().take(200).collect::<String>(),
                card.id
            ),
        ));
    }
    Ok(Json(card))
}

/// The routes as an OpenAPI 3.1 document.
#[utoipa::path(get, path = "/openapi.json", tag = "server", security(()),
    responses((status = 200, description = "This document (OpenAPI 3.1)")))]
async fn openapi(
    State(state): State<Arc<AppState>>,
) -> Result<Json<utoipa::openapi::OpenApi>, Failure> {
    let document = state.openapi.get().cloned();
    document
        .map(Json)
        .ok_or_else(|| Failure::internal("the OpenAPI document is made with the router"))
}

/// The document's frame; the routes add their operations (see [`router`]).
#[derive(OpenApi)]
#[openapi(
    info(
        title = "trajwiki",
        description = "Long-term memory for LLM agents that never loses the path back to its evidence."
    ),
    security(("bearer" = [])),
    components(schemas(ErrorBody))
)]
struct ApiDoc;

/// What every operation shares, added to `document`: the bearer token's scheme, and the error
/// answer (`{"error": {"code", "message"}}`) as each operation's default response.
fn conventions(mut document: utoipa::openapi::OpenApi) -> utoipa::openapi::OpenApi {
    use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
    use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
    let components = document.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        "bearer",
        SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
    );
    components.responses.insert(
        "Error".into(),
        ResponseBuilder::new()
            .description("An error with a stable code")
            .content(
                "application/json",
                ContentBuilder::new()
                    .schema(Some(Ref::from_schema_name("ErrorBody")))
                    .build(),
            )
            .build()
            .into(),
    );
    for item in document.paths.paths.values_mut() {
        for operation in [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ]
        .into_iter()
        .flatten()
        {
            operation
                .responses
                .responses
                .entry("default".into())
                .or_insert_with(|| Ref::from_response_name("Error").into());
        }
    }
    document
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
        .with_store(|state, store| {
            let mut rows = String::new();
            for Listed {
                namespace: ns,
                messages,
                runs,
            } in state.engine.namespaces(store)?
            {
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
                    Code::NotFound,
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
        let current = self.engine.namespace(ns).state(store)?;
        let made = |files: Result<Vec<crate::markdown::MarkdownFile>, _>| {
            let files = files.map_err(|e| match e {
                crate::markdown::MarkdownError::Empty { .. } => {
                    Failure::new(StatusCode::NOT_FOUND, Code::NotFound, e.to_string())
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
