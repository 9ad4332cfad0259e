//! Page bodies in chunks, each stored once per namespace (schema 9), and the trajectories a
//! revision links, one id a line, the same way (schema 10).
//!
//! A person's page lists every fact of theirs, so its body grows with the history; storing each
//! revision's body whole wrote the page again on every append that added a fact. A body is cut
//! into chunks of whole lines — before every heading, and after a line whose own hash says so
//! (one line in [`SPREAD`] on average, at most [`MAX_LINES`] lines) — so the cuts depend on the
//! lines alone: a line added, changed or removed changes the chunk it is in, and every other
//! chunk is one stored already. A revision lists its chunks' hashes; the chunks are written with
//! `ON CONFLICT DO NOTHING` (a hash names its text) and read back by hash.

use std::collections::HashMap;

use rusqlite::types::ToSql;
use trajwiki_core::content_hash;

use crate::db::{id_lists, insert_rows, numbered, Db};
use crate::error::{Result, SqlContext, StoreError};

/// One line in this many ends a chunk (by the line's hash).
const SPREAD: u64 = 16;

/// The most lines in a chunk.
const MAX_LINES: usize = 64;

/// Hex digits of a chunk's hash (128 bits).
const HASH_DIGITS: usize = 32;

/// A stable hash of a line (FNV-1a, 64 bits): the same on every machine and every run.
fn line_hash(line: &str) -> u64 {
    line.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The chunks of `body`, in order; their concatenation is `body`.
pub(crate) fn chunks(body: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut start, mut at, mut lines) = (0, 0, 0);
    for line in body.split_inclusive('\n') {
        if line.starts_with('#') && at > start {
            out.push(&body[start..at]);
            (start, lines) = (at, 0);
        }
        at += line.len();
        lines += 1;
        if line_hash(line) % SPREAD == SPREAD - 1 || lines == MAX_LINES {
            out.push(&body[start..at]);
            (start, lines) = (at, 0);
        }
    }
    if at > start {
        out.push(&body[start..at]);
    }
    out
}

/// The hash that names chunk `text`.
pub(crate) fn chunk_hash(text: &str) -> String {
    let mut hash = content_hash(["page chunk", text]);
    hash.truncate(HASH_DIGITS);
    hash
}

/// A body as a revision lists it: its chunks' hashes, comma-separated, in order, and the chunks.
pub(crate) fn listed(body: &str) -> (String, Vec<(String, &str)>) {
    let parts: Vec<(String, &str)> = chunks(body)
        .into_iter()
        .map(|c| (chunk_hash(c), c))
        .collect();
    let list = parts
        .iter()
        .map(|(h, _)| h.as_str())
        .collect::<Vec<_>>()
        .join(",");
    (list, parts)
}

/// The trajectories a revision links as the text its link chunks hold (schema 10): their ids,
/// each on a line of its own, in order.
pub(crate) fn link_text<'a>(ids: impl Iterator<Item = &'a str>) -> String {
    let mut text = String::new();
    for id in ids {
        text.push_str(id);
        text.push('\n');
    }
    text
}

/// Stores `parts` (hash, text) of namespace `ns`; those stored already are left as they are.
pub(crate) fn write(tx: &Db, ns: &str, parts: &[(String, &str)]) -> Result<()> {
    let mut seen = std::collections::HashSet::new();
    let rows: Vec<Vec<&dyn ToSql>> = parts
        .iter()
        .filter(|(h, _)| seen.insert(h.as_str()))
        .map(|(h, t)| vec![&ns as &dyn ToSql, h, t])
        .collect();
    insert_rows(
        tx,
        "page_chunks (namespace, hash, text)",
        3,
        "ON CONFLICT (namespace, hash) DO NOTHING",
        &rows,
        "inserting page chunks",
    )
}

