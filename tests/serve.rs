//! `trajwiki serve` over real HTTP on loopback: every route, the answers agreeing with the CLI,
//! namespace isolation, errors as JSON with stable codes, the bearer token, the body limit, the
//! index cache emptied by another process's writes, and concurrent clients.

mod common;

use std::path::Path;
use std::process::Stdio;

use common::{http as call, ok, s, trajwiki, Served};
use serde_json::{json, Value};

fn serve(store: &Path, extra: &[&str]) -> Served {
    common::serve_hashing(s(store), extra)
}

/// Writes `request` as it is and returns what the server answers (until it closes, or 5 s).
fn raw_request(server: &Served, request: &str) -> String {
    use std::io::{Read, Write};
    let addr = server.url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = stream.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
        if out.windows(4).any(|w| w == b"\r\n\r\n") && out.ends_with(b"}}") {
            break;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn get(server: &Served, path: &str) -> (u16, Value) {
    call(&format!("{}{path}", server.url), None, None)
}

fn post(server: &Served, path: &str, body: &Value) -> (u16, Value) {
    call(
        &format!("{}{path}", server.url),
        Some(&body.to_string()),
        None,
    )
}

/// Asserts an error answer: its status and stable code.
fn failed((status, body): (u16, Value), want_status: u16, code: &str) {
    assert_eq!(status, want_status, "{body}");
    assert_eq!(body["error"]["code"], code, "{body}");
    assert!(body["error"]["message"]
        .as_str()
        .is_some_and(|m| !m.is_empty()));
}

fn build(store: &Path, ns: &str) {
    common::build_hashing(s(store), ns);
}

#[test]
fn serves_the_memory_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::demo_store(dir.path());
    // A second user's memory in the same store.
    let other = dir.path().join("other.jsonl");
    let line = json!({"namespace": "other", "session": 1, "seq": 1, "speaker": "Ana",
        "text": "My sister Lena moved to Vienna for her new job at the observatory.",
        "timestamp": "2024-02-01T08:00:00", "ref": "O1:1"});
    std::fs::write(&other, format!("{line}\n")).unwrap();
    ok(&["ingest", "--store", s(&store), s(&other)]);
    build(&store, "other");
    let server = serve(&store, &[]);

    let (status, health) = get(&server, "/health");
    assert_eq!((status, health["status"].as_str()), (200, Some("ok")));
    let (status, list) = get(&server, "/v1/namespaces");
    assert_eq!(status, 200);
    assert_eq!(
        list["namespaces"],
        json!([{"namespace": "demo", "messages": 12, "runs": 0},
               {"namespace": "other", "messages": 1, "runs": 0}])
    );

    // A search answers what the CLI answers.
    let question = "Which class did Maya sign up for?";
    let (status, found) = post(
        &server,
        "/v1/namespaces/demo/search",
        &json!({"question": question, "budget": 300}),
    );
    assert_eq!(status, 200, "{found}");
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
    assert_eq!(found["context"]["text"], cli["context"], "{found}");
    assert_eq!(found["mode"], "full");
    let evidence = found["evidence"].as_array().unwrap();
    assert!(!evidence.is_empty());
    assert!(evidence.iter().all(|e| e["message"]["namespace"] == "demo"));

    // Pages, any record by id, a trajectory's claim history.
    let (status, pages) = get(&server, "/v1/namespaces/demo/pages");
    assert_eq!(status, 200);
    let pages = pages["pages"].as_array().unwrap();
    assert!(!pages.is_empty());
    let page_id = pages[0]["id"].as_str().unwrap();
    let (status, page) = get(&server, &format!("/v1/namespaces/demo/records/{page_id}"));
    assert_eq!(status, 200);
    assert_eq!(page["record"]["id"], page_id);
    let trajectory = evidence[0]["trajectory"].as_str().unwrap();
    let (status, history) = get(
        &server,
        &format!("/v1/namespaces/demo/history/{trajectory}"),
    );
    assert_eq!(status, 200, "{history}");
    assert!(!history["entries"].as_array().unwrap().is_empty());
    let (status, early) = get(
        &server,
        &format!("/v1/namespaces/demo/history/{trajectory}?as_of=2000-01-01"),
    );
    assert_eq!(status, 200);
    assert_eq!(early["entries"], json!([]));

    // One namespace never reaches another's records, whatever the id.
    let (_, theirs) = get(&server, "/v1/namespaces/other/pages");
    let their_page = theirs["pages"][0]["id"].as_str().unwrap().to_string();
    failed(
        get(
            &server,
            &format!("/v1/namespaces/demo/records/{their_page}"),
        ),
        404,
        "not_found",
    );
    failed(
        get(
            &server,
            &format!("/v1/namespaces/other/history/{trajectory}"),
        ),
        404,
        "not_found",
    );

    // Errors: JSON, a status and a stable code.
    let search = format!("{}/v1/namespaces/demo/search", server.url);
    failed(call(&search, Some("{not json"), None), 400, "bad_request");
    failed(
        call(&search, Some(r#"{"question": "x", "colour": 1}"#), None),
        422,
        "bad_request",
    );
    failed(
        post(
            &server,
            "/v1/namespaces/demo/search",
            &json!({"question": "x", "mode": "psychic"}),
        ),
        400,
        "bad_request",
    );
    failed(
        post(
            &server,
            "/v1/namespaces/nobody/search",
            &json!({"question": "x"}),
        ),
        404,
        "unknown_namespace",
    );
    failed(
        post(
            &server,
            "/v1/namespaces/%20padded/search",
            &json!({"question": "x"}),
        ),
        400,
        "bad_id",
    );
    failed(
        get(&server, "/v1/namespaces/demo/records/xyz_1"),
        400,
        "bad_id",
    );
    failed(
        get(&server, "/v1/namespaces/demo/history/2000"),
        400,
        "bad_id",
    );
    failed(get(&server, "/v1/nowhere"), 404, "no_route");
    // A body over the limit is refused from its declared length, before it is read (a client
    // still writing it may see the connection close; this one reads the answer first).
    let response = raw_request(
        &server,
        "POST /v1/namespaces/demo/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 3000000\r\n\r\n{\"question\": \"",
    );
    assert!(response.starts_with("HTTP/1.1 413"), "{response}");
    assert!(response.contains("too_large"), "{response}");
    // A question past its own limit, in a body within the limit.
    failed(
        post(
            &server,
            "/v1/namespaces/demo/search",
            &json!({"question": "x".repeat(100_000)}),
        ),
        413,
        "too_large",
    );

    // Another process appends and builds: the cached index is not served stale.
    let news = dir.path().join("news.jsonl");
    let line = json!({"namespace": "demo", "session": 3, "seq": 1, "speaker": "Maya",
        "text": "We adopted a quokka named Biscuit from the rescue centre.",
        "timestamp": "2024-05-20T09:00:00", "ref": "S3:1"});
    std::fs::write(&news, format!("{line}\n")).unwrap();
    ok(&["ingest", "--store", s(&store), s(&news)]);
    build(&store, "demo");
    let question = "What is the quokka called?";
    let (status, fresh) = post(
        &server,
        "/v1/namespaces/demo/search",
        &json!({"question": question, "budget": 200}),
    );
    assert_eq!(status, 200);
    let snapshots = fresh["ranking"]["snapshots"].as_array().unwrap();
    assert!(
        snapshots
            .iter()
            .any(|s| s["label"].as_str().unwrap().contains("Biscuit")),
        "{fresh}"
    );
    let cli: Value = serde_json::from_str(&ok(&[
        "query",
        "--store",
        s(&store),
        "--namespace",
        "demo",
        "--model",
        "hashing",
        "--budget",
        "200",
        "--json",
        question,
    ]))
    .unwrap();
    assert_eq!(fresh["context"]["text"], cli["context"]);

    // OpenAI-compatible embeddings: the vectors `trajwiki embed` gives.
    let texts = ["Maya made a bowl.", "Tom runs in Porto."];
    let (status, emb) = post(
        &server,
        "/v1/embeddings",
        &json!({"input": texts, "model": "hashing-384"}),
    );
    assert_eq!(status, 200, "{emb}");
    let mut child = common::bin()
        .args(["embed", "--model", "hashing"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(texts.join("\n").as_bytes()).unwrap();
    }
    let cli = String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap();
    for (i, line) in cli.lines().enumerate() {
        let want: Vec<f32> = serde_json::from_str(line).unwrap();
        let got: Vec<f32> = serde_json::from_value(emb["data"][i]["embedding"].clone()).unwrap();
        assert_eq!(got, want, "text {i}");
        assert_eq!(emb["data"][i]["index"], i);
    }
    assert_eq!(emb["model"], "hashing-384");
    failed(
        post(
            &server,
            "/v1/embeddings",
            &json!({"input": "x", "model": "text-embedding-3-small"}),
        ),
        400,
        "bad_request",
    );
    failed(
        post(&server, "/v1/embeddings", &json!({"input": [1, 2]})),
        400,
        "bad_request",
    );
    failed(
        post(&server, "/v1/embeddings", &json!({"input": []})),
        400,
        "bad_request",
    );

    // Concurrent clients all get their answers.
    let url = search.clone();
    let answers: Vec<u16> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let url = url.clone();
                scope.spawn(move || {
                    (0..4)
                        .map(|j| {
                            let body =
                                json!({"question": format!("What did Tom train for? {i} {j}")});
                            call(&url, Some(&body.to_string()), None).0
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    assert_eq!(answers, vec![200; 32]);

    // Deleting a namespace: gone from the list and from search; the others stay.
    let url = format!("{}/v1/namespaces/other", server.url);
    let deleted = ureq::delete(&url).call().unwrap().into_string().unwrap();
    let deleted: Value = serde_json::from_str(&deleted).unwrap();
    assert_eq!(
        (deleted["deleted"].as_bool(), deleted["messages"].as_u64()),
        (Some(true), Some(1))
    );
    let (_, list) = get(&server, "/v1/namespaces");
    assert_eq!(list["namespaces"].as_array().unwrap().len(), 1, "{list}");
    failed(
        post(
            &server,
            "/v1/namespaces/other/search",
            &json!({"question": "Vienna?"}),
        ),
        404,
        "unknown_namespace",
    );
    match ureq::delete(&url).call() {
        Err(ureq::Error::Status(404, r)) => {
            let body: Value = serde_json::from_str(&r.into_string().unwrap()).unwrap();
            assert_eq!(body["error"]["code"], "unknown_namespace");
        }
        other => panic!("deleting twice: {other:?}"),
    }
    assert_eq!(get(&server, "/v1/namespaces/demo/pages").0, 200);
}

#[test]
fn a_token_guards_the_api_and_other_hosts_need_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::demo_store(dir.path());
    let server = serve(&store, &["--token", "s3cret"]);
    let list = format!("{}/v1/namespaces", server.url);
    failed(call(&list, None, None), 401, "unauthorized");
    failed(call(&list, None, Some("wrong")), 401, "unauthorized");
    assert_eq!(call(&list, None, Some("s3cret")).0, 200);
    assert_eq!(call(&format!("{}/health", server.url), None, None).0, 200);

    // Refused before anything listens: another host without a token, a bad host, no store.
    for (args, needle) in [
        (vec!["--host", "0.0.0.0"], "--token"),
        (vec!["--host", "localhost:80"], "IP address"),
        (vec!["--token", ""], "empty"),
    ] {
        let mut all = vec![
            "serve",
            "--store",
            s(&store),
            "--port",
            "0",
            "--model",
            "hashing",
        ];
        all.extend(args);
        let (code, _, err) = trajwiki(&all);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(needle), "{err}");
    }
    let missing = dir.path().join("missing");
    let (code, _, err) = trajwiki(&["serve", "--store", s(&missing), "--port", "0"]);
    assert_eq!(code, 2, "{err}");
    assert!(!missing.exists());
}

#[test]
fn appends_message_by_message_build_what_one_batch_builds() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::demo_store(dir.path());
    let server = serve(&store, &[]);
    let lines: Vec<Value> = std::fs::read_to_string(common::demo())
        .unwrap()
        .lines()
        .map(|l| {
            let mut m: Value = serde_json::from_str(l).unwrap();
            m.as_object_mut().unwrap().remove("namespace");
            m
        })
        .collect();
    let append = |body: Value| post(&server, "/v1/namespaces/live/messages", &body);
    for (i, m) in lines.iter().enumerate() {
        let last = i + 1 == lines.len();
        let (status, report) = append(json!({"messages": [m], "flush": last}));
        assert_eq!(status, 200, "{report}");
        assert_eq!(
            (report["added"].as_u64(), report["unchanged"].as_u64()),
            (Some(1), Some(0))
        );
        assert!(report["built"].is_object(), "{report}");
    }
    // The same memory as the same messages ingested and built at once, in a store of their own.
    let batch = dir.path().join("batch");
    let file = dir.path().join("live.jsonl");
    common::write_in_namespace(&file, &lines, "live");
    ok(&["ingest", "--store", s(&batch), s(&file)]);
    build(&batch, "live");
    let export = |store: &Path| common::export_memory(s(store), "live");
    let appended = export(&store);
    assert!(appended.lines().count() > 20);
    assert_eq!(appended, export(&batch));

    // An index is kept between searches, and a write to one namespace leaves the others' in
    // place: `timings.index_load` is non-zero only for a search that loaded its index (or
    // brought it up to date).
    let loads = |ns: &str| {
        let (status, found) = post(
            &server,
            &format!("/v1/namespaces/{ns}/search"),
            &json!({"question": "Where is the race?"}),
        );
        assert_eq!(status, 200, "{found}");
        found["timings"]["index_load"].as_f64().unwrap() > 0.0
    };
    loads("demo");
    loads("live");
    assert!(
        !loads("demo"),
        "the index of demo was loaded again with nothing written"
    );
    assert!(!loads("live"));
    let (status, _) = append(
        json!({"messages": [{"session": 5, "speaker": "Ana", "text": "Hello there.", "timestamp": "2024-06-01T10:00:00"}]}),
    );
    assert_eq!(status, 200);
    assert!(!loads("demo"), "a write to live made demo load again");
    // The append took live's kept index to the state it left, inside its transaction: the
    // search after it finds the index current.
    assert!(
        !loads("live"),
        "live's index was loaded again after its own append"
    );

    // The appended messages are searched at once (the server's own write is seen).
    let (status, found) = post(
        &server,
        "/v1/namespaces/live/search",
        &json!({"question": "Which class did Maya sign up for?", "budget": 300}),
    );
    assert_eq!(status, 200);
    assert!(
        found["context"]["text"]
            .as_str()
            .unwrap()
            .contains("pottery"),
        "{found}"
    );

    // Again: nothing new. Bad input: refused with its place named, nothing stored.
    let (status, again) = append(json!({"messages": [lines[0]], "build": false}));
    assert_eq!(
        (status, again["added"].as_u64(), again["unchanged"].as_u64()),
        (200, Some(0), Some(1))
    );
    let count = || ok(&["stats", "--store", s(&store), "--json"]);
    let before = count();
    let mut no_text = lines[0].clone();
    no_text.as_object_mut().unwrap().remove("text");
    no_text["ref"] = json!("S7:1");
    let (status, err) = append(json!({"messages": [no_text]}));
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (400, Some("bad_request")),
        "{err}"
    );
    assert!(
        err["error"]["message"].as_str().unwrap().contains("text"),
        "{err}"
    );
    let mut elsewhere = lines[0].clone();
    elsewhere["namespace"] = json!("demo");
    failed(append(json!({"messages": [elsewhere]})), 400, "bad_request");
    let mut changed = lines[0].clone();
    changed["text"] = json!("Something else entirely.");
    failed(append(json!({"messages": [changed]})), 409, "conflict");
    failed(
        append(json!({"messages": {"text": "hi"}})),
        400,
        "bad_request",
    );
    failed(append(json!({"message": []})), 422, "bad_request");
    assert_eq!(count(), before);
}

/// `GET /v1/models` in OpenAI's shape lists the model `/v1/embeddings` embeds with, by the name
/// its `model` field takes; `GET /v1/models/{id}` gives it alone. Both are behind the token.
#[test]
fn the_models_route_names_the_model_embeddings_take() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::demo_store(dir.path());
    let server = serve(&store, &["--token", "s3cret"]);
    let at = |path: &str| format!("{}{path}", server.url);
    failed(call(&at("/v1/models"), None, None), 401, "unauthorized");
    let (status, list) = call(&at("/v1/models"), None, Some("s3cret"));
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["object"], "list", "{list}");
    let data = list["data"].as_array().unwrap();
    assert_eq!(data.len(), 1, "{list}");
    let model = &data[0];
    assert_eq!(model["object"], "model");
    assert_eq!(model["owned_by"], "trajwiki");
    assert!(
        model["created"].as_u64().is_some_and(|t| t > 1_600_000_000),
        "{model}"
    );
    let id = model["id"].as_str().unwrap();
    assert_eq!(id, "hashing-384");
    // The name listed is the name embeddings take.
    let req = ureq::post(&at("/v1/embeddings"))
        .set("Authorization", "Bearer s3cret")
        .set("Content-Type", "application/json")
        .send_string(&json!({"input": ["a", "b"], "model": id}).to_string())
        .unwrap();
    let emb: Value = serde_json::from_str(&req.into_string().unwrap()).unwrap();
    assert_eq!(emb["model"], id);
    assert_eq!(emb["data"].as_array().unwrap().len(), 2);
    // As OpenAI's Python client asks by default: the same floats, as little-endian bytes in
    // base64.
    let req = ureq::post(&at("/v1/embeddings"))
        .set("Authorization", "Bearer s3cret")
        .set("Content-Type", "application/json")
        .send_string(
            &json!({"input": ["a", "b"], "model": id, "encoding_format": "base64"}).to_string(),
        )
        .unwrap();
    let packed: Value = serde_json::from_str(&req.into_string().unwrap()).unwrap();
    for i in 0..2 {
        use base64::Engine as _;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(packed["data"][i]["embedding"].as_str().unwrap())
            .unwrap();
        let floats: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        let want: Vec<f32> = serde_json::from_value(emb["data"][i]["embedding"].clone()).unwrap();
        assert_eq!(floats, want, "text {i}");
    }
    // One model by its id, and an id this server does not serve.
    let (status, one) = call(&at(&format!("/v1/models/{id}")), None, Some("s3cret"));
    assert_eq!((status, &one), (200, model), "{one}");
    let (status, other) = call(
        &at("/v1/models/text-embedding-3-small"),
        None,
        Some("s3cret"),
    );
    failed((status, other.clone()), 404, "not_found");
    assert!(
        other["error"]["message"].as_str().unwrap().contains(id),
        "{other}"
    );
}

/// A key given twice in one object is refused wherever it is in a body (at the top, in a message,
/// in a run, in a run's step), as serde refuses a request's own fields given twice: 422, the key
/// and the object's place named, nothing stored.
#[test]
fn a_key_given_twice_is_refused_wherever_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::demo_store(dir.path());
    let server = serve(&store, &[]);
    let count = || ok(&["stats", "--store", s(&store), "--json"]);
    let before = count();
    let message =
        r#"{"speaker": "Ann", "text": "I moved to Oslo.", "timestamp": "2024-03-01T09:00:00"}"#;
    let twice = r#"{"speaker": "Ann", "text": "I moved to Oslo.", "text": "I moved to Rome.", "timestamp": "2024-03-01T09:00:00"}"#;
    let run =
        r#"{"id": "r1", "task": "buy a mug", "steps": [{"action": "go", "observation": "shop"}]}"#;
    for (path, body, key, place) in [
        (
            "/v1/namespaces/twice/messages",
            format!(r#"{{"messages": [{message}, {twice}]}}"#),
            "text",
            "messages[1]",
        ),
        (
            "/v1/namespaces/twice/messages",
            format!(r#"{{"messages": [{message}], "build": true, "build": false}}"#),
            "build",
            "the body",
        ),
        (
            "/v1/namespaces/twice/runs",
            format!(r#"{{"runs": [{run}, {{"id": "r2", "task": "a", "task": "b"}}]}}"#),
            "task",
            "runs[1]",
        ),
        (
            "/v1/namespaces/twice/runs",
            r#"{"runs": [{"id": "r3", "task": "a", "steps": [{"action": "go", "action": "stay"}]}]}"#
                .to_string(),
            "action",
            "runs[0].steps[0]",
        ),
    ] {
        let (status, err) = call(&format!("{}{path}", server.url), Some(&body), None);
        failed((status, err.clone()), 422, "bad_request");
        let said = err["error"]["message"].as_str().unwrap();
        assert!(said.contains(&format!("\"{key}\"")), "{body}: {said}");
        assert!(said.contains(place), "{body}: {said}");
    }
    assert_eq!(count(), before, "nothing was stored");
    // The same messages, each key once, are taken.
    let (status, added) = call(
        &format!("{}/v1/namespaces/twice/messages", server.url),
        Some(&format!(r#"{{"messages": [{message}], "build": false}}"#)),
        None,
    );
    assert_eq!((status, added["added"].as_u64()), (200, Some(1)), "{added}");
}

#[test]
fn serves_the_run_memory_down_to_cited_steps() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::demo_store(dir.path());
    ok(&["ingest", "--store", s(&store), "tests/fixtures/runs.jsonl"]);
    let server = serve(&store, &[]);
    let task = json!({"task": "heat some egg and put it in the bin."});
    failed(
        post(&server, "/v1/namespaces/kitchen/runs/context", &task),
        409,
        "not_compiled",
    );
    // Compiled by another process while the server runs.
    ok(&["trace", "compile", "--store", s(&store), "-q"]);
    let (status, ctx) = post(&server, "/v1/namespaces/kitchen/runs/context", &task);
    assert_eq!(status, 200, "{ctx}");
    assert!(ctx["text"].as_str().is_some_and(|t| !t.is_empty()), "{ctx}");

    let (status, grep) = get(
        &server,
        "/v1/namespaces/kitchen/runs/grep?pattern=microwave&limit=5",
    );
    assert_eq!(status, 200, "{grep}");
    let hits = grep["hits"].as_array().unwrap();
    assert!(!hits.is_empty() && hits.len() <= 5, "{grep}");
    let run_id = hits[0]["run"].as_str().unwrap();
    let (status, run) = get(&server, &format!("/v1/namespaces/kitchen/runs/{run_id}"));
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["run"]["id"], run_id);
    let insight_id = run["insights"][0]["id"].as_str().unwrap();
    let (status, opened) = get(
        &server,
        &format!("/v1/namespaces/kitchen/insights/{insight_id}"),
    );
    assert_eq!(status, 200, "{opened}");
    assert_eq!(opened["insight"]["id"], insight_id);
    assert_eq!(opened["run"]["id"], run_id);
    assert!(
        !opened["cited_steps"].as_array().unwrap().is_empty(),
        "{opened}"
    );

    // Another namespace never reaches these runs; bad ids and patterns are refused.
    failed(
        get(&server, &format!("/v1/namespaces/demo/runs/{run_id}")),
        404,
        "no_runs",
    );
    failed(
        get(
            &server,
            &format!("/v1/namespaces/demo/insights/{insight_id}"),
        ),
        404,
        "no_runs",
    );
    failed(
        get(&server, "/v1/namespaces/kitchen/runs/run_0000000000000000"),
        404,
        "not_found",
    );
    failed(
        get(
            &server,
            "/v1/namespaces/kitchen/insights/ins_0000000000000000",
        ),
        404,
        "not_found",
    );
    failed(
        get(&server, "/v1/namespaces/kitchen/runs/clm_0000000000000000"),
        400,
        "bad_id",
    );
    failed(
        get(&server, "/v1/namespaces/kitchen/runs/grep?pattern="),
        400,
        "bad_request",
    );
    failed(
        get(&server, "/v1/namespaces/kitchen/runs/grep"),
        400,
        "bad_request",
    );
}

#[test]
fn openapi_lists_the_routes_it_serves() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::demo_store(dir.path());
    let server = serve(&store, &["--token", "t"]);
    // Outside the token, as /health.
    let (status, doc) = get(&server, "/openapi.json");
    assert_eq!(status, 200);
    assert_eq!(doc["openapi"], "3.1.0");
    let paths = doc["paths"].as_object().unwrap();
    assert_eq!(paths.len(), 20, "{:?}", paths.keys());
    // (status, error code) of `method` on a documented path.
    let call = |method: &str, path: &str| -> (u16, Value) {
        let concrete = path
            .replace("{ns}", "nobody")
            .replace("{id}", "trj_0000000000000000");
        let url = format!("{}{concrete}", server.url);
        let req = ureq::request(method, &url).set("Authorization", "Bearer t");
        let res = if method == "GET" {
            req.call()
        } else {
            req.set("Content-Type", "application/json")
                .send_string("{}")
        };
        let (code, body) = match res {
            Ok(r) => (r.status(), r.into_string().unwrap()),
            Err(ureq::Error::Status(c, r)) => (c, r.into_string().unwrap()),
            Err(e) => panic!("{method} {url}: {e}"),
        };
        (code, serde_json::from_str(&body).unwrap_or(Value::Null))
    };
    for (path, item) in paths {
        let documented = item.as_object().unwrap();
        for method in ["get", "post", "put", "patch", "delete"] {
            let (code, body) = call(&method.to_uppercase(), path);
            match documented.get(method) {
                // Every documented operation is served, with a summary and the error answer.
                Some(operation) => {
                    assert!(
                        body["error"]["code"] != "no_route" && code != 405,
                        "{method} {path}: {code} {body}"
                    );
                    assert!(
                        operation["summary"].as_str().is_some_and(|s| !s.is_empty()),
                        "{method} {path} has no summary"
                    );
                    assert_eq!(
                        operation["responses"]["default"]["$ref"], "#/components/responses/Error",
                        "{method} {path}"
                    );
                }
                // And no other method is.
                None => assert_eq!(code, 405, "{method} {path} is served but not documented"),
            }
        }
    }
    // The routes outside the document are the viewer's HTML pages, the redirect to it and the
    // MCP endpoint (its own protocol): every other route is registered with its operation
    // (utoipa's `routes!`), so the router cannot serve what the document does not list.
    let source = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/server/mod.rs"),
    )
    .unwrap();
    let registered = |call: &str| -> Vec<String> {
        source
            .match_indices(call)
            .map(|(at, _)| {
                let rest = &source[at + call.len()..];
                rest[..rest.find('"').unwrap()].to_string()
            })
            .collect()
    };
    let plain = registered(".route(\"");
    assert!(!plain.is_empty());
    for path in &plain {
        assert!(
            path == "/" || path.starts_with("/view"),
            "{path} is routed outside the OpenAPI document"
        );
        assert!(!paths.contains_key(path.as_str()));
    }
    assert_eq!(registered(".nest_service(\""), ["/mcp"]);
    assert_eq!(registered(".nest(\""), ["/v1"]);
    // The request types are in the document: a search's body, with its defaults.
    let search = &doc["components"]["schemas"]["SearchRequest"];
    assert_eq!(search["required"], json!(["question"]));
    assert_eq!(search["properties"]["budget"]["default"], 2700);
    assert_eq!(search["additionalProperties"], false);
}

/// (status, content type, body) of a GET.
fn fetch(url: &str) -> (u16, String, String) {
    let res = match ureq::get(url).call() {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("{url}: {e}"),
    };
    let (status, kind) = (res.status(), res.content_type().to_string());
    (status, kind, res.into_string().unwrap())
}

/// The href and id attribute values of an HTML page.
fn attributes(html: &str, name: &str) -> Vec<String> {
    let key = format!("{name}=\"");
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(at) = rest.find(&key) {
        rest = &rest[at + key.len()..];
        let end = rest.find('"').unwrap();
        out.push(rest[..end].replace("&amp;", "&"));
        rest = &rest[end..];
    }
    out
}

/// Follows every link of the viewer below `start`'s folder, as a browser would: every page
/// answers 200 with HTML, and every `#anchor` exists on its page. Returns the pages visited.
fn crawl(base: &str, start: &str) -> std::collections::BTreeMap<String, String> {
    let folder = &start[..start.rfind('/').unwrap() + 1];
    let mut seen = std::collections::BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start.to_string()]);
    let mut anchors: Vec<(String, String, String)> = Vec::new();
    while let Some(page) = queue.pop_front() {
        if seen.contains_key(&page) {
            continue;
        }
        let (status, kind, body) = fetch(&format!("{base}{page}"));
        assert_eq!(status, 200, "{page}: {body}");
        assert!(kind.starts_with("text/html"), "{page}: {kind}");
        for href in attributes(&body, "href") {
            if href.starts_with('/') || href.contains(':') {
                continue; // the navigation's absolute links
            }
            let (path, anchor) = href.split_once('#').unwrap_or((href.as_str(), ""));
            let mut parts: Vec<&str> = page.split('/').collect();
            parts.pop();
            for part in path.split('/') {
                match part {
                    ".." => {
                        parts.pop();
                    }
                    "" | "." => {}
                    p => parts.push(p),
                }
            }
            let target = if path.is_empty() {
                page.clone()
            } else {
                parts.join("/")
            };
            assert!(target.starts_with(folder), "{page}: {href} leaves {folder}");
            if !anchor.is_empty() {
                anchors.push((page.clone(), target.clone(), anchor.to_string()));
            }
            queue.push_back(target);
        }
        seen.insert(page, body);
    }
    for (from, target, anchor) in anchors {
        assert!(
            attributes(&seen[&target], "id").contains(&anchor),
            "{from}: no #{anchor} in {target}"
        );
    }
    seen
}

