//! Slots: what a first-person statement says about its speaker, as (attribute, key) = value, so
//! that a new value REVISEs the claim that held the old one, a withdrawal DEPRECATEs it and a
//! restatement of the same value makes no new claim (SPEC §2.4).
//!
//! Attributes: where the speaker lives (`home`), where or as what they work (`work`), a pet's
//! name (`pet`, keyed by the kind of animal when said), a partner (`partner`, the relation with
//! the name: dating, engaged to, married to), how many of something they have (`count`, keyed by
//! the thing), a favourite (`favorite`, keyed by its kind), the date of an event (`date`, keyed
//! by the event), a plan (`plan`, found again by its words) and a thing owned (`owns`, keyed by
//! its head noun; owning another adds, selling withdraws). A correction ("actually, I meant
//! Porto") revises the speaker's latest slot.

use crate::extract::is_specific;
use crate::text::{norm, words};

/// What a sentence states about its speaker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    /// The attribute: `home`, `work`, `pet`, `partner`, `count`, `favorite`, `date`, `plan`,
    /// `owns`, or `latest` for a correction of whatever was said last.
    pub attribute: &'static str,
    /// What within the attribute (`dog`, `cats`, `wedding`); empty when the attribute has one
    /// value or the sentence does not say (a rename, "now I prefer tea").
    pub key: String,
    /// The value, lower-case; `None` when the sentence withdraws the slot.
    pub value: Option<String>,
    /// The words of a plan (to find it again when it is cancelled).
    pub words: Vec<String>,
}

impl Slot {
    /// Whether a new value replaces the old one (multi-valued attributes only add).
    pub fn single_valued(&self) -> bool {
        !matches!(self.attribute, "owns" | "plan")
    }
}

const STOPS: &[&str] = &[
    "just",
    "it's",
    "go",
    "and",
    "but",
    "with",
    "now",
    "since",
    "because",
    "for",
    "last",
    "next",
    "this",
    "on",
    "at",
    "so",
    "which",
    "who",
    "where",
    "when",
    "after",
    "before",
    "until",
    "as",
    "to",
    "from",
    "not",
    "instead",
    "anymore",
    "again",
    "too",
    "yet",
    "though",
    "a",
    "an",
    "the",
    "is",
    "was",
    "in",
    "of",
    "by",
    "or",
    "if",
    "it",
    "that",
    "recently",
    "lately",
    "today",
    "yesterday",
    "tomorrow",
    "few",
    "couple",
];

/// Words that negate what follows them.
const NEGATIONS: [&str; 5] = ["not", "don't", "didn't", "never", "no"];

const DETERMINERS: &[&str] = &["a", "an", "the", "my", "our", "his", "her", "their", "new"];

const PETS: &[&str] = &[
    "dog", "cat", "puppy", "kitten", "pup", "parrot", "bird", "hamster", "rabbit", "bunny",
    "turtle", "fish", "horse", "guinea", "snake", "lizard", "ferret", "goldfish", "tortoise",
    "chicken", "goat", "pig",
];

/// Things of the speaker's life that have one value at a time ("my birthday is in May").
const ABOUT: &[&str] = &[
    "birthday",
    "sister",
    "brother",
    "first car",
    "middle name",
    "nickname",
    "major",
    "hometown",
    "mom",
    "dad",
    "mother",
    "father",
    "son",
    "daughter",
    "first job",
];

const PARTNERS: &[(&str, &str)] = &[
    ("boyfriend", "dating"),
    ("girlfriend", "dating"),
    ("partner", "dating"),
    ("fiance", "engaged to"),
    ("fiancé", "engaged to"),
    ("fiancee", "engaged to"),
    ("fiancée", "engaged to"),
    ("husband", "married to"),
    ("wife", "married to"),
];

const ORDINALS: &[(&str, u32)] = &[
    ("second", 2),
    ("third", 3),
    ("fourth", 4),
    ("fifth", 5),
    ("sixth", 6),
];

