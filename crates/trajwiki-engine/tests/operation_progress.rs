//! The long operations besides a build tell their progress through the engine's typed
//! operations — an ingest the records it has gone through, a compile the runs committed, an
//! export the records written — each from 0 to all of them, never backwards, and telling it
//! changes nothing they store or write.

use std::collections::BTreeMap;
use std::sync::Mutex;

use trajwiki_core::{Namespace, Outcome, Run, SourceMessage, Step};
use trajwiki_engine::export::Export;
use trajwiki_engine::pipeline::{Progress, Stage};
use trajwiki_engine::Engine;
use trajwiki_store::Store;

/// `n` messages of namespace `ns`, 100 to a session.
fn messages(ns: &Namespace, n: usize) -> Vec<SourceMessage> {
    let start = chrono::DateTime::parse_from_rfc3339("2024-01-01T10:00:00Z")
        .unwrap()
        .naive_utc();
    (0..n)
        .map(|i| {
            SourceMessage::new(
                ns.clone(),
                1 + (i / 100) as u32,
                1 + (i % 100) as u32,
                ["Maya", "Leo"][i % 2].to_string(),
                format!("Turn {i}: I went to the harbour and brought bread back."),
                start + chrono::Duration::minutes(i as i64),
                Vec::new(),
                None,
            )
        })
        .collect()
}

/// `n` runs of namespace `ns`, every other one solved.
fn runs(ns: &Namespace, n: usize) -> Vec<Run> {
    let step = |a: &str, o: &str| Step {
        action: a.into(),
        observation: o.into(),
    };
    (0..n)
        .map(|i| {
            Run::new(
                ns.clone(),
                format!("run-{i}"),
                format!("put mug {i} in the coffeemachine."),
                vec![
                    step("take mug 1 from countertop 1", "Nothing happens."),
                    step(
                        "go to countertop 1",
                        "On the countertop 1, you see a mug 1.",
                    ),
                ],
                Outcome {
                    success: Some(i % 2 == 0),
                    reward: None,
                },
                BTreeMap::new(),
            )
        })
        .collect()
}

/// What an operation told: its stages and counts, in order.
#[derive(Default)]
struct Heard(Mutex<Vec<Progress>>);

impl Heard {
    fn tell(&self, p: Progress) {
        self.0.lock().unwrap().push(p);
    }

    /// The counts told, checked to be of one stage and total, from none to all, never back.
    fn counts(&self, stage: Stage, total: usize) -> Vec<usize> {
        let heard = std::mem::take(&mut *self.0.lock().unwrap());
        assert!(heard.iter().all(|p| p.stage == stage && p.total == total));
        let done: Vec<usize> = heard.iter().map(|p| p.done).collect();
        assert_eq!(done.first(), Some(&0), "{done:?}");
        assert_eq!(done.last(), Some(&total), "{done:?}");
        assert!(done.windows(2).all(|w| w[0] <= w[1]), "{done:?}");
        done
    }
}

#[test]
fn an_ingest_a_compile_and_an_export_tell_their_records_as_they_go() {
    let dir = tempfile::tempdir().unwrap();
    let quiet = tempfile::tempdir().unwrap();
    let engine = Engine::for_records(Store::open(dir.path()).unwrap());
    let other = Engine::for_records(Store::open(quiet.path()).unwrap());
    let heard = Heard::default();
    let tell = |p: Progress| heard.tell(p);
    let chat = Namespace::new("chat").unwrap();
    let agent = Namespace::new("agent").unwrap();

    // An ingest of 2,500 messages: every 1,000, and at the end.
    let sent = messages(&chat, 2_500);
    let told = engine
        .with_store(|s| engine.ingest_messages(s, "test", &sent, Some(&tell)))
        .unwrap();
    assert_eq!(
        heard.counts(Stage::Storing, 2_500),
        [0, 1_000, 2_000, 2_500]
    );
    let untold = other
        .with_store(|s| other.ingest_messages(s, "test", &sent, None))
        .unwrap();
    assert_eq!((told.added, untold.added), (2_500, 2_500));

    // Runs: stored, then compiled one by one.
    let done = runs(&agent, 5);
    for (engine, progress) in [(&engine, Some(&tell as _)), (&other, None)] {
        engine
            .with_store(|s| engine.ingest_runs(s, "test", &done, progress))
            .unwrap();
    }
    assert_eq!(heard.counts(Stage::Storing, 5), [0, 5]);
    let compiled = engine
        .with_store(|s| engine.namespace(&agent).compile(s, None, Some(&tell)))
        .unwrap();
    assert_eq!(compiled.report.runs, 5);
    assert_eq!(heard.counts(Stage::Compiling, 5), [0, 1, 2, 3, 4, 5]);
    other
        .with_store(|s| other.namespace(&agent).compile(s, None, None))
        .unwrap();

    // Exports: the same bytes told or not, the count of their lines told.
    let export = |engine: &Engine, ns: &Namespace, what, progress| {
        let mut out = Vec::new();
        let n = engine
            .with_store(|s| engine.namespace(ns).export(s, what, &mut out, progress))
            .unwrap();
        assert_eq!(n, out.iter().filter(|&&b| b == b'\n').count());
        (n, out)
    };
    let (n, told) = export(&engine, &chat, Export::Messages, Some(&tell));
    assert_eq!(heard.counts(Stage::Exporting, n), [0, 1_000, 2_000, 2_500]);
    assert_eq!(told, export(&other, &chat, Export::Messages, None).1);
    let (n, told) = export(&engine, &agent, Export::Runs, Some(&tell));
    assert_eq!(heard.counts(Stage::Exporting, 5), [0, 5]);
    assert_eq!((n, told), export(&other, &agent, Export::Runs, None));
}

#[test]
fn a_memory_export_tells_every_record_it_writes() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::for_records(Store::open(dir.path()).unwrap());
    let chat = Namespace::new("chat").unwrap();
    engine
        .with_store(|s| engine.ingest_messages(s, "test", &messages(&chat, 300), None))
        .unwrap();
    let config = trajwiki_memory::MemoryConfig::default();
    let options = trajwiki_engine::pipeline::BuildOptions {
        flush: true,
        ..Default::default()
    };
    let plan = trajwiki_engine::BuildPlan::new(&config, options);
    engine
        .with_store(|s| engine.namespace(&chat).build_with(s, &plan))
        .unwrap();
    let heard = Heard::default();
    let tell = |p: Progress| heard.tell(p);
    let mut told = Vec::new();
    let n = engine
        .with_store(|s| {
            engine
                .namespace(&chat)
                .export(s, Export::Memory, &mut told, Some(&tell))
        })
        .unwrap();
    assert!(n > 300, "{n} records");
    let counts = heard.counts(Stage::Exporting, n);
    assert!(counts.len() >= 2 + n / 1_000, "{counts:?}");
    let mut untold = Vec::new();
    engine
        .with_store(|s| {
            engine
                .namespace(&chat)
                .export(s, Export::Memory, &mut untold, None)
        })
        .unwrap();
    assert_eq!(told, untold);
}
