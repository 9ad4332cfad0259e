//! The MCP tools through real clients: the `rmcp` client driving `trajwiki mcp` over stdio (tools
//! listed, each one called, an agent's path followed from a search down to a source message and
//! from a first context down to cited steps), `add_messages` offered only with `--allow-write`,
//! tool errors readable by the agent; and the streamable HTTP transport of `trajwiki serve` at
//! `/mcp`, spoken as plain JSON-RPC over HTTP, behind the bearer token.

mod common;

use std::path::Path;
use std::process::Stdio;

use common::{ok, s};
use rmcp::model::{CallToolRequestParams, CallToolResult, ClientConfig};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};

#[derive(Clone)]
struct Agent;

impl rmcp::ClientHandler for Agent {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::default()
    }
}

/// The demo dialogue memory (namespace `demo`) and the compiled runs (namespace `kitchen`).
fn store(dir: &Path) -> std::path::PathBuf {
    let store = common::demo_store(dir);
    ok(&["ingest", "--store", s(&store), "tests/fixtures/runs.jsonl"]);
    ok(&["trace", "compile", "--store", s(&store), "-q"]);
    store
}

async fn connect(store: &Path, extra: &[&str]) -> RunningService<RoleClient, Agent> {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_trajwiki"));
    command
        .args(["mcp", "--store", s(store), "--model", "hashing"])
        .args(extra)
        .stderr(Stdio::null());
    let transport = TokioChildProcess::new(command).expect("trajwiki mcp starts");
    Agent.serve(transport).await.expect("the MCP handshake")
}

/// Calls a tool; its text and whether it is an error.
async fn call(
    client: &RunningService<RoleClient, Agent>,
    tool: &str,
    args: Value,
) -> (String, bool) {
    let args = args.as_object().expect("arguments are an object").clone();
    let result: CallToolResult = client
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args))
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    let text = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n");
    (text, result.is_error == Some(true))
}

async fn text(client: &RunningService<RoleClient, Agent>, tool: &str, args: Value) -> String {
    let (text, failed) = call(client, tool, args.clone()).await;
    assert!(!failed, "{tool} {args}: {text}");
    assert!(!text.trim().is_empty(), "{tool} {args}: empty");
    text
}

