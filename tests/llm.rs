//! `trajwiki ask` against a scripted OpenAI-compatible server on 127.0.0.1 (real HTTP): valid
//! answers, refs outside the context, malformed and schema-breaking replies and their one retry,
//! a server without structured outputs, 429 and 5xx retried, timeouts and a dead endpoint, the
//! response cache, the API key kept out of every output and file, and no model at all.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{bin, demo, demo_store, occurrences, ok, s};
use serde_json::{json, Value};

/// One scripted reply: status, extra headers, body, and a delay before it.
#[derive(Clone)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
    delay: Duration,
}

impl Reply {
    /// A chat completion whose message content is `content`.
    fn content(content: &str) -> Reply {
        Reply {
            status: 200,
            headers: Vec::new(),
            body: json!({
                "choices": [{"message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": 100, "completion_tokens": 20},
            })
            .to_string(),
            delay: Duration::ZERO,
        }
    }

    /// A chat completion holding `answer` as JSON.
    fn answer(answer: Value) -> Reply {
        Reply::content(&answer.to_string())
    }

    fn status(status: u16, body: &str) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: body.to_string(),
            delay: Duration::ZERO,
        }
    }
}

/// A request as the server saw it.
#[derive(Debug, Clone)]
struct Seen {
    authorization: Option<String>,
    body: Value,
}

/// A server answering each request with the next scripted reply (the last one repeats), or with
/// what a handler makes of the request.
struct Server {
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

/// Makes the reply to the `n`-th request (from 0), given its body.
type Handler = dyn Fn(usize, &Value) -> Reply + Send + Sync;

impl Server {
    fn start(script: Vec<Reply>) -> Server {
        Server::with(move |n, _| script[n.min(script.len() - 1)].clone())
    }

    fn with(handler: impl Fn(usize, &Value) -> Reply + Send + Sync + 'static) -> Server {
        let handler: Arc<Handler> = Arc::new(handler);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (log, handler) = (Arc::clone(&log), Arc::clone(&handler));
                std::thread::spawn(move || serve(stream, &*handler, log));
            }
        });
        Server { url, seen }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn serve(stream: TcpStream, handler: &Handler, log: Arc<Mutex<Vec<Seen>>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let (mut length, mut authorization) = (0usize, None);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap(); // request line
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
            break;
        }
        let (name, value) = line.split_once(':').unwrap();
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().unwrap(),
            "authorization" => authorization = Some(value.trim().to_string()),
            _ => {}
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).unwrap();
    let body: Value = serde_json::from_slice(&body).unwrap();
    let reply = {
        let mut log = log.lock().unwrap();
        log.push(Seen {
            authorization,
            body: body.clone(),
        });
        handler(log.len() - 1, &body)
    };
    std::thread::sleep(reply.delay);
    let mut out = stream;
    let mut head = format!(
        "HTTP/1.1 {} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        reply.status,
        reply.body.len()
    );
    for (k, v) in &reply.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let _ = out.write_all(head.as_bytes());
    let _ = out.write_all(reply.body.as_bytes());
}

