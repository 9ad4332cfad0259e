//! Claims as facts (SPEC §2.2): which sentences of a message state something, how a kept
//! sentence is written as a claim, and how many a message keeps.
//!
//! - Questions, greetings, thanks, reactions and fillers state nothing: [`is_question`],
//!   [`is_chatter`]. Their messages stay sources (and stay retrievable); they make no claim.
//! - A claim is written in the third person with the speaker named ([`third_person`]): `I`,
//!   `me` become the speaker, `my` their, `you` the addressee, the verb after a new subject
//!   agrees with it, a sentence without a subject ("Lost my job yesterday") gets the speaker,
//!   relative dates are replaced by what they resolve to. The sentence itself stays the quote.
//! - A message keeps its most factual sentence and the others that score as facts
//!   ([`fact_score`], [`select`]): a linear score of surface features (length in content words,
//!   names, numbers, past tense, first against second person, reactions), its weights fitted on
//!   LoCoMo conv-26, conv-30, conv-41 and conv-42 to predict which sentences the annotated
//!   session observations restate (BENCHMARKS.md "Claims as facts").

use crate::temporal::Anchor;
use crate::text::{norm, words};

/// Who speaks and to whom, for writing a sentence in the third person.
#[derive(Debug, Clone, Copy)]
pub struct Voice<'a> {
    /// The speaker's name as written.
    pub speaker: &'a str,
    /// The addressee's name, when the conversation has exactly one other speaker.
    pub addressee: Option<&'a str>,
}

impl Voice<'_> {
    /// The lower-case names a vocative or chatter may use: each name and its first three
    /// letters ("mel" for Melanie), the speaker's first.
    pub fn names(&self) -> Vec<String> {
        [Some(self.speaker), self.addressee]
            .into_iter()
            .flatten()
            .flat_map(|n| {
                let l = norm(n);
                let short: String = l.chars().take(3).collect();
                [l, short]
            })
            .collect()
    }
}

/// Words that state nothing on their own: greetings, thanks, reactions, fillers, pronouns and
/// the commonest function words. A sentence with fewer than two other words is chatter.
const CHATTER: &[&str] = &[
    "a",
    "about",
    "absolutely",
    "again",
    "agree",
    "ah",
    "all",
    "am",
    "amazing",
    "an",
    "and",
    "are",
    "at",
    "aw",
    "awesome",
    "aww",
    "awww",
    "be",
    "been",
    "being",
    "best",
    "beautiful",
    "bye",
    "can",
    "care",
    "catch",
    "congrats",
    "congratulations",
    "cool",
    "could",
    "definitely",
    "did",
    "do",
    "does",
    "doing",
    "exactly",
    "fantastic",
    "feel",
    "feels",
    "felt",
    "for",
    "fun",
    "get",
    "glad",
    "going",
    "good",
    "got",
    "great",
    "ha",
    "haha",
    "happy",
    "has",
    "have",
    "hear",
    "hello",
    "hey",
    "hi",
    "hope",
    "how",
    "i",
    "i'm",
    "im",
    "in",
    "incredible",
    "is",
    "it",
    "it's",
    "its",
    "just",
    "keep",
    "know",
    "later",
    "let",
    "let's",
    "lets",
    "like",
    "lol",
    "look",
    "love",
    "loved",
    "lovely",
    "luck",
    "me",
    "mean",
    "means",
    "meant",
    "much",
    "my",
    "nice",
    "no",
    "of",
    "oh",
    "ok",
    "okay",
    "omg",
    "on",
    "really",
    "right",
    "see",
    "should",
    "so",
    "soon",
    "sound",
    "sounds",
    "such",
    "super",
    "sure",
    "sweet",
    "take",
    "talk",
    "thank",
    "thanks",
    "that",
    "that's",
    "thats",
    "the",
    "them",
    "there",
    "these",
    "they",
    "think",
    "this",
    "those",
    "to",
    "too",
    "totally",
    "true",
    "up",
    "was",
    "well",
    "were",
    "what",
    "will",
    "with",
    "wonderful",
    "would",
    "wow",
    "ya",
    "yay",
    "yeah",
    "yep",
    "yes",
    "you",
    "you're",
    "your",
    "youre",
    "yourself",
];

