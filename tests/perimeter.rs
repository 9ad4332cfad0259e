//! The perimeter of `trajwiki serve`, over real HTTP on loopback with raw requests: the Host and
//! Origin checks against DNS rebinding on every route, the deadlines and the connection bound
//! against slow clients, JSON-only bodies against cross-site forms, token strength, no server
//! path in any error, JSON errors for every refusal, and `GET /` to the viewer.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{http as call, s, Served};
use serde_json::{json, Value};

/// An answer read off the wire.
#[derive(Debug)]
struct Answer {
    status: u16,
    head: String,
    body: String,
}

impl Answer {
    /// The body as JSON (`Null` when it is not).
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    /// Asserts a JSON error with `status` and `code`.
    fn failed(&self, status: u16, code: &str) {
        let body = self.json();
        assert_eq!(self.status, status, "{self:?}");
        assert_eq!(body["error"]["code"], code, "{self:?}");
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{self:?}"
        );
    }
}

/// The `host:port` a server listens on.
fn addr(server: &Served) -> String {
    server.url.trim_start_matches("http://").to_string()
}

/// Sends `method path` with `headers` (a `Host` among them when wanted) and `body`, with
/// `Connection: close`, and reads the answer to its end.
fn raw(server: &Served, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Answer {
    let mut request = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() || method == "POST" {
        request.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    request.push_str("\r\n");
    let mut bytes = request.into_bytes();
    bytes.extend_from_slice(body);
    let mut stream = TcpStream::connect(addr(server)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream.write_all(&bytes).unwrap();
    let mut out = Vec::new();
    stream.read_to_end(&mut out).unwrap();
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text:?}"));
    Answer {
        status,
        head: head.to_string(),
        body: body.to_string(),
    }
}

/// Sends `bytes` as they are over one connection and reads what comes back until the server
/// closes it.
fn wire(server: &Served, bytes: &[u8]) -> Vec<u8> {
    let mut stream = TcpStream::connect(addr(server)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream.write_all(bytes).unwrap();
    let mut out = Vec::new();
    stream.read_to_end(&mut out).unwrap();
    out
}

/// The answers in `bytes`, one after the other, each body as long as its `Content-Length`
/// says; `bodiless[i]` marks an answer to `HEAD`, which has none. Bytes after the last whole
/// answer are an answer of their own (with what there is of a body).
fn answers(mut bytes: &[u8], bodiless: &[bool]) -> Vec<Answer> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") else {
            panic!(
                "an answer without the end of its head: {:?}",
                String::from_utf8_lossy(bytes)
            );
        };
        let head = String::from_utf8_lossy(&bytes[..end]).into_owned();
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no status in {head:?}"));
        let length = head
            .lines()
            .filter_map(|line| line.split_once(':'))
            .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
            .map_or(0, |(_, value)| value.trim().parse::<usize>().unwrap());
        let length = if bodiless.get(out.len()) == Some(&true) {
            0
        } else {
            length
        };
        let rest = &bytes[end + 4..];
        let body = &rest[..length.min(rest.len())];
        out.push(Answer {
            status,
            head,
            body: String::from_utf8_lossy(body).into_owned(),
        });
        bytes = &rest[body.len()..];
    }
    out
}

fn serve(store: &Path, extra: &[&str]) -> Served {
    common::serve_hashing(s(store), extra)
}

