//! Retrieval and the evaluation on the demo conversation (hashing embedder: no model files),
//! and on LoCoMo when the shared data is present.

mod common;

use std::collections::BTreeSet;

use trajwiki::core::{HashingEmbedder, Namespace};
use trajwiki::memory::MemoryConfig;
use trajwiki::pipeline::{build_namespace, BuildOptions, ANN_THRESHOLD};

/// Builds a whole conversation, the last exchange too.
const FLUSH: BuildOptions = BuildOptions {
    rebuild: false,
    flush: true,
    vectors: VectorDtype::F16,
    ann_threshold: ANN_THRESHOLD,
};
use trajwiki::compute::CpuScoring;
use trajwiki::engine::load::load_index;
use trajwiki::retrieval::embed_query;
use trajwiki::retrieve::{Mode, RetrievalConfig};
use trajwiki::store::{Store, VectorDtype};

fn demo_index() -> (
    tempfile::TempDir,
    trajwiki::retrieve::Index,
    HashingEmbedder,
) {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let msgs = trajwiki::ingest::jsonl::read_messages(&common::demo()).unwrap();
    store.ingest_messages("demo", &msgs).unwrap();
    let ns = Namespace::new("demo").unwrap();
    let e = HashingEmbedder::new(256);
    build_namespace(&mut store, &ns, &e, &MemoryConfig::default(), FLUSH).unwrap();
    let loaded = load_index(&store, &ns, &e, &mut Default::default(), None).unwrap();
    let (index, computed) = (loaded.index, loaded.embedded);
    // The build wrote every message's vector to the namespace's vector file, which serves them.
    assert_eq!(index.vectors().shared_rows(), index.records.messages.len());
    // The build embedded every message; snapshots, trajectories and pages take centroids of
    // those vectors, so loading the index embeds nothing.
    assert_eq!(computed, 0, "{computed} texts embedded on load");
    (dir, index, e)
}

#[test]
fn every_mode_respects_the_budget_and_cites_what_it_shows() {
    let (_dir, index, e) = demo_index();
    let questions = [
        "Which race is Tom running?",
        "What pieces did Maya keep from the pottery workshop?",
        "When did Maya make her first bowl?",
    ];
    for q in questions {
        let (qvec, _) = embed_query(&e, q).unwrap();
        for mode in Mode::ALL {
            let ranking = index
                .rank(q, &qvec, mode, &RetrievalConfig::default(), &CpuScoring)
                .unwrap();
            for budget in [5, 20, 60, 120, 400] {
                let ctx = index.render(&ranking, budget);
                assert!(
                    ctx.tokens <= budget,
                    "{mode:?} {budget}: {} tokens",
                    ctx.tokens
                );
                assert_eq!(ctx.tokens, ctx.text.split_whitespace().count());
                // Every line is a session's date or a message's, starting with its ref: no
                // tokens on what holds no evidence.
                for line in ctx.text.lines() {
                    assert!(
                        line.starts_with("## ") && !line.contains("Session")
                            || ctx
                                .source_refs
                                .iter()
                                .any(|r| line.starts_with(&format!("{r} "))),
                        "{mode:?} {budget}: {line}"
                    );
                }
                let unique: BTreeSet<&String> = ctx.source_refs.iter().collect();
                assert_eq!(unique.len(), ctx.source_refs.len(), "each message once");
                for r in &ctx.source_refs {
                    assert!(
                        ctx.text.lines().any(|l| l.starts_with(&format!("{r} "))),
                        "{r} is in the context"
                    );
                }
            }
        }
    }
}

#[test]
fn full_mode_finds_the_revised_race_and_flags_the_old_plan() {
    let (_dir, index, e) = demo_index();
    let q = "Which half marathon is Tom running?";
    let (qvec, _) = embed_query(&e, q).unwrap();
    let ranking = index
        .rank(
            q,
            &qvec,
            Mode::Full,
            &RetrievalConfig::default(),
            &CpuScoring,
        )
        .unwrap();
    let ctx = index.render(&ranking, 300);
    assert!(
        ctx.source_refs.contains(&"S2:1".to_string()),
        "{}",
        ctx.text
    );
    assert!(!ranking.pages.is_empty() && !ranking.trajectories.is_empty());
    // Temporal anchors are resolved inline.
    let q = "When did Maya make her first bowl?";
    let (qvec, _) = embed_query(&e, q).unwrap();
    let ranking = index
        .rank(
            q,
            &qvec,
            Mode::Full,
            &RetrievalConfig::default(),
            &CpuScoring,
        )
        .unwrap();
    let ctx = index.render(&ranking, 300);
    assert!(
        ctx.text.contains("[\"yesterday\" = 1 March 2024]"),
        "{}",
        ctx.text
    );
}

