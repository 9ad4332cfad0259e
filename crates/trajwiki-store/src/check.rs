//! `trajwiki check`: SQLite's own integrity check plus the project's invariants.

use serde::Serialize;

use crate::db::Db;
use crate::error::{Result, SqlContext};
use crate::memory::replayed_state;
use crate::raw::{decode_message, message_row, MESSAGE_SELECT};
use crate::Store;

/// One violated invariant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// Which invariant.
    pub invariant: &'static str,
    /// The record at fault.
    pub id: String,
    /// What is wrong.
    pub detail: String,
}

/// The result of [`Store::check`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CheckReport {
    /// What `PRAGMA integrity_check` said (`ok` when sound; `ok` on PostgreSQL, whose server
    /// checks its own pages).
    pub sqlite_integrity: String,
    /// Records examined, per table.
    pub examined: Vec<(String, u64)>,
    /// Every problem found; empty when the store is sound.
    pub problems: Vec<Problem>,
}

impl CheckReport {
    /// Whether the store is sound.
    pub fn ok(&self) -> bool {
        self.sqlite_integrity == "ok" && self.problems.is_empty()
    }
}

impl Store {
    /// Verifies the store: SQLite integrity, every foreign reference resolves, content hashes
    /// match content, trajectories are ordered (versions 1..n, each version's messages arrived
    /// after the previous version's, timestamps non-decreasing: see `check_trajectory_order`), claim
    /// quotes occur in their sources, replaying each namespace's op log gives the stored claim
    /// state, insights agree with their compilations, cached vectors have their model's size.
    pub fn check(&self) -> Result<CheckReport> {
        let mut report = CheckReport::default();
        let c = &self.conn;
        // PostgreSQL checks its own pages and enforces foreign keys on every statement.
        let lines: Vec<String> = if c.is_postgres() {
            vec!["ok".to_string()]
        } else {
            let mut stmt = c
                .prepare("PRAGMA integrity_check")
                .ctx("checking integrity")?;
            let rows = stmt
                .query_map((), |row| row.get(0))
                .ctx("checking integrity")?
                .collect::<rusqlite::Result<_>>()
                .ctx("checking integrity")?;
            rows
        };
        report.sqlite_integrity = lines.join("; ");

        for table in [
            "namespaces",
            "messages",
            "runs",
            "snapshots",
            "claims",
            "claim_ops",
            "trajectories",
            "page_revisions",
            "insights",
            "embeddings",
        ] {
            let n: i64 = c
                .query_row(&format!("SELECT count(*) FROM {table}"), (), |row| {
                    row.get(0)
                })
                .ctx("counting records")?;
            report.examined.push((table.to_string(), n as u64));
        }

        if !c.is_postgres() {
            let mut stmt = c
                .prepare("PRAGMA foreign_key_check")
                .ctx("checking foreign keys")?;
            let rows = stmt
                .query_map((), |row| row.tuple::<(String, Option<i64>, String)>())
                .ctx("checking foreign keys")?
                .collect::<rusqlite::Result<Vec<_>>>()
                .ctx("checking foreign keys")?;
            for (table, rowid, parent) in rows {
                report.problems.push(Problem {
                    invariant: "foreign reference resolves",
                    id: format!("{table} row {}", rowid.unwrap_or(-1)),
                    detail: format!("points at a missing {parent} row"),
                });
            }
        }

        // The namespace that keys a list row (and a claim state) is its owner's.
        for (table, owner, parent) in [
            ("snapshot_messages", "snapshot", "snapshots"),
            ("snapshot_claims", "snapshot", "snapshots"),
            ("claim_sources", "claim", "claims"),
            ("op_sources", "op", "claim_ops"),
            ("claim_state", "claim", "claims"),
            ("page_trajectories", "page", "pages"),
        ] {
            let mut stmt = c
                .prepare(&format!(
                    "SELECT x.{owner}, x.namespace, p.namespace FROM {table} x
                     JOIN {parent} p ON p.id = x.{owner} WHERE x.namespace != p.namespace
                     ORDER BY x.{owner}"
                ))
                .ctx("checking list namespaces")?;
            let rows = stmt
                .query_map((), |row| row.tuple::<(String, String, String)>())
                .ctx("checking list namespaces")?
                .collect::<rusqlite::Result<Vec<_>>>()
                .ctx("checking list namespaces")?;
            for (id, stored, owner_ns) in rows {
                report.problems.push(Problem {
                    invariant: "a list row is in its owner's namespace",
                    id,
                    detail: format!("{table} row in `{stored}`, its {owner} in `{owner_ns}`"),
                });
            }
        }

        // Raw messages are unchanged since ingest.
        {
            let mut stmt = c
                .prepare(&format!("{MESSAGE_SELECT} ORDER BY id"))
                .ctx("reading messages")?;
            let mut hashes = c
                .prepare("SELECT content_hash FROM messages WHERE id = ?1")
                .ctx("reading hashes")?;
            let rows = stmt
                .query_map((), message_row)
                .ctx("reading messages")?
                .collect::<rusqlite::Result<Vec<_>>>()
                .ctx("reading messages")?;
            for row in rows {
                let id = row.0.clone();
                match decode_message(row) {
                    Ok(msg) => {
                        let stored: String = hashes
                            .query_row([&id], |r| r.get(0))
                            .ctx("reading hashes")?;
                        if stored != msg.content_hash() {
                            report.problems.push(Problem {
                                invariant: "message content matches its hash",
                                id,
                                detail: "the stored content was changed after ingest".into(),
                            });
                        }
                    }
                    Err(e) => report.problems.push(Problem {
                        invariant: "message decodes",
                        id,
                        detail: e.to_string(),
                    }),
                }
            }
        }

        check_trajectory_order(c, &mut report)?;

        // Claims: at least one source, quote occurs in a source (text or attachment caption).
        {
            let mut stmt = c
                .prepare(&format!(
                    "SELECT c.id, c.quote, {}
                     FROM claims c LEFT JOIN claim_sources s ON s.namespace = c.namespace AND s.claim = c.id
                     LEFT JOIN messages m ON m.id = s.message
                     GROUP BY c.id ORDER BY c.id",
                    if c.is_postgres() {
                        "string_agg(m.text || chr(31) || m.attachments, chr(30))"
                    } else {
                        "group_concat(m.text || char(31) || m.attachments, char(30))"
                    }
                ))
                .ctx("reading claims")?;
            let rows = stmt
                .query_map((), |row| row.tuple::<(String, String, Option<String>)>())
                .ctx("reading claims")?
                .collect::<rusqlite::Result<Vec<_>>>()
                .ctx("reading claims")?;
            for (id, quote, sources) in rows {
                match sources {
                    None => report.problems.push(Problem {
                        invariant: "claim has a source",
                        id,
                        detail: "no source messages".into(),
                    }),
                    Some(sources) => {
                        let found = sources.split('\u{1e}').any(|s| {
                            let (text, attachments) = s.split_once('\u{1f}').unwrap_or((s, "[]"));
                            text.contains(&quote)
                                || serde_json::from_str::<Vec<trajwiki_core::Attachment>>(
                                    attachments,
                                )
                                .map(|a| {
                                    a.iter().any(|a| {
                                        a.caption.as_deref().is_some_and(|cap| cap.contains(&quote))
                                    })
                                })
                                .unwrap_or(false)
                        });
                        if !found {
                            report.problems.push(Problem {
                                invariant: "claim quote occurs in a source",
                                id,
                                detail: format!(
                                    "quote {} is in none of its sources",
                                    serde_json::Value::from(quote.as_str())
                                ),
                            });
                        }
                    }
                }
            }
        }

        // Ops replay to the stored state.
        for ns in self.namespaces()? {
            match replayed_state(c, &ns) {
                Ok(replayed) => {
                    let mut stmt = c
                        .prepare(
                            "SELECT claim, status FROM claim_state WHERE namespace = ?1
                             ORDER BY claim",
                        )
                        .ctx("reading claim state")?;
                    let stored = stmt
                        .query_map([ns.as_str()], |row| {
                            Ok((row.get::<String>(0)?, row.get::<String>(1)?))
                        })
                        .ctx("reading claim state")?
                        .collect::<rusqlite::Result<Vec<_>>>()
                        .ctx("reading claim state")?;
                    let replayed: Vec<(String, String)> = replayed
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.as_str().to_string()))
                        .collect();
                    if stored != replayed {
                        let first = stored
                            .iter()
                            .zip(&replayed)
                            .find(|(a, b)| a != b)
                            .map(|(a, b)| {
                                format!(
                                    "stored claim {} {}, replayed claim {} {}",
                                    a.0, a.1, b.0, b.1
                                )
                            })
                            .unwrap_or_else(|| {
                                format!(
                                    "{} stored states, {} replayed",
                                    stored.len(),
                                    replayed.len()
                                )
                            });
                        report.problems.push(Problem {
                            invariant: "op log replays to the stored claim state",
                            id: ns.to_string(),
                            detail: first,
                        });
                    }
                }
                Err(e) => report.problems.push(Problem {
                    invariant: "op log replays",
                    id: ns.to_string(),
                    detail: e.to_string(),
                }),
            }
        }

        // Insights resolve to their compilation's run; pages' current revision exists.
        let mismatched = collect_pairs(
            c,
            "SELECT i.id, i.run FROM insights i JOIN compilations c ON c.id = i.compilation WHERE c.run != i.run",
        )?;
        for (id, run) in mismatched {
            report.problems.push(Problem {
                invariant: "insight resolves to its compilation's run",
                id,
                detail: format!("names run {run}, its compilation another"),
            });
        }
        let missing_rev = collect_pairs(
            c,
            "SELECT p.id, p.current_revision FROM pages p WHERE p.current_revision IS NOT NULL
             AND NOT EXISTS (SELECT 1 FROM page_revisions r WHERE r.page = p.id AND r.revision = p.current_revision)",
        )?;
        for (id, rev) in missing_rev {
            report.problems.push(Problem {
                invariant: "page's current revision exists",
                id,
                detail: format!("revision {rev} is missing"),
            });
        }
        // Every chunk a revision lists is stored (schema 9).
        let stored_chunks: std::collections::HashSet<(String, String)> =
            collect_pairs(c, "SELECT namespace, hash FROM page_chunks")?
                .into_iter()
                .collect();
        // And every chunk of a revision's links (schema 10), each id in them a trajectory of
        // the page's namespace.
        let mut link_hashes: std::collections::HashSet<(String, String)> = Default::default();
        for (column, invariant) in [
            ("chunks", "page revision's chunks are stored"),
            ("link_chunks", "page revision's link chunks are stored"),
        ] {
            let listed: Vec<(String, String, i64, String)> = {
                let mut stmt = c
                    .prepare(&format!(
                        "SELECT p.namespace, r.page, r.revision, r.{column}
                         FROM page_revisions r JOIN pages p ON p.id = r.page
                         WHERE r.{column} IS NOT NULL"
                    ))
                    .ctx("checking invariants")?;
                let rows = stmt
                    .query_map((), |row| row.tuple::<(String, String, i64, String)>())
                    .ctx("checking invariants")?
                    .collect::<rusqlite::Result<Vec<_>>>()
                    .ctx("checking invariants")?;
                rows
            };
            for (ns, page, rev, list) in listed {
                let hashes = list.split(',').filter(|h| !h.is_empty());
                if column == "link_chunks" {
                    link_hashes.extend(hashes.clone().map(|h| (ns.clone(), h.to_string())));
                }
                if let Some(h) = hashes
                    .into_iter()
                    .find(|h| !stored_chunks.contains(&(ns.clone(), h.to_string())))
                {
                    report.problems.push(Problem {
                        invariant,
                        id: page,
                        detail: format!("revision {rev} lists chunk {h}, which is not stored"),
                    });
                }
            }
        }
        let trajectories: std::collections::HashSet<(String, String)> =
            collect_pairs(c, "SELECT namespace, id FROM trajectories")?
                .into_iter()
                .collect();
        let mut chunks = c
            .prepare("SELECT namespace, hash, text FROM page_chunks ORDER BY namespace, hash")
            .ctx("checking invariants")?;
        let chunks = chunks
            .query_map((), |row| row.tuple::<(String, String, String)>())
            .ctx("checking invariants")?;
        for chunk in chunks {
            let (ns, hash, text) = chunk.ctx("checking invariants")?;
            if !link_hashes.contains(&(ns.clone(), hash.clone())) {
                continue;
            }
            if let Some(t) = text
                .lines()
                .find(|t| !trajectories.contains(&(ns.clone(), t.to_string())))
            {
                report.problems.push(Problem {
                    invariant: "page links resolve",
                    id: format!("{ns}/{hash}"),
                    detail: format!("links {t}, which is no trajectory of the namespace"),
                });
            }
        }
        let bad_vectors = collect_pairs(
            c,
            "SELECT e.model_id || '/' || e.text_hash, length(e.vector) FROM embeddings e
             JOIN embedding_models m ON m.model_id = e.model_id WHERE length(e.vector) != 4 * m.dim",
        )?;
        for (id, len) in bad_vectors {
            report.problems.push(Problem {
                invariant: "cached vector has its model's dimension",
                id,
                detail: format!("{len} bytes"),
            });
        }
        check_generations(c, &mut report)?;
        self.check_vector_files(&mut report)?;
        self.check_segments(&mut report)?;
        Ok(report)
    }
}