/// Runs `trajwiki serve` on `store` with `args`, which must be refused before it listens:
/// (exit code, stderr). A server that starts instead is stopped, and the test fails.
fn refused(store: &Path, args: &[&str]) -> (i32, String) {
    let mut child = common::bin()
        .args([
            "serve",
            "--store",
            s(store),
            "--port",
            "0",
            "--model",
            "hashing",
        ])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            return (status.code().unwrap_or(-1), err);
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("serve {args:?} was not refused: it is serving");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The namespaces a server lists.
fn namespaces(server: &Served) -> Vec<String> {
    let (status, list) = call(&format!("{}/v1/namespaces", server.url), None, None);
    assert_eq!(status, 200, "{list}");
    list["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["namespace"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_rebound_name_is_refused_on_every_route() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::demo_store(dir.path());
    let server = serve(&store, &[]);
    let evil = [("Host", "evil.example.com")];
    let search = br#"{"question": "Which class did Maya sign up for?"}"#;
    for (method, path, body) in [
        ("DELETE", "/v1/namespaces/demo", &b""[..]),
        ("GET", "/v1/namespaces", b""),
        ("GET", "/v1/models", b""),
        ("POST", "/v1/namespaces/demo/search", search),
        ("GET", "/view", b""),
        ("GET", "/view/demo/", b""),
        ("GET", "/health", b""),
        ("GET", "/openapi.json", b""),
        (
            "POST",
            "/mcp",
            br#"{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}"#,
        ),
        ("GET", "/nowhere", b""),
    ] {
        let mut headers = evil.to_vec();
        headers.push(("Content-Type", "application/json"));
        raw(&server, method, path, &headers, body).failed(403, "forbidden_host");
    }
    // Without a Host at all (HTTP/1.0 style), or the attacker's name with our port.
    raw(&server, "GET", "/v1/namespaces", &[], b"").failed(403, "forbidden_host");
    let port = addr(&server).rsplit(':').next().unwrap().to_string();
    let evil_port = format!("evil.example.com:{port}");
    raw(
        &server,
        "GET",
        "/v1/namespaces",
        &[("Host", &evil_port)],
        b"",
    )
    .failed(403, "forbidden_host");
    assert_eq!(namespaces(&server), ["demo"], "nothing was deleted");

    // Our own names, with or without the port.
    let own = format!("localhost:{port}");
    for host in [own.as_str(), "localhost", "127.0.0.1", "[::1]"] {
        let answer = raw(&server, "GET", "/v1/namespaces", &[("Host", host)], b"");
        assert_eq!(answer.status, 200, "{host}: {answer:?}");
    }

    // A page of another origin, even when its Host is ours: refused (browsers send Origin on
    // cross-site POST and DELETE). The server's own pages are its own origin.
    let here = addr(&server);
    for origin in [
        "http://evil.example.com",
        "http://localhost:3000",
        "null",
        &format!("https://evil.example.com:{port}"),
    ] {
        raw(
            &server,
            "DELETE",
            "/v1/namespaces/demo",
            &[("Host", &here), ("Origin", origin)],
            b"",
        )
        .failed(403, "forbidden_origin");
    }
    assert_eq!(namespaces(&server), ["demo"], "nothing was deleted");
    let own_origin = format!("http://{here}");
    let answer = raw(
        &server,
        "POST",
        "/v1/namespaces/demo/search",
        &[
            ("Host", &here),
            ("Origin", &own_origin),
            ("Content-Type", "application/json"),
        ],
        search,
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    drop(server);

    // A name the operator gives is answered to, with any port or the one given.
    let server = serve(
        &store,
        &[
            "--allowed-host",
            "memory.example.com",
            "--allowed-host",
            "app.example.com:3000",
        ],
    );
    for (host, status) in [
        ("memory.example.com", 200),
        ("MEMORY.example.com:8700", 200),
        ("app.example.com:3000", 200),
        ("app.example.com:3001", 403),
        ("evil.example.com", 403),
    ] {
        let answer = raw(&server, "GET", "/v1/namespaces", &[("Host", host)], b"");
        assert_eq!(answer.status, status, "{host}: {answer:?}");
    }

    // `*` turns the check off, so it needs a token; a bad entry is refused before listening.
    for (extra, needle) in [
        (vec!["--allowed-host", "*"], "--token"),
        (vec!["--allowed-host", "a b"], "--allowed-host"),
    ] {
        let (code, err) = refused(&store, &extra);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(needle), "{err}");
    }
}

/// Starts `trajwiki serve` on `store` with at most `files` open descriptors.
fn serve_limited(store: &Path, files: u32, extra: &[&str]) -> Served {
    let script = format!("ulimit -n {files} && exec \"$0\" \"$@\"");
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_trajwiki"))
        .args([
            "serve",
            "--store",
            s(store),
            "--port",
            "0",
            "--model",
            "hashing",
        ])
        .args(extra)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let url = common::listening_url(&mut child);
    Served { child, url }
}

/// `/health` answered within `within`, over a fresh connection.
fn health_within(server: &Served, within: Duration) -> bool {
    let start = Instant::now();
    let Ok(mut stream) = TcpStream::connect(addr(server)) else {
        return false;
    };
    stream.set_read_timeout(Some(within)).unwrap();
    let request = format!(
        "GET /health HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        addr(server)
    );
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    String::from_utf8_lossy(&out).contains("\"ok\"") && start.elapsed() <= within
}

/// Whether the server closed `stream` (a read sees its end or a reset) within `within`.
fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    stream.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue, // an error answer before the close
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => return false,
            Err(_) => return true,
        }
    }
}

