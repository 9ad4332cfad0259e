//! The web viewer's pages: server-rendered HTML, no script. A namespace's memory is shown as its
//! markdown export ([`crate::markdown`]) rendered to HTML, so the viewer and the export are one
//! set of pages with the same relative links (index → pages → trajectories → claims, edits and
//! their source messages, and back); the query page shows a search's retrieval path with its
//! scores and the budget. Every stored text is escaped before it reaches the HTML: the markdown
//! escapes it, and the query page's own fields go through [`escape`].

use std::fmt::Write as _;

use crate::api::Search;

/// Text made safe inside HTML elements and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:1rem auto;padding:0 1rem;color:#222}\
a{color:#0550ae}pre{background:#f6f8fa;padding:.6rem;overflow-x:auto;white-space:pre-wrap}\
nav{border-bottom:1px solid #ddd;padding-bottom:.4rem;margin-bottom:1rem}\
table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:.2rem .5rem;text-align:left}\
:target{background:#fff3b0}.score{color:#666;font-variant-numeric:tabular-nums}";

/// A whole page: `title` (plain text) and `body` (HTML).
pub fn page(title: &str, nav: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{} · trajwiki</title>\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><style>{STYLE}</style></head>\
         <body><nav>{nav}</nav>\n{body}\n</body></html>\n",
        escape(title)
    )
}

/// Markdown of the export rendered to HTML.
pub fn markdown(md: &str) -> String {
    let mut out = String::with_capacity(md.len() * 2);
    pulldown_cmark::html::push_html(&mut out, pulldown_cmark::Parser::new(md));
    out
}

/// The first heading of a markdown file, as plain text (for the page title).
pub fn title_of(md: &str) -> String {
    md.lines()
        .find_map(|l| l.strip_prefix("# "))
        .map(|t| t.replace('\\', ""))
        .unwrap_or_else(|| "trajwiki".into())
}

/// A search form for a namespace (its action relative to the namespace's folder).
pub fn search_form(action: &str, question: &str, budget: usize) -> String {
    format!(
        "<form action=\"{}\" method=\"get\"><input name=\"q\" size=\"60\" value=\"{}\" placeholder=\"Ask the memory\"> \
         budget <input name=\"budget\" size=\"5\" value=\"{budget}\"> <button>Search</button></form>",
        escape(action),
        escape(question)
    )
}

/// The retrieval path of a search, top down: the routed pages, the selected trajectories, the
/// snapshots, then the context with each source message linked to its place in the sources.
/// Links are relative to the namespace's folder of the viewer.
pub fn query(found: &Search) -> String {
    let mut out = String::new();
    let r = &found.ranking;
    let _ = write!(
        out,
        "<h1>{}</h1><p>{} of {} budget tokens · mode {} · {} candidate trajectories</p>",
        escape(&found.question),
        found.context.tokens,
        found.budget,
        escape(r.mode.name()),
        r.candidate_universe
    );
    let section = |out: &mut String, title: &str, rows: &[(String, String, f32)]| {
        let _ = write!(out, "<h2>{title}</h2>");
        if rows.is_empty() {
            out.push_str("<p>none</p>");
            return;
        }
        out.push_str("<table><tr><th>score</th><th></th></tr>");
        for (href, label, score) in rows {
            let label = escape(label);
            let cell = if href.is_empty() {
                label
            } else {
                format!("<a href=\"{}\">{label}</a>", escape(href))
            };
            let _ = write!(
                out,
                "<tr><td class=\"score\">{score:.4}</td><td>{cell}</td></tr>"
            );
        }
        out.push_str("</table>");
    };
    let pages: Vec<_> = r
        .pages
        .iter()
        .map(|p| (format!("pages/{}.md", p.id), p.label.clone(), p.score))
        .collect();
    section(&mut out, "1. Pages routed to", &pages);
    let trajectories: Vec<_> = r
        .trajectories
        .iter()
        .map(|t| {
            (
                format!("trajectories/{}.md", t.id),
                t.label.clone(),
                t.score,
            )
        })
        .collect();
    section(&mut out, "2. Trajectories selected", &trajectories);
    // A snapshot links to its place in its trajectory's timeline when the context holds one of
    // its messages (which says its trajectory); the others are listed with their scores.
    let snapshots: Vec<_> = r
        .snapshots
        .iter()
        .map(|s| {
            let t = found
                .evidence
                .iter()
                .find(|e| e.snapshot.as_ref().is_some_and(|id| id.as_str() == s.id))
                .and_then(|e| e.trajectory.as_ref());
            let href = t.map_or(String::new(), |t| format!("trajectories/{t}.md#{}", s.id));
            (href, s.label.clone(), s.score)
        })
        .collect();
    section(&mut out, "3. Snapshots ranked", &snapshots);
    out.push_str("<h2>4. Sources in the context</h2><ul>");
    for e in &found.evidence {
        let m = &e.message;
        let _ = write!(
            out,
            "<li><a href=\"sources/session-{}.md#{}\">{}</a> {} <b>{}:</b> {}",
            m.session,
            m.id,
            escape(&e.source_ref),
            m.timestamp.format("%Y-%m-%d %H:%M"),
            escape(&m.speaker),
            escape(&m.text)
        );
        if !e.claims.is_empty() {
            out.push_str("<ul>");
            for c in &e.claims {
                let _ = write!(
                    out,
                    "<li>{} <i>{}</i></li>",
                    escape(&c.text),
                    c.status.as_str()
                );
            }
            out.push_str("</ul>");
        }
        out.push_str("</li>");
    }
    out.push_str("</ul><h2>The context as given to a model</h2><pre>");
    out.push_str(&escape(&found.context.text));
    out.push_str("</pre>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            escape("<a href=\"x\">Tom & 'Maya'</a>"),
            "&lt;a href=&quot;x&quot;&gt;Tom &amp; &#39;Maya&#39;&lt;/a&gt;"
        );
    }
}