/// Every namespace has a generation, and no record of it was stamped after it: what a read of
/// the changes after a cursor counts on (`changes` module).
fn check_generations(c: &Db, report: &mut CheckReport) -> Result<()> {
    let missing = collect_pairs(
        c,
        "SELECT n.id, '' FROM namespaces n
         WHERE NOT EXISTS (SELECT 1 FROM namespace_generations g WHERE g.namespace = n.id)
         ORDER BY n.id",
    )?;
    for (id, _) in missing {
        report.problems.push(Problem {
            invariant: "a namespace has a generation",
            id,
            detail: "no namespace_generations row".into(),
        });
    }
    for (table, id) in [
        ("snapshots", "id"),
        ("claims", "id"),
        ("claim_state", "claim"),
        ("trajectories", "id"),
        ("pages", "id"),
    ] {
        let newer = collect_pairs(
            c,
            &format!(
                "SELECT x.{id}, x.generation FROM {table} x
                 JOIN namespace_generations g ON g.namespace = x.namespace
                 WHERE x.generation > g.generation ORDER BY x.{id}"
            ),
        )?;
        for (id, generation) in newer {
            report.problems.push(Problem {
                invariant: "no record is newer than its namespace's generation",
                id,
                detail: format!("{table} row of generation {generation}"),
            });
        }
    }
    Ok(())
}

