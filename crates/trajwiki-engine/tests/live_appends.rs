//! A memory is alive on both sides: whatever the order and split of the writes, a search of a
//! kept index answers exactly as a cold load of the same store. Hundreds of random appends per
//! case — to the newest session, to a new one, to an earlier one (a backfill), one message or
//! several, built with or without a flush or not built — go through one of two engines over one
//! store (each with its own kept fold and kept index, as two processes have); after each, both
//! engines' searches are compared with a fresh engine's, byte for byte (context, every level's
//! ranking, evidence).
//!
//! Issue 49 found a search after an append to an earlier session answering a panic ("member")
//! or a context other than a cold load's: an index loaded again from its earlier records merged
//! the store's changes into records in the index's order as if they were in the store's, and
//! held a changed trajectory twice.

use std::sync::Arc;

use serde_json::{json, Value};
use trajwiki_core::Namespace;
use trajwiki_engine::api::{load_embedder, Query};
use trajwiki_engine::messages::parse_messages;
use trajwiki_engine::pipeline::BuildOptions;
use trajwiki_engine::{Engine, Model};
use trajwiki_retrieve::{Mode, RetrievalConfig};
use trajwiki_store::Store;

const MODEL: &str = "hashing-64";

fn engine(dir: &std::path::Path) -> Engine {
    let store = Store::open(dir).unwrap();
    let model = Model::Loaded(load_embedder(MODEL).unwrap().into());
    Engine::new(
        store,
        model,
        Arc::new(trajwiki_compute::CpuScoring),
        64 << 20,
    )
}

/// A deterministic stream of numbers (a linear congruential generator): a case is the same on
/// every run, and a failure names its seed and step.
struct Numbers(u64);

impl Numbers {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as usize % n
    }
}

const SPEAKERS: [&str; 3] = ["Maya", "Leo", "Ines"];

const WORDS: [&str; 24] = [
    "pottery",
    "workshop",
    "garden",
    "tulips",
    "Lisbon",
    "harbour",
    "painted",
    "books",
    "novel",
    "yesterday",
    "last",
    "week",
    "Oslo",
    "planted",
    "roses",
    "dog",
    "walked",
    "beach",
    "recipe",
    "bread",
    "concert",
    "guitar",
    "moved",
    "job",
];

const QUESTIONS: [&str; 4] = [
    "Where is the pottery workshop?",
    "When did Leo go to Lisbon?",
    "What did Ines say about the beach?",
    "What did Maya plant in the garden?",
];

/// One message of `session`, said at a time of that session (so that sessions keep time order
/// whatever order they arrive in).
fn message(numbers: &mut Numbers, step: usize, session: u32) -> Value {
    let words: Vec<&str> = (0..3 + numbers.below(8))
        .map(|_| WORDS[numbers.below(WORDS.len())])
        .collect();
    json!({
        "session": session,
        "speaker": SPEAKERS[numbers.below(SPEAKERS.len())],
        "text": format!("Step {step}: I {}.", words.join(" ")),
        "timestamp": format!("2024-{:02}-{:02}T10:{:02}:00", 1 + session / 28, 1 + session % 28, step % 60),
    })
}

/// A search's answer without what depends on when and how it was computed.
fn searched(engine: &Engine, ns: &Namespace, question: &str) -> Value {
    let config = RetrievalConfig::default();
    let query = Query {
        question,
        mode: Mode::Full,
        budget: 400,
        config: &config,
    };
    let found = engine
        .with_store(|store| engine.namespace(ns).search(store, &query))
        .unwrap_or_else(|e| panic!("{question}: {e}"));
    let mut value = serde_json::to_value(found).unwrap();
    let o = value.as_object_mut().unwrap();
    o.remove("timings");
    o.remove("embedded_on_load");
    o["ranking"].as_object_mut().unwrap().remove("timings");
    value
}

/// `steps` random appends through two engines over one store, each followed by a search of
/// both compared with a cold load's.
fn appends_answer_as_a_cold_load(seed: u64, steps: usize) {
    let dir = tempfile::tempdir().unwrap();
    let engines = [engine(dir.path()), engine(dir.path())];
    let ns = Namespace::new("live").unwrap();
    let mut numbers = Numbers(seed);
    let mut newest = 1u32;
    let mut step = 0;
    for k in 0..steps {
        // Which session: mostly the newest, sometimes a new one, sometimes an earlier one.
        let session = match numbers.below(8) {
            0 => {
                newest += 1;
                newest
            }
            1 | 2 => 1 + numbers.below(newest as usize) as u32,
            _ => newest,
        };
        let count = if numbers.below(4) == 0 {
            2 + numbers.below(3)
        } else {
            1
        };
        let batch: Vec<Value> = (0..count)
            .map(|_| {
                step += 1;
                message(&mut numbers, step, session)
            })
            .collect();
        let build = match numbers.below(10) {
            0 => None,
            1 | 2 => Some(BuildOptions {
                flush: true,
                ..BuildOptions::default()
            }),
            _ => Some(BuildOptions::default()),
        };
        // The first append builds, so that the namespace has a memory to search.
        let build = if k == 0 {
            Some(BuildOptions::default())
        } else {
            build
        };
        let by = numbers.below(2);
        let parsed = parse_messages(json!(batch), Some(&ns), "<test>", None).unwrap();
        let writer = &engines[by];
        writer
            .with_store(|store| writer.namespace(&ns).append(store, "test", &parsed, build))
            .unwrap_or_else(|e| panic!("seed {seed}, step {k}: append: {e}"))
            .build
            .transpose()
            .unwrap_or_else(|e| panic!("seed {seed}, step {k}: build: {e}"));
        let question = QUESTIONS[numbers.below(QUESTIONS.len())];
        let cold = searched(&engine(dir.path()), &ns, question);
        for (which, e) in engines.iter().enumerate() {
            let live = searched(e, &ns, question);
            assert!(
                live == cold,
                "seed {seed}, step {k} (session {session} of {newest}, {count} messages, \
                 build {build:?}, by engine {by}): engine {which}'s search of {question:?} \
                 differs from a cold load's:\nlive: {live}\ncold: {cold}",
                build = build.map(|b| b.flush),
            );
        }
    }
}

#[test]
fn random_appends_answer_as_a_cold_load_seed_1() {
    appends_answer_as_a_cold_load(1, 200);
}

#[test]
fn random_appends_answer_as_a_cold_load_seed_2() {
    appends_answer_as_a_cold_load(2, 200);
}

#[test]
fn random_appends_answer_as_a_cold_load_seed_3() {
    appends_answer_as_a_cold_load(3, 200);
}
