//! Late arrival (issue 38): messages older than what the memory already holds — a backfill of
//! older history after live use began, sessions streamed in a shuffled order — are appended
//! like any others. A trajectory's versions follow arrival and never go back in time (a late
//! exchange continues only a trajectory whose latest snapshot is not later than it, else opens
//! its own), so `trajwiki check` passes, a backfilled statement never supersedes a newer one,
//! streaming equals one build of the same arrival order, and retrieval is as good as from the
//! build of the conversation in order.

mod common;

use std::path::Path;

use chrono::NaiveDate;
use common::{ok, s, trajwiki};
use serde_json::{json, Value};
use trajwiki::core::{ClaimStatus, HashingEmbedder, Namespace, SourceMessage};
use trajwiki::memory::MemoryConfig;
use trajwiki::pipeline::{build_namespace, BuildOptions, ANN_THRESHOLD};
use trajwiki::store::{Store, VectorDtype};

/// The order a fixed seed shuffles `items` into (xorshift64, Fisher–Yates).
fn shuffled<T: Clone>(items: &[T], seed: u64) -> Vec<T> {
    let mut out = items.to_vec();
    let mut x = seed.max(1);
    for i in (1..out.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.swap(i, (x % (i as u64 + 1)) as usize);
    }
    out
}

/// Ann's home over four sessions months apart: Oslo in sessions 1 and 2, Bergen from session 3,
/// Biscuit (her dog) in all of them.
fn ann_moves() -> Vec<Value> {
    let sessions = [
        (
            "2023-01-10",
            "Biscuit and I live in Oslo, near the Vigeland park.",
            "Oslo is lovely. Does Biscuit like the Vigeland park?",
        ),
        (
            "2023-02-14",
            "Biscuit runs around the Vigeland park in Oslo every morning.",
            "Biscuit must be the fastest dog in Oslo.",
        ),
        (
            "2023-06-20",
            "Biscuit and I moved to Bergen last week.",
            "Bergen! Does Biscuit mind the rain?",
        ),
        (
            "2023-07-25",
            "Biscuit and I live in Bergen now, by the fish market.",
            "Bergen suits Biscuit, then.",
        ),
    ];
    let mut out = Vec::new();
    for (i, (day, ann, bob)) in sessions.iter().enumerate() {
        let session = i + 1;
        for (seq, (speaker, text)) in [("Ann", ann), ("Bob", bob)].iter().enumerate() {
            out.push(json!({
                "namespace": "backfill",
                "session": session,
                "seq": seq + 1,
                "speaker": speaker,
                "text": text,
                "timestamp": format!("{day}T10:0{seq}:00"),
                "ref": format!("D{session}:{}", seq + 1),
            }));
        }
    }
    out
}

/// Writes the messages of `session` to a JSONL file in `dir`.
fn session_file(dir: &Path, messages: &[Value], session: u64) -> std::path::PathBuf {
    let path = dir.join(format!("session_{session}.jsonl"));
    let text: String = messages
        .iter()
        .filter(|m| m["session"] == session)
        .map(|m| format!("{m}\n"))
        .collect();
    std::fs::write(&path, text).unwrap();
    path
}

/// `trajwiki check` of `store`: its exit code and its problems' invariants.
fn check(store: &str) -> (i32, Vec<String>) {
    let (code, out, err) = trajwiki(&["check", "--store", store, "--json"]);
    let report: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    let invariants = report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| format!("{}: {}", p["invariant"], p["detail"]))
        .collect();
    (code, invariants)
}