const NUMBERS: &[(&str, u32)] = &[
    ("one", 1),
    ("two", 2),
    ("three", 3),
    ("four", 4),
    ("five", 5),
    ("six", 6),
    ("seven", 7),
    ("eight", 8),
    ("nine", 9),
    ("ten", 10),
    ("eleven", 11),
    ("twelve", 12),
];

const MONTHS: &[&str] = &[
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "jan",
    "feb",
    "mar",
    "apr",
    "jun",
    "jul",
    "aug",
    "sep",
    "sept",
    "oct",
    "nov",
    "dec",
];

const EVENTS: &[&str] = &[
    "wedding",
    "party",
    "trip",
    "surgery",
    "recital",
    "concert",
    "appointment",
    "interview",
    "exam",
    "move",
    "vacation",
    "holiday",
    "ceremony",
    "launch",
    "opening",
    "show",
    "meeting",
    "reunion",
    "graduation",
    "birthday",
    "game",
    "match",
    "race",
    "marathon",
    "tournament",
    "exhibition",
    "performance",
    "conference",
    "flight",
    "visit",
    "celebration",
    "shower",
    "housewarming",
    "premiere",
    "festival",
];

/// Words that say what kind of plan it is, not which: a cancellation naming only these (and
/// none of the plan's own words) cancels no plan.
const PLAN_KINDS: &[&str] = &[
    "trip", "class", "course", "holiday", "vacation", "visit", "week", "weekend", "month", "year",
    "time", "next", "spring", "summer", "autumn", "fall", "winter", "plan", "plans", "party",
    "event", "tour", "journey", "travel", "lesson", "lessons",
];

/// Whether `word` only says what kind of plan it is ([`PLAN_KINDS`], or an event word).
pub fn is_plan_kind(word: &str) -> bool {
    PLAN_KINDS.contains(&word) || EVENTS.contains(&word)
}

/// How well `words` name the plan whose words are `plan` (space-separated): a plan's own
/// specific word counts 2, a word saying only what kind of plan it is 1.
pub fn plan_score(plan: &str, words: &[String]) -> usize {
    words
        .iter()
        .filter(|w| is_specific(w) && !is_verb_form(w) && plan.split(' ').any(|x| x == w.as_str()))
        .map(|w| if is_plan_kind(w) { 1 } else { 2 })
        .sum()
}

/// Past forms that do not end in -ed.
const PAST: &[&str] = &[
    "went", "got", "took", "made", "saw", "did", "had", "ran", "came", "gave", "met", "won",
    "bought", "flew", "drove", "swam", "ate", "began", "finished", "was", "were",
];

/// Whether `w` is a past form (a word a plan shares with any story).
fn is_verb_form(w: &str) -> bool {
    PAST.contains(&w) || (w.len() > 4 && w.ends_with("ed"))
}

/// Whether `s` tells of something done: a past form.
pub fn tells_of_the_past(s: &str) -> bool {
    tokens(s)
        .iter()
        .any(|(l, _)| PAST.contains(&l.as_str()) || (l.len() > 4 && l.ends_with("ed")))
}

/// The sentence's words: (lower-case, as written).
fn tokens(s: &str) -> Vec<(String, &str)> {
    words(s)
        .into_iter()
        .map(|(_, w)| (crate::claims::lower_word(w), w))
        .collect()
}

/// Where the words `cue` (space-separated) start in `t`.
fn find(t: &[(String, &str)], cue: &str) -> Option<usize> {
    let cue: Vec<&str> = cue.split(' ').collect();
    (0..t.len()).find(|&i| {
        i + cue.len() <= t.len() && cue.iter().enumerate().all(|(k, c)| t[i + k].0 == *c)
    })
}

/// The first of `cues` found: the index after it.
fn after(t: &[(String, &str)], cues: &[&str]) -> Option<usize> {
    cues.iter()
        .filter_map(|c| find(t, c).map(|i| (i, std::cmp::Reverse(i + c.split(' ').count()))))
        .min()
        .map(|(_, end)| end.0)
}

