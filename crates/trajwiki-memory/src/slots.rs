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
//!
//! How a sentence is read ([`slot_of`]):
//! 1. Whom it is about. A question states nothing. A sentence whose subject is another person
//!    (past the openers "oh", "so", "guess what": "he", "they", "my sister", "our neighbours",
//!    "my friend's wedding", but not "my wife and I") states no slot of the speaker's, only what
//!    the speaker says of a relative ("my older sister has been a paramedic") or of their
//!    partner ("my boyfriend Alex"). A supposition ("if I won the lottery I'd live in Osaka",
//!    "someday", "one day") states only a choice ("if I had to pick one drink, it'd be tea"). A
//!    sentence that opens with a verb of the past ("Got engaged to Jamie!", "Said goodbye to the
//!    Honda") is the speaker's.
//! 2. The pattern lists below (the first readings, kept as they were), then the general reader:
//!    a word of the attribute — of dwelling or moving for `home` ("lease", "resident", "movers",
//!    "for good", "my new apartment"), of work for `work` ("brought me on", "offer", "shifts",
//!    "I'm a … at"), a pet word with a word of naming or an apposition for `pet` — that is the
//!    speaker's (their verb, their noun, not a relative clause "a guy who lives in") and not
//!    denied, past, wished or a visit; its value is the capitalised name the word governs (after
//!    "to", "in", "of", "at", "for", "by", "join"; "with" only for a name of two words said with
//!    a role), not one marked old: "instead of Max", "from Lisbon", "I left / quit / lost my job
//!    at", "gave up the place in Ghent", "handed in my notice at", "Max never stuck".
//! 3. A value ends at a comma ("I own a red Honda, believe it or not" → `red honda`).
//!
//! No value list is learned: a place, an employer or a pet is whatever capitalised name the
//! attribute's word governs.

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
    "over",
    "than",
    "these",
    "nowadays",
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
    "i",
    "we",
    "you",
    "he",
    "she",
    "they",
    "me",
    "off",
    "barely",
    "rarely",
    "lately",
    "today",
    "yesterday",
    "tomorrow",
    "few",
    "couple",
];

/// Words that negate what follows them.
const NEGATIONS: [&str; 5] = ["not", "don't", "didn't", "never", "no"];

const DETERMINERS: &[&str] = &[
    "a", "an", "the", "my", "our", "his", "her", "their", "new", "some", "another", "this",
    "these", "those",
];

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

/// Whether `s` tells of plan `plan` (its words, space-separated) as done: a verb of doing
/// ("went", "did", "attended", "was") or the plan's own verb in a past form ("volunteering" →
/// "volunteered"); not a story that only shares its words ("I saw the workshop's flyer").
pub fn carries_out(plan: &str, s: &str) -> bool {
    let done = [
        "went",
        "did",
        "attended",
        "finished",
        "completed",
        "took",
        "had",
        "tried",
        "visited",
        "joined",
        "ran",
        "was",
        "were",
        "made",
        "started",
        "done",
        "finally",
        "booked",
    ];
    let plan_stems: Vec<String> = plan.split(' ').map(crate::text::stem).collect();
    tokens(s).iter().any(|(l, _)| {
        done.contains(&l.as_str())
            || (l.len() > 4 && l.ends_with("ed") && plan_stems.contains(&crate::text::stem(l)))
    })
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

/// Every (start, end) of any of `cues` in `t`, by start (the longest cue first at a start).
fn spans(t: &[(String, &str)], cues: &[&str]) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for c in cues {
        let cue: Vec<&str> = c.split(' ').collect();
        for i in 0..t.len() {
            if i + cue.len() <= t.len() && cue.iter().enumerate().all(|(k, c)| t[i + k].0 == *c) {
                out.push((i, i + cue.len()));
            }
        }
    }
    out.sort_by_key(|&(s, e)| (s, std::cmp::Reverse(e)));
    out.dedup_by_key(|x| x.0);
    out
}

/// Whether any of `words` is among the `n` tokens before `at`.
fn before_within(t: &[(String, &str)], at: usize, n: usize, words: &[&str]) -> bool {
    t[at.saturating_sub(n)..at.min(t.len())]
        .iter()
        .any(|(l, _)| words.contains(&l.as_str()))
}

/// Whether the statement at `at` is denied: a negation just before it ("I don't live in").
fn denied_at(t: &[(String, &str)], at: usize) -> bool {
    before_within(
        t,
        at,
        3,
        &[
            "not", "don't", "didn't", "never", "no", "longer", "doesn't", "isn't", "aren't",
            "wasn't", "haven't", "hasn't", "can't", "won't",
        ],
    )
}

/// Whether the statement at `at` tells of the past, not of now: "I used to live in", "I miss
/// living in", "back when I lived in", "since leaving".
fn past_at(t: &[(String, &str)], at: usize) -> bool {
    let used_to = (at.saturating_sub(4)..at)
        .any(|k| t[k].0 == "used" && t.get(k + 1).is_some_and(|x| x.0 == "to"));
    used_to
        || before_within(
            t,
            at,
            4,
            &[
                "miss",
                "missed",
                "back",
                "once",
                "formerly",
                "originally",
                "former",
            ],
        )
}

