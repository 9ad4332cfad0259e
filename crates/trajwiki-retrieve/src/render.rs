//! The context: evidence packed by value under a budget of whitespace tokens, rendered for a
//! model in conversation order, each source message once with its ref.
//!
//! ```text
//! ## 8 May 2023
//! D3:12 Melanie: I went to the museum yesterday. ["yesterday" = 7 May 2023]
//! D3:13 Caroline: Nice! [photo: a painting] (superseded by D5:2)
//! ```
//! Every message line starts with its ref; sessions carry their date once, in their heading
//! (the session's number is in every ref). Every token counts against the budget like the
//! evidence's, so nothing is printed that holds none: no session number twice, no "a photo of"
//! before a photo's content, no routed pages' titles (they are in the ranking, not the context).

use std::collections::BTreeSet;
use std::fmt::Write;

/// Appends `s` to `out` with its whitespace collapsed: what is stored (a speaker, a text, a
/// caption) takes one line of the context, whatever it holds.
fn push_flat(out: &mut String, s: &str) {
    for (k, w) in s.split_whitespace().enumerate() {
        if k > 0 {
            out.push(' ');
        }
        out.push_str(w);
    }
}

use serde::Serialize;
use trajwiki_text::temporal::{fmt_day, resolve};

use trajwiki_core::SourceMessage;

use crate::index::{Index, Superseded};
use crate::retrieve::Ranking;

/// A rendered context.
#[derive(Debug, Clone, Serialize)]
pub struct Context {
    /// The text given to a model.
    pub text: String,
    /// The refs of the messages in it, in order of appearance.
    pub source_refs: Vec<String>,
    /// The same messages as indices into the index's messages.
    #[serde(skip)]
    pub messages: Vec<usize>,
    /// Whitespace tokens of `text` (never above the budget).
    pub tokens: usize,
}

fn tokens(s: &str) -> usize {
    s.split_whitespace().count()
}

/// A message's context line as the message alone decides it: its ref, speaker, text, image
/// captions and resolved dates (what later records add, [`push_superseded`] appends).
pub(crate) fn base_line(m: &SourceMessage) -> String {
    let mut line = String::with_capacity(m.text.len() + 48);
    match &m.external_ref {
        Some(r) => line.push_str(r),
        None => line.push_str(m.id.as_str()),
    }
    line.push(' ');
    push_flat(&mut line, &m.speaker);
    line.push_str(": ");
    push_flat(&mut line, &m.text);
    for a in &m.attachments {
        if let Some(c) = &a.caption {
            let (kind, content) = caption_parts(c);
            line.push_str(" [");
            line.push_str(kind);
            line.push_str(": ");
            push_flat(&mut line, content);
            line.push(']');
        }
    }
    for anchor in resolve(&m.text, m.timestamp.date()) {
        let _ = write!(line, " [\"{}\" = {}]", anchor.phrase, anchor.resolved);
    }
    line
}

/// A caption as its line prints it: what it shows, and what of. "a photo of a dog on a couch"
/// is a photo of "a dog on a couch"; a caption that does not say is an image of itself.
fn caption_parts(caption: &str) -> (&'static str, &str) {
    const KINDS: [(&str, &str); 6] = [
        ("a photo of ", "photo"),
        ("a photograph of ", "photo"),
        ("a photography of ", "photo"),
        ("an image of ", "image"),
        ("a picture of ", "picture"),
        ("a screenshot of ", "screenshot"),
    ];
    let trimmed = caption.trim_start();
    for (prefix, kind) in KINDS {
        if let Some(head) = trimmed.get(..prefix.len()) {
            let rest = &trimmed[prefix.len()..];
            if head.eq_ignore_ascii_case(prefix) && !rest.trim().is_empty() {
                return (kind, rest);
            }
        }
    }
    ("image", caption)
}