/// The value starting at `from`: determiners skipped, up to `max` words, cut at a stop word.
fn value(t: &[(String, &str)], from: usize, max: usize) -> Option<String> {
    let mut i = from;
    while i < t.len() && DETERMINERS.contains(&t[i].0.as_str()) {
        i += 1;
    }
    let start = i;
    while i < t.len() && i - start < max && !STOPS.contains(&t[i].0.as_str()) {
        i += 1;
    }
    (i > start).then(|| {
        t[start..i]
            .iter()
            .map(|(l, _)| l.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    })
}

/// A capitalised name at `i` (and the capitalised words after it).
fn name_at(t: &[(String, &str)], i: usize) -> Option<String> {
    let capital = |k: usize| {
        t.get(k)
            .is_some_and(|(_, w)| w.chars().next().is_some_and(char::is_uppercase))
    };
    if !capital(i) {
        return None;
    }
    let mut end = i + 1;
    while capital(end) && end - i < 3 {
        end += 1;
    }
    Some(
        t[i..end]
            .iter()
            .map(|(l, _)| l.as_str())
            .collect::<Vec<_>>()
            .join(" "),
    )
}

/// The first name in the sentence: a capitalised word that is not its opening word (unless a
/// name opens it: "Sam and I", "Sam proposed").
fn a_name(t: &[(String, &str)]) -> Option<String> {
    let not_names = [
        "i", "i'm", "i've", "we", "we're", "guess", "the", "our", "my", "sadly", "big", "news",
    ];
    (0..t.len())
        .filter(|&k| !not_names.contains(&t[k].0.as_str()))
        .filter(|&k| k > 0 || matches!(t.get(1).map(|x| x.0.as_str()), Some("and" | "proposed")))
        .find_map(|k| name_at(t, k))
}

/// The words of the clause of `s` before `phrase` (after its last comma, colon or dash), less
/// fillers: "Like I said, coffee is my favorite drink" → "coffee".
fn clause_before(s: &str, phrase: &str) -> Option<String> {
    let lower = s.to_lowercase();
    let at = lower.find(phrase)?;
    let fillers = [
        "still", "like", "i", "said", "for", "me", "always", "just", "these", "days", "honestly",
        "nothing", "beats", "and", "so", "my", "our", "it's", "is", "by", "far", "the", "a",
    ];
    lower[..at]
        .rsplit([',', ':', ';', '-', '.', '!'])
        .map(|clause| {
            words(clause)
                .into_iter()
                .map(|(_, w)| norm(w))
                .filter(|w| !fillers.contains(&w.as_str()))
                .collect::<Vec<String>>()
        })
        .find(|kept| !kept.is_empty())
        .filter(|kept| kept.len() <= 3)
        .map(|kept| kept.join(" "))
}

fn number(w: &str) -> Option<u32> {
    w.parse()
        .ok()
        .or_else(|| NUMBERS.iter().find(|(n, _)| *n == w).map(|(_, v)| *v))
}

/// Singular of a plural noun, for count keys.
fn singular(w: &str) -> String {
    if let Some(s) = w.strip_suffix("ies") {
        format!("{s}y")
    } else if w.ends_with("ss") {
        w.to_string()
    } else if let Some(s) = w.strip_suffix('s') {
        s.to_string()
    } else {
        w.to_string()
    }
}

/// A date's words starting at `from` (a month and day, in either order, and a year).
fn date_at(t: &[(String, &str)], from: usize) -> Option<String> {
    let mut i = from;
    while i < t.len() && matches!(t[i].0.as_str(), "the" | "on" | "to" | "for" | "until") {
        i += 1;
    }
    let start = i;
    while i < t.len()
        && i - start < 4
        && (MONTHS.contains(&t[i].0.as_str())
            || t[i]
                .0
                .trim_end_matches(['s', 't', 'n', 'd', 'r', 'h'])
                .parse::<u32>()
                .is_ok()
            || t[i].0 == "of")
    {
        i += 1;
    }
    let has_month = t[start..i]
        .iter()
        .any(|(l, _)| MONTHS.contains(&l.as_str()));
    (has_month && i > start).then(|| {
        t[start..i]
            .iter()
            .filter(|(l, _)| l != "of")
            .map(|(l, _)| l.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    })
}

/// The event a date sentence is about: the first event word.
fn event(t: &[(String, &str)]) -> Option<String> {
    t.iter()
        .map(|(l, _)| l)
        .find(|l| EVENTS.contains(&l.as_str()))
        .cloned()
}

fn slot(attribute: &'static str, key: &str, value: Option<String>) -> Option<Slot> {
    Some(Slot {
        attribute,
        key: key.to_string(),
        value,
        words: Vec::new(),
    })
}

/// Whether `s` speaks of a plan as still on ("still on for", "saving for", "getting ready
/// for"): a restatement when it names a plan held.
pub fn keeps_a_plan(s: &str) -> bool {
    let t = tokens(s);
    [
        "still on for",
        "still planning",
        "still going",
        "keep reading",
        "saving for",
        "getting ready for",
        "preparing for",
        "looking forward to",
        "can't wait for",
    ]
    .iter()
    .any(|c| find(&t, c).is_some())
}

/// The content words of `s` (lower-case, no stopwords), for finding a plan again.
pub fn plan_words(s: &str) -> Vec<String> {
    tokens(s)
        .into_iter()
        .map(|(l, _)| l)
        .filter(|l| !crate::text::is_stopword(l) && l.len() > 2)
        .collect()
}

/// What first-person sentence `s` states about its speaker, if it states one slot.
pub fn slot_of(s: &str) -> Option<Slot> {
    if s.trim_end().ends_with('?') {
        return None;
    }
    let t = tokens(s);
    let first_person = t.iter().any(|(l, _)| {
        matches!(
            l.as_str(),
            "i" | "i'm"
                | "i've"
                | "i'll"
                | "my"
                | "we"
                | "we're"
                | "we've"
                | "our"
                | "me"
                | "still"
                | "us"
        )
    });
    let t = &t[..];
    if let Some(slot) = dates(t).or_else(|| pet_by_name(t)) {
        return Some(slot);
    }
    if !first_person {
        return None;
    }
    withdrawal(t)
        .or_else(|| correction(t))
        .or_else(|| partner(t))
        .or_else(|| pet(t))
        .or_else(|| count(t))
        .or_else(|| favorite(t, s))
        .or_else(|| about(t))
        .or_else(|| work(t))
        .or_else(|| home(t))
        .or_else(|| plan(t))
        .or_else(|| owns(t))
}

/// An event's date, whoever states it: "The wedding moved to 9 January".
fn dates(t: &[(String, &str)]) -> Option<Slot> {
    if let Some(ev) = event(t) {
        let verb = [
            "postponed",
            "moved",
            "pushed",
            "rescheduled",
            "delayed",
            "changed",
            "is on",
            "will be on",
            "set for",
            "scheduled for",
            "planned for",
            "happening on",
            "is now on",
            "be on",
        ]
        .iter()
        .filter_map(|c| find(t, c))
        .min();
        let from = verb.or_else(|| t.iter().position(|(l, _)| *l == ev));
        if let Some(v) = from {
            if let Some(d) = (v + 1..t.len()).find_map(|k| date_at(t, k)) {
                return slot("date", &ev, Some(d));
            }
        }
    }
    None
}

/// A pet named with its kind, whoever speaks of it: "Ziggy the kitten says hi".
fn pet_by_name(t: &[(String, &str)]) -> Option<Slot> {
    for pet in PETS {
        if let Some(at) = find(t, &format!("the {pet}")) {
            if at == 1 {
                if let Some(n) = name_at(t, 0) {
                    return slot("pet", pet, Some(n));
                }
            }
        }
    }
    None
}

/// A withdrawal: a break-up, a sale, a lost job, a cancelled plan (read before any value).
fn withdrawal(t: &[(String, &str)]) -> Option<Slot> {
    let has = |cue: &str| find(t, cue).is_some();
    let cancelled = [
        "cancelled",
        "canceled",
        "called off",
        "call off",
        "decided not to",
        "not going to",
        "no longer",
        "changed my mind",
        "not happening",
        "scrapped",
        "scrap",
        "cancel",
        "called it off",
        "not doing",
        "is off",
        "dropped the idea",
    ];
    let parted = [
        "broke up",
        "split up",
        "divorced",
        "separated from",
        "we separated",
        "single again",
        "it's over with",
        "ended things",
    ];
    if after(t, &parted).is_some() {
        return slot("partner", "", None);
    }
    if let Some(at) = after(
        t,
        &[
            "sold",
            "got rid of",
            "gave away",
            "traded in",
            "no more",
            "let the",
        ],
    ) {
        let named = after(t, &["no more", "let the", "sold the", "sold my"]).unwrap_or(at);
        let v =
            value(t, named, 2).filter(|v| !matches!(v.as_str(), "it" | "them" | "it online"))?;
        let head = v.rsplit(' ').next().unwrap_or(&v).to_string();
        return slot("owns", &head, None);
    }
    if let Some(gone) = find(t, "is gone") {
        if gone >= 1 && find(t, "the").is_some_and(|d| d < gone) {
            return slot("owns", &t[gone - 1].0, None);
        }
    }
    if after(
        t,
        &[
            "quit my job",
            "lost my job",
            "got fired",
            "got laid off",
            "was laid off",
            "left my job",
            "i retired",
            "i'm retired",
            "resigned",
        ],
    )
    .is_some()
    {
        return slot("work", "", None);
    }
    if cancelled.iter().any(|c| has(c)) {
        let words: Vec<String> = t
            .iter()
            .map(|(l, _)| l.clone())
            .filter(|l| !crate::text::is_stopword(l) && l.len() > 2)
            .collect();
        // A postponement is a date's new value, not a withdrawal.
        if !has("postponed") && !has("rescheduled") {
            return Some(Slot {
                attribute: "plan",
                key: String::new(),
                value: None,
                words,
            });
        }
    }
    None
}

/// A correction of the latest thing said: "I meant Porto".
fn correction(t: &[(String, &str)]) -> Option<Slot> {
    if let Some(at) = after(t, &["i meant"]) {
        if let Some(v) = value(t, at, 3) {
            return slot("latest", "", Some(v));
        }
    }
    None
}

/// A partner: dating, engaged to, married to.
fn partner(t: &[(String, &str)]) -> Option<Slot> {
    let has = |cue: &str| find(t, cue).is_some();
    if let Some(at) = after(t, &["engaged to", "got engaged to"]) {
        if let Some(n) = name_at(t, at) {
            return slot("partner", "", Some(format!("engaged to {n}")));
        }
    }
    if has("engaged") && !has("not engaged") {
        if let Some(n) = a_name(t) {
            return slot("partner", "", Some(format!("engaged to {n}")));
        }
    }
    if let Some(at) = after(
        t,
        &[
            "still with",
            "and i have been seeing",
            "and i have been going out",
            "and i are dating",
            "and i've been dating",
        ],
    ) {
        // "Sam and I have been seeing each other": the name comes first.
        let n = if has("and i") { a_name(t) } else { None };
        if let Some(n) = n.or_else(|| name_at(t, at)) {
            return slot("partner", "", Some(format!("dating {n}")));
        }
    }
    if let Some(at) = after(t, &["married to", "got married to", "i married"]) {
        if let Some(n) = name_at(t, at) {
            return slot("partner", "", Some(format!("married to {n}")));
        }
    }
    if let Some(at) = after(
        t,
        &[
            "dating",
            "seeing",
            "going out with",
            "in a relationship with",
        ],
    ) {
        if let Some(n) = name_at(t, at) {
            return slot("partner", "", Some(format!("dating {n}")));
        }
    }
    for (noun, relation) in PARTNERS {
        if let Some(at) = after(t, &[&format!("my {noun}")]) {
            if let Some(n) = name_at(t, at) {
                return slot("partner", "", Some(format!("{relation} {n}")));
            }
        }
    }
    None
}

/// A pet's name.
fn pet(t: &[(String, &str)]) -> Option<Slot> {
    if let Some(at) = after(
        t,
        &[
            "renamed him",
            "renamed her",
            "renamed it",
            "renamed them",
            "renamed",
            "new name",
            "goes by",
            "we call",
            "i call",
            "now called",
            "now named",
        ],
    ) {
        let mut i = at;
        let kind_from = t[..at]
            .iter()
            .rposition(|(l, _)| PETS.contains(&l.as_str()))
            .unwrap_or(at);
        while i < t.len()
            && (DETERMINERS.contains(&t[i].0.as_str())
                || PETS.contains(&t[i].0.as_str())
                || matches!(
                    t[i].0.as_str(),
                    "to" | "it's" | "is" | "now" | "him" | "her" | "it"
                ))
        {
            i += 1;
        }
        if let Some(n) = name_at(t, i) {
            let kind = t[kind_from.min(at)..i]
                .iter()
                .find(|(l, _)| PETS.contains(&l.as_str()));
            return slot("pet", kind.map_or("", |(l, _)| l), Some(n));
        }
    }
    for pet in PETS {
        // "Max, my dog, ..." and "Max the dog".
        for cue in [format!("my {pet}"), format!("the {pet}")] {
            if let Some(at) = find(t, &cue) {
                if at >= 1 && (at == 1 || cue.starts_with("the")) {
                    if let Some(n) = name_at(t, at - 1) {
                        return slot("pet", pet, Some(n));
                    }
                }
            }
        }
        for cue in [
            format!("my {pet}"),
            format!("our {pet}"),
            format!("my new {pet}"),
            format!("our new {pet}"),
            format!("a {pet} called"),
            format!("a {pet} named"),
        ] {
            if let Some(at) = after(t, &[&cue]) {
                let mut i = at;
                while i < t.len()
                    && matches!(
                        t[i].0.as_str(),
                        "named" | "called" | "is" | "'s" | "name" | "whose"
                    )
                {
                    i += 1;
                }
                if let Some(n) = name_at(t, i) {
                    return slot("pet", pet, Some(n));
                }
            }
        }
    }
    None
}

/// How many of something: "we have three cats now", "I adopted a third cat".
fn count(t: &[(String, &str)]) -> Option<Slot> {
    let negated = NEGATIONS;
    for (k, (l, _)) in t.iter().enumerate() {
        let prior = k.checked_sub(1).map(|p| t[p].0.as_str()).unwrap_or("");
        let owning = !matches!(prior, "a" | "an" | "the");
        let n = if let Some((_, n)) = ORDINALS.iter().find(|(o, _)| o == l) {
            (prior == "a" || prior == "our" || prior == "my").then_some(*n)
        } else if owning {
            number(l)
        } else {
            None
        };
        if let (Some(n), Some((noun, _))) = (n, t.get(k + 1)) {
            if noun.chars().all(char::is_alphabetic)
                && !STOPS.contains(&noun.as_str())
                && !negated.contains(&prior)
            {
                let key = singular(noun);
                let key = if key == "guinea" {
                    "guinea pig".to_string()
                } else {
                    key
                };
                if PETS.contains(&key.as_str())
                    || key == "guinea pig"
                    || matches!(
                        key.as_str(),
                        "kid"
                            | "child"
                            | "children"
                            | "plant"
                            | "car"
                            | "bike"
                            | "book"
                            | "job"
                            | "sibling"
                            | "grandkid"
                            | "chicken"
                    )
                {
                    return slot("count", &key, Some(n.to_string()));
                }
            }
        }
    }
    None
}

/// A favourite.
fn favorite(t: &[(String, &str)], s: &str) -> Option<Slot> {
    // Favourites: "my favorite drink is coffee", "coffee is my favorite drink", "nothing beats
    // coffee, it's my favorite drink", "I'm a big coffee fan, always my go-to drink", "I prefer
    // tea now", "I've switched to tea", "tea is my top drink".
    for (cue, is_cue) in [
        ("my favorite", "is my favorite"),
        ("my favourite", "is my favourite"),
        ("my new favorite", "is my new favorite"),
        ("my go-to", "my go-to"),
        ("my top", "is my top"),
    ] {
        let Some(at) = after(t, &[cue]) else {
            continue;
        };
        let key: Vec<String> = t[at..]
            .iter()
            .map(|(l, _)| l.clone())
            .take_while(|l| {
                !matches!(
                    l.as_str(),
                    "is" | "was" | "by" | "now" | "these" | "right" | "of" | "for"
                )
            })
            .take(3)
            .collect();
        let key = key.join(" ");
        if let Some(v) = (at..t.len())
            .find(|&k| t[k].0 == "is")
            .and_then(|k| value(t, k + 1, 3))
        {
            return slot("favorite", &key, Some(v));
        }
        let v = if let Some(k) = after(t, &["nothing beats", "big"]) {
            value(t, k, 2).map(|v| v.trim_end_matches(" fan").to_string())
        } else {
            clause_before(s, is_cue).or_else(|| {
                clause_before(
                    s,
                    &format!(
                        "{}{}",
                        if is_cue.starts_with("is ") { "" } else { "is " },
                        is_cue
                    ),
                )
            })
        };
        if let Some(v) = v {
            return slot("favorite", &key, Some(v));
        }
    }
    if let Some(at) = after(
        t,
        &[
            "i prefer",
            "i now prefer",
            "i'd rather have",
            "i'm more into",
            "i like better",
            "switched to",
        ],
    ) {
        if let Some(v) = value(t, at, 3) {
            return slot("favorite", "", Some(v));
        }
    }
    None
}

/// A fact of the speaker's own life with one value.
fn about(t: &[(String, &str)]) -> Option<Slot> {
    // A fact of the speaker's own life with one value: "my birthday is in May", "I grew up in
    // Porto", "my sister is a nurse", "my first car was a Fiat".
    if let Some(at) = after(t, &["grew up in"]) {
        if let Some(v) = value(t, at, 2) {
            return slot("about", "hometown", Some(v));
        }
    }
    for about in ABOUT {
        if let Some(at) = after(t, &[&format!("my {about} is"), &format!("my {about} was")]) {
            let mut i = at;
            while i < t.len()
                && matches!(
                    t[i].0.as_str(),
                    "in" | "on" | "a" | "an" | "the" | "actually"
                )
            {
                i += 1;
            }
            if let Some(v) = value(t, i, 2) {
                return slot("about", about, Some(v));
            }
        }
    }
    None
}

/// Where or as what the speaker works.
fn work(t: &[(String, &str)]) -> Option<Slot> {
    // Work: the employer when named ("at Riverside Hospital"), else the role.
    let employer = |from: usize| -> Option<String> {
        let at = (from..t.len()).find(|&k| matches!(t[k].0.as_str(), "at" | "for"))?;
        name_at(t, at + 1)
    };
    if let Some(k) = find(t, "hired me") {
        if let Some(n) = (0..k).find_map(|i| name_at(t, i).filter(|_| i > 0 || k <= 3)) {
            return slot("work", "", Some(n));
        }
    }
    if let Some(at) = after(
        t,
        &[
            "new job at",
            "job at",
            "i work at",
            "i work for",
            "working at",
            "working for",
            "started at",
            "hired at",
            "hired by",
            "employed at",
            "employed by",
            "work for",
        ],
    ) {
        if let Some(n) = name_at(t, at) {
            return slot("work", "", Some(n));
        }
    }
    if let Some(at) = after(
        t,
        &[
            "i work as",
            "working as",
            "job as",
            "i'm now a",
            "i'm now an",
            "i'm a",
            "i'm an",
            "i'm still a",
            "i'm still an",
            "i became a",
            "started working as",
            "being a",
            "being an",
        ],
    ) {
        if let Some(n) = employer(at) {
            return slot("work", "", Some(n));
        }
        if find(t, "i work as").is_some() || find(t, "job as").is_some() {
            if let Some(v) = value(t, at, 3) {
                return slot("work", "", Some(v));
            }
        }
    }
    None
}

/// Where the speaker lives.
fn home(t: &[(String, &str)]) -> Option<Slot> {
    if let Some(at) = after(
        t,
        &[
            "moved to",
            "relocated to",
            "i live in",
            "we live in",
            "i'm living in",
            "we're living in",
            "now live in",
            "settled in",
            "living in",
            "new place is in",
            "home for me is",
            "my home is",
            "i'm based in",
            "our new place in",
            "my new place in",
            "moving to",
            "move to",
        ],
    ) {
        if let Some(n) = name_at(t, at) {
            return slot("home", "", Some(n));
        }
    }
    None
}

/// A plan.
fn plan(t: &[(String, &str)]) -> Option<Slot> {
    let negated = NEGATIONS;
    // Plans (not a negated one: "I'll never forget").
    if let Some(at) = after(
        t,
        &[
            "planning to",
            "plan to",
            "planning a",
            "planning on",
            "going to",
            "gonna",
            "we'll",
            "i'll",
            "i will",
            "hoping to",
            "thinking about",
            "thinking of",
            "considering",
            "would like to",
            "signed up for",
            "signed up to",
            "booked",
            "i'm doing",
            "i'm planning",
        ],
    ) {
        let words: Vec<String> = t[at..]
            .iter()
            .map(|(l, _)| l.clone())
            .filter(|l| !crate::text::is_stopword(l) && l.len() > 2)
            .collect();
        let never = t[at..]
            .iter()
            .take(2)
            .any(|(l, _)| negated.contains(&l.as_str()));
        if !words.is_empty() && !never {
            return Some(Slot {
                attribute: "plan",
                key: String::new(),
                value: Some(words.join(" ")),
                words,
            });
        }
    }
    None
}

/// A thing owned.
fn owns(t: &[(String, &str)]) -> Option<Slot> {
    if let Some(at) = after(
        t,
        &[
            "i bought",
            "we bought",
            "i own",
            "we own",
            "i got a new",
            "just bought",
            "i still have",
            "i have a",
            "i have an",
        ],
    ) {
        let v = value(t, at, 3)?;
        let head = v.rsplit(' ').next().unwrap_or(&v).to_string();
        return slot("owns", &head, Some(v));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> (String, String, Option<String>) {
        let x = slot_of(s).unwrap_or_else(|| panic!("no slot in {s:?}"));
        (x.attribute.to_string(), x.key, x.value)
    }

    fn some(a: &str, k: &str, val: &str) -> (String, String, Option<String>) {
        (a.into(), k.into(), Some(val.into()))
    }

    #[test]
    fn slots_of_statements() {
        assert_eq!(
            v("I live in Lisbon near the river."),
            some("home", "", "lisbon")
        );
        assert_eq!(
            v("We finally moved to Porto last month!"),
            some("home", "", "porto")
        );
        assert_eq!(
            v("I started a new job at Google as a designer."),
            some("work", "", "google")
        );
        assert_eq!(
            v("I work as a nurse at the hospital."),
            some("work", "", "nurse")
        );
        assert_eq!(v("My dog Max loves the beach."), some("pet", "dog", "max"));
        assert_eq!(v("We renamed him Buddy."), some("pet", "", "buddy"));
        assert_eq!(v("I'm dating Sam now."), some("partner", "", "dating sam"));
        assert_eq!(
            v("I got engaged to Sam!"),
            some("partner", "", "engaged to sam")
        );
        assert_eq!(v("I have two cats."), some("count", "cat", "2"));
        assert_eq!(v("We adopted a third cat."), some("count", "cat", "3"));
        assert_eq!(
            v("My favorite band is Queen."),
            some("favorite", "band", "queen")
        );
        assert_eq!(
            v("Our wedding is on June 12."),
            some("date", "wedding", "june 12")
        );
        assert_eq!(
            v("We postponed the wedding to July 3."),
            some("date", "wedding", "july 3")
        );
        assert_eq!(v("I sold my Honda."), ("owns".into(), "honda".into(), None));
        assert_eq!(v("Sadly we broke up."), ("partner".into(), "".into(), None));
        assert_eq!(v("I cancelled the trip to Japan.").0, "plan");
        assert_eq!(
            v("Sorry, I meant Porto, not Lisbon."),
            some("latest", "", "porto")
        );
    }

    #[test]
    fn no_slot_in_chatter_or_questions() {
        for s in [
            "Where do you live now?",
            "That sounds like a lot of fun.",
            "The kids loved the beach.",
            "You should move to Porto!",
        ] {
            assert_eq!(slot_of(s), None, "{s}");
        }
    }
}