#[test]
fn slow_clients_are_cut_off_and_health_answers_again() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::demo_store(dir.path());
    let server = serve_limited(
        &store,
        128,
        &[
            "--header-timeout-secs",
            "1",
            "--request-timeout-secs",
            "2",
            "--max-connections",
            "16",
        ],
    );
    let here = addr(&server);
    assert!(health_within(&server, Duration::from_secs(5)));

    // More clients than the server has descriptors: some never finish their headers, some
    // never send a byte.
    let mut slow = Vec::new();
    for i in 0..150 {
        let Ok(mut stream) = TcpStream::connect(&here) else {
            continue;
        };
        if i % 3 != 0 {
            let _ = stream
                .write_all(format!("GET /health HTTP/1.1\r\nHost: {here}\r\nX-Slow: ").as_bytes());
        }
        slow.push(stream);
    }
    // Each is closed once its headers are late; /health answers again once they are.
    assert!(
        closed_within(&mut slow[1], Duration::from_secs(5)),
        "a connection that never finished its headers was kept open"
    );
    assert!(
        closed_within(&mut slow[0], Duration::from_secs(5)),
        "a connection that never sent a byte was kept open"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while !health_within(&server, Duration::from_secs(5)) {
        assert!(
            Instant::now() < deadline,
            "/health does not answer with slow clients connected"
        );
    }
    drop(slow);

    // A body that never comes is cut off at the request deadline with a JSON answer.
    let mut stream = TcpStream::connect(&here).unwrap();
    stream
        .write_all(
            format!(
                "POST /v1/namespaces/demo/search HTTP/1.1\r\nHost: {here}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"question\""
            )
            .as_bytes(),
        )
        .unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let started = Instant::now();
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 503"), "{text}");
    assert!(text.contains("\"timeout\""), "{text}");
    assert!(started.elapsed() < Duration::from_secs(8));
    assert!(health_within(&server, Duration::from_secs(5)));

    // The flags are checked.
    for bad in [
        ["--header-timeout-secs", "0"],
        ["--request-timeout-secs", "-1"],
        ["--ask-timeout-secs", "inf"],
        ["--max-connections", "0"],
    ] {
        let flag = format!("{}={}", bad[0], bad[1]);
        let (code, err) = refused(&store, &[&flag]);
        assert_eq!(code, 2, "{bad:?}: {err}");
        assert!(err.contains(bad[0]), "{err}");
    }
}

#[test]
fn writes_need_a_json_body() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::demo_store(dir.path());
    let server = serve(&store, &[]);
    let here = addr(&server);
    let host = ("Host", here.as_str());
    // What a form on any web site can send without a CORS preflight.
    for (kind, body) in [
        ("text/plain", &b"{}"[..]),
        ("application/x-www-form-urlencoded", b"rebuild=true"),
        ("multipart/form-data; boundary=x", b"--x--"),
    ] {
        for path in [
            "/v1/namespaces/demo/build",
            "/v1/namespaces/demo/messages",
            "/v1/namespaces/demo/runs",
            "/mcp",
        ] {
            raw(&server, "POST", path, &[host, ("Content-Type", kind)], body)
                .failed(415, "bad_request");
        }
    }
    // No type and no body, or JSON's type with no body: refused too.
    raw(&server, "POST", "/v1/namespaces/demo/build", &[host], b"").failed(415, "bad_request");
    raw(
        &server,
        "POST",
        "/v1/namespaces/demo/build",
        &[host, ("Content-Type", "application/json")],
        b"",
    )
    .failed(400, "bad_request");
    // No job was started by any of them: the first job is the one `{}` starts.
    raw(&server, "GET", "/v1/jobs/job_1", &[host], b"").failed(404, "not_found");
    let started = raw(
        &server,
        "POST",
        "/v1/namespaces/demo/build",
        &[host, ("Content-Type", "application/json; charset=utf-8")],
        b"{}",
    );
    assert_eq!(started.status, 202, "{started:?}");
    assert_eq!(started.json()["job"], "job_1", "{started:?}");
}

