//! Fuzzing of the HTTP server's request parsers: the JSON body of every route that takes one,
//! the path segments and query strings of every route that reads them, and the headers the
//! perimeter checks. Requests go through the real router in process (no sockets, so that a
//! run reaches many cases), over a real store with a built namespace so that well-formed
//! requests get past parsing into the handlers.
//!
//! Each answer must be an answer: never a 500 (a panic in a handler, a failure we did not
//! name), and every error a JSON body `{"error": {"code", "message"}}` with a stable code.
//! Like tests/fuzz.rs, three kinds of input per target: random bytes, JSON built from the
//! routes' own field names and edge values, and valid requests mutated byte by byte.
//!
//! `cargo test --test fuzz_http` runs each target for `TRAJWIKI_FUZZ_SECONDS` seconds
//! (default: 6); the long runs recorded in BENCHMARKS.md set it to 600.

mod common;
#[path = "common/fuzzing.rs"]
mod fuzzing;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Method, Request};
use fuzzing::{edits, mutate};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{json, Value};
use tower::ServiceExt as _;
use trajwiki::server::{AllowedHosts, Limits, McpOptions, ServerConfig};

/// The namespace built before fuzzing; searched, asked and rebuilt, never appended to (so that
/// its index stays small and a search stays cheap however long the run).
const BUILT: &str = "demo";
/// The namespaces appends go to.
const WRITTEN: &[&str] = &["fz", "demo2", "x"];

/// A router over a store holding the demo conversation (built) and the demo runs (compiled),
/// served with the hashing model. The store's directory lives as long as the router.
fn served() -> (axum::Router, tempfile::TempDir, tokio::runtime::Runtime) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
    let at = store.to_str().unwrap();
    let (demo, runs) = (
        format!("{fixtures}/demo.jsonl"),
        format!("{fixtures}/runs.jsonl"),
    );
    common::ok(&[
        "ingest", "--store", at, "--build", "--model", "hashing", &demo,
    ]);
    common::ok(&["ingest", "--store", at, "--namespace", "runs", &runs]);
    let embedder = trajwiki::api::load_embedder("hashing").unwrap();
    let router = trajwiki::server::router(ServerConfig {
        store,
        embedder: Arc::from(embedder),
        backend: Arc::new(trajwiki::compute::CpuScoring),
        token: None,
        max_body_bytes: 1 << 16,
        index_cache_bytes: 1 << 26,
        mcp: McpOptions {
            namespace: None,
            allow_write: true,
        },
        llm: None,
        allowed_hosts: AllowedHosts::new("127.0.0.1".parse().unwrap(), &[]).unwrap(),
        limits: Limits::default(),
    })
    .unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    (router, dir, runtime)
}

/// One request to send.
#[derive(Debug, Clone)]
struct Req {
    method: Method,
    path: String,
    content_type: Option<&'static str>,
    body: Vec<u8>,
    /// The `Host` and `Origin` headers sent (a loopback name and none when `None`).
    host: Option<String>,
    origin: Option<String>,
}

