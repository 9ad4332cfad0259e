//! The engine's state between calls: one index per namespace, kept while the namespace's index
//! state holds and loaded again after any write (through this engine or another connection);
//! one writer per namespace; a deleted namespace leaves nothing kept.

use std::sync::Arc;

use serde_json::json;
use trajwiki_core::Namespace;
use trajwiki_engine::api::{load_embedder, ApiError, Query};
use trajwiki_engine::messages::parse_messages;
use trajwiki_engine::pipeline::BuildOptions;
use trajwiki_engine::{Appended, Engine, Model};
use trajwiki_memory::BuildReport;
use trajwiki_retrieve::{Mode, RetrievalConfig};
use trajwiki_store::{Append, IngestReport, Store};

fn engine(dir: &std::path::Path) -> Engine {
    let store = Store::open(dir).unwrap();
    let model = Model::Loaded(load_embedder("hashing-64").unwrap().into());
    Engine::new(
        store,
        model,
        Arc::new(trajwiki_compute::CpuScoring),
        64 << 20,
    )
}

/// An append's ingest report and build report, its build (when asked) done.
fn done(appended: Appended) -> (IngestReport, Option<BuildReport>) {
    let built = appended
        .build
        .map(|b| b.expect("the build follows the append"));
    (appended.ingest, built)
}

fn messages(ns: &Namespace, texts: &[(&str, &str)]) -> Vec<Append> {
    let items: Vec<_> = texts
        .iter()
        .enumerate()
        .map(|(i, (speaker, text))| {
            json!({"speaker": speaker, "text": text,
                   "timestamp": format!("2023-05-08T13:{:02}:00", i)})
        })
        .collect();
    parse_messages(json!(items), Some(ns), "<test>", None).unwrap()
}

const TALK: [(&str, &str); 4] = [
    ("Caroline", "I adopted a dog named Biscuit last week."),
    ("Melanie", "How lovely! What breed is Biscuit?"),
    ("Caroline", "Biscuit is a beagle, and he loves the beach."),
    (
        "Melanie",
        "We should take Biscuit and my kids to the beach in June.",
    ),
];

/// Whether the search loaded the index (its load time is reported only then).
fn search(engine: &Engine, ns: &Namespace, question: &str) -> (bool, Vec<String>) {
    let config = RetrievalConfig::default();
    let query = Query {
        question,
        mode: Mode::Full,
        budget: 200,
        config: &config,
    };
    let found = engine
        .with_store(|store| engine.namespace(ns).search(store, &query))
        .unwrap();
    (found.timings.index_load > 0.0, found.context.source_refs)
}

#[test]
fn an_index_is_kept_until_its_namespace_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path());
    let ns = Namespace::new("alice").unwrap();
    let build = Some(BuildOptions {
        flush: true,
        ..BuildOptions::default()
    });
    let (added, built) = engine
        .with_store(|store| {
            engine
                .namespace(&ns)
                .append(store, "test", &messages(&ns, &TALK[..2]), build)
        })
        .map(done)
        .unwrap();
    assert_eq!(added.added, 2);
    assert!(built.is_some(), "append with build options builds");

    let (loaded, _) = search(&engine, &ns, "What breed is Biscuit?");
    assert!(loaded, "the first search loads the index");
    let (loaded, _) = search(&engine, &ns, "What breed is Biscuit?");
    assert!(!loaded, "the second search uses the kept index");
    assert_eq!(engine.index_cache().0, vec![ns.clone()]);

    // An append with its build through this engine takes the kept index to the state it
    // leaves, inside its transaction: the next search finds the index current (nothing to
    // load) and the new messages in it.
    engine
        .with_store(|store| {
            engine
                .namespace(&ns)
                .append(store, "test", &messages(&ns, &TALK[2..]), build)
        })
        .map(done)
        .unwrap();
    let (loaded, refs) = search(&engine, &ns, "Which breed is Biscuit, a beagle?");
    assert!(!loaded, "the append brought the kept index up to date");
    assert_eq!(refs.len(), 4, "every message is in reach: {refs:?}");

    // A write through another connection (another process) is seen too.
    let mut other = Store::open(dir.path()).unwrap();
    let later = messages(&ns, &[("Caroline", "June works, Biscuit will be ready.")]);
    other.append_messages("other", &later).unwrap();
    let (loaded, _) = search(&engine, &ns, "When do they go to the beach?");
    assert!(loaded, "another connection's write moved the index state");
}

