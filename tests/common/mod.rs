//! Helpers shared by the integration tests: run the `trajwiki` binary, find the shared data.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;

/// The built `trajwiki` binary.
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_trajwiki"))
}

/// The URL a `trajwiki serve` child (spawned with its stderr piped) prints when it listens; its
/// stderr is drained afterwards so that the server never blocks on it.
pub fn listening_url(child: &mut Child) -> String {
    let mut lines = BufReader::new(child.stderr.take().expect("stderr piped")).lines();
    let url = loop {
        let line = lines
            .next()
            .expect("the server says where it listens")
            .unwrap();
        if let Some(at) = line.find("http://") {
            break line[at..].trim().to_string();
        }
    };
    std::thread::spawn(move || lines.for_each(drop));
    url
}

/// A `trajwiki serve` child and the URL it listens on; killed and reaped when dropped.
pub struct Served {
    pub child: Child,
    pub url: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `trajwiki serve` on `store` (a directory or a URL), on a free port, with the hashing
/// model and `extra` arguments; the environment's LLM settings are removed so that only `extra`
/// configures one.
pub fn serve_hashing(store: &str, extra: &[&str]) -> Served {
    let mut child = bin()
        .args([
            "serve", "--store", store, "--port", "0", "--model", "hashing",
        ])
        .args(extra)
        .env_remove(trajwiki::llm::ENV_BASE_URL)
        .env_remove(trajwiki::llm::ENV_MODEL)
        .env_remove(trajwiki::llm::ENV_API_KEY)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("trajwiki serve starts");
    let url = listening_url(&mut child);
    Served { child, url }
}

/// (status, JSON body) of a request to `url`; `body` makes it a POST, `token` adds a bearer token.
pub fn http(url: &str, body: Option<&str>, token: Option<&str>) -> (u16, Value) {
    let mut req = match body {
        Some(_) => ureq::post(url).set("Content-Type", "application/json"),
        None => ureq::get(url),
    };
    if let Some(t) = token {
        req = req.set("Authorization", &format!("Bearer {t}"));
    }
    let res = match body {
        Some(b) => req.send_string(b),
        None => req.call(),
    };
    let res = match res {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("{url}: {e}"),
    };
    let status = res.status();
    let text = res.into_string().unwrap();
    let value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{url}: {e}: {text}"));
    (status, value)
}

/// Runs `trajwiki` with `args`, returning (exit code, stdout, stderr).
pub fn trajwiki(args: &[&str]) -> (i32, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = bin().args(args).output().expect("trajwiki runs");
    (
        status.code().unwrap_or(-1),
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

/// Runs `trajwiki` and asserts success, returning stdout.
pub fn ok(args: &[&str]) -> String {
    let (code, out, err) = trajwiki(args);
    assert_eq!(code, 0, "trajwiki {args:?} failed:\n{err}");
    out
}

/// Runs `trajwiki eval locomo` on `data` with the lexical `hashing` model, writing to `out`, at
/// each of `budgets` and `modes`; `extra` arguments follow. Asserts success, returns stdout.
pub fn eval_locomo(
    data: &Path,
    out: &Path,
    budgets: &[usize],
    modes: &[&str],
    extra: &[&str],
) -> String {
    let budgets: Vec<String> = budgets.iter().map(usize::to_string).collect();
    let mut args = vec![
        "eval",
        "locomo",
        "--data",
        data.to_str().expect("a UTF-8 path"),
        "--out",
        out.to_str().expect("a UTF-8 path"),
        "--model",
        "hashing",
    ];
    for b in &budgets {
        args.extend(["--budget", b.as_str()]);
    }
    for m in modes {
        args.extend(["--mode", m]);
    }
    args.extend_from_slice(extra);
    ok(&args)
}

/// `../shared/data/<rel>` when present; `None` (with a message) otherwise.
pub fn shared_data(rel: &str) -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data")
        .join(rel);
    if path.exists() {
        Some(path)
    } else {
        eprintln!(
            "skipping: {} is absent (the shared evaluation data is not checked out)",
            path.display()
        );
        None
    }
}

/// The bundled demo conversation.
pub fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/demo.jsonl")
}

/// `stats --json` of a store, parsed.
pub fn stats(store: &Path) -> serde_json::Value {
    serde_json::from_str(&ok(&[
        "stats",
        "--store",
        store.to_str().unwrap(),
        "--json",
    ]))
    .expect("stats is JSON")
}

/// The fetched MiniLM folder, or `None` (with a message) when it is absent. With
/// `TRAJWIKI_REQUIRE_MODELS=1` a missing model fails the test instead.
pub fn minilm_dir() -> Option<PathBuf> {
    let dir =
        trajwiki::embed::resolve::models_dir(&trajwiki::embed::trajwiki_home()).join("minilm");
    if dir.join("model.safetensors").is_file() {
        return Some(dir);
    }
    if std::env::var("TRAJWIKI_REQUIRE_MODELS").is_ok_and(|v| v == "1") {
        panic!(
            "TRAJWIKI_REQUIRE_MODELS=1 but {} is missing; run `trajwiki model fetch minilm`",
            dir.display()
        );
    }
    eprintln!(
        "SKIPPED: MiniLM is not fetched ({} is missing); run `trajwiki model fetch minilm`",
        dir.display()
    );
    None
}

/// Cosine similarity.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum();
    let na: f64 = a.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    dot / (na * nb)
}