#[test]
fn the_viewer_shows_the_memory_down_to_its_sources() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::demo_store(dir.path());
    let hostile = dir.path().join("hostile.jsonl");
    let line = json!({"namespace": "demo", "session": 4, "seq": 1, "speaker": "<b>Eve</b>",
        "text": "<script>alert(1)</script> and <img src=x onerror=alert(1)> [x](javascript:alert(1))",
        "timestamp": "2024-05-01T09:00:00", "ref": "S4:1"});
    std::fs::write(&hostile, format!("{line}\n")).unwrap();
    ok(&["ingest", "--store", s(&store), s(&hostile)]);
    build(&store, "demo");
    ok(&["ingest", "--store", s(&store), "tests/fixtures/runs.jsonl"]);
    ok(&["trace", "compile", "--store", s(&store), "-q"]);
    let server = serve(&store, &[]);

    let (status, _, list) = fetch(&format!("{}/view", server.url));
    assert_eq!(status, 200);
    assert!(
        list.contains("href=\"/view/demo/\"") && list.contains("href=\"/view/kitchen/\""),
        "{list}"
    );

    let pages = crawl(&server.url, "/view/demo/");
    // The index, every page, trajectory and session.
    assert!(
        pages
            .keys()
            .filter(|p| p.contains("/trajectories/"))
            .count()
            >= 5,
        "{:?}",
        pages.keys()
    );
    assert!(pages.keys().any(|p| p.contains("/pages/")));
    assert!(pages.keys().any(|p| p.ends_with("/sources/session-4.md")));
    for (page, body) in &pages {
        for bad in ["<script", "<img", "<b>Eve", "href=\"javascript"] {
            assert!(!body.contains(bad), "{page} holds {bad}");
        }
    }
    assert!(pages["/view/demo/sources/session-4.md"].contains("&lt;script&gt;"));

    // The query page: the retrieval path with scores, its links into the same pages.
    let q = "/view/demo/query?q=Which+class+did+Maya+sign+up+for%3F&budget=300";
    let (status, _, body) = fetch(&format!("{}{q}", server.url));
    assert_eq!(status, 200, "{body}");
    for part in [
        "1. Pages routed to",
        "2. Trajectories selected",
        "3. Snapshots ranked",
        "4. Sources in the context",
        "class=\"score\"",
    ] {
        assert!(body.contains(part), "{part} missing: {body}");
    }
    for href in attributes(&body, "href")
        .iter()
        .filter(|h| !h.starts_with('/'))
    {
        let (path, anchor) = href.split_once('#').unwrap_or((href.as_str(), ""));
        let target = format!("/view/demo/{path}");
        let page = pages
            .get(&target)
            .unwrap_or_else(|| panic!("{href}: {target} was not reached from the index"));
        assert!(
            anchor.is_empty() || attributes(page, "id").contains(&anchor.to_string()),
            "{href}"
        );
    }
    let (status, _, _) = fetch(&format!("{}/view/demo/query?q=&budget=300", server.url));
    assert_eq!(status, 400);

    // The run memory: insights down to the cited steps.
    let runs = crawl(&server.url, "/view/kitchen/");
    assert!(
        runs.keys().any(|p| p.contains("/insights/")) && runs.keys().any(|p| p.contains("/runs/"))
    );
    let (status, _, _) = fetch(&format!(
        "{}/view/demo/pages/pg_0000000000000000.md",
        server.url
    ));
    assert_eq!(status, 404);
    let (status, _, _) = fetch(&format!("{}/view/nobody/", server.url));
    assert_eq!(status, 404);
}