#[test]
fn query_cli_and_eval_on_a_locomo_layout_file() {
    // A tiny conversation in LoCoMo layout, written here: the evaluation works on any such file.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("mini.json");
    std::fs::write(
        &data,
        r#"[{"sample_id": "mini", "conversation": {"speaker_a": "Ann", "speaker_b": "Bo",
        "session_1_date_time": "1:00 pm on 3 March, 2024",
        "session_1": [
          {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a cat named Pixel yesterday."},
          {"speaker": "Bo", "dia_id": "D1:2", "text": "Cute! I started learning the violin last week."}],
        "session_2_date_time": "9:30 am on 20 April, 2024",
        "session_2": [
          {"speaker": "Ann", "dia_id": "D2:1", "text": "Pixel knocked over my plants again."},
          {"speaker": "Bo", "dia_id": "D2:2", "text": "My violin teacher says I'm improving fast."}]},
        "qa": [
          {"question": "What is the name of Ann's cat?", "answer": "Pixel", "evidence": ["D1:1"], "category": 4},
          {"question": "What instrument is Bo learning?", "answer": "violin", "evidence": ["D1:2", "D2:2"], "category": 1},
          {"question": "Adversarial?", "adversarial_answer": "x", "evidence": [], "category": 5}]}]"#,
    )
    .unwrap();
    let out = dir.path().join("out");
    let stdout = common::eval_locomo(&data, &out, &[40, 400], &["full", "turn-bm25"], &[]);
    assert!(
        stdout.contains("full") && stdout.contains("turn-bm25"),
        "{stdout}"
    );
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(out.join("retrieval.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines.len(),
        2 * 2 * 2,
        "questions × modes × budgets, category 5 excluded"
    );
    for l in &lines {
        let ctx = l["context"].as_str().unwrap();
        assert!(l["context_tokens"].as_u64().unwrap() as usize == ctx.split_whitespace().count());
        assert!(l["context_tokens"].as_u64().unwrap() <= l["budget"].as_u64().unwrap());
    }
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let full = &summary["cells"]["full"]["400"]["all"];
    assert_eq!(full["questions"], 2);
    assert_eq!(
        full["coverage"], 1.0,
        "the whole conversation fits in 400 tokens"
    );
    assert!(std::fs::read_to_string(out.join("report.md"))
        .unwrap()
        .contains("| full |"));
    let png = std::fs::read(out.join("coverage.png")).unwrap();
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000,
        "coverage.png is a drawn PNG ({} bytes)",
        png.len()
    );
    // The query command prints the context and its path.
    let store = out.join("store");
    let q = common::ok(&[
        "query",
        "--store",
        store.to_str().unwrap(),
        "--namespace",
        "mini",
        "--model",
        "hashing",
        "What is the cat called?",
    ]);
    assert!(
        q.contains("D1:1 Ann: I adopted a cat named Pixel yesterday.")
            && q.contains("retrieval path"),
        "{q}"
    );
    // Re-running reuses the store.
    common::ok(&[
        "eval",
        "locomo",
        "--data",
        data.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--model",
        "hashing",
        "--budget",
        "40",
        "--mode",
        "full",
    ]);
}

