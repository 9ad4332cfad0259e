//! Reading derived records back: one record by id, or all of a namespace's, through the same
//! code. A namespace read is one query per table (the record rows, then each child list joined
//! to them), never one query per record, so loading a namespace costs a few statements whatever
//! its size and whatever else the store holds (every table is indexed on `namespace`).

use std::collections::HashMap;

use rusqlite::{params, Connection};
use trajwiki_core::{
    Claim, ClaimId, ClaimOp, ClaimStatus, ItemCount, MessageId, Namespace, OpId, OpKind, PageId,
    PageKind, Signals, Snapshot, SnapshotId, Trajectory, TrajectoryId, WikiPage,
};

use crate::error::{Result, SqlContext};
use crate::{from_json, parse_stored, parse_ts};

/// Which records a read covers.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Scope<'a> {
    /// The record with this id.
    Id(&'a str),
    /// Every record of this namespace.
    Namespace(&'a str),
}

impl Scope<'_> {
    /// The column of the record table that the scope filters on.
    fn column(self) -> &'static str {
        match self {
            Scope::Id(_) => "id",
            Scope::Namespace(_) => "namespace",
        }
    }

    fn value(&self) -> &str {
        match self {
            Scope::Id(v) | Scope::Namespace(v) => v,
        }
    }
}

