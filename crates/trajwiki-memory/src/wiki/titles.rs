//! Page titles as a person would write them: who the page is about and what, "Caroline —
//! adoption agency, support group", "Melanie — pottery".
//!
//! A title is written from the page's trajectories alone (their entities, items, exact terms,
//! facets and keyword surfaces), so a page rendered again after any split of the history gets
//! the same one. Every word in it is one of the conversation's as written: an entity as a
//! trajectory's label shows it (else its key in title case), an item phrase as the extractor
//! cut it from a message, a keyword by its surface, never its stem. Topics are nouns as far as
//! word lists tell: a word that is a common verb, looks like a past tense or a participle
//! (unless it names an activity), an adverb, a filler or a generic term is no topic, and a
//! title carries no count.

use std::collections::{BTreeSet, HashSet};
use std::sync::OnceLock;

use rustc_hash::{FxHashMap, FxHashSet};
use trajwiki_text::lexicon::{
    contains, FILLER, GENERIC_TERMS, ITEM_FAMILIES, NAME_CONNECTORS, SURFACE_STOPS,
};
use trajwiki_text::text::{is_stopword, norm, stem, words};

use super::{ENTITY, FACET, INDEX, INVENTORY, TOPIC};
use crate::fold::TrajState;

/// Common English verbs in their usual forms: no topic is one of these (or has the stem of
/// one), and no title ends in one.
#[rustfmt::skip]
pub(crate) const VERBS: &[&str] = &[
    "add", "agree", "must", "might", "shall", "ought", "allow", "appear", "appreciate", "ask", "become", "became", "begin", "began",
    "believe", "bring", "brought", "build", "built", "buy", "bought", "call", "can", "catch",
    "caught", "celebrate", "change", "check", "choose", "chose", "come", "came", "consider",
    "continue", "create", "decide", "did", "die", "does", "doing", "done", "drive", "drove", "eat",
    "ate", "enjoy", "encourage", "explain", "explore", "fall", "fell", "feel", "felt", "find",
    "found", "finish", "follow", "forget", "forgot", "get", "got", "give", "gave", "given", "go",
    "goes", "going", "gone", "went", "grow", "grew", "guess", "happen", "handle", "hear", "heard",
    "help", "hold", "held", "hope", "imagine", "include", "inspire", "keep", "kept", "know", "knew",
    "known", "learn", "leave", "left", "let", "like", "listen", "live", "look", "lose", "lost",
    "love", "make", "made", "manage", "matter", "mean", "means", "meant", "meet", "met", "mention",
    "miss", "motivate", "move", "need", "offer", "open", "pay", "paid", "plan", "play", "put",
    "reach", "read", "realize", "realise", "relax", "remember", "remind", "run", "ran", "said",
    "saw", "say", "says", "see", "seem", "seen", "sell", "sold", "send", "sent", "set", "share",
    "show", "sit", "sat", "sound", "speak", "spend", "spent", "stand", "start", "stay", "stop",
    "suggest", "take", "took", "taken", "talk", "teach", "taught", "tell", "thank", "think",
    "thought", "told", "tried", "try", "turn", "understand", "use", "visit", "wait", "walk", "want",
    "watch", "will", "win", "won", "wish", "wonder", "work", "worry", "would", "write", "wrote",
    "written",
];

/// Words ending in "-ing" or "-ed" that are nouns (besides the items of [`ITEM_FAMILIES`]).
#[rustfmt::skip]
const NOUNS_LIKE_VERBS: &[&str] = &[
    "bed", "birthday", "breed", "building", "ceiling", "clothing", "evening", "feeling", "funding",
    "hundred", "housing", "meeting", "morning", "painting", "seed", "shed", "sled", "speed",
    "thanksgiving", "training", "wedding",
];

