//! A memory is alive on both sides: whatever the order and split of the writes, a search of a
//! kept index answers exactly as a cold load of the same store. Hundreds of random appends per
//! case — to the newest session, to a new one, to an earlier one (a backfill), one message or
//! several, built with or without a flush or not built — go through one of two engines over one
//! store (each with its own kept fold and kept index, as two processes have); after each, both
//! engines' searches are compared with a fresh engine's, byte for byte (context, every level's
//! ranking, evidence).
//!
//! The same cases are a fuzz target too (`append_patterns_fuzzed`): proptest draws the appends,
//! with some pairs sent at once from two threads, for `TRAJWIKI_FUZZ_SECONDS` (default 6; see
//! `tests/fuzz.rs`, whose parser targets share the variable).
//!
//! Issue 49 found a search after an append to an earlier session answering a panic ("member")
//! or a context other than a cold load's: an index loaded again from its earlier records merged
//! the store's changes into records in the index's order as if they were in the store's, and
//! held a changed trajectory twice.

use std::sync::Arc;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{json, Value};
use trajwiki_core::Namespace;
use trajwiki_engine::api::{load_embedder, Query};
use trajwiki_engine::messages::parse_messages;
use trajwiki_engine::pipeline::BuildOptions;
use trajwiki_engine::{Engine, Model};
use trajwiki_retrieve::{Mode, RetrievalConfig};
use trajwiki_store::Store;

#[path = "support/appends.rs"]
mod appends;
use appends::{Numbers, SPEAKERS, WORDS};

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
fn searched(engine: &Engine, ns: &Namespace, question: &str) -> Result<Value, String> {
    let config = RetrievalConfig::default();
    let query = Query {
        question,
        mode: Mode::Full,
        budget: 400,
        config: &config,
    };
    let found = engine
        .with_store(|store| engine.namespace(ns).search(store, &query))
        .map_err(|e| format!("search of {question:?}: {e}"))?;
    let mut value = serde_json::to_value(found).unwrap();
    let o = value.as_object_mut().unwrap();
    o.remove("timings");
    o.remove("embedded_on_load");
    o["ranking"].as_object_mut().unwrap().remove("timings");
    Ok(value)
}

/// One append of a case.
#[derive(Debug, Clone, Copy)]
struct Step {
    /// Which session: 0 a new one, 1 or 2 any held one (an earlier one is a backfill), else the
    /// newest.
    pick: u8,
    /// Messages in the append (1 to 4).
    count: usize,
    /// How it is built: 0 not, 1 or 2 flushed, else with the open exchange waiting.
    build: u8,
    /// The engine that writes it (0 or 1).
    by: usize,
    /// Whether it is sent at the same time as the next step, from another thread through the
    /// other engine.
    with_next: bool,
}

impl Step {
    fn options(&self) -> Option<BuildOptions> {
        match self.build {
            0 => None,
            1 | 2 => Some(BuildOptions {
                flush: true,
                ..BuildOptions::default()
            }),
            _ => Some(BuildOptions::default()),
        }
    }
}

/// A store, two engines over it (each with its own kept fold and index, as two processes
/// have), and what the steps made so far.
struct Case {
    dir: tempfile::TempDir,
    engines: [Engine; 2],
    ns: Namespace,
    numbers: Numbers,
    newest: u32,
    said: usize,
}

impl Case {
    fn new(seed: u64) -> Case {
        let dir = tempfile::tempdir().unwrap();
        let engines = [engine(dir.path()), engine(dir.path())];
        Case {
            dir,
            engines,
            ns: Namespace::new("live").unwrap(),
            numbers: Numbers(seed),
            newest: 1,
            said: 0,
        }
    }

    /// The messages of `step`, in the session it picks.
    fn batch(&mut self, step: &Step) -> (u32, Vec<trajwiki_store::Append>) {
        let session = match step.pick {
            0 => {
                self.newest += 1;
                self.newest
            }
            1 | 2 => 1 + self.numbers.below(self.newest as usize) as u32,
            _ => self.newest,
        };
        let batch: Vec<Value> = (0..step.count)
            .map(|_| {
                self.said += 1;
                message(&mut self.numbers, self.said, session)
            })
            .collect();
        let parsed = parse_messages(json!(batch), Some(&self.ns), "<test>", None).unwrap();
        (session, parsed)
    }