/// Appends to a message's line what became of it: superseded by a revision, or withdrawn.
pub(crate) fn push_superseded(line: &mut String, superseded: &[Superseded]) {
    for s in superseded {
        match &s.by {
            Some(by) => {
                let _ = write!(line, " (superseded by {by})");
            }
            None => line.push_str(" (withdrawn later)"),
        }
    }
}

impl Index {
    /// The ref of message `i` (its external ref, else its id).
    pub fn message_ref(&self, i: usize) -> String {
        let m = &self.records.messages[i];
        m.external_ref.clone().unwrap_or_else(|| m.id.to_string())
    }

    /// The messages that revised the superseded statements of message `i` (by their refs).
    fn revisers(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        self.superseded[i]
            .iter()
            .filter_map(|s| s.by.as_deref())
            .filter_map(|by| {
                self.records.messages.iter().position(|m| {
                    m.external_ref
                        .as_deref()
                        .map_or(m.id.as_str() == by, |r| r == by)
                })
            })
    }

    fn session_heading(&self, i: usize) -> String {
        let m = &self.records.messages[i];
        format!("## {}", fmt_day(m.timestamp.date()))
    }

    /// Packs the ranked messages, most valuable first, into at most `budget` whitespace tokens,
    /// and renders them in conversation order.
    pub fn render(&self, ranking: &Ranking, budget: usize) -> Context {
        let mut used = 0;
        let mut chosen: BTreeSet<usize> = BTreeSet::new();
        let mut sessions: BTreeSet<u32> = BTreeSet::new();
        let mut seen = BTreeSet::new();
        for &i in &ranking.messages {
            if !seen.insert(i) {
                continue;
            }
            // A line that does not fit alone is skipped before its heading is made.
            if used + self.line(i).1 > budget {
                continue;
            }
            // A superseded statement comes with the statements that revised it (the change is
            // shown, not only its marked old side), or not at all.
            let mut group = vec![i];
            group.extend(self.revisers(i).filter(|r| !chosen.contains(r)));
            group.dedup();
            let mut heads: BTreeSet<u32> = BTreeSet::new();
            let mut cost = 0;
            for &k in &group {
                let session = self.records.messages[k].session;
                cost += self.line(k).1;
                if !sessions.contains(&session) && heads.insert(session) {
                    cost += tokens(&self.session_heading(k));
                }
            }
            if used + cost > budget {
                continue;
            }
            used += cost;
            for k in group {
                seen.insert(k);
                chosen.insert(k);
                sessions.insert(self.records.messages[k].session);
            }
        }
        // Conversation order: messages are stored by session and position.
        let mut text = String::new();
        let mut source_refs = Vec::new();
        let mut messages = Vec::new();
        let mut current = None;
        for &i in &chosen {
            let session = self.records.messages[i].session;
            if current != Some(session) {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(&self.session_heading(i));
                current = Some(session);
            }
            text.push('\n');
            text.push_str(&self.line(i).0);
            source_refs.push(self.message_ref(i));
            messages.push(i);
        }
        let tokens = tokens(&text);
        debug_assert!(tokens <= budget, "packing keeps within the budget");
        Context {
            text,
            source_refs,
            messages,
            tokens,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::caption_parts;

    #[test]
    fn a_caption_says_what_it_shows_once() {
        assert_eq!(
            caption_parts("a photo of a dog on a couch"),
            ("photo", "a dog on a couch")
        );
        assert_eq!(
            caption_parts("A Photography of a sign"),
            ("photo", "a sign")
        );
        assert_eq!(caption_parts("an image of a cake"), ("image", "a cake"));
        // Nothing after the kind, or no kind: the whole caption, as an image.
        assert_eq!(caption_parts("a photo of "), ("image", "a photo of "));
        assert_eq!(
            caption_parts("sunset over a lake"),
            ("image", "sunset over a lake")
        );
        // Not split inside a character.
        assert_eq!(caption_parts("a phot€ of x"), ("image", "a phot€ of x"));
    }
}
