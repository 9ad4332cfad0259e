//! Writing the wiki pages a build changed, a few statements for any number of pages: an append
//! changes 10-20 pages when it builds an exchange, and a statement per page, per revision number
//! and per linked trajectory was most of an append's round trips on PostgreSQL (issue 41).
//!
//! Each page becomes the current revision of its page: a new revision, stamped with the commit's
//! generation, where its content changed; an unchanged page is no write.

use std::collections::{HashMap, HashSet};

use rusqlite::types::ToSql;
use trajwiki_core::{Namespace, WikiPage};

use crate::conflict::conflict;
use crate::db::{id_lists, insert_rows, known_ids, numbered, row_runs, Tx};
use crate::error::{Result, SqlContext, StoreError};
use crate::page_chunks;
use crate::to_json;

/// A page as stored: its kind, its current revision's content and links, and its last revision.
struct Stored {
    kind: String,
    /// Title, body, routing text, keywords, terms, items (JSON as stored) of the current
    /// revision; `None` for a retired page. The body is its chunks' list where the revision
    /// has one (schema 9), else its text.
    current: Option<[String; 6]>,
    /// Whether the current revision lists its body's chunks.
    chunked: bool,
    /// The current revision's links' chunks (schema 10), else its links as rows.
    link_list: Option<String>,
    links: Vec<String>,
    last: u32,
}

impl Stored {
    /// The hashes of the chunks the current revision lists, body's and links': stored, so a
    /// new revision does not write them again.
    fn listed_chunks(&self) -> HashSet<&str> {
        let body = self
            .current
            .as_ref()
            .filter(|_| self.chunked)
            .map(|c| c[1].as_str());
        body.into_iter()
            .chain(self.link_list.as_deref())
            .flat_map(|list| list.split(','))
            .filter(|h| !h.is_empty())
            .collect()
    }

    fn same(&self, page: &WikiPage, chunk_list: &str, link_list: &str) -> bool {
        let Some([title, body, routing, keywords, terms, items]) = &self.current else {
            return false;
        };
        let body_same = if self.chunked {
            body == chunk_list
        } else {
            *body == page.body
        };
        *title == page.title
            && body_same
            && *routing == page.routing_text
            && *keywords == to_json(&page.keywords)
            && *terms == to_json(&page.terms)
            && *items == to_json(&page.items)
            && match &self.link_list {
                Some(list) => list == link_list,
                None => self
                    .links
                    .iter()
                    .map(String::as_str)
                    .eq(page.trajectory_ids.iter().map(|t| t.as_str())),
            }
    }
}

/// The stored state of the pages `ids`.
fn stored(tx: &Tx<'_>, ids: &[&str]) -> Result<HashMap<String, Stored>> {
    let mut found: HashMap<String, Stored> = HashMap::new();
    for list in id_lists(ids) {
        let params: Vec<&dyn ToSql> = list.iter().map(|id| id as &dyn ToSql).collect();
        let within = numbered(1, list.len());
        let mut stmt = tx
            .prepare_cached(&format!(
                "SELECT p.id, p.kind, r.title, coalesce(r.chunks, r.body), r.routing_text,
                   r.keywords, r.terms, r.items,
                   (SELECT coalesce(max(v.revision), 0) FROM page_revisions v WHERE v.page = p.id),
                   r.chunks IS NOT NULL, r.link_chunks
                 FROM pages p LEFT JOIN page_revisions r
                   ON r.page = p.id AND r.revision = p.current_revision
                 WHERE p.id IN ({within})"
            ))
            .ctx("reading pages")?;
        let rows = stmt
            .query_map(&params[..], |row| {
                let text = |i| row.get::<Option<String>>(i);
                let content = [text(2)?, text(3)?, text(4)?, text(5)?, text(6)?, text(7)?];
                let current = content
                    .iter()
                    .all(Option::is_some)
                    .then(|| content.map(Option::unwrap_or_default));
                Ok((
                    row.get::<String>(0)?,
                    Stored {
                        kind: row.get(1)?,
                        current,
                        chunked: row.get::<Option<bool>>(9)?.unwrap_or(false),
                        link_list: row.get(10)?,
                        links: Vec::new(),
                        last: row.get(8)?,
                    },
                ))
            })
            .ctx("reading pages")?
            .collect::<rusqlite::Result<Vec<_>>>()
            .ctx("reading pages")?;
        found.extend(rows);
        let mut stmt = tx
            .prepare_cached(&format!(
                "SELECT x.page, x.trajectory FROM pages p
                 JOIN page_trajectories x
                   ON x.namespace = p.namespace AND x.page = p.id AND x.revision = p.current_revision
                 WHERE p.id IN ({within}) ORDER BY x.page, x.position"
            ))
            .ctx("reading page links")?;
        let links = stmt
            .query_map(&params[..], |row| {
                Ok((row.get::<String>(0)?, row.get::<String>(1)?))
            })
            .ctx("reading page links")?
            .collect::<rusqlite::Result<Vec<_>>>()
            .ctx("reading page links")?;
        for (page, trajectory) in links {
            if let Some(s) = found.get_mut(&page) {
                s.links.push(trajectory);
            }
        }
    }
    Ok(found)
}