/// The first id with `prefix` (such as `trj_`) in `text`.
fn first_id(text: &str, prefix: &str) -> String {
    let at = text
        .find(prefix)
        .unwrap_or_else(|| panic!("no {prefix} id in:\n{text}"));
    text[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

const READ_TOOLS: [&str; 10] = [
    "claim_history",
    "first_context",
    "grep_runs",
    "list_namespaces",
    "open_insight",
    "open_page",
    "open_run",
    "open_source",
    "open_trajectory",
    "search_memory",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_follows_the_tools_down_to_the_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let client = connect(&store, &["--namespace", "demo"]).await;

    let mut names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| {
            assert!(t.description.as_deref().is_some_and(|d| d.len() > 40));
            t.name.to_string()
        })
        .collect();
    names.sort();
    assert_eq!(names, READ_TOOLS, "no add_messages without --allow-write");

    // Scoped to demo: the other namespace is not listed.
    let listed = text(&client, "list_namespaces", json!({})).await;
    assert_eq!(listed, "demo: 12 messages, 0 runs");
    let everything = connect(&store, &[]).await;
    let listed = text(&everything, "list_namespaces", json!({})).await;
    assert!(listed.contains("demo: 12 messages, 0 runs"), "{listed}");
    assert!(listed.contains("kitchen: 0 messages, 3 runs"), "{listed}");

    // A search: its context is the CLI's, then the path with ids to follow.
    let question = "Which class did Maya sign up for?";
    let found = text(
        &client,
        "search_memory",
        json!({"question": question, "budget": 300}),
    )
    .await;
    let cli: Value = serde_json::from_str(&ok(&[
        "query",
        "--store",
        s(&store),
        "--namespace",
        "demo",
        "--model",
        "hashing",
        "--budget",
        "300",
        "--json",
        question,
    ]))
    .unwrap();
    let context = cli["context"].as_str().unwrap().trim_end();
    assert!(found.starts_with(context), "{found}\n---\n{context}");
    assert!(found.contains("--- retrieval path in demo"), "{found}");

    // Page → trajectory → claim → source message.
    let page = first_id(&found, "pg_");
    let opened = text(&client, "open_page", json!({"id": page})).await;
    assert!(opened.contains(&page), "{opened}");
    let trajectory = first_id(
        &opened[opened.find("trajectories on this page").unwrap()..],
        "trj_",
    );
    let opened = text(&client, "open_trajectory", json!({"id": trajectory})).await;
    assert!(
        opened.starts_with(&format!("trajectory {trajectory} in demo")),
        "{opened}"
    );
    assert!(
        opened.contains("claim clm_") && opened.contains("[active]"),
        "{opened}"
    );
    let message = first_id(&opened[opened.find("sources: ").unwrap()..], "msg_");
    let source = text(&client, "open_source", json!({"id": message})).await;
    assert!(
        source.starts_with(&format!("message {message} in demo")),
        "{source}"
    );
    assert!(source.contains(&format!("> {message}")), "{source}");
    // By the ref a context cites.
    let by_ref = text(&client, "open_source", json!({"id": "S1:3"})).await;
    assert!(
        by_ref.contains("I made my first bowl yesterday."),
        "{by_ref}"
    );

    let history = text(&client, "claim_history", json!({"id": trajectory})).await;
    assert!(
        history.starts_with(&format!("history of {trajectory} in demo")),
        "{history}"
    );
    assert!(
        history.contains(" ADD clm_") && history.contains("source "),
        "{history}"
    );
    let early = text(
        &client,
        "claim_history",
        json!({"id": trajectory, "as_of": "2000-01-01"}),
    )
    .await;
    assert!(early.contains("(0 ops, as of"), "{early}");

    // The run memory: first context → insight → its run's cited steps; grep → run.
    let kitchen = json!("kitchen");
    let ctx = text(
        &everything,
        "first_context",
        json!({"task": "heat some egg and put it in the bin.", "namespace": kitchen}),
    )
    .await;
    let insight = first_id(&ctx, "ins_");
    let opened = text(
        &everything,
        "open_insight",
        json!({"id": insight, "namespace": kitchen}),
    )
    .await;
    assert!(
        opened.starts_with(&format!("insight {insight} (compilation cmp_")),
        "{opened}"
    );
    assert!(opened.contains("cited steps:\n[step "), "{opened}");
    let hits = text(
        &everything,
        "grep_runs",
        json!({"pattern": "microwave", "limit": 2, "namespace": kitchen}),
    )
    .await;
    assert_eq!(hits.lines().count(), 2, "{hits}");
    let run = first_id(&hits, "run_");
    let opened = text(
        &everything,
        "open_run",
        json!({"id": run, "namespace": kitchen}),
    )
    .await;
    assert!(opened.starts_with(&format!("run {run} [")), "{opened}");
    assert!(opened.contains("[step 1] > "), "{opened}");

    // Errors come back as tool errors the agent can read, with the API's codes.
    let cases = [
        ("open_trajectory", json!({"id": page}), "bad_request"),
        (
            "open_trajectory",
            json!({"id": "trj_0000000000000000"}),
            "not_found",
        ),
        // A run of another namespace is not found here (demo holds no runs at all).
        ("open_run", json!({"id": run}), "no_runs"),
        ("open_source", json!({"id": "Z9:9"}), "not_found"),
        (
            "search_memory",
            json!({"question": "x", "namespace": "nobody"}),
            "unknown_namespace",
        ),
        (
            "claim_history",
            json!({"id": trajectory, "as_of": "soon"}),
            "bad_request",
        ),
        // Outside the scope: not found, as a namespace that does not exist.
        (
            "grep_runs",
            json!({"pattern": "microwave", "namespace": kitchen}),
            "unknown_namespace",
        ),
    ];
    for (tool, args, code) in cases {
        let (said, failed) = call(&client, tool, args.clone()).await;
        assert!(failed, "{tool} {args}: {said}");
        assert!(
            said.starts_with(&format!("error {code}: ")),
            "{tool} {args}: {said}"
        );
    }
    let (said, failed) = call(
        &everything,
        "grep_runs",
        json!({"pattern": "", "namespace": kitchen}),
    )
    .await;
    assert!(failed && said.starts_with("error bad_request: "), "{said}");
    client.cancel().await.unwrap();
    everything.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_messages_only_when_allowed_and_then_searchable() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let client = connect(&store, &["--allow-write"]).await;
    let names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    assert!(names.iter().any(|n| n == "add_messages"), "{names:?}");

    // Two namespaces: a call must name one.
    let (said, failed) = call(&client, "search_memory", json!({"question": "x"})).await;
    assert!(failed && said.contains("give `namespace`"), "{said}");

    let message = json!({"session": 3, "speaker": "Maya",
        "text": "I adopted a grey kitten called Pixel from the shelter on Elm Street.",
        "timestamp": "2024-05-01T09:00:00", "ref": "S3:1"});
    let added = text(
        &client,
        "add_messages",
        json!({"namespace": "demo", "messages": [message]}),
    )
    .await;
    assert!(
        added.starts_with("demo: 1 added, 0 already held"),
        "{added}"
    );
    let again = text(
        &client,
        "add_messages",
        json!({"namespace": "demo", "messages": [message]}),
    )
    .await;
    assert!(
        again.starts_with("demo: 0 added, 1 already held"),
        "{again}"
    );
    let found = text(
        &client,
        "search_memory",
        json!({"namespace": "demo", "question": "What is the name of Maya's kitten?"}),
    )
    .await;
    assert!(
        found.contains("S3:1 Maya: I adopted a grey kitten called Pixel"),
        "{found}"
    );

    // Without `seq` or `ref` a message is a new one, however often it is said: people say
    // "ok" many times.
    let ok_message =
        json!({"session": 3, "speaker": "Tom", "text": "ok", "timestamp": "2024-05-01T09:01:00"});
    for _ in 0..2 {
        let added = text(
            &client,
            "add_messages",
            json!({"namespace": "demo", "messages": [ok_message]}),
        )
        .await;
        assert!(
            added.starts_with("demo: 1 added, 0 already held"),
            "{added}"
        );
    }

    let (said, failed) = call(
        &client,
        "add_messages",
        json!({"namespace": "demo", "messages": [{"speaker": "Maya"}]}),
    )
    .await;
    assert!(failed && said.starts_with("error bad_request: "), "{said}");
    client.cancel().await.unwrap();
    let stats: Value =
        serde_json::from_str(&ok(&["stats", "--store", s(&store), "--json"])).unwrap();
    assert_eq!(stats["messages"], 15, "{stats}");
}

/// One JSON-RPC call to `url` (streamable HTTP, JSON answers): (HTTP status, body).
fn rpc(url: &str, token: Option<&str>, body: &Value) -> (u16, Value) {
    let mut req = ureq::post(url)
        .set("Content-Type", "application/json")
        .set("Accept", "application/json, text/event-stream")
        .set("MCP-Protocol-Version", "2025-06-18");
    if let Some(t) = token {
        req = req.set("Authorization", &format!("Bearer {t}"));
    }
    let res = match req.send_string(&body.to_string()) {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("{url}: {e}"),
    };
    let status = res.status();
    let text = res.into_string().unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

#[test]
fn serve_offers_the_tools_over_streamable_http() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let server = common::serve_hashing(s(&store), &["--token", "sesame"]);
    let url = format!("{}/mcp", server.url);
    let token = Some("sesame");

    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"}}});
    let (status, _) = rpc(&url, None, &init);
    assert_eq!(status, 401, "the token guards /mcp");
    let (status, answer) = rpc(&url, token, &init);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["result"]["serverInfo"]["name"], "trajwiki",
        "{answer}"
    );

    let (status, answer) = rpc(
        &url,
        token,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    );
    assert_eq!(status, 200, "{answer}");
    let mut names: Vec<&str> = answer["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, READ_TOOLS, "{answer}");

    let (status, answer) = rpc(
        &url,
        token,
        &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "grep_runs",
            "arguments": {"pattern": "microwave", "limit": 3, "namespace": "kitchen"}}}),
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    let said = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(said.lines().count(), 3, "{said}");
    assert!(said.lines().all(|l| l.starts_with("run_")), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_scopes_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let client = connect(&store, &["--namespace", "demo", "--allow-write"]).await;
    let listed = text(&client, "list_namespaces", json!({})).await;
    assert!(
        listed.starts_with("demo:") && !listed.contains("kitchen"),
        "{listed}"
    );
    // Another namespace, existing or not, is not found, and nothing is written to it.
    let message = json!({"session": 9, "speaker": "Eve", "text": "Planted by another tenant.",
        "timestamp": "2024-05-01T09:00:00", "ref": "X1:1"});
    for (tool, args) in [
        (
            "add_messages",
            json!({"namespace": "other", "messages": [message]}),
        ),
        (
            "add_messages",
            json!({"namespace": "kitchen", "messages": [message]}),
        ),
        (
            "grep_runs",
            json!({"namespace": "kitchen", "pattern": "microwave"}),
        ),
        (
            "search_memory",
            json!({"namespace": "kitchen", "question": "x"}),
        ),
    ] {
        let (said, failed) = call(&client, tool, args.clone()).await;
        assert!(
            failed && said.starts_with("error unknown_namespace: "),
            "{tool} {args}: {said}"
        );
    }
    // Its own namespace, named or not, works.
    let found = text(
        &client,
        "search_memory",
        json!({"namespace": "demo", "question": "Which class did Maya sign up for?"}),
    )
    .await;
    assert!(found.contains("pottery"), "{found}");
    client.cancel().await.unwrap();
    let stats: Value =
        serde_json::from_str(&ok(&["stats", "--store", s(&store), "--json"])).unwrap();
    assert_eq!(stats["messages"], 12, "{stats}");

    // The same scope for serve's /mcp.
    let server = common::serve_hashing(s(&store), &["--mcp-namespace", "demo"]);
    let url = format!("{}/mcp", server.url);
    let (status, answer) = rpc(
        &url,
        None,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "grep_runs", "arguments": {"pattern": "microwave", "namespace": "kitchen"}}}),
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let said = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert!(said.starts_with("error unknown_namespace: "), "{said}");
}