/// Runs `trajwiki` with `args` and none of the model settings of the environment: (exit code,
/// stdout, stderr).
fn trajwiki(args: &[&str]) -> (i32, String, String) {
    let out = bin()
        .args(args)
        .env_remove(trajwiki::llm::ENV_BASE_URL)
        .env_remove(trajwiki::llm::ENV_MODEL)
        .env_remove(trajwiki::llm::ENV_API_KEY)
        .output()
        .expect("trajwiki runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A temporary folder holding the demo conversation's store, built.
fn built_demo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    demo_store(dir.path());
    dir
}

const QUESTION: &str = "What did Maya make at the pottery workshop?";

/// `trajwiki ask --json` on the demo store against `url` (no model when `None`), with `extra`
/// arguments; (exit code, parsed stdout, stderr).
fn ask(dir: &Path, url: Option<&str>, extra: &[&str]) -> (i32, Value, String) {
    let store = dir.join("store");
    let mut args = vec![
        "ask",
        "--store",
        s(&store),
        "--namespace",
        "demo",
        "--model",
        "hashing",
        "--json",
    ];
    if !extra.contains(&"--llm-retries") {
        args.extend(["--llm-retries", "2"]);
    }
    if let Some(url) = url {
        args.extend(["--llm-base-url", url, "--llm-model", "scripted"]);
    }
    args.extend_from_slice(extra);
    args.push(QUESTION);
    let (code, out, err) = trajwiki(&args);
    let value = serde_json::from_str(&out).unwrap_or(Value::Null);
    (code, value, err)
}

fn good_answer(refs: &[&str]) -> Value {
    json!({
        "can_answer": true, "answer_type": "fact", "final_answer": "a blue clay bowl",
        "supporting_facts": ["Maya made her first bowl"], "supporting_source_refs": refs,
        "counted_events": [], "excluded_events": [], "uncertainties": [], "abstain_reason": ""
    })
}

#[test]
fn an_answer_cites_the_context_and_refs_outside_it_are_removed() {
    let dir = built_demo();
    let server = Server::start(vec![Reply::answer(good_answer(&["S1:3", "S9:99"]))]);
    let (code, out, err) = ask(dir.path(), Some(&server.url), &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out["status"], "answered");
    assert_eq!(out["answer"]["final_answer"], "a blue clay bowl");
    assert_eq!(out["answer"]["supporting_source_refs"], json!(["S1:3"]));
    assert_eq!(out["answer"]["removed_refs"], json!(["S9:99"]));
    assert!(out["source_refs"]
        .as_array()
        .unwrap()
        .contains(&json!("S1:3")));
    // One request: the schema as a structured output, the context in the prompt.
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    let body = &seen[0].body;
    assert_eq!(body["model"], "scripted");
    assert_eq!(body["response_format"]["type"], "json_schema");
    assert_eq!(
        body["response_format"]["json_schema"]["schema"]["required"]
            .as_array()
            .unwrap()
            .len(),
        9
    );
    let prompt = body["messages"][1]["content"].as_str().unwrap();
    assert!(
        prompt.contains("S1:3") && prompt.contains(QUESTION),
        "{prompt}"
    );
    assert_eq!(out["llm"]["usage"]["answer"]["requests"], 1);
    assert_eq!(out["llm"]["usage"]["answer"]["prompt_tokens"], 100);
}

#[test]
fn an_answer_with_only_foreign_refs_becomes_an_abstention() {
    let dir = built_demo();
    let server = Server::start(vec![Reply::answer(good_answer(&["D1:1"]))]);
    let (code, out, _) = ask(dir.path(), Some(&server.url), &[]);
    assert_eq!(code, 0);
    assert_eq!(out["status"], "abstained");
    assert_eq!(out["answer"]["final_answer"], "");
    assert!(out["answer"]["abstain_reason"]
        .as_str()
        .unwrap()
        .contains("D1:1"));
    // The evidence is there all the same.
    assert!(!out["evidence"].as_array().unwrap().is_empty());
}

#[test]
fn invalid_output_is_asked_for_again_once_with_what_was_wrong() {
    let dir = built_demo();
    // Prose without JSON, then a valid answer.
    let server = Server::start(vec![
        Reply::content("Maya made a bowl, I think."),
        Reply::answer(good_answer(&["S1:3"])),
    ]);
    let (_, out, _) = ask(dir.path(), Some(&server.url), &[]);
    assert_eq!(out["status"], "answered");
    assert_eq!(out["answer"]["attempts"], 2);
    let seen = server.seen();
    assert_eq!(seen.len(), 2);
    let retry = seen[1].body["messages"].as_array().unwrap();
    let last = retry.last().unwrap()["content"].as_str().unwrap();
    assert!(last.contains("no JSON object"), "{last}");
    assert_eq!(out["llm"]["usage"]["repair"]["requests"], 1);

    // Missing fields twice: no third request, the evidence without an answer.
    let dir = built_demo();
    let server = Server::start(vec![Reply::answer(json!({"final_answer": "a bowl"}))]);
    let (code, out, _) = ask(dir.path(), Some(&server.url), &[]);
    assert_eq!(code, 0);
    assert_eq!(out["status"], "model_unavailable");
    let reason = out["answer"]["abstain_reason"].as_str().unwrap();
    assert!(
        reason.contains("can_answer is missing") && reason.contains("supporting_source_refs"),
        "{reason}"
    );
    assert_eq!(server.seen().len(), 2);
}

#[test]
fn a_server_without_structured_outputs_gets_json_mode() {
    // A 400 that names the field, and the 500 the llama-cpp-python server answers with.
    for (status, message) in [
        (400, "response_format json_schema is not supported"),
        (
            500,
            "1 validation error: ('body', 'response_format', 'type'): Input should be 'text' or 'json_object', input: 'json_schema'",
        ),
    ] {
        let dir = built_demo();
        let fenced = format!("```json\n{}\n```", good_answer(&["S1:3"]));
        let server = Server::start(vec![
            Reply::status(status, &json!({"error": {"message": message}}).to_string()),
            Reply::content(&fenced),
        ]);
        let (_, out, _) = ask(dir.path(), Some(&server.url), &[]);
        assert_eq!(out["status"], "answered", "{status}");
        let seen = server.seen();
        assert_eq!(seen.len(), 2, "{status}: refused at once, not retried");
        let format = &seen[1].body["response_format"];
        assert_eq!(format["type"], "json_object");
        assert_eq!(format["schema"]["required"].as_array().unwrap().len(), 9);
        assert_eq!(seen[1].body["max_tokens"], 400);
        let last = seen[1].body["messages"].as_array().unwrap().last().unwrap()["content"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(last.contains("supporting_source_refs"), "{last}");
    }
}

#[test]
fn rate_limits_and_server_errors_are_retried() {
    let dir = built_demo();
    let mut limited = Reply::status(429, r#"{"error": "slow down"}"#);
    limited.headers.push(("Retry-After".into(), "0".into()));
    let server = Server::start(vec![
        limited,
        Reply::status(503, "busy"),
        Reply::answer(good_answer(&["S1:3"])),
    ]);
    let (_, out, _) = ask(dir.path(), Some(&server.url), &["--llm-retries", "2"]);
    assert_eq!(out["status"], "answered");
    assert_eq!(server.seen().len(), 3);
    assert_eq!(out["llm"]["usage"]["answer"]["requests"], 3);

    // Past the retries: the evidence, and the server's last word.
    let dir = built_demo();
    let server = Server::start(vec![Reply::status(500, "down for maintenance")]);
    let (code, out, err) = ask(dir.path(), Some(&server.url), &["--llm-retries", "1"]);
    assert_eq!(code, 0);
    assert_eq!(out["status"], "model_unavailable");
    assert!(out["answer"]["abstain_reason"]
        .as_str()
        .unwrap()
        .contains("500"));
    assert!(err.contains("warning"), "{err}");
    assert_eq!(server.seen().len(), 2);
}

#[test]
fn a_timeout_or_a_dead_endpoint_leaves_the_evidence() {
    let dir = built_demo();
    let mut slow = Reply::answer(good_answer(&["S1:3"]));
    slow.delay = Duration::from_secs(3);
    let server = Server::start(vec![slow]);
    let (code, out, _) = ask(
        dir.path(),
        Some(&server.url),
        &["--llm-timeout", "0.3", "--llm-retries", "0"],
    );
    assert_eq!(code, 0);
    assert_eq!(out["status"], "model_unavailable");
    assert!(!out["evidence"].as_array().unwrap().is_empty());

    // Nothing listens on a port just closed.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/v1");
    let (code, out, _) = ask(dir.path(), Some(&url), &["--llm-retries", "0"]);
    assert_eq!(code, 0);
    assert_eq!(out["status"], "model_unavailable");
    assert!(out["answer"]["abstain_reason"]
        .as_str()
        .unwrap()
        .contains("unavailable"));
}

#[test]
fn a_rerun_is_answered_from_the_cache_without_a_request() {
    let dir = built_demo();
    let server = Server::start(vec![Reply::answer(good_answer(&["S1:3"]))]);
    let (_, first, _) = ask(dir.path(), Some(&server.url), &[]);
    let (_, second, _) = ask(dir.path(), Some(&server.url), &[]);
    assert_eq!(server.seen().len(), 1);
    assert_eq!(first["answer"], second["answer"]);
    assert_eq!(second["llm"]["usage"]["answer"]["cached"], 1);
    assert_eq!(second["llm"]["usage"]["answer"]["requests"], 0);
    // A read-only store is read from and never written.
    let (_, third, _) = ask(dir.path(), Some(&server.url), &["--read-only"]);
    assert_eq!(third["answer"], first["answer"]);
    assert_eq!(server.seen().len(), 1);
    // Deleting the namespace deletes what the model said about it.
    ok(&[
        "delete",
        "--store",
        s(&dir.path().join("store")),
        "--namespace",
        "demo",
        "--yes",
    ]);
    assert_eq!(
        occurrences(&dir.path().join("store"), b"a blue clay bowl"),
        0,
        "the cached answer survives the delete"
    );
}

#[test]
fn the_api_key_is_sent_and_never_stored_or_printed() {
    let dir = built_demo();
    let key = "sk-trajwiki-test-4242";
    let server = Server::start(vec![Reply::status(401, r#"{"error": "bad key"}"#)]);
    let (code, out, err) = ask(dir.path(), Some(&server.url), &["--llm-api-key", key]);
    assert_eq!(code, 0);
    assert_eq!(out["status"], "model_unavailable");
    let seen = server.seen();
    assert_eq!(seen.len(), 1, "a 401 is not retried");
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some(format!("Bearer {key}").as_str())
    );
    assert!(!out.to_string().contains(key) && !err.contains(key));
    let server = Server::start(vec![Reply::answer(good_answer(&["S1:3"]))]);
    let (_, out, err) = ask(dir.path(), Some(&server.url), &["--llm-api-key", key]);
    assert_eq!(out["status"], "answered");
    assert!(!out.to_string().contains(key) && !err.contains(key));
    assert_eq!(occurrences(&dir.path().join("store"), key.as_bytes()), 0);
}

#[test]
fn without_a_model_the_evidence_comes_with_a_clear_status() {
    let dir = built_demo();
    let (code, out, err) = ask(dir.path(), None, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out["status"], "no_answer_model");
    assert!(out["llm"].is_null());
    assert!(out["answer"]["abstain_reason"]
        .as_str()
        .unwrap()
        .contains("no answer model configured"));
    assert!(!out["evidence"].as_array().unwrap().is_empty());
    assert!(err.contains("no answer model configured"), "{err}");
    // Half a configuration, or a URL that is not one, is a usage error.
    let store = dir.path().join("store");
    for bad in [
        vec!["--llm-base-url", "http://127.0.0.1:1/v1"],
        vec!["--llm-model", "m"],
        vec!["--llm-base-url", "ftp://x/v1", "--llm-model", "m"],
        vec![
            "--llm-base-url",
            "http://x/v1",
            "--llm-model",
            "m",
            "--llm-timeout",
            "0",
        ],
    ] {
        let mut args = vec![
            "ask",
            "--store",
            s(&store),
            "--namespace",
            "demo",
            "--model",
            "hashing",
        ];
        args.extend(bad.iter().copied());
        args.push(QUESTION);
        let (code, _, err) = trajwiki(&args);
        assert_eq!(code, 2, "{bad:?}: {err}");
        assert!(err.contains("--llm"), "{err}");
    }
}

/// The first conversation of locomo7, as a LoCoMo file of its own, with its question → gold
/// answer map (categories 1–4).
fn one_conversation(dir: &Path) -> Option<(std::path::PathBuf, Vec<(String, String)>)> {
    let data = common::shared_data("locomo/locomo7.json")?;
    let all: Value = serde_json::from_str(&std::fs::read_to_string(data).unwrap()).unwrap();
    let first = all[0].clone();
    let gold = first["qa"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|q| q["category"] != 5)
        .filter_map(|q| {
            let answer = match &q["answer"] {
                Value::String(s) => s.clone(),
                Value::Null => return None,
                other => other.to_string(),
            };
            Some((q["question"].as_str()?.to_string(), answer))
        })
        .collect();
    let path = dir.join("one.json");
    std::fs::write(&path, Value::Array(vec![first]).to_string()).unwrap();
    Some((path, gold))
}

/// The user message's text after `label` up to the end of its line.
fn field<'a>(text: &'a str, label: &str) -> &'a str {
    let start = text.rfind(label).map_or(text.len(), |i| i + label.len());
    text[start..].lines().next().unwrap_or("")
}

#[test]
fn eval_answers_writes_answers_refs_metrics_and_verdicts() {
    let dir = tempfile::tempdir().unwrap();
    let Some((data, gold)) = one_conversation(dir.path()) else {
        return;
    };
    let golds: std::collections::HashMap<String, String> = gold.iter().cloned().collect();
    let gold_list = gold.clone();
    let judged = golds.clone();
    // One question the model abstains on the first time it reads it: the evaluation takes the
    // path `ask` takes, a reflection and a search with its hints.
    let reflected = gold
        .iter()
        .map(|(q, _)| q.clone())
        .find(|q| q.len().is_multiple_of(2))
        .unwrap();
    let asked_once = std::sync::Mutex::new(std::collections::HashSet::new());
    let abstain_on = reflected.clone();
    // The answer model answers with the gold answer when the question has an even length (and
    // something else otherwise), citing the context's first ref; the judge compares answers.
    let server = Server::with(move |_, body| {
        let user = body["messages"][1]["content"].as_str().unwrap_or("");
        match body["response_format"]["json_schema"]["name"].as_str() {
            Some("hints") => Reply::answer(json!({
                "entities": ["Caroline"], "event_terms": ["support group"],
                "temporal_terms": [], "must_find_terms": [],
            })),
            Some("answer") => {
                let question = field(user, "\n\nQuestion: ");
                let first_ref = user
                    .lines()
                    .filter_map(|l| l.split_whitespace().next())
                    .find(|t| t.starts_with('D') && t.contains(':'))
                    .unwrap_or("none");
                if question == abstain_on && asked_once.lock().unwrap().insert(question.to_string())
                {
                    return Reply::answer(json!({
                        "can_answer": false, "answer_type": "other", "final_answer": "",
                        "supporting_facts": [], "supporting_source_refs": [],
                        "counted_events": [], "excluded_events": [], "uncertainties": [],
                        "abstain_reason": "the context does not say"
                    }));
                }
                let given = if question.len().is_multiple_of(2) {
                    golds.get(question).cloned().unwrap_or_default()
                } else {
                    "I am not sure".to_string()
                };
                Reply::answer(json!({
                    "can_answer": true, "answer_type": "fact", "final_answer": given,
                    "supporting_facts": [], "supporting_source_refs": [first_ref],
                    "counted_events": [], "excluded_events": [], "uncertainties": [],
                    "abstain_reason": ""
                }))
            }
            _ => {
                let (question, given) = (field(user, "Question: "), field(user, "Answer: "));
                let right = judged.get(question).is_some_and(|g| g.as_str() == given);
                Reply::answer(json!({
                    "reasoning": "compared",
                    "label": if right { "CORRECT" } else { "WRONG" },
                }))
            }
        }
    });
    let store = dir.path().join("store");
    let run = |out: &str| {
        let out = dir.path().join(out);
        let (code, _, err) = trajwiki(&[
            "eval",
            "locomo",
            "--data",
            s(&data),
            "--out",
            s(&out),
            "--store",
            s(&store),
            "--model",
            "hashing",
            "--budget",
            "2700",
            "--mode",
            "full",
            "--answer",
            "--llm-base-url",
            &server.url,
            "--llm-model",
            "scripted",
        ]);
        assert_eq!(code, 0, "{err}");
        out
    };
    let out = run("first");
    let text = std::fs::read_to_string(out.join("answers.jsonl")).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), gold.len());
    let (mut correct, mut f1s) = (0usize, Vec::new());
    for line in &lines {
        let (question, answer) = (
            line["question"].as_str().unwrap(),
            line["answer"].as_str().unwrap(),
        );
        let gold = line["gold"].as_str().unwrap();
        assert!(
            gold_list.contains(&(question.to_string(), gold.to_string())),
            "{question}: {gold}"
        );
        let f1 = line["f1"].as_f64().unwrap();
        assert_eq!(f1, trajwiki::metrics::token_f1(answer, gold));
        assert_eq!(
            line["bleu1"].as_f64().unwrap(),
            trajwiki::metrics::bleu1(answer, gold)
        );
        let route = if question == reflected {
            "reflection"
        } else {
            "first"
        };
        assert_eq!(line["route"], route, "{line}");
        if line["status"] == "answered" {
            assert!(!line["supporting_source_refs"]
                .as_array()
                .unwrap()
                .is_empty());
        }
        if answer == gold && line["status"] == "answered" {
            assert_eq!(f1, 1.0);
            assert_eq!(line["judge"], "CORRECT");
        } else {
            assert_eq!(line["judge"], "WRONG", "{line}");
        }
        correct += usize::from(line["judge"] == "CORRECT");
        f1s.push(f1);
    }
    assert!(
        correct > 0 && correct < lines.len(),
        "{correct} of {}",
        lines.len()
    );
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let all = &summary["answers"]["cells"]["all"];
    assert_eq!(all["questions"], lines.len());
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    assert!(close(
        all["judge_correct"].as_f64().unwrap(),
        correct as f64 / lines.len() as f64
    ));
    assert!(close(
        all["f1"].as_f64().unwrap(),
        f1s.iter().sum::<f64>() / f1s.len() as f64
    ));
    assert_eq!(summary["answers"]["answer_model"], "scripted");
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        report.contains("## Answers") && report.contains("`scripted`"),
        "{report}"
    );
    // The published scores beside ours, categories by number.
    assert!(
        report.contains("| Mem0 | Mem0 (graph) | Zep |")
            && report.contains("| all | ")
            && report.contains(" 66.88 | 68.44 | 65.99 |"),
        "{report}"
    );

    // A rerun asks nothing and writes the same answers. Every question is answered and judged
    // once; the reflected one also costs the reflection and a second answer.
    let asked = server.seen().len();
    assert_eq!(asked, 2 * lines.len() + 2);
    let again = run("second");
    assert_eq!(server.seen().len(), asked);
    assert_eq!(
        std::fs::read_to_string(again.join("answers.jsonl")).unwrap(),
        text
    );
}

