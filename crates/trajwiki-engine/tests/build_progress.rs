//! A build tells its progress as it goes — stage by stage in order, texts embedded of those to
//! embed, messages folded of those to fold — and telling it changes nothing it builds: the
//! memory is byte for byte the one a build that tells nobody makes.

use std::sync::Mutex;

use serde_json::json;
use trajwiki_core::Namespace;
use trajwiki_engine::api::load_embedder;
use trajwiki_engine::export::write_memory;
use trajwiki_engine::messages::parse_messages;
use trajwiki_engine::pipeline::{
    build_namespace, build_namespace_driven, BuildOptions, Drivers, Progress, Stage,
};
use trajwiki_memory::MemoryConfig;
use trajwiki_store::Store;

const SPEAKERS: [&str; 2] = ["Maya", "Leo"];
const PLACES: [&str; 5] = [
    "Lisbon",
    "the harbour",
    "Porto",
    "the park",
    "the pottery studio",
];
const THINGS: [&str; 6] = ["a bowl", "tulips", "a kite", "bread", "a vase", "the dog"];

/// A store holding `n` messages of one namespace, each text its own.
fn stored(dir: &std::path::Path, n: usize) -> (Store, Namespace) {
    let ns = Namespace::new("progress").unwrap();
    let messages: Vec<_> = (0..n)
        .map(|i| {
            json!({
                "namespace": "progress", "session": 1 + i / 200, "seq": 1 + i % 200,
                "speaker": SPEAKERS[i % 2],
                "text": format!("Turn {i}: I went to {} and brought {} back.",
                    PLACES[i % PLACES.len()], THINGS[i % THINGS.len()]),
                "timestamp": format!("2024-{:02}-01T10:{:02}:{:02}", 1 + i / 200, (i % 200) / 60, i % 60),
            })
        })
        .collect();
    let parsed = parse_messages(json!(messages), Some(&ns), "<test>", None).unwrap();
    let mut store = Store::open(dir).unwrap();
    store.append_messages("<test>", &parsed).unwrap();
    (store, ns)
}

fn exported(store: &Store, ns: &Namespace) -> Vec<u8> {
    let mut out = Vec::new();
    write_memory(store, ns, &mut out).unwrap();
    out
}

#[test]
fn a_build_tells_its_stages_in_order_and_builds_the_same_memory() {
    // More texts than one embedding chunk, so that embedding is told more than once.
    const N: usize = 1_500;
    let embedder = load_embedder("hashing-64").unwrap();
    let config = MemoryConfig::default();
    let options = BuildOptions {
        flush: true,
        ..BuildOptions::default()
    };

    let told = tempfile::tempdir().unwrap();
    let (mut store, ns) = stored(told.path(), N);
    let events: Mutex<Vec<Progress>> = Mutex::new(Vec::new());
    let progress = |p: Progress| events.lock().unwrap().push(p);
    let drivers = Drivers {
        progress: Some(&progress),
        ..Drivers::default()
    };
    let report = build_namespace_driven(
        &mut store,
        &ns,
        embedder.as_ref(),
        &config,
        options,
        drivers,
    )
    .unwrap();
    let events = events.into_inner().unwrap();

    // Stages in the order a build passes them, each at least once.
    let order = [
        Stage::Loading,
        Stage::Embedding,
        Stage::Folding,
        Stage::Pages,
        Stage::Committing,
        Stage::Vectors,
    ];
    let at = |s: Stage| order.iter().position(|&o| o == s).unwrap();
    assert!(
        events.windows(2).all(|w| at(w[0].stage) <= at(w[1].stage)),
        "stages out of order: {:?}",
        events.iter().map(|p| p.stage).collect::<Vec<_>>()
    );
    for stage in order {
        assert!(events.iter().any(|p| p.stage == stage), "{stage:?} untold");
    }
    // Counts rise to their totals: every text embedded once, every message folded.
    for (stage, total) in [
        (Stage::Embedding, report.embedded_texts),
        (Stage::Folding, N),
    ] {
        let told: Vec<&Progress> = events.iter().filter(|p| p.stage == stage).collect();
        assert!(
            told.len() > 2,
            "{stage:?} told {} times: {told:?}",
            told.len()
        );
        assert!(told.iter().all(|p| p.total == total), "{stage:?}: {told:?}");
        assert!(told.windows(2).all(|w| w[0].done <= w[1].done));
        assert_eq!(told.last().unwrap().done, total, "{stage:?}");
    }
    assert_eq!(report.embedded_texts, N, "each text its own");

    // The same messages built by a build that tells nobody: the same memory.
    let silent = tempfile::tempdir().unwrap();
    let (mut other, _) = stored(silent.path(), N);
    build_namespace(&mut other, &ns, embedder.as_ref(), &config, options).unwrap();
    assert_eq!(exported(&store, &ns), exported(&other, &ns));
}