#[test]
fn tokens_are_strong_off_loopback_and_errors_name_no_path() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::demo_store(dir.path());
    for (args, needle) in [
        (vec!["--host", "0.0.0.0", "--token", " "], "whitespace"),
        (vec!["--host", "0.0.0.0", "--token", "a"], "at least 16"),
        (
            vec!["--host", "0.0.0.0", "--token", "0123456789abcde"],
            "at least 16",
        ),
        (
            vec!["--host", "0.0.0.0", "--token", "0123456789 abcdef"],
            "whitespace",
        ),
        (vec!["--token", " "], "whitespace"),
        // Long enough, but trivially guessed: one character, or a few, over and over.
        (
            vec!["--host", "0.0.0.0", "--token", "aaaaaaaaaaaaaaaa"],
            "1 different character",
        ),
        (
            vec!["--host", "0.0.0.0", "--token", "abababababababababab"],
            "2 different characters",
        ),
        (
            vec!["--host", "0.0.0.0", "--token", "abcdabcdabcdabcd"],
            "4 different characters",
        ),
    ] {
        let (code, err) = refused(&store, &args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    // Sixteen characters do; the server bound to every address answers its IP addresses.
    let token = "0123456789abcdef";
    let server = serve(&store, &["--host", "0.0.0.0", "--token", token]);
    let port = server.url.rsplit(':').next().unwrap().to_string();
    let url = format!("http://127.0.0.1:{port}/v1/namespaces");
    assert_eq!(call(&url, None, Some(token)).0, 200);
    drop(server);

    // Every error a client can provoke, over HTTP, from a job and over MCP: none names the
    // store's path. A vector file gone makes the store itself fail.
    let server = serve(&store, &["--mcp-allow-write"]);
    let base = server.url.clone();
    let names = [
        store.display().to_string(),
        std::fs::canonicalize(&store).unwrap().display().to_string(),
        dir.path().display().to_string(),
    ];
    let mut bodies = Vec::new();
    let mut record = |(status, body): (u16, Value)| {
        assert!(
            status >= 400
                || body["status"] == "failed"
                || body["result"].is_object()
                || body.get("not_done").is_some(),
            "{body}"
        );
        bodies.push(body.to_string());
    };
    record(call(
        &format!("{base}/v1/namespaces/nosuch/search"),
        Some(r#"{"question": "x"}"#),
        None,
    ));
    record(call(
        &format!("{base}/v1/namespaces/nosuch/ask"),
        Some(r#"{"question": "x"}"#),
        None,
    ));
    record(call(
        &format!("{base}/v1/namespaces/nosuch/pages"),
        None,
        None,
    ));
    record(call(
        &format!("{base}/v1/namespaces/nosuch/runs/grep?pattern=x"),
        None,
        None,
    ));
    record(call(
        &format!("{base}/v1/namespaces/demo/records/trj_0000000000000000"),
        None,
        None,
    ));
    let gone = raw(
        &server,
        "DELETE",
        "/v1/namespaces/nosuch",
        &[("Host", &addr(&server))],
        b"",
    );
    gone.failed(404, "unknown_namespace");
    record((gone.status, gone.json()));
    let (_, job) = call(
        &format!("{base}/v1/namespaces/nosuch/build"),
        Some("{}"),
        None,
    );
    let id = job["job"].as_str().unwrap().to_string();
    let failed_job = loop {
        let (_, job) = call(&format!("{base}/v1/jobs/{id}"), None, None);
        if job["status"] != "running" {
            break job;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        failed_job["error"]["code"], "unknown_namespace",
        "{failed_job}"
    );
    record((400, failed_job));
    let mcp = |arguments: Value| {
        let res = ureq::post(&format!("{base}/mcp"))
            .set("Content-Type", "application/json")
            .set("Accept", "application/json, text/event-stream")
            .set("MCP-Protocol-Version", "2025-06-18")
            .send_string(
                &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": "search_memory", "arguments": arguments}})
                .to_string(),
            );
        let res = match res {
            Ok(r) => r,
            Err(ureq::Error::Status(_, r)) => r,
            Err(e) => panic!("{e}"),
        };
        (
            res.status(),
            serde_json::from_str::<Value>(&res.into_string().unwrap()).unwrap(),
        )
    };
    let (status, answer) = mcp(json!({"namespace": "nosuch", "question": "x"}));
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    record((status, answer));
    // The store's vector folder made a file: the store's own errors name the vector file. The
    // message is stored; its build, whose vector row could not be written, is undone whole:
    // 202, and what did not follow says `<store>` for the store's place.
    let vectors = store.join("vectors");
    std::fs::remove_dir_all(&vectors).unwrap();
    std::fs::write(&vectors, "not a folder").unwrap();
    let message = json!({"session": 3, "speaker": "Ana", "text": "We bought a red kayak.",
        "timestamp": "2024-05-01T09:00:00"});
    let (status, broken) = call(
        &format!("{base}/v1/namespaces/demo/messages"),
        Some(&json!({"messages": [message]}).to_string()),
        None,
    );
    assert_eq!(status, 202, "{broken}");
    assert_eq!(broken["not_done"]["step"], "build", "{broken}");
    assert!(broken.get("built").is_none(), "{broken}");
    assert!(
        broken["not_done"]["message"]
            .as_str()
            .unwrap()
            .contains("<store>"),
        "{broken}"
    );
    record((status, broken));
    let res = ureq::post(&format!("{base}/mcp"))
        .set("Content-Type", "application/json")
        .set("Accept", "application/json, text/event-stream")
        .set("MCP-Protocol-Version", "2025-06-18")
        .send_string(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "add_messages", "arguments": {
                    "namespace": "demo", "messages": [message]}}})
            .to_string(),
        )
        .unwrap();
    let answer: Value = serde_json::from_str(&res.into_string().unwrap()).unwrap();
    // Stored, and the vector row did not follow: said in the tool's text, not as a failure.
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    assert!(answer.to_string().contains("did not follow"), "{answer}");
    record((200, answer));

    for body in &bodies {
        for name in &names {
            assert!(!body.contains(name.as_str()), "{name} in {body}");
        }
    }
}

#[test]
fn every_refusal_is_json() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::demo_store(dir.path());
    let server = serve(&store, &[]);
    let here = addr(&server);
    let host = ("Host", here.as_str());
    let json_type = ("Content-Type", "application/json");
    for (method, path, status, code) in [
        // A wrong method.
        (
            "DELETE",
            "/v1/namespaces/demo/pages",
            405,
            "method_not_allowed",
        ),
        (
            "GET",
            "/v1/namespaces/demo/search",
            405,
            "method_not_allowed",
        ),
        ("PUT", "/health", 405, "method_not_allowed"),
        ("OPTIONS", "/v1/namespaces/demo", 405, "method_not_allowed"),
        // A path segment that is not UTF-8 once decoded.
        ("GET", "/v1/namespaces/%FF%FE/pages", 400, "bad_request"),
        (
            "GET",
            "/v1/namespaces/demo/records/%C3%28",
            400,
            "bad_request",
        ),
        ("GET", "/view/%FF/", 400, "bad_request"),
        // Query strings that cannot be read.
        (
            "GET",
            "/view/demo/query?q=x&budget=many",
            400,
            "bad_request",
        ),
        ("GET", "/view/demo/query?budget=%FF", 400, "bad_request"),
        (
            "GET",
            "/v1/namespaces/demo/runs/grep?pattern=x&limit=-1",
            400,
            "bad_request",
        ),
        (
            "GET",
            "/v1/namespaces/demo/history/trj_0000000000000000?when=now",
            400,
            "bad_request",
        ),
    ] {
        let answer = raw(&server, method, path, &[host, json_type], b"");
        answer.failed(status, code);
        assert!(
            answer
                .head
                .to_ascii_lowercase()
                .contains("content-type: application/json"),
            "{method} {path}: {answer:?}"
        );
    }
}