    /// Appends `batch` through engine `by`, building as `build` says; what failed, if anything.
    fn append(
        &self,
        by: usize,
        batch: &[trajwiki_store::Append],
        build: Option<BuildOptions>,
    ) -> Result<(), String> {
        let writer = &self.engines[by];
        let appended = writer
            .with_store(|store| {
                writer
                    .namespace(&self.ns)
                    .append(store, "test", batch, build)
            })
            .map_err(|e| format!("append: {e}"))?;
        match appended.build {
            Some(Err(e)) => Err(format!("build: {e}")),
            _ => Ok(()),
        }
    }

    /// Both engines' searches of a question against a fresh engine's.
    fn compare(&mut self) -> Result<(), String> {
        let question = QUESTIONS[self.numbers.below(QUESTIONS.len())];
        let cold = searched(&engine(self.dir.path()), &self.ns, question)?;
        for (which, e) in self.engines.iter().enumerate() {
            let live = searched(e, &self.ns, question)?;
            if live != cold {
                return Err(format!(
                    "engine {which}'s search of {question:?} differs from a cold load's:\n\
                     live: {live}\ncold: {cold}"
                ));
            }
        }
        Ok(())
    }
}

/// Runs `steps` on a new store, comparing the searches with a cold load's after each (or after
/// each pair sent at once); what went wrong first, with the step.
fn run(seed: u64, steps: &[Step]) -> Result<(), String> {
    let mut case = Case::new(seed);
    let mut k = 0;
    while k < steps.len() {
        let step = steps[k];
        // The first append builds, so that the namespace has a memory to search.
        let build = if k == 0 {
            Some(BuildOptions::default())
        } else {
            step.options()
        };
        let (session, batch) = case.batch(&step);
        let what = format!(
            "seed {seed}, step {k} (session {session} of {}, {:?})",
            case.newest, step
        );
        if step.with_next && k > 0 && k + 1 < steps.len() {
            let next = steps[k + 1];
            let (_, other) = case.batch(&next);
            let case = &case;
            let (a, b) = std::thread::scope(|scope| {
                let a = scope.spawn(|| case.append(0, &batch, build));
                let b = scope.spawn(|| case.append(1, &other, next.options()));
                (a.join().unwrap(), b.join().unwrap())
            });
            a.and(b)
                .map_err(|e| format!("{what} and the next at once: {e}"))?;
            k += 2;
        } else {
            case.append(step.by, &batch, build)
                .map_err(|e| format!("{what}: {e}"))?;
            k += 1;
        }
        case.compare().map_err(|e| format!("{what}: {e}"))?;
    }
    Ok(())
}

/// `count` steps drawn from `seed` (mostly the newest session, one message, built waiting).
fn seeded_steps(seed: u64, count: usize) -> Vec<Step> {
    let mut numbers = Numbers(seed ^ 0x9e37_79b9_7f4a_7c15);
    (0..count)
        .map(|_| Step {
            pick: numbers.below(8) as u8,
            count: if numbers.below(4) == 0 {
                2 + numbers.below(3)
            } else {
                1
            },
            build: numbers.below(10) as u8,
            by: numbers.below(2),
            with_next: false,
        })
        .collect()
}

