//! The Memory Wiki as a person reads it (SPEC §2.5, issue 50): one page per thing, each claim on
//! the page of what it is about, a changed fact shown as changed on the page and in a context,
//! and routing that bounds the trajectories a question is scored against.

mod common;

use trajwiki::core::{HashingEmbedder, Namespace, PageKind, SourceMessage, WikiPage};
use trajwiki::memory::MemoryConfig;
use trajwiki::pipeline::{build_namespace, BuildOptions, ANN_THRESHOLD};
use trajwiki::store::{Store, VectorDtype};

const FLUSH: BuildOptions = BuildOptions {
    rebuild: false,
    flush: true,
    vectors: VectorDtype::F16,
    ann_threshold: ANN_THRESHOLD,
};

/// `(session, speaker, text)` turns of namespace `wiki`, a week between sessions.
fn said(turns: &[(u32, &str, &str)]) -> Vec<SourceMessage> {
    common::weekly_turns("wiki", turns)
}

/// The messages ingested into a fresh store and built (hashing model, flushed).
fn built(messages: &[SourceMessage]) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    store.ingest_messages("wiki", messages).unwrap();
    let ns = messages[0].namespace.clone();
    let config = MemoryConfig::default();
    build_namespace(&mut store, &ns, &HashingEmbedder::new(128), &config, FLUSH).unwrap();
    (dir, store)
}

fn page<'a>(pages: &'a [WikiPage], title: &str) -> &'a WikiPage {
    let found: Vec<&WikiPage> = pages.iter().filter(|p| p.title == title).collect();
    assert_eq!(
        found.len(),
        1,
        "one page titled {title:?}: {:?}",
        pages.iter().map(|p| &p.title).collect::<Vec<_>>()
    );
    found[0]
}

/// The lines of `body` that cite message `reference`.
fn citing<'a>(body: &'a str, reference: &str) -> Vec<&'a str> {
    let cite = format!("({reference})");
    body.lines().filter(|l| l.contains(&cite)).collect()
}

#[test]
fn a_claim_lands_on_the_page_of_what_it_is_about() {
    // Ann talks about Bob's dog Rex and to Bob; Bob talks about himself and Rex. Sessions are
    // weeks apart, so Rex is named in several trajectories and has a page of his own.
    let messages = said(&[
        (1, "Bob", "My dog Rex loves the beach near the harbour."),
        (
            1,
            "Ann",
            "I started a pottery class at the community centre.",
        ),
        (
            4,
            "Ann",
            "Rex looked so happy chasing the waves in your photo!",
        ),
        (
            4,
            "Bob",
            "Rex is getting old, but he still runs like a puppy.",
        ),
        (8, "Ann", "You are such a patient dog trainer, Bob."),
        (
            8,
            "Bob",
            "I trained Rex to fetch the newspaper every morning.",
        ),
        (
            12,
            "Ann",
            "I fired my first bowl in the kiln at the pottery class.",
        ),
        (12, "Bob", "Rex barked at the mailman again today."),
    ]);
    let (_dir, store) = built(&messages);
    let ns = messages[0].namespace.clone();
    let pages = store.pages(&ns).unwrap();
    let ann = page(&pages, "Ann");
    let bob = page(&pages, "Bob");
    let rex = page(&pages, "Rex");
    for p in [ann, bob, rex] {
        assert_eq!(p.kind, PageKind::Entity, "{}", p.title);
    }
    // Ann's words about Rex (D4:1) are on Rex's page, not on Ann's, though Ann said them.
    assert!(!citing(&rex.body, "D4:1").is_empty(), "{}", rex.body);
    assert!(citing(&ann.body, "D4:1").is_empty(), "{}", ann.body);
    // What Ann said to Bob ("You are such a patient dog trainer") is about Bob.
    assert!(!citing(&bob.body, "D8:1").is_empty(), "{}", bob.body);
    assert!(citing(&ann.body, "D8:1").is_empty(), "{}", ann.body);
    // Ann's own statements are on her page, in time order.
    let pottery = citing(&ann.body, "D1:2");
    let kiln = citing(&ann.body, "D12:1");
    assert_eq!((pottery.len(), kiln.len()), (1, 1), "{}", ann.body);
    let at = |line: &str| ann.body.find(line).unwrap();
    assert!(at(pottery[0]) < at(kiln[0]), "{}", ann.body);
    // Bob's page links Rex's page.
    assert!(bob.body.contains("[[Rex]]"), "{}", bob.body);
}