/// Adjectives, adverbs and pronouns that name nothing a page could be about.
#[rustfmt::skip]
const NOT_TOPICS: &[&str] = &[
    "able", "actual", "alone", "another", "around", "away", "back", "bad", "better", "black",
    "blue", "brave", "bright", "busy", "calm", "close", "dark", "deep", "different", "early",
    "easy", "either", "else", "entire", "extra", "far", "fast", "favorite", "favourite", "fine",
    "free", "fresh", "full", "green", "high", "huge", "important", "interesting", "kinda", "large",
    "late", "least", "less", "long", "lucky", "main", "mental", "neat", "open", "other", "own",
    "perfect", "personal", "positive", "possible", "quite", "ready", "real", "recent", "red",
    "right", "rough", "safe", "short", "similar", "single", "small", "soft", "special", "strong",
    "super", "together", "tiny", "true", "warm", "white", "whole", "wild", "worth", "young",
];

/// Adjective endings ("grateful", "supportive", "nervous"), and the nouns that have them.
const ADJECTIVE_ENDINGS: &[&str] = &["ful", "ive", "ous", "ish", "less"];
#[rustfmt::skip]
const NOUNS_LIKE_ADJECTIVES: &[&str] = &[
    "archive", "detective", "dish", "executive", "fish", "initiative", "motive", "native", "olive",
    "relative", "wish",
];

/// Topics a title names at most.
const TOPICS: usize = 2;

/// Whether `word` (lower case) is an item word of [`ITEM_FAMILIES`].
fn item_word(word: &str) -> bool {
    static SET: OnceLock<HashSet<&'static str>> = OnceLock::new();
    SET.get_or_init(|| {
        ITEM_FAMILIES
            .iter()
            .flat_map(|(_, items)| items.iter().flat_map(|i| i.split(' ')))
            .collect()
    })
    .contains(word)
}

/// Whether `word` is one of [`VERBS`].
fn listed_verb(word: &str) -> bool {
    static SET: OnceLock<HashSet<&'static str>> = OnceLock::new();
    SET.get_or_init(|| VERBS.iter().copied().collect())
        .contains(word)
}

/// Whether `word` is a filler, a generic term, a surface stop or one of [`NOT_TOPICS`].
fn listed_no_topic(word: &str) -> bool {
    static SET: OnceLock<HashSet<&'static str>> = OnceLock::new();
    SET.get_or_init(|| {
        [FILLER, GENERIC_TERMS, SURFACE_STOPS, NOT_TOPICS]
            .into_iter()
            .flatten()
            .copied()
            .collect()
    })
    .contains(word)
}

/// Whether `word` has the stem of a verb of [`VERBS`] ("happened", "means").
fn verb_stem(word: &str) -> bool {
    static SET: OnceLock<HashSet<String>> = OnceLock::new();
    SET.get_or_init(|| {
        VERBS
            .iter()
            .filter(|v| v.len() >= 3)
            .map(|v| stem(v))
            .collect()
    })
    .contains(&stem(word))
}

/// Whether `word` (lower case, as written) reads as a verb: a listed verb, even one that is
/// also an item ("show", "run"), or one with a listed verb's stem ("happened", "means"), or a
/// past tense or participle ("-ed", "-ing") that is not a noun ("wedding", "camping").
pub(crate) fn verb_like(word: &str) -> bool {
    if listed_verb(word) {
        return true;
    }
    if contains(NOUNS_LIKE_VERBS, word) || item_word(word) {
        return false;
    }
    let long = word.chars().count() >= 5;
    let third_person = word.strip_suffix('s').is_some_and(listed_verb);
    third_person || verb_stem(word) || (long && (word.ends_with("ed") || word.ends_with("ing")))
}

/// Whether `word` (lower case, as written) can name what a page is about: a word of letters,
/// at least three, not a stopword, filler, generic term, adjective or adverb of the lists, and
/// not verb-like.
pub(crate) fn topic_word(word: &str) -> bool {
    word.chars().count() >= 3
        && word.chars().all(|c| c.is_alphabetic() || c == '-')
        && !is_stopword(word)
        && !listed_no_topic(word)
        && !(ADJECTIVE_ENDINGS.iter().any(|e| word.ends_with(e))
            && !contains(NOUNS_LIKE_ADJECTIVES, word)
            && !item_word(word))
        && !(word.ends_with("ly") && word.chars().count() >= 5 && !item_word(word))
        && !verb_like(word)
}