#[test]
fn search_gives_every_context_line_its_provenance() {
    use trajwiki::api::{get, history, open_index, search, search_index, ApiError, Query, Record};

    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let msgs = trajwiki::ingest::jsonl::read_messages(&common::demo()).unwrap();
    store.ingest_messages("demo", &msgs).unwrap();
    let ns = Namespace::new("demo").unwrap();
    let e = HashingEmbedder::new(256);
    let config = RetrievalConfig::default();
    let query = Query {
        question: "What pieces did Maya keep from the pottery workshop?",
        mode: Mode::Full,
        budget: 300,
        config: &config,
    };
    let not_built = search(&store, &ns, &e, &query, &CpuScoring);
    assert!(matches!(not_built, Err(ApiError::NotBuilt(_))));
    build_namespace(&mut store, &ns, &e, &MemoryConfig::default(), FLUSH).unwrap();
    let found = search(&store, &ns, &e, &query, &CpuScoring).unwrap();
    // A loaded index answers the same, without reading the store again.
    let loaded = open_index(&store, &ns, &e).unwrap();
    let again = search_index(&loaded, false, &e, &query, &CpuScoring).unwrap();
    assert_eq!(again.context.text, found.context.text);
    assert_eq!(again.timings.index_load, 0.0);
    let refs: Vec<&str> = found
        .evidence
        .iter()
        .map(|ev| ev.source_ref.as_str())
        .collect();
    assert!(!refs.is_empty());
    assert_eq!(refs, found.context.source_refs);
    for ev in &found.evidence {
        let Record::Snapshot(s) = get(&store, ev.snapshot.as_ref().unwrap().as_str()).unwrap()
        else {
            panic!("a snapshot id names a snapshot")
        };
        assert!(s.source_message_ids.contains(&ev.message.id));
        assert_eq!(Some(&s.trajectory), ev.trajectory.as_ref());
        for c in &ev.claims {
            let Record::Claim { claim, status } = get(&store, c.id.as_str()).unwrap() else {
                panic!("a claim id names a claim")
            };
            assert!(claim.source_message_ids.contains(&ev.message.id));
            assert_eq!(status, c.status);
        }
    }
    let trajectory = found.evidence[0].trajectory.clone().unwrap();
    let h = history(&store, trajectory.as_str(), None).unwrap();
    assert_eq!(h.namespace, ns);
    assert!(!h.entries.is_empty());
    assert!(h.entries.windows(2).all(|w| w[0].seq < w[1].seq));
    let early = history(&store, trajectory.as_str(), Some(msgs[0].timestamp)).unwrap();
    assert!(early.entries.len() <= h.entries.len());
    let other = Namespace::new("nobody").unwrap();
    let unknown = search(&store, &other, &e, &query, &CpuScoring);
    assert!(matches!(unknown, Err(ApiError::UnknownNamespace { .. })));
    assert!(matches!(
        history(&store, found.evidence[0].message.id.as_str(), None),
        Err(ApiError::NoHistory(_))
    ));
}

/// `query --json` reports each level's candidate universe: every record on the direct routes,
/// what the routed pages reach when the wiki alone routes.
#[test]
fn a_query_reports_each_levels_candidates() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::demo_store(dir.path());
    let stats = common::stats(&store);
    let query = |mode: &str| -> serde_json::Value {
        let out = common::ok(&[
            "query",
            "--store",
            common::s(&store),
            "--namespace",
            "demo",
            "--model",
            "hashing",
            "--mode",
            mode,
            "--json",
            "Where is the pottery workshop?",
        ]);
        serde_json::from_str(&out).unwrap()
    };
    let full = query("full");
    let c = &full["candidates"];
    assert_eq!(c["messages"], stats["messages"], "{c}");
    assert_eq!(c["snapshots"], stats["snapshots"], "{c}");
    assert_eq!(c["trajectories"], stats["trajectories"], "{c}");
    // The index page routes nowhere: every other page is a candidate.
    assert_eq!(
        c["pages"].as_u64(),
        stats["pages"].as_u64().map(|p| p - 1),
        "{c}"
    );
    let wiki = query("wiki-only");
    let w = &wiki["candidates"];
    assert_eq!(w["trajectories"], wiki["candidate_universe"], "{w}");
    let evidence: BTreeSet<&str> = wiki["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["message"]["id"].as_str().unwrap())
        .collect();
    assert!(
        w["messages"].as_u64().unwrap() >= evidence.len() as u64,
        "{w}"
    );
    assert!(w["snapshots"].as_u64() <= c["snapshots"].as_u64(), "{w}");
    let turns = query("turn-bm25");
    assert_eq!(turns["candidates"]["messages"], stats["messages"]);
    assert_eq!(turns["candidates"]["pages"], 0);
}
