//! A LoCoMo conversation appended message by message through one engine — its fold and wiki
//! kept between appends, with what the wiki carries from one render to the next (each page's
//! section titles) — has the memory of one build over the same messages, pages byte for byte.

use std::path::Path;
use std::sync::Arc;

use trajwiki_core::{Namespace, SourceMessage};
use trajwiki_engine::api::load_embedder;
use trajwiki_engine::export::Export;
use trajwiki_engine::pipeline::BuildOptions;
use trajwiki_engine::{Engine, Model};
use trajwiki_store::{Append, Store};

fn engine(dir: &Path) -> Engine {
    let model = Model::Loaded(load_embedder("hashing-64").unwrap().into());
    Engine::new(
        Store::open(dir).unwrap(),
        model,
        Arc::new(trajwiki_compute::CpuScoring),
        64 << 20,
    )
}

/// LoCoMo's samples, or `None` (said) when the shared evaluation data is absent.
fn locomo() -> Option<Vec<trajwiki_ingest::locomo::LocomoSample>> {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/locomo/locomo7.json");
    if !path.exists() {
        eprintln!(
            "skipping: {} is absent (the shared evaluation data is not checked out)",
            path.display()
        );
        return None;
    }
    Some(trajwiki_ingest::locomo::read_locomo(&path).unwrap())
}

/// The memory of `messages` in `ns` exported, appended message by message through one engine
/// (built after each) and ingested at once then built: `(live, once)`.
fn live_and_once(ns: &Namespace, messages: &[SourceMessage]) -> (String, String) {
    live_and_once_reopened(ns, messages, usize::MAX)
}

/// [`live_and_once`], the live store's engine opened again after every `reopen` appends: the
/// next append resumes the fold (and the wiki) from what the store holds.
fn live_and_once_reopened(
    ns: &Namespace,
    messages: &[SourceMessage],
    reopen: usize,
) -> (String, String) {
    let flush = BuildOptions {
        flush: true,
        ..BuildOptions::default()
    };
    let export = |engine: &Engine| {
        let mut out = Vec::new();
        engine
            .with_store(|s| {
                engine
                    .namespace(ns)
                    .export(s, Export::Memory, &mut out, None)
            })
            .unwrap();
        String::from_utf8(out).unwrap()
    };
    let live_dir = tempfile::tempdir().unwrap();
    let mut live = engine(live_dir.path());
    for (i, m) in messages.iter().enumerate() {
        if i > 0 && i % reopen == 0 {
            live = engine(live_dir.path());
        }
        let append = [Append::given(m.clone())];
        live.with_store(|s| {
            live.namespace(ns)
                .append(s, "live", &append, Some(BuildOptions::default()))
        })
        .unwrap();
    }
    live.with_store(|s| live.namespace(ns).append(s, "live", &[], Some(flush)))
        .unwrap();
    let once_dir = tempfile::tempdir().unwrap();
    let once = engine(once_dir.path());
    once.with_store(|s| once.ingest_messages(s, "once", messages, None))
        .unwrap();
    once.with_store(|s| once.namespace(ns).append(s, "once", &[], Some(flush)))
        .unwrap();
    (export(&live), export(&once))
}

#[test]
fn a_kept_wiki_renders_the_pages_a_cold_build_renders() {
    let Some(samples) = locomo() else {
        return;
    };
    // The longest of the first two: its speakers' pages have several sections.
    let sample = samples
        .iter()
        .take(2)
        .max_by_key(|s| s.messages.len())
        .unwrap();
    let (live, once) = live_and_once(&sample.namespace, &sample.messages);
    assert!(
        once.lines()
            .filter(|l| l.contains("\"record\":\"page\""))
            .count()
            > 10
    );
    assert!(once.contains("\\n### "), "pages with sections");
    assert!(
        live == once,
        "the memory appended message by message differs"
    );
}

/// The same, the appends made by a new engine now and then (another process's, or the same
/// server started again): its first append resumes the fold and the wiki from the store.
#[test]
fn a_resumed_wiki_renders_the_pages_a_cold_build_renders() {
    let Some(samples) = locomo() else {
        return;
    };
    let sample = &samples[0];
    let (live, once) = live_and_once_reopened(&sample.namespace, &sample.messages, 37);
    assert!(
        live == once,
        "the memory appended by engines opened again differs"
    );
}

/// Three LoCoMo conversations in one namespace, one after the other, with two exchanges between
/// the second and the third that name "Caro" before the third's Caroline speaks: speakers join
/// a namespace that has two, then more (whom "you" addresses stops being read, then only the
/// new names and the short forms of them are read again: "caro" becomes Caroline's alias).
/// Appended message by message, its memory is one build's, pages byte for byte.
#[test]
fn speakers_joining_leave_the_pages_a_cold_build_renders() {
    let Some(samples) = locomo() else {
        return;
    };
    let ns = Namespace::new("joined").unwrap();
    let of = |name: &str| {
        samples
            .iter()
            .find(|s| s.namespace.as_str() == name)
            .unwrap()
    };
    let moved = |m: &SourceMessage, k: u32| {
        SourceMessage::new(
            ns.clone(),
            m.session + 100 * k,
            m.seq,
            m.speaker.clone(),
            m.text.clone(),
            m.timestamp,
            m.attachments.clone(),
            m.external_ref.as_ref().map(|r| format!("c{k}-{r}")),
        )
    };
    let mut messages: Vec<SourceMessage> = Vec::new();
    for (k, name) in ["conv-30", "conv-44"].iter().enumerate() {
        messages.extend(
            of(name)
                .messages
                .iter()
                .take(120)
                .map(|m| moved(m, k as u32)),
        );
    }
    // Two exchanges of the first conversation's speakers about Caro, a session each.
    let last = messages.last().unwrap().clone();
    let exchanges = [
        [
            ("Gina", "Caro called me today about her adoption plans."),
            ("Jon", "That is great news for Caro and her family!"),
        ],
        [
            (
                "Gina",
                "Caro said the adoption agency in town was really helpful.",
            ),
            ("Jon", "I hope Caro hears back from the agency soon."),
        ],
    ];
    for (i, exchange) in exchanges.iter().enumerate() {
        for (j, (speaker, text)) in exchange.iter().enumerate() {
            messages.push(SourceMessage::new(
                ns.clone(),
                last.session + 1 + i as u32,
                1 + j as u32,
                speaker.to_string(),
                text.to_string(),
                last.timestamp,
                Vec::new(),
                None,
            ));
        }
    }
    messages.extend(of("conv-26").messages.iter().take(120).map(|m| moved(m, 2)));
    let (live, once) = live_and_once(&ns, &messages);
    assert!(
        once.contains("\"title\":\"Caroline\""),
        "the third conversation's speaker has a page"
    );
    assert!(
        live == once,
        "the memory appended message by message differs"
    );
}