/// The texts that `lists` name, each list (comma-separated hashes) with its namespace and the
/// page it is read for (named in an error, with `column`, the list's column of
/// `page_revisions`): the chunks are read in one statement per namespace and run of hashes.
pub(crate) fn bodies(
    tx: &Db,
    lists: &[(&str, &str, &str)],
    column: &'static str,
) -> Result<Vec<String>> {
    let mut wanted: HashMap<&str, Vec<&str>> = HashMap::new();
    for (ns, _, list) in lists {
        wanted
            .entry(ns)
            .or_default()
            .extend(list.split(',').filter(|h| !h.is_empty()));
    }
    let mut text: HashMap<(String, String), String> = HashMap::new();
    for (ns, mut hashes) in wanted {
        hashes.sort_unstable();
        hashes.dedup();
        for run in id_lists(&hashes) {
            let mut params: Vec<&dyn ToSql> = vec![&ns];
            params.extend(run.iter().map(|h| h as &dyn ToSql));
            let mut stmt = tx
                .prepare_cached(&format!(
                    "SELECT hash, text FROM page_chunks WHERE namespace = ?1 AND hash IN ({})",
                    numbered(2, run.len())
                ))
                .ctx("reading page chunks")?;
            let found = stmt
                .query_map(&params[..], |row| {
                    Ok((row.get::<String>(0)?, row.get::<String>(1)?))
                })
                .ctx("reading page chunks")?
                .collect::<rusqlite::Result<Vec<_>>>()
                .ctx("reading page chunks")?;
            text.extend(found.into_iter().map(|(h, t)| ((ns.to_string(), h), t)));
        }
    }
    lists
        .iter()
        .map(|(ns, page, list)| {
            let mut body = String::new();
            for h in list.split(',').filter(|h| !h.is_empty()) {
                let chunk = text.get(&(ns.to_string(), h.to_string())).ok_or_else(|| {
                    StoreError::Corrupt {
                        table: "page_revisions",
                        column,
                        id: page.to_string(),
                        reason: format!("chunk {h} is not stored"),
                    }
                })?;
                body.push_str(chunk);
            }
            Ok(body)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(events: usize) -> String {
        let mut b = String::from("# Ann\n\n## Current facts\n- home: Porto (D6:1)\n\n## Events\n");
        for i in 0..events {
            if i % 4 == 0 {
                b.push_str(&format!("\n### Section {}\n", i / 4));
            }
            b.push_str(&format!(
                "- {i} May 2023: Ann said thing number {i}. (D{i}:1)\n"
            ));
        }
        b.push_str("\n## Linked trajectories\n");
        for i in 0..events {
            b.push_str(&format!("- trj_{:016x}: Ann — thing {i}\n", i * 7919));
        }
        b
    }

    #[test]
    fn chunks_put_together_are_the_body_and_cut_before_headings() {
        for text in [
            "",
            "no newline",
            "a\n",
            "# T\n\n## A\n- x\n### B\n- y",
            &body(300),
        ] {
            let parts = chunks(text);
            assert_eq!(parts.concat(), text);
            assert!(parts.iter().all(|c| !c.is_empty()));
            for c in &parts {
                // A heading only opens a chunk.
                assert!(c.lines().skip(1).all(|l| !l.starts_with('#')), "{c:?}");
                assert!(c.lines().count() <= MAX_LINES);
            }
        }
    }

    #[test]
    fn a_growing_body_changes_few_chunks() {
        let before = body(300);
        let after = body(301);
        let old: std::collections::HashSet<String> =
            chunks(&before).into_iter().map(chunk_hash).collect();
        let new: Vec<String> = chunks(&after).into_iter().map(chunk_hash).collect();
        let changed = new.iter().filter(|h| !old.contains(*h)).count();
        assert!(new.len() > 40, "{} chunks", new.len());
        // The event's section and the links' chunk that gained a line (cut after it, maybe).
        assert!(changed <= 4, "{changed} of {} chunks changed", new.len());
    }
}