/// A phrase as a topic: its words as written (lower case), leading words that are no topic
/// words dropped ("went camping" → "camping"); `None` when a word left is no topic word.
pub(crate) fn topic_phrase(phrase: &str) -> Option<String> {
    let ws: Vec<String> = words(phrase).into_iter().map(|(_, w)| norm(w)).collect();
    let first = ws.iter().position(|w| topic_word(w))?;
    let kept = &ws[first..];
    kept.iter().all(|w| topic_word(w)).then(|| kept.join(" "))
}

/// Whether phrases `a` and `b` share a word, compared by stem, a final "e" aside ("dancing"
/// and "dance": "danc", "dance").
fn overlap(a: &str, b: &str) -> bool {
    Stems::of(a).overlaps(&Stems::of(b))
}

/// A phrase's words, each with its stem, so that [`overlap`] tests against it stem nothing
/// again.
#[derive(Debug, Clone, PartialEq)]
struct Stems(Vec<(String, String)>);

impl Stems {
    fn of(phrase: &str) -> Stems {
        Stems::of_words(phrase.split(' ').map(str::to_string))
    }

    /// The words given, each with its stem.
    fn of_words(words: impl Iterator<Item = String>) -> Stems {
        Stems(
            words
                .map(|w| {
                    let stem = stem(&w);
                    (w, stem)
                })
                .collect(),
        )
    }

    /// Whether `phrase` shares no word with these ([`overlap`]).
    fn free(&self, phrase: &str) -> bool {
        !self.overlaps(&Stems::of(phrase))
    }

    /// [`overlap`] of the two phrases.
    fn overlaps(&self, other: &Stems) -> bool {
        let same = |x: &str, w: &str| {
            x == w || x.strip_suffix('e') == Some(w) || w.strip_suffix('e') == Some(x)
        };
        self.0
            .iter()
            .any(|(w, sw)| other.0.iter().any(|(x, sx)| x == w || same(sx, sw)))
    }
}

/// How strongly the page's trajectories point at a topic: a point per trajectory that has it,
/// more when it is one of their items, exact terms or facet values.
struct Tally {
    score: usize,
    /// The first trajectory (in the page's order) that has it.
    first: usize,
}

/// Which of the members' phrases [`topics`] draws on.
#[derive(Clone, Copy)]
enum Source<'a> {
    /// Items of this family.
    Family(&'a str),
    /// Values of facets of this tag.
    Facet(&'a str),
    /// Items and keywords.
    All,
}

impl Source<'_> {
    /// The source as a key ([`TopicParts`]).
    fn key(self) -> String {
        match self {
            Source::Family(family) => format!("{INVENTORY}{family}"),
            Source::Facet(tag) => format!("{FACET}{tag}"),
            Source::All => String::new(),
        }
    }
}

/// Each member's topics and their weights as [`topics`] last read them for one page, kept
/// until the page is titled again: then only the members that changed since (or are new to the
/// page) are read. A member's topics are a function of its state, the source and the words
/// taken, so a title made from them is the one made from scratch; another source or other
/// words taken drop them all.
#[derive(Debug, Clone, Default)]
pub(crate) struct TopicParts {
    /// The source and the words taken they were read with.
    key: Option<(String, Stems)>,
    /// Trajectory position → its topics and weights, for the members of the last title.
    members: FxHashMap<usize, Vec<(String, usize)>>,
}

/// What a page's title was last made from ([`page_title`]): the topics of its source, and the
/// topics that fill the title when those leave room.
#[derive(Debug, Clone, Default)]
pub(crate) struct TitleParts {
    chosen: TopicParts,
    fill: TopicParts,
}

