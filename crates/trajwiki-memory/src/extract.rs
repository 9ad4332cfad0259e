//! Exchanges and the deterministic extractor (SPEC §2.1–2.2).
//!
//! An exchange is a run of messages by one speaker followed by the reply run of another, within
//! one session; every message belongs to exactly one exchange. The extractor turns an exchange
//! into a [`SnapshotDraft`]: one claim per informative source sentence (attributed to the speaker
//! who said it, the sentence kept verbatim as its quote), one per image caption, one per list
//! element; entities from the namespace [`Lexicon`]; exact terms; facets; temporal anchors.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use trajwiki_core::{ClaimStatus, Facet, MessageId, SourceMessage};
pub use trajwiki_text::entities::{entity_key, is_specific, Lexicon, LexiconStats};

use crate::claims::{self, Voice};
use crate::lexicon::{
    self, contains, item_family, CANCEL_CUES, ENROL_CUES, FACET_PATTERNS, FILLER, GENERIC_TERMS,
    LIST_CUES, NON_ENTITY, NUMBER_WORDS, PLACE_CUES, SURFACE_STOPS, TITLE_CUES, UNCERTAIN_CUES,
};
use crate::temporal::{self, fmt_day, Anchor};
use crate::text::{keywords, norm, sentences, words};
use crate::MemoryConfig;

/// Groups a namespace's messages (in session, seq order) into exchanges: indices into
/// `messages`. Every message is in exactly one exchange, in order.
pub fn exchanges(messages: &[SourceMessage]) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    let mut replied = false;
    for (i, m) in messages.iter().enumerate() {
        if let Some(&first) = current.first() {
            let prev = &messages[*current.last().expect("non-empty")];
            let opener = &messages[first].speaker;
            let new_session = m.session != prev.session;
            let back_to_opener = replied && m.speaker == *opener;
            let third_voice = replied && m.speaker != prev.speaker;
            if new_session || back_to_opener || third_voice {
                out.push(std::mem::take(&mut current));
                replied = false;
            } else if m.speaker != *opener {
                replied = true;
            }
        }
        current.push(i);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// One claim before it gets an id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClaimDraft {
    /// The statement, attributed: `Caroline: I went to a support group yesterday.`
    pub text: String,
    /// Verbatim span of the source (message text or image caption).
    pub quote: String,
    /// The message it comes from.
    pub source: MessageId,
    /// Who said it (normalised key).
    pub subject: String,
    /// Status when created (plans and hedges need confirmation).
    pub status: ClaimStatus,
    /// Facets the claim states.
    pub facets: Vec<Facet>,
    /// Stemmed keywords.
    pub keywords: BTreeSet<String>,
    /// Whether it withdraws or cancels something.
    pub cancels: bool,
    /// Exact terms it contains.
    pub terms: BTreeSet<String>,
}

/// What an extractor makes of one exchange.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SnapshotDraft {
    /// One-line summary.
    pub summary: String,
    /// Context: session, date, refs, temporal anchors.
    pub context: String,
    /// Stemmed keywords.
    pub keywords: BTreeSet<String>,
    /// Entity keys (speakers included).
    pub entities: BTreeSet<String>,
    /// Exact terms.
    pub terms: BTreeSet<String>,
    /// Item terms with their family.
    pub items: BTreeSet<(String, String)>,
    /// Counts mentioned (`3 kids`).
    pub counts: BTreeSet<String>,
    /// Facets.
    pub facets: BTreeSet<Facet>,
    /// Claims in source order.
    pub claims: Vec<ClaimDraft>,
    /// Temporal anchors, with the ref (or id) of the message they occur in.
    pub anchors: Vec<(String, Anchor)>,
}

impl SnapshotDraft {
    /// The text embedded for the snapshot: summary, claims and anchors.
    pub fn embedding_text(&self) -> String {
        let mut parts = vec![self.summary.clone()];
        parts.extend(self.claims.iter().map(|c| c.text.clone()));
        parts.extend(
            self.anchors
                .iter()
                .map(|(_, a)| format!("{} = {}", a.phrase, a.resolved)),
        );
        parts.join("\n")
    }
}