/// Interjections and discourse markers a claim drops from the start of its sentence.
const OPENERS: &[&str] = &[
    "hey",
    "hi",
    "hello",
    "wow",
    "oh",
    "ah",
    "aw",
    "aww",
    "yeah",
    "yes",
    "yep",
    "no",
    "nope",
    "ok",
    "okay",
    "well",
    "haha",
    "lol",
    "omg",
    "gosh",
    "thanks",
    "so",
    "and",
    "but",
    "anyway",
    "honestly",
    "actually",
    "totally",
    "definitely",
    "absolutely",
    "btw",
    "ugh",
    "hmm",
    "um",
    "sure",
    "right",
    "true",
    "cool",
    "great",
    "awesome",
    "nice",
    "plus",
    "also",
];

/// Words after which a sentence's verb is left as it is (modals, past forms).
const KEEP_VERB: &[&str] = &[
    "can",
    "could",
    "will",
    "would",
    "should",
    "might",
    "must",
    "may",
    "shall",
    "did",
    "didn't",
    "had",
    "hadn't",
    "was",
    "wasn't",
    "can't",
    "cannot",
    "won't",
    "wouldn't",
    "couldn't",
    "shouldn't",
    "went",
    "got",
    "saw",
    "made",
    "took",
    "came",
    "gave",
    "found",
    "felt",
    "left",
    "met",
    "ran",
    "bought",
    "brought",
    "thought",
    "told",
    "said",
    "knew",
    "began",
    "wrote",
    "read",
    "put",
    "set",
    "lost",
    "won",
    "sold",
    "kept",
    "spent",
    "sent",
    "built",
    "taught",
    "caught",
    "heard",
    "held",
    "led",
    "paid",
    "drove",
    "flew",
    "swam",
    "sang",
    "ate",
    "drank",
    "became",
    "fell",
    "forgot",
    "hit",
    "let",
    "quit",
    "cut",
    "hurt",
    "just",
    "also",
    "really",
    "still",
    "always",
    "never",
    "often",
    "usually",
    "recently",
    "finally",
    "already",
    "even",
    "totally",
    "definitely",
    "actually",
    "absolutely",
    "only",
    "both",
    "all",
    "too",
];

/// Words that open a sentence whose subject is the speaker, left out: "Lost my job yesterday".
const SUBJECTLESS: &[&str] = &[
    "lost", "started", "been", "got", "went", "had", "made", "took", "finished", "feeling",
    "looking", "gonna", "thinking", "need", "needed", "trying", "working", "planning", "hoping",
    "going", "loving", "saw", "tried", "bought", "found", "joined", "signed", "visited", "spent",
    "learned", "learnt", "picked", "figured", "decided", "moved", "wish", "wanted", "just",
];

/// Reactions (negative in the fact score).
const REACTIONS: &[&str] = &[
    "love",
    "loved",
    "great",
    "amazing",
    "awesome",
    "proud",
    "happy",
    "glad",
    "thanks",
    "thank",
    "cool",
    "wonderful",
    "fantastic",
    "incredible",
    "beautiful",
    "sweet",
    "nice",
    "fun",
    "exciting",
    "excited",
    "sounds",
    "hope",
    "wish",
    "congrats",
    "congratulations",
    "inspiring",
    "brave",
];

/// Generic advice and opinion words (negative in the fact score).
const GENERIC: &[&str] = &[
    "should", "can", "could", "might", "must", "always", "never", "everyone", "people", "life",
    "things",
];

/// Function words not counted as content in the fact score.
const FUNCTION: &[&str] = &[
    "a", "an", "the", "of", "to", "in", "on", "at", "for", "and", "or", "but", "is", "are", "was",
    "were", "be", "been", "it", "that", "this", "so", "just", "really", "too", "also", "very",
    "with",
];

