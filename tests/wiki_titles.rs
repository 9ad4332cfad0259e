//! The wiki as a person reads it and what it costs: page titles built from a real LoCoMo
//! conversation are made of the conversation's words (its messages, speakers and captions; no
//! stems), name no bare verb and carry no count; and building and loading a memory embeds the messages only (page vectors are derived
//! from their trajectories').

mod common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};

use trajwiki::core::{EmbedError, EmbedKind, Embedder, Embeddings, HashingEmbedder, PageKind};
use trajwiki::engine::load::load_index;
use trajwiki::memory::MemoryConfig;
use trajwiki::pipeline::{build_namespace, BuildOptions, ANN_THRESHOLD};
use trajwiki::store::{Store, VectorDtype};
use trajwiki::text::text::{norm, words};

const FLUSH: BuildOptions = BuildOptions {
    rebuild: false,
    flush: true,
    vectors: VectorDtype::F16,
    ann_threshold: ANN_THRESHOLD,
};

/// Verbs a title must not be or end in, written here apart from the wiki's own lists: the
/// forms of common verbs that old titles showed ("Topic: happen", "Topic: means").
const VERBS: &[&str] = &[
    "be",
    "is",
    "are",
    "was",
    "were",
    "been",
    "have",
    "has",
    "had",
    "do",
    "does",
    "did",
    "done",
    "go",
    "goes",
    "went",
    "gone",
    "get",
    "gets",
    "got",
    "make",
    "makes",
    "made",
    "take",
    "takes",
    "took",
    "see",
    "sees",
    "saw",
    "seen",
    "come",
    "comes",
    "came",
    "know",
    "knows",
    "knew",
    "think",
    "thinks",
    "thought",
    "say",
    "says",
    "said",
    "tell",
    "told",
    "feel",
    "feels",
    "felt",
    "want",
    "wants",
    "wanted",
    "mean",
    "means",
    "meant",
    "happen",
    "happens",
    "happened",
    "need",
    "needs",
    "needed",
    "keep",
    "keeps",
    "kept",
    "give",
    "gives",
    "gave",
    "find",
    "finds",
    "found",
    "try",
    "tries",
    "tried",
    "seem",
    "seems",
    "seemed",
    "look",
    "looks",
    "looked",
    "love",
    "loved",
    "like",
    "liked",
    "hope",
    "hoped",
    "help",
    "helped",
    "start",
    "started",
    "show",
    "showed",
    "remember",
    "remembered",
    "believe",
    "believed",
    "sounds",
    "sounded",
    "enjoy",
    "enjoyed",
    "inspire",
    "inspired",
    "inspires",
    "decide",
    "decided",
];

/// The words of `text`, normalised as the title check compares them.
fn word_set(text: &str) -> impl Iterator<Item = String> + '_ {
    words(text).into_iter().map(|(_, w)| norm(w))
}

#[test]
fn locomo_page_titles_are_words_of_the_conversation_without_verbs_or_counts() {
    let Some(path) = common::shared_data("locomo/locomo7.json") else {
        return;
    };
    let samples = trajwiki::ingest::locomo::read_locomo(&path).unwrap();
    let sample = &samples[0];
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    store.ingest_messages("locomo", &sample.messages).unwrap();
    let ns = sample.namespace.clone();
    let e = HashingEmbedder::new(256);
    build_namespace(&mut store, &ns, &e, &MemoryConfig::default(), FLUSH).unwrap();

    let said: BTreeSet<String> = sample
        .messages
        .iter()
        .flat_map(|m| {
            [m.text.as_str(), m.speaker.as_str()]
                .into_iter()
                .chain(m.attachments.iter().filter_map(|a| a.caption.as_deref()))
        })
        .flat_map(word_set)
        // A name said only in the possessive ("McGee's") is a word too.
        .flat_map(|w| {
            let bare = w.strip_suffix("'s").map(str::to_string);
            std::iter::once(w).chain(bare)
        })
        .collect();
    let pages = store.pages(&ns).unwrap();
    assert!(pages.len() > 10, "{} pages", pages.len());
    let mut problems = Vec::new();
    // (An index page is titled by the trajectories it lists, "Index of trajectories 1–32".)
    for p in pages.iter().filter(|p| p.kind != PageKind::Index) {
        let title = &p.title;
        let ws: Vec<String> = word_set(title).collect();
        if ws.is_empty() {
            problems.push(format!("{title:?} ({}) has no word", p.kind.as_str()));
        }
        for w in &ws {
            if !said.contains(w) {
                problems.push(format!(
                    "{title:?}: {w:?} is not a word of the conversation"
                ));
            }
        }
        if ws.last().is_some_and(|w| VERBS.contains(&w.as_str())) {
            problems.push(format!("{title:?} ends in a verb"));
        }
        let counted = title.split('(').skip(1).any(|rest| {
            rest.split(')')
                .next()
                .is_some_and(|n| n.parse::<u32>().is_ok())
        });
        if counted {
            problems.push(format!("{title:?} carries a count"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // Titles tell pages apart: one page per thing, no title twice.
    let titles: Vec<&str> = pages.iter().map(|p| p.title.as_str()).collect();
    let distinct: BTreeSet<&str> = titles.iter().copied().collect();
    assert_eq!(distinct.len(), titles.len(), "{titles:?}");
}

/// The hashing embedder, counting the texts it embeds.
struct Counting {
    inner: HashingEmbedder,
    texts: AtomicUsize,
}

impl Embedder for Counting {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn dim(&self) -> usize {
        self.inner.dim()
    }

    fn embed(&self, texts: &[&str], kind: EmbedKind) -> Result<Embeddings, EmbedError> {
        self.texts.fetch_add(texts.len(), Ordering::Relaxed);
        self.inner.embed(texts, kind)
    }
}

#[test]
fn building_and_loading_embed_the_messages_and_no_page() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let msgs = trajwiki::ingest::jsonl::read_messages(&common::demo()).unwrap();
    store.ingest_messages("demo", &msgs).unwrap();
    let ns = trajwiki::core::Namespace::new("demo").unwrap();
    let e = Counting {
        inner: HashingEmbedder::new(256),
        texts: AtomicUsize::new(0),
    };
    build_namespace(&mut store, &ns, &e, &MemoryConfig::default(), FLUSH).unwrap();
    let distinct: BTreeSet<String> = store
        .messages(&ns)
        .unwrap()
        .iter()
        .map(|m| m.embedding_text())
        .collect();
    let routed = store
        .pages(&ns)
        .unwrap()
        .iter()
        .filter(|p| p.kind != PageKind::Index)
        .count();
    assert!(routed > 0, "the demo has routed pages");
    assert_eq!(
        e.texts.load(Ordering::Relaxed),
        distinct.len(),
        "the build embeds each distinct message text once, and no page's routing text"
    );
    let loaded = load_index(&store, &ns, &e, &mut Default::default(), None).unwrap();
    assert_eq!(loaded.embedded, 0, "the load embeds nothing");
    assert_eq!(e.texts.load(Ordering::Relaxed), distinct.len());
}
