//! Stored text made safe to print. A message, a speaker or a run step is somebody else's text:
//! printed raw, an escape sequence in it could clear the screen, retitle the window, move the
//! cursor over earlier lines or forge a line of output. Everything the CLI prints as text, and
//! every text the MCP server answers with, passes through [`block`]; one-line fields that hold
//! stored text are escaped with [`line`](fn@line) first, so that a newline in them cannot start a line of
//! its own. JSON output is made safe by [`json`], which keeps it exact: it parses to the same
//! values.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether a terminal acts on `c` instead of showing it: the C0 controls, DEL, the C1 controls
/// (some terminals take U+009B as the start of an escape sequence) and the bidirectional
/// embeddings, overrides and isolates, which reorder what is shown.
pub fn hazardous(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// A one-line field: every hazardous character escaped, newlines and tabs included.
pub fn line(s: &str) -> Cow<'_, str> {
    escape(s, hazardous)
}

/// Text of several lines: newlines and tabs kept, every other hazardous character escaped.
pub fn block(s: &str) -> Cow<'_, str> {
    escape(s, |c| c != '\n' && c != '\t' && hazardous(c))
}

/// JSON text with every hazardous character that serde_json leaves raw (DEL, the C1 controls,
/// the bidirectional controls) written as a `\uXXXX` escape. Those characters can only occur
/// inside strings, so the text parses to the same values.
pub fn json(s: &str) -> Cow<'_, str> {
    if !s.chars().any(hazardous_in_json) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if hazardous_in_json(c) {
            // All of them are in the Basic Multilingual Plane: one escape each.
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

fn hazardous_in_json(c: char) -> bool {
    // serde_json escapes the C0 controls itself; newlines between values are its layout.
    c > '\u{1f}' && hazardous(c)
}

fn escape(s: &str, bad: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(&bad) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if !bad(c) {
            out.push(c);
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_what_a_terminal_acts_on() {
        assert_eq!(line("plain text, ünïcode"), "plain text, ünïcode");
        assert!(matches!(line("plain"), Cow::Borrowed(_)));
        assert_eq!(line("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(line("x\r\ny\tz\0"), "x\\r\\ny\\tz\\u{0}");
        assert_eq!(line("\u{1b}]0;title\u{7}"), "\\u{1b}]0;title\\u{7}");
        assert_eq!(line("\u{9b}31m \u{7f}"), "\\u{9b}31m \\u{7f}");
        assert_eq!(line("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(
            block("one\ntwo\tcols\r\u{1b}c"),
            "one\ntwo\tcols\\r\\u{1b}c"
        );
    }

    #[test]
    fn json_stays_exact() {
        let value = serde_json::json!({"t": "a\u{1b}\u{9b}\u{7f}\u{202e}\n\"z"});
        for text in [
            serde_json::to_string(&value).unwrap(),
            serde_json::to_string_pretty(&value).unwrap(),
        ] {
            let safe = json(&text);
            assert!(!safe.chars().any(|c| c != '\n' && hazardous(c)), "{safe}");
            let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
            assert_eq!(back, value);
        }
    }
}