const FIRST_PERSON: &[&str] = &[
    "i", "i'm", "i've", "i'll", "i'd", "my", "me", "myself", "we", "our", "us", "we're", "we've",
];
const SECOND_PERSON: &[&str] = &["you", "your", "you're", "you've", "yourself", "u"];

/// The fitted weights of [`fact_score`], in the order of its features.
const WEIGHTS: [f32; 18] = [
    -1.73, 0.05, -0.08, -0.17, 2.27, -0.84, 0.11, -0.48, -1.79, 0.44, 1.1, 0.56, 0.19, -0.46,
    -0.46, -0.67, -0.26, -0.06,
];

/// A sentence that scores at least this is kept besides its message's best one.
pub const KEEP_SCORE: f32 = 0.3;

fn is(table: &[&str], w: &str) -> bool {
    table.contains(&w)
}

/// A word in lower case, with ’ as ' ("I’m" → "i'm").
pub(crate) fn lower_word(w: &str) -> String {
    norm(&w.replace('’', "'"))
}

/// Lower-case words ([`lower_word`]).
fn lower(s: &str) -> Vec<String> {
    words(s).into_iter().map(|(_, w)| lower_word(w)).collect()
}

/// Whether a sentence asks rather than states.
pub fn is_question(s: &str) -> bool {
    s.trim_end_matches(['"', '\'', ')', ' ']).ends_with('?')
}

/// Whether a sentence is chatter: fewer than two words that are not [`CHATTER`] nor one of
/// `names` (lower-case; the speakers and their first three letters, "Mel" for Melanie).
pub fn is_chatter(s: &str, names: &[String]) -> bool {
    lower(s)
        .iter()
        .filter(|w| !is(CHATTER, w) && !names.contains(w))
        .take(2)
        .count()
        < 2
}

/// The probability that sentence `s` (the `position`-th of a message of `count` sentences)
/// states a fact a reader keeps.
pub fn fact_score(s: &str, position: usize, count: usize) -> f32 {
    let original = words(s);
    let w = lower(s);
    let content = w.iter().filter(|x| !is(FUNCTION, x)).count();
    let first = w.iter().filter(|x| is(FIRST_PERSON, x)).count();
    let second = w.iter().filter(|x| is(SECOND_PERSON, x)).count();
    let names = original
        .iter()
        .skip(1)
        .filter(|(_, x)| {
            x.chars().next().is_some_and(char::is_uppercase)
                && !is(&["i", "i'm", "i've", "i'll", "i'd"], &norm(x))
        })
        .count();
    let number = original
        .iter()
        .any(|(_, x)| x.chars().next().is_some_and(|c| c.is_ascii_digit()));
    let past = w
        .iter()
        .filter(|x| x.len() > 4 && x.ends_with("ed"))
        .count();
    let reactions = w.iter().filter(|x| is(REACTIONS, x)).count();
    let generic = w.iter().filter(|x| is(GENERIC, x)).count();
    let opener = w.first().map(String::as_str);
    let b = |x: bool| if x { 1.0 } else { 0.0 };
    let features = [
        1.0,
        b(position == 0),
        b(position == 1),
        position.min(4) as f32 / 4.0,
        content.min(20) as f32 / 20.0,
        b(content <= 3),
        first.min(3) as f32 / 3.0,
        b(first == 0),
        second.min(3) as f32 / 3.0,
        b(opener.is_some_and(|o| is(&["i", "i'm", "i've", "my", "we", "our", "we're"], o))),
        names.min(3) as f32 / 3.0,
        b(number),
        past.min(3) as f32 / 3.0,
        reactions.min(3) as f32 / 3.0,
        b(s.trim_end().ends_with('!')),
        generic.min(2) as f32 / 2.0,
        b(opener.is_some_and(|o| is(&["it's", "that's", "it", "that", "this"], o))),
        b(count >= 4),
    ];
    let z: f32 = features.iter().zip(WEIGHTS).map(|(f, w)| f * w).sum();
    1.0 / (1.0 + (-z).exp())
}

