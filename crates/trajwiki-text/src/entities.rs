//! Entities: the Title-Case runs of a text (a name stays whole across lower-case connectors:
//! "Rio de Janeiro"), their normalised keys, and the lexicon of a namespace — speakers plus runs
//! seen often enough — built from statistics that grow one message at a time.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use trajwiki_core::SourceMessage;

use crate::lexicon::{contains, GENERIC_TERMS, NAME_CONNECTORS, NON_ENTITY};
use crate::text::{norm, sentences, stem, words};

/// The entity lexicon of a namespace: speaker names plus Title-Case runs that occur at least
/// `entity_min_count` times and at least once inside a sentence (not only as its first word).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lexicon {
    /// Normalised key → surface form.
    pub entities: BTreeMap<String, String>,
    /// Normalised keys of the speakers (broad entities).
    pub speakers: BTreeSet<String>,
}

/// Title-Case runs of a sentence: (normalised key, surface, starts the sentence).
fn title_runs(sentence: &str) -> Vec<(String, String, bool)> {
    let toks = words(sentence);
    let mut out = Vec::new();
    let mut run: Vec<(usize, &str)> = Vec::new();
    let flush = |run: &mut Vec<(usize, &str)>, out: &mut Vec<(String, String, bool)>| {
        if run.is_empty() {
            return;
        }
        let starts = run[0].0 == toks.first().map_or(usize::MAX, |t| t.0);
        let surface = run.iter().map(|(_, w)| *w).collect::<Vec<_>>().join(" ");
        let single_short = run.len() == 1 && run[0].1.chars().count() < 3;
        if !single_short {
            out.push((entity_key(&surface), surface, starts));
        }
        run.clear();
    };
    // Lower-case name connectors seen after a run ("Rio de", "Bank of"), kept when a capitalised
    // word follows ("Rio de Janeiro"), dropped otherwise.
    let mut held: Vec<(usize, &str)> = Vec::new();
    for &(pos, w) in &toks {
        let connector = !run.is_empty()
            && held.len() < 2
            && (contains(NAME_CONNECTORS, w)
                || (w == "the" && held.last().is_some_and(|h| h.1 == "of")));
        if connector {
            held.push((pos, w));
            continue;
        }
        let base = w
            .strip_suffix("'s")
            .or_else(|| w.strip_suffix("’s"))
            .unwrap_or(w);
        let lower = norm(base);
        let capital = base.chars().next().is_some_and(char::is_uppercase);
        let ok = capital
            && !contains(NON_ENTITY, &lower)
            && !base.contains(['\'', '’'])
            && !base.chars().all(|c| c.is_uppercase() && base.len() <= 1);
        if ok {
            run.append(&mut held);
            run.push((pos, base));
            if base.len() != w.len() {
                // A possessive ends the run: "Mel's Dog" is two things.
                flush(&mut run, &mut out);
            }
        } else {
            held.clear();
            flush(&mut run, &mut out);
        }
    }
    flush(&mut run, &mut out);
    out
}