/// Runs `sql` (one parameter, the scope's value) and maps each row.
fn rows<T>(
    conn: &Connection,
    sql: &str,
    scope: Scope<'_>,
    context: &'static str,
    map: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>> {
    let mut stmt = conn.prepare_cached(sql).ctx(context)?;
    let out = stmt
        .query_map([scope.value()], map)
        .ctx(context)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .ctx(context)?;
    Ok(out)
}

/// A child list (`owner`, `child` rows in position order), grouped by owner and parsed.
fn children<T>(
    conn: &Connection,
    sql: &str,
    scope: Scope<'_>,
    table: &'static str,
    parse: impl Fn(&str) -> std::result::Result<T, trajwiki_core::IdError>,
) -> Result<HashMap<String, Vec<T>>> {
    let mut out: HashMap<String, Vec<T>> = HashMap::new();
    for (owner, child) in rows(conn, sql, scope, "reading a record list", |row| {
        Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
    })? {
        let parsed = parse_stored(parse(&child), table, "id", &owner)?;
        out.entry(owner).or_default().push(parsed);
    }
    Ok(out)
}

/// The `child` column of `table` for each record of `parent` in scope, in `position` order,
/// grouped by the record (`table.owner` refers to `parent.id`).
fn positioned<T>(
    conn: &Connection,
    scope: Scope<'_>,
    (parent, table, owner, child): (&str, &'static str, &str, &str),
    parse: impl Fn(&str) -> std::result::Result<T, trajwiki_core::IdError>,
) -> Result<HashMap<String, Vec<T>>> {
    let col = scope.column();
    let sql = format!(
        "SELECT x.{owner}, x.{child} FROM {table} x JOIN {parent} p ON p.id = x.{owner}
         WHERE p.{col} = ?1 ORDER BY x.{owner}, x.position"
    );
    children(conn, &sql, scope, table, parse)
}

/// Snapshots in scope, by trajectory and version.
pub(crate) fn snapshots(conn: &Connection, scope: Scope<'_>) -> Result<Vec<Snapshot>> {
    let col = scope.column();
    let mut claims = positioned(
        conn,
        scope,
        ("snapshots", "snapshot_claims", "snapshot", "claim"),
        ClaimId::parse,
    )?;
    let mut messages = positioned(
        conn,
        scope,
        ("snapshots", "snapshot_messages", "snapshot", "message"),
        MessageId::parse,
    )?;
    let sql = format!(
        "SELECT id, namespace, trajectory, version, timestamp, summary, context, keywords
         FROM snapshots WHERE {col} = ?1 ORDER BY trajectory, version"
    );
    rows(conn, &sql, scope, "reading snapshots", |row| {
        <(String, String, String, u32, String, String, String, String)>::try_from(row)
    })?
    .into_iter()
    .map(
        |(id, ns, trajectory, version, ts, summary, context, keywords)| {
            let sid = id.as_str();
            Ok(Snapshot {
                namespace: parse_stored(Namespace::new(ns), "snapshots", "namespace", sid)?,
                trajectory: parse_stored(
                    TrajectoryId::parse(&trajectory),
                    "snapshots",
                    "trajectory",
                    sid,
                )?,
                version,
                timestamp: parse_ts(&ts, "snapshots", sid)?,
                summary,
                context,
                keywords: from_json(&keywords, "snapshots", "keywords", sid)?,
                claim_ids: claims.remove(sid).unwrap_or_default(),
                source_message_ids: messages.remove(sid).unwrap_or_default(),
                id: parse_stored(SnapshotId::parse(sid), "snapshots", "id", sid)?,
            })
        },
    )
    .collect()
}

/// Claims in scope (each with the status it was created with), sorted by id.
pub(crate) fn claims(conn: &Connection, scope: Scope<'_>) -> Result<Vec<Claim>> {
    let col = scope.column();
    let mut sources = positioned(
        conn,
        scope,
        ("claims", "claim_sources", "claim", "message"),
        MessageId::parse,
    )?;
    let sql = format!(
        "SELECT id, namespace, snapshot, text, status, quote, revised_from
         FROM claims WHERE {col} = ?1 ORDER BY id"
    );
    rows(conn, &sql, scope, "reading claims", |row| {
        <(
            String,
            String,
            String,
            String,
            String,
            String,
            Option<String>,
        )>::try_from(row)
    })?
    .into_iter()
    .map(|(id, ns, snapshot, text, status, quote, revised_from)| {
        let cid = id.as_str();
        Ok(Claim {
            namespace: parse_stored(Namespace::new(ns), "claims", "namespace", cid)?,
            snapshot: parse_stored(SnapshotId::parse(&snapshot), "claims", "snapshot", cid)?,
            text,
            status: parse_stored(
                ClaimStatus::parse(&status).ok_or("unknown status"),
                "claims",
                "status",
                cid,
            )?,
            source_message_ids: sources.remove(cid).unwrap_or_default(),
            quote,
            revised_from: revised_from
                .map(|r| parse_stored(ClaimId::parse(&r), "claims", "revised_from", cid))
                .transpose()?,
            id: parse_stored(ClaimId::parse(cid), "claims", "id", cid)?,
        })
    })
    .collect()
}

/// The current (derived) statuses of the claims of a namespace, from `claim_state`.
pub(crate) fn claim_states(
    conn: &Connection,
    ns: &Namespace,
) -> Result<HashMap<ClaimId, ClaimStatus>> {
    rows(
        conn,
        "SELECT x.claim, x.status FROM claim_state x JOIN claims c ON c.id = x.claim
         WHERE c.namespace = ?1",
        Scope::Namespace(ns.as_str()),
        "reading claim state",
        |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?)),
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
pub(crate) fn ops(conn: &Connection, scope: Scope<'_>) -> Result<Vec<ClaimOp>> {
    let col = scope.column();
    let mut sources = positioned(
        conn,
        scope,
        ("claim_ops", "op_sources", "op", "message"),
        MessageId::parse,
    )?;
    let sql = format!(
        "SELECT id, namespace, seq, op, target, new_claim, new_status, rationale, snapshot
         FROM claim_ops WHERE {col} = ?1 ORDER BY seq"
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
    rows(conn, &sql, scope, "reading claim ops", |row| {
        OpRow::try_from(row)
    })?
    .into_iter()
    .map(
        |(id, ns, seq, op, target, new_claim, new_status, rationale, snapshot)| {
            let oid = id.as_str();
            let claim = |c: Option<String>, column| {
                c.map(|c| parse_stored(ClaimId::parse(&c), "claim_ops", column, oid))
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
                source_message_ids: sources.remove(oid).unwrap_or_default(),
                rationale,
                snapshot: parse_stored(SnapshotId::parse(&snapshot), "claim_ops", "snapshot", oid)?,
                id: parse_stored(OpId::parse(oid), "claim_ops", "id", oid)?,
            })
        },
    )
    .collect()
}

/// Trajectories in scope, sorted by id, each with its snapshots in version order.
pub(crate) fn trajectories(conn: &Connection, scope: Scope<'_>) -> Result<Vec<Trajectory>> {
    let col = scope.column();
    let mut snapshots = children(
        conn,
        &format!(
            "SELECT s.trajectory, s.id FROM snapshots s JOIN trajectories t ON t.id = s.trajectory
             WHERE t.{col} = ?1 ORDER BY s.trajectory, s.version"
        ),
        scope,
        "snapshots",
        SnapshotId::parse,
    )?;
    let sql = format!(
        "SELECT id, namespace, continues, summary, signals FROM trajectories
         WHERE {col} = ?1 ORDER BY id"
    );
    rows(conn, &sql, scope, "reading trajectories", |row| {
        <(String, String, Option<String>, String, String)>::try_from(row)
    })?
    .into_iter()
    .map(|(id, ns, continues, summary, signals)| {
        let tid = id.as_str();
        Ok(Trajectory {
            namespace: parse_stored(Namespace::new(ns), "trajectories", "namespace", tid)?,
            snapshot_ids: snapshots.remove(tid).unwrap_or_default(),
            continues: continues
                .map(|c| parse_stored(TrajectoryId::parse(&c), "trajectories", "continues", tid))
                .transpose()?,
            summary,
            signals: from_json::<Signals>(&signals, "trajectories", "signals", tid)?,
            id: parse_stored(TrajectoryId::parse(tid), "trajectories", "id", tid)?,
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
}

/// Page revisions, sorted by kind then id.
pub(crate) fn pages(conn: &Connection, which: Pages<'_>) -> Result<Vec<WikiPage>> {
    let (filter, value, revision) = match which {
        Pages::Revision(id, rev) => ("p.id = ?1 AND r.revision = ?2", id, rev as i64),
        // `?2` is bound but unused, so that both shapes take the same parameters.
        Pages::Current(ns) => (
            "p.namespace = ?1 AND r.revision = p.current_revision AND ?2 = ?2",
            ns,
            0,
        ),
    };
    let mut links: HashMap<String, Vec<TrajectoryId>> = HashMap::new();
    {
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT x.page, x.trajectory FROM page_trajectories x
                 JOIN pages p ON p.id = x.page JOIN page_revisions r ON r.page = p.id AND r.revision = x.revision
                 WHERE {filter} ORDER BY x.page, x.position"
            ))
            .ctx("reading page links")?;
        let found = stmt
            .query_map(params![value, revision], |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
            })
            .ctx("reading page links")?
            .collect::<rusqlite::Result<Vec<_>>>()
            .ctx("reading page links")?;
        for (page, t) in found {
            let parsed = parse_stored(
                TrajectoryId::parse(&t),
                "page_trajectories",
                "trajectory",
                &page,
            )?;
            links.entry(page).or_default().push(parsed);
        }
    }
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
    );
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT p.id, p.namespace, p.kind, r.revision, r.title, r.body, r.routing_text, r.keywords, r.terms, r.items
             FROM pages p JOIN page_revisions r ON r.page = p.id WHERE {filter} ORDER BY p.kind, p.id"
        ))
        .ctx("reading pages")?;
    let found = stmt
        .query_map(params![value, revision], |row| PageRow::try_from(row))
        .ctx("reading pages")?
        .collect::<rusqlite::Result<Vec<_>>>()
        .ctx("reading pages")?;
    found
        .into_iter()
        .map(
            |(id, ns, kind, revision, title, body, routing_text, keywords, terms, items)| {
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
                    trajectory_ids: links.remove(pid).unwrap_or_default(),
                    terms: from_json(&terms, "page_revisions", "terms", pid)?,
                    items: from_json::<Vec<ItemCount>>(&items, "page_revisions", "items", pid)?,
                    revision,
                    id: parse_stored(PageId::parse(pid), "pages", "id", pid)?,
                })
            },
        )
        .collect()
}
