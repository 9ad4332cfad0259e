//! Text utilities: sentences with their exact source spans, word tokens, light stemming,
//! keywords.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::OnceLock;

use crate::lexicon::STOPWORDS;

/// A sentence of a source text, as the exact substring (so it can serve as a verbatim quote).
pub fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if matches!(c, b'.' | b'!' | b'?' | b'\n') {
            // Absorb runs of terminal punctuation and closing quotes.
            let mut end = i + 1;
            while end < bytes.len()
                && matches!(bytes[end], b'.' | b'!' | b'?' | b'"' | b'\'' | b')')
            {
                end += 1;
            }
            let boundary = end >= bytes.len() || bytes[end].is_ascii_whitespace();
            // "Dr. Smith", "e.g. this", "3.5": not boundaries.
            let abbreviation = c == b'.' && {
                let word: String = text[start..i]
                    .rsplit(|ch: char| ch.is_whitespace())
                    .next()
                    .unwrap_or("")
                    .to_ascii_lowercase();
                matches!(
                    word.as_str(),
                    "dr" | "mr" | "mrs" | "ms" | "st" | "vs" | "e.g" | "i.e" | "etc" | "jr" | "sr"
                )
            };
            if (boundary || c == b'\n') && !abbreviation {
                let s = text[start..end].trim();
                if !s.is_empty() {
                    out.push(s);
                }
                start = end;
            }
            i = end;
        } else {
            i += 1;
        }
    }
    let rest = text[start..].trim();
    if !rest.is_empty() {
        out.push(rest);
    }
    out
}

/// Word tokens with their byte offsets: letters, digits, apostrophes and inner hyphens.
pub fn words(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    each_word(text, |at, w| out.push((at, w)));
    out
}

/// Calls `f` with each of [`words`]' tokens in turn, without collecting them.
pub fn each_word<'a>(text: &'a str, mut f: impl FnMut(usize, &'a str)) {
    let mut emit = |s: usize, e: usize| {
        let w = text[s..e].trim_end_matches(['\'', '’', '-']);
        if !w.is_empty() {
            f(s, w);
        }
    };
    let bytes = text.as_bytes();
    let mut start = None;
    let mut i = 0;
    while i < bytes.len() {
        // ASCII a byte at a time; other characters decoded.
        let (inner, len) = match bytes[i] {
            b if b.is_ascii() => (
                b.is_ascii_alphanumeric() || ((b == b'\'' || b == b'-') && start.is_some()),
                1,
            ),
            _ => {
                let ch = text[i..].chars().next().expect("a char boundary");
                (
                    ch.is_alphanumeric() || (ch == '’' && start.is_some()),
                    ch.len_utf8(),
                )
            }
        };
        match (inner, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                emit(s, i);
                start = None;
            }
            _ => {}
        }
        i += len;
    }
    if let Some(s) = start {
        emit(s, bytes.len());
    }
}

/// Lower case, curly apostrophes straightened.
pub fn norm(word: &str) -> String {
    norm_cow(word).into_owned()
}

/// [`norm`], borrowing `word` when it is already normal (lower-case ASCII, the common case).
pub fn norm_cow(word: &str) -> Cow<'_, str> {
    if word
        .bytes()
        .all(|b| b.is_ascii() && !b.is_ascii_uppercase())
    {
        return Cow::Borrowed(word);
    }
    Cow::Owned(word.to_lowercase().replace('’', "'"))
}

/// Light stemming: plural and common verb endings, so "paintings", "painted" and "painting" meet.
pub fn stem(word: &str) -> String {
    let once = stem_once(&norm_cow(word));
    stem_once(&once)
}

fn stem_once(w: &str) -> String {
    let w = w.strip_suffix("'s").unwrap_or(w);
    let n = w.chars().count();
    if n <= 3 {
        return w.to_string();
    }
    for (suffix, keep) in [("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")] {
        if let Some(base) = w.strip_suffix(suffix) {
            if base.chars().count() >= 3 && !(suffix == "s" && base.ends_with('s')) {
                // "running" → "run", "hiking" → "hik": the doubled consonant is undone, the rest
                // is left as a stem, not a word.
                let mut base = format!("{base}{keep}");
                let b = base.as_bytes();
                if suffix == "ing" || suffix == "ed" {
                    let l = b.len();
                    if l >= 2 && b[l - 1] == b[l - 2] && !matches!(b[l - 1], b'l' | b's' | b'z') {
                        base.pop();
                    }
                }
                return base;
            }
        }
    }
    w.to_string()
}

