//! Answer metrics with the conventions of the mem0 and A-Mem LoCoMo evaluations, so that our
//! numbers sit beside theirs:
//!
//! - **token F1**: both texts lower-cased, `.`, `,`, `!` and `?` replaced by spaces, split on
//!   whitespace ([`simple_tokenize`]); F1 of the two token *sets*; 0 when either text is empty.
//! - **BLEU-1**: NLTK's `sentence_bleu` with weights (1, 0, 0, 0) and smoothing method 1 on the
//!   lower-cased texts split by [`word_tokenize`]: the clipped unigram precision times the brevity
//!   penalty; 0 when no token matches.
//!
//! [`word_tokenize`] follows NLTK's word tokenizer (the improved Treebank rules) on one sentence:
//! punctuation split off (a comma or colon inside a number stays), the final period split off
//! (periods inside, as in `mr.` or `3.5`, stay), contractions split as Treebank does (`don't` →
//! `do n't`, `caroline's` → `caroline 's`, `cannot` → `can not`), double quotes written `` and ''.
//! NLTK first cuts a text into sentences with its Punkt model, which needs data files; answers
//! are short, and a text here is one sentence.

/// mem0's `simple_tokenize`: lower-cased, `.,!?` replaced by spaces, split on whitespace.
pub fn simple_tokenize(text: &str) -> Vec<String> {
    text.to_lowercase()
        .replace(['.', ',', '!', '?'], " ")
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// Token F1 of `prediction` against `reference` (see the module documentation).
pub fn token_f1(prediction: &str, reference: &str) -> f64 {
    let (prediction, reference) = (prediction.trim(), reference.trim());
    if prediction.is_empty() || reference.is_empty() {
        return 0.0;
    }
    let set = |t: &str| -> std::collections::BTreeSet<String> {
        simple_tokenize(t).into_iter().collect()
    };
    let (p, r) = (set(prediction), set(reference));
    if p.is_empty() || r.is_empty() {
        return 0.0;
    }
    let common = p.intersection(&r).count() as f64;
    let (precision, recall) = (common / p.len() as f64, common / r.len() as f64);
    if precision + recall > 0.0 {
        2.0 * precision * recall / (precision + recall)
    } else {
        0.0
    }
}

/// BLEU-1 of `prediction` against `reference` (see the module documentation).
pub fn bleu1(prediction: &str, reference: &str) -> f64 {
    let (prediction, reference) = (prediction.trim(), reference.trim());
    if prediction.is_empty() || reference.is_empty() {
        return 0.0;
    }
    let hyp = word_tokenize(&prediction.to_lowercase());
    let refs = word_tokenize(&reference.to_lowercase());
    if hyp.is_empty() {
        return 0.0;
    }
    let mut available: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for t in &refs {
        *available.entry(t.as_str()).or_default() += 1;
    }
    let mut matches = 0usize;
    for t in &hyp {
        if let Some(n) = available.get_mut(t.as_str()) {
            if *n > 0 {
                *n -= 1;
                matches += 1;
            }
        }
    }
    if matches == 0 {
        return 0.0;
    }
    let (c, r) = (hyp.len() as f64, refs.len() as f64);
    let brevity = if c > r { 1.0 } else { (1.0 - r / c).exp() };
    brevity * matches as f64 / c
}

/// Contractions Treebank splits inside a word (case-insensitive): the word's two parts.
const WHOLE_WORD_SPLITS: &[(&str, usize)] = &[
    ("cannot", 3),
    ("d'ye", 1),
    ("gimme", 3),
    ("gonna", 3),
    ("gotta", 3),
    ("lemme", 3),
    ("more'n", 4),
    ("wanna", 3),
    ("'tis", 2),
    ("'twas", 2),
];

/// Endings split off a word as their own token.
const CLITICS: &[&str] = &["n't", "'ll", "'re", "'ve", "'s", "'m", "'d"];

/// NLTK's word tokenization of one sentence (see the module documentation).
pub fn word_tokenize(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let chunks: Vec<&str> = text.split_whitespace().collect();
    for (ci, chunk) in chunks.iter().enumerate() {
        let last_chunk = ci + 1 == chunks.len();
        split_chunk(chunk, last_chunk, &mut out);
    }
    out
}

/// Tokens of one whitespace-free chunk.
fn split_chunk(chunk: &str, last_chunk: bool, out: &mut Vec<String>) {
    // Leading punctuation (a double quote there opens a quotation).
    let mut rest = chunk;
    while let Some(c) = rest.chars().next() {
        if c == '"' {
            out.push("``".into());
        } else if c == '\'' && rest.len() > 1 && !is_clitic_start(rest) {
            out.push("'".into());
        } else if "([{<".contains(c) || ";@#$%&?!".contains(c) {
            out.push(c.to_string());
        } else {
            break;
        }
        rest = &rest[c.len_utf8()..];
    }
    // Trailing punctuation, collected in reverse.
    let mut tail: Vec<String> = Vec::new();
    while let Some(c) = rest.chars().next_back() {
        let before = &rest[..rest.len() - c.len_utf8()];
        let token = match c {
            '"' => Some("''".to_string()),
            ')' | ']' | '}' | '>' | ';' | '@' | '#' | '$' | '%' | '&' | '?' | '!' | ',' | ':' => {
                Some(c.to_string())
            }
            // The sentence's final period (an ellipsis is one token).
            '.' if last_chunk && tail.iter().all(|t| is_closing(t)) => {
                if before.ends_with("..") {
                    let dots = rest.len() - rest.trim_end_matches('.').len();
                    tail.push(".".repeat(dots));
                    rest = &rest[..rest.len() - dots];
                    continue;
                }
                (!before.is_empty() && !before.ends_with('.')).then(|| ".".to_string())
            }
            _ => None,
        };
        match token {
            Some(t) => {
                tail.push(t);
                rest = before;
            }
            None => break,
        }
    }
    split_word(rest, out);
    out.extend(tail.into_iter().rev());
}

/// Whether `word` starts with a clitic such as `'s` (then its apostrophe is no quote).
fn is_clitic_start(word: &str) -> bool {
    let lower = word.to_lowercase();
    CLITICS
        .iter()
        .chain(&["'tis", "'twas"])
        .any(|c| c.starts_with('\'') && lower.starts_with(c))
}

/// Whether a token closes a bracket or a quote (a final period may precede it).
fn is_closing(token: &str) -> bool {
    matches!(token, ")" | "]" | "}" | ">" | "''" | "'")
}

/// A word's tokens: inner punctuation and contractions split off.
fn split_word(word: &str, out: &mut Vec<String>) {
    if word.is_empty() {
        return;
    }
    // Inner symbols that are always their own token, and commas or colons not before a digit.
    let chars: Vec<(usize, char)> = word.char_indices().collect();
    for (k, &(i, c)) in chars.iter().enumerate() {
        let next_digit = chars.get(k + 1).is_some_and(|(_, n)| n.is_ascii_digit());
        let splits = ";@#$%&?!()[]{}<>\"".contains(c) || ((c == ',' || c == ':') && !next_digit);
        if splits {
            split_word(&word[..i], out);
            out.push(match c {
                '"' => "''".to_string(),
                c => c.to_string(),
            });
            split_word(&word[i + c.len_utf8()..], out);
            return;
        }
    }
    if let Some(i) = word.find("..") {
        let dots = word[i..].len() - word[i..].trim_start_matches('.').len();
        split_word(&word[..i], out);
        out.push(".".repeat(dots));
        split_word(&word[i + dots..], out);
        return;
    }
    if let Some(i) = word.find("--") {
        split_word(&word[..i], out);
        out.push("--".to_string());
        split_word(&word[i + 2..], out);
        return;
    }
    let lower = word.to_lowercase();
    for &(whole, at) in WHOLE_WORD_SPLITS {
        if lower == whole {
            out.push(word[..at].to_string());
            out.push(word[at..].to_string());
            return;
        }
    }
    for clitic in CLITICS {
        if lower.len() > clitic.len() && lower.ends_with(clitic) {
            let at = word.len() - clitic.len();
            if word.is_char_boundary(at) && !word[..at].ends_with('\'') {
                out.push(word[..at].to_string());
                out.push(word[at..].to_string());
                return;
            }
        }
    }
    // A trailing apostrophe (a plural possessive) is its own token.
    if word.len() > 1 && word.ends_with('\'') && !word.ends_with("''") {
        out.push(word[..word.len() - 1].to_string());
        out.push("'".to_string());
        return;
    }
    out.push(word.to_string());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Token lists NLTK 3.9's `NLTKWordTokenizer().tokenize` gives for the same sentences.
    #[test]
    fn words_are_split_as_nltk_splits_them() {
        let cases: &[(&str, &[&str])] = &[
            (
                "she painted a sunset, and a lake.",
                &[
                    "she", "painted", "a", "sunset", ",", "and", "a", "lake", ".",
                ],
            ),
            (
                "i don't know; caroline's dog can't swim!",
                &[
                    "i", "do", "n't", "know", ";", "caroline", "'s", "dog", "ca", "n't", "swim",
                    "!",
                ],
            ),
            (
                "on 7 may 2023 she ran 1,000 meters (3.5 km).",
                &[
                    "on", "7", "may", "2023", "she", "ran", "1,000", "meters", "(", "3.5", "km",
                    ")", ".",
                ],
            ),
            (
                "he said \"hello\" to mr. smith.",
                &["he", "said", "``", "hello", "''", "to", "mr.", "smith", "."],
            ),
            (
                "the kids' toys: a ball, 2 cars... and more?",
                &[
                    "the", "kids", "'", "toys", ":", "a", "ball", ",", "2", "cars", "...", "and",
                    "more", "?",
                ],
            ),
            (
                "i cannot go, we're gonna stay",
                &[
                    "i", "can", "not", "go", ",", "we", "'re", "gon", "na", "stay",
                ],
            ),
            ("at 10:30 (utc)", &["at", "10:30", "(", "utc", ")"]),
            (
                "she said. then left.",
                &["she", "said.", "then", "left", "."],
            ),
            ("(the end.)", &["(", "the", "end", ".", ")"]),
            ("a--b", &["a", "--", "b"]),
            ("it's 'quoted' ok", &["it", "'s", "'", "quoted", "'", "ok"]),
        ];
        for (text, expected) in cases {
            assert_eq!(word_tokenize(text), *expected, "{text}");
        }
    }

    #[test]
    fn f1_is_over_token_sets_with_mems_tokenizer() {
        // Hand-computed: prediction {she, painted, a, sunset}, reference {a, sunset, over, the,
        // lake}: common {a, sunset}; precision 2/4, recall 2/5, F1 = 2·0.5·0.4/0.9 = 4/9.
        let f1 = token_f1("She painted a sunset.", "A sunset over the lake");
        assert!((f1 - 4.0 / 9.0).abs() < 1e-12, "{f1}");
        // Sets: repeats count once; `.,!?` are separators, other punctuation stays.
        assert_eq!(token_f1("yes yes YES!", "Yes."), 1.0);
        assert_eq!(token_f1("7 May 2023", "7 May, 2023"), 1.0);
        assert_eq!(token_f1("Caroline's", "caroline"), 0.0);
        assert_eq!(token_f1("", "x"), 0.0);
        assert_eq!(token_f1("x", "  "), 0.0);
        assert_eq!(token_f1("...", "x"), 0.0);
    }

    #[test]
    fn bleu1_is_clipped_precision_times_the_brevity_penalty() {
        // Values NLTK 3.9's sentence_bleu gives (weights (1, 0, 0, 0), smoothing method 1) on
        // the same token lists, checked by hand: matches / hypothesis length × brevity penalty.
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        // Hypothesis [she, painted, a, sunset, .] against [a, sunset, over, the, lake]: 2 of 5
        // match, equal lengths, no penalty.
        assert!(close(
            bleu1("She painted a sunset.", "A sunset over the lake"),
            0.4
        ));
        // Shorter hypothesis [sunset] (1 token) against 5: precision 1, penalty e^(1 − 5).
        assert!(close(
            bleu1("sunset", "A sunset over the lake"),
            (1.0f64 - 5.0).exp()
        ));
        // Clipping: [the, the, the] against [the, cat]: 1 of 3 (one "the" in the reference).
        assert!(close(bleu1("the the the", "the cat"), 1.0 / 3.0));
        // No match, or nothing to match: 0.
        assert_eq!(bleu1("dog", "cat"), 0.0);
        assert_eq!(bleu1("", "cat"), 0.0);
        // Punctuation tokens count: [7, may, ,, 2023] against [7, may, 2023]: 3 of 4.
        assert!(close(bleu1("7 May, 2023", "7 May 2023"), 0.75));
    }
}