#[test]
fn runs_appended_over_http_are_the_runs_the_cli_ingests_and_compiles() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::demo_store(dir.path());
    let server = serve(&store, &[]);
    let runs: Vec<Value> = std::fs::read_to_string("tests/fixtures/runs.jsonl")
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // One by one, as an agent finishes them.
    for (i, run) in runs.iter().enumerate() {
        let (status, added) = post(
            &server,
            "/v1/namespaces/kitchen/runs",
            &json!({"runs": [run]}),
        );
        assert_eq!(status, 200, "{added}");
        assert_eq!(added["added"], 1, "{added}");
        assert_eq!(added["compiled"]["runs"], 1, "run {i}: {added}");
    }
    // Again: nothing new, the same compilations kept.
    let (status, again) = post(
        &server,
        "/v1/namespaces/kitchen/runs",
        &json!({"runs": runs}),
    );
    assert_eq!(
        (status, &again["added"], &again["unchanged"]),
        (200, &json!(0), &json!(3)),
        "{again}"
    );

    // The same records as the CLI's ingest and compile of the file.
    let cli = dir.path().join("cli");
    ok(&["ingest", "--store", s(&cli), "tests/fixtures/runs.jsonl"]);
    ok(&["trace", "compile", "--store", s(&cli), "-q"]);
    let export = |store: &Path| {
        let out = dir.path().join(format!(
            "export-{}",
            store.file_name().unwrap().to_str().unwrap()
        ));
        ok(&[
            "trace",
            "export",
            "--store",
            s(store),
            "--namespace",
            "kitchen",
            s(&out),
        ]);
        let mut files = Vec::new();
        for entry in walk(&out) {
            files.push((
                entry.strip_prefix(&out).unwrap().to_path_buf(),
                std::fs::read(&entry).unwrap(),
            ));
        }
        files.sort();
        files
    };
    drop(server);
    assert_eq!(export(&store), export(&cli));

    // Refused with the store unchanged: not a list, not objects, another namespace, bad fields.
    let server = serve(&store, &[]);
    let before = std::fs::read_to_string("tests/fixtures/runs.jsonl")
        .unwrap()
        .lines()
        .count();
    failed(
        post(&server, "/v1/namespaces/kitchen/runs", &json!({"runs": {}})),
        422,
        "bad_request",
    );
    failed(
        post(
            &server,
            "/v1/namespaces/kitchen/runs",
            &json!({"runs": [1]}),
        ),
        400,
        "bad_request",
    );
    let mut foreign = runs[0].clone();
    foreign["namespace"] = json!("other");
    failed(
        post(
            &server,
            "/v1/namespaces/kitchen/runs",
            &json!({"runs": [foreign]}),
        ),
        400,
        "bad_request",
    );
    let (status, bad) = post(
        &server,
        "/v1/namespaces/kitchen/runs",
        &json!({"runs": [{"id": "x", "steps": []}]}),
    );
    assert_eq!(
        (status, bad["error"]["code"].as_str()),
        (400, Some("bad_request")),
        "{bad}"
    );
    assert!(
        bad["error"]["message"].as_str().unwrap().contains("task"),
        "{bad}"
    );
    let (_, list) = get(&server, "/v1/namespaces");
    let kitchen = list["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["namespace"] == "kitchen")
        .unwrap()
        .clone();
    assert_eq!(kitchen["runs"], before as u64, "{list}");
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn a_build_runs_as_a_job_with_progress_and_gives_the_cli_build() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    ok(&["ingest", "--store", s(&store), s(&common::demo())]);
    let server = serve(&store, &[]);
    let wait = |id: &str| -> Value {
        for _ in 0..600 {
            let (status, job) = get(&server, &format!("/v1/jobs/{id}"));
            assert_eq!(status, 200, "{job}");
            if job["status"] != "running" {
                return job;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("job {id} still running after 30 s");
    };
    let (status, started) = post(
        &server,
        "/v1/namespaces/demo/build",
        &json!({"flush": true}),
    );
    assert_eq!(status, 202, "{started}");
    assert_eq!(started["namespace"], "demo");
    let id = started["job"].as_str().unwrap().to_string();
    let done = wait(&id);
    assert_eq!(done["status"], "done", "{done}");
    assert_eq!(done["stage"], "done", "{done}");
    assert_eq!(done["embedded"], done["to_embed"], "{done}");
    assert_eq!(done["to_embed"], 12, "every message embedded once: {done}");
    assert_eq!(done["folded"], done["to_fold"], "{done}");
    assert_eq!(done["to_fold"], 12, "every message folded (flush): {done}");
    assert!(done["report"]["snapshots"].as_u64().unwrap() > 0, "{done}");

    // The memory is the CLI's build of the same messages.
    let cli = common::demo_store(&dir.path().join("cli"));
    let question = "Which class did Maya sign up for?";
    let (status, found) = post(
        &server,
        "/v1/namespaces/demo/search",
        &json!({"question": question, "budget": 300}),
    );
    assert_eq!(status, 200, "{found}");
    let theirs: Value = serde_json::from_str(&ok(&[
        "query",
        "--store",
        s(&cli),
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
    assert_eq!(found["context"]["text"], theirs["context"]);

    // Nothing new: a second job embeds nothing. A namespace without messages fails as a job.
    let (_, again) = post(&server, "/v1/namespaces/demo/build", &json!({}));
    let again = wait(again["job"].as_str().unwrap());
    assert_eq!(
        (&again["status"], &again["to_embed"]),
        (&json!("done"), &json!(0)),
        "{again}"
    );
    // A JSON object is needed, `{}` for the defaults: an empty body starts nothing.
    failed(
        call(
            &format!("{}/v1/namespaces/nobody/build", server.url),
            Some(""),
            None,
        ),
        400,
        "bad_request",
    );
    let (status, nobody) = post(&server, "/v1/namespaces/nobody/build", &json!({}));
    assert_eq!(status, 202, "{nobody}");
    let nobody = wait(nobody["job"].as_str().unwrap());
    assert_eq!(nobody["status"], "failed", "{nobody}");
    assert_eq!(nobody["error"]["code"], "unknown_namespace", "{nobody}");
    failed(get(&server, "/v1/jobs/job_999"), 404, "not_found");
    failed(
        post(
            &server,
            "/v1/namespaces/demo/build",
            &json!({"rebuld": true}),
        ),
        422,
        "bad_request",
    );
}