/// Sends `req` and checks the answer's invariants.
fn check(
    router: &axum::Router,
    runtime: &tokio::runtime::Runtime,
    req: &Req,
) -> Result<(), TestCaseError> {
    let mut builder = Request::builder()
        .method(req.method.clone())
        .uri(&req.path)
        .header("host", req.host.as_deref().unwrap_or("127.0.0.1:8700"))
        .header("accept", "application/json, text/event-stream");
    if let Some(origin) = &req.origin {
        builder = builder.header("origin", origin);
    }
    if let Some(ct) = req.content_type {
        builder = builder.header("content-type", ct);
    }
    let request = builder.body(Body::from(req.body.clone())).unwrap();
    let (status, ct, bytes) = runtime.block_on(async {
        let response =
            tokio::time::timeout(Duration::from_secs(60), router.clone().oneshot(request))
                .await
                .map_err(|_| TestCaseError::fail(format!("no answer in 60 s to {req:?}")))?
                .unwrap();
        let status = response.status();
        let ct = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .map_err(|e| TestCaseError::fail(format!("reading the answer: {e}")))?;
        Ok::<_, TestCaseError>((status, ct, bytes))
    })?;
    let text = String::from_utf8_lossy(&bytes);
    let shown = || {
        format!(
            "{} {} ({:?}, {} body bytes: {:?}) -> {status}: {}",
            req.method,
            req.path,
            req.content_type,
            req.body.len(),
            String::from_utf8_lossy(&req.body[..req.body.len().min(300)]),
            &text[..text.len().min(600)]
        )
    };
    prop_assert!(
        status.as_u16() != 500 && status.as_u16() < 600,
        "a server error: {}",
        shown()
    );
    if req.method == Method::HEAD {
        // A HEAD answer has no body by definition.
        return Ok(());
    }
    if status.is_client_error() || status.is_server_error() {
        // rmcp answers JSON-RPC errors in its own shape on /mcp; the viewer answers a person
        // with a page.
        let viewer_page = req.path.starts_with("/view") && ct.starts_with("text/html");
        if !req.path.starts_with("/mcp") && !viewer_page {
            let body: Value = serde_json::from_slice(&bytes).map_err(|_| {
                TestCaseError::fail(format!("an error that is not JSON: {}", shown()))
            })?;
            prop_assert!(
                body["error"]["code"].is_string() && body["error"]["message"].is_string(),
                "an error without code and message: {}",
                shown()
            );
        }
    } else if status.is_success() && ct.starts_with("application/json") {
        prop_assert!(
            serde_json::from_slice::<Value>(&bytes).is_ok(),
            "a success whose JSON does not parse: {}",
            shown()
        );
    }
    Ok(())
}

/// A route that takes a JSON body, with valid bodies to mutate.
struct BodyRoute {
    path: &'static str,
    seeds: Vec<Value>,
}

fn body_routes() -> Vec<BodyRoute> {
    let message = json!({"speaker": "Ann", "text": "I moved to Oslo in May.", "timestamp": "2024-05-01T10:00:00"});
    let run = json!({"id": "r1", "env": "kitchen", "task": "heat some egg", "success": true,
        "steps": [{"action": "take egg 1", "observation": "You pick up the egg 1."}]});
    vec![
        BodyRoute {
            path: "/v1/namespaces/{w}/messages",
            seeds: vec![
                json!({"messages": [message.clone()]}),
                json!({"messages": [message.clone(), {"role": "Bo", "content": "ok", "session": 2, "seq": 3}], "build": false}),
                json!({"messages": [{"speaker": "Ann", "text": "ok", "timestamp": "2024-05-01T10:00:00", "ref": "k1"}], "build": true, "flush": true}),
            ],
        },
        BodyRoute {
            path: "/v1/namespaces/{b}/search",
            seeds: vec![
                json!({"question": "Where does Maya take classes?"}),
                json!({"question": "pottery", "budget": 300, "mode": "turn-bm25"}),
            ],
        },
        BodyRoute {
            path: "/v1/namespaces/{b}/ask",
            seeds: vec![
                json!({"question": "Who teaches the class?", "budget": 500, "mode": "full", "rerank": true}),
            ],
        },
        BodyRoute {
            path: "/v1/namespaces/{b}/build",
            seeds: vec![json!({}), json!({"rebuild": false, "flush": true})],
        },
        BodyRoute {
            path: "/v1/namespaces/{w}/runs",
            seeds: vec![
                json!({"runs": [run.clone()]}),
                json!({"runs": [run], "compile": false}),
            ],
        },
        BodyRoute {
            path: "/v1/namespaces/runs/runs/context",
            seeds: vec![json!({"task": "heat some mug", "similar": 2, "budget": 400})],
        },
        BodyRoute {
            path: "/v1/embeddings",
            seeds: vec![
                json!({"input": "hello"}),
                json!({"input": ["a", "b"], "model": "hashing", "encoding_format": "float"}),
            ],
        },
        BodyRoute {
            path: "/mcp",
            seeds: vec![
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
                json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "search", "arguments": {"namespace": BUILT, "question": "pottery"}}}),
                json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                    "params": {"name": "add_messages", "arguments": {"namespace": "fz", "messages": [message]}}}),
            ],
        },
    ]
}

