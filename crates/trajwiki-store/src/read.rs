//! Reading derived records back: one record by id, or all of a namespace's, through the same
//! code. A namespace read is one query per table (the record rows, then each child list, merged
//! with them in id order), never one query per record, so loading a namespace costs a few
//! statements whatever its size and whatever else the store holds: every record table is indexed
//! on `namespace`, and the list tables are keyed by it, so a namespace's lists are one key range.

use std::collections::HashMap;

use rusqlite::params;

use crate::db::{Db, Row};
use trajwiki_core::{
    Claim, ClaimId, ClaimOp, ClaimStatus, IdError, ItemCount, MessageId, Namespace, OpKind, PageId,
    PageKind, Signals, Snapshot, SnapshotId, Trajectory, TrajectoryId, WikiPage,
};

use crate::error::{Result, SqlContext, StoreError};
use crate::{from_json, parse_stored, parse_ts};

/// Which records a read covers.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Scope<'a> {
    /// The record with this id.
    Id(&'a str),
    /// Every record of this namespace.
    Namespace(&'a str),
    /// The records of this namespace that writes after this generation inserted or changed
    /// (see [`changed_ids`]).
    Changed(&'a str, i64),
}

impl Scope<'_> {
    /// The condition on the rows of record table `table` that the scope covers.
    fn filter(self, table: &str) -> String {
        match self {
            Scope::Id(_) => "id = ?1".into(),
            Scope::Namespace(_) => "namespace = ?1".into(),
            Scope::Changed(..) => format!("id IN ({})", changed_ids(table)),
        }
    }

    /// The statement parameters: the scope's value (`?1`), and for changes the generation (`?2`).
    fn params(&self) -> Vec<&dyn rusqlite::ToSql> {
        match self {
            Scope::Id(v) | Scope::Namespace(v) => vec![v],
            Scope::Changed(ns, since) => vec![ns, since],
        }
    }
}

/// The ids of the records of `table` (`?1` the namespace) that writes after generation `?2`
/// inserted or changed, by the (namespace, generation) indexes: claims whose status changed
/// are changed claims, trajectories that got a snapshot are changed trajectories.
fn changed_ids(table: &str) -> String {
    let stamped = |t: &str, id: &str| {
        format!("SELECT {id} FROM {t} WHERE namespace = ?1 AND generation > ?2")
    };
    match table {
        "claims" => format!(
            "{} UNION {}",
            stamped("claims", "id"),
            stamped("claim_state", "claim")
        ),
        "trajectories" => format!(
            "{} UNION {}",
            stamped("trajectories", "id"),
            stamped("snapshots", "trajectory")
        ),
        other => stamped(other, "id"),
    }
}

/// Runs `sql` (the scope's parameters) and maps each row.
fn rows<T>(
    conn: &Db,
    sql: &str,
    scope: Scope<'_>,
    context: &'static str,
    map: impl FnMut(&Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>> {
    let mut stmt = conn.prepare_cached(sql).ctx(context)?;
    let params = scope.params();
    let out = stmt
        .query_map(params.as_slice(), map)
        .ctx(context)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .ctx(context)?;
    Ok(out)
}

/// Child lists in the order of their owners' ids, handed out owner by owner: the owners are
/// visited in id order too, so the two are merged without a map of owners.
struct ChildLists<T> {
    rows: std::iter::Peekable<std::vec::IntoIter<(String, T)>>,
}

impl<T> ChildLists<T> {
    /// Lists from (owner, child) rows in owner order.
    fn new(rows: Vec<(String, T)>) -> Self {
        ChildLists {
            rows: rows.into_iter().peekable(),
        }
    }

    /// The children of `owner`; owners are asked for in increasing id order.
    fn of(&mut self, owner: &str) -> Vec<T> {
        // Children of an owner that is not asked for (none in a consistent read) are skipped.
        while self.rows.next_if(|(o, _)| o.as_str() < owner).is_some() {}
        let mut out = Vec::new();
        while let Some((_, child)) = self.rows.next_if(|(o, _)| o == owner) {
            out.push(child);
        }
        out
    }
}

/// The `child` column of `table` for each of its owners in scope (`table.owner` refers to
/// `parent.id`; `table` has a `namespace` column leading its key), each list in `order`. A
/// namespace's lists are one range of the table's key.
fn positioned<T: TryFrom<String, Error = IdError>>(
    conn: &Db,
    scope: Scope<'_>,
    (parent, table, owner, child, order): (&str, &'static str, &str, &'static str, &str),
) -> Result<ChildLists<T>> {
    let sql = match scope {
        Scope::Namespace(_) => format!(
            "SELECT {owner}, {child} FROM {table} WHERE namespace = ?1 ORDER BY {owner}, {order}"
        ),
        Scope::Id(_) => format!(
            "SELECT {owner}, {child} FROM {table}
             WHERE namespace = (SELECT namespace FROM {parent} WHERE id = ?1) AND {owner} = ?1
             ORDER BY {order}"
        ),
        Scope::Changed(..) => format!(
            "SELECT {owner}, {child} FROM {table}
             WHERE namespace = ?1 AND {owner} IN ({})
             ORDER BY {owner}, {order}",
            changed_ids(parent)
        ),
    };
    let found = rows(conn, &sql, scope, "reading a record list", |row| {
        Ok((row.get::<String>(0)?, row.get::<String>(1)?))
    })?;
    lists(found, table, child)
}

/// Parses the children of (owner, child) rows that are in owner order.
fn lists<T: TryFrom<String, Error = IdError>>(
    found: Vec<(String, String)>,
    table: &'static str,
    child: &'static str,
) -> Result<ChildLists<T>> {
    Ok(ChildLists::new(parsed(found, table, child)?))
}

/// (owner, child) rows with each child parsed, in their order.
fn parsed<T: TryFrom<String, Error = IdError>>(
    found: Vec<(String, String)>,
    table: &'static str,
    child: &'static str,
) -> Result<Vec<(String, T)>> {
    found
        .into_iter()
        .map(|(owner, c)| Ok((owner, stored_id(c, table, child, "")?)))
        .collect()
}

/// Parses a stored id, naming the place on failure; the string is kept, not copied. `record` is
/// the record that holds the id; empty when the id is the record's own (the error then names
/// the rejected id).
fn stored_id<T: TryFrom<String, Error = IdError>>(
    value: String,
    table: &'static str,
    column: &'static str,
    record: &str,
) -> Result<T> {
    T::try_from(value).map_err(|e| {
        let id = match (&e, record) {
            (IdError::Malformed { id, .. } | IdError::WrongKind { id, .. }, "") => id.clone(),
            _ => record.to_string(),
        };
        StoreError::Corrupt {
            table,
            column,
            id,
            reason: e.to_string(),
        }
    })
}

/// Snapshots in scope, by trajectory and version.
pub(crate) fn snapshots(conn: &Db, scope: Scope<'_>) -> Result<Vec<Snapshot>> {
    let filter = scope.filter("snapshots");
    let mut claims = positioned::<ClaimId>(
        conn,
        scope,
        (
            "snapshots",
            "snapshot_claims",
            "snapshot",
            "claim",
            "position",
        ),
    )?;
    let mut messages = positioned::<MessageId>(
        conn,
        scope,
        (
            "snapshots",
            "snapshot_messages",
            "snapshot",
            "message",
            "position",
        ),
    )?;
    let sql = format!(
        "SELECT id, namespace, trajectory, version, timestamp, summary, context, keywords
         FROM snapshots WHERE {filter}"
    );
    let mut found = rows(conn, &sql, scope, "reading snapshots", |row| {
        row.tuple::<(String, String, String, u32, String, String, String, String)>()
    })?;
    found.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let mut out = found
        .into_iter()
        .map(
            |(id, ns, trajectory, version, ts, summary, context, keywords)| {
                let sid = id.as_str();
                Ok(Snapshot {
                    namespace: parse_stored(Namespace::new(ns), "snapshots", "namespace", sid)?,
                    trajectory: stored_id(trajectory, "snapshots", "trajectory", sid)?,
                    version,
                    timestamp: parse_ts(&ts, "snapshots", sid)?,
                    summary,
                    context,
                    keywords: from_json(&keywords, "snapshots", "keywords", sid)?,
                    claim_ids: claims.of(sid),
                    source_message_ids: messages.of(sid),
                    id: stored_id(id, "snapshots", "id", "")?,
                })
            },
        )
        .collect::<Result<Vec<Snapshot>>>()?;
    out.sort_by(|a, b| (&a.trajectory, a.version).cmp(&(&b.trajectory, b.version)));
    Ok(out)
}

/// Claims in scope, sorted by id, each with the status it was created with and its current
/// status (from `claim_state`; the creation status where the state records none).
pub(crate) fn claims_with_states(conn: &Db, scope: Scope<'_>) -> Result<Vec<(Claim, ClaimStatus)>> {
    claim_rows(conn, scope, true)
}

/// Claims in scope (each with the status it was created with), sorted by id.
pub(crate) fn claims(conn: &Db, scope: Scope<'_>) -> Result<Vec<Claim>> {
    Ok(claim_rows(conn, scope, false)?
        .into_iter()
        .map(|(c, _)| c)
        .collect())
}

/// Claims in scope with their current status, read from `claim_state` when `states` (else the
/// creation status, without looking the state up).
fn claim_rows(conn: &Db, scope: Scope<'_>, states: bool) -> Result<Vec<(Claim, ClaimStatus)>> {
    let filter = scope.filter("claims");
    let mut sources = positioned::<MessageId>(
        conn,
        scope,
        ("claims", "claim_sources", "claim", "message", "position"),
    )?;
    // The states are one key range of `claim_state`, read in claim order and merged with the
    // claims (a join looked each one up: twice the time of both reads).
    let mut states = if states {
        let sql = match scope {
            Scope::Namespace(_) => {
                "SELECT claim, status FROM claim_state WHERE namespace = ?1 ORDER BY claim".into()
            }
            Scope::Id(_) => "SELECT claim, status FROM claim_state
                 WHERE namespace = (SELECT namespace FROM claims WHERE id = ?1) AND claim = ?1"
                .into(),
            Scope::Changed(..) => format!(
                "SELECT claim, status FROM claim_state
                 WHERE namespace = ?1 AND claim IN ({}) ORDER BY claim",
                changed_ids("claims")
            ),
        };
        ChildLists::new(rows(conn, &sql, scope, "reading claim states", |row| {
            Ok((row.get::<String>(0)?, row.get::<String>(1)?))
        })?)
    } else {
        ChildLists::new(Vec::new())
    };
    let sql = format!(
        "SELECT c.id, c.namespace, c.snapshot, c.text, c.status, c.quote, c.revised_from
         FROM claims c WHERE c.{filter}"
    );
    type ClaimRow = (
        String,
        String,
        String,
        String,
        String,
        String,
        Option<String>,
    );
    let status = |s: &str, table, cid: &str| {
        parse_stored(
            ClaimStatus::parse(s).ok_or("unknown status"),
            table,
            "status",
            cid,
        )
    };
    let mut found = rows(conn, &sql, scope, "reading claims", |row| {
        row.tuple::<ClaimRow>()
    })?;
    found.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    found
        .into_iter()
        .map(|(id, ns, snapshot, text, created, quote, revised_from)| {
            let cid = id.as_str();
            let created = status(&created, "claims", cid)?;
            let current = match states.of(cid).pop() {
                Some(s) => status(&s, "claim_state", cid)?,
                None => created,
            };
            let claim = Claim {
                namespace: parse_stored(Namespace::new(ns), "claims", "namespace", cid)?,
                snapshot: stored_id(snapshot, "claims", "snapshot", cid)?,
                text,
                status: created,
                source_message_ids: sources.of(cid),
                quote,
                revised_from: revised_from
                    .map(|r| stored_id(r, "claims", "revised_from", cid))
                    .transpose()?,
                id: stored_id(id, "claims", "id", "")?,
            };
            Ok((claim, current))
        })
        .collect()
}

/// The restatements of the deprecated claims in scope: (claim, message) for each message that an
/// ADD op names as stating the claim again and that is not one of the claim's own sources, by
/// claim id, then in op order, each pair once. A reader marks these messages with what became of
/// the claim, as it marks the claim's sources.
pub(crate) fn restatements(conn: &Db, scope: Scope<'_>) -> Result<Vec<(ClaimId, MessageId)>> {
    let claims = match scope {
        Scope::Id(_) => {
            "st.namespace = (SELECT namespace FROM claims WHERE id = ?1) AND st.claim = ?1".into()
        }
        Scope::Namespace(_) => "st.namespace = ?1".into(),
        Scope::Changed(..) => format!(
            "st.namespace = ?1 AND st.claim IN ({})",
            changed_ids("claims")
        ),
    };
    // From the deprecated claims to their ADD ops to the ops' sources, in that order (SQLite
    // keeps a CROSS JOIN's order): a read of changes looks up only the changed claims.
    let sql = format!(
        "SELECT o.new_claim, s.message
         FROM claim_state st CROSS JOIN claim_ops o CROSS JOIN op_sources s
         WHERE {claims} AND st.status = 'deprecated'
           AND o.namespace = st.namespace AND o.new_claim = st.claim AND o.op = 'ADD'
           AND s.namespace = o.namespace AND s.op = o.id
           AND s.message NOT IN (SELECT c.message FROM claim_sources c
                                 WHERE c.namespace = o.namespace AND c.claim = o.new_claim)
         ORDER BY o.new_claim, o.seq, s.position"
    );
    let found = rows(conn, &sql, scope, "reading restatements", |row| {
        Ok((row.get::<String>(0)?, row.get::<String>(1)?))
    })?;
    let mut out: Vec<(ClaimId, MessageId)> = Vec::with_capacity(found.len());
    for (claim, message) in found {
        let claim: ClaimId = stored_id(claim, "claim_ops", "new_claim", "")?;
        let message: MessageId = stored_id(message, "op_sources", "message", "")?;
        if !out
            .iter()
            .rev()
            .take_while(|(c, _)| *c == claim)
            .any(|(_, m)| *m == message)
        {
            out.push((claim, message));
        }
    }
    Ok(out)
}

/// The current (derived) statuses of the claims of a namespace, from `claim_state`.
pub(crate) fn claim_states(conn: &Db, ns: &Namespace) -> Result<HashMap<ClaimId, ClaimStatus>> {
    rows(
        conn,
        "SELECT claim, status FROM claim_state WHERE namespace = ?1",
        Scope::Namespace(ns.as_str()),
        "reading claim state",
        |row| Ok((row.get::<String>(0)?, row.get::<String>(1)?)),
    )?
    .into_iter()
    .map(|(id, status)| {
        Ok((
            parse_stored(ClaimId::parse(&id), "claim_state", "claim", &id)?,
            parse_stored(
                ClaimStatus::parse(&status).ok_or("unknown status"),
                "claim_state",
                "status",
                &id,
            )?,
        ))
    })
    .collect()
}

/// Claim ops in scope, in seq order.
pub(crate) fn ops(conn: &Db, scope: Scope<'_>) -> Result<Vec<ClaimOp>> {
    let filter = scope.filter("claim_ops");
    let mut sources = positioned::<MessageId>(
        conn,
        scope,
        ("claim_ops", "op_sources", "op", "message", "position"),
    )?;
    let sql = format!(
        "SELECT id, namespace, seq, op, target, new_claim, new_status, rationale, snapshot
         FROM claim_ops WHERE {filter}"
    );
    type OpRow = (
        String,
        String,
        i64,
        String,
        Option<String>,
        Option<String>,
        Option<String>,
        String,
        String,
    );
    let mut found = rows(conn, &sql, scope, "reading claim ops", |row| {
        row.tuple::<OpRow>()
    })?;
    found.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let mut out = found
        .into_iter()
        .map(
            |(id, ns, seq, op, target, new_claim, new_status, rationale, snapshot)| {
                let oid = id.as_str();
                let claim = |c: Option<String>, column| {
                    c.map(|c| stored_id(c, "claim_ops", column, oid))
                        .transpose()
                };
                Ok(ClaimOp {
                    namespace: parse_stored(Namespace::new(ns), "claim_ops", "namespace", oid)?,
                    seq: seq as u64,
                    op: parse_stored(
                        OpKind::parse(&op).ok_or("unknown op"),
                        "claim_ops",
                        "op",
                        oid,
                    )?,
                    target: claim(target, "target")?,
                    new_claim: claim(new_claim, "new_claim")?,
                    new_status: new_status
                        .map(|s| {
                            parse_stored(
                                ClaimStatus::parse(&s).ok_or("unknown status"),
                                "claim_ops",
                                "new_status",
                                oid,
                            )
                        })
                        .transpose()?,
                    source_message_ids: sources.of(oid),
                    rationale,
                    snapshot: stored_id(snapshot, "claim_ops", "snapshot", oid)?,
                    id: stored_id(id, "claim_ops", "id", "")?,
                })
            },
        )
        .collect::<Result<Vec<ClaimOp>>>()?;
    out.sort_by_key(|o| o.seq);
    Ok(out)
}

/// Trajectories in scope, sorted by id, each with its snapshots in version order.
pub(crate) fn trajectories(conn: &Db, scope: Scope<'_>) -> Result<Vec<Trajectory>> {
    let sql = match scope {
        Scope::Namespace(_) => {
            "SELECT trajectory, id FROM snapshots WHERE namespace = ?1 ORDER BY trajectory, version"
                .into()
        }
        Scope::Id(_) => {
            "SELECT trajectory, id FROM snapshots WHERE trajectory = ?1 ORDER BY version".into()
        }
        // By the (trajectory, version) key: the namespace's key would read all its snapshots.
        Scope::Changed(..) => format!(
            "SELECT trajectory, id FROM snapshots
             WHERE trajectory IN ({}) ORDER BY trajectory, version",
            changed_ids("trajectories")
        ),
    };
    let found = rows(conn, &sql, scope, "reading a record list", |row| {
        Ok((row.get::<String>(0)?, row.get::<String>(1)?))
    })?;
    let mut snapshots = lists::<SnapshotId>(found, "snapshots", "id")?;
    trajectory_rows(conn, scope, |id| snapshots.of(id.as_str()))
}

/// [`trajectories`] of a namespace whose snapshots (by trajectory and version, as [`snapshots`]
/// reads them) are already read: each trajectory's list is taken from them.
pub(crate) fn trajectories_of(
    conn: &Db,
    ns: &str,
    snapshots: &[Snapshot],
) -> Result<Vec<Trajectory>> {
    // The snapshots are in trajectory order: merged with the trajectories, also in id order.
    let mut lists = ChildLists::new(
        snapshots
            .iter()
            .map(|s| (s.trajectory.to_string(), s.id.clone()))
            .collect(),
    );
    trajectory_rows(conn, Scope::Namespace(ns), |id| lists.of(id.as_str()))
}

/// The trajectory rows in scope, sorted by id, each given its snapshot list by `snapshots`
/// (called with the trajectory's id, in id order).
fn trajectory_rows(
    conn: &Db,
    scope: Scope<'_>,
    mut snapshots: impl FnMut(&TrajectoryId) -> Vec<SnapshotId>,
) -> Result<Vec<Trajectory>> {
    let filter = scope.filter("trajectories");
    let sql = format!(
        "SELECT id, namespace, continues, summary, signals FROM trajectories WHERE {filter}"
    );
    let mut found = rows(conn, &sql, scope, "reading trajectories", |row| {
        row.tuple::<(String, String, Option<String>, String, String)>()
    })?;
    found.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    found
        .into_iter()
        .map(|(id, ns, continues, summary, signals)| {
            let tid = id.as_str();
            let namespace = parse_stored(Namespace::new(ns), "trajectories", "namespace", tid)?;
            let continues = continues
                .map(|c| stored_id(c, "trajectories", "continues", tid))
                .transpose()?;
            let signals = from_json::<Signals>(&signals, "trajectories", "signals", tid)?;
            let id: TrajectoryId = stored_id(id, "trajectories", "id", "")?;
            Ok(Trajectory {
                namespace,
                snapshot_ids: snapshots(&id),
                continues,
                summary,
                signals,
                id,
            })
        })
        .collect()
}

/// Which page revisions a page read covers.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Pages<'a> {
    /// One revision of one page.
    Revision(&'a str, u32),
    /// The current revisions of a namespace's pages.
    Current(&'a str),
    /// The current revisions of a namespace's pages, with the fields retrieval routes on (kind,
    /// title, routing text, links) and not the rest: body, keywords, terms and items are left
    /// empty.
    Routing(&'a str),
    /// As `Routing`, the pages of a namespace that writes after a generation gave a new current
    /// revision.
    ChangedRouting(&'a str, i64),
}

/// Page revisions, sorted by kind then id.
pub(crate) fn pages(conn: &Db, which: Pages<'_>) -> Result<Vec<WikiPage>> {
    let (filter, value, revision) = match which {
        Pages::Revision(id, rev) => ("p.id = ?1 AND r.revision = ?2", id, rev as i64),
        // `?2` is bound but unused, so that both shapes take the same parameters.
        Pages::Current(ns) | Pages::Routing(ns) => (
            "p.namespace = ?1 AND r.revision = p.current_revision AND ?2 = ?2",
            ns,
            0,
        ),
        Pages::ChangedRouting(ns, since) => (
            "p.id IN (SELECT id FROM pages WHERE namespace = ?1 AND generation > ?2)
             AND r.revision = p.current_revision",
            ns,
            since,
        ),
    };
    let fields = match which {
        Pages::Routing(_) | Pages::ChangedRouting(..) => {
            "'', r.routing_text, '[]', '[]', '[]', NULL, r.link_chunks"
        }
        _ => "r.body, r.routing_text, r.keywords, r.terms, r.items, r.chunks, r.link_chunks",
    };
    // The links of revisions written before schema 10, as rows.
    let listed = {
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT x.page, x.trajectory FROM pages p
                 JOIN page_revisions r ON r.page = p.id
                 JOIN page_trajectories x
                   ON x.namespace = p.namespace AND x.page = p.id AND x.revision = r.revision
                 WHERE {filter} ORDER BY x.page, x.position"
            ))
            .ctx("reading page links")?;
        let found = stmt
            .query_map(params![value, revision], |row| {
                Ok((row.get::<String>(0)?, row.get::<String>(1)?))
            })
            .ctx("reading page links")?
            .collect::<rusqlite::Result<Vec<_>>>()
            .ctx("reading page links")?;
        parsed::<TrajectoryId>(found, "page_trajectories", "trajectory")?
    };
    type PageRow = (
        String,
        String,
        String,
        u32,
        String,
        String,
        String,
        String,
        String,
        String,
        Option<String>,
        Option<String>,
    );
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT p.id, p.namespace, p.kind, r.revision, r.title, {fields}
             FROM pages p JOIN page_revisions r ON r.page = p.id WHERE {filter}"
        ))
        .ctx("reading pages")?;
    let mut found = stmt
        .query_map(params![value, revision], |row| row.tuple::<PageRow>())
        .ctx("reading pages")?
        .collect::<rusqlite::Result<Vec<_>>>()
        .ctx("reading pages")?;
    found.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    // (namespace, page, chunk list) of the pages that have a list in a column.
    let lists_in = |column: fn(&PageRow) -> Option<&str>| -> Vec<(&str, &str, &str)> {
        found
            .iter()
            .filter_map(|r| column(r).map(|list| (r.1.as_str(), r.0.as_str(), list)))
            .collect()
    };
    // Bodies stored in chunks (schema 9) are put together from them.
    let lists = lists_in(|r| r.10.as_deref());
    let mut chunked = crate::page_chunks::bodies(conn, &lists, "chunks")?.into_iter();
    // The links of revisions written since (schema 10), from their chunks: one id a line.
    let link_lists = lists_in(|r| r.11.as_deref());
    let link_texts = crate::page_chunks::bodies(conn, &link_lists, "link_chunks")?;
    let mut links: Vec<(String, TrajectoryId)> = listed;
    for ((_, page, _), text) in link_lists.iter().zip(link_texts) {
        for id in text.lines() {
            let id = stored_id(id.to_string(), "page_revisions", "link_chunks", page)?;
            links.push((page.to_string(), id));
        }
    }
    // In page order (a page's links are in one place or the other, each in order).
    links.sort_by(|a, b| a.0.cmp(&b.0));
    let mut links = ChildLists::new(links);
    let found: Vec<_> = found
        .into_iter()
        .map(|mut r| {
            if r.10.take().is_some() {
                r.5 = chunked.next().unwrap_or_default();
            }
            r
        })
        .collect();
    let mut out = found
        .into_iter()
        .map(
            |(id, ns, kind, revision, title, body, routing_text, keywords, terms, items, _, _)| {
                let pid = id.as_str();
                Ok(WikiPage {
                    namespace: parse_stored(Namespace::new(ns), "pages", "namespace", pid)?,
                    kind: parse_stored(
                        PageKind::parse(&kind).ok_or("unknown kind"),
                        "pages",
                        "kind",
                        pid,
                    )?,
                    title,
                    body,
                    routing_text,
                    keywords: from_json(&keywords, "page_revisions", "keywords", pid)?,
                    trajectory_ids: links.of(pid),
                    terms: from_json(&terms, "page_revisions", "terms", pid)?,
                    items: from_json::<Vec<ItemCount>>(&items, "page_revisions", "items", pid)?,
                    revision,
                    id: stored_id(id, "pages", "id", "")?,
                })
            },
        )
        .collect::<Result<Vec<WikiPage>>>()?;
    // The order SQLite's `ORDER BY kind, id` gave: kinds by name.
    out.sort_by(|a, b| (a.kind.as_str(), &a.id).cmp(&(b.kind.as_str(), &b.id)));
    Ok(out)
}

/// The ids of the pages of `ns` that writes after generation `since` retired, sorted.
pub(crate) fn retired_pages(conn: &Db, ns: &str, since: i64) -> Result<Vec<PageId>> {
    let found = rows(
        conn,
        "SELECT id FROM pages
         WHERE namespace = ?1 AND generation > ?2 AND current_revision IS NULL ORDER BY id",
        Scope::Changed(ns, since),
        "reading retired pages",
        |row| row.get::<String>(0),
    )?;
    found
        .into_iter()
        .map(|id| stored_id(id, "pages", "id", ""))
        .collect()
}