/// Requests that hyper refuses while it reads them, before any route sees them: each answered
/// with the JSON error every other refusal has, and the connection closed.
#[test]
fn requests_hyper_cannot_read_are_refused_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::demo_store(dir.path());
    let server = serve(&store, &[]);
    let here = addr(&server);
    let get = |headers: &str| format!("GET /health HTTP/1.1\r\nHost: {here}\r\n{headers}\r\n");
    let many_headers: String = (0..1000)
        .map(|i| format!("X-Header-{i}: {i}\r\n"))
        .collect();
    let long_path = format!(
        "GET /{} HTTP/1.1\r\nHost: {here}\r\n\r\n",
        "a".repeat(64 * 1024)
    );
    for (what, request, status, code) in [
        (
            "a Content-Length of 2^64",
            get("Content-Length: 18446744073709551616\r\n"),
            400,
            "bad_request",
        ),
        (
            "a negative Content-Length",
            get("Content-Length: -1\r\n"),
            400,
            "bad_request",
        ),
        (
            "two different Content-Lengths",
            get("Content-Length: 0\r\nContent-Length: 1\r\n"),
            400,
            "bad_request",
        ),
        (
            "an HTTP/0.9 request line",
            "GET /health\r\n\r\n".to_string(),
            400,
            "bad_request",
        ),
        (
            "1,000 headers",
            get(&many_headers),
            431,
            "headers_too_large",
        ),
        ("a 64 KiB path", long_path, 414, "uri_too_long"),
    ] {
        let got = answers(&wire(&server, request.as_bytes()), &[]);
        assert_eq!(got.len(), 1, "{what}: {got:?}");
        got[0].failed(status, code);
        let head = got[0].head.to_ascii_lowercase();
        assert!(
            head.contains("content-type: application/json"),
            "{what}: {got:?}"
        );
        assert!(head.contains("connection: close"), "{what}: {got:?}");
    }
    // The same Content-Length given twice is one length (RFC 9112 allows taking it, as hyper
    // does): the request is served, its body read once.
    let body = r#"{"question": "Which class did Maya sign up for?"}"#;
    let request = format!(
        "POST /v1/namespaces/demo/search HTTP/1.1\r\nHost: {here}\r\nContent-Type: application/json\r\nContent-Length: {n}\r\nContent-Length: {n}\r\nConnection: close\r\n\r\n{body}",
        n = body.len()
    );
    let got = answers(&wire(&server, request.as_bytes()), &[]);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].status, 200, "{got:?}");
    assert_eq!(got[0].json()["namespace"], "demo", "{got:?}");
}