/// The topics of `members`, best first, each a noun phrase of the conversation, from `source`;
/// none with a word of `taken` (the subject's words, the entities').
///
/// A page's members share most of their phrases, so each phrase is judged once per call, and a
/// keyword's bonus is a look-up in the words of its trajectory's terms and facet values: the
/// cost is linear in what the members hold. The members' topics are kept in `parts`, and those
/// of members not in `changed` read from there the next time.
fn topics(
    states: &[TrajState],
    members: &[usize],
    source: Source<'_>,
    taken: &Stems,
    parts: &mut TopicParts,
    changed: &BTreeSet<usize>,
) -> Vec<String> {
    let key = (source.key(), taken.clone());
    let mut kept = std::mem::take(&mut parts.members);
    if parts.key.as_ref() != Some(&key) {
        kept.clear();
        parts.key = Some(key);
    }
    // Phrase → its topic when it is one and free; keyword surface → whether it is one.
    let mut phrases: FxHashMap<&str, Option<String>> = FxHashMap::default();
    let mut surfaces: FxHashMap<&str, bool> = FxHashMap::default();
    let mut read: FxHashMap<usize, Vec<(String, usize)>> =
        FxHashMap::with_capacity_and_hasher(members.len(), Default::default());
    for &m in members {
        if read.contains_key(&m) {
            continue;
        }
        let part = match kept.remove(&m) {
            Some(part) if !changed.contains(&m) => part,
            _ => member_topics(&states[m], source, taken, &mut phrases, &mut surfaces),
        };
        read.insert(m, part);
    }
    let chosen = {
        let mut tally: FxHashMap<&str, Tally> = FxHashMap::default();
        for (at, m) in members.iter().enumerate() {
            for (topic, weight) in &read[m] {
                tally
                    .entry(topic.as_str())
                    .or_insert(Tally {
                        score: 0,
                        first: at,
                    })
                    .score += weight;
            }
        }
        let mut ranked: Vec<(&str, Tally)> = tally.into_iter().collect();
        ranked.sort_unstable_by(|(a, x), (b, y)| {
            (y.score, x.first, b.len())
                .cmp(&(x.score, y.first, a.len()))
                .then(a.cmp(b))
        });
        // No two topics share a word ("camping trip", "camping").
        let mut chosen: Vec<String> = Vec::new();
        for (p, _) in ranked {
            if chosen.len() == TOPICS {
                break;
            }
            if !chosen.iter().any(|c| overlap(c, p)) {
                chosen.push(p.to_string());
            }
        }
        chosen
    };
    parts.members = read;
    chosen
}

/// One member's topics for [`topics`], each once with its weight: a point for a facet value,
/// two for an item, for a keyword one more for each of its terms and facet values that holds
/// it (its largest weight where it is also an item). `phrases` and `surfaces` keep what was
/// judged of a phrase or a keyword's surface for the next member.
fn member_topics<'s>(
    t: &'s TrajState,
    source: Source<'_>,
    taken: &Stems,
    phrases: &mut FxHashMap<&'s str, Option<String>>,
    surfaces: &mut FxHashMap<&'s str, bool>,
) -> Vec<(String, usize)> {
    let judge = |p: &str| topic_phrase(p).filter(|p| taken.free(p));
    let mut mine: Vec<(String, usize)> = Vec::new();
    let add = |mine: &mut Vec<(String, usize)>, topic: &str, weight: usize| match mine
        .iter_mut()
        .find(|(t, _)| t == topic)
    {
        Some((_, w)) => *w += weight,
        None => mine.push((topic.to_string(), weight)),
    };
    if let Source::Facet(tag) = source {
        for f in t.features.facets.iter().filter(|f| f.tag == tag) {
            if let Some(topic) = phrases.entry(&f.value).or_insert_with(|| judge(&f.value)) {
                add(&mut mine, topic, 1);
            }
        }
    }
    for (item, f) in &t.items {
        let wanted = match source {
            Source::Family(family) => family == f,
            Source::Facet(_) => false,
            Source::All => true,
        };
        if !wanted {
            continue;
        }
        if let Some(topic) = phrases.entry(item).or_insert_with(|| judge(item)) {
            add(&mut mine, topic, 2);
        }
    }
    if matches!(source, Source::All) {
        // The words of the trajectory's exact terms and of its facet values.
        let mut said: Option<(FxHashSet<String>, FxHashSet<String>)> = None;
        for k in &t.features.keywords {
            let Some(surface) = t.surfaces.get(k) else {
                continue;
            };
            let topic = *surfaces
                .entry(surface.as_str())
                .or_insert_with(|| topic_word(surface) && taken.free(surface));
            if !topic {
                continue;
            }
            let (terms, facets) = said.get_or_insert_with(|| {
                (
                    words_of(t.features.terms.iter()),
                    words_of(t.features.facets.iter().map(|f| &f.value)),
                )
            });
            let bonus =
                usize::from(terms.contains(surface)) + usize::from(facets.contains(surface));
            match mine.iter_mut().find(|(t, _)| t == surface) {
                Some((_, w)) => *w = (*w).max(1 + bonus),
                None => mine.push((surface.clone(), 1 + bonus)),
            }
        }
    }
    mine
}