fn appends_answer_as_a_cold_load(seed: u64, steps: usize) {
    if let Err(e) = run(seed, &seeded_steps(seed, steps)) {
        panic!("{e}");
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

/// Append patterns drawn by proptest — sessions, sizes, builds, writers, pairs sent at once —
/// for `TRAJWIKI_FUZZ_SECONDS` (default 6): every search after every append is a cold load's.
/// A failure is shrunk to the fewest steps that still fail.
#[test]
fn append_patterns_fuzzed() {
    let seconds: u64 = std::env::var("TRAJWIKI_FUZZ_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6);
    let step = (0u8..8, 1usize..=4, 0u8..10, 0usize..2, 0u8..4).prop_map(
        |(pick, count, build, by, at_once)| Step {
            pick,
            count,
            build,
            by,
            with_next: at_once == 0,
        },
    );
    let strategy = (any::<u64>(), prop::collection::vec(step, 2..40));
    let until = Instant::now() + Duration::from_secs(seconds);
    let mut cases = 0;
    while Instant::now() < until {
        let mut runner = TestRunner::new(Config {
            cases: 4,
            failure_persistence: None,
            ..Config::default()
        });
        if let Err(e) = runner.run(&strategy, |(seed, steps)| {
            run(seed, &steps).map_err(TestCaseError::fail)
        }) {
            panic!("append patterns: {e}");
        }
        cases += 4;
    }
    eprintln!("append patterns: {cases} cases in {seconds} s, no failure");
}

/// A fact stated, stated again and then changed: `(session, speaker, text)`.
const RESTATED: [(u32, &str, &str); 6] = [
    (1, "Ann", "I live in Lisbon, in a flat near the river."),
    (1, "Bob", "I live in Oslo, right by the harbour."),
    (
        3,
        "Ann",
        "Still living in Lisbon, still loving the little coffee shops.",
    ),
    (3, "Bob", "Nice, the coffee shops there sound lovely."),
    (6, "Ann", "Big news: I moved to Porto last week!"),
    (6, "Bob", "Congrats, that is a big step for you."),
];

/// Appends `RESTATED` one message at a time in `order` (positions into it), through the two
/// engines in turn, each built and flushed; after each append both engines' searches equal a
/// cold load's. Returns the last context.
fn restated_in_order(order: &[usize]) -> Result<String, String> {
    let case = Case::new(7);
    let question = "Where does Ann live? Lisbon coffee shops";
    let mut context = String::new();
    for (k, &i) in order.iter().enumerate() {
        let (session, speaker, text) = RESTATED[i];
        let batch = json!([{
            "session": session,
            "seq": 1 + i as u32 % 2,
            "speaker": speaker,
            "text": text,
            "timestamp": format!("2024-03-{:02}T10:{:02}:00", session * 3, i),
        }]);
        let parsed = parse_messages(batch, Some(&case.ns), "<test>", None).unwrap();
        let flush = BuildOptions {
            flush: true,
            ..BuildOptions::default()
        };
        case.append(k % 2, &parsed, Some(flush))
            .map_err(|e| format!("message {i}: {e}"))?;
        let cold = searched(&engine(case.dir.path()), &case.ns, question)?;
        for (which, e) in case.engines.iter().enumerate() {
            if searched(e, &case.ns, question)? != cold {
                return Err(format!(
                    "message {i}: engine {which} differs from a cold load"
                ));
            }
        }
        context = cold["context"]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string();
    }
    Ok(context)
}

/// A message that only states a held fact again ("Still living in Lisbon") is marked, once the
/// fact changes, as the first statement is, in a kept index as in a cold load. Backfilled after
/// the change, the restatement is folded where it arrives (after the change): the memory
/// differs, the kept index still answers as a cold load, and the first statement is marked.
#[test]
fn a_restatement_of_a_changed_fact_is_marked_live_as_cold() {
    let marked = |context: &str, said: &str| {
        let line = context
            .lines()
            .find(|l| l.contains(said))
            .unwrap_or_else(|| panic!("{said:?} in the context:\n{context}"));
        line.contains("(superseded by")
    };
    let in_order = restated_in_order(&[0, 1, 2, 3, 4, 5]).unwrap_or_else(|e| panic!("{e}"));
    for said in ["I live in Lisbon", "Still living in Lisbon"] {
        assert!(
            marked(&in_order, said),
            "{said:?} is not marked:\n{in_order}"
        );
    }
    let porto = in_order.lines().find(|l| l.contains("Porto")).unwrap();
    assert!(!porto.contains("superseded"), "{in_order}");
    let backfilled = restated_in_order(&[0, 1, 4, 5, 2, 3]).unwrap_or_else(|e| panic!("{e}"));
    assert!(marked(&backfilled, "I live in Lisbon"), "{backfilled}");
}