#[test]
fn a_changed_fact_shows_as_changed_on_the_page_and_in_a_context() {
    let messages = said(&[
        (1, "Ann", "I live in Lisbon, in a flat near the river."),
        (1, "Bob", "I live in Oslo, right by the harbour."),
        (6, "Ann", "Big news: I moved to Porto last week!"),
        (6, "Bob", "Congrats, that is a big step for you."),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("turns.jsonl");
    let lines: Vec<String> = messages
        .iter()
        .map(|m| {
            serde_json::json!({
                "namespace": "wiki", "session": m.session, "seq": m.seq, "speaker": m.speaker,
                "text": m.text, "timestamp": m.timestamp.format("%Y-%m-%dT%H:%M:%S").to_string(),
                "ref": m.external_ref,
            })
            .to_string()
        })
        .collect();
    std::fs::write(&file, lines.join("\n")).unwrap();
    let store_dir = dir.path().join("store");
    let store_path = common::s(&store_dir);
    common::ok(&["ingest", "--quiet", "--store", store_path, common::s(&file)]);
    common::ok(&[
        "build", "--quiet", "--store", store_path, "--model", "hashing", "--flush",
    ]);
    let store = Store::open_existing(&store_dir).unwrap();
    let ns = Namespace::new("wiki").unwrap();
    let pages = store.pages(&ns).unwrap();
    let ann = page(&pages, "Ann");
    // Current facts hold Porto; what changed says Lisbon until the move, Porto since.
    let current = section(&ann.body, "## Current facts");
    assert!(
        current.contains("Porto") && !current.contains("Lisbon"),
        "{}",
        ann.body
    );
    let changed = section(&ann.body, "## What changed");
    assert!(
        changed.contains("Lisbon")
            && changed.contains("Porto")
            && changed.contains("until 12 February 2023"),
        "{}",
        ann.body
    );
    // The Lisbon statement itself is still there, marked.
    let lisbon: Vec<&str> = citing(section(&ann.body, "## Events"), "D1:1");
    assert_eq!(lisbon.len(), 1, "{}", ann.body);
    assert!(lisbon[0].contains("[no longer current]"), "{}", ann.body);
    // A context that carries the old statement marks it, beside the new one.
    let out = common::ok(&[
        "query",
        "--store",
        store_path,
        "--namespace",
        "wiki",
        "--model",
        "hashing",
        "--budget",
        "300",
        "--json",
        "Where does Ann live now?",
    ]);
    let reply: serde_json::Value = serde_json::from_str(&out).unwrap();
    let context = reply["context"].as_str().unwrap();
    let porto = context
        .lines()
        .find(|l| l.contains("Porto"))
        .expect("new fact in the context");
    assert!(!porto.contains("superseded"), "{context}");
    if let Some(old) = context.lines().find(|l| l.contains("Lisbon")) {
        assert!(old.contains("superseded by D6:1"), "{context}");
    }
}

/// The text of `body` from the heading `heading` to the next heading of its level.
fn section<'a>(body: &'a str, heading: &str) -> &'a str {
    let Some(start) = body.find(&format!("{heading}\n")) else {
        return "";
    };
    let rest = &body[start + heading.len() + 1..];
    let end = rest.find("\n## ").map_or(rest.len(), |e| e + 1);
    &rest[..end]
}

#[test]
fn a_locomo_conversation_has_one_page_per_speaker_and_routes_within_a_universe() {
    let Some(locomo) = common::shared_data("locomo/locomo7.json") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let one = dir.path().join("conv-30.json");
    let data: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&locomo).unwrap()).unwrap();
    let conv = data
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["sample_id"] == "conv-30")
        .unwrap();
    std::fs::write(
        &one,
        serde_json::Value::Array(vec![conv.clone()]).to_string(),
    )
    .unwrap();
    let store_dir = dir.path().join("store");
    let store_path = common::s(&store_dir);
    common::ok(&[
        "ingest",
        "--quiet",
        "--store",
        store_path,
        common::s(&one),
        "--build",
        "--model",
        "hashing",
    ]);
    let store = Store::open_existing(&store_dir).unwrap();
    let ns = Namespace::new("conv-30").unwrap();
    let pages = store.pages(&ns).unwrap();
    let trajectories = store.trajectories(&ns).unwrap().len();
    // Each speaker has exactly one entity page, titled by their name; no title repeats.
    for speaker in [
        conv["conversation"]["speaker_a"].as_str().unwrap(),
        conv["conversation"]["speaker_b"].as_str().unwrap(),
    ] {
        let theirs: Vec<&WikiPage> = pages
            .iter()
            .filter(|p| p.kind == PageKind::Entity && p.title.split(" — ").next() == Some(speaker))
            .collect();
        assert_eq!(
            theirs.len(),
            1,
            "{speaker}: {:?}",
            theirs.iter().map(|p| &p.title).collect::<Vec<_>>()
        );
        assert_eq!(theirs[0].title, speaker);
    }
    let mut titles: Vec<&str> = pages.iter().map(|p| p.title.as_str()).collect();
    titles.sort_unstable();
    let n = titles.len();
    titles.dedup();
    assert_eq!(titles.len(), n, "titles repeat");
    // The page count follows the things known, not the trajectories.
    assert!(
        pages.len() * 2 <= trajectories,
        "{} pages for {trajectories} trajectories",
        pages.len()
    );
    // A question is scored inside the universe its routed pages reach.
    let out = common::ok(&[
        "query",
        "--store",
        store_path,
        "--namespace",
        "conv-30",
        "--model",
        "hashing",
        "--json",
        "What does Gina do at the dance studio?",
    ]);
    let reply: serde_json::Value = serde_json::from_str(&out).unwrap();
    let universe = reply["candidate_universe"].as_u64().unwrap() as usize;
    assert!(!reply["pages"].as_array().unwrap().is_empty(), "{reply}");
    assert!(
        universe > 0 && universe < trajectories,
        "universe {universe} of {trajectories}"
    );
    assert_eq!(
        reply["candidates"]["trajectories"].as_u64(),
        Some(universe as u64)
    );
}