#[test]
fn a_deleted_namespace_is_unknown_and_can_be_written_again() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path());
    let ns = Namespace::new("bob").unwrap();
    let build = Some(BuildOptions {
        flush: true,
        ..BuildOptions::default()
    });
    let handle = engine.namespace(&ns);
    engine
        .with_store(|store| handle.append(store, "test", &messages(&ns, &TALK), build))
        .map(done)
        .unwrap();
    search(&engine, &ns, "Biscuit");
    let deleted = engine.with_store(|store| handle.delete(store)).unwrap();
    assert!(deleted.existed);
    let config = RetrievalConfig::default();
    let query = Query {
        question: "Biscuit",
        mode: Mode::Full,
        budget: 200,
        config: &config,
    };
    let gone = engine.with_store(|store| handle.search(store, &query));
    assert!(
        matches!(gone, Err(ApiError::UnknownNamespace { .. })),
        "a deleted namespace is not served from the kept index"
    );
    // The kept fold went with it: building again starts from nothing, not from the old fold.
    let (_, built) = engine
        .with_store(|store| handle.append(store, "test", &messages(&ns, &TALK[..2]), build))
        .map(done)
        .unwrap();
    let built = serde_json::to_value(built.unwrap()).unwrap();
    assert_eq!(built["messages"], json!(2), "{built}");
}

#[test]
fn appends_to_one_namespace_from_many_threads_all_land() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path());
    let ns = Namespace::new("carol").unwrap();
    std::thread::scope(|scope| {
        for t in 0..4 {
            let (engine, ns) = (&engine, &ns);
            scope.spawn(move || {
                for i in 0..3 {
                    let text = format!("thread {t} says message {i} about the garden");
                    let one = messages(ns, &[("Carol", text.as_str())]);
                    let build = Some(BuildOptions {
                        flush: true,
                        ..BuildOptions::default()
                    });
                    engine
                        .with_store(|store| engine.namespace(ns).append(store, "t", &one, build))
                        .map(done)
                        .unwrap();
                }
            });
        }
    });
    let counts = engine
        .with_store(|store| store.namespace_counts(&ns))
        .unwrap();
    assert_eq!(counts.0, 12);
    let (_, refs) = search(&engine, &ns, "garden");
    assert!(!refs.is_empty());
}

/// An index that fits the cache only without what it keeps for the next load is kept without
/// it: its searches stay warm (at 250,000 messages the two together passed the server's default
/// gigabyte, and every search loaded the index again).
#[test]
fn an_index_is_kept_when_it_fits_only_without_its_derivations() {
    let dir = tempfile::tempdir().unwrap();
    let ns = Namespace::new("alice").unwrap();
    let build = Some(BuildOptions {
        flush: true,
        ..BuildOptions::default()
    });
    let roomy = engine(dir.path());
    roomy
        .with_store(|store| {
            roomy
                .namespace(&ns)
                .append(store, "test", &messages(&ns, &TALK), build)
        })
        .map(done)
        .unwrap();
    let (index_bytes, with_derived) = roomy
        .with_store(|store| {
            let (kept, _) = roomy.namespace(&ns).index(store)?;
            Ok::<_, ApiError>((kept.value.index.heap_bytes(), kept.value.heap_bytes()))
        })
        .unwrap();
    assert!(with_derived > index_bytes);
    let tight = Engine::new(
        Store::open(dir.path()).unwrap(),
        Model::Loaded(load_embedder("hashing-64").unwrap().into()),
        Arc::new(trajwiki_compute::CpuScoring),
        index_bytes + (with_derived - index_bytes) / 2,
    );
    let (loaded, _) = search(&tight, &ns, "What breed is Biscuit?");
    assert!(loaded);
    let (loaded, _) = search(&tight, &ns, "What breed is Biscuit?");
    assert!(!loaded, "the index is kept, its derivations let go of");
    assert_eq!(tight.index_cache().0, vec![ns.clone()]);
}