/// An extractor failure (the deterministic extractor has none; model-backed ones do).
#[derive(Debug, thiserror::Error)]
#[error("extraction failed for exchange starting at {first}: {reason}")]
pub struct ExtractError {
    /// The first message of the exchange.
    pub first: MessageId,
    /// Why.
    pub reason: String,
}

/// Turns an exchange into a snapshot draft. Implemented deterministically here and by the LLM
/// extractor later; both must keep every quote verbatim in its source.
pub trait Extractor: Send + Sync {
    /// A name recorded with what it produced.
    fn name(&self) -> &str;
    /// Extracts one exchange.
    fn extract(
        &self,
        exchange: &[&SourceMessage],
        lexicon: &Lexicon,
    ) -> Result<SnapshotDraft, ExtractError>;
}

/// A claim stating `text` from `quote`, a verbatim span of message `m` (of one of its image
/// captions when `caption`), its status, facets, keywords, cancellation and terms read from the
/// quote. `None` when `quote` is not in the message.
pub fn claim_from_quote(
    m: &SourceMessage,
    text: String,
    quote: &str,
    config: &MemoryConfig,
) -> Option<ClaimDraft> {
    let quote = quote.trim();
    if quote.is_empty() || text.trim().is_empty() {
        return None;
    }
    let caption = if m.text.contains(quote) {
        false
    } else if m
        .attachments
        .iter()
        .filter_map(|a| a.caption.as_deref())
        .any(|c| c.contains(quote))
    {
        true
    } else {
        return None;
    };
    Some(quoted_claim(
        m,
        text,
        quote,
        caption,
        &sentence_facts(quote, config),
    ))
}

fn quoted_claim(
    m: &SourceMessage,
    text: String,
    quote: &str,
    caption: bool,
    facts: &SentenceFacts,
) -> ClaimDraft {
    let lower = quote.to_lowercase();
    ClaimDraft {
        text,
        quote: quote.to_string(),
        source: m.id.clone(),
        subject: entity_key(&m.speaker),
        status: if !caption && has_cue(&lower, UNCERTAIN_CUES) {
            ClaimStatus::NeedsConfirmation
        } else {
            ClaimStatus::Active
        },
        facets: facts.facets.clone(),
        keywords: keywords(quote),
        cancels: !caption && has_cue(&lower, CANCEL_CUES),
        terms: facts.terms.clone(),
    }
}

/// The offline, rule-based extractor.
#[derive(Debug, Clone, Default)]
pub struct DeterministicExtractor {
    config: MemoryConfig,
}

impl DeterministicExtractor {
    /// An extractor with the given limits.
    pub fn new(config: MemoryConfig) -> Self {
        DeterministicExtractor { config }
    }
}

/// Lower-case words of a span with their byte offsets.
fn lower_words(s: &str) -> Vec<(usize, String, usize)> {
    words(s)
        .into_iter()
        .map(|(p, w)| (p, norm(w), w.len()))
        .collect()
}

/// Finds `cue` (lower-case words) in `toks` at word boundaries; returns the index after it.
fn find_cue(toks: &[(usize, String, usize)], cue: &str) -> Vec<usize> {
    let cue: Vec<&str> = cue.split(' ').collect();
    (0..toks.len())
        .filter(|&i| {
            i + cue.len() <= toks.len() && cue.iter().enumerate().all(|(k, c)| toks[i + k].1 == *c)
        })
        .map(|i| i + cue.len())
        .collect()
}