/// Which of a message's candidate sentences (`(position, sentence)`, the questions and chatter
/// already left out; `count` sentences in the message) become claims: the best scoring one and
/// every other scoring at least [`KEEP_SCORE`], in their order.
pub fn select(candidates: &[(usize, &str)], count: usize) -> Vec<usize> {
    let scores: Vec<f32> = candidates
        .iter()
        .map(|&(p, s)| fact_score(s, p, count))
        .collect();
    let best = scores
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1).then(b.0.cmp(&a.0)))
        .map(|(i, _)| i);
    (0..candidates.len())
        .filter(|&i| Some(i) == best || scores[i] >= KEEP_SCORE)
        .collect()
}

/// The third-person form of a present-tense verb: `have` → `has`, `go` → `goes`.
fn agree(verb: &str) -> String {
    match verb {
        "have" => "has".into(),
        "do" => "does".into(),
        "don't" => "doesn't".into(),
        "am" | "are" | "'m" | "'re" => "is".into(),
        "were" => "was".into(),
        "haven't" => "hasn't".into(),
        "aren't" => "isn't".into(),
        v if v.ends_with("ed")
            || v.contains('\'')
            || !v.chars().all(|c| c.is_ascii_lowercase()) =>
        {
            v.into()
        }
        v if v.ends_with('s')
            || v.ends_with("sh")
            || v.ends_with("ch")
            || v.ends_with('x')
            || v.ends_with('z')
            || v.ends_with('o') =>
        {
            format!("{v}es")
        }
        v if v.ends_with('y') && !v.ends_with("ay") && !v.ends_with("ey") && !v.ends_with("oy") => {
            format!("{}ies", &v[..v.len() - 1])
        }
        v => format!("{v}s"),
    }
}

/// Sentence `s` (a verbatim source sentence) written as a claim: see the module doc. `anchors`
/// are the temporal expressions of its message, replaced where they occur.
pub fn third_person(s: &str, voice: Voice<'_>, anchors: &[Anchor]) -> String {
    let toks = words(s);
    let speaker = voice.speaker;
    let names = voice.names();
    // Openers: a short label ("Big news: ..."), interjections and a vocative ("Wow, Jon!")
    // before the first stating word.
    let label = (0..toks.len().min(3)).find(|&k| {
        let end = toks[k].0 + toks[k].1.len();
        let next = toks.get(k + 1).map_or(s.len(), |t| t.0);
        s[end..next].contains(':')
    });
    let mut start = label.map_or(0, |k| k + 1);
    while start < toks.len() {
        let w = lower_word(toks[start].1);
        let vocative = voice.addressee.is_some_and(|_| names[2..].contains(&w));
        if is(OPENERS, &w) || vocative {
            start += 1;
        } else {
            break;
        }
    }
    if start == toks.len() {
        start = 0;
    }
    let mut out: Vec<String> = Vec::with_capacity(toks.len() + 2);
    let mut gaps: Vec<&str> = Vec::with_capacity(toks.len() + 2);
    let mut subject_next = false;
    for (k, &(at, w)) in toks.iter().enumerate().skip(start) {
        let end_prev = if k == start {
            at
        } else {
            toks[k - 1].0 + toks[k - 1].1.len()
        };
        let gap = if k == start { "" } else { &s[end_prev..at] };
        let lw = lower_word(w);
        let a = voice.addressee;
        let waiting = std::mem::take(&mut subject_next);
        let word: String = match (lw.as_str(), a) {
            ("i", _) => {
                subject_next = true;
                speaker.into()
            }
            ("i'm", _) => format!("{speaker} is"),
            ("i've", _) => format!("{speaker} has"),
            ("i'll", _) => format!("{speaker} will"),
            ("i'd", _) => format!("{speaker} would"),
            ("me", _) => speaker.into(),
            // "My sister is a nurse" names whose: "Leo's sister is a nurse".
            ("my", _) if k == start => format!("{speaker}'s"),
            ("my", _) => "their".into(),
            ("mine", _) => "theirs".into(),
            ("myself", _) => "themselves".into(),
            ("you", Some(a)) => {
                subject_next = true;
                a.into()
            }
            ("you're", Some(a)) => format!("{a} is"),
            ("you've", Some(a)) => format!("{a} has"),
            ("you'll", Some(a)) => format!("{a} will"),
            ("you'd", Some(a)) => format!("{a} would"),
            ("your" | "yours", Some(a)) => format!("{a}'s"),
            ("yourself", Some(a)) => a.into(),
            _ if waiting => {
                if is(KEEP_VERB, &lw) {
                    // "I just love it": the adverb waits for the verb.
                    subject_next = matches!(
                        lw.as_str(),
                        "just"
                            | "also"
                            | "really"
                            | "still"
                            | "always"
                            | "never"
                            | "often"
                            | "usually"
                            | "recently"
                            | "finally"
                            | "already"
                            | "even"
                            | "totally"
                            | "definitely"
                            | "actually"
                            | "absolutely"
                            | "only"
                    );
                    w.to_string()
                } else if w.chars().all(|c| c.is_ascii_lowercase() || c == '\'') {
                    agree(&lw)
                } else {
                    w.to_string()
                }
            }
            _ => w.to_string(),
        };
        gaps.push(gap);
        out.push(word);
    }
    let tail = toks.last().map_or(s.len(), |(at, w)| at + w.len());
    let mut text = String::with_capacity(s.len() + 16);
    for (gap, word) in gaps.iter().zip(&out) {
        text.push_str(gap);
        text.push_str(word);
    }
    text.push_str(&s[tail.min(s.len())..]);
    for a in anchors {
        if let Some(at) = text.find(&a.phrase) {
            let before = text[..at].trim_end().rsplit(' ').next().unwrap_or("");
            let lead = if matches!(
                norm(before).as_str(),
                "on" | "in" | "since" | "by" | "until"
            ) {
                ""
            } else if a.resolved.starts_with(|c: char| c.is_ascii_digit()) {
                "on "
            } else if a.resolved.starts_with(|c: char| c.is_ascii_uppercase()) {
                "in "
            } else {
                ""
            };
            text.replace_range(at..at + a.phrase.len(), &format!("{lead}{}", a.resolved));
        }
    }
    let first = toks.get(start).map(|(_, w)| norm(w)).unwrap_or_default();
    let mut text = capitalised(text.trim());
    if is(SUBJECTLESS, &first) && !text.starts_with(speaker) {
        let mut rest = text.clone();
        if let Some(c) = rest.get(..1) {
            let l = c.to_lowercase();
            rest.replace_range(..1, &l);
        }
        text = format!("{speaker} {rest}");
    }
    if !text.contains(speaker) {
        text = format!("{speaker}: {text}");
    }
    text
}

fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// Words a claim's content is not counted by (the speaker's prefix aside): articles,
/// prepositions, pronouns, auxiliaries.
const NOT_CONTENT: &[&str] = &[
    "a", "an", "the", "of", "to", "in", "on", "at", "for", "and", "or", "but", "is", "are", "was",
    "were", "be", "been", "i", "you", "he", "she", "it", "we", "they", "my", "your", "her", "his",
    "our", "their", "me", "him", "us", "them", "this", "that", "with", "so", "just", "really",
    "too", "also", "very",
];

/// Why `text` is not a claim a person keeps, checked on every claim whoever wrote it (the rules
/// and a model alike): a question, a fragment (fewer than three content words after the
/// speaker's prefix: a noun phrase is a keyword, not a claim), or not in the third person.
pub fn shape_error(text: &str) -> Option<&'static str> {
    if is_question(text) {
        return Some("a question");
    }
    let body = match text.split_once(": ") {
        Some((head, rest)) if head.chars().count() <= 40 => rest,
        _ => text,
    };
    let w = lower(body);
    if w.iter().filter(|x| !is(NOT_CONTENT, x)).take(3).count() < 3 {
        return Some("a fragment");
    }
    let quoted = body.contains('"') || body.contains('“');
    if !quoted
        && w.iter().any(|x| {
            is(
                &["i", "i'm", "i've", "i'll", "i'd", "me", "my", "myself"],
                x,
            )
        })
    {
        return Some("in the first person");
    }
    None
}