#[test]
fn a_backfill_of_older_sessions_after_live_use_passes_check_and_keeps_the_newest_state() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let messages = ann_moves();
    // Live use began with sessions 3 and 4; the older history (1, 2) is backfilled after,
    // each session ingested and built as it comes, the last exchange left open until the end.
    for session in [3, 4, 1, 2] {
        let file = session_file(dir.path(), &messages, session);
        ok(&["ingest", "--store", s(&store), s(&file), "-q"]);
        ok(&[
            "build",
            "--store",
            s(&store),
            "--namespace",
            "backfill",
            "--model",
            "hashing",
            "-q",
        ]);
    }
    common::build_hashing(s(&store), "backfill");
    assert_eq!(check(s(&store)), (0, vec![]));

    // Ann lives in Bergen: what she said of Oslo, backfilled later, supersedes none of it.
    let store = Store::open_read_only(&store).unwrap();
    let ns = Namespace::new("backfill").unwrap();
    let states = store.claim_states(&ns).unwrap();
    let bergen: Vec<_> = store
        .claims(&ns)
        .unwrap()
        .into_iter()
        .filter(|c| c.text.contains("Ann") && c.text.contains("Bergen"))
        .collect();
    // "I live in Bergen now" restates the home slot's value: no claim of its own.
    assert_eq!(bergen.len(), 1, "{bergen:#?}");
    for c in &bergen {
        assert_eq!(states.get(&c.id), Some(&ClaimStatus::Active), "{c:#?}");
    }
    // Each trajectory reads in time order, and the backfilled sessions keep to their own.
    for t in store.trajectories(&ns).unwrap() {
        let times: Vec<_> = t
            .snapshot_ids
            .iter()
            .map(|id| store.snapshot(id).unwrap().unwrap().timestamp)
            .collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{t:#?}: {times:?}");
    }
}

const LATER: BuildOptions = BuildOptions {
    rebuild: false,
    flush: false,
    vectors: VectorDtype::F16,
    ann_threshold: ANN_THRESHOLD,
};