/// The surface starting at token `from`: up to `max` tokens, cut at surface stops and at
/// punctuation; leading articles skipped. Returns the verbatim text.
fn surface_after(
    s: &str,
    toks: &[(usize, String, usize)],
    from: usize,
    max: usize,
) -> Option<String> {
    let mut i = from;
    while i < toks.len()
        && matches!(
            toks[i].1.as_str(),
            "a" | "an" | "the" | "my" | "our" | "his" | "her" | "their" | "some"
        )
    {
        i += 1;
    }
    let start = i;
    let mut end = i;
    let is_number = |w: &str| {
        w.chars().all(|c| c.is_ascii_digit())
            || NUMBER_WORDS.iter().any(|(x, _)| *x == w && w.len() > 2)
    };
    while end < toks.len()
        && end - start < max
        && !contains(SURFACE_STOPS, &toks[end].1)
        && !(end > start && is_number(&toks[end].1))
    {
        // Punctuation between tokens ends the surface.
        if end > start {
            let gap = &s[toks[end - 1].0 + toks[end - 1].2..toks[end].0];
            if gap
                .chars()
                .any(|c| matches!(c, ',' | '.' | '!' | '?' | ';' | ':' | '(' | ')' | '"'))
            {
                break;
            }
        }
        end += 1;
    }
    (end > start).then(|| s[toks[start].0..toks[end - 1].0 + toks[end - 1].2].to_string())
}

/// Words after a number that are no thing counted: adjectives and participles that wait for
/// their noun ("three small dogs"), and words that are no noun at all ("one another", "3 gave").
const MODIFIERS: &[&str] = &[
    "small",
    "little",
    "big",
    "large",
    "huge",
    "tiny",
    "new",
    "old",
    "young",
    "younger",
    "older",
    "great",
    "good",
    "nice",
    "beautiful",
    "lovely",
    "cute",
    "sweet",
    "special",
    "simple",
    "extra",
    "whole",
    "different",
    "main",
    "quick",
    "long",
    "short",
    "white",
    "black",
    "red",
    "blue",
    "green",
    "yellow",
    "brown",
    "pink",
    "purple",
    "grey",
    "gray",
    "golden",
    "gorgeous",
    "amazing",
    "awesome",
    "wonderful",
    "fantastic",
    "adorable",
    "happy",
    "fluffy",
    "furry",
    "wild",
    "local",
    "full",
    "separate",
    "favorite",
    "favourite",
    "best",
    "close",
    "positive",
];
const NOT_COUNTED: &[&str] = &[
    "per",
    "else",
    "another",
    "enough",
    "more",
    "most",
    "less",
    "few",
    "many",
    "much",
    "other",
    "others",
    "same",
    "own",
    "right",
    "left",
    "last",
    "next",
    "first",
    "second",
    "third",
    "soon",
    "someday",
    "sometimes",
    "today",
    "tomorrow",
    "yesterday",
    "now",
    "ago",
    "later",
    "again",
    "ever",
    "maybe",
    "almost",
    "behind",
    "above",
    "around",
    "over",
    "under",
    "agree",
    "gave",
    "got",
    "made",
    "went",
    "came",
    "took",
    "had",
    "did",
    "said",
    "told",
    "saw",
    "ran",
    "won",
    "lost",
    "kept",
    "felt",
    "thought",
    "knew",
    "brought",
    "bought",
    "love",
    "like",
    "times",
];

/// The thing a number at token `at` counts: its noun, with up to two modifiers before it and
/// the noun of a compound after it ("3 dance classes"); `None` when no noun follows (a
/// percentage, a pronoun, an adjective alone, a name).
fn counted(s: &str, toks: &[(usize, String, usize)], at: usize) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    let mut modifiers = 0;
    let joined = |k: usize| {
        s[toks[k - 1].0 + toks[k - 1].2..toks[k].0]
            .chars()
            .all(char::is_whitespace)
    };
    let plain = |k: usize| {
        let w = toks[k].1.as_str();
        w.chars().all(char::is_alphabetic)
            && !crate::text::is_stopword(w)
            && !s[toks[k].0..].starts_with(char::is_uppercase)
            && !contains(NOT_COUNTED, w)
    };
    let noun = |w: &str| {
        !contains(MODIFIERS, w) && !w.ends_with("ly") && !w.ends_with("ing") && !w.ends_with("ed")
    };
    let mut k = at + 1;
    while k < toks.len() && joined(k) && plain(k) {
        let w = toks[k].1.as_str();
        if noun(w) {
            parts.push(w);
            // "3 dance classes", "4 fur babies": a plural after a singular is the head.
            if !w.ends_with('s')
                && k + 1 < toks.len()
                && joined(k + 1)
                && plain(k + 1)
                && noun(&toks[k + 1].1)
                && toks[k + 1].1.ends_with('s')
            {
                parts.push(&toks[k + 1].1);
            }
            return Some(parts.join(" "));
        }
        if modifiers == 2 {
            break;
        }
        modifiers += 1;
        parts.push(w);
        k += 1;
    }
    None
}

