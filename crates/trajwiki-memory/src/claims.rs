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

/// Openings of a clause that asks, invites, offers or urges rather than states (lower-case
/// words; a sentence is [`is_request`] when its first clause opens so).
const REQUEST_CUES: &[&str] = &[
    "let's",
    "lets",
    "let us",
    "let me know",
    "let me see",
    "let me hear",
    "let me show",
    "would you like",
    "would you want",
    "would you love",
    "would you be",
    "do you want",
    "wanna",
    "how about",
    "why don't",
    "why not",
    "feel free",
    "don't hesitate",
    "keep me posted",
    "keep me updated",
    "keep me in the loop",
    "keep us posted",
    "keep us updated",
    "hit me up",
    "count me in",
    "you should",
    "you must",
    "you need to",
    "you have to",
    "you gotta",
    "you ought to",
    "you've got to",
    "you got to",
    "we should",
    "i'll let you know",
    "i will let you know",
    "will let you know",
    "check out",
    "check it",
    "check this",
    "check these",
    "check that",
    "check my",
    "check our",
    "check the",
    "try it",
    "try this",
    "try that",
    "try one",
    "try some",
    "come over",
    "come with",
    "come join",
    "come visit",
    "join me",
    "join us",
    "tell me",
    "send me",
    "show me",
    "give it a",
    "go for it",
    "take care",
    "enjoy",
    "have fun",
    "have a great",
    "have a good",
    "have a nice",
    "have a blast",
    "have a wonderful",
    "have a fantastic",
    "have an awesome",
    "have an amazing",
    "keep it up",
    "keep up",
    "keep going",
    "keep pushing",
    "keep at it",
    "keep rocking",
    "keep shining",
    "keep doing",
    "keep on",
    "keep chasing",
    "keep believing",
    "keep me",
    "stay strong",
    "stay positive",
    "stay safe",
    "stay tuned",
    "stay focused",
    "stay motivated",
    "stay passionate",
    "don't forget",
    "don't give up",
    "don't worry",
    "don't stop",
    "never give up",
    "remember to",
    "make sure",
    "hang in there",
    "look at",
];

/// Openings of a clause that wishes, thanks, greets or looks forward rather than states.
const WISH_CUES: &[&str] = &[
    "can't wait",
    "cannot wait",
    "can not wait",
    "i can't wait",
    "i cannot wait",
    "we can't wait",
    "hopefully",
    "wish you",
    "i wish you",
    "good luck",
    "best of luck",
    "fingers crossed",
    "thanks",
    "thank you",
    "thx",
    "congrats",
    "congratulations",
    "happy birthday",
    "see you",
    "see ya",
    "talk soon",
    "talk later",
    "talk to you",
    "catch you",
    "appreciate",
    "much appreciated",
    "cheers",
];

/// What a wish hopes for: "hope you", "I hope it", against "I hope to adopt" (a plan, a fact).
const HOPED: &[&str] = &[
    "you",
    "your",
    "it",
    "that",
    "things",
    "everything",
    "this",
    "they",
    "the",
    "all",
    "we",
    "he",
    "she",
    "his",
    "her",
    "their",
    "it's",
    "that's",
    "they're",
    "you're",
    "you'll",
    "he's",
    "she's",
    "everything's",
];

/// Words that open a conditional clause: "If you need anything, let me know."
const CONDITIONS: &[&str] = &["if", "when", "whenever", "once", "anytime"];

/// Adverbs a clause's opening is read without: "I really hope", "just let me know".
const SOFTENERS: &[&str] = &[
    "just",
    "really",
    "truly",
    "definitely",
    "totally",
    "sincerely",
    "please",
    "so",
    "also",
    "still",
];