impl Store {
    /// Each vector file holds its committed rows, one per message up to its last row's message,
    /// and the rows it holds for messages whose vectors are cached equal the cache (to f16
    /// rounding). A tail past the committed rows is not a problem: the next append drops it.
    fn check_vector_files(&self, report: &mut CheckReport) -> Result<()> {
        let files: Vec<(String, String)> = {
            let mut stmt = self
                .conn
                .prepare(
                    "SELECT namespace, model_id FROM vector_files ORDER BY namespace, model_id",
                )
                .ctx("listing vector files")?;
            let rows = stmt
                .query_map((), |r| Ok((r.get(0)?, r.get(1)?)))
                .ctx("listing vector files")?
                .collect::<rusqlite::Result<_>>()
                .ctx("listing vector files")?;
            rows
        };
        report
            .examined
            .push(("vector_files".to_string(), files.len() as u64));
        for (ns, model) in files {
            let id = format!("{ns}/{model}");
            let Ok(namespace) = trajwiki_core::Namespace::new(ns.as_str()) else {
                continue; // reported with the namespace
            };
            let problem = |detail: String| Problem {
                invariant: "vector file holds one committed row per message",
                id: id.clone(),
                detail,
            };
            let mapped = match self.map_vectors(&namespace, &model) {
                Ok(Some(m)) => m,
                Ok(None) => continue,
                Err(e) => {
                    report.problems.push(problem(e.to_string()));
                    continue;
                }
            };
            let info = mapped.info().clone();
            let covered: i64 = self
                .conn
                .query_row(
                    "SELECT count(*) FROM messages WHERE namespace = ?1 AND rowid <= ?2",
                    rusqlite::params![ns, info.last_rowid],
                    |r| r.get(0),
                )
                .ctx("counting a vector file's messages")?;
            if covered as usize != info.rows {
                report.problems.push(problem(format!(
                    "{} rows committed for {covered} messages up to rowid {}",
                    info.rows, info.last_rowid
                )));
                continue;
            }
            // Rows against the cache, where the cache has the message's text: the file's rows
            // are the first `rows` messages in ingest order.
            let messages = self.messages_after(&namespace, 0)?;
            let hashes: Vec<String> = messages[..info.rows]
                .iter()
                .map(|(_, m)| trajwiki_core::text_hash(&m.embedding_text()))
                .collect();
            let refs: Vec<&str> = hashes.iter().map(String::as_str).collect();
            let cached = self.cached_embeddings(&model, info.dim, &refs)?;
            let mut row = vec![0f32; info.dim];
            for (i, (want, (_, m))) in cached.iter().zip(&messages).enumerate() {
                let Some(want) = want else {
                    continue;
                };
                mapped.row_f32(i, &mut row);
                let off = want
                    .iter()
                    .zip(&row)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0f32, f32::max);
                // f16 keeps 11 significant bits: a unit vector's entries round within 2^-11.
                if off > 1e-3 {
                    report.problems.push(problem(format!(
                        "row {i} (message {}) differs from its cached vector by {off}",
                        m.id
                    )));
                    break;
                }
            }
        }
        Ok(())
    }
}