#[test]
fn runs_compiled_by_a_model_are_validated_retried_and_fall_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    ok(&["ingest", "--store", s(&store), "tests/fixtures/runs.jsonl"]);
    // heat-1: valid at once. heat-2: cites a step the run lacks, then is fixed. shop-1: never
    // valid (an insight citing no step, twice).
    let compilation = |diagnosis: &str, guideline: &str| {
        Reply::answer(json!({
            "diagnosis": diagnosis,
            "insights": [{"guideline": guideline, "applies_when": "a heating task"}],
        }))
    };
    let server = Server::with(move |_, body| {
        let messages = body["messages"].as_array().unwrap();
        let user = messages[1]["content"].as_str().unwrap();
        let retry = messages.len() > 2;
        if user.contains("heat some egg") {
            compilation(
                "Solved once the egg was taken [step 2].",
                "Take the object first [step 2].",
            )
        } else if user.contains("heat some mug") && retry {
            compilation(
                "It never opened the microwave [step 1].",
                "Open the microwave first [step 1].",
            )
        } else if user.contains("heat some mug") {
            compilation("Failed [step 999].", "Open it [step 999].")
        } else {
            compilation("Half the reward.", "Read the price.")
        }
    });
    let (code, out, err) = trajwiki(&[
        "trace",
        "compile",
        "--store",
        s(&store),
        "--json",
        "--llm-base-url",
        &server.url,
        "--llm-model",
        "scripted",
    ]);
    assert_eq!(code, 0, "{err}");
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report[0]["compiler"], "llm:scripted");
    assert_eq!(report[0]["fallbacks"], json!(["shop-1"]));
    assert!(
        err.contains("shop-1") && err.contains("cites no step"),
        "{err}"
    );
    // 1 + 2 + 2 requests; the second try of heat-2 was told what was wrong.
    let seen = server.seen();
    assert_eq!(seen.len(), 5);
    let told = seen
        .iter()
        .filter_map(|s| {
            s.body["messages"].as_array().unwrap().last()?["content"]
                .as_str()
                .map(str::to_string)
        })
        .any(|t| t.contains("cites step 999, but the run has"));
    assert!(told);
    // What was stored: the model's compilations of heat-1 and heat-2, the deterministic one of
    // shop-1.
    let compilers: Vec<String> = ["heat-1", "heat-2", "shop-1"]
        .iter()
        .map(|r| {
            let ns = trajwiki::core::Namespace::new("kitchen").unwrap();
            let id = trajwiki::core::RunId::derive(&ns, r).to_string();
            let v: Value =
                serde_json::from_str(&ok(&["trace", "run", "--store", s(&store), "--json", &id]))
                    .unwrap();
            v["compilation"]["compiler"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(compilers, ["llm:scripted", "llm:scripted", "deterministic"]);

    // The endpoint down: every run compiled deterministically, with a warning.
    let other = dir.path().join("other");
    ok(&["ingest", "--store", s(&other), "tests/fixtures/runs.jsonl"]);
    let (code, out, err) = trajwiki(&[
        "trace",
        "compile",
        "--store",
        s(&other),
        "--json",
        "--llm-base-url",
        "http://127.0.0.1:1/v1",
        "--llm-model",
        "scripted",
        "--llm-retries",
        "0",
    ]);
    assert_eq!(code, 0, "{err}");
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report[0]["fallbacks"].as_array().unwrap().len(), 3);
    assert_eq!(err.matches("warning").count(), 3, "{err}");
}

/// `trajwiki export` of the demo namespace.
fn export(store: &Path) -> String {
    ok(&[
        "export",
        "--store",
        s(store),
        "--namespace",
        "demo",
        "--what",
        "memory",
    ])
}

#[test]
fn a_model_builds_the_memory_and_a_rebuild_asks_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    ok(&["ingest", "--store", s(&store), s(&demo())]);
    // Extraction: for each exchange, a valid claim quoting the first message's first four words,
    // and three that must be dropped (a ref outside the exchange, a quote not in the message, an
    // empty statement); for the exchange at S1:5, an object cut off at the token bound (that
    // exchange is the deterministic seed's, and a rerun replays the same cut reply). The judge revises the latest claim shown when the new one comes from
    // Maya and adds otherwise; its first decision names a claim never shown (made an ADD).
    let judged = Arc::new(Mutex::new(0usize));
    let server = Server::with(move |_, body| {
        let user = body["messages"][1]["content"].as_str().unwrap();
        if body["response_format"]["json_schema"]["name"] == "extraction" {
            let first = user.lines().next().unwrap();
            let (reference, rest) = first.split_once(' ').unwrap();
            if reference == "S1:5" {
                return Reply::content("{\"summary\": \"Tom runs 15 km on Sundays and");
            }
            let text = rest.split_once(": ").unwrap().1;
            let quote: Vec<&str> = text.split_whitespace().take(4).collect();
            return Reply::answer(json!({
                "summary": format!("model summary of {reference}"),
                "claims": [
                    {"ref": reference, "statement": format!("model claim {reference}"), "quote": quote.join(" ")},
                    {"ref": "S9:9", "statement": "from nowhere", "quote": quote.join(" ")},
                    {"ref": reference, "statement": "invented", "quote": "words nobody said"},
                    {"ref": reference, "statement": " ", "quote": quote.join(" ")},
                    {"ref": reference, "statement": "Did the model ask this?", "quote": quote.join(" ")},
                    {"ref": reference, "statement": "I wrote this myself", "quote": quote.join(" ")},
                    {"ref": reference, "statement": "zebra teapot", "quote": quote.join(" ")},
                ],
            }));
        }
        if body["response_format"]["json_schema"]["name"] == "trajectory_match" {
            // Session 2's exchanges get a choice out of range; the others continue the best
            // thread when its summary mentions pottery, and start a new one otherwise.
            let choice = if user.contains("New exchange: model summary of S2:") {
                "9"
            } else if field(user, "[1] ").to_lowercase().contains("pottery") {
                "1"
            } else {
                "NEW"
            };
            return Reply::answer(json!({ "choice": choice }));
        }
        if body["response_format"]["json_schema"]["name"] == "page" {
            // Pages about Maya rewritten well; the others without their sections.
            let page = user
                .strip_prefix("Page:\n")
                .and_then(|p| p.split_once("\n\nTrajectory summaries:"))
                .map_or("", |(p, _)| p);
            let title = page.lines().next().unwrap_or("");
            let written = if title.contains("Maya") {
                page.replacen("\n\n## ", "\n\nA model-written overview.\n\n## ", 1)
            } else {
                format!("{title}\n\nJust a line.")
            };
            return Reply::answer(json!({ "page": written }));
        }
        let mut n = judged.lock().unwrap();
        *n += 1;
        let shown = user.matches("\n[").count();
        let new = field(user, "New claim");
        let decision = if *n == 1 {
            json!({"decision": "REVISE", "target": 99, "rationale": "a claim not shown"})
        } else if new.contains("Maya") {
            json!({"decision": "REVISE", "target": shown - 1, "rationale": "Maya again"})
        } else {
            json!({"decision": "ADD", "target": -1, "rationale": "new"})
        };
        Reply::answer(decision)
    });
    let build = |extra: &[&str]| {
        let mut args = vec![
            "build",
            "--store",
            s(&store),
            "--namespace",
            "demo",
            "--model",
            "hashing",
            "--flush",
            "--llm-base-url",
            &server.url,
            "--llm-model",
            "scripted",
        ];
        args.extend_from_slice(extra);
        let (code, _, err) = trajwiki(&args);
        assert_eq!(code, 0, "{err}");
        err
    };
    let err = build(&[]);
    let asked = server.seen().len();
    assert!(asked > 1, "the judge was asked {asked} times");
    assert!(
        err.contains(&format!(
            "demo: model scripted: {asked} request(s), 0 answered from the cache, "
        )),
        "{err}"
    );
    assert!(
        err.contains("demo: 1 claim transition(s) fell back to ADD"),
        "{err}"
    );
    let first = export(&store);
    assert!(
        first.contains("llm:scripted: Maya again"),
        "the ops record the model"
    );
    // The model's claims and summaries, none of the dropped ones, and the seed's claims that
    // hold the names the model left out.
    assert!(first.contains("Maya: model claim S1:1") && first.contains("model summary of S1:1"));
    // Claims of the wrong shape (a question, the first person, a fragment) are dropped as the
    // rules' own are.
    for dropped in [
        "from nowhere",
        "invented",
        "words nobody said",
        "Did the model ask",
        "wrote this myself",
        "zebra teapot",
    ] {
        assert!(!first.contains(dropped), "{dropped}");
    }
    let claims: Vec<Value> = first
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["record"] == "claim")
        .map(|r| r["value"].clone())
        .collect();
    let quoted = |word: &str| {
        claims
            .iter()
            .any(|c| c["quote"].as_str().unwrap().contains(word))
    };
    assert!(quoted("Okafor") && quoted("Lisbon") && quoted("Porto"));
    // Pages: the model's where it kept every section and link, the deterministic ones elsewhere.
    let bodies: Vec<String> = first
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["record"] == "page")
        .map(|r| r["value"]["body"].as_str().unwrap().to_string())
        .collect();
    assert!(bodies
        .iter()
        .any(|b| b.contains("A model-written overview.")));
    assert!(bodies.iter().all(|b| !b.contains("Just a line.")));
    assert!(
        err.contains("page(s) kept their deterministic text"),
        "{err}"
    );
    assert!(
        err.contains("left to the deterministic decider"),
        "a choice out of range: {err}"
    );
    assert!(
        err.contains("1 exchange(s) extracted deterministically"),
        "the cut-off extraction: {err}"
    );
    assert!(claims
        .iter()
        .all(|c| !c["text"].as_str().unwrap().contains("from nowhere")));
    assert!(first.contains("\"REVISE\""));
    assert!(first.contains("fell back to ADD"));
    ok(&["check", "--store", s(&store)]);

    // Replaced by a memory of another configuration, then folded again from every message with
    // the first one: the judge's decisions come from the cache (no request), and the memory is
    // the same, byte for byte.
    let other_config = dir.path().join("other.toml");
    std::fs::write(&other_config, "max_trajectory_len = 1\n").unwrap();
    build(&["--rebuild", "--config", s(&other_config)]);
    assert_ne!(export(&store), first);
    let asked = server.seen().len();
    let err = build(&["--rebuild"]);
    assert_eq!(
        server.seen().len(),
        asked,
        "the refold asked the model again"
    );
    // The cost table says so: every call from the cache.
    assert!(
        err.contains("demo: model scripted: 0 request(s), ") && !err.contains(" 0 answered from"),
        "{err}"
    );
    assert_eq!(export(&store), first);

    // The endpoint down: the build goes through, every transition an ADD, with a warning.
    let other = dir.path().join("other");
    ok(&["ingest", "--store", s(&other), s(&demo())]);
    let (code, _, err) = trajwiki(&[
        "build",
        "--store",
        s(&other),
        "--model",
        "hashing",
        "--flush",
        "--llm-base-url",
        "http://127.0.0.1:1/v1",
        "--llm-model",
        "scripted",
        "--llm-retries",
        "0",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("fell back to ADD"), "{err}");
    ok(&["check", "--store", s(&other)]);
}