/// The lower-case words of a sentence's first clause, and of its second when the first is a
/// condition, each with the byte offset where it ends; openers, vocatives and softeners left
/// out.
fn leading_clauses(s: &str, names: &[String]) -> Vec<Vec<(usize, String)>> {
    let toks = words(s);
    let mut clauses: Vec<Vec<(usize, String)>> = vec![Vec::new()];
    for (k, &(at, w)) in toks.iter().enumerate() {
        if k > 0 {
            let end = toks[k - 1].0 + toks[k - 1].1.len();
            let gap = &s[end..at];
            if gap.contains([',', ';', ':', '!', '—', '–', '(', ')'])
                || gap.contains(" - ")
                || gap.contains(". ")
            {
                clauses.push(Vec::new());
            }
        }
        clauses
            .last_mut()
            .expect("a clause")
            .push((at + w.len(), lower_word(w)));
    }
    for c in &mut clauses {
        let lead = c
            .iter()
            .take_while(|(_, w)| {
                (is(OPENERS, w) && w.as_str() != "thanks") || is(SOFTENERS, w) || names.contains(w)
            })
            .count();
        c.drain(..lead);
        // "I really hope", "I'll definitely let you know": the softener after the subject.
        if c.len() > 2 && is(SOFTENERS, &c[1].1) {
            c.remove(1);
        }
    }
    // "Hey Mel, would you like …": a clause of openers alone is no clause.
    clauses.retain(|c| !c.is_empty());
    let conditional = clauses
        .first()
        .and_then(|c| c.first())
        .is_some_and(|(_, w)| is(CONDITIONS, w) || w == "anything");
    clauses.truncate(if conditional { 2 } else { 1 });
    clauses
}

/// The number of words `cue` takes at the start of `clause`, when it opens it.
fn opens_with(clause: &[(usize, String)], cue: &str) -> Option<usize> {
    let cue: Vec<&str> = cue.split(' ').collect();
    (clause.len() >= cue.len() && cue.iter().zip(clause).all(|(c, (_, w))| c == w))
        .then_some(cue.len())
}

/// The request or wish a sentence opens with: the cue, and the byte offset in `s` after it.
fn request_cue(s: &str, names: &[String]) -> Option<(&'static str, usize)> {
    leading_clauses(s, names).iter().find_map(|c| {
        let cue = REQUEST_CUES
            .iter()
            .chain(WISH_CUES)
            .find_map(|&cue| Some((cue, opens_with(c, cue)?)));
        if let Some((cue, n)) = cue {
            return Some((cue, c[n - 1].0));
        }
        let from = usize::from(c.first().is_some_and(|(_, w)| w == "i" || w == "we"));
        (c.get(from).is_some_and(|(_, w)| w == "hope")
            && c.get(from + 1).is_some_and(|(_, w)| is(HOPED, w)))
        .then(|| ("hope", c[from].0))
    })
}

/// Whether a sentence (verbatim, first person) requests, invites, offers, urges, wishes, thanks
/// or greets rather than states: its first clause — its second after a condition ("If you need
/// anything, let me know") — opens with a request ("let me know", "let's", "you should", "would
/// you like", an imperative such as "check out", "keep it up", "have fun") or a wish ("can't
/// wait", "I hope you", "good luck", "thanks", "congrats"). `names` are the vocatives
/// ([`Voice::names`]). Such a sentence makes no claim as said; a fact said after it in a later
/// clause ("I'm having an art show in August - can't wait!") keeps the sentence a claim.
pub fn is_request(s: &str, names: &[String]) -> bool {
    request_cue(s, names).is_some()
}