/// Makes each of `pages` the current revision of its page, stamped with `generation` where its
/// content changed. A page's kind never changes; every trajectory a page links must be stored.
pub(crate) fn upsert_pages(
    tx: &Tx<'_>,
    ns: &Namespace,
    pages: &[WikiPage],
    generation: i64,
) -> Result<()> {
    let mut seen = HashSet::new();
    if let Some(twice) = pages.iter().find(|p| !seen.insert(p.id.as_str())) {
        // Each page once: the second would be numbered against a revision not yet read.
        return Err(StoreError::Conflict {
            kind: "page",
            id: twice.id.to_string(),
            fields: vec!["id".into()],
            existing: "a page of this batch".into(),
            incoming: "the same page again".into(),
        });
    }
    for page in pages {
        crate::memory::check_ns(ns, "page", &page.namespace)?;
    }
    let ids: Vec<&str> = pages.iter().map(|p| p.id.as_str()).collect();
    let stored = stored(tx, &ids)?;
    let mut new_pages = Vec::new();
    let mut revisions: Vec<(&WikiPage, u32)> = Vec::new();
    let mut lists: Vec<(String, String)> = Vec::new();
    let mut parts: Vec<(String, &str)> = Vec::new();
    // The links as their chunks hold them (schema 10): a page linking most of a long history
    // writes the chunks its new links changed, not a row per link.
    let link_texts: Vec<String> = pages
        .iter()
        .map(|p| page_chunks::link_text(p.trajectory_ids.iter().map(|t| t.as_str())))
        .collect();
    for (page, link_text) in pages.iter().zip(&link_texts) {
        let (list, chunks) = page_chunks::listed(&page.body);
        let (link_list, link_chunks) = page_chunks::listed(link_text);
        let before = stored.get(page.id.as_str());
        let revision = match before {
            None => {
                new_pages.push(page);
                1
            }
            Some(s) if s.kind != page.kind.as_str() => {
                return Err(conflict("page kind", page.id.as_str(), &s.kind, &page.kind));
            }
            Some(s) if s.same(page, &list, &link_list) => continue,
            Some(s) => s.last + 1,
        };
        revisions.push((page, revision));
        lists.push((list, link_list));
        // The chunks the page's current revision lists are stored: a page of thousands of
        // chunks that changed one writes one.
        let listed = before.map(Stored::listed_chunks).unwrap_or_default();
        parts.extend(
            chunks
                .into_iter()
                .chain(link_chunks)
                .filter(|(h, _)| !listed.contains(h.as_str())),
        );
    }
    if revisions.is_empty() {
        return Ok(());
    }
    check_links(tx, &revisions)?;
    let ns = ns.as_str();
    page_chunks::write(tx, ns, &parts)?;
    let new_pages: Vec<(&str, &str)> = new_pages
        .iter()
        .map(|p| (p.id.as_str(), p.kind.as_str()))
        .collect();
    let rows: Vec<Vec<&dyn ToSql>> = new_pages
        .iter()
        .map(|(id, kind)| vec![id as &dyn ToSql, &ns, kind, &generation])
        .collect();
    insert_rows(
        tx,
        "pages (id, namespace, kind, generation)",
        4,
        "",
        &rows,
        "inserting pages",
    )?;
    let ids: Vec<&str> = revisions.iter().map(|(p, _)| p.id.as_str()).collect();
    let numbers: Vec<i64> = revisions.iter().map(|(_, r)| i64::from(*r)).collect();
    let json: Vec<[String; 3]> = revisions
        .iter()
        .map(|(p, _)| [to_json(&p.keywords), to_json(&p.terms), to_json(&p.items)])
        .collect();
    // The body is in its chunks: the revision keeps their list and an empty body.
    let empty = "";
    let rows: Vec<Vec<&dyn ToSql>> = revisions
        .iter()
        .zip(ids.iter().zip(&numbers))
        .zip(json.iter().zip(&lists))
        .map(
            |(((p, _), (id, n)), ([keywords, terms, items], (list, link_list)))| {
                vec![
                    id as &dyn ToSql,
                    n,
                    &p.title,
                    &empty,
                    &p.routing_text,
                    keywords,
                    terms,
                    items,
                    list,
                    link_list,
                ]
            },
        )
        .collect();
    insert_rows(
        tx,
        "page_revisions (page, revision, title, body, routing_text, keywords, terms, items, chunks, link_chunks)",
        10,
        "",
        &rows,
        "inserting page revisions",
    )?;
    // Each page's current revision: `CASE id WHEN ?2 THEN ?3 …`, one statement per run.
    let pairs: Vec<(&dyn ToSql, &dyn ToSql)> = ids
        .iter()
        .zip(&numbers)
        .map(|(id, n)| (id as &dyn ToSql, n as &dyn ToSql))
        .collect();
    for run in row_runs(pairs.len()) {
        let run = &pairs[run];
        let cases: String = (0..run.len())
            .map(|i| format!(" WHEN ?{} THEN CAST(?{} AS INTEGER)", 2 + 2 * i, 3 + 2 * i))
            .collect();
        let within: Vec<String> = (0..run.len()).map(|i| format!("?{}", 2 + 2 * i)).collect();
        let sql = format!(
            "UPDATE pages SET generation = ?1, current_revision = CASE id{cases} END
             WHERE id IN ({})",
            within.join(", ")
        );
        let mut params: Vec<&dyn ToSql> = vec![&generation];
        params.extend(run.iter().flat_map(|(id, n)| [*id, *n]));
        tx.prepare_cached(&sql)
            .and_then(|mut stmt| stmt.execute(&params[..]))
            .ctx("advancing pages")?;
    }
    Ok(())
}