#[test]
fn an_abstention_is_reflected_on_and_rescued() {
    // The first answer abstains; the reflection gives hints (or none); the next answer, from the
    // rerouted context (or the raw-message rescue), is supported and taken. The contexts are
    // small, so that the hints change them, and of a budget at which the raw-message rescue
    // finds other turns than the first search (the same context is the same prompt, answered
    // from the cache).
    for (hints, route) in [
        (vec!["Lisbon", "half marathon"], "reflection"),
        (vec![], "rescue"),
    ] {
        let dir = built_demo();
        let answers = Arc::new(Mutex::new(0));
        let count = Arc::clone(&answers);
        let server = Server::with(move |_, body| {
            let user = body["messages"][1]["content"].as_str().unwrap_or("");
            match body["response_format"]["json_schema"]["name"].as_str() {
                Some("hints") => Reply::answer(json!({
                    "entities": hints, "event_terms": [], "temporal_terms": [],
                    "must_find_terms": [],
                })),
                _ => {
                    let mut n = count.lock().unwrap();
                    *n += 1;
                    if *n == 1 {
                        Reply::answer(json!({
                            "can_answer": false, "answer_type": "other", "final_answer": "",
                            "supporting_facts": [], "supporting_source_refs": [],
                            "counted_events": [], "excluded_events": [], "uncertainties": [],
                            "abstain_reason": "not in the context"
                        }))
                    } else {
                        let first_ref = user
                            .lines()
                            .filter_map(|l| l.split_whitespace().next())
                            .find(|t| {
                                t.strip_prefix('S')
                                    .and_then(|r| r.split_once(':'))
                                    .is_some_and(|(a, b)| {
                                        a.parse::<u32>().is_ok() && b.parse::<u32>().is_ok()
                                    })
                            })
                            .unwrap_or("none")
                            .to_string();
                        Reply::answer(good_answer(&[&first_ref]))
                    }
                }
            }
        });
        let (code, out, err) = ask(dir.path(), Some(&server.url), &["--budget", "70"]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(out["status"], "answered", "{route}: {out}");
        assert_eq!(out["answer"]["route"], route, "{}", out["answer"]);
        assert_eq!(out["question"], QUESTION);
        let cited = out["answer"]["supporting_source_refs"][0].clone();
        assert!(out["source_refs"].as_array().unwrap().contains(&cited));
        assert_eq!(*answers.lock().unwrap(), 2);
        let usage = &out["llm"]["usage"];
        assert_eq!(usage["retrieval"]["requests"], 1, "one reflection");
        if route == "reflection" {
            assert_eq!(out["answer"]["hints"], json!(["Lisbon", "half marathon"]));
        }
    }
}

#[test]
fn a_rerank_reorders_the_pages_and_trajectories_and_falls_back_to_the_fused_order() {
    let dir = built_demo();
    let path = |out: &Value, level: &str| -> Vec<String> {
        out[level]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap().to_string())
            .collect()
    };
    // The model reorders one level: the last item shown first, the rest left to the fused
    // order (and a position out of range); the other level it leaves as it is. Then answers.
    let scripted = |level: &'static str| {
        Server::with(move |_, body| {
            let user = body["messages"][1]["content"].as_str().unwrap_or("");
            if body["response_format"]["json_schema"]["name"] == "rerank" {
                let shown = user.matches("\n[").count();
                let order: Vec<usize> = if user.contains(&format!("\n{level}:\n")) {
                    vec![shown, 0, 99]
                } else {
                    (1..=shown).collect()
                };
                return Reply::answer(json!({ "order": order }));
            }
            Reply::answer(good_answer(&["S1:3"]))
        })
    };
    let last_first = |items: &[String]| {
        let mut out = vec![items.last().unwrap().clone()];
        out.extend(items[..items.len() - 1].iter().cloned());
        out
    };
    let server = scripted("Threads");
    let (_, plain, _) = ask(dir.path(), Some(&server.url), &["--budget", "60"]);
    let before = server.seen().len();
    let (code, reranked, err) = ask(
        dir.path(),
        Some(&server.url),
        &["--budget", "60", "--rerank"],
    );
    assert_eq!(code, 0, "{err}");
    let reranks: Vec<String> = server.seen()[before..]
        .iter()
        .filter(|x| x.body["response_format"]["json_schema"]["name"] == "rerank")
        .map(|x| {
            x.body["messages"][1]["content"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        reranks.len(),
        2,
        "two rerank calls with --rerank (pages, then trajectories), none without"
    );
    assert!(reranks[0].contains("\nPages:\n") && reranks[1].contains("\nThreads:\n"));
    assert_eq!(reranked["llm"]["usage"]["retrieval"]["requests"], 2);
    // What was the last selected trajectory comes first, the others follow in fused order.
    let before = path(&plain, "trajectories");
    assert!(before.len() >= 2, "{before:?}");
    assert_eq!(path(&reranked, "trajectories"), last_first(&before));
    assert_eq!(path(&reranked, "pages"), path(&plain, "pages"));

    // The pages' order is the model's: the last routed page comes first (a store of its own,
    // whose response cache has not seen the rerank).
    let dir = built_demo();
    let server = scripted("Pages");
    let (code, pages_first, err) = ask(
        dir.path(),
        Some(&server.url),
        &["--budget", "60", "--rerank"],
    );
    assert_eq!(code, 0, "{err}");
    let routed = path(&plain, "pages");
    assert!(routed.len() >= 2, "{routed:?}");
    assert_eq!(path(&pages_first, "pages"), last_first(&routed));

    // A reply that names nothing shown keeps the fused order.
    let dir = built_demo();
    let server = Server::with(|_, body| {
        if body["response_format"]["json_schema"]["name"] == "rerank" {
            return Reply::answer(json!({ "order": [0, 99] }));
        }
        Reply::answer(good_answer(&["S1:3"]))
    });
    let (_, kept, _) = ask(
        dir.path(),
        Some(&server.url),
        &["--budget", "60", "--rerank"],
    );
    assert_eq!(path(&kept, "trajectories"), path(&plain, "trajectories"));
    assert_eq!(path(&kept, "pages"), path(&plain, "pages"));
}

/// `trajwiki serve` on the demo store with `args`.
fn serve_demo(dir: &Path, args: &[&str]) -> common::Served {
    common::serve_hashing(s(&dir.join("store")), args)
}

fn post_ask(server: &common::Served, body: &Value) -> (u16, Value) {
    let url = format!("{}/v1/namespaces/demo/ask", server.url);
    common::http(&url, Some(&body.to_string()), None)
}

#[test]
fn the_server_asks_as_the_cli_asks() {
    let dir = built_demo();
    let model = Server::start(vec![Reply::answer(good_answer(&["S1:3", "S9:99"]))]);
    let server = serve_demo(
        dir.path(),
        &[
            "--llm-base-url",
            &model.url,
            "--llm-model",
            "scripted",
            "--llm-retries",
            "2",
        ],
    );
    let (status, served) = post_ask(&server, &json!({"question": QUESTION}));
    drop(server);
    assert_eq!(status, 200, "{served}");
    assert_eq!(served["status"], "answered", "{served}");
    assert_eq!(served["answer"]["supporting_source_refs"], json!(["S1:3"]));
    assert_eq!(served["answer"]["removed_refs"], json!(["S9:99"]));
    assert_eq!(model.seen().len(), 1);
    let (code, cli, err) = ask(dir.path(), Some(&model.url), &[]);
    assert_eq!(code, 0, "{err}");
    for field in ["status", "answer", "context", "source_refs", "evidence"] {
        assert_eq!(served[field], cli[field], "{field}");
    }

    // Without a model: the evidence, and a status that says so.
    let server = serve_demo(dir.path(), &[]);
    let (status, bare) = post_ask(&server, &json!({"question": QUESTION, "budget": 200}));
    let (bad, refused) = post_ask(&server, &json!({"question": QUESTION, "mode": "psychic"}));
    drop(server);
    assert_eq!(status, 200, "{bare}");
    assert_eq!(bare["status"], "no_answer_model", "{bare}");
    assert!(
        bare["context"].as_str().is_some_and(|c| c.contains("S1:")),
        "{bare}"
    );
    assert_eq!(bare["llm"], Value::Null);
    assert_eq!(
        (bad, refused["error"]["code"].as_str()),
        (400, Some("bad_request"))
    );
}