/// Exact terms, items, counts and facets of one sentence.
struct SentenceFacts {
    terms: BTreeSet<String>,
    items: BTreeSet<(String, String)>,
    counts: BTreeSet<String>,
    facets: Vec<Facet>,
}

fn sentence_facts(s: &str, config: &MemoryConfig) -> SentenceFacts {
    let toks = lower_words(s);
    let mut terms = BTreeSet::new();
    let mut items = BTreeSet::new();
    let mut counts = BTreeSet::new();
    let mut facets = Vec::new();
    let max = config.max_surface_tokens;
    // Quoted spans.
    for quote in ['"', '“'] {
        let close = if quote == '"' { '"' } else { '”' };
        let mut rest = s;
        while let Some(a) = rest.find(quote) {
            let after = &rest[a + quote.len_utf8()..];
            match after.find(close) {
                Some(b) => {
                    let q = after[..b].trim();
                    if !q.is_empty() && words(q).len() <= max {
                        terms.insert(q.to_lowercase());
                    }
                    rest = &after[b + close.len_utf8()..];
                }
                None => break,
            }
        }
    }
    // Item words (one or two tokens), with a modifier kept for foods and events.
    for i in 0..toks.len() {
        for len in [2usize, 1] {
            if i + len > toks.len() {
                continue;
            }
            let phrase = toks[i..i + len]
                .iter()
                .map(|t| t.1.as_str())
                .collect::<Vec<_>>()
                .join(" ");
            if let Some(family) = item_family(&phrase) {
                let mut surface = phrase.clone();
                if matches!(family, "food" | "event" | "activity") && i > 0 {
                    let prev = &toks[i - 1].1;
                    if !crate::text::is_stopword(prev)
                        && !contains(GENERIC_TERMS, prev)
                        && prev.chars().all(char::is_alphabetic)
                    {
                        surface = format!("{prev} {phrase}");
                    }
                }
                items.insert((surface.clone(), family.to_string()));
                terms.insert(phrase);
                terms.insert(surface);
            }
        }
    }
    // Counts with units: "3 kids", "two dogs", "three small dogs", "15 kilometres" (a count of
    // one is no count: "one" is an article or a pronoun far more often, "one another").
    for (at, w) in toks.iter().enumerate().take(toks.len().saturating_sub(1)) {
        let n = w.1.parse::<u32>().ok().or_else(|| {
            NUMBER_WORDS
                .iter()
                .find(|(x, _)| *x == w.1 && !matches!(*x, "a" | "an"))
                .map(|(_, n)| *n as u32)
        });
        if let Some(n) = n {
            if let Some(unit) = counted(s, &toks, at).filter(|_| n != 1) {
                let c = format!("{n} {unit}");
                counts.insert(c.clone());
                terms.insert(c);
            }
        } else if w.1.chars().all(|c| c.is_ascii_digit()) && w.1.len() == 4 {
            terms.insert(w.1.clone());
        }
    }
    // Titles, places, enrolments after their cues.
    for (cues, title_case_only) in [(TITLE_CUES, false), (PLACE_CUES, true), (ENROL_CUES, false)] {
        for cue in cues {
            for at in find_cue(&toks, cue) {
                let Some(surface) = surface_after(s, &toks, at, max) else {
                    continue;
                };
                let capital = surface.chars().next().is_some_and(char::is_uppercase);
                if title_case_only && !capital {
                    continue;
                }
                let lower = surface.to_lowercase();
                if contains(NON_ENTITY, &lower) || crate::text::is_stopword(&lower) {
                    continue;
                }
                terms.insert(lower);
            }
        }
    }
    // Facets.
    for (cue, tag) in FACET_PATTERNS {
        for at in find_cue(&toks, cue) {
            let relation = cue.starts_with("my ");
            let value = if relation {
                // "my husband" → relationship=husband; "my dog Max" → pet=max.
                let last = cue.rsplit(' ').next().unwrap_or(cue);
                match toks.get(at) {
                    Some((p, _, len)) if s[*p..].chars().next().is_some_and(char::is_uppercase) => {
                        s[*p..*p + len].to_lowercase()
                    }
                    _ => last.to_string(),
                }
            } else {
                match surface_after(s, &toks, at, 4) {
                    Some(v) => v.to_lowercase(),
                    None => continue,
                }
            };
            if value.is_empty() || crate::text::is_stopword(&value) {
                continue;
            }
            let facet = Facet {
                tag: tag.to_string(),
                value,
            };
            if !facets.contains(&facet) {
                facets.push(facet);
            }
        }
    }
    // Lists: two or more commas, or a list cue followed by commas / "and".
    let commas = s.matches(',').count();
    let cue = LIST_CUES
        .iter()
        .filter_map(|c| find_cue(&toks, c).first().copied())
        .min();
    let mut list_elements = Vec::new();
    if commas >= 2 || (cue.is_some() && commas >= 1) {
        let start = cue.map_or(0, |i| toks.get(i).map_or(s.len(), |t| t.0));
        let tail = &s[start.min(s.len())..];
        for part in tail
            .split([',', ';'])
            .flat_map(|p| p.split(" and "))
            .flat_map(|p| p.split(" or "))
        {
            let part = part.trim().trim_end_matches(['.', '!', '?']).trim();
            let n = words(part).len();
            if (1..=max).contains(&n)
                && !crate::text::is_stopword(&part.to_lowercase())
                && s.contains(part)
            {
                list_elements.push(part.to_string());
            }
        }
        if list_elements.len() < 2 {
            list_elements.clear();
        }
        for e in &list_elements {
            terms.insert(e.to_lowercase());
        }
    }
    SentenceFacts {
        terms,
        items,
        counts,
        facets,
    }
}