/// The words of `values`, normalised.
fn words_of<'a>(values: impl Iterator<Item = &'a String>) -> FxHashSet<String> {
    values
        .flat_map(|v| words(v).into_iter().map(|(_, w)| norm(w)))
        .collect()
}

/// The entities of `members`, the one they are most about first: by the claims whose subject
/// (who stated them) it is, then by the trajectories that name it, then by first mention,
/// then key.
fn entities(states: &[TrajState], members: &[usize]) -> Vec<String> {
    // Counted in a hash map (ranked below in an order that names every entity).
    let mut count: FxHashMap<&str, (usize, usize, usize)> = FxHashMap::default();
    for (at, &m) in members.iter().enumerate() {
        let t = &states[m];
        for e in &t.features.entities {
            count.entry(e.as_str()).or_insert((0, 0, at)).1 += 1;
        }
        for c in &t.claims {
            if let Some(e) = count.get_mut(c.draft.subject.as_str()) {
                e.0 += 1;
            }
        }
    }
    let mut ranked: Vec<(&str, (usize, usize, usize))> = count.into_iter().collect();
    ranked.sort_by(|(a, (c, n, f)), (b, (d, m, g))| {
        (d, m).cmp(&(c, n)).then(f.cmp(g)).then(a.cmp(b))
    });
    ranked.into_iter().map(|(e, _)| e.to_string()).collect()
}