/// Whether the statement at `at` is only wished or planned: "I'm thinking of moving to", "we
/// might move to", "I want to work at".
fn future_at(t: &[(String, &str)], at: usize) -> bool {
    before_within(
        t,
        at,
        4,
        &[
            "planning",
            "plan",
            "plans",
            "want",
            "wants",
            "wanted",
            "hope",
            "hoping",
            "might",
            "may",
            "will",
            "i'll",
            "we'll",
            "gonna",
            "thinking",
            "considering",
            "would",
            "could",
            "should",
            "if",
            "dream",
            "dreaming",
            "someday",
            "eventually",
            "maybe",
            "wish",
            "unless",
            "whether",
            "apply",
            "applying",
            "applied",
            "interview",
            "interviewing",
        ],
    ) || (at.saturating_sub(4)..at)
        .any(|k| t[k].0 == "going" && t.get(k + 1).is_some_and(|x| x.0 == "to"))
        || t[at..]
            .iter()
            .take(8)
            .any(|(l, _)| matches!(l.as_str(), "soon" | "tomorrow" | "someday" | "eventually"))
        || (at..t.len().min(at + 8))
            .any(|k| t[k].0 == "next" && t.get(k + 1).is_none_or(|x| x.0 != "to" && x.0 != "door"))
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
    while capital(end) && end - i < 3 && !NOT_NAMES.contains(&t[end].0.as_str()) {
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
        .filter(|&k| {
            k > 0
                || matches!(
                    t.get(1).map(|x| x.0.as_str()),
                    Some("and" | "proposed" | "popped" | "asked")
                )
        })
        .find_map(|k| name_at(t, k))
}

/// How many words follow `phrase` in `s` before the clause ends (a comma, a stop, a dash).
fn clause_words(s: &str, phrase: &str) -> usize {
    let lower = s.to_lowercase();
    let Some(at) = lower.find(phrase) else {
        return usize::MAX;
    };
    let rest = &lower[at + phrase.len()..];
    let end = rest
        .find([',', ';', ':', '.', '!', '?', '('])
        .unwrap_or(rest.len());
    words(&rest[..end]).len()
}

/// The words of the clause of `s` before `phrase` (after its last comma, colon or dash), less
/// fillers: "Like I said, coffee is my favorite drink" → "coffee".
fn clause_before(s: &str, phrase: &str) -> Option<String> {
    let lower = s.to_lowercase();
    let at = lower.find(phrase)?;
    let fillers = [
        "still",
        "like",
        "i",
        "said",
        "for",
        "me",
        "always",
        "just",
        "these",
        "days",
        "honestly",
        "nothing",
        "beats",
        "and",
        "so",
        "my",
        "our",
        "it's",
        "is",
        "by",
        "far",
        "the",
        "a",
        "has",
        "have",
        "become",
        "became",
        "now",
        "officially",
        "definitely",
        "totally",
        "been",
        "honestly",
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
    if !has_month || i <= start {
        return None;
    }
    // One spelling for a date however said: "12 June", "June 12th", "the 12th of June" →
    // "june 12" (and its year when said).
    let mut month = None;
    let mut day = None;
    let mut year = None;
    for (l, _) in &t[start..i] {
        if let Some(m) = MONTHS.iter().position(|m| m == l) {
            month = Some(MONTHS[if m >= 12 { full_month(m) } else { m }]);
        } else if let Ok(n) = l
            .trim_end_matches(['s', 't', 'n', 'd', 'r', 'h'])
            .parse::<u32>()
        {
            if n > 31 {
                year = Some(n);
            } else if day.is_none() {
                day = Some(n);
            }
        }
    }
    let mut out = month?.to_string();
    if let Some(d) = day {
        out.push_str(&format!(" {d}"));
    }
    if let Some(y) = year {
        out.push_str(&format!(" {y}"));
    }
    Some(out)
}

/// The full month of an abbreviation's index in [`MONTHS`].
fn full_month(abbreviation: usize) -> usize {
    match MONTHS[abbreviation] {
        "jan" => 0,
        "feb" => 1,
        "mar" => 2,
        "apr" => 3,
        "jun" => 5,
        "jul" => 6,
        "aug" => 7,
        "sep" | "sept" => 8,
        "oct" => 9,
        "nov" => 10,
        _ => 11,
    }
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
        "excited about",
        "excited for",
        "reading up on",
        "counting down to",
        "getting ready for",
        "all set for",
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

/// Whether favourite `slot` of unsaid kind ("I prefer tea now") replaces the favourite held
/// under `key` (`subject|favorite|kind`) with `held`: its sentence names the old value or the
/// kind, or says that it changed ("now", "these days", "anymore", "instead").
pub fn changes_favorite(slot: &Slot, key: &str, held: &str) -> bool {
    let has = |phrase: &str| {
        let p: Vec<&str> = phrase.split(' ').filter(|w| !w.is_empty()).collect();
        !p.is_empty()
            && slot
                .words
                .windows(p.len())
                .any(|w| w.iter().zip(&p).all(|(a, b)| a == b))
    };
    let kind = key.rsplit('|').next().unwrap_or("");
    has(held)
        || has(kind)
        || slot.words.iter().any(|w| {
            matches!(
                w.as_str(),
                "now" | "nowadays" | "anymore" | "instead" | "switched" | "lately" | "new"
            )
        })
        || has("these days")
        || has("gone off")
}

/// Whether `quote`, stating no slot, speaks again of value `value` held by attribute
/// `attribute` (`home`, `work`, `owns` keyed `head`): "Tallinn is lovely, I'm glad I live here",
/// "another long shift at Harbor Clinic", "I spent Sunday fixing up my sailboat". Such a passing
/// mention is a source of the claim holding the value, so that it holds as long as that claim.
pub fn mentions(attribute: &str, head: &str, value: &str, quote: &str) -> bool {
    let t = tokens(quote);
    if quote.trim_end().ends_with('?') {
        return false;
    }
    let cues: &[&str] = match attribute {
        "home" => &[
            "live",
            "living",
            "here",
            "home",
            "still",
            "city",
            "town",
            "neighbourhood",
            "neighborhood",
            "flat",
            "apartment",
            "place",
            "local",
            "settled",
            "moved",
            "glad",
            "love",
            "loving",
        ],
        "work" => &[
            "work",
            "working",
            "job",
            "shift",
            "shifts",
            "office",
            "colleague",
            "colleagues",
            "coworker",
            "coworkers",
            "boss",
            "team",
            "still",
            "at",
            "for",
            "manager",
            "clients",
            "patients",
            "customers",
        ],
        "owns" => &["my", "our"],
        _ => return false,
    };
    match attribute {
        "owns" => (0..t.len()).any(|k| {
            t[k].0 == head
                && before_within(&t, k, 3, cues)
                && !past_at(&t, k)
                && !denied_at(&t, k.saturating_sub(1))
        }),
        _ => {
            let Some(at) = find(&t, value) else {
                return false;
            };
            !past_at(&t, at)
                && !denied_at(&t, at)
                && t.iter().any(|(l, _)| cues.contains(&l.as_str()))
        }
    }
}

/// What first-person sentence `s` states about its speaker, if it states one slot; a value
/// ends at a comma ("I own a red Honda, believe it or not" → `red honda`).
pub fn slot_of(s: &str) -> Option<Slot> {
    let mut x = slot_read(s)?;
    if let Some(v) = &x.value {
        let lower = s.to_lowercase();
        let w: Vec<&str> = v.split(' ').collect();
        if let Some(j) = (1..w.len()).find(|&j| lower.contains(&format!("{}, {}", w[j - 1], w[j])))
        {
            let cut = w[..j].join(" ");
            if x.attribute == "owns" && x.key == w[w.len() - 1] {
                x.key = w[j - 1].to_string();
            }
            x.value = Some(cut);
        }
    }
    Some(x)
}

fn slot_read(s: &str) -> Option<Slot> {
    if s.trim_end().ends_with('?') {
        return None;
    }
    // One spelling of "favourite", so that one reader reads both.
    let s = &favorite_spelling(s);
    let t = tokens(s);
    // Whom the sentence is about: another's life ("my sister moved to Krakow") states no slot
    // of the speaker's but what the speaker says of a relative ("my sister is a nurse") or of
    // their partner ("my boyfriend Sam"); a supposition ("if I won the lottery I'd live in
    // Osaka") none but a choice ("if I had to pick one drink, it'd be tea").
    if about_another(&t) {
        return about_kin(&t).or_else(|| partner_named(&t));
    }
    if supposed(&t) {
        return favorite(&t, s);
    }
    let first_person = subjectless(&t)
        || t.iter().any(|(l, _)| {
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
        // A thing owned, gone ("A neighbour bought the sailboat", "The Vespa is gone"), and not
        // another's.
        let others = t
            .iter()
            .any(|(l, _)| matches!(l.as_str(), "his" | "her" | "their" | "your" | "its"));
        return correction(t)
            .or_else(|| {
                withdrawal(t)
                    .filter(|x| x.attribute == "owns" && !others && find(t, "the").is_some())
            })
            .or_else(|| home(t).filter(|x| x.value.is_some()))
            .or_else(|| {
                // "The kitten answers to Ziggy now": the household's pet.
                let the_pet = (1..t.len())
                    .any(|k| t[k - 1].0 == "the" && PETS.contains(&t[k].0.trim_end_matches("'s")));
                (the_pet && !others)
                    .then(|| pet(t).or_else(|| pet_named(t, s)))
                    .flatten()
            })
            .or_else(|| cancellation(t))
            .or_else(|| {
                // "That makes three parrots at home now".
                [
                    "that makes",
                    "makes it",
                    "up to",
                    "which makes",
                    "now there are",
                ]
                .iter()
                .any(|c| find(t, c).is_some())
                .then(|| count(t))
                .flatten()
            });
    }
    // A job left for another ("I handed in my notice at X and started at Y") is the new one.
    let stated = withdrawal(t)
        .map(|w| match w.attribute {
            "work" => employer(t, s).unwrap_or(w),
            _ => w,
        })
        .or_else(|| partner(t))
        .or_else(|| pet(t))
        .or_else(|| count(t))
        .or_else(|| favorite(t, s))
        .or_else(|| about(t))
        .or_else(|| work(t))
        .or_else(|| home(t));
    stated
        .or_else(|| pet_named(t, s))
        .or_else(|| employer(t, s))
        .or_else(|| residence(t, s))
        .or_else(|| correction(t))
        .or_else(|| cancellation(t))
        .or_else(|| plan(t))
        .or_else(|| owns(t))
}

/// One spelling for a favourite: "favourite", "number one", "all-time favorite" and "my drink
/// of choice" read as "my favorite drink".
fn favorite_spelling(s: &str) -> String {
    let mut s = s
        .replace("favourite", "favorite")
        .replace("Favourite", "Favorite")
        .replace("my number one ", "my favorite ")
        .replace("My number one ", "My favorite ")
        .replace("all-time favorite", "favorite");
    if let Some(end) = s.find(" of choice") {
        if let Some(my) = s[..end].rfind("my ").filter(|&m| end - m <= 30) {
            let kind = s[my + 3..end].to_string();
            s = format!(
                "{}my favorite {kind}{}",
                &s[..my],
                &s[end + " of choice".len()..]
            );
        }
    }
    s
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
            "new date",
            "bumped",
            "shifted",
            "pushed back",
            "moved back",
            "now on",
            "now happening",
            "taking place on",
            "takes place on",
            "booked for",
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
        // The date first: "June 3 is the new date for the wedding".
        if find(t, "new date").is_some() || find(t, "the date for").is_some() {
            if let Some(d) = (0..t.len()).find_map(|k| date_at(t, k)) {
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
    let parted = [
        "broke up",
        "broken up",
        "break up",
        "split up",
        "divorced",
        "divorce",
        "separated from",
        "we separated",
        "we've separated",
        "single again",
        "i'm single",
        "single now",
        "it's over with",
        "it's over between",
        "ended things",
        "ended it with",
        "ended our relationship",
        "ended the relationship",
        "called it quits",
        "went our separate ways",
        "gone our separate ways",
        "parted ways",
        "not together anymore",
        "no longer together",
        "not together any more",
        "dumped me",
        "we split",
        "we've split",
        "have split",
        "and i split",
        "broke it off",
        "broke off",
        "my ex",
        "not seeing",
        "not dating",
        "stopped seeing",
        "stopped dating",
        "no longer seeing",
        "no longer dating",
        "aren't together",
        "are not together",
        "and i separated",
        "have separated",
        "go our separate ways",
        "going our separate ways",
        "aren't a thing",
        "not a thing anymore",
        "broke up with me",
        "split up with me",
        "left me",
    ];
    let parting = spans(t, &parted).into_iter().find(|&(s, e)| {
        let cue = &t[s..e];
        // "we split the bill", "my ex's new car": no parting.
        let object = t.get(e).map(|x| x.0.as_str());
        let shared = cue.last().is_some_and(|x| x.0 == "split")
            && matches!(
                object,
                Some("the" | "a" | "it" | "our" | "everything" | "costs")
            );
        let an_ex = cue[0].0 == "my" && !has("now") && !has("anymore");
        // "I'm not seeing Sam anymore", not "I'm not seeing the point".
        let stopped = matches!(cue[0].0.as_str(), "not" | "stopped" | "no")
            && matches!(cue.last().map(|x| x.0.as_str()), Some("seeing" | "dating"))
            && !(has("anymore")
                || has("each other")
                || t.get(e).is_some_and(|x| {
                    x.1.chars().next().is_some_and(char::is_uppercase)
                        || matches!(x.0.as_str(), "him" | "her" | "them" | "anyone")
                }));
        let a_divorce = cue.len() == 1 && cue[0].0 == "divorce" && !has("final") && !has("through");
        !shared
            && !an_ex
            && !stopped
            && !a_divorce
            && !future_at(t, s)
            && !denied_at(t, s)
            && (cue.iter().any(|x| {
                matches!(
                    x.0.as_str(),
                    "i" | "me" | "we" | "i'm" | "we've" | "our" | "my"
                )
            }) || own_subject(t, s))
    });
    // "Me and Casey split last month".
    let me_and = t.first().is_some_and(|x| x.0 == "me")
        && t.get(1).is_some_and(|x| x.0 == "and")
        && name_at(t, 2).is_some_and(|n| {
            t.get(2 + n.split(' ').count())
                .is_some_and(|x| matches!(x.0.as_str(), "split" | "broke" | "separated"))
        });
    if parting.is_some() || me_and {
        return slot("partner", "", None);
    }
    if let Some(at) = after(
        t,
        &[
            "sold",
            "got rid of",
            "gave away",
            "given away",
            "traded in",
            "no more",
            "let the",
            "let my",
            "parted with",
            "said goodbye to the",
            "said goodbye to my",
            "donated the",
            "donated my",
            "found a new home for",
            "found a buyer for",
            "sold off",
            "selling off",
            "bought the",
            "bought my",
            "don't have the",
            "don't have my",
            "don't own the",
            "no longer have the",
            "no longer have my",
            "no longer own the",
            "no longer own my",
        ],
    ) {
        // "a neighbour bought the sailboat": the speaker's only when another bought it.
        let cue_at = (0..at)
            .rev()
            .find(|&k| matches!(t[k].0.as_str(), "bought" | "have" | "own"))
            .unwrap_or(at);
        if cue_at < at
            && t[cue_at].0 == "bought"
            && !before_within(
                t,
                cue_at,
                3,
                &[
                    "someone",
                    "neighbour",
                    "neighbor",
                    "buyer",
                    "guy",
                    "woman",
                    "man",
                    "family",
                    "friend",
                    "couple",
                    "collector",
                    "who",
                ],
            )
        {
            return None;
        }
        let named = after(
            t,
            &[
                "no more",
                "let the",
                "let my",
                "sold the",
                "sold my",
                "rid of the",
                "rid of my",
                "away the",
                "away my",
                "in the",
                "in my",
                "with the",
                "with my",
                "to the",
                "to my",
                "home for the",
                "home for my",
                "buyer for the",
                "buyer for my",
                "off the",
                "off my",
            ],
        )
        .unwrap_or(at);
        let v =
            value(t, named, 2).filter(|v| !matches!(v.as_str(), "it" | "them" | "it online"))?;
        let head = v.rsplit(' ').next().unwrap_or(&v).to_string();
        return slot("owns", &head, None);
    }
    for cue in [
        "is gone",
        "has gone",
        "went to a new",
        "has a new owner",
        "is sold",
        "got sold",
        "found a new owner",
        "was sold",
    ] {
        if let Some(gone) = find(t, cue) {
            if gone >= 1 && (0..gone).any(|d| matches!(t[d].0.as_str(), "the" | "my" | "our")) {
                return slot("owns", &t[gone - 1].0, None);
            }
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
            "got let go",
            "was let go",
            "i'm unemployed",
            "between jobs",
            "handed in my notice",
            "quit my position",
            "left my position",
        ],
    )
    .is_some()
    {
        return slot("work", "", None);
    }
    None
}

/// A plan withdrawn: cancelled, called off, fallen through (read after a home or a job denied).
fn cancellation(t: &[(String, &str)]) -> Option<Slot> {
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
        "fell through",
        "fallen through",
        "isn't happening",
        "won't happen",
        "won't be happening",
        "pulled out of",
        "backed out of",
        "dropped out of",
        "gave up on",
        "given up on",
        "shelved",
        "off the table",
        "not going ahead",
        "bailed on",
        "on hold",
        "not going anymore",
        "skipping",
        "we're skipping",
        "decided against",
        "axed",
        "pulled the plug",
        "decided to skip",
        "skip the",
        "isn't going to",
        "not going to happen",
        "ditched",
    ];
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

/// A correction of something said: "I meant Porto", "quick correction: it's nurse, not baker",
/// "not Lisbon but Porto". The key is the value corrected when named ("baker"), else empty (the
/// latest slot).
fn correction(t: &[(String, &str)]) -> Option<Slot> {
    let cues = [
        "i meant",
        "correction",
        "i misspoke",
        "got that wrong",
        "got it wrong",
        "i was wrong",
        "my mistake",
        "scratch that",
        "should have said",
        "should've said",
        "my bad",
        "a slip",
        "mixed up",
        "typo",
        "misspoke",
        "correct myself",
        "let me correct",
    ];
    let cue = spans(t, &cues).into_iter().next()?;
    let wrong = |from: usize| -> String {
        (from..t.len())
            .find(|&k| t[k].0 == "not")
            .and_then(|k| value(t, k + 1, 3))
            // "I said Lisbon but I meant Porto".
            .or_else(|| after(t, &["i said"]).and_then(|k| value(t, k, 2)))
            .unwrap_or_default()
    };
    if let Some(at) = after(t, &["i meant", "should have said", "should've said"]) {
        if let Some(v) = value(t, at, 3) {
            return slot("latest", &wrong(at), Some(v));
        }
    }
    if let Some(at) = after(t, &["it's", "it is", "it was", "it should be"]) {
        let not = wrong(at);
        if at >= cue.0 && !not.is_empty() {
            if let Some(v) = value(t, at, 3) {
                return slot("latest", &not, Some(v));
            }
        }
    }
    // "not Lisbon but Porto".
    if let Some(n) = find(t, "not") {
        if let Some(b) = (n + 1..t.len().min(n + 5)).find(|&k| t[k].0 == "but") {
            if let Some(v) = value(t, b + 1, 3) {
                return slot("latest", &value(t, n + 1, 3).unwrap_or_default(), Some(v));
            }
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
    let proposed = [
        "proposed",
        "popped the question",
        "asked me to marry",
        "to marry me",
        "getting married",
    ]
    .iter()
    .filter_map(|c| find(t, c).map(|i| (i, i + c.split(' ').count())))
    .find(|&(s, e)| {
        t[s].0 != "proposed"
            || !matches!(t.get(e).map(|x| x.0.as_str()), Some(w) if !matches!(w,
                "to" | "on" | "at" | "in" | "last" | "yesterday" | "and" | "while" | "during"
                    | "this" | "over" | "him" | "her" | "me" | "after" | "so" | "when"))
    });
    if (has("engaged") && !has("not engaged") && !denied_at(t, find(t, "engaged").unwrap_or(0)))
        || proposed.is_some()
        || has("said yes")
    {
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
            "and i have been dating",
            "and i've been seeing",
            "and i have been seeing",
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
    if [
        "we got married",
        "we're married",
        "i got married",
        "we tied the knot",
        "and i got married",
        "and i tied the knot",
        "and i are married",
        "we just got married",
    ]
    .iter()
    .any(|c| has(c))
    {
        if let Some(n) = a_name(t) {
            return slot("partner", "", Some(format!("married to {n}")));
        }
    }
    // "I'm seeing someone, Alex", "I'm with Casey now, we've been together a while".
    if has("seeing someone")
        || (has("i'm with")
            && t.iter()
                .any(|(l, _)| matches!(l.as_str(), "together" | "dating")))
    {
        if let Some(n) = after(t, &["seeing someone", "i'm with"]).and_then(|k| name_at(t, k)) {
            return slot("partner", "", Some(format!("dating {n}")));
        }
    }
    // "Jordan is officially my fiancé now".
    for (noun, relation) in PARTNERS {
        for (s, _) in spans(t, &[&format!("my {noun}")]) {
            let is = (s.saturating_sub(2)..s).rev().find(|&k| t[k].0 == "is");
            let between = is.is_some_and(|k| {
                t[k + 1..s]
                    .iter()
                    .all(|x| matches!(x.0.as_str(), "officially" | "now" | "finally" | "new"))
            });
            if let (Some(k), true) = (is, between) {
                if let Some(n) = name_before(t, k) {
                    return slot("partner", "", Some(format!("{relation} {n}")));
                }
            }
        }
    }
    // "Sam is my girlfriend", "Sam and I are together", "Sam and I started dating".
    for (noun, relation) in PARTNERS {
        for (s, _) in spans(t, &[&format!("is my {noun}"), &format!("is my new {noun}")]) {
            if let Some(n) = name_before(t, s) {
                return slot("partner", "", Some(format!("{relation} {n}")));
            }
        }
    }
    if [
        "and i are together",
        "and i have been together",
        "and i've been together",
        "and i started dating",
        "and i started seeing",
        "and i got together",
        "and i are a couple",
        "and i are seeing",
        "and i are going out",
    ]
    .iter()
    .any(|c| has(c))
    {
        if let Some(n) = a_name(t) {
            return slot("partner", "", Some(format!("dating {n}")));
        }
    }
    if let Some(at) = after(
        t,
        &[
            "dating",
            "seeing",
            "going out with",
            "in a relationship with",
            "together with",
            "started dating",
            "started seeing",
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

/// The speaker's partner named with the relation: "my boyfriend Sam".
fn partner_named(t: &[(String, &str)]) -> Option<Slot> {
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
            "changed his name to",
            "changed her name to",
            "changed its name to",
            "changed their name to",
            "changed the name to",
            "name to",
            "name is now",
            "name's now",
            "answers to",
            "started calling him",
            "started calling her",
            "started calling it",
            "calling him",
            "calling her",
            "calling it",
            "call him",
            "call her",
            "call it",
            "is called",
            "go by",
            "going by",
        ],
    ) {
        let cue_at = (0..at)
            .rev()
            .find(|&k| {
                matches!(
                    t[k].0.as_str(),
                    "renamed"
                        | "call"
                        | "calling"
                        | "called"
                        | "named"
                        | "name"
                        | "name's"
                        | "answers"
                        | "goes"
                        | "go"
                        | "going"
                )
            })
            .unwrap_or(0);
        let is_pet = |l: &str| PETS.contains(&l.trim_end_matches("'s"));
        let pet_word = t.iter().any(|(l, _)| {
            is_pet(l) || matches!(l.as_str(), "name" | "renamed" | "nickname" | "instead")
        });
        if !pet_word || denied_at(t, cue_at) || future_at(t, cue_at) {
            return None;
        }
        let mut i = at;
        let kind_from = t[..at].iter().rposition(|(l, _)| is_pet(l)).unwrap_or(at);
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
        if let Some(mut n) = name_at(t, i) {
            // "We renamed Max to Buddy", "from Max to Buddy".
            let end = i + n.split(' ').count();
            if t.get(end).is_some_and(|x| x.0 == "to") {
                if let Some(m) = name_at(t, end + 1) {
                    n = m;
                }
            }
            let kind = t[kind_from.min(at)..i].iter().find(|(l, _)| is_pet(l));
            return slot(
                "pet",
                kind.map_or("", |(l, _)| l.trim_end_matches("'s")),
                Some(n),
            );
        }
    }
    for pet in PETS {
        // "Max, my dog, ..." and "Max the dog".
        for cue in [
            format!("my {pet}"),
            format!("our {pet}"),
            format!("the {pet}"),
        ] {
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
        let owning = !matches!(prior, "a" | "an" | "the" | "of" | "first" | "last")
            && !before_within(
                t,
                k,
                2,
                &["had", "lost", "walked", "saw", "sold", "minus", "than"],
            )
            && !past_at(t, k)
            && !future_at(t, k);
        let adopted = before_within(
            t,
            k,
            4,
            &[
                "adopted", "got", "welcomed", "brought", "added", "rescued", "took",
            ],
        );
        let n = if let Some((_, n)) = ORDINALS.iter().find(|(o, _)| o == l) {
            (prior == "a" || prior == "our" || prior == "my" || (prior == "the" && adopted))
                .then_some(*n)
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
    // "We adopted another cat, so we have five now", "that makes four".
    let kind = t
        .iter()
        .map(|(l, _)| singular(l))
        .find(|l| PETS.contains(&l.as_str()) && l != "guinea")?;
    let kind = if find(t, "guinea").is_some() {
        "guinea pig".to_string()
    } else {
        kind
    };
    for (s, e) in spans(
        t,
        &[
            "have",
            "makes",
            "up to",
            "now have",
            "we've got",
            "i've got",
        ],
    ) {
        let Some(n) = t.get(e).and_then(|x| number(&x.0)) else {
            continue;
        };
        let next = t.get(e + 1).map(|x| x.0.as_str());
        if matches!(
            next,
            None | Some("now" | "in" | "total" | "of" | "altogether" | "at")
        ) && !denied_at(t, s)
            && !past_at(t, s)
            && (1..=20).contains(&n)
        {
            return slot("count", &kind, Some(n.to_string()));
        }
    }
    None
}

/// A favourite.
fn favorite(t: &[(String, &str)], s: &str) -> Option<Slot> {
    // Favourites: "my favorite drink is coffee", "coffee is my favorite drink", "nothing beats
    // coffee, it's my favorite drink", "I'm a big coffee fan, always my go-to drink", "I prefer
    // tea now", "I've switched to tea", "tea is my top drink".
    // "If I had to pick one drink, it'd be tea".
    if let Some(k) = after(t, &["pick one", "choose one", "pick just one"]) {
        let key: Vec<&str> = t[k..]
            .iter()
            .take(clause_words(s, "one").min(3))
            .map(|(l, _)| l.as_str())
            .collect();
        if let Some(v) = after(t, &["it'd be", "it would be", "i'd go with", "i'd say"])
            .and_then(|v| value(t, v, 3))
        {
            return slot("favorite", &key.join(" "), Some(v));
        }
    }
    for (cue, is_cue) in [
        ("my favorite", "my favorite"),
        ("my favourite", "my favourite"),
        ("my new favorite", "my new favorite"),
        ("my go-to", "my go-to"),
        ("my top", "is my top"),
    ] {
        let Some(at) = after(t, &[cue]) else {
            continue;
        };
        let clause = clause_words(s, cue);
        let key: Vec<String> = t[at..]
            .iter()
            .take(clause)
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
        // The value before "is my favorite", "has become my favorite", "always my go-to".
        let linked = find(t, cue).is_some_and(|k| {
            k > 0
                && matches!(
                    t[k - 1].0.as_str(),
                    "is" | "become"
                        | "became"
                        | "now"
                        | "remains"
                        | "still"
                        | "always"
                        | "it's"
                        | "been"
                        | "as"
                )
        });
        // Or in apposition: "Still chess for me, my favorite board game by far".
        let lower = s.to_lowercase();
        let apposed = lower
            .find(cue)
            .is_some_and(|k| lower[..k].trim_end().ends_with(','));
        // The value of a verb of choosing in the clause before: "I'm a huge fan of chess, my
        // favorite", "I'd take tea over coffee any time, it's my favorite drink now", "Scrabble
        // has overtaken chess as my favorite".
        let chosen = after(
            t,
            &["fan of", "i'd take", "i'd pick", "i'd choose", "we'd take"],
        )
        .filter(|&k| k < find(t, cue).unwrap_or(0))
        .and_then(|k| value(t, k, clause_words(s, &t[k - 1].0).clamp(1, 3)))
        .or_else(|| {
            [
                "has overtaken",
                "overtook",
                "has replaced",
                "replaced",
                "has beaten",
            ]
            .iter()
            .find(|c| find(t, c).is_some())
            .and_then(|c| clause_before(s, c))
        });
        let v = if let Some(k) = after(t, &["nothing beats", "big"]) {
            value(t, k, 2).map(|v| v.trim_end_matches(" fan").to_string())
        } else if chosen.is_some() && (linked || apposed) {
            chosen
        } else if !linked && !apposed {
            None
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
            "i've switched to",
            "come to prefer",
            "i'm really into",
            "i'm all about",
            "i'm totally into",
            "i've moved on to",
            "moved on to",
            "i'd pick",
            "i'd choose",
            "i'm more of a",
            "i've gotten into",
            "i've got into",
        ],
    ) {
        let jobby = t.iter().any(|(l, _)| {
            matches!(
                l.as_str(),
                "job" | "role" | "position" | "employer" | "company" | "hired"
            )
        });
        if !jobby && !denied_at(t, at.saturating_sub(2)) && !future_at(t, at.saturating_sub(2)) {
            if let Some(v) = value(t, at, 3) {
                let v = v.trim_end_matches(" person").to_string();
                // The sentence's words: the fold revises a favourite of unsaid kind only when they
                // name the old one or say that it changed.
                return Some(Slot {
                    attribute: "favorite",
                    key: String::new(),
                    value: Some(v),
                    words: t.iter().map(|(l, _)| l.clone()).collect(),
                });
            }
        }
    }
    None
}

/// A fact of the speaker's own life with one value.
fn about(t: &[(String, &str)]) -> Option<Slot> {
    // A fact of the speaker's own life with one value: "my birthday is in May", "I grew up in
    // Porto", "my sister is a nurse", "my first car was a Fiat".
    if let Some(at) = after(
        t,
        &[
            "grew up in",
            "raised in",
            "originally from",
            "i'm from",
            "i come from",
            "my hometown is",
            "hometown is",
        ],
    ) {
        if let Some(v) = place_at(t, at).or_else(|| value(t, at, 2)) {
            return slot("about", "hometown", Some(v));
        }
    }
    // "I was born in January" (a birthday, as "my birthday is in January" reads), "born in
    // Porto" (a hometown).
    if let Some(at) = after(t, &["i was born in", "born in"]) {
        if let Some(m) = t.get(at).filter(|x| MONTHS.contains(&x.0.as_str())) {
            return slot("date", "birthday", Some(m.0.clone()));
        }
        if let Some(v) = place_at(t, at) {
            return slot("about", "hometown", Some(v));
        }
    }
    about_kin(t).or_else(|| about_said(t))
}

/// A fact of one value about the speaker's relative or thing, said with "my": "My older sister
/// has been a baker", "my sister works as a nurse", "my sister's actually a teacher", "in my
/// first car, a Fiat", "my very first car was".
fn about_kin(t: &[(String, &str)]) -> Option<Slot> {
    for (s, _) in spans(t, &["my"]) {
        let mut i = s + 1;
        while i < t.len()
            && matches!(
                t[i].0.as_str(),
                "older" | "younger" | "big" | "little" | "very" | "eldest" | "oldest" | "baby"
            )
        {
            i += 1;
        }
        for about in ABOUT {
            let n = about.split(' ').count();
            if i + n > t.len() {
                continue;
            }
            let said: Vec<&str> = t[i..i + n].iter().map(|x| x.0.as_str()).collect();
            let last = said[n - 1];
            let whole = said[..n - 1].join(" ");
            let plain = format!("{whole}{}{}", if n > 1 { " " } else { "" }, last);
            let contracted = last
                .strip_suffix("'s")
                .map(|l| format!("{whole}{}{l}", if n > 1 { " " } else { "" }));
            let mut k = i + n;
            if contracted.as_deref() == Some(*about) {
                // "my sister's a teacher", not "my brother's first car".
                if !t.get(k).is_some_and(|x| {
                    matches!(
                        x.0.as_str(),
                        "a" | "an" | "actually" | "now" | "still" | "in"
                    )
                }) {
                    continue;
                }
            } else if plain == *about {
                let verb = ["is", "was", "has been", "works as", "worked as", "is now"]
                    .iter()
                    .find(|v| {
                        let v: Vec<&str> = v.split(' ').collect();
                        t.get(k..k + v.len())
                            .is_some_and(|w| w.iter().zip(&v).all(|(a, b)| a.0 == *b))
                    })
                    .map(|v| v.split(' ').count());
                match verb {
                    Some(len) => k += len,
                    // "in my first car, a Fiat".
                    None if t.get(k).is_some_and(|x| matches!(x.0.as_str(), "a" | "an")) => {}
                    None => continue,
                }
            } else {
                continue;
            }
            while k < t.len()
                && matches!(
                    t[k].0.as_str(),
                    "in" | "on"
                        | "a"
                        | "an"
                        | "the"
                        | "actually"
                        | "really"
                        | "now"
                        | "still"
                        | "old"
                )
            {
                k += 1;
            }
            if let Some(v) = value(t, k, 2) {
                return slot("about", about, Some(v));
            }
        }
    }
    None
}

/// The older readings of a fact of one value: "my birthday is in May".
fn about_said(t: &[(String, &str)]) -> Option<Slot> {
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

/// Where or as what the speaker works: the employer when named ("I started at Summit Bank",
/// "Summit Bank hired me", "I left Harbor Clinic for Summit Bank", "I joined Summit Bank as a
/// nurse"), else the role ("I work as a nurse"); not a past one ("I used to work at"), a wished
/// one ("I applied for a job at") or a denied one, which withdraws it ("I don't work at Harbor
/// Clinic anymore").
fn work(t: &[(String, &str)]) -> Option<Slot> {
    // Work: the employer when named ("at Riverside Hospital"), else the role.
    let employer = |from: usize| -> Option<String> {
        let at = (from..t.len()).find(|&k| matches!(t[k].0.as_str(), "at" | "for"))?;
        place_at(t, at + 1)
    };
    if let Some(k) = find(t, "hired me").or_else(|| find(t, "took me on")) {
        if let Some(n) = (0..k).find_map(|i| name_at(t, i).filter(|_| i > 0 || k <= 3)) {
            return slot("work", "", Some(n));
        }
    }
    let mut denied = false;
    // "I left Harbor Clinic for Summit Bank", "I quit Harbor Clinic to join Summit Bank".
    for (_, e) in spans(t, &["left", "quit", "leaving"]) {
        if let Some(old) = place_at(t, e) {
            let after_old = e + old.split(' ').count();
            if let Some(n) = (after_old..t.len().min(after_old + 4))
                .filter(|&k| matches!(t[k].0.as_str(), "for" | "join" | "at"))
                .find_map(|k| place_at(t, k + 1))
            {
                return slot("work", "", Some(n));
            }
        }
    }
    let jobby = [
        "job",
        "jobs",
        "role",
        "position",
        "team",
        "company",
        "firm",
        "staff",
        "as",
        "hired",
        "employer",
        "colleagues",
        "coworkers",
        "work",
        "working",
        "office",
        "shift",
    ];
    for (s, e) in spans(
        t,
        &[
            "new job at",
            "new job with",
            "job at",
            "job with",
            "i work at",
            "i work for",
            "we work at",
            "work at",
            "working at",
            "working for",
            "started at",
            "started with",
            "hired at",
            "hired by",
            "employed at",
            "employed by",
            "work for",
            "position at",
            "role at",
            "post at",
            "i've worked at",
            "i've worked for",
            "have worked at",
            "i teach at",
            "teaching at",
            "i'm now at",
            "now at",
            "first day at",
            "first week at",
            "first shift at",
            "offer from",
            "joined",
            "join",
            "switched to",
            "employer is",
            "i'm at",
        ],
    ) {
        let cue = t[s..e].iter().map(|(l, _)| l.as_str()).collect::<Vec<_>>();
        let Some(n) = place_at(t, e) else {
            continue;
        };
        let loose = matches!(
            cue[0],
            "joined" | "join" | "switched" | "moved" | "now" | "offer" | "i'm"
        );
        if loose
            && !t
                .iter()
                .any(|(l, _)| jobby.contains(&l.as_str()) && *l != cue[0])
        {
            continue;
        }
        if loose
            && cue[0] == "switched"
            && !t.iter().any(|(l, _)| {
                matches!(
                    l.as_str(),
                    "job" | "role" | "position" | "employer" | "company" | "as"
                )
            })
        {
            continue;
        }
        if cue[0] == "offer"
            && !t
                .iter()
                .any(|(l, _)| matches!(l.as_str(), "accepted" | "took"))
        {
            continue;
        }
        if past_at(t, s) || future_at(t, s) || !own_subject(t, s) && !cue.contains(&"i") {
            continue;
        }
        if denied_at(t, s) || (e..t.len().min(e + 6)).any(|k| t[k].0 == "anymore") {
            denied = true;
            continue;
        }
        return slot("work", "", Some(n));
    }
    for (s, e) in spans(
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
            "i became an",
            "started working as",
            "being a",
            "being an",
            "hired me as",
            "position as",
            "role as",
        ],
    ) {
        if past_at(t, s) || future_at(t, s) || denied_at(t, s) {
            continue;
        }
        if let Some(n) = employer(e) {
            return slot("work", "", Some(n));
        }
        let cue = t[s..e].iter().map(|(l, _)| l.as_str()).collect::<Vec<_>>();
        if matches!(cue.as_slice(), [.., "as"]) && !matches!(cue[0], "being") {
            if let Some(v) = value(t, e, 3) {
                return slot("work", "", Some(v));
            }
        }
    }
    denied.then(|| Slot {
        attribute: "work",
        key: String::new(),
        value: None,
        words: Vec::new(),
    })
}

/// Where the speaker lives: a move's destination ("we moved from Lisbon to Porto", "I just
/// moved into a small flat in Porto"), a home stated ("I've been living in Porto", "home for me
/// is Porto", "Porto is home now"); not a past one ("I used to live in Lisbon", "I miss living
/// in Lisbon"), a wished one ("we might move to Porto") or a denied one, which withdraws it
/// ("I don't live in Lisbon anymore").
fn home(t: &[(String, &str)]) -> Option<Slot> {
    let mut denied = false;
    let moves = [
        "settled",
        "moved",
        "relocated",
        "moving",
        "move",
        "relocating",
        "relocate",
    ];
    let mut found: Vec<(usize, String)> = Vec::new();
    for (s, e) in spans(t, &moves) {
        if matches!(
            t.get(e).map(|x| x.0.as_str()),
            Some("on" | "up" | "forward" | "back")
        ) {
            continue;
        }
        if denied_at(t, s) || future_at(t, s) || !own_subject(t, s) {
            continue;
        }
        // The destination: after "to", "into ... in", "here to", past a "from X".
        let mut k = e;
        while k < t.len() && k < e + 9 {
            let w = t[k].0.as_str();
            if matches!(
                w,
                "and" | "but" | "because" | "so" | "which" | "when" | "with"
            ) && k > e
            {
                break;
            }
            if matches!(w, "to" | "in" | "into" | "over" | "across") {
                if let Some(n) = place_at(t, k + 1) {
                    found.push((s, n));
                    break;
                }
            }
            k += 1;
        }
    }
    let stated = [
        "i live in",
        "we live in",
        "live in",
        "i'm living in",
        "we're living in",
        "living in",
        "now live in",
        "settled in",
        "new place is in",
        "home for me is",
        "home for us is",
        "my home is",
        "our home is",
        "i'm based in",
        "we're based in",
        "based in",
        "our new place in",
        "my new place in",
        "my place in",
        "our place in",
        "my flat in",
        "our flat in",
        "my apartment in",
        "our apartment in",
        "my house in",
        "our house in",
        "i've lived in",
        "we've lived in",
        "have lived in",
        "my new home in",
        "our new home in",
        "new home is in",
        "i call",
        "we call",
        "i reside in",
        "we reside in",
        "address is in",
        "home is",
        "bought a house in",
        "bought a flat in",
        "bought an apartment in",
        "i'm in",
        "we're in",
    ];
    for (s, e) in spans(t, &stated) {
        let call =
            matches!(t[s].0.as_str(), "i" | "we") && t.get(s + 1).is_some_and(|x| x.0 == "call");
        let Some(n) = place_at(t, e) else {
            continue;
        };
        if call && !t.iter().skip(e).any(|(l, _)| l == "home") {
            continue;
        }
        // "I'm in Porto now" (not "I'm in Paris for a conference").
        let visit = t.iter().any(|(l, _)| {
            matches!(
                l.as_str(),
                "trip"
                    | "visiting"
                    | "visit"
                    | "vacation"
                    | "holiday"
                    | "conference"
                    | "weekend"
                    | "business"
                    | "tour"
                    | "week"
                    | "days"
                    | "stay"
                    | "staying"
            )
        });
        if matches!(t[s].0.as_str(), "i'm" | "we're")
            && t.get(s + 1).is_some_and(|x| x.0 == "in")
            && (visit || !t[e..].iter().any(|(l, _)| l == "now"))
        {
            continue;
        }
        let owned = matches!(t[s].0.as_str(), "i" | "we" | "my" | "our" | "home" | "new")
            || t[s].0.starts_with("i'")
            || t[s].0.starts_with("we'");
        if !owned && !own_subject(t, s) {
            continue;
        }
        if past_at(t, s) || future_at(t, s) {
            continue;
        }
        if denied_at(t, s) || (e..t.len().min(e + 6)).any(|k| t[k].0 == "anymore") {
            denied = true;
            continue;
        }
        found.push((s, n));
    }
    // The value before the verb: "Porto is home now", "Porto is where I live".
    for (s, _) in spans(
        t,
        &[
            "is home",
            "is my home",
            "is my new home",
            "is our home",
            "is our new home",
            "is where i live",
            "is where we live",
            "has been home",
            "feels like home",
        ],
    ) {
        if let Some(n) = name_before(t, s) {
            if !denied_at(t, s + 1) && !past_at(t, s) {
                found.push((s, n));
            }
        }
    }
    if let Some((_, n)) = found.into_iter().min_by_key(|(s, _)| *s) {
        return slot("home", "", Some(n));
    }
    denied.then(|| Slot {
        attribute: "home",
        key: String::new(),
        value: None,
        words: Vec::new(),
    })
}

/// Whether the verb at `at` is the speaker's: the nearest subject before it is "I" or "we" (or
/// none: "Moved to Porto last week!"), not another's ("my sister moved to Paris").
fn own_subject(t: &[(String, &str)], at: usize) -> bool {
    for k in (at.saturating_sub(8)..at).rev() {
        let w = t[k].0.as_str();
        if matches!(
            w,
            "i" | "we" | "i've" | "we've" | "i'm" | "we're" | "i'd" | "we'd" | "me" | "us"
        ) {
            return true;
        }
        // "my new employer", "my first day": the speaker's own.
        if matches!(w, "my" | "our")
            && t[k + 1..at]
                .iter()
                .all(|x| matches!(x.0.as_str(), "new" | "first" | "current" | "latest"))
        {
            return true;
        }
        if matches!(
            w,
            "he" | "she"
                | "they"
                | "he's"
                | "she's"
                | "they're"
                | "they've"
                | "you"
                | "you're"
                | "it"
                | "who"
                | "my"
                | "our"
                | "his"
                | "her"
                | "their"
                | "your"
        ) {
            return false;
        }
    }
    (0..at).all(|k| {
        matches!(
            t[k].0.as_str(),
            "finally"
                | "just"
                | "recently"
                | "officially"
                | "big"
                | "news"
                | "so"
                | "well"
                | "guess"
                | "what"
                | "yes"
                | "also"
                | "actually"
                | "and"
                | "still"
                | "now"
                | "update"
                | "oh"
                | "yeah"
                | "since"
                | "after"
        )
    })
}

// ---------------------------------------------------------------------------------------------
// The general reader: whom a sentence is about (the gates of `slot_of`), then what a verb or a
// noun of an attribute says, its value the name it governs.
// ---------------------------------------------------------------------------------------------

/// People other than the speaker: a sentence whose subject is one of them ("my sister", "our
/// neighbours", "my friend's wedding") tells of another's life.
const PEOPLE: &[&str] = &[
    "sister",
    "brother",
    "mum",
    "mom",
    "mother",
    "dad",
    "father",
    "parents",
    "friend",
    "friends",
    "cousin",
    "cousins",
    "aunt",
    "uncle",
    "neighbour",
    "neighbor",
    "neighbours",
    "neighbors",
    "boss",
    "coworker",
    "coworkers",
    "colleague",
    "colleagues",
    "husband",
    "wife",
    "son",
    "daughter",
    "kids",
    "niece",
    "nephew",
    "grandma",
    "grandpa",
    "grandmother",
    "grandfather",
    "roommate",
    "flatmate",
    "housemate",
    "manager",
    "partner",
    "boyfriend",
    "girlfriend",
    "fiance",
    "fiancé",
    "fiancee",
    "fiancée",
    "sibling",
    "siblings",
    "children",
    "child",
    "bestie",
    "buddy",
    "ex",
    "teacher",
    "classmate",
    "grandparents",
];

/// Words a sentence may open with before its subject ("Oh, and my sister moved").
const OPENERS: &[&str] = &[
    "oh",
    "so",
    "well",
    "and",
    "also",
    "anyway",
    "btw",
    "honestly",
    "actually",
    "guess",
    "what",
    "big",
    "news",
    "fun",
    "update",
    "sadly",
    "ok",
    "okay",
    "yeah",
    "yes",
    "wow",
    "hey",
    "by",
    "the",
    "way",
    "apparently",
    "just",
    "recently",
    "finally",
    "then",
    "quick",
    "good",
];

/// The position of a sentence's subject: its first word past the openers.
fn subject_at(t: &[(String, &str)]) -> usize {
    let mut k = 0;
    while k < t.len() && k < 5 && OPENERS.contains(&t[k].0.as_str()) {
        // "The cat is Milo now": "the" opens a subject, not a filler.
        if t[k].0 == "the" && t.get(k + 1).is_none_or(|x| x.0 != "way") {
            break;
        }
        k += 1;
    }
    k.min(t.len().saturating_sub(1))
}

/// Whether sentence `t` is about someone other than the speaker: its subject is a third
/// person ("he", "they"), or another's relative or friend ("my sister", "our neighbours", "my
/// friend's wedding"), not together with the speaker ("my wife and I").
pub fn about_another(t: &[(String, &str)]) -> bool {
    let k = subject_at(t);
    let Some((w, _)) = t.get(k) else {
        return false;
    };
    let with_me = |end: usize| {
        t.get(end).is_some_and(|x| x.0 == "and")
            && t.get(end + 1)
                .is_some_and(|x| matches!(x.0.as_str(), "i" | "me"))
    };
    if matches!(
        w.as_str(),
        "he" | "she"
            | "they"
            | "he's"
            | "she's"
            | "they're"
            | "they've"
            | "his"
            | "her"
            | "their"
            | "your"
            | "you"
            | "you're"
            | "you've"
            | "someone"
            | "somebody"
            | "everyone"
    ) {
        return !with_me(k + 1);
    }
    if matches!(w.as_str(), "my" | "our") {
        let mut i = k + 1;
        while i < t.len()
            && i < k + 4
            && matches!(
                t[i].0.as_str(),
                "best"
                    | "older"
                    | "younger"
                    | "big"
                    | "little"
                    | "oldest"
                    | "eldest"
                    | "twin"
                    | "close"
                    | "good"
                    | "dear"
            )
        {
            i += 1;
        }
        if let Some((noun, _)) = t.get(i) {
            if PEOPLE.contains(&noun.trim_end_matches("'s")) {
                return !with_me(i + 1);
            }
        }
    }
    false
}

/// Whether the sentence is a supposition or a wish: it opens with "if" or "imagine", or says
/// "someday" or "one day".
fn supposed(t: &[(String, &str)]) -> bool {
    matches!(
        t.get(subject_at(t)).map(|x| x.0.as_str()),
        Some("if" | "imagine" | "suppose" | "ideally")
    ) || t.iter().any(|(l, _)| l == "someday")
        || find(t, "one day").is_some()
}

/// Whether a sentence without a subject is the speaker's: it opens with a verb of the past
/// ("Got engaged to Jamie!", "Said goodbye to the Honda today", "Just signed a lease").
fn subjectless(t: &[(String, &str)]) -> bool {
    let mut k = 0;
    while k < t.len() && matches!(t[k].0.as_str(), "just" | "finally" | "so" | "and" | "also") {
        k += 1;
    }
    t.get(k).is_some_and(|(l, _)| {
        PAST.contains(&l.as_str())
            || matches!(
                l.as_str(),
                "said"
                    | "sold"
                    | "signed"
                    | "started"
                    | "quit"
                    | "left"
                    | "parted"
                    | "moved"
                    | "adopted"
                    | "joined"
                    | "switched"
                    | "headed"
                    | "relocated"
                    | "packed"
                    | "handed"
                    | "landed"
                    | "accepted"
                    | "began"
                    | "renamed"
                    | "cancelled"
                    | "canceled"
                    | "scrapped"
                    | "dropped"
            )
    })
}

/// Whether a comma (a colon, a dash) stands between word `k - 1` and word `k` of `s`.
fn comma_before(s: &str, k: usize) -> bool {
    let w = words(s);
    let (Some(&(at, _)), Some(&(p, pw))) = (w.get(k), k.checked_sub(1).and_then(|p| w.get(p)))
    else {
        return false;
    };
    s.get(p + pw.len()..at)
        .is_some_and(|gap| gap.contains([',', ':', ';', '—', '–']))
}

/// The capitalised names of `t` at their positions, the sentence's first word only when it is
/// not an opener, a person or a pet word ("Boise is where", "Luna, Bruno").
fn names_in(t: &[(String, &str)], s: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut k = 0;
    while k < t.len() {
        let l = t[k].0.as_str();
        let skip = MONTHS.contains(&l)
            || OPENERS.contains(&l)
            || PEOPLE.contains(&l)
            || PETS.contains(&l.trim_end_matches("'s"))
            || STOPS.contains(&l)
            || DETERMINERS.contains(&l)
            || matches!(
                l,
                "me" | "correction" | "sorry" | "oops" | "wait" | "meet" | "save"
            );
        if !skip && !NOT_NAMES.contains(&l) {
            if let Some(n) = name_at(t, k) {
                // A name ends at a comma: "renaming Luna, Bruno just suits".
                let len = (1..n.split(' ').count())
                    .find(|&j| comma_before(s, k + j))
                    .unwrap_or(n.split(' ').count());
                let n = t[k..k + len]
                    .iter()
                    .map(|(l, _)| l.as_str())
                    .collect::<Vec<_>>()
                    .join(" ");
                out.push((k, n));
                k += len;
                continue;
            }
        }
        k += 1;
    }
    out
}

/// Whether the value at `k` is the old one of a sentence that names two: "instead of Max",
/// "from Lisbon", "I left Harbor Clinic", "gave up the place in Ghent", "Max never stuck".
fn old_value_at(t: &[(String, &str)], k: usize) -> bool {
    let before = |n: usize, cues: &[&str]| before_within(t, k, n, cues);
    (k >= 2 && t[k - 2].0 == "instead" && t[k - 1].0 == "of")
        || (before(1, &["from"]) && !before(2, &["offer"]))
        || before(
            1,
            &[
                "renaming", "renamed", "not", "left", "leaving", "quit", "over", "than", "off",
            ],
        )
        || before(
            3,
            &[
                "goodbye", "after", "notice", "miss", "used", "years", "quitting", "resigned",
            ],
        )
        || before(
            5,
            &["gave", "left", "leaving", "quit", "lost", "fired", "laid"],
        )
        || t.get(k + 1).is_some_and(|x| {
            matches!(
                x.0.as_str(),
                "never" | "didn't" | "wasn't" | "was" | "doesn't"
            )
        })
}

/// The new value of the names of `t` that `fits`: the first not marked old, else none.
fn new_name(t: &[(String, &str)], s: &str, fits: impl Fn(usize, &str) -> bool) -> Option<String> {
    names_in(t, s)
        .into_iter()
        .filter(|(k, n)| fits(*k, n) && !old_value_at(t, *k))
        .map(|(_, n)| n)
        .next()
}

/// Whether the sentence tells of a stay, not a home: a trip, a visit, a holiday.
fn a_visit(t: &[(String, &str)]) -> bool {
    t.iter().any(|(l, _)| {
        matches!(
            l.as_str(),
            "trip"
                | "visiting"
                | "visit"
                | "vacation"
                | "holiday"
                | "conference"
                | "weekend"
                | "business"
                | "tour"
                | "stay"
                | "staying"
                | "stayed"
                | "flight"
                | "hotel"
                | "airbnb"
                | "honeymoon"
                | "festival"
                | "layover"
        )
    })
}

/// Where the speaker lives, read from a word of dwelling or of moving that is the speaker's
/// ("Just signed a lease in Denver", "I'm writing this from my new apartment in Austin",
/// "We packed up and headed to Boise for good", "I'm officially a resident of Bergen", "Boise
/// is where I'm based now"): the place it governs (after "to", "in", "of"), not one marked old
/// ("after all those years in Dublin", "I gave up the place in Ghent").
fn residence(t: &[(String, &str)], s: &str) -> Option<Slot> {
    let has = |c: &str| find(t, c).is_some();
    let dwelling = [
        "lease",
        "renting",
        "rent",
        "flat",
        "apartment",
        "house",
        "condo",
        "home",
        "place",
        "resident",
        "based",
        "movers",
        "unpacking",
        "unpacked",
        "moved",
        "moving",
        "relocated",
        "live",
        "living",
        "settled",
    ];
    let cue = t.iter().position(|(l, _)| dwelling.contains(&l.as_str()));
    let going = has("for good") || has("the jump to") || has("the move to") || has("made the move");
    let cue = cue.or_else(|| going.then_some(0))?;
    if a_visit(t) || denied_at(t, cue) || future_at(t, cue) || past_at(t, cue) {
        return None;
    }
    // A dwelling noun is the speaker's: "my new apartment", "our place", "a lease".
    let noun = matches!(
        t[cue].0.as_str(),
        "flat" | "apartment" | "house" | "condo" | "home" | "place"
    );
    if noun && !going && !before_within(t, cue, 3, &["my", "our", "a", "new"]) {
        return None;
    }
    // The speaker's: their verb, their dwelling, or a sentence of theirs ("The movers dropped
    // our stuff off in Dublin"), not a relative clause of another's ("a guy who lives in").
    let own = own_subject(t, cue)
        || before_within(t, cue, 3, &["my", "our"])
        || subjectless(t)
        || t.iter().any(|(l, _)| {
            matches!(
                l.as_str(),
                "i'm" | "we're" | "i" | "we" | "i've" | "we've" | "our" | "my" | "us"
            )
        });
    if !own || before_within(t, cue, 2, &["who", "that", "which", "whose"]) {
        return None;
    }
    let preps = |k: usize| {
        k > 0
            && matches!(
                t[k - 1].0.as_str(),
                "to" | "in" | "of" | "into" | "off" | "for"
            )
    };
    let to_first = has("to")
        && (going
            || t.iter()
                .any(|(l, _)| matches!(l.as_str(), "moved" | "relocated" | "headed" | "moving")));
    let mut candidates: Vec<(usize, String)> = names_in(t, s)
        .into_iter()
        .filter(|(k, _)| {
            let dropped_off = *k > 0 && t[k - 1].0 == "off" && !has("movers");
            !old_value_at(t, *k) && !dropped_off
        })
        .collect();
    // "Boise is where I'm based": the name opening the sentence.
    let where_i = find(t, "is where")
        .is_some_and(|k| k >= 1 && candidates.first().is_some_and(|(c, _)| *c < k));
    if !where_i {
        candidates.retain(|(k, _)| preps(*k));
    }
    if to_first {
        if let Some((_, n)) = candidates.iter().find(|(k, _)| t[k - 1].0 == "to") {
            return slot("home", "", Some(n.clone()));
        }
    }
    candidates
        .into_iter()
        .next()
        .and_then(|(_, n)| slot("home", "", Some(n)))
}

/// Where the speaker works, read from a word of work that is the speaker's ("brought me on",
/// "I switched employers, I'm with Greenleaf Bakery", "At Maple Software I'm an accountant",
/// "I got an offer from Harbor Clinic and took it", "on Monday I began at Summit Bank"): the
/// employer it governs, not one marked old ("I handed in my notice at", "said goodbye to").
fn employer(t: &[(String, &str)], s: &str) -> Option<Slot> {
    let has = |c: &str| find(t, c).is_some();
    if t.iter().any(|(l, _)| {
        matches!(
            l.as_str(),
            "interview"
                | "interviewing"
                | "applied"
                | "apply"
                | "applying"
                | "volunteer"
                | "volunteering"
                | "visited"
                | "visit"
                | "tour"
        )
    }) {
        return None;
    }
    let working = [
        "work",
        "working",
        "job",
        "employed",
        "employer",
        "employers",
        "hired",
        "role",
        "position",
        "shift",
        "shifts",
        "started",
        "start",
        "began",
        "offer",
        "colleagues",
        "joined",
        "boss",
        "brought",
        "took",
        "career",
        "salary",
        "promoted",
    ];
    // "I've been a nurse with Northwind Logistics", "At Summit Bank I'm a paramedic".
    let role = [
        "i'm a",
        "i'm an",
        "i've been a",
        "i've been an",
        "i am a",
        "i am an",
    ]
    .iter()
    .filter_map(|c| find(t, c))
    .min();
    let cue = t
        .iter()
        .position(|(l, _)| working.contains(&l.as_str()))
        .or(role)?;
    if denied_at(t, cue) || future_at(t, cue) || past_at(t, cue) {
        return None;
    }
    // "Harbor Clinic brought me on as an electrician", "Summit Bank took me on".
    for c in [
        "brought me on",
        "took me on",
        "hired me",
        "brought me in",
        "signed me",
    ] {
        if let Some(k) = find(t, c) {
            if let Some(n) = name_before(t, k).filter(|_| k <= 4) {
                return slot("work", "", Some(n));
            }
        }
    }
    let as_role = has("as a") || has("as an") || role.is_some();
    let own = own_subject(t, cue)
        || subjectless(t)
        || t.iter()
            .any(|(l, _)| matches!(l.as_str(), "i" | "i'm" | "i've" | "me" | "my"));
    if !own {
        return None;
    }
    new_name(t, s, |k, n| {
        let prior = k.checked_sub(1).map(|p| t[p].0.as_str()).unwrap_or("");
        match prior {
            "at" | "for" | "by" | "join" | "joined" => true,
            // "an offer from", "I'm with Greenleaf Bakery these days as a nurse".
            "from" => t[..k].iter().any(|(l, _)| l == "offer"),
            "with" => n.contains(' ') && (as_role || has("employer") || has("employers")),
            _ => false,
        }
    })
    .and_then(|n| slot("work", "", Some(n)))
}

/// A pet's name, read from a pet word and a word of naming or an apposition ("I adopted a cat
/// last year, Hazel, and", "The cat is Milo now, Max never really stuck", "We decided to call
/// the cat Milo instead of Max", "the dog's name is Max from now on", "our puppy has a new
/// name, Milo"): the name not marked old.
fn pet_named(t: &[(String, &str)], s: &str) -> Option<Slot> {
    let kind_at = t
        .iter()
        .position(|(l, _)| PETS.contains(&l.trim_end_matches("'s")))?;
    let kind = t[kind_at].0.trim_end_matches("'s").to_string();
    let naming = t.iter().any(|(l, _)| {
        matches!(
            l.as_str(),
            "name"
                | "named"
                | "called"
                | "call"
                | "calling"
                | "renamed"
                | "renaming"
                | "rename"
                | "nickname"
        )
    });
    let owned = before_within(
        t,
        kind_at,
        3,
        &["my", "our", "the", "a", "an", "adopted", "new"],
    );
    if !owned || future_at(t, kind_at) {
        return None;
    }
    let n = new_name(t, s, |k, _| {
        naming
            // "The cat is Milo now".
            || (k >= 2 && t[k - 1].0 == "is" && k - 2 == kind_at)
            // "I adopted a cat last year, Hazel, and".
            || (k > kind_at && k <= kind_at + 5 && comma_before(s, k))
    })?;
    slot("pet", &kind, Some(n))
}

/// Words that are capitalised but name no place or person.
const NOT_NAMES: &[&str] = &[
    "i",
    "i'm",
    "i've",
    "i'd",
    "i'll",
    "this",
    "that",
    "it",
    "here",
    "there",
    "which",
    "what",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "we",
    "my",
    "our",
    "the",
    "a",
    "an",
    "home",
    "now",
    "so",
    "and",
    "but",
    "honestly",
    "yes",
    "no",
    "well",
];

/// A place named at `i` ("the" skipped): not a month or a day.
fn place_at(t: &[(String, &str)], i: usize) -> Option<String> {
    let i = if t.get(i).is_some_and(|x| x.0 == "the") {
        i + 1
    } else {
        i
    };
    let first = t.get(i)?.0.as_str();
    if MONTHS.contains(&first) || NOT_NAMES.contains(&first) {
        return None;
    }
    name_at(t, i)
}

/// The capitalised name that ends just before `at` ("Porto is home now").
fn name_before(t: &[(String, &str)], at: usize) -> Option<String> {
    let capital = |k: usize| t[k].1.chars().next().is_some_and(char::is_uppercase);
    let mut k = at;
    while k > 0 && at - k < 3 && capital(k - 1) && !NOT_NAMES.contains(&t[k - 1].0.as_str()) {
        k -= 1;
    }
    (k < at && !MONTHS.contains(&t[k].0.as_str())).then(|| {
        t[k..at]
            .iter()
            .map(|(l, _)| l.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    })
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
            "saving up for",
            "saving for",
            "deposit on",
            "want to do",
        ],
    )
    // "I've got a trip to Japan lined up for the autumn".
    .or_else(|| {
        find(t, "lined up").and_then(|k| {
            (0..k)
                .find(|&i| matches!(t[i].0.as_str(), "got" | "have"))
                .map(|i| i + 1)
        })
    }) {
        let words: Vec<String> = t[at..]
            .iter()
            .map(|(l, _)| l.clone())
            .filter(|l| !crate::text::is_stopword(l) && l.len() > 2)
            .collect();
        let never = t[at..]
            .iter()
            .take(2)
            .any(|(l, _)| negated.contains(&l.as_str()));
        // "I'm doing my part, volunteering at a shelter" is what the speaker does now; "next
        // year I'm doing a cooking class" a plan.
        let ongoing = find(t, "i'm doing").is_some_and(|k| k + 2 == at)
            && !t.iter().any(|(l, _)| {
                matches!(
                    l.as_str(),
                    "next"
                        | "tomorrow"
                        | "soon"
                        | "later"
                        | "year"
                        | "spring"
                        | "summer"
                        | "autumn"
                        | "fall"
                        | "winter"
                        | "weekend"
                        | "month"
                        | "week"
                )
            });
        if !words.is_empty() && !never && !ongoing {
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
    // "I picked up a camper van second-hand", "I've had a small sailboat for ages".
    let bought = (find(t, "picked up").is_some()
        && t.iter().any(|(l, _)| {
            matches!(
                l.as_str(),
                "second-hand" | "secondhand" | "second" | "used" | "cheap"
            )
        }))
    .then(|| after(t, &["picked up"]))
    .flatten()
    .or_else(|| {
        after(t, &["i've had", "we've had"])
            .filter(|&k| t[k..].iter().take(6).any(|(l, _)| l == "for"))
    });
    if let Some(at) =
        bought.filter(|&k| t.get(k).is_some_and(|x| matches!(x.0.as_str(), "a" | "an")))
    {
        let v = value(t, at, 3)?;
        let v = v
            .trim_end_matches(" second-hand")
            .trim_end_matches(" second")
            .to_string();
        let head = v.rsplit(' ').next().unwrap_or(&v).to_string();
        return slot("owns", &head, Some(v));
    }
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
            "i've got a",
            "i've got an",
            "we've got a",
            "we've got an",
            "we have a",
            "we have an",
            "i have got a",
            "i got myself a",
            "treated myself to",
            "treated ourselves to",
        ],
    ) {
        let v = value(t, at, 3)?;
        let head = v.rsplit(' ').next().unwrap_or(&v).to_string();
        // "I've got a tournament", "we have a question": no thing owned.
        if is_plan_kind(&head)
            || matches!(
                head.as_str(),
                "question"
                    | "idea"
                    | "feeling"
                    | "lot"
                    | "bit"
                    | "chance"
                    | "problem"
                    | "date"
                    | "job"
                    | "friend"
                    | "blast"
                    | "plan"
                    | "dream"
                    | "goal"
                    | "meeting"
                    | "appointment"
                    | "interview"
                    | "favor"
                    | "favour"
                    | "sense"
                    | "passion"
            )
        {
            return None;
        }
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
    }

    fn none(a: &str, k: &str) -> (String, String, Option<String>) {
        (a.into(), k.into(), None)
    }

    #[test]
    fn moves_however_said() {
        for (s, city) in [
            ("We moved from Lisbon to Porto in the spring.", "porto"),
            ("I just moved into a small apartment in Lisbon.", "lisbon"),
            ("I've moved to Porto, finally!", "porto"),
            ("Since moving to Porto I cycle everywhere.", "porto"),
            (
                "I packed everything up and we relocated to the Hague.",
                "hague",
            ),
            ("Porto is home now.", "porto"),
            ("Porto is where I live these days.", "porto"),
            (
                "I don't live in Lisbon anymore, I live in Porto now.",
                "porto",
            ),
            ("I've been living in Porto for two years.", "porto"),
            ("These days I'm based in Porto.", "porto"),
            ("I'm in Porto now, the move was worth it.", "porto"),
            ("We've settled into our new place in Porto.", "porto"),
            (
                "After ten years in Lisbon, I finally made the move to Porto.",
                "porto",
            ),
        ] {
            assert_eq!(v(s), some("home", "", city), "{s}");
        }
        // Not the speaker's home now: past, wished, another's.
        for s in [
            "I used to live in Lisbon.",
            "I miss living in Lisbon.",
            "We might move to Porto next year.",
            "I'm thinking of moving to Porto.",
            "My sister moved to Paris last year.",
            "I moved in January.",
            "I'm in Paris now for a conference.",
        ] {
            assert!(
                slot_of(s).is_none_or(|x| x.attribute != "home" || x.value.is_none()),
                "{s}: {:?}",
                slot_of(s)
            );
        }
        assert_eq!(v("I no longer live in Lisbon."), none("home", ""));
    }

    #[test]
    fn jobs_however_said() {
        for (s, employer) in [
            ("I left Harbor Clinic for Summit Bank.", "summit bank"),
            (
                "I joined Summit Bank as an analyst last month.",
                "summit bank",
            ),
            ("I got a job at Summit Bank!", "summit bank"),
            ("Summit Bank took me on as a cashier.", "summit bank"),
            (
                "I've been working at Summit Bank since March.",
                "summit bank",
            ),
            ("My first day at Summit Bank went well.", "summit bank"),
            ("I'm now at Summit Bank, new role and all.", "summit bank"),
            ("My new employer is Summit Bank.", "summit bank"),
            (
                "Work at Summit Bank is busy, I'm a teller there.",
                "summit bank",
            ),
        ] {
            assert_eq!(v(s), some("work", "", employer), "{s}");
        }
        for s in [
            "I used to work at Harbor Clinic.",
            "I applied for a job at Summit Bank.",
            "I'd love to work at Summit Bank someday.",
        ] {
            assert!(
                slot_of(s).is_none_or(|x| x.attribute != "work" || x.value.is_none()),
                "{s}: {:?}",
                slot_of(s)
            );
        }
        assert_eq!(
            v("I don't work at Harbor Clinic anymore."),
            none("work", "")
        );
    }

    #[test]
    fn partners_pets_counts_however_said() {
        assert_eq!(v("Sam and I split up."), none("partner", ""));
        assert_eq!(v("I'm not seeing Sam anymore."), none("partner", ""));
        assert_eq!(slot_of("I'm not seeing the point."), None);
        assert_eq!(v("We called it quits in May."), none("partner", ""));
        assert_eq!(v("Sam and I went our separate ways."), none("partner", ""));
        assert_eq!(
            v("Sam popped the question and I said yes!"),
            some("partner", "", "engaged to sam")
        );
        assert_eq!(
            v("Sam and I got married in June."),
            some("partner", "", "married to sam")
        );
        assert_eq!(
            v("Sam is my girlfriend now."),
            some("partner", "", "dating sam")
        );
        assert_ne!(
            slot_of("We split the bill."),
            Some(Slot {
                attribute: "partner",
                key: String::new(),
                value: None,
                words: Vec::new()
            })
        );
        assert!(
            slot_of("My parents divorced when I was ten.").is_none_or(|x| x.attribute != "partner")
        );
        assert_eq!(v("We renamed Max to Buddy."), some("pet", "", "buddy"));
        assert_eq!(
            v("We changed the dog's name to Buddy."),
            some("pet", "dog", "buddy")
        );
        assert_eq!(
            v("The kitten answers to Ziggy now."),
            some("pet", "kitten", "ziggy")
        );
        assert_eq!(v("We're up to five cats now."), some("count", "cat", "5"));
        assert_eq!(
            v("We adopted another cat, so we have four now."),
            some("count", "cat", "4")
        );
        assert!(slot_of("We used to have three cats.").is_none_or(|x| x.attribute != "count"));
    }

    #[test]
    fn favorites_dates_sales_corrections_however_said() {
        let x = slot_of("I'm really into green tea these days.").unwrap();
        assert_eq!(
            (x.attribute, x.value.clone()),
            ("favorite", Some("green tea".into()))
        );
        assert!(changes_favorite(&x, "ann|favorite|drink", "coffee"));
        let y = slot_of("I'm more into reading and fantasy novels.").unwrap();
        assert!(!changes_favorite(&y, "ann|favorite|one to jam", "theme"));
        // One spelling for a date.
        assert_eq!(
            v("Our wedding is on June 12th."),
            some("date", "wedding", "june 12")
        );
        assert_eq!(
            v("The wedding is on 12 June."),
            some("date", "wedding", "june 12")
        );
        assert_eq!(
            v("July 3 is the new date for the wedding."),
            some("date", "wedding", "july 3")
        );
        assert_eq!(v("I got rid of my old piano."), none("owns", "piano"));
        assert_eq!(
            v("A neighbour bought the sailboat."),
            none("owns", "sailboat")
        );
        assert_eq!(v("I don't have the Vespa anymore."), none("owns", "vespa"));
        assert_eq!(
            v("The trip to Japan fell through."),
            ("plan".into(), "".into(), None)
        );
        assert_eq!(
            v("Quick correction: it's nurse, not baker."),
            some("latest", "baker", "nurse")
        );
        assert_eq!(
            v("Sorry, I meant Porto, not Lisbon."),
            some("latest", "lisbon", "porto")
        );
    }

    #[test]
    fn passing_mentions() {
        assert!(mentions(
            "home",
            "",
            "tallinn",
            "Tallinn is lovely, I'm glad I live here."
        ));
        assert!(!mentions(
            "home",
            "",
            "tallinn",
            "I used to live in Tallinn."
        ));
        assert!(mentions(
            "work",
            "",
            "harbor clinic",
            "Another long shift at Harbor Clinic today."
        ));
        assert!(mentions(
            "owns",
            "sailboat",
            "small sailboat",
            "I spent Sunday fixing up my sailboat."
        ));
        assert!(!mentions(
            "owns",
            "sailboat",
            "small sailboat",
            "Is your sailboat ok?"
        ));
    }

    #[test]
    fn the_general_reader_carries_to_other_wordings() {
        for (s, want) in [
            (
                "Just signed a lease in Denver, so that's where you'll find me.",
                some("home", "", "denver"),
            ),
            (
                "We packed up the whole flat and headed to Boise for good.",
                some("home", "", "boise"),
            ),
            (
                "Boise is where I'm based now, I gave up the place in Ghent.",
                some("home", "", "boise"),
            ),
            (
                "The movers dropped our stuff off in Dublin on Tuesday.",
                some("home", "", "dublin"),
            ),
            (
                "Harbor Clinic brought me on as an electrician, I started this week.",
                some("work", "", "harbor clinic"),
            ),
            (
                "I handed in my notice at Summit Bank and started as a nurse at Harbor Clinic.",
                some("work", "", "harbor clinic"),
            ),
            (
                "At Maple Software I'm an accountant, mostly day shifts.",
                some("work", "", "maple software"),
            ),
            (
                "I got an offer from Lakeside Library and took it.",
                some("work", "", "lakeside library"),
            ),
            ("I lost my job at Door Dash this month.", none("work", "")),
            (
                "We ended up renaming Luna, Bruno just suits the puppy better.",
                some("pet", "puppy", "bruno"),
            ),
            (
                "The cat is Milo now, Max never really stuck.",
                some("pet", "cat", "milo"),
            ),
            (
                "I adopted a rabbit last year, Toffee, and she's the sweetest.",
                some("pet", "rabbit", "toffee"),
            ),
            ("Me and Casey split last month.", none("partner", "")),
            ("Avery broke up with me last weekend.", none("partner", "")),
            (
                "Jordan is officially my fiancé now.",
                some("partner", "", "engaged to jordan"),
            ),
            (
                "Another guinea pig joined the family, which makes four.",
                some("count", "guinea pig", "4"),
            ),
            (
                "Coffee has always been my drink of choice.",
                some("favorite", "drink", "coffee"),
            ),
            (
                "Honestly tennis has overtaken cricket as my favourite sport.",
                some("favorite", "sport", "tennis"),
            ),
            (
                "If I had to pick one season, it'd be autumn.",
                some("favorite", "season", "autumn"),
            ),
            (
                "My older sister has been a paramedic for years.",
                some("about", "sister", "paramedic"),
            ),
            (
                "I'm originally from Halifax.",
                some("about", "hometown", "halifax"),
            ),
            (
                "I own a red Honda, believe it or not.",
                some("owns", "honda", "red honda"),
            ),
        ] {
            assert_eq!(v(s), want, "{s}");
        }
        assert_eq!(
            v("I pulled the plug on the road trip and asked for a refund.").0,
            "plan"
        );
    }

    #[test]
    fn another_life_or_a_wish_states_no_slot_of_the_speaker() {
        for s in [
            "My sister just moved to Krakow, she loves it.",
            "My wife started a new job at Orbit Freight.",
            "My brother just got hired at Blue Heron Press.",
            "I have an interview at Orbit Freight next week.",
            "If I won the lottery I'd live in Osaka.",
            "I might move to Quito someday.",
            "My neighbour has seven goats.",
            "My cousin just got engaged to Dana!",
            "My cousin cancelled her ski trip.",
            "My dad sold his kayak.",
            "My friend's wedding is on 14 March.",
            "My cousin's dog is called Scout.",
            "My husband grew up in Bristol.",
            "If I ever get another cat I'll call it Mochi.",
            "I met a guy who lives in Seville.",
        ] {
            assert_eq!(slot_of(s), None, "{s}");
        }
        // What the speaker says of a relative or a partner is theirs to say.
        assert_eq!(v("My sister is a nurse."), some("about", "sister", "nurse"));
        assert_eq!(
            v("My boyfriend Alex is taking me to the coast."),
            some("partner", "", "dating alex")
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
        // "I mean" is a filler, not a correction.
        assert_eq!(slot_of("I mean, it's so great to see you."), None);
    }
}