/// A path as a command-line argument.
pub fn s(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// A store at `dir/store` holding the demo conversation, built with the `hashing` model.
pub fn demo_store(dir: &Path) -> PathBuf {
    let store = dir.join("store");
    ok(&["ingest", "--store", s(&store), s(&demo())]);
    ok(&[
        "build",
        "--store",
        s(&store),
        "--namespace",
        "demo",
        "--model",
        "hashing",
        "--flush",
        "-q",
    ]);
    store
}

/// How many times `needle` occurs in the bytes of every file under `dir`.
pub fn occurrences(dir: &Path, needle: &[u8]) -> usize {
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            n += occurrences(&path, needle);
        } else {
            let bytes = std::fs::read(&path).unwrap();
            n += bytes.windows(needle.len()).filter(|w| *w == needle).count();
        }
    }
    n
}

/// Builds namespace `ns` of `store` (a directory or a URL) with the hashing model, flushed.
pub fn build_hashing(store: &str, ns: &str) {
    ok(&[
        "build",
        "--store",
        store,
        "--namespace",
        ns,
        "--model",
        "hashing",
        "--flush",
        "-q",
    ]);
}

/// The memory of namespace `ns` of `store`, as `export --what memory` prints it.
pub fn export_memory(store: &str, ns: &str) -> String {
    ok(&[
        "export",
        "--store",
        store,
        "--namespace",
        ns,
        "--what",
        "memory",
    ])
}

/// Writes `messages` (JSON objects of the ingest fields) to `path` as JSONL, each in namespace
/// `ns`.
pub fn write_in_namespace(path: &Path, messages: &[serde_json::Value], ns: &str) {
    let text: String = messages
        .iter()
        .map(|m| {
            let mut m = m.clone();
            m["namespace"] = serde_json::json!(ns);
            format!("{m}\n")
        })
        .collect();
    std::fs::write(path, text).unwrap();
}

/// A message of a generated conversation: turn `seq` of `session`, its ref "D{session}:{seq}".
pub fn turn(
    ns: &trajwiki::core::Namespace,
    session: u32,
    seq: u32,
    speaker: &str,
    text: &str,
    at: chrono::NaiveDateTime,
) -> trajwiki::core::SourceMessage {
    trajwiki::core::SourceMessage::new(
        ns.clone(),
        session,
        seq,
        speaker.to_string(),
        text.to_string(),
        at,
        vec![],
        Some(format!("D{session}:{seq}")),
    )
}

/// `(session, speaker, text)` turns as messages, numbered from 1 within their session, each at
/// the time `at(session, seq)` gives.
pub fn numbered_turns(
    ns: &trajwiki::core::Namespace,
    turns: &[(u32, &str, &str)],
    at: impl Fn(u32, u32) -> chrono::NaiveDateTime,
) -> Vec<trajwiki::core::SourceMessage> {
    let mut seq = std::collections::BTreeMap::<u32, u32>::new();
    turns
        .iter()
        .map(|&(session, speaker, text)| {
            let n = seq.entry(session).or_default();
            *n += 1;
            turn(ns, session, *n, speaker, text, at(session, *n))
        })
        .collect()
}

/// `(session, speaker, text)` turns of namespace `ns`, session N on 1 January 2023 plus N weeks,
/// turn n at 10:n.
pub fn weekly_turns(ns: &str, turns: &[(u32, &str, &str)]) -> Vec<trajwiki::core::SourceMessage> {
    let ns = trajwiki::core::Namespace::new(ns).unwrap();
    numbered_turns(&ns, turns, |session, n| {
        chrono::NaiveDate::from_ymd_opt(2023, 1, 1)
            .unwrap()
            .and_hms_opt(10, n, 0)
            .unwrap()
            + chrono::Duration::days(7 * session as i64)
    })
}