/// An embedder that panics on a text holding its `poison`: a defect in the model.
struct Breaking {
    inner: Arc<dyn trajwiki_core::Embedder>,
    poison: std::sync::Mutex<Option<&'static str>>,
}

impl Breaking {
    fn poison(&self, word: Option<&'static str>) {
        *self.poison.lock().unwrap() = word;
    }
}

impl trajwiki_core::Embedder for Breaking {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn dim(&self) -> usize {
        self.inner.dim()
    }

    fn embed(
        &self,
        texts: &[&str],
        kind: trajwiki_core::EmbedKind,
    ) -> Result<trajwiki_core::Embeddings, trajwiki_core::EmbedError> {
        let poison = *self.poison.lock().unwrap();
        if let Some(word) = poison.filter(|w| texts.iter().any(|t| t.contains(w))) {
            panic!("a defect inside the model, at {word:?}");
        }
        self.inner.embed(texts, kind)
    }
}

/// A build that panics after the append stored its messages is an error of the build beside the
/// stored messages' report, never a lost report (issue 49: a 500 for a stored message, which a
/// retry without a key stores again); the build is undone to its savepoint and the next build
/// folds them in. A model that panics on the appended messages themselves, which are embedded
/// before the append's transaction, stores nothing and says so.
#[test]
fn a_build_that_panics_leaves_the_append_reported() {
    let dir = tempfile::tempdir().unwrap();
    let breaking = Arc::new(Breaking {
        inner: load_embedder("hashing-64").unwrap().into(),
        poison: std::sync::Mutex::new(None),
    });
    let engine = Engine::new(
        Store::open(dir.path()).unwrap(),
        Model::Loaded(breaking.clone()),
        Arc::new(trajwiki_compute::CpuScoring),
        64 << 20,
    );
    let ns = Namespace::new("alice").unwrap();
    let build = Some(BuildOptions {
        flush: true,
        ..BuildOptions::default()
    });
    let handle = engine.namespace(&ns);
    let stored = || {
        engine
            .with_store(|store| Ok::<_, trajwiki_store::StoreError>(store.namespace_counts(&ns)?.0))
            .unwrap()
    };
    // Stored, not built: the build of the next append embeds these inside its transaction.
    engine
        .with_store(|store| handle.append(store, "test", &messages(&ns, &TALK[..2]), None))
        .unwrap();
    // A model that panics on the appended messages: nothing stored, the append says why.
    breaking.poison(Some("beagle"));
    let refused =
        engine.with_store(|store| handle.append(store, "test", &messages(&ns, &TALK[2..]), build));
    match refused {
        Err(ApiError::Panicked { step, message }) => {
            assert_eq!(step, "embedding the messages");
            assert!(message.contains("a defect inside the model"), "{message}");
        }
        other => panic!("expected the model's panic, got {other:?}"),
    }
    assert_eq!(stored(), 2);
    // A build that panics inside the transaction, after the messages were stored there: the
    // build is undone, the messages kept and reported.
    breaking.poison(Some("adopted"));
    let appended = engine
        .with_store(|store| handle.append(store, "test", &messages(&ns, &TALK[2..]), build))
        .unwrap();
    assert_eq!(appended.ingest.added, 2);
    match appended.build {
        Some(Err(ApiError::Panicked { step, message })) => {
            assert_eq!(step, "the build");
            assert!(message.contains("a defect inside the model"), "{message}")
        }
        other => panic!("expected the build's panic, got {other:?}"),
    }
    assert_eq!(stored(), 4);
    breaking.poison(None);
    let built = engine
        .with_store(|store| {
            handle.build(
                store,
                &trajwiki_memory::MemoryConfig::default(),
                BuildOptions {
                    flush: true,
                    ..BuildOptions::default()
                },
            )
        })
        .unwrap();
    assert_eq!(serde_json::to_value(built).unwrap()["messages"], json!(4));
}
