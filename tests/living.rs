//! Living memory: construction is a causal fold over exchanges in arrival order, so building
//! message by message, session by session or all at once gives the same memory, byte for byte
//! (`export --what memory`), and an append never rewrites a stored record.

mod common;

use chrono::NaiveDate;
use trajwiki::core::{HashingEmbedder, Namespace, SourceMessage};
use trajwiki::memory::MemoryConfig;
use trajwiki::pipeline::{build_namespace, BuildOptions, ANN_THRESHOLD};
use trajwiki::store::{Store, VectorDtype};

const LATER: BuildOptions = BuildOptions {
    rebuild: false,
    flush: false,
    vectors: VectorDtype::F16,
    ann_threshold: ANN_THRESHOLD,
};
const FLUSH: BuildOptions = BuildOptions {
    rebuild: false,
    flush: true,
    vectors: VectorDtype::F16,
    ann_threshold: ANN_THRESHOLD,
};

fn export(store: &Store, ns: &Namespace) -> String {
    let mut out = Vec::new();
    trajwiki::export::write_memory(store, ns, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn build(store: &mut Store, ns: &Namespace, options: BuildOptions) {
    build_namespace(
        store,
        ns,
        &HashingEmbedder::new(128),
        &MemoryConfig::default(),
        options,
    )
    .unwrap();
}

/// Ingests `chunks` one after the other, building after each; returns the export before and
/// after a final flush.
fn streamed(chunks: &[&[SourceMessage]]) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let ns = chunks[0][0].namespace.clone();
    for chunk in chunks {
        store.ingest_messages("stream", chunk).unwrap();
        build(&mut store, &ns, LATER);
    }
    let open = export(&store, &ns);
    build(&mut store, &ns, FLUSH);
    let report = store.check().unwrap();
    assert!(report.ok(), "check: {:?}", report.problems);
    assert_eq!(store.unbuilt_messages(&ns).unwrap(), 0);
    (open, export(&store, &ns))
}

/// The three ways of feeding one conversation give identical memories.
fn assert_stream_equals_batch(messages: &[SourceMessage], message_by_message: usize) {
    let once = streamed(&[messages]);
    assert!(once.1.lines().count() > 10, "a memory was built");
    let mut sessions: Vec<&[SourceMessage]> = Vec::new();
    let mut start = 0;
    for i in 1..=messages.len() {
        if i == messages.len() || messages[i].session != messages[start].session {
            sessions.push(&messages[start..i]);
            start = i;
        }
    }
    let by_session = streamed(&sessions);
    assert!(
        once.0 == by_session.0,
        "session by session differs before the flush"
    );
    assert!(
        once.1 == by_session.1,
        "session by session differs after the flush"
    );
    // Message by message over a prefix (and the rest at once), for the time a test may take.
    let n = message_by_message.min(messages.len());
    let mut chunks: Vec<&[SourceMessage]> = (0..n).map(|i| &messages[i..=i]).collect();
    let prefix_once = streamed(&[&messages[..n]]);
    let prefix_stream = streamed(&chunks);
    assert!(
        prefix_once.0 == prefix_stream.0 && prefix_once.1 == prefix_stream.1,
        "message by message differs from one build of the same {n} messages"
    );
    if n < messages.len() {
        chunks.push(&messages[n..]);
        let mixed = streamed(&chunks);
        assert!(
            once.0 == mixed.0 && once.1 == mixed.1,
            "one by one then the rest differs"
        );
    }
}

fn at(session: u32, seq: u32) -> chrono::NaiveDateTime {
    NaiveDate::from_ymd_opt(2024, 1, 1)
        .unwrap()
        .and_hms_opt(9, 0, seq)
        .unwrap()
        + chrono::Duration::days(i64::from(session) * 3)
}

fn message(ns: &Namespace, session: u32, seq: u32, speaker: &str, text: &str) -> SourceMessage {
    common::turn(ns, session, seq, speaker, text, at(session, seq))
}

/// A small conversation with entities that recur, a plan carried out, and several sessions.
fn generated() -> Vec<SourceMessage> {
    let ns = Namespace::new("gen").unwrap();
    let lines = [
        (
            1,
            "Maya",
            "We're thinking about going camping in Yosemite next month.",
        ),
        (1, "Tom", "Yosemite sounds great! Is Biscuit coming?"),
        (
            1,
            "Maya",
            "Biscuit comes everywhere. He loves the Harbor Point beach.",
        ),
        (1, "Tom", "I signed up for the Lisbon half marathon."),
        (
            2,
            "Maya",
            "I just took the kids camping in Yosemite last week!",
        ),
        (2, "Tom", "How was Yosemite? Did Biscuit like it?"),
        (2, "Maya", "Biscuit chased squirrels all day."),
        (
            2,
            "Maya",
            "I also started a pottery class at Riverside Studio.",
        ),
        (3, "Tom", "I ran the Lisbon half marathon in 2 hours."),
        (
            3,
            "Maya",
            "Congrats! My Riverside Studio bowl cracked in the kiln.",
        ),
        (
            3,
            "Tom",
            "Bring Biscuit to the Harbor Point beach on Saturday?",
        ),
        (3, "Maya", "Sure, Harbor Point at ten."),
    ];
    common::numbered_turns(&ns, &lines, at)
}

#[test]
fn generated_conversation_streams_like_a_batch() {
    let messages = generated();
    assert_stream_equals_batch(&messages, messages.len());
}

#[test]
fn locomo_conversation_streams_like_a_batch() {
    let Some(path) = common::shared_data("locomo/locomo7.json") else {
        return;
    };
    let samples = trajwiki::ingest::locomo::read_locomo(&path).unwrap();
    let conv = &samples[0].messages;
    assert!(conv.len() > 300);
    // Every message of the conversation one by one (a build after each), plus session by
    // session and at once.
    assert_stream_equals_batch(conv, conv.len());
}

#[test]
fn a_late_message_is_appended_and_nothing_stored_changes() {
    let messages = generated();
    let ns = messages[0].namespace.clone();
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    store.ingest_messages("chat", &messages).unwrap();
    build(&mut store, &ns, FLUSH);
    let snapshots = store.snapshots(&ns).unwrap();
    let claims = store.claims(&ns).unwrap();
    let ops = store.claim_ops(&ns).unwrap();
    let pages = store.pages(&ns).unwrap();
    let trajectories = store.trajectories(&ns).unwrap();

    // A message of session 1 that arrives after session 3 was built, and its reply.
    let late = [
        message(
            &ns,
            1,
            50,
            "Tom",
            "Forgot to say: Biscuit can stay with my sister Ana.",
        ),
        message(&ns, 1, 51, "Maya", "Thanks, Ana is the best."),
    ];
    store.ingest_messages("late", &late).unwrap();
    build(&mut store, &ns, FLUSH);
    let report = store.check().unwrap();
    assert!(report.ok(), "check: {:?}", report.problems);

    // Every immutable record stored before is still there, unchanged.
    let now = store.snapshots(&ns).unwrap();
    assert_eq!(now.len(), snapshots.len() + 1, "one new exchange");
    for s in &snapshots {
        assert_eq!(store.snapshot(&s.id).unwrap().as_ref(), Some(s));
    }
    for c in &claims {
        assert_eq!(store.claim(&c.id).unwrap().as_ref(), Some(c));
    }
    assert_eq!(&store.claim_ops(&ns).unwrap()[..ops.len()], &ops[..]);
    for p in &pages {
        let kept = store.page_revision(&p.id, p.revision).unwrap();
        assert_eq!(kept.as_ref(), Some(p), "page revision {} kept", p.id);
    }
    // The late exchange is a new snapshot, after the others; earlier trajectories keep their
    // snapshots in order (a trajectory may only have grown at its end).
    let new = now
        .iter()
        .find(|s| !snapshots.iter().any(|o| o.id == s.id))
        .unwrap();
    assert_eq!(
        new.source_message_ids,
        vec![late[0].id.clone(), late[1].id.clone()]
    );
    for t in &trajectories {
        let after = store.trajectory(&t.id).unwrap().unwrap();
        assert_eq!(
            &after.snapshot_ids[..t.snapshot_ids.len()],
            &t.snapshot_ids[..]
        );
    }
}

#[test]
fn a_build_with_another_model_or_config_is_refused_and_rebuild_says_what_it_replaces() {
    let messages = generated();
    let ns = messages[0].namespace.clone();
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    store.ingest_messages("chat", &messages).unwrap();
    build(&mut store, &ns, FLUSH);
    let before = export(&store, &ns);
    let err = build_namespace(
        &mut store,
        &ns,
        &HashingEmbedder::new(64),
        &MemoryConfig::default(),
        FLUSH,
    )
    .unwrap_err();
    assert!(err.to_string().contains("model"), "{err}");
    assert_eq!(
        export(&store, &ns),
        before,
        "a refused build changes nothing"
    );
    let report = build_namespace(
        &mut store,
        &ns,
        &HashingEmbedder::new(64),
        &MemoryConfig::default(),
        BuildOptions {
            rebuild: true,
            flush: true,
            vectors: VectorDtype::F16,
            ann_threshold: ANN_THRESHOLD,
        },
    )
    .unwrap();
    assert!(report.replaced.is_some_and(|r| r.contains("hashing")));
    // Querying with the old model is now a clear error.
    let err = trajwiki::engine::load::load_index(
        &store,
        &ns,
        &HashingEmbedder::new(128),
        &mut Default::default(),
        None,
    )
    .err()
    .expect("another model is refused");
    assert!(err.to_string().contains("was built with model"), "{err}");
}

#[test]
fn ingest_build_and_a_query_that_finds_unbuilt_messages() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s");
    let store = store.to_str().unwrap();
    let file = dir.path().join("chat.jsonl");
    let line = |session: u32, seq: u32, speaker: &str, text: &str| {
        serde_json::json!({"namespace": "app", "session": session, "seq": seq, "speaker": speaker,
            "text": text, "timestamp": format!("2024-02-0{session}T10:00:{seq:02}"),
            "ref": format!("D{session}:{seq}")})
        .to_string()
    };
    let first = [
        line(1, 1, "Ann", "I moved to Oslo last week."),
        line(1, 2, "Ben", "Oslo! How is the new flat?"),
        line(1, 3, "Ann", "Small, but it has a view of the fjord."),
        line(1, 4, "Ben", "Nice, send me a photo of the fjord."),
    ];
    std::fs::write(&file, first.join("\n")).unwrap();
    let out = common::ok(&[
        "ingest",
        "--store",
        store,
        "--build",
        "--model",
        "hashing",
        "--json",
        file.to_str().unwrap(),
    ]);
    assert!(out.contains("\"pending_messages\""), "{out}");
    // One more message, ingested without a build: the query still finds it and says so.
    std::fs::write(
        &file,
        line(2, 1, "Ann", "My cat Pixel learned to open the fridge."),
    )
    .unwrap();
    common::ok(&[
        "ingest",
        "--quiet",
        "--store",
        store,
        file.to_str().unwrap(),
    ]);
    let out = common::ok(&[
        "query",
        "--store",
        store,
        "--namespace",
        "app",
        "--model",
        "hashing",
        "--json",
        "What can Pixel the cat open?",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v["unbuilt_messages"].as_u64().unwrap() >= 1, "{out}");
    assert!(
        v["source_refs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r == "D2:1"),
        "{out}"
    );
    let (code, _, err) = common::trajwiki(&[
        "query",
        "--store",
        store,
        "--namespace",
        "app",
        "--model",
        "hashing",
        "What can Pixel the cat open?",
    ]);
    assert_eq!(code, 0);
    assert!(err.contains("not built yet"), "{err}");
    // Build what arrived; everything is built after a flush.
    let out = common::ok(&[
        "build", "--store", store, "--model", "hashing", "--flush", "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["namespaces"][0]["pending_messages"], 0, "{out}");
    assert_eq!(v["namespaces"][0]["messages"], 5, "{out}");
}

#[test]
fn a_kept_fold_is_used_only_while_the_store_holds_it() {
    let messages = generated();
    let ns = messages[0].namespace.clone();
    let dir = tempfile::tempdir().unwrap();
    let mut mine = Store::open(dir.path()).unwrap();
    let mut other = Store::open(dir.path()).unwrap();
    let e = HashingEmbedder::new(128);
    let config = MemoryConfig::default();
    let mut kept = None;
    let build_kept = |store: &mut Store, kept: &mut _, options| {
        trajwiki::pipeline::build_namespace_kept(store, &ns, &e, &config, options, kept).unwrap()
    };
    mine.ingest_messages("a", &messages[..4]).unwrap();
    build_kept(&mut mine, &mut kept, LATER);
    mine.ingest_messages("b", &messages[4..6]).unwrap();
    build_kept(&mut mine, &mut kept, LATER);
    assert!(kept.is_some());
    // Another connection appends: the kept fold is stale and must not be used.
    other.ingest_messages("c", &messages[6..9]).unwrap();
    build(&mut other, &ns, LATER);
    mine.ingest_messages("d", &messages[9..]).unwrap();
    build_kept(&mut mine, &mut kept, FLUSH);
    assert_eq!(export(&mine, &ns), streamed(&[&messages]).1);
    let report = mine.check().unwrap();
    assert!(report.ok(), "check: {:?}", report.problems);
}

/// Two namespaces: the generated conversation, and the same turns reworded in another one.
fn two_namespaces() -> (Vec<SourceMessage>, [Namespace; 2]) {
    let first = generated();
    let other = Namespace::new("gen-two").unwrap();
    let second: Vec<SourceMessage> = first
        .iter()
        .map(|m| {
            message(
                &other,
                m.session,
                m.seq,
                &m.speaker,
                &format!("{} Again.", m.text),
            )
        })
        .collect();
    let names = [first[0].namespace.clone(), other];
    (first.into_iter().chain(second).collect(), names)
}

/// Embedding the new messages of every namespace together before building (what `build` does
/// when the model runs on a GPU: full batches whatever the namespaces' sizes) builds the same
/// memories as building each namespace alone, and leaves nothing for a second pass to embed.
#[test]
fn messages_embedded_across_namespaces_first_build_the_same_memories() {
    use trajwiki::pipeline::prefill_messages;
    let (messages, names) = two_namespaces();
    let embedder = HashingEmbedder::new(128);
    let alone = tempfile::tempdir().unwrap();
    let mut alone = Store::open(alone.path()).unwrap();
    alone.ingest_messages("both", &messages).unwrap();
    for ns in &names {
        build(&mut alone, ns, FLUSH);
    }
    for overlap in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        store.ingest_messages("both", &messages).unwrap();
        let seen = std::sync::Mutex::new(Vec::new());
        let progress = |done: usize, total: usize| seen.lock().unwrap().push((done, total));
        let first = prefill_messages(&mut store, &names, &embedder, 7, overlap, &progress).unwrap();
        let distinct: std::collections::HashSet<String> =
            messages.iter().map(|m| m.embedding_text()).collect();
        assert_eq!(first.messages, messages.len());
        assert_eq!(first.embedded, distinct.len());
        let seen = seen.into_inner().unwrap();
        // The total first (none done), then once per chunk.
        assert_eq!(seen.first(), Some(&(0, distinct.len())));
        assert_eq!(seen.len(), 1 + distinct.len().div_ceil(7), "{seen:?}");
        assert_eq!(seen.last(), Some(&(distinct.len(), distinct.len())));
        for ns in &names {
            build(&mut store, ns, FLUSH);
            assert_eq!(
                export(&store, ns),
                export(&alone, ns),
                "{ns}, overlap {overlap}"
            );
        }
        // The vector files now hold every message: nothing is left to embed.
        let again =
            prefill_messages(&mut store, &names, &embedder, 7, overlap, &|_, _| {}).unwrap();
        assert_eq!((again.messages, again.embedded), (0, 0));
    }
}

/// An embedder that fails from its `fail_from`-th call on.
struct Failing {
    inner: HashingEmbedder,
    calls: std::sync::atomic::AtomicUsize,
    fail_from: usize,
}

impl trajwiki::core::Embedder for Failing {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn embed(
        &self,
        texts: &[&str],
        kind: trajwiki::core::EmbedKind,
    ) -> Result<trajwiki::core::Embeddings, trajwiki::core::EmbedError> {
        let n = self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if n >= self.fail_from {
            return Err(trajwiki::core::EmbedError::DeviceUnavailable {
                reason: "the device went away".into(),
            });
        }
        self.inner.embed(texts, kind)
    }
}

/// A failing embedder stops the prefill with its error, the chunks embedded before it stay
/// cached, and with two chunks in flight nothing hangs.
#[test]
fn a_failed_prefill_keeps_what_it_embedded() {
    use trajwiki::pipeline::prefill_messages;
    let (messages, names) = two_namespaces();
    for overlap in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        store.ingest_messages("both", &messages).unwrap();
        let failing = Failing {
            inner: HashingEmbedder::new(128),
            calls: Default::default(),
            fail_from: 2,
        };
        let err =
            prefill_messages(&mut store, &names, &failing, 5, overlap, &|_, _| {}).unwrap_err();
        let mut chain = err.to_string();
        let mut source = std::error::Error::source(&err);
        while let Some(e) = source {
            chain.push_str(&format!(": {e}"));
            source = e.source();
        }
        assert!(chain.contains("the device went away"), "{chain}");
        // What was embedded is kept: a second pass embeds only the rest.
        let rest =
            prefill_messages(&mut store, &names, &failing.inner, 5, overlap, &|_, _| {}).unwrap();
        let distinct: std::collections::HashSet<String> =
            messages.iter().map(|m| m.embedding_text()).collect();
        if overlap {
            assert!(rest.embedded <= distinct.len() - 5, "{rest:?}");
        } else {
            assert_eq!(rest.embedded, distinct.len() - 10, "{rest:?}");
        }
    }
}