/// Adds what sentence (or caption) `s` holds to `d`: its keywords, exact terms, items, counts
/// and facets. Returns its facts, for a claim quoting it.
fn absorb(d: &mut SnapshotDraft, s: &str, config: &MemoryConfig) -> SentenceFacts {
    d.keywords.extend(keywords(s));
    let facts = sentence_facts(s, config);
    d.terms.extend(facts.terms.iter().cloned());
    d.items.extend(facts.items.iter().cloned());
    d.counts.extend(facts.counts.iter().cloned());
    d.facets.extend(facts.facets.iter().cloned());
    facts
}

/// The addressee of message `m`: the other speaker of its exchange, else the namespace's only
/// other speaker.
fn addressee<'a>(
    m: &SourceMessage,
    exchange: &[&'a SourceMessage],
    lexicon: &'a Lexicon,
) -> Option<&'a str> {
    if let Some(other) = exchange.iter().find(|o| o.speaker != m.speaker) {
        return Some(other.speaker.as_str());
    }
    let me = entity_key(&m.speaker);
    let mut others = lexicon.speakers.iter().filter(|k| **k != me);
    match (others.next(), others.next()) {
        (Some(k), None) => lexicon.entities.get(k).map(String::as_str),
        _ => None,
    }
}

/// Whether a sentence carries no summary: greetings, thanks, exclamations of fillers.
fn is_filler(s: &str) -> bool {
    let toks = lower_words(s);
    toks.len() < 3
        || toks
            .iter()
            .all(|(_, w, _)| contains(FILLER, w) || crate::text::is_stopword(w))
}

fn has_cue(lower: &str, cues: &[&str]) -> bool {
    let padded = format!(
        " {} ",
        lower.split_whitespace().collect::<Vec<_>>().join(" ")
    );
    cues.iter().any(|c| {
        padded.contains(&format!(" {c} "))
            || padded.contains(&format!(" {c},"))
            || padded.contains(&format!(" {c}."))
    })
}