/// The normalised key of an entity surface.
pub fn entity_key(surface: &str) -> String {
    words(surface)
        .into_iter()
        .map(|(_, w)| norm(w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Title-Case run statistics of one entity key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct RunCount {
    /// Occurrences.
    n: usize,
    /// Seen at least once inside a sentence (not only as its first word).
    inner: bool,
    /// Surface forms and how often each occurred.
    surfaces: BTreeMap<String, usize>,
}

/// The entity statistics of the messages folded so far, and the [`Lexicon`] they give. Adding
/// messages one at a time or all at once gives the same lexicon: it is the construction fold's
/// view of "the namespace so far" (SPEC §2.6).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LexiconStats {
    counts: BTreeMap<String, RunCount>,
    lexicon: Lexicon,
}

impl LexiconStats {
    /// Counts one message (its text and image captions) and its speaker.
    pub fn add(&mut self, m: &SourceMessage, min_count: usize) {
        let mut touched = BTreeSet::new();
        let captions = m.attachments.iter().filter_map(|a| a.caption.as_deref());
        for text in std::iter::once(m.text.as_str()).chain(captions) {
            for s in sentences(text) {
                for (key, surface, starts) in title_runs(s) {
                    let e = self.counts.entry(key.clone()).or_default();
                    e.n += 1;
                    e.inner |= !starts;
                    *e.surfaces.entry(surface).or_default() += 1;
                    touched.insert(key);
                }
            }
        }
        for key in touched {
            if self.lexicon.speakers.contains(&key) {
                continue;
            }
            let c = &self.counts[&key];
            if c.n >= min_count && c.inner {
                // The most frequent surface; ties go to the smallest.
                let surface = c
                    .surfaces
                    .iter()
                    .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
                    .map(|(s, _)| s.clone())
                    .unwrap_or_default();
                self.lexicon.entities.insert(key, surface);
            }
        }
        // Speakers are entities whatever their counts; the latest spelling wins.
        let key = entity_key(&m.speaker);
        if !key.is_empty() {
            self.lexicon.entities.insert(key.clone(), m.speaker.clone());
            self.lexicon.speakers.insert(key);
        }
    }

    /// The lexicon of what was added.
    pub fn lexicon(&self) -> &Lexicon {
        &self.lexicon
    }
}

impl Lexicon {
    /// Builds the lexicon of a set of messages (the fold of [`LexiconStats::add`] over them).
    pub fn build<'a>(
        messages: impl IntoIterator<Item = &'a SourceMessage>,
        min_count: usize,
    ) -> Lexicon {
        let mut stats = LexiconStats::default();
        for m in messages {
            stats.add(m, min_count);
        }
        stats.lexicon
    }

    /// The lexicon entities mentioned in `text` (keys), including speakers named in it.
    pub fn mentions(&self, text: &str) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for s in sentences(text) {
            for (key, _, _) in title_runs(s) {
                if self.entities.contains_key(&key) {
                    out.insert(key);
                } else {
                    // A longer run may contain a known entity ("Caroline Smith" → "caroline").
                    for w in key.split(' ') {
                        if self.entities.contains_key(w) {
                            out.insert(w.to_string());
                        }
                    }
                }
            }
        }
        out
    }
}

/// Whether a term is specific: informative and not in the generic list.
pub fn is_specific(term: &str) -> bool {
    !contains(GENERIC_TERMS, term)
        && !contains(GENERIC_TERMS, &stem(term))
        && term.chars().count() >= 3
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;
    use trajwiki_core::Namespace;

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
    fn multi_word_names_stay_whole() {
        let runs = |s: &str| -> Vec<String> { title_runs(s).into_iter().map(|r| r.1).collect() };
        assert_eq!(
            runs("We flew to Rio de Janeiro in May."),
            vec!["Rio de Janeiro"]
        );
        assert_eq!(
            runs("I read Lord of the Rings again."),
            vec!["Lord of the Rings"]
        );
        // A connector not followed by a name is not part of one; "the" alone never joins.
        assert_eq!(runs("I asked Maya of course."), vec!["Maya"]);
        assert_eq!(
            runs("I told Melanie the Lisbon plan."),
            vec!["Melanie", "Lisbon"]
        );
    }

    #[test]
    fn lexicon_rules() {
        let msgs = vec![
            msg(
                1,
                1,
                "Caroline",
                "I visited Sweden with Mel. Sweden was cold!",
            ),
            msg(
                1,
                2,
                "Melanie",
                "Hey Caroline! Monday I saw Mel at the Pride Parade with Mel's kids.",
            ),
            msg(
                1,
                3,
                "Caroline",
                "Pride Parade again next year? Painting is fun. Painting daily.",
            ),
        ];
        let lex = Lexicon::build(&msgs, 2);
        let keys: Vec<&str> = lex.entities.keys().map(String::as_str).collect();
        assert!(
            keys.contains(&"sweden") && keys.contains(&"mel") && keys.contains(&"pride parade"),
            "{keys:?}"
        );
        assert!(keys.contains(&"caroline") && keys.contains(&"melanie"));
        assert!(
            !keys.contains(&"monday") && !keys.contains(&"hey"),
            "{keys:?}"
        );
        assert!(
            !keys.contains(&"painting"),
            "sentence-initial only: {keys:?}"
        );
        assert!(lex.speakers.contains("caroline"));
    }
}