/// The claim an image caption makes: `Caroline shared a photo of a rainbow flag.`
pub fn caption_claim(speaker: &str, caption: &str) -> String {
    let caption = caption.trim().trim_end_matches('.');
    let l = caption.to_lowercase();
    let shown = [
        "a photo",
        "a picture",
        "an image",
        "a screenshot",
        "a drawing",
        "a painting",
        "a close up",
        "a closeup",
    ];
    if shown.iter().any(|p| l.starts_with(p)) {
        format!("{speaker} shared {caption}.")
    } else {
        format!("{speaker} shared an image of {caption}.")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;

    fn voice() -> Voice<'static> {
        Voice {
            speaker: "Caroline",
            addressee: Some("Melanie"),
        }
    }

    #[test]
    fn third_person_names_the_speaker_and_the_addressee() {
        let said = NaiveDate::from_ymd_opt(2023, 5, 8).unwrap();
        let s = "I went to a LGBTQ support group yesterday and it was so powerful.";
        let anchors = crate::temporal::resolve(s, said);
        assert_eq!(
            third_person(s, voice(), &anchors),
            "Caroline went to a LGBTQ support group on 7 May 2023 and it was so powerful."
        );
        assert_eq!(
            third_person("Hey Mel! I'm swamped with the kids & work.", voice(), &[]),
            "Caroline is swamped with the kids & work."
        );
        assert_eq!(
            third_person("Wow, I love my new job and I have two cats.", voice(), &[]),
            "Caroline loves their new job and Caroline has two cats."
        );
        assert_eq!(
            third_person("Big news: I got the job!", voice(), &[]),
            "Caroline got the job!"
        );
        assert_eq!(
            third_person("Your support means a lot to me.", voice(), &[]),
            "Melanie's support means a lot to Caroline."
        );
        assert_eq!(
            third_person("My sister is a baker.", voice(), &[]),
            "Caroline's sister is a baker."
        );
        assert_eq!(
            third_person("Lost my job as a banker.", voice(), &[]),
            "Caroline lost their job as a banker."
        );
        assert_eq!(
            third_person("The kids loved it.", voice(), &[]),
            "Caroline: The kids loved it."
        );
    }

    #[test]
    fn questions_and_chatter_are_no_claims() {
        let names = vec![
            "caroline".into(),
            "car".into(),
            "melanie".into(),
            "mel".into(),
        ];
        assert!(is_question("How did the interview go?"));
        assert!(!is_question("The interview went well."));
        for s in [
            "Hey Mel!",
            "Thanks so much!",
            "Wow, that's great!",
            "Good to see you!",
        ] {
            assert!(is_chatter(s, &names), "{s}");
        }
        assert!(!is_chatter("I adopted a puppy named Max.", &names));
    }

    #[test]
    fn the_most_factual_sentence_is_kept() {
        let sentences = [
            (0, "That's so sweet of you."),
            (
                1,
                "I started a pottery class in Boston last week with 3 friends.",
            ),
        ];
        let kept = select(&sentences, 3);
        assert!(kept.contains(&1), "{kept:?}");
        assert!(!kept.contains(&0), "{kept:?}");
    }

    #[test]
    fn claims_keep_a_shape() {
        assert_eq!(
            shape_error("Jon: How did the interview go?"),
            Some("a question")
        );
        assert_eq!(shape_error("Evan mentioned: Sam"), Some("a fragment"));
        assert_eq!(shape_error("Maya: a mug"), Some("a fragment"));
        assert_eq!(
            shape_error("Jon: I lost my job as a banker."),
            Some("in the first person")
        );
        assert_eq!(shape_error("Jon lost their job as a banker."), None);
        assert_eq!(
            shape_error("Caroline shared a photo of a rainbow flag."),
            None
        );
    }

    #[test]
    fn captions_become_claims_about_what_was_shared() {
        assert_eq!(
            caption_claim("Caroline", "a photo of a rainbow flag"),
            "Caroline shared a photo of a rainbow flag."
        );
        assert_eq!(
            caption_claim("Jon", "a man dancing on a stage"),
            "Jon shared an image of a man dancing on a stage."
        );
    }
}