#[test]
fn stdio_answers_lines_that_are_not_json_with_parse_errors() {
    use std::io::{BufRead, BufReader, Write};
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let mut child = common::bin()
        .args(["mcp", "--store", s(&store), "--model", "hashing"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"}}});
    let mut input = Vec::new();
    input.extend_from_slice(b"{not json\n");
    input.extend_from_slice(b"\xff\xfe{\"jsonrpc\": \"2.0\"}\n");
    input.extend_from_slice(b"\n");
    input.extend_from_slice(format!("{init}\n").as_bytes());
    stdin.write_all(&input).unwrap();
    stdin.flush().unwrap();
    // Read on a thread of its own, so that a line never answered fails the test, not hangs it.
    let stdout = child.stdout.take().unwrap();
    let (sender, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if sender.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    let mut answers = Vec::new();
    for i in 0..3 {
        let line = received
            .recv_timeout(std::time::Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("no answer {i} after {answers:?}"));
        answers.push(serde_json::from_str::<Value>(&line).unwrap());
    }
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    for (i, reason) in [(0, "not JSON"), (1, "not UTF-8")] {
        let a = &answers[i];
        assert_eq!(a["jsonrpc"], "2.0", "{a}");
        assert_eq!(a["id"], Value::Null, "{a}");
        assert_eq!(a["error"]["code"], -32700, "{a}");
        assert!(
            a["error"]["message"].as_str().unwrap().contains(reason),
            "{a}"
        );
    }
    // The service goes on: the next request is answered.
    assert_eq!(answers[2]["id"], 1, "{}", answers[2]);
    assert_eq!(answers[2]["result"]["serverInfo"]["name"], "trajwiki");
}
