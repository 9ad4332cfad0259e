//! `trajwiki trace` end to end on a small runs file: compile (idempotent), the first context,
//! opening an insight down to its cited steps, opening a run, exact and semantic search, and the
//! errors a user meets; then every real run of `../shared/data/runs` when present.

mod common;

use common::{ok, trajwiki};

fn compiled_store() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s");
    let store = store.to_str().unwrap();
    ok(&["ingest", "--store", store, "tests/fixtures/runs.jsonl"]);
    ok(&["trace", "compile", "--store", store]);
    dir
}

#[test]
fn compile_context_open_and_grep() {
    let dir = compiled_store();
    let store = dir.path().join("s");
    let store = store.to_str().unwrap();
    // Compiling again changes nothing.
    let report: serde_json::Value =
        serde_json::from_str(&ok(&["trace", "compile", "--store", store, "--json"])).unwrap();
    let r = &report[0];
    assert_eq!(
        (
            r["runs"].as_u64(),
            r["success"].as_u64(),
            r["partial"].as_u64(),
            r["failure"].as_u64()
        ),
        (Some(3), Some(1), Some(1), Some(1))
    );
    let ctx: serde_json::Value = serde_json::from_str(&ok(&[
        "trace",
        "context",
        "--store",
        store,
        "--namespace",
        "kitchen",
        "--model",
        "hashing",
        "--json",
        "heat some potato and put it in the bin.",
    ]))
    .unwrap();
    let insights = ctx["insights"].as_array().unwrap();
    assert_eq!(insights.len() as u64, r["insights"].as_u64().unwrap());
    // The most similar run's lessons come first; the failed heat run's ask for a descent.
    assert_eq!(ctx["similar"][0]["external_ref"], "heat-1");
    assert_eq!(insights[0]["outcome"]["kind"], "success");
    let failed: Vec<_> = insights
        .iter()
        .filter(|i| i["outcome"]["kind"] == "failure")
        .collect();
    assert!(!failed.is_empty());
    for i in &failed {
        let reasons: Vec<&str> = i["descend"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["reason"].as_str().unwrap())
            .collect();
        assert!(
            reasons.contains(&"from_failed_run") && reasons.contains(&"conflicts"),
            "{reasons:?}"
        );
    }
    // Descend: the first insight opens to its compilation, run and the steps it cites.
    let id = insights[0]["id"].as_str().unwrap();
    let opened: serde_json::Value =
        serde_json::from_str(&ok(&["trace", "insight", "--store", store, id, "--json"])).unwrap();
    assert_eq!(opened["run"]["external_ref"], "heat-1");
    assert_eq!(
        opened["compilation"]["id"],
        opened["insight"]["compilation"]
    );
    let steps: Vec<u64> = opened["cited_steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, [1, 2]);
    assert_eq!(opened["cited_steps"][0]["observation"], "Nothing happens.");
    let text = ok(&["trace", "insight", "--store", store, id]);
    assert!(
        text.contains("[step 1] > heat egg 1 with microwave 1"),
        "{text}"
    );
    let run_id = opened["run"]["id"].as_str().unwrap();
    let run = ok(&["trace", "run", "--store", store, run_id]);
    assert!(
        run.contains("[step 4] > put egg 1 in/on garbagecan 1"),
        "{run}"
    );
    assert!(run.contains("diagnosis (deterministic): Success"), "{run}");
    // Exact search names the run, step and field.
    let grep = ok(&[
        "trace",
        "grep",
        "--store",
        store,
        "--namespace",
        "kitchen",
        "facing the MICROWAVE",
    ]);
    let lines: Vec<&str> = grep.lines().collect();
    assert_eq!(lines.len(), 2, "{grep}");
    assert!(lines[0].contains("[step 2] observation") && lines[1].contains("[step 3] observation"));
    // Semantic search ranks the step that says it best first.
    let sem: serde_json::Value = serde_json::from_str(&ok(&[
        "trace",
        "grep",
        "--store",
        store,
        "--namespace",
        "kitchen",
        "--semantic",
        "--model",
        "hashing",
        "--json",
        "--limit",
        "1",
        "search cotton shirt",
    ]))
    .unwrap();
    assert_eq!(sem[0]["action"], "search[cotton shirt]");
}

#[test]
fn bad_requests_are_clear_usage_errors() {
    let dir = compiled_store();
    let store = dir.path().join("s");
    let store = store.to_str().unwrap();
    let (code, _, err) = trajwiki(&["trace", "insight", "--store", store, "ins_0000000000000000"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no insight ins_0000000000000000"), "{err}");
    let (code, _, err) = trajwiki(&["trace", "run", "--store", store, "clm_0000000000000000"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("claim"), "{err}");
    let (code, _, err) = trajwiki(&[
        "trace",
        "context",
        "--store",
        store,
        "--namespace",
        "nowhere",
        "--model",
        "hashing",
        "x",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("namespace nowhere has no agent runs"), "{err}");
    let (code, _, err) = trajwiki(&[
        "trace",
        "context",
        "--store",
        store,
        "--namespace",
        "kitchen",
        "--model",
        "hashing",
        "--exclude",
        "run_0000000000000000",
        "x",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("no run run_0000000000000000 in namespace kitchen"),
        "{err}"
    );
    // Runs ingested but never compiled.
    let fresh = dir.path().join("fresh");
    let fresh = fresh.to_str().unwrap();
    ok(&["ingest", "--store", fresh, "tests/fixtures/runs.jsonl"]);
    let (code, _, err) = trajwiki(&[
        "trace",
        "context",
        "--store",
        fresh,
        "--namespace",
        "kitchen",
        "--model",
        "hashing",
        "x",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("trajwiki trace compile --namespace kitchen"),
        "{err}"
    );
}

#[test]
fn every_real_run_compiles_and_the_store_checks() {
    let Some(runs) = common::shared_data("runs/alfworld_react_demos.jsonl") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s");
    let store = store.to_str().unwrap();
    let files: Vec<String> = [
        "react_webshop_500",
        "alfworld_react_demos",
        "plancraft_val_small_oracle",
    ]
    .iter()
    .map(|f| {
        runs.with_file_name(format!("{f}.jsonl"))
            .to_string_lossy()
            .into_owned()
    })
    .collect();
    let mut args = vec!["ingest", "--store", store];
    args.extend(files.iter().map(String::as_str));
    ok(&args);
    let report: serde_json::Value =
        serde_json::from_str(&ok(&["trace", "compile", "--store", store, "--json"])).unwrap();
    let total: u64 = report
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["runs"].as_u64().unwrap())
        .sum();
    assert_eq!(total, 646);
    ok(&["check", "--store", store]);
}

#[test]
fn regression_compares_two_result_files() {
    let dir = tempfile::tempdir().unwrap();
    // The fixture runs as the results without memory: heat-1 solved, heat-2 failed, shop-1 at
    // reward 0.5 (not solved). With memory: heat-1 fails, heat-2 is solved.
    let with = dir.path().join("with.jsonl");
    std::fs::write(
        &with,
        "{\"id\": \"heat-1\", \"success\": false}\n{\"id\": \"heat-2\", \"reward\": 1}\n{\"id\": \"shop-1\", \"success\": false}\n",
    )
    .unwrap();
    let out = ok(&[
        "eval",
        "regression",
        "tests/fixtures/runs.jsonl",
        with.to_str().unwrap(),
        "--json",
    ]);
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["tasks"], 3);
    assert_eq!(r["solved_without"], 1);
    assert_eq!(r["regressed"], 1);
    assert_eq!(r["improved"], 1);
    assert_eq!(r["regression"], 1.0);
    assert_eq!(r["regressed_tasks"], serde_json::json!(["heat-1"]));
    // A line without an outcome is a usage error naming the file and line.
    std::fs::write(&with, "{\"id\": \"heat-1\"}\n").unwrap();
    let (code, _, err) = trajwiki(&[
        "eval",
        "regression",
        "tests/fixtures/runs.jsonl",
        with.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("with.jsonl: line 1"), "{err}");
}
