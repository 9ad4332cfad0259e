//! The model-driven page compiler (SPEC §2): a language model rewrites each changed wiki page from
//! the deterministic page and its trajectories' summaries. Its page is a hint: it must keep the
//! title and the page's sections (its `## ` headings) in order, every linked trajectory, and no
//! placeholder, or the
//! deterministic page stays (the fallback is counted). Titles, links, keywords and routing text
//! — what retrieval reads — are always the deterministic ones.

use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{json, Value};
use trajwiki_core::WikiPage;
use trajwiki_llm::{Client, JsonRequest, Message, Phase};

use crate::pipeline::PageWriter;

/// The sections of a page (its `## ` headings), in order.
fn sections(body: &str) -> impl Iterator<Item = &str> {
    body.lines().filter(|l| l.starts_with("## "))
}

/// Text that marks an unfinished page.
const PLACEHOLDERS: [&str; 6] = [
    "todo",
    "tbd",
    "lorem ipsum",
    "[insert",
    "<placeholder",
    "xxx",
];

/// The most tokens a page may have.
const PAGE_TOKENS: u32 = 1500;

const INSTRUCTIONS: &str = "You edit one page of a memory wiki about a conversation. Rewrite the \
page so that it reads well, using only the facts it and the trajectory summaries give. Keep the \
title line and every ## section of the page, in its order. Keep every trajectory id (trj_…) of \
the page. Markdown only.";

/// A [`PageWriter`] asking a language model.
pub struct LlmPageWriter<'a> {
    client: &'a Client,
    name: String,
    fallbacks: AtomicUsize,
}

impl<'a> LlmPageWriter<'a> {
    /// A writer asking `client`'s model.
    pub fn new(client: &'a Client) -> Self {
        LlmPageWriter {
            client,
            name: format!("llm:{}", client.config().model),
            fallbacks: AtomicUsize::new(0),
        }
    }

    /// Pages that kept their deterministic body (the model unreachable, or its page invalid).
    pub fn fallbacks(&self) -> usize {
        self.fallbacks.load(Ordering::Relaxed)
    }
}

/// Why `body` cannot replace `page`'s body, if it cannot.
pub fn check_page(page: &WikiPage, body: &str) -> Result<(), String> {
    let title = format!("# {}", page.title);
    if !body.trim_start().starts_with(&title) {
        return Err(format!(
            "the page does not start with its title line {title:?}"
        ));
    }
    let mut from = 0;
    for section in sections(&page.body) {
        match body[from..].find(section) {
            Some(at) => from += at + section.len(),
            None => return Err(format!("section {section:?} is missing or out of order")),
        }
    }
    let lower = body.to_lowercase();
    if let Some(p) = PLACEHOLDERS.iter().find(|p| lower.contains(*p)) {
        return Err(format!("the page holds a placeholder ({p:?})"));
    }
    if let Some(t) = page
        .trajectory_ids
        .iter()
        .find(|t| !body.contains(t.as_str()))
    {
        return Err(format!("trajectory {t} is not linked"));
    }
    Ok(())
}

impl PageWriter for LlmPageWriter<'_> {
    fn name(&self) -> &str {
        &self.name
    }

    fn rewrite(&self, page: &WikiPage, summaries: &[&str]) -> Option<String> {
        let mut user = format!("Page:\n{}\n\nTrajectory summaries:\n", page.body);
        for (t, s) in page.trajectory_ids.iter().zip(summaries) {
            user.push_str(&format!("- {t}: {s}\n"));
        }
        let messages = [Message::system(INSTRUCTIONS), Message::user(user)];
        let schema = json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["page"],
            "properties": {"page": {"type": "string"}},
        });
        let request = JsonRequest {
            phase: Phase::Construction,
            messages: &messages,
            schema_name: "page",
            schema: &schema,
            max_tokens: PAGE_TOKENS,
        };
        let body = self
            .client
            .json(&request)
            .ok()
            .and_then(|reply| {
                reply
                    .get("page")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .filter(|body| check_page(page, body).is_ok());
        if body.is_none() {
            self.fallbacks.fetch_add(1, Ordering::Relaxed);
        }
        body.map(|b| b.trim().to_string() + "\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trajwiki_core::{Namespace, PageId, PageKind, TrajectoryId};

    #[test]
    fn a_page_keeps_its_title_sections_links_and_no_placeholder() {
        let ns = Namespace::new("n").unwrap();
        let t = TrajectoryId::derive(&ns, "t");
        let page = WikiPage {
            id: PageId::derive(&ns, "p"),
            namespace: ns,
            kind: PageKind::Topic,
            title: "Pottery".into(),
            body: String::new(),
            routing_text: String::new(),
            keywords: vec![],
            trajectory_ids: vec![t.clone()],
            terms: vec![],
            items: vec![],
            revision: 1,
        };
        let sections = ["## Current facts", "## Events", "## Linked trajectories"];
        let good = format!("# Pottery\n\n{}\n- x\n", sections.join("\n- x\n")).replace(
            "## Linked trajectories\n- x",
            &format!("## Linked trajectories\n- {t}"),
        );
        let page = WikiPage {
            body: good.clone(),
            ..page
        };
        assert_eq!(check_page(&page, &good), Ok(()));
        let swapped = good
            .replace("## Current facts", "## Tmp")
            .replace("## Events", "## Current facts");
        assert!(check_page(&page, &swapped).is_err());
        assert!(check_page(&page, &good.replace(t.as_str(), "trj_0")).is_err());
        assert!(check_page(&page, &good.replace("- x", "- TODO")).is_err());
        assert!(check_page(&page, &good.replace("# Pottery", "# Other")).is_err());
    }
}