/// Every trajectory the new revisions link is stored: the first that is not is the error.
fn check_links(tx: &Tx<'_>, revisions: &[(&WikiPage, u32)]) -> Result<()> {
    let linked: Vec<&str> = revisions
        .iter()
        .flat_map(|(p, _)| p.trajectory_ids.iter().map(|t| t.as_str()))
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    let known = known_ids(tx, "trajectories", &linked)?;
    for (page, _) in revisions {
        if let Some(t) = page
            .trajectory_ids
            .iter()
            .find(|t| !known.contains(t.as_str()))
        {
            return Err(StoreError::Dangling {
                what: format!("page {}", page.id),
                missing: t.to_string(),
            });
        }
    }
    Ok(())
}

/// Retires the pages `ids`: they have no current revision; their revisions stay. A page retired
/// already is left as it is (not stamped again).
pub(crate) fn retire_pages(tx: &Tx<'_>, ids: &[&str], generation: i64) -> Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    for list in id_lists(ids) {
        let mut params: Vec<&dyn ToSql> = vec![&generation];
        params.extend(list.iter().map(|id| id as &dyn ToSql));
        tx.prepare_cached(&format!(
            "UPDATE pages SET current_revision = NULL, generation = ?1
             WHERE id IN ({}) AND current_revision IS NOT NULL",
            numbered(2, list.len())
        ))
        .and_then(|mut stmt| stmt.execute(&params[..]))
        .ctx("retiring pages")?;
    }
    Ok(())
}