/// Whether a lower-case word is a stopword (apostrophes ignored).
pub fn is_stopword(word: &str) -> bool {
    static SET: OnceLock<HashSet<&'static str>> = OnceLock::new();
    let set = SET.get_or_init(|| STOPWORDS.iter().copied().collect());
    set.contains(word) || (word.contains('\'') && set.contains(word.replace('\'', "").as_str()))
}

/// Keywords of a text: stemmed content words of 3+ characters, not stopwords, sorted.
pub fn keywords(text: &str) -> BTreeSet<String> {
    words(text)
        .into_iter()
        .filter_map(|(_, w)| keyword(w))
        .collect()
}

/// The keyword a word (as [`words`] cuts it) stands for: its stem, when it is a content word of
/// 3+ characters, not a stopword and not a number.
pub fn keyword(word: &str) -> Option<String> {
    let w = norm_cow(word);
    (w.chars().count() >= 3 && !is_stopword(&w) && !w.chars().all(|c| c.is_ascii_digit()))
        .then(|| stem(&w))
}

/// The surface of each keyword of `text` ([`keywords`]): stem → the word as first written, in
/// lower case — what a page shows instead of the stem.
pub fn keyword_surfaces(text: &str, out: &mut BTreeMap<String, String>) {
    for (_, w) in words(text) {
        let w = norm(w);
        if w.chars().count() >= 3 && !is_stopword(&w) && !w.chars().all(|c| c.is_ascii_digit()) {
            out.entry(stem(&w)).or_insert(w);
        }
    }
}

/// Jaccard similarity of two sorted sets.
pub fn jaccard<T: Ord>(a: &BTreeSet<T>, b: &BTreeSet<T>) -> f32 {
    if a.is_empty() && b.is_empty() {
        return 0.0;
    }
    let inter = a.intersection(b).count();
    inter as f32 / (a.len() + b.len() - inter) as f32
}

/// Normalised text for duplicate detection: lower case, words only.
pub fn normalized(text: &str) -> String {
    words(text)
        .into_iter()
        .map(|(_, w)| norm(w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Cosine of two L2-normalised vectors.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Words as a character-at-a-time scan finds them: what [`each_word`]'s byte scan must
    /// agree with.
    fn words_by_char(text: &str) -> Vec<(usize, &str)> {
        let mut out = Vec::new();
        let mut start = None;
        for (i, ch) in text.char_indices() {
            let inner =
                ch.is_alphanumeric() || ((ch == '\'' || ch == '’' || ch == '-') && start.is_some());
            match (inner, start) {
                (true, None) => start = Some(i),
                (false, Some(s)) => {
                    out.push((s, text[s..i].trim_end_matches(['\'', '’', '-'])));
                    start = None;
                }
                _ => {}
            }
        }
        if let Some(s) = start {
            out.push((s, text[s..].trim_end_matches(['\'', '’', '-'])));
        }
        out.retain(|(_, w)| !w.is_empty());
        out
    }

    proptest! {
        #[test]
        fn byte_scan_finds_the_words_a_char_scan_finds(
            text in "[a-zA-Z0-9 '’\\-,.éßÅ日本😀\n\t]{0,60}"
        ) {
            prop_assert_eq!(words(&text), words_by_char(&text));
        }
    }

    #[test]
    fn sentence_spans_are_verbatim() {
        let t = "I went to Dr. Lee's class yesterday! It was great... Do you paint?  Yes";
        let s = sentences(t);
        assert_eq!(
            s,
            [
                "I went to Dr. Lee's class yesterday!",
                "It was great...",
                "Do you paint?",
                "Yes"
            ]
        );
        assert!(s.iter().all(|x| t.contains(x)));
    }

    #[test]
    fn words_and_stems() {
        let w: Vec<&str> = words("Mel's kids' drawings—so cool, e-mail!")
            .into_iter()
            .map(|(_, w)| w)
            .collect();
        assert_eq!(w, ["Mel's", "kids", "drawings", "so", "cool", "e-mail"]);
        assert_eq!(stem("paintings"), "paint");
        assert_eq!(stem("painting"), "paint");
        assert_eq!(stem("painted"), "paint");
        assert_eq!(stem("running"), "run");
        assert_eq!(stem("classes"), "class");
        assert_eq!(stem("stories"), "story");
        assert_eq!(stem("Caroline's"), "caroline");
        let k = keywords("The kids and I went camping at the lake, and the kids loved it");
        assert!(k.contains("kid") && k.contains("camp") && k.contains("lake"));
        assert!(!k.contains("the") && !k.contains("and"));
    }
}