/// What a request says happened, written as a statement about the exchange (for a message that
/// says nothing else): "Let's go to a dance class!" → "Jon invites Gina to go to a dance
/// class!", "Keep going for your dreams" → "Gina encourages Jon to keep going for Jon's
/// dreams", "Congrats on your degree!" → "Maria congratulates John on John's degree!", "Let me
/// know how it turns out" → "Nate asks Joanna to let Nate know how it turns out", "Can't wait to
/// surprise my family" → "Joanna is eager to surprise their family", "See you tomorrow at the
/// pub" → "John will see James on 27 August 2022 at the pub". `None` for a wish ("Have a blast
/// baking!", "Good luck!", "I hope you …") and whatever would not make a claim of the right
/// shape.
pub fn reported(s: &str, voice: Voice<'_>, anchors: &[Anchor]) -> Option<String> {
    let names = voice.names();
    let (cue, after) = request_cue(s, &names)?;
    let speaker = voice.speaker;
    let addressee = voice.addressee?;
    let first = cue.split(' ').next().unwrap_or(cue);
    // Where the reported clause starts (at the cue for an imperative that stays, after it
    // otherwise), and how the statement opens.
    let cue_start = {
        let toks = words(&s[..after]);
        toks[toks.len().saturating_sub(cue.split(' ').count())].0
    };
    let (lead, from) = match cue {
        "let's" | "lets" | "let us" => (format!("{speaker} invites {addressee} to"), after),
        "we should" => (format!("{speaker} suggests that they"), after),
        "would you like" | "would you want" | "would you love" => {
            (format!("{speaker} invites {addressee}"), after)
        }
        "you should" | "you need to" | "you have to" | "you gotta" | "you ought to"
        | "you've got to" | "you got to" => (format!("{speaker} advises {addressee} to"), after),
        "make sure" | "remember to" | "don't forget" | "try it" | "try this" | "try that"
        | "try one" | "try some" => (format!("{speaker} advises {addressee} to"), cue_start),
        "let me know"
        | "keep me posted"
        | "keep me updated"
        | "keep me in the loop"
        | "keep us posted"
        | "keep us updated"
        | "tell me"
        | "send me"
        | "show me"
        | "feel free"
        | "don't hesitate"
        | "hit me up" => (format!("{speaker} asks {addressee} to"), cue_start),
        "can't wait" | "cannot wait" | "can not wait" | "i can't wait" | "i cannot wait"
        | "we can't wait" => (format!("{speaker} is eager"), after),
        "thanks" | "thank you" | "thx" | "appreciate" | "much appreciated" => {
            (format!("{speaker} thanks {addressee}"), after)
        }
        "congrats" | "congratulations" => (format!("{speaker} congratulates {addressee}"), after),
        "see you" | "see ya" => (format!("{speaker} will see {addressee}"), after),

        _ if matches!(first, "keep" | "stay" | "never" | "hang" | "go")
            || cue == "don't give up"
            || cue == "don't stop" =>
        {
            (format!("{speaker} encourages {addressee} to"), cue_start)
        }
        _ => return None,
    };
    let rest = s[from..].trim_start_matches([' ', ',', '-', ':']);
    let rest = rest.trim();
    let rest_words = lower(rest);
    // "Thanks so much for the help": the thanks' object after "for"; the same for congrats
    // ("on", "for") and eagerness ("to", "for", "'til").
    let rest = match cue {
        "thanks" | "thank you" | "thx" | "appreciate" | "much appreciated" | "congrats"
        | "congratulations" | "can't wait" | "cannot wait" | "can not wait" | "i can't wait"
        | "i cannot wait" | "we can't wait" => {
            let skip = rest_words
                .iter()
                .take_while(|w| is(&["so", "much", "you", "a", "lot", "again", "all"], w))
                .count();
            let toks = words(rest);
            let (at, w) = *toks.get(skip)?;
            let w = lower_word(w);
            if !matches!(w.as_str(), "for" | "on" | "to" | "til" | "'til" | "until") {
                return None;
            }
            if cue.contains("wait") && w != "to" && w != "for" {
                return None;
            }
            &rest[at..]
        }
        _ => rest,
    };
    if cue.starts_with("would you") && !rest.starts_with("to ") {
        return None;
    }
    let body = third_person(rest, voice, anchors);
    let body = body
        .strip_prefix(&format!("{speaker}: "))
        .unwrap_or(&body)
        .to_string();
    if body.starts_with(speaker) && !rest.to_lowercase().starts_with("me") {
        return None;
    }
    let mut body_chars = body.chars();
    let body: String = match body_chars.next() {
        Some(c) if !body.starts_with(speaker) && !body.starts_with(addressee) => {
            c.to_lowercase().chain(body_chars).collect()
        }
        _ => body,
    };
    let text = format!("{lead} {body}");
    shape_error(&text).is_none().then_some(text)
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

/// The claim an image caption makes: `Caroline shared a photo of a rainbow flag.` A captioner's
/// "a photography of …" reads "a photo of …" (the caption stays the quote).
pub fn caption_claim(speaker: &str, caption: &str) -> String {
    let caption = caption.trim().trim_end_matches('.');
    let photography = "a photography of ";
    let caption = match caption.get(..photography.len()) {
        Some(head) if head.eq_ignore_ascii_case(photography) => {
            format!("a photo of {}", &caption[photography.len()..])
        }
        _ => caption.to_string(),
    };
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
    fn requests_invitations_and_wishes_are_no_claims() {
        let names = voice().names();
        for s in [
            "Let me know when you're ready to go birdwatching and we can plan a trip together.",
            "If you ever need anything, let me know.",
            "Whenever you need help, just let me know!",
            "Let's go to a dance class, it'll be so much fun!",
            "Hey Mel, would you like to join us for dinner on Friday?",
            "You should totally try the new trail by the lake.",
            "Check out this pic of my dog eating parsley!",
            "Keep it up, you're changing lives!",
            "Have a blast baking!",
            "I'll definitely let you know how it turns out.",
            "Can't wait for some birdwatching.",
            "I can't wait to hear all about it!",
            "I really hope you find a great spot soon!",
            "Hopefully it leads to new opportunities.",
            "Thanks for the advice, Mel!",
            "Congrats on finishing your degree!",
            "Good luck with the interview tomorrow.",
            "Stay safe and talk soon!",
            "Feel free to reach out any time.",
        ] {
            assert!(is_request(s, &names), "{s}");
        }
        for s in [
            "I went birdwatching with my dad last weekend.",
            "I'm having an art show in August - can't wait!",
            "I hope to adopt a child next year.",
            "I keep a journal of every hike.",
            "We had a great time at the beach.",
            "My friend let me borrow her camera.",
            "When I was a kid, my mom took me to the lake every summer.",
            "I thank my mentors for all their support.",
        ] {
            assert!(!is_request(s, &names), "{s}");
        }
    }

    #[test]
    fn a_request_reports_as_a_statement_about_the_exchange() {
        let gina = Voice {
            speaker: "Gina",
            addressee: Some("Jon"),
        };
        for (said, reported_as) in [
            (
                "Let's go to a dance class, it'll be so much fun!",
                Some("Gina invites Jon to go to a dance class, it'll be so much fun!"),
            ),
            (
                "Keep going for your dreams and don't quit!",
                Some("Gina encourages Jon to keep going for Jon's dreams and don't quit!"),
            ),
            (
                "Congrats on finishing your degree!",
                Some("Gina congratulates Jon on finishing Jon's degree!"),
            ),
            (
                "Let me know how the grand opening turns out!",
                Some("Gina asks Jon to let Gina know how the grand opening turns out!"),
            ),
            (
                "Can't wait to surprise my family with something delicious!",
                Some("Gina is eager to surprise their family with something delicious!"),
            ),
            (
                "We should plan a dance session soon!",
                Some("Gina suggests that they plan a dance session soon!"),
            ),
            (
                "You should totally try the new trail by the lake.",
                Some("Gina advises Jon to try the new trail by the lake."),
            ),
            ("Have a blast baking!", None),
            (
                "See you tomorrow at McGee's Pub!",
                Some("Gina will see Jon tomorrow at McGee's Pub!"),
            ),
            ("Good luck!", None),
            ("Thanks!", None),
            ("I hope you find a great spot soon!", None),
        ] {
            assert_eq!(reported(said, gina, &[]).as_deref(), reported_as, "{said}");
        }
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
        assert_eq!(
            caption_claim("Audrey", "a photography of a book with a page of birds"),
            "Audrey shared a photo of a book with a page of birds."
        );
    }
}