impl Extractor for DeterministicExtractor {
    fn name(&self) -> &str {
        "deterministic"
    }

    fn extract(
        &self,
        exchange: &[&SourceMessage],
        lexicon: &Lexicon,
    ) -> Result<SnapshotDraft, ExtractError> {
        let mut d = SnapshotDraft::default();
        let mut summary_parts: Vec<String> = Vec::new();
        for m in exchange {
            let subject = entity_key(&m.speaker);
            d.entities.insert(subject.clone());
            let reference = m.external_ref.clone().unwrap_or_else(|| m.id.to_string());
            let said = m.timestamp.date();
            for anchor in temporal::resolve(&m.text, said) {
                d.anchors.push((reference.clone(), anchor));
            }
            let mut first_informative: Option<&str> = None;
            let voice = Voice {
                speaker: &m.speaker,
                addressee: addressee(m, exchange, lexicon),
            };
            let names = voice.names();
            let message_anchors: Vec<Anchor> = d
                .anchors
                .iter()
                .filter(|(r, _)| *r == reference)
                .map(|(_, a)| a.clone())
                .collect();
            let pieces = sentences(&m.text);
            // Candidates: the sentences that state something, written as claims of the right
            // shape (with their facts).
            let mut candidates: Vec<(usize, &str)> = Vec::new();
            let mut written: Vec<(String, SentenceFacts)> = Vec::new();
            // Requests, invitations and wishes: no claim as said; the first that reports as a
            // statement ("Jon invites Gina to …") when the message states nothing else (no
            // active claim: a hedge needs confirmation).
            let mut requests: Vec<(&str, SentenceFacts)> = Vec::new();
            for (position, s) in pieces.iter().copied().enumerate() {
                let facts = absorb(&mut d, s, &self.config);
                if !is_filler(s) {
                    first_informative.get_or_insert(s);
                }
                if claims::is_question(s) || claims::is_chatter(s, &names) {
                    continue;
                }
                if claims::is_request(s, &names) {
                    requests.push((s, facts));
                    continue;
                }
                let text = claims::third_person(s, voice, &message_anchors);
                if claims::shape_error(&text).is_none() {
                    candidates.push((position, s));
                    written.push((text, facts));
                }
            }
            d.entities.extend(lexicon.mentions(&m.text));
            for k in claims::select(&candidates, pieces.len()) {
                let (text, facts) = &written[k];
                d.claims
                    .push(quoted_claim(m, text.clone(), candidates[k].1, false, facts));
            }
            let states = d
                .claims
                .iter()
                .any(|c| c.source == m.id && c.status == ClaimStatus::Active);
            if !states {
                if let Some((text, s, facts)) = requests.iter().find_map(|(s, facts)| {
                    Some((claims::reported(s, voice, &message_anchors)?, s, facts))
                }) {
                    d.claims.push(quoted_claim(m, text, s, false, facts));
                }
            }
            for caption in m.attachments.iter().filter_map(|a| a.caption.as_deref()) {
                d.entities.extend(lexicon.mentions(caption));
                let caption = caption.trim();
                if caption.is_empty() {
                    continue;
                }
                let facts = absorb(&mut d, caption, &self.config);
                let text = claims::caption_claim(&m.speaker, caption);
                if claims::shape_error(&text).is_some() {
                    continue;
                }
                d.claims.push(quoted_claim(m, text, caption, true, &facts));
            }
            if let Some(s) = first_informative {
                let short: Vec<&str> = s.split_whitespace().take(24).collect();
                summary_parts.push(format!("{}: {}", m.speaker, short.join(" ")));
            }
        }
        let first = exchange.first().expect("an exchange has a message");
        let last = exchange.last().expect("an exchange has a message");
        if summary_parts.is_empty() {
            let speakers: BTreeSet<&str> = exchange.iter().map(|m| m.speaker.as_str()).collect();
            summary_parts.push(format!(
                "{} exchange greetings",
                speakers.into_iter().collect::<Vec<_>>().join(" and ")
            ));
        }
        d.summary = summary_parts.join(" / ");
        let refs = match (&first.external_ref, &last.external_ref) {
            (Some(a), Some(b)) if a != b => format!("{a}–{b}"),
            (Some(a), _) => a.clone(),
            _ => first.id.to_string(),
        };
        let mut context = format!(
            "session {} on {}, {refs}",
            first.session,
            fmt_day(first.timestamp.date())
        );
        for (r, a) in &d.anchors {
            context.push_str(&format!(
                "\n- {r} said on {}; \"{}\" = {}",
                fmt_day(first.timestamp.date()),
                a.phrase,
                a.resolved
            ));
        }
        d.context = context;
        // Generic words are no exact terms.
        d.terms
            .retain(|t| !contains(GENERIC_TERMS, t) && !contains(lexicon::STOPWORDS, t));
        Ok(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;
    use trajwiki_core::{Attachment, Namespace};

    fn msg(session: u32, seq: u32, speaker: &str, text: &str) -> SourceMessage {
        let ts = NaiveDate::from_ymd_opt(2023, 5, 8)
            .unwrap()
            .and_hms_opt(13, 56, 0)
            .unwrap();
        SourceMessage::new(
            Namespace::new("t").unwrap(),
            session,
            seq,
            speaker.into(),
            text.into(),
            ts,
            vec![],
            Some(format!("D{session}:{seq}")),
        )
    }

    #[test]
    fn exchanges_never_drop_messages() {
        let msgs = vec![
            msg(1, 1, "A", "Hi"),
            msg(1, 2, "A", "Are you there?"),
            msg(1, 3, "B", "Yes"),
            msg(1, 4, "B", "Sorry"),
            msg(1, 5, "A", "Ok"),
            msg(2, 1, "B", "New day"),
            msg(2, 2, "A", "Indeed"),
            msg(2, 3, "C", "Hello both"),
        ];
        let ex = exchanges(&msgs);
        assert_eq!(ex, vec![vec![0, 1, 2, 3], vec![4], vec![5, 6], vec![7]]);
        let flat: Vec<usize> = ex.into_iter().flatten().collect();
        assert_eq!(flat, (0..msgs.len()).collect::<Vec<_>>());
    }

    #[test]
    fn claims_terms_facets_anchors() {
        let mut m1 = msg(
            1,
            1,
            "Caroline",
            "Hey Mel! I went to a LGBTQ support group yesterday and it was so powerful.",
        );
        m1.attachments.push(Attachment {
            kind: "image".into(),
            caption: Some("a photo of a rainbow flag".into()),
            url: None,
        });
        let m2 = msg(1, 2, "Melanie", "Wow, that's great! I'm planning to read \"Charlotte's Web\" with my kids. We play piano, guitar, and drums.");
        let lex = Lexicon::build(
            &[m1.clone(), m2.clone()],
            MemoryConfig::default().entity_min_count,
        );
        let d = DeterministicExtractor::default()
            .extract(&[&m1, &m2], &lex)
            .unwrap();
        let texts: Vec<&str> = d.claims.iter().map(|c| c.text.as_str()).collect();
        assert!(
            texts.contains(
                &"Caroline went to a LGBTQ support group on 7 May 2023 and it was so powerful."
            ),
            "{texts:?}"
        );
        assert!(
            texts.contains(&"Caroline shared a photo of a rainbow flag."),
            "{texts:?}"
        );
        assert!(
            !texts.iter().any(|t| t.contains("Wow, that's great")),
            "fillers carry no claim: {texts:?}"
        );
        for c in &d.claims {
            let src = if c.source == m1.id { &m1 } else { &m2 };
            let in_caption = src
                .attachments
                .iter()
                .any(|a| a.caption.as_deref().is_some_and(|x| x.contains(&c.quote)));
            assert!(
                src.text.contains(&c.quote) || in_caption,
                "quote {:?} is verbatim",
                c.quote
            );
        }
        let plan = d
            .claims
            .iter()
            .find(|c| c.text.contains("Charlotte"))
            .unwrap();
        // A plan stated as made is active (a hedge would need confirmation).
        assert_eq!(plan.status, ClaimStatus::Active);
        assert!(d.terms.contains("charlotte's web"), "{:?}", d.terms);
        assert!(d.items.contains(&("piano".into(), "instrument".into())));
        assert!(
            d.items
                .contains(&("lgbtq support group".into(), "event".into())),
            "{:?}",
            d.items
        );
        assert!(d.terms.contains("support group"), "{:?}", d.terms);
        assert!(
            !texts.iter().any(|t| t.contains("mentioned")),
            "list elements are terms, not claims: {texts:?}"
        );
        assert!(d.terms.contains("guitar"), "{:?}", d.terms);
        assert!(
            d.facets.contains(&Facet {
                tag: "relationship".into(),
                value: "kids".into()
            }),
            "{:?}",
            d.facets
        );
        assert_eq!(d.anchors.len(), 1);
        assert_eq!(d.anchors[0].1.resolved, "7 May 2023");
        assert!(
            d.context
                .contains("- D1:1 said on 8 May 2023; \"yesterday\" = 7 May 2023"),
            "{}",
            d.context
        );
    }

    #[test]
    fn facets_and_places() {
        let m = msg(
            1,
            1,
            "Ann",
            "I moved from Sweden four years ago and now I work as a nurse in Boston.",
        );
        let lex = Lexicon::build(
            std::slice::from_ref(&m),
            MemoryConfig::default().entity_min_count,
        );
        let d = DeterministicExtractor::default()
            .extract(&[&m], &lex)
            .unwrap();
        assert!(
            d.facets.contains(&Facet {
                tag: "home_country".into(),
                value: "sweden".into()
            }),
            "{:?}",
            d.facets
        );
        assert!(
            d.facets.contains(&Facet {
                tag: "occupation".into(),
                value: "nurse".into()
            }),
            "{:?}",
            d.facets
        );
        assert!(
            d.terms.contains("boston") && d.terms.contains("sweden"),
            "{:?}",
            d.terms
        );
        assert!(d.counts.contains("4 years"), "{:?}", d.counts);
    }

    #[test]
    fn counts_count_things() {
        let facts = |s: &str| sentence_facts(s, &MemoryConfig::default()).counts;
        let c = facts("I have three small dogs and 2 cats, and we took 3 dance classes.");
        assert!(c.contains("3 small dogs"), "{c:?}");
        assert!(c.contains("2 cats"), "{c:?}");
        assert!(c.contains("3 dance classes"), "{c:?}");
        for s in [
            "Taking care of them with one arm has been tricky.",
            "We help one another every day.",
            "I agree 100% with you.",
            "Look at these 3 small.",
            "Congrats to the 2 younger, Jon and Gina!",
            "It took 2 walking.",
        ] {
            assert!(facts(s).is_empty(), "{s}: {:?}", facts(s));
        }
    }

    #[test]
    fn requests_are_reported_and_captions_read_a_photo() {
        let mut m1 = msg(
            1,
            1,
            "Andrew",
            "Let me know when you're ready to go birdwatching and we can plan a trip together.",
        );
        m1.attachments.push(Attachment {
            kind: "image".into(),
            caption: Some("a photography of a book with a page of birds".into()),
            url: None,
        });
        let m2 = msg(
            1,
            2,
            "Audrey",
            "Can't wait for some birdwatching! I bought a bird guide on Monday.",
        );
        let lex = Lexicon::build(
            &[m1.clone(), m2.clone()],
            MemoryConfig::default().entity_min_count,
        );
        let d = DeterministicExtractor::default()
            .extract(&[&m1, &m2], &lex)
            .unwrap();
        let texts: Vec<&str> = d.claims.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(
            texts,
            [
                // A message that only asks makes the claim that it asked.
                "Andrew asks Audrey to let Andrew know when Audrey is ready to go birdwatching \
                 and we can plan a trip together.",
                "Andrew shared a photo of a book with a page of birds.",
                // A message that states besides makes the statement alone.
                "Audrey bought a bird guide on Monday."
            ]
        );
        assert!(d.summary.contains("Let me know"), "{}", d.summary);
    }
}