/// `{b}` is the built namespace, `{w}` one written to (picked by `pick`).
fn fill(path: &str, pick: usize) -> String {
    path.replace("{b}", BUILT)
        .replace("{w}", WRITTEN[pick % WRITTEN.len()])
}

const FIELDS: &[&str] = &[
    "messages",
    "build",
    "flush",
    "rebuild",
    "question",
    "budget",
    "mode",
    "rerank",
    "runs",
    "compile",
    "task",
    "similar",
    "input",
    "model",
    "encoding_format",
    "namespace",
    "session",
    "seq",
    "speaker",
    "text",
    "timestamp",
    "ref",
    "attachments",
    "role",
    "content",
    "id",
    "env",
    "steps",
    "action",
    "observation",
    "success",
    "reward",
    "jsonrpc",
    "method",
    "params",
    "name",
    "arguments",
    "conversation",
    "sample_id",
];

const STRINGS: &[&str] = &[
    "",
    " ",
    "demo",
    "fz",
    "Ann",
    "full",
    "no-wiki",
    "turn-bm25",
    "latest-snapshot",
    "hashing",
    "2024-01-01T10:00:00",
    "9999-12-31T23:59:59",
    "0000-01-01T00:00:00",
    "tools/call",
    "tools/list",
    "search",
    "add_messages",
    "get_record",
    "msg_0123456789abcdef",
    "\u{1b}[2J",
    "a\0b",
    "\u{202e}",
    "../x",
    "%2e%2e",
    "名前",
    "2.0",
];

/// A JSON value from the routes' vocabulary.
fn value() -> impl Strategy<Value = Value> {
    fuzzing::json_value(STRINGS, FIELDS)
}

/// A JSON object of the routes' fields, some of them nested message, run or call objects.
fn structured() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec((prop::sample::select(FIELDS), value()), 0..8).prop_map(|kv| {
        let obj: serde_json::Map<String, Value> =
            kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        Value::Object(obj).to_string().into_bytes()
    })
}

const CONTENT_TYPES: &[Option<&str>] = &[
    Some("application/json"),
    Some("application/json"),
    Some("application/json"),
    Some("application/json; charset=utf-8"),
    Some("text/plain"),
    Some("application/x-www-form-urlencoded"),
    None,
];

/// A request to a route with a JSON body: random bytes, structured JSON, or one of the route's
/// valid bodies mutated.
fn body_request() -> impl Strategy<Value = Req> {
    let routes = Arc::new(body_routes());
    let n = routes.len();
    let seeds = Arc::clone(&routes);
    let routed_body = prop_oneof![
        1 => (0..n, prop::collection::vec(any::<u8>(), 0..512)),
        3 => (0..n, structured()),
        4 => (0..n, any::<prop::sample::Index>(), edits()).prop_map(move |(r, which, edits)| {
            let seeds = &seeds[r].seeds;
            (r, mutate(seeds[which.index(seeds.len())].to_string().into_bytes(), edits))
        }),
    ];
    (
        routed_body,
        any::<usize>(),
        prop::sample::select(CONTENT_TYPES),
    )
        .prop_map(move |((r, body), pick, content_type)| Req {
            method: Method::POST,
            path: fill(routes[r].path, pick),
            content_type,
            body,
            host: None,
            origin: None,
        })
}

/// A path segment or query value: vocabulary, random text, or escapes.
fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(STRINGS).prop_map(|s| percent(s.as_bytes())),
        prop::sample::select(
            &[
                "msg_0123456789abcdef",
                "traj_0123456789abcdef",
                "page_00",
                "claim_x",
                "%ff%fe",
                "%C0%AF",
                "%00",
                "..",
                "%2F",
                "a%20b",
                "%E2%80%AE",
                "heat-1",
                "run_0",
                "9999999999999999999999",
            ][..]
        )
        .prop_map(str::to_string),
        prop::collection::vec(any::<u8>(), 0..40).prop_map(|b| percent(&b)),
        (1usize..5000).prop_map(|n| "y".repeat(n)),
    ]
}