/// A refusal of hyper's own comes after the answers to the requests sent before it on the same
/// connection (pipelined, a `HEAD` and a chunked body among them), and those are answered whole.
#[test]
fn a_refusal_follows_the_answers_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::demo_store(dir.path());
    let server = serve(&store, &[]);
    let here = addr(&server);
    let question = r#"{"question": "Which class did Maya sign up for?"}"#;
    let mut requests = format!("GET /health HTTP/1.1\r\nHost: {here}\r\n\r\n");
    requests.push_str(&format!("HEAD /health HTTP/1.1\r\nHost: {here}\r\n\r\n"));
    requests.push_str(&format!(
        "POST /v1/namespaces/demo/search HTTP/1.1\r\nHost: {here}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{question}",
        question.len()
    ));
    requests.push_str(&format!(
        "POST /v1/namespaces/demo/search HTTP/1.1\r\nHost: {here}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{question}\r\n0\r\n\r\n",
        question.len()
    ));
    requests.push_str(&format!(
        "GET /health HTTP/1.1\r\nHost: {here}\r\nContent-Length: -1\r\n\r\n"
    ));
    // Never read: the connection ends with the refusal.
    requests.push_str(&format!("GET /health HTTP/1.1\r\nHost: {here}\r\n\r\n"));
    let got = answers(&wire(&server, requests.as_bytes()), &[false, true]);
    assert_eq!(got.len(), 5, "{got:?}");
    assert_eq!(got[0].json()["status"], "ok", "{got:?}");
    assert_eq!(got[1].status, 200, "{got:?}");
    assert!(got[1].body.is_empty(), "{got:?}");
    for search in &got[2..4] {
        assert_eq!(search.status, 200, "{search:?}");
        assert_eq!(search.json()["namespace"], "demo", "{search:?}");
    }
    got[4].failed(400, "bad_request");
}

#[test]
fn the_root_leads_to_the_viewer() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::demo_store(dir.path());
    let server = serve(&store, &[]);
    let answer = raw(&server, "GET", "/", &[("Host", &addr(&server))], b"");
    assert!((300..400).contains(&answer.status), "{answer:?}");
    assert!(
        answer
            .head
            .to_ascii_lowercase()
            .contains("location: /view\r")
            || answer
                .head
                .to_ascii_lowercase()
                .ends_with("location: /view"),
        "{answer:?}"
    );
    // A browser following it gets the viewer.
    let page = ureq::get(&format!("{}/", server.url)).call().unwrap();
    assert!(page.content_type().starts_with("text/html"));
    assert!(page.into_string().unwrap().contains("Namespaces"));
}