/// Entity `key` as written: as the first member label that shows it has it, else in title case
/// (name connectors kept lower case: "Rio de Janeiro").
fn entity_surface(key: &str, states: &[TrajState], members: &[usize]) -> String {
    let want: Vec<&str> = key.split(' ').collect();
    for &m in members {
        let label = &states[m].label;
        let ws = words(label);
        if let Some(run) = ws
            .windows(want.len())
            .find(|run| run.iter().zip(&want).all(|((_, w), k)| norm(w) == *k))
        {
            let (start, _) = run[0];
            let (last, w) = run[run.len() - 1];
            return label[start..last + w.len()].to_string();
        }
    }
    want.iter()
        .enumerate()
        .map(|(i, w)| {
            if i > 0 && contains(NAME_CONNECTORS, w) {
                w.to_string()
            } else {
                let mut c = w.chars();
                c.next().map_or_else(String::new, |f| {
                    f.to_uppercase().chain(c).collect::<String>()
                })
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// "subject — topic, topic", or the part there is.
fn join(subject: &str, topics: &[String]) -> String {
    match (subject.is_empty(), topics.is_empty()) {
        (_, true) => subject.to_string(),
        (true, false) => topics.join(", "),
        (false, false) => format!("{subject} — {}", topics.join(", ")),
    }
}

/// The title of page `key` (a group key of [`super`]) whose group fixes `head` (see
/// [`super::Draft`]), from its trajectories `members` (positions in `states`): entity and facet
/// pages are about their entity; topic, inventory, rescue and index pages about the entity
/// their trajectories are most about (index pages the two most); the topics are the members'
/// best noun phrases (a topic page's keyword first when it is a noun, an inventory page's items
/// of its family, a facet page's values of its facet). A page of trajectories with no entity and no noun is titled by the first
/// member's label.
///
/// What the topics were made from is kept in `parts` ([`TopicParts`]): made again, only the
/// members in `changed` (or new to the page) are read again.
pub(crate) fn page_title(
    key: &str,
    head: &str,
    states: &[TrajState],
    members: &[usize],
    parts: &mut TitleParts,
    changed: &BTreeSet<usize>,
) -> String {
    let named = entities(states, members);
    let subject = if key.starts_with(ENTITY) || key.starts_with(FACET) {
        head.to_string()
    } else {
        let n = if key.starts_with(INDEX) { 2 } else { 1 };
        named
            .iter()
            .take(n)
            .map(|e| entity_surface(e, states, members))
            .collect::<Vec<_>>()
            .join(" & ")
    };
    // No topic repeats a word of the subject or of an entity.
    let taken = taken(&subject, &named);
    let mut chosen: Vec<String> = Vec::new();
    if key.starts_with(TOPIC) {
        chosen.extend(topic_phrase(head).filter(|p| taken.free(p)));
    }
    // An inventory page's items of its family, a facet page's values of its facet.
    let own = match key.strip_prefix(INVENTORY) {
        Some(family) => Some(Source::Family(family)),
        None => key
            .strip_prefix(FACET)
            .and_then(|r| r.split_once('\t'))
            .map(|(_, tag)| Source::Facet(tag)),
    };
    if let Some(source) = own {
        chosen = topics(states, members, source, &taken, &mut parts.chosen, changed);
    }
    // An inventory page is named by its family's items alone: two families never share one,
    // so two inventory pages never share a title.
    let fill = if key.starts_with(INVENTORY) && !chosen.is_empty() {
        Vec::new()
    } else {
        topics(
            states,
            members,
            Source::All,
            &taken,
            &mut parts.fill,
            changed,
        )
    };
    for t in fill {
        let overlaps = chosen.iter().any(|c| overlap(c, &t));
        if chosen.len() < TOPICS && !overlaps {
            chosen.push(t);
        }
    }
    // An entity page of a specific entity names one topic beside it.
    if key.starts_with(ENTITY) {
        chosen.truncate(1);
    }
    let title = join(&subject, &chosen);
    if title.is_empty() {
        first_label(states, members)
    } else {
        title
    }
}

/// The title of a section of a page about `subject`: what its trajectories are about (at most
/// two topics, none a word of the subject or of an entity), else its first trajectory's label.
pub(crate) fn section_title(subject: &str, states: &[TrajState], members: &[usize]) -> String {
    let taken = taken(subject, &entities(states, members));
    let chosen = topics(
        states,
        members,
        Source::All,
        &taken,
        &mut TopicParts::default(),
        &BTreeSet::new(),
    );
    if chosen.is_empty() {
        first_label(states, members)
    } else {
        capitalised(&chosen.join(", "))
    }
}

/// The words no topic of a title may repeat: the subject's and the entities'.
fn taken(subject: &str, named: &[String]) -> Stems {
    Stems::of_words(
        words(subject)
            .into_iter()
            .map(|(_, w)| norm(w))
            .chain(named.iter().flat_map(|e| e.split(' ').map(str::to_string))),
    )
}

/// The label of the first of `members`, for a title that found no words of its own.
fn first_label(states: &[TrajState], members: &[usize]) -> String {
    members
        .first()
        .map(|&m| states[m].label.clone())
        .unwrap_or_default()
}

/// `text` with its first letter in upper case ("pottery" → "Pottery").
pub(crate) fn capitalised(text: &str) -> String {
    let mut out = text.to_string();
    if let Some(first) = out.get_mut(0..1) {
        first.make_ascii_uppercase();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use trajwiki_core::{Facet, Namespace, TrajectoryId};

    /// A trajectory naming `entities`, with `keywords` (surface → its stem is the key), `items`
    /// (phrase, family) and `label`.
    fn state(
        entities: &[&str],
        keywords: &[&str],
        items: &[(&str, &str)],
        label: &str,
    ) -> TrajState {
        let id = TrajectoryId::derive(&Namespace::new("w").unwrap(), label);
        let mut t = TrajState::new(id, None, 0, Default::default());
        t.features.entities = entities.iter().map(|e| e.to_string()).collect();
        t.features.keywords = keywords.iter().map(|k| stem(k)).collect();
        t.items = items
            .iter()
            .map(|(i, f)| (i.to_string(), f.to_string()))
            .collect();
        t.label = label.to_string();
        t.surfaces = keywords.iter().map(|k| (stem(k), k.to_string())).collect();
        t
    }

    /// [`page_title`] made from scratch.
    fn title(key: &str, head: &str, states: &[TrajState], members: &[usize]) -> String {
        page_title(
            key,
            head,
            states,
            members,
            &mut TitleParts::default(),
            &BTreeSet::new(),
        )
    }

    #[test]
    fn verbs_fillers_and_adverbs_are_no_topics_nouns_are() {
        for w in [
            "happen",
            "happened",
            "must",
            "homeless",
            "means",
            "makes",
            "thinking",
            "went",
            "really",
            "finally",
            "awesome",
            "favorite",
            "stuff",
            "said",
            "what's",
            "grateful",
            "supportive",
            "huge",
        ] {
            assert!(!topic_word(w), "{w} is no topic");
        }
        for w in [
            "pottery", "adoption", "painting", "camping", "wedding", "agency", "sunset", "dog",
        ] {
            assert!(topic_word(w), "{w} is a topic");
        }
        assert_eq!(topic_phrase("went camping").as_deref(), Some("camping"));
        assert_eq!(topic_phrase("thinking about"), None);
        assert!(overlap("dancing", "dance class"));
        assert!(!overlap("pottery", "dance class"));
        assert_eq!(topic_phrase("charity run"), None);
        assert_eq!(topic_phrase("art show"), None);
        assert_eq!(
            topic_phrase("Pottery Class").as_deref(),
            Some("pottery class")
        );
    }

    #[test]
    fn a_topic_page_on_a_verb_is_titled_by_its_subject_and_nouns() {
        let states = vec![
            state(
                &["caroline"],
                &["happened", "adoption", "agency"],
                &[],
                "Caroline — adoption",
            ),
            state(
                &["caroline", "melanie"],
                &["happened", "adoption", "interview"],
                &[],
                "Caroline & Melanie — adoption",
            ),
        ];
        let got = title("w\thappen", "happened", &states, &[0, 1]);
        assert_eq!(got, "Caroline — adoption, agency");
        // A topic that is a noun comes first.
        let got = title("w\tinterview", "interview", &states, &[0, 1]);
        assert_eq!(got, "Caroline — interview, adoption");
    }

    #[test]
    fn inventory_and_facet_pages_name_their_items_and_entity_without_counts() {
        let states = vec![
            state(
                &["melanie"],
                &["pottery", "bowl"],
                &[("pottery", "activity"), ("went camping", "activity")],
                "Melanie — pottery",
            ),
            state(
                &["melanie"],
                &["pottery", "kids"],
                &[("pottery", "activity"), ("kids", "person")],
                "Melanie — pottery",
            ),
        ];
        assert_eq!(
            title("i\tactivity", "activity", &states, &[0, 1]),
            "Melanie — pottery, camping"
        );
        assert_eq!(
            title("f\tmelanie\tevent_type", "Melanie", &states, &[0, 1]),
            "Melanie — pottery, camping"
        );
        // An entity page names its entity and one topic; an entity not in a label is written
        // in title case.
        assert_eq!(
            title("e\trio de janeiro", "Rio de Janeiro", &states, &[0]),
            "Rio de Janeiro — camping"
        );
        assert_eq!(
            entity_surface("rio de janeiro", &states, &[0]),
            "Rio de Janeiro"
        );
        // Index pages: the two entities named most, and topics; no "(N)".
        let got = title("x\t1", "", &states, &[0, 1]);
        assert_eq!(got, "Melanie — pottery, camping");
        assert!(!got.contains('('));
    }

    #[test]
    fn exact_terms_and_facet_values_weigh_a_keyword() {
        let mut a = state(&["jon"], &["dance", "studio", "money"], &[], "Jon — studio");
        a.features.facets.insert(Facet {
            tag: "activity_location".into(),
            value: "a dance studio".into(),
        });
        a.features.terms.insert("studio".into());
        let got = title("r", "", &[a], &[0]);
        assert_eq!(got, "Jon — studio, dance");
    }

    /// A title made again from the parts kept of the last one, after members changed and
    /// others joined, is the one made from scratch — for each source a title draws on — and
    /// the kept parts are what it reads: a member changed but not marked so keeps its old
    /// topics.
    #[test]
    fn a_title_made_from_kept_parts_is_the_one_made_from_scratch() {
        let activities = ["pottery", "went camping", "hiking", "painting"];
        let mut states: Vec<TrajState> = (0..40)
            .map(|i| {
                let mut t = state(
                    &["melanie"],
                    &[activities[i % 4], ["sunset", "lake"][i % 2]],
                    &[
                        (activities[i % 4], "activity"),
                        (["kids", "dog", "cat", "horse"][i % 4], "person"),
                    ],
                    &format!("Melanie — {}", activities[i % 4]),
                );
                t.features.facets.insert(Facet {
                    tag: "event_type".into(),
                    value: activities[(i + 1) % 4].into(),
                });
                t
            })
            .collect();
        let pages = [
            ("i\tactivity", "activity"),
            ("f\tmelanie\tevent_type", "Melanie"),
            ("r", ""),
        ];
        let mut parts: Vec<TitleParts> = pages.iter().map(|_| TitleParts::default()).collect();
        let first: Vec<usize> = (0..30).collect();
        for ((key, head), parts) in pages.iter().zip(&mut parts) {
            let kept = page_title(key, head, &states, &first, parts, &BTreeSet::new());
            assert_eq!(kept, title(key, head, &states, &first), "{key}");
        }
        // Twenty-four members take up knitting, as an item, a keyword and a facet value; ten more
        // join the page.
        let take_up = |t: &mut TrajState, activity: &str| {
            t.items.insert((activity.into(), "activity".into()));
            t.features.keywords.insert(stem(activity));
            t.surfaces.insert(stem(activity), activity.into());
            t.features.facets.insert(Facet {
                tag: "event_type".into(),
                value: activity.into(),
            });
        };
        for t in &mut states[..24] {
            take_up(t, "knitting");
        }
        let all: Vec<usize> = (0..40).collect();
        let changed: BTreeSet<usize> = (0..24).collect();
        for ((key, head), parts) in pages.iter().zip(&mut parts) {
            let scratch = title(key, head, &states, &all);
            assert!(scratch.contains("knitting"), "{key}: {scratch}");
            // Not told which changed, the kept parts stand for the old states.
            let stale = page_title(
                key,
                head,
                &states,
                &all,
                &mut parts.clone(),
                &BTreeSet::new(),
            );
            assert!(!stale.contains("knitting"), "{key}: {stale}");
            assert_eq!(
                page_title(key, head, &states, &all, parts, &changed),
                scratch,
                "{key}"
            );
        }
        // Members that change while off the page are read again when they come back.
        for t in &mut states[24..36] {
            take_up(t, "sculpture");
        }
        let fewer: Vec<usize> = (0..24).chain(36..40).collect();
        for ((key, head), parts) in pages.iter().zip(&mut parts) {
            let kept = page_title(key, head, &states, &fewer, parts, &BTreeSet::new());
            assert_eq!(kept, title(key, head, &states, &fewer), "{key}");
            let scratch = title(key, head, &states, &all);
            assert!(scratch.contains("sculpture"), "{key}: {scratch}");
            let kept = page_title(key, head, &states, &all, parts, &BTreeSet::new());
            assert_eq!(kept, scratch, "{key}");
        }
    }
}
