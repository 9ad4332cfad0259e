//! Query shapes by lexical rules (SPEC §3.1, §7 "Query shapes"), matched on whole words.

use std::collections::BTreeSet;

use serde::Serialize;
use trajwiki_text::lexicon::ITEM_FAMILIES;
use trajwiki_text::text::{norm, words};

/// What kind of answer a query asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Shape {
    /// Asks for several items ("what books", "which places", "what kinds of").
    pub list: bool,
    /// Asks how many.
    pub count: bool,
    /// Asks for a duration ("how many years since").
    pub duration: bool,
    /// Compares or joins ("both", "same", "together").
    pub comparison: bool,
    /// Names two or more entities of the namespace.
    pub multi_entity: bool,
    /// Asks when.
    pub temporal: bool,
    /// The item family it asks about (book, instrument, place, ...).
    pub family: Option<String>,
}

impl Shape {
    /// Whether coverage-aware selection applies (list, count, comparison, multi-entity).
    pub fn wants_coverage(&self) -> bool {
        self.list || self.count || self.comparison || self.multi_entity
    }
}

const PLURAL_FAMILY_NOUNS: &[(&str, &str)] = &[
    ("books", "writing"),
    ("instruments", "instrument"),
    ("places", "place"),
    ("cities", "place"),
    ("countries", "place"),
    ("activities", "activity"),
    ("events", "event"),
    ("pets", "pet"),
    ("hobbies", "activity"),
    ("sports", "activity"),
    ("foods", "food"),
    ("recipes", "food"),
    ("games", "game"),
    ("bands", "organisation"),
    ("songs", "writing"),
    ("artists", "person"),
    ("friends", "person"),
    ("kids", "person"),
    ("children", "person"),
    ("items", "item"),
    ("things", "item"),
    ("movies", "writing"),
    ("shows", "event"),
    ("paintings", "activity"),
    ("classes", "event"),
    ("courses", "event"),
    ("trips", "event"),
    ("destinations", "place"),
];
const TIME_UNITS: &[&str] = &[
    "year", "years", "month", "months", "week", "weeks", "day", "days",
];
const DURATION_CUES: &[&str] = &["since", "between", "after", "before", "until", "long"];
const COMPARISON_CUES: &[&str] = &[
    "both",
    "compare",
    "same",
    "different",
    "together",
    "shared",
    "common",
];

/// Analyses a question. `entity_mentions` are the namespace entities it names.
pub fn analyse(question: &str, entity_mentions: &BTreeSet<String>) -> Shape {
    let toks: Vec<String> = words(question).into_iter().map(|(_, w)| norm(w)).collect();
    let has = |w: &str| toks.iter().any(|t| t == w);
    let pair = |a: &str, b: &str| toks.windows(2).any(|p| p[0] == a && p[1] == b);
    let wh = has("what") || has("which");
    let mut family = None;
    let mut list = false;
    for (noun, fam) in PLURAL_FAMILY_NOUNS {
        if has(noun) {
            family.get_or_insert_with(|| fam.to_string());
            list |= wh || has("all") || pair("name", "some");
        }
    }
    if family.is_none() {
        for (fam, items) in ITEM_FAMILIES {
            if items.iter().any(|i| !i.contains(' ') && has(i)) {
                family = Some(fam.to_string());
                break;
            }
        }
    }
    list |= pair("what", "kinds")
        || pair("what", "types")
        || pair("what", "kind") && has("of") && toks.iter().any(|t| t.ends_with('s'));
    list |= has("both") || has("all");
    let count = pair("how", "many") || pair("number", "of") || pair("how", "often");
    let duration = pair("how", "long")
        || (pair("how", "many")
            && toks.iter().any(|t| TIME_UNITS.contains(&t.as_str()))
            && toks.iter().any(|t| DURATION_CUES.contains(&t.as_str())));
    let comparison = toks.iter().any(|t| COMPARISON_CUES.contains(&t.as_str()));
    let temporal = has("when")
        || pair("what", "year")
        || pair("which", "year")
        || has("date")
        || pair("what", "month")
        || pair("what", "day")
        || pair("how", "long");
    Shape {
        list,
        count,
        duration,
        comparison,
        multi_entity: entity_mentions.len() >= 2,
        temporal,
        family,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        let none = BTreeSet::new();
        let s = analyse("What books has Melanie read?", &none);
        assert!(s.list && s.family.as_deref() == Some("writing"));
        let s = analyse("How many times has Caroline gone to the beach?", &none);
        assert!(s.count && !s.list);
        let s = analyse("When did Melanie paint a sunrise?", &none);
        assert!(s.temporal && !s.wants_coverage());
        let s = analyse(
            "How many years passed between the trip and the wedding?",
            &none,
        );
        assert!(s.duration);
        let two: BTreeSet<String> = ["caroline".to_string(), "melanie".to_string()].into();
        assert!(analyse("What do Caroline and Melanie both like?", &two).comparison);
        assert!(analyse("What did Caroline and Melanie do?", &two).multi_entity);
        // Whole words: "own" is not in "town".
        assert!(!analyse("Which town did she visit?", &none).list);
    }
}