/// Ingests `chunks` one after the other into a new store, building after each, then flushes;
/// returns `export --what memory` after `check` passed.
fn streamed(chunks: &[Vec<SourceMessage>]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let ns = chunks[0][0].namespace.clone();
    let build = |store: &mut Store, flush| {
        let options = BuildOptions { flush, ..LATER };
        let config = MemoryConfig::default();
        build_namespace(store, &ns, &HashingEmbedder::new(128), &config, options).unwrap();
    };
    for chunk in chunks {
        store.ingest_messages("stream", chunk).unwrap();
        build(&mut store, false);
    }
    build(&mut store, true);
    let report = store.check().unwrap();
    assert!(report.ok(), "check: {:?}", report.problems);
    let mut out = Vec::new();
    trajwiki::export::write_memory(&store, &ns, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// The messages of `sessions` in that order, each session's in turn order.
fn in_session_order(messages: &[SourceMessage], sessions: &[u32]) -> Vec<SourceMessage> {
    sessions
        .iter()
        .flat_map(|&n| messages.iter().filter(move |m| m.session == n).cloned())
        .collect()
}

/// A conversation arriving in a shuffled session order builds the same memory whether it is
/// built at once, session by session or message by message (the first `one_by_one` messages,
/// then the rest at once).
fn assert_shuffled_streams_like_a_batch(messages: &[SourceMessage], seed: u64, one_by_one: usize) {
    let mut sessions: Vec<u32> = messages.iter().map(|m| m.session).collect();
    sessions.dedup();
    let order = shuffled(&sessions, seed);
    assert_ne!(order, sessions, "the seed shuffles");
    let arrived = in_session_order(messages, &order);
    let once = streamed(std::slice::from_ref(&arrived));
    assert!(once.lines().count() > 10, "a memory was built");
    let by_session: Vec<Vec<SourceMessage>> = order
        .iter()
        .map(|&n| in_session_order(messages, &[n]))
        .collect();
    assert!(
        streamed(&by_session) == once,
        "session by session differs from one build (sessions {order:?})"
    );
    let n = one_by_one.min(arrived.len());
    let mut chunks: Vec<Vec<SourceMessage>> =
        arrived[..n].iter().map(|m| vec![m.clone()]).collect();
    if n < arrived.len() {
        chunks.push(arrived[n..].to_vec());
    }
    assert!(
        streamed(&chunks) == once,
        "message by message differs from one build (sessions {order:?})"
    );
}

fn message(ns: &Namespace, v: &Value) -> SourceMessage {
    let at = |t: &str| chrono::NaiveDateTime::parse_from_str(t, "%Y-%m-%dT%H:%M:%S").unwrap();
    SourceMessage::new(
        ns.clone(),
        v["session"].as_u64().unwrap() as u32,
        v["seq"].as_u64().unwrap() as u32,
        v["speaker"].as_str().unwrap().to_string(),
        v["text"].as_str().unwrap().to_string(),
        at(v["timestamp"].as_str().unwrap()),
        vec![],
        v["ref"].as_str().map(str::to_string),
    )
}

/// Eight sessions a week apart, topics that recur across them.
fn recurring() -> Vec<SourceMessage> {
    let ns = Namespace::new("recurring").unwrap();
    let topics = [
        (
            "Maya",
            "We're planning a camping trip to Yosemite with Biscuit.",
        ),
        (
            "Tom",
            "Yosemite with Biscuit sounds fun! Book the Upper Pines site.",
        ),
        (
            "Maya",
            "I signed up for the Lisbon half marathon in October.",
        ),
        (
            "Tom",
            "The Lisbon half marathon is hilly; train on the Harbor Point trail.",
        ),
        ("Maya", "My pottery class at Riverside Studio starts again."),
        ("Tom", "Riverside Studio makes lovely bowls."),
    ];
    let start = NaiveDate::from_ymd_opt(2024, 1, 1).unwrap();
    let mut out = Vec::new();
    for session in 1..=8u32 {
        // Each session talks of two of the three topics.
        let skip = (session % 3) as usize;
        let mut seq = 0;
        for (k, (speaker, text)) in topics.iter().enumerate() {
            if k / 2 == skip {
                continue;
            }
            seq += 1;
            let day = start + chrono::Duration::days(i64::from(session) * 7);
            let v = json!({
                "session": session,
                "seq": seq,
                "speaker": speaker,
                "text": format!("{text} (week {session})"),
                "timestamp": format!("{day}T09:00:0{seq}"),
                "ref": format!("D{session}:{seq}"),
            });
            out.push(message(&ns, &v));
        }
    }
    out
}

#[test]
fn a_conversation_in_shuffled_session_order_streams_like_a_batch() {
    let messages = recurring();
    for seed in [38, 7, 2024] {
        assert_shuffled_streams_like_a_batch(&messages, seed, messages.len());
    }
}

#[test]
fn locomo_in_shuffled_session_order_streams_like_a_batch() {
    let Some(path) = common::shared_data("locomo/locomo7.json") else {
        return;
    };
    let samples = trajwiki::ingest::locomo::read_locomo(&path).unwrap();
    let conv = &samples[0].messages;
    assert!(conv.len() > 300);
    assert_shuffled_streams_like_a_batch(conv, 38, 120);
}

/// One LoCoMo conversation's `session_N` and its date alone, as a LoCoMo file.
fn locomo_session(sample: &Value, n: u64) -> Value {
    let conv = &sample["conversation"];
    let (turns, date) = (format!("session_{n}"), format!("session_{n}_date_time"));
    json!([{
        "sample_id": sample["sample_id"],
        "conversation": {
            "speaker_a": conv["speaker_a"],
            "speaker_b": conv["speaker_b"],
            turns.clone(): conv[&turns],
            date.clone(): conv[&date],
        },
        "qa": [],
    }])
}

/// Coverage of categories 1–4 at `full` and 2,700 tokens, from an evaluation's summary.json.
fn coverage(out: &Path) -> (f64, u64) {
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let cell = &summary["cells"]["full"]["2700"]["all"];
    (
        cell["coverage"].as_f64().unwrap(),
        cell["questions"].as_u64().unwrap(),
    )
}

#[test]
fn locomo_streamed_in_shuffled_session_order_passes_check_and_keeps_coverage() {
    let Some(path) = common::shared_data("locomo/locomo7.json") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let data: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let sample = &data[0];
    let name = sample["sample_id"].as_str().unwrap();
    let whole = dir.path().join("conversation.json");
    std::fs::write(&whole, json!([sample]).to_string()).unwrap();

    // The batch build: the conversation in file order, one build.
    let batch = dir.path().join("batch");
    common::eval_locomo(&whole, &batch, &[2700], &["full"], &[]);

    // Streamed: its sessions in a shuffled order, each ingested and built as it comes (its last
    // exchange left open), through the command line.
    let sessions: Vec<u64> = sample["conversation"]
        .as_object()
        .unwrap()
        .keys()
        .filter_map(|k| k.strip_prefix("session_")?.parse().ok())
        .collect();
    let mut sorted = sessions.clone();
    sorted.sort_unstable();
    let order = shuffled(&sorted, 38);
    assert!(order.len() > 10 && order != sorted);
    let store = dir.path().join("shuffled-store");
    for &n in &order {
        let file = dir.path().join(format!("session_{n}.json"));
        std::fs::write(&file, locomo_session(sample, n).to_string()).unwrap();
        ok(&["ingest", "--store", s(&store), s(&file), "-q"]);
        ok(&[
            "build",
            "--store",
            s(&store),
            "--namespace",
            name,
            "--model",
            "hashing",
            "-q",
        ]);
    }
    assert_eq!(check(s(&store)), (0, vec![]), "sessions {order:?}");

    // The streamed store evaluated as it is (its ingest a no-op, its build the open exchange).
    let streamed = dir.path().join("streamed");
    common::eval_locomo(
        &whole,
        &streamed,
        &[2700],
        &["full"],
        &["--store", s(&store)],
    );
    let (b, questions) = coverage(&batch);
    let (st, _) = coverage(&streamed);
    eprintln!("{name}, sessions {order:?}: coverage 1-4 batch {b:.3}, streamed {st:.3} ({questions} questions)");
    assert!(
        (st - b).abs() <= 0.01,
        "{name}: coverage {st:.3} streamed in sessions {order:?}, {b:.3} built at once"
    );
    assert_eq!(check(s(&store)), (0, vec![]));
}

#[test]
fn a_memory_folded_before_late_arrival_was_defined_folds_on() {
    // Such a memory's configuration (stored with it, as JSON) has no `late_session_gap`, and
    // its trajectories' fold states end before the time of their latest snapshot: an append
    // folds on from it (the time read back from the latest snapshot) and gives the memory a
    // build of the whole history gives now, byte for byte.
    let dir = tempfile::tempdir().unwrap();
    let store = common::demo_store(dir.path());
    let conn = rusqlite::Connection::open(store.join(trajwiki::store::DB_FILE)).unwrap();
    let config: String = conn
        .query_row(
            "SELECT config FROM memory_builds WHERE namespace = 'demo'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let mut earlier: serde_json::Map<String, Value> = serde_json::from_str(&config).unwrap();
    assert!(earlier.remove("late_session_gap").is_some(), "{config}");
    conn.execute(
        "UPDATE memory_builds SET config = ?1 WHERE namespace = 'demo'",
        [Value::Object(earlier).to_string()],
    )
    .unwrap();
    let states: Vec<(i64, Vec<u8>)> = conn
        .prepare("SELECT position, state FROM fold_trajectories WHERE namespace = 'demo'")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(!states.is_empty());
    for (position, bytes) in states {
        let state: trajwiki::memory::TrajState = postcard::from_bytes(&bytes).unwrap();
        let at = postcard::to_allocvec(&state.latest_at).unwrap();
        assert!(bytes.ends_with(&at));
        conn.execute(
            "UPDATE fold_trajectories SET state = ?1 WHERE namespace = 'demo' AND position = ?2",
            rusqlite::params![&bytes[..bytes.len() - at.len()], position],
        )
        .unwrap();
    }
    drop(conn);
    let more = dir.path().join("more.jsonl");
    let line = json!({"namespace": "demo", "session": 9, "seq": 1, "speaker": "Maya",
        "text": "The pottery workshop ended.", "timestamp": "2024-06-01T10:00:00", "ref": "S9:1"});
    std::fs::write(&more, format!("{line}\n")).unwrap();
    ok(&["ingest", "--store", s(&store), s(&more), "-q"]);
    common::build_hashing(s(&store), "demo");
    assert_eq!(check(s(&store)), (0, vec![]));
    let fresh = dir.path().join("fresh");
    ok(&[
        "ingest",
        "--store",
        s(&fresh),
        s(&common::demo()),
        s(&more),
        "-q",
    ]);
    common::build_hashing(s(&fresh), "demo");
    assert_eq!(
        common::export_memory(s(&store), "demo"),
        common::export_memory(s(&fresh), "demo")
    );
}