fn percent(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|&b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// A request to a route that reads its path or query: records, history, runs, insights, grep,
/// jobs, pages, namespaces, the viewer; with the right and wrong methods.
fn path_request() -> impl Strategy<Value = Req> {
    const TEMPLATES: &[&str] = &[
        "/v1/namespaces/{ns}/records/{s}",
        "/v1/namespaces/{ns}/history/{s}?as_of={q}",
        "/v1/namespaces/{ns}/history/{s}",
        "/v1/namespaces/{ns}/runs/{s}",
        "/v1/namespaces/{ns}/insights/{s}",
        "/v1/namespaces/{ns}/runs/grep?pattern={q}&limit={q2}",
        "/v1/namespaces/{ns}/runs/grep?{q}",
        "/v1/namespaces/{ns}/pages",
        "/v1/jobs/{s}",
        "/v1/namespaces",
        "/view",
        "/view/{ns}/",
        "/view/{ns}/query?q={q}&budget={q2}",
        "/view/{ns}/query?{q}",
        "/view/{ns}/{s}",
        "/view/{ns}/{s}/{s}.md",
        "/{s}",
        "/",
        "/health",
        "/openapi.json",
    ];
    const METHODS: &[Method] = &[
        Method::GET,
        Method::GET,
        Method::GET,
        Method::POST,
        Method::PUT,
        Method::PATCH,
        Method::HEAD,
        Method::OPTIONS,
    ];
    (
        prop::sample::select(TEMPLATES),
        prop_oneof![Just(BUILT.to_string()), Just("runs".to_string()), segment()],
        segment(),
        segment(),
        segment(),
        prop::sample::select(METHODS),
        prop::option::weighted(0.2, header_value()),
        prop::option::weighted(0.2, header_value()),
    )
        .prop_map(|(template, ns, s, q, q2, method, host, origin)| Req {
            method,
            path: template
                .replace("{ns}", &ns)
                .replace("{s}", &s)
                .replace("{q}", &q)
                .replace("{q2}", &q2),
            content_type: None,
            body: Vec::new(),
            host,
            origin,
        })
}

/// A `Host` or `Origin` value: this server's names, other sites', and malformed ones.
fn header_value() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(
            &[
                "localhost",
                "localhost:8700",
                "127.0.0.1:9",
                "[::1]:8700",
                "::1",
                "evil.example.com",
                "evil.example.com:8700",
                "http://localhost:8700",
                "http://evil.example.com",
                "null",
                "https://127.0.0.1",
                "localhost.",
                "LOCALHOST",
                "user@localhost",
                "[::1",
                "0",
                "",
                "127.0.0.1:99999",
                "xn--80ak6aa92e.com",
                "http://[::1]:8700",
            ][..]
        )
        .prop_map(str::to_string),
        "[ -~]{0,60}",
    ]
}

/// Runs `strategy`'s requests for the configured time; returns how many ran.
fn fuzz(name: &str, strategy: impl Strategy<Value = Req>) -> u64 {
    let seconds: u64 = std::env::var("TRAJWIKI_FUZZ_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6);
    let (router, _dir, runtime) = served();
    let until = Instant::now() + Duration::from_secs(seconds);
    let mut cases = 0;
    while Instant::now() < until {
        let mut runner = TestRunner::new(Config {
            cases: 64,
            failure_persistence: None,
            ..Config::default()
        });
        if let Err(e) = runner.run(&strategy, |req| check(&router, &runtime, &req)) {
            panic!("{name}: {e}");
        }
        cases += 64;
    }
    eprintln!("{name}: {cases} cases in {seconds} s, no failure");
    cases
}

#[test]
fn http_bodies() {
    assert!(fuzz("http_bodies", body_request()) > 0);
}

#[test]
fn http_paths_and_queries() {
    assert!(fuzz("http_paths_and_queries", path_request()) > 0);
}