/// One snapshot as the order check reads it.
struct Version {
    trajectory: String,
    id: String,
    version: i64,
    timestamp: String,
    /// Ingest positions (`messages.rowid`) of its first and last arrived message; `None` for a
    /// snapshot without messages.
    arrival: Option<(i64, i64)>,
}

/// Trajectories are ordered as the construction fold appends to them (see `trajwiki-memory`'s
/// `fold`): versions are 1..n without gaps; a version's messages all arrived after the previous
/// version's (versions follow arrival: records are appended, never inserted before others); and
/// a version is never said before the previous one (an exchange older than a trajectory's latest
/// snapshot opens a trajectory of its own), so the latest version is the trajectory's current
/// state.
fn check_trajectory_order(c: &Db, report: &mut CheckReport) -> Result<()> {
    let mut stmt = c
        .prepare(
            "SELECT s.trajectory, s.id, s.version, s.timestamp, min(m.rowid), max(m.rowid)
             FROM snapshots s
             LEFT JOIN snapshot_messages x ON x.namespace = s.namespace AND x.snapshot = s.id
             LEFT JOIN messages m ON m.id = x.message
             GROUP BY s.trajectory, s.id, s.version, s.timestamp
             ORDER BY s.trajectory, s.version, s.id",
        )
        .ctx("reading snapshots")?;
    let rows = stmt
        .query_map((), |row| {
            let (first, last) = (row.get::<Option<i64>>(4)?, row.get::<Option<i64>>(5)?);
            Ok(Version {
                trajectory: row.get(0)?,
                id: row.get(1)?,
                version: row.get(2)?,
                timestamp: row.get(3)?,
                arrival: first.zip(last),
            })
        })
        .ctx("reading snapshots")?
        .collect::<rusqlite::Result<Vec<_>>>()
        .ctx("reading snapshots")?;
    let mut prev: Option<&Version> = None;
    for v in &rows {
        let prev_in_trajectory = prev.filter(|p| p.trajectory == v.trajectory);
        let expected = prev_in_trajectory.map_or(1, |p| p.version + 1);
        let problem = |invariant, detail| Problem {
            invariant,
            id: v.id.clone(),
            detail,
        };
        if v.version != expected {
            report.problems.push(problem(
                "trajectory versions are 1..n",
                format!(
                    "version {} in {}, expected {expected}",
                    v.version, v.trajectory
                ),
            ));
        }
        if let Some(p) = prev_in_trajectory {
            if let (Some((_, p_last)), Some((first, _))) = (p.arrival, v.arrival) {
                if first <= p_last {
                    report.problems.push(problem(
                        "trajectory versions follow arrival",
                        format!(
                            "version {} of {} holds a message that arrived (rowid {first}) before \
                             the last of version {} (rowid {p_last})",
                            v.version, v.trajectory, p.version
                        ),
                    ));
                }
            }
            if p.timestamp > v.timestamp {
                report.problems.push(problem(
                    "trajectory timestamps do not go back",
                    format!(
                        "version {} of {} at {} follows version {} at {}",
                        v.version, v.trajectory, v.timestamp, p.version, p.timestamp
                    ),
                ));
            }
        }
        prev = Some(v);
    }
    Ok(())
}

fn collect_pairs(c: &Db, sql: &str) -> Result<Vec<(String, String)>> {
    let mut stmt = c.prepare(sql).ctx("checking invariants")?;
    let rows = stmt
        .query_map((), |row| {
            let b: rusqlite::types::Value = row.get(1)?;
            let b = match b {
                rusqlite::types::Value::Integer(i) => i.to_string(),
                rusqlite::types::Value::Text(t) => t,
                rusqlite::types::Value::Null => "null".into(),
                rusqlite::types::Value::Real(x) => x.to_string(),
                rusqlite::types::Value::Blob(b) => format!("a blob of {} bytes", b.len()),
            };
            Ok((row.get::<String>(0)?, b))
        })
        .ctx("checking invariants")?
        .collect::<rusqlite::Result<Vec<_>>>()
        .ctx("checking invariants")?;
    Ok(rows)
}
