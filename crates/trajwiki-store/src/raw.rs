//! Raw inputs: source messages and agent runs.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use chrono::Utc;
use rusqlite::{params, OptionalExtension};

use crate::db::{Db, Row, Tx};
use serde::Serialize;
use trajwiki_core::{Attachment, MessageId, Namespace, Outcome, Run, RunId, SourceMessage, Step};

use crate::conflict::Differences;
use crate::error::{Result, SqlContext, StoreError};
use crate::{fmt_ts, from_json, parse_stored, parse_ts, to_json, Store};

/// How often an ingest tells how far it is, in records.
const TELL_EVERY: usize = 1_000;

/// What an ingest batch did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct IngestReport {
    /// Records added.
    pub added: u64,
    /// Records already stored with identical content.
    pub unchanged: u64,
    /// Namespaces created by this batch.
    pub new_namespaces: Vec<String>,
}

/// A message in a line: where it is, who said what and when, its text quoted as JSON.
fn describe_message(m: &SourceMessage) -> String {
    format!(
        "{}{} session {} #{} at {} by {}: {}",
        m.external_ref
            .as_deref()
            .map(|r| format!("[{r}] "))
            .unwrap_or_default(),
        m.namespace,
        m.session,
        m.seq,
        fmt_ts(&m.timestamp),
        m.speaker,
        quoted(&truncate(&m.text, 120)),
    )
}

/// A run in a line: its ref, task, length and outcome, in words.
fn describe_run(r: &Run) -> String {
    let outcome = match (r.outcome.success, r.outcome.reward) {
        (None, None) => "no recorded outcome".to_string(),
        (Some(s), None) => format!("success {s}"),
        (None, Some(x)) => format!("reward {x}"),
        (Some(s), Some(x)) => format!("success {s}, reward {x}"),
    };
    format!(
        "[{}] task {}, {} steps, {outcome}",
        r.external_ref,
        quoted(&truncate(&r.task, 80)),
        r.steps.len(),
    )
}

/// A text as a JSON string.
fn quoted(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

fn ensure_namespace(
    tx: &Tx<'_>,
    ns: &Namespace,
    ensured: &mut HashSet<Namespace>,
    report: &mut IngestReport,
) -> Result<()> {
    // Once a batch: a bulk ingest is one statement a message, not two.
    if !ensured.insert(ns.clone()) {
        return Ok(());
    }
    let inserted = tx
        .execute(
            "INSERT INTO namespaces (id) VALUES (?1) ON CONFLICT DO NOTHING",
            [ns.as_str()],
        )
        .ctx("creating a namespace")?;
    if inserted > 0 {
        // A new namespace starts at a generation of its own: a reader of one deleted under the
        // same name reads it again.
        crate::changes::advance(tx, ns, true)?;
        report.new_namespaces.push(ns.to_string());
    }
    Ok(())
}

/// The namespaces of a batch, each once: those its ingest locks.
fn batch_namespaces<'a>(of: impl Iterator<Item = &'a Namespace>) -> Vec<&'a str> {
    let mut out: Vec<&str> = of.map(Namespace::as_str).collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// An ingest's batch row: written when its first record is added, with the counts so far, and
/// brought up to date at the end only when later records changed them, so that a one-message
/// append writes it in one statement; never written by an ingest that adds nothing.
struct Batch<'a> {
    source: &'a str,
    format: &'static str,
    /// The row's id and the (added, unchanged) counts it holds.
    row: Option<(i64, u64, u64)>,
}

impl<'a> Batch<'a> {
    fn new(source: &'a str, format: &'static str) -> Self {
        Batch {
            source,
            format,
            row: None,
        }
    }

    /// The row's id for a record about to be added (`report` before it is counted).
    fn id(&mut self, tx: &Tx<'_>, report: &IngestReport) -> Result<i64> {
        if let Some((id, ..)) = self.row {
            return Ok(id);
        }
        let (added, unchanged) = (report.added + 1, report.unchanged);
        let id = tx
            .query_row(
                "INSERT INTO ingest_batches (source, format, added, unchanged, ingested_at)
                 VALUES (?1, ?2, ?3, ?4, ?5) RETURNING id",
                params![
                    self.source,
                    self.format,
                    added as i64,
                    unchanged as i64,
                    Utc::now().to_rfc3339()
                ],
                |r| r.get(0),
            )
            .ctx("recording an ingest batch")?;
        self.row = Some((id, added, unchanged));
        Ok(id)
    }

    /// Records the batch's final counts and commits, or rolls back when the batch added nothing,
    /// so that a re-ingest leaves no trace.
    fn close(self, tx: Tx<'_>, report: &IngestReport) -> Result<()> {
        if report.added == 0 && report.new_namespaces.is_empty() {
            return tx.rollback().ctx("ending an empty ingest");
        }
        if let Some((id, added, unchanged)) = self.row {
            if (added, unchanged) != (report.added, report.unchanged) {
                tx.execute(
                    "UPDATE ingest_batches SET added = ?2, unchanged = ?3 WHERE id = ?1",
                    params![id, report.added as i64, report.unchanged as i64],
                )
                .ctx("recording an ingest batch")?;
            }
        }
        tx.commit().ctx("committing an ingest")
    }
}

/// Where an appended message goes in its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// At the position the message holds (`seq`), as a file's messages: ingesting the file
    /// again finds each message at its position (or by its ref) and adds nothing.
    Given,
    /// After the last message of its session, chosen inside the write transaction, under the
    /// write lock (SQLite's, or the namespace's advisory lock on PostgreSQL), so that appends
    /// from any number of processes take positions in turn, never the same one. The message's
    /// own `seq` is ignored and its id derived again from the position it takes, unless it has a
    /// ref: a stored message with that ref is this message (`unchanged` when all but the
    /// position is equal, a conflict naming the field otherwise). Equal content never makes two
    /// messages one: "ok" said twice is two messages.
    Next,
}

/// A message to append, and where it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Append {
    /// The message (with [`Place::Next`], its `seq` and id are replaced by the position it takes).
    pub message: SourceMessage,
    /// Where it goes.
    pub place: Place,
}

impl Append {
    /// A message at its own position.
    pub fn given(message: SourceMessage) -> Append {
        Append {
            message,
            place: Place::Given,
        }
    }

    /// A message after the last one of its session.
    pub fn next(message: SourceMessage) -> Append {
        Append {
            message,
            place: Place::Next,
        }
    }
}

/// The conflict of two messages: the fields that differ (the id aside, and those in
/// `ignored`), each message described after its values.
fn message_conflict(
    kind: &'static str,
    id: String,
    existing: &SourceMessage,
    incoming: &SourceMessage,
    ignored: &[&str],
) -> StoreError {
    let mut skip = vec!["id"];
    skip.extend_from_slice(ignored);
    // Fields by the names the input formats give them.
    let json = |m: &SourceMessage| {
        let mut v = serde_json::to_value(m).unwrap_or_default();
        if let Some(obj) = v.as_object_mut() {
            if let Some(r) = obj.remove("external_ref") {
                obj.insert("ref".into(), r);
            }
        }
        v
    };
    Differences::of_values(&json(existing), &json(incoming), &skip).conflict(
        kind,
        id,
        Some((describe_message(existing), describe_message(incoming))),
    )
}

/// Whether two messages are equal but for their position (and so their id, when it derives
/// from the position).
fn same_but_position(a: &SourceMessage, b: &SourceMessage) -> bool {
    a == &SourceMessage {
        id: a.id.clone(),
        seq: a.seq,
        ..b.clone()
    }
}

/// The conflict of two runs with one id: the fields that differ, each run described after them.
fn run_conflict(existing: &Run, incoming: &Run) -> StoreError {
    Differences::of(existing, incoming, &["id"]).conflict(
        "run",
        incoming.id.to_string(),
        Some((describe_run(existing), describe_run(incoming))),
    )
}

/// The position after the last message of a session, read inside the write transaction.
fn next_position(tx: &Tx<'_>, ns: &Namespace, session: u32) -> Result<u32> {
    let last: i64 = tx
        .query_row(
            "SELECT coalesce(max(seq), 0) FROM messages WHERE namespace = ?1 AND session = ?2",
            params![ns.as_str(), session],
            |row| row.get(0),
        )
        .ctx("reading a session's last position")?;
    u32::try_from(last + 1).map_err(|_| StoreError::SessionFull {
        namespace: ns.to_string(),
        session,
        last: u32::try_from(last).unwrap_or(u32::MAX),
    })
}

impl Store {
    /// Ingests a batch of messages, each at its own position, in one transaction. Messages
    /// already stored with the same content are skipped; a message whose id is stored with other
    /// content (or that appears twice in the batch with different content) fails the whole batch
    /// with a [`StoreError::Conflict`] naming the fields that differ.
    pub fn ingest_messages(
        &mut self,
        source: &str,
        messages: &[SourceMessage],
    ) -> Result<IngestReport> {
        self.ingest_messages_told(source, messages, &|_, _| {})
    }

    /// [`ingest_messages`](Store::ingest_messages), telling `told(done, total)` the messages
    /// gone through as it goes (every 1,000 and at the end).
    pub fn ingest_messages_told(
        &mut self,
        source: &str,
        messages: &[SourceMessage],
        told: &dyn Fn(usize, usize),
    ) -> Result<IngestReport> {
        let items: Vec<(Cow<'_, SourceMessage>, Place)> = messages
            .iter()
            .map(|m| (Cow::Borrowed(m), Place::Given))
            .collect();
        self.write_messages(source, items, told)
    }

    /// Appends messages in one transaction: each at its own position or after the last of its
    /// session (see [`Place`]), positions chosen under the write lock. As
    /// [`ingest_messages`](Store::ingest_messages) otherwise.
    pub fn append_messages(&mut self, source: &str, messages: &[Append]) -> Result<IngestReport> {
        let items: Vec<(Cow<'_, SourceMessage>, Place)> = messages
            .iter()
            .map(|a| (Cow::Borrowed(&a.message), a.place))
            .collect();
        self.write_messages(source, items, &|_, _| {})
    }

    fn write_messages(
        &mut self,
        source: &str,
        items: Vec<(Cow<'_, SourceMessage>, Place)>,
        told: &dyn Fn(usize, usize),
    ) -> Result<IngestReport> {
        let total = items.len();
        let namespaces = batch_namespaces(items.iter().map(|(m, _)| &m.namespace));
        let tx = self.write_tx("starting an ingest", &namespaces)?;
        let mut report = IngestReport::default();
        let mut batch = Batch::new(source, "messages");
        let mut ensured = HashSet::new();
        // The messages of this batch by id, with their content hashes.
        let mut seen: HashMap<MessageId, (SourceMessage, String)> = HashMap::new();
        for (done, (msg, place)) in items.into_iter().enumerate() {
            if done % TELL_EVERY == 0 {
                told(done, total);
            }
            let msg = match place {
                Place::Given => msg,
                Place::Next => {
                    if let Some(r) = &msg.external_ref {
                        // A message with a stored ref is that message, wherever it is.
                        let id = MessageId::derive(
                            &msg.namespace,
                            &SourceMessage::identity_key(msg.session, 0, Some(r)),
                        );
                        let earlier = match seen.get(&id) {
                            Some((m, _)) => Some(m.clone()),
                            None => self_message(&tx, &id)?,
                        };
                        if let Some(stored) = earlier {
                            if !same_but_position(&stored, &msg) {
                                return Err(message_conflict(
                                    "message",
                                    id.to_string(),
                                    &stored,
                                    &msg,
                                    &["seq"],
                                ));
                            }
                            report.unchanged += 1;
                            continue;
                        }
                    }
                    let seq = next_position(&tx, &msg.namespace, msg.session)?;
                    let m = msg.into_owned();
                    Cow::Owned(SourceMessage::new(
                        m.namespace,
                        m.session,
                        seq,
                        m.speaker,
                        m.text,
                        m.timestamp,
                        m.attachments,
                        m.external_ref,
                    ))
                }
            };
            let hash = msg.content_hash();
            if let Some((prev, prev_hash)) = seen.get(&msg.id) {
                if *prev_hash != hash {
                    return Err(message_conflict(
                        "message",
                        msg.id.to_string(),
                        prev,
                        &msg,
                        &[],
                    ));
                }
                report.unchanged += 1;
                continue;
            }
            // The message by its id, whatever holds its position and whether its namespace is
            // stored (a row of NULLs when it is not), in one statement.
            let mut stored: Option<String> = None;
            let mut occupant: Option<String> = None;
            let mut namespace_stored = true;
            {
                let mut stmt = tx
                    .prepare_cached(
                        "SELECT id, content_hash FROM messages
                         WHERE id = ?1 OR (namespace = ?2 AND session = ?3 AND seq = ?4)
                         UNION ALL
                         SELECT NULL, NULL WHERE NOT EXISTS (SELECT 1 FROM namespaces WHERE id = ?2)",
                    )
                    .ctx("preparing an ingest")?;
                let found = stmt
                    .query_map(
                        params![
                            msg.id.as_str(),
                            msg.namespace.as_str(),
                            msg.session,
                            msg.seq
                        ],
                        |row| row.tuple::<(Option<String>, Option<String>)>(),
                    )
                    .ctx("looking up a message")?;
                for row in found {
                    let (Some(id), Some(content_hash)) = row.ctx("looking up a message")? else {
                        namespace_stored = false;
                        continue;
                    };
                    if id == msg.id.as_str() {
                        stored = Some(content_hash);
                    } else {
                        occupant = Some(id);
                    }
                }
            }
            match stored {
                Some(stored) if stored == hash => report.unchanged += 1,
                Some(_) => {
                    let id = msg.id.to_string();
                    return Err(match self_message(&tx, &msg.id)? {
                        Some(existing) => message_conflict("message", id, &existing, &msg, &[]),
                        None => StoreError::Conflict {
                            kind: "message",
                            id,
                            fields: Vec::new(),
                            existing: "a record that cannot be read".into(),
                            incoming: describe_message(&msg),
                        },
                    });
                }
                None => {
                    // The look-up sees this batch's own inserts: a namespace it made is stored.
                    if !namespace_stored {
                        ensure_namespace(&tx, &msg.namespace, &mut ensured, &mut report)?;
                    }
                    if let Some(occupant) = occupant {
                        let position =
                            format!("{} session {} #{}", msg.namespace, msg.session, msg.seq);
                        let existing = MessageId::parse(&occupant)
                            .ok()
                            .map(|id| self_message(&tx, &id))
                            .transpose()?
                            .flatten();
                        return Err(match existing {
                            Some(existing) => {
                                message_conflict("message position", position, &existing, &msg, &[])
                            }
                            None => StoreError::Conflict {
                                kind: "message position",
                                id: position,
                                fields: Vec::new(),
                                existing: occupant,
                                incoming: describe_message(&msg),
                            },
                        });
                    }
                    let batch = batch.id(&tx, &report)?;
                    insert_message(&tx, &msg, &hash, batch)?;
                    report.added += 1;
                }
            }
            seen.insert(msg.id.clone(), (msg.into_owned(), hash));
        }
        told(total, total);
        batch.close(tx, &report)?;
        Ok(report)
    }

    /// Ingests a batch of agent runs in one transaction, with the same content-addressing rules as
    /// [`ingest_messages`](Store::ingest_messages).
    pub fn ingest_runs(&mut self, source: &str, runs: &[Run]) -> Result<IngestReport> {
        self.ingest_runs_told(source, runs, &|_, _| {})
    }

    /// [`ingest_runs`](Store::ingest_runs), telling `told(done, total)` the runs gone through
    /// as it goes (every 1,000 and at the end).
    pub fn ingest_runs_told(
        &mut self,
        source: &str,
        runs: &[Run],
        told: &dyn Fn(usize, usize),
    ) -> Result<IngestReport> {
        let namespaces = batch_namespaces(runs.iter().map(|r| &r.namespace));
        let tx = self.write_tx("starting an ingest", &namespaces)?;
        let mut report = IngestReport::default();
        let mut batch = Batch::new(source, "runs");
        let mut ensured = HashSet::new();
        let mut seen: HashMap<&RunId, (&Run, String)> = HashMap::new();
        for (done, run) in runs.iter().enumerate() {
            if done % TELL_EVERY == 0 {
                told(done, runs.len());
            }
            let hash = run.content_hash();
            if let Some((prev, prev_hash)) = seen.get(&run.id) {
                if *prev_hash != hash {
                    return Err(run_conflict(prev, run));
                }
                report.unchanged += 1;
                continue;
            }
            seen.insert(&run.id, (run, hash.clone()));
            let stored: Option<String> = tx
                .query_row(
                    "SELECT content_hash FROM runs WHERE id = ?1",
                    [run.id.as_str()],
                    |row| row.get(0),
                )
                .optional()
                .ctx("looking up a run")?;
            match stored {
                Some(stored) if stored == hash => report.unchanged += 1,
                Some(_) => {
                    return Err(match read_run(&tx, &run.id)? {
                        Some(existing) => run_conflict(&existing, run),
                        None => StoreError::Conflict {
                            kind: "run",
                            id: run.id.to_string(),
                            fields: Vec::new(),
                            existing: "a record that cannot be read".into(),
                            incoming: describe_run(run),
                        },
                    });
                }
                None => {
                    ensure_namespace(&tx, &run.namespace, &mut ensured, &mut report)?;
                    let batch = batch.id(&tx, &report)?;
                    tx.execute(
                        "INSERT INTO runs (id, namespace, external_ref, task, success, reward, metadata, content_hash, batch)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                        params![
                            run.id.as_str(),
                            run.namespace.as_str(),
                            run.external_ref,
                            run.task,
                            run.outcome.success,
                            run.outcome.reward,
                            to_json(&run.metadata),
                            hash,
                            batch,
                        ],
                    )
                    .ctx("inserting a run")?;
                    let mut step = tx
                        .prepare_cached("INSERT INTO run_steps (run, position, action, observation) VALUES (?1, ?2, ?3, ?4)")
                        .ctx("preparing run steps")?;
                    for (i, s) in run.steps.iter().enumerate() {
                        step.execute(params![run.id.as_str(), i as i64, s.action, s.observation])
                            .ctx("inserting a run step")?;
                    }
                    report.added += 1;
                }
            }
        }
        told(runs.len(), runs.len());
        batch.close(tx, &report)?;
        Ok(report)
    }

    /// One message by id.
    pub fn message(&self, id: &MessageId) -> Result<Option<SourceMessage>> {
        self_message(&self.conn, id)
    }

    /// A namespace's messages, ordered by session and position.
    pub fn messages(&self, ns: &Namespace) -> Result<Vec<SourceMessage>> {
        let mut stmt = self
            .conn
            .prepare(&format!(
                "{MESSAGE_SELECT} WHERE namespace = ?1 ORDER BY session, seq"
            ))
            .ctx("listing messages")?;
        let rows = stmt
            .query_map([ns.as_str()], message_row)
            .ctx("listing messages")?
            .collect::<rusqlite::Result<Vec<_>>>()
            .ctx("listing messages")?;
        rows.into_iter().map(decode_message).collect()
    }

    /// The messages of one session of a namespace, ordered by position.
    pub fn session_messages(&self, ns: &Namespace, session: u32) -> Result<Vec<SourceMessage>> {
        let mut stmt = self
            .conn
            .prepare_cached(&format!(
                "{MESSAGE_SELECT} WHERE namespace = ?1 AND session = ?2 ORDER BY seq"
            ))
            .ctx("listing a session's messages")?;
        let rows = stmt
            .query_map(rusqlite::params![ns.as_str(), session], message_row)
            .ctx("listing a session's messages")?
            .collect::<rusqlite::Result<Vec<_>>>()
            .ctx("listing a session's messages")?;
        rows.into_iter().map(decode_message).collect()
    }

    /// The message a namespace's external ref names, e.g. LoCoMo `D3:12`.
    pub fn message_by_ref(
        &self,
        ns: &Namespace,
        external_ref: &str,
    ) -> Result<Option<SourceMessage>> {
        let row = self
            .conn
            .query_row(
                &format!("{MESSAGE_SELECT} WHERE namespace = ?1 AND external_ref = ?2"),
                [ns.as_str(), external_ref],
                message_row,
            )
            .optional()
            .ctx("looking up a message by ref")?;
        row.map(decode_message).transpose()
    }

    /// One run by id.
    pub fn run(&self, id: &RunId) -> Result<Option<Run>> {
        read_run(&self.conn, id)
    }

    /// A namespace's runs, ordered by external ref.
    pub fn runs(&self, ns: &Namespace) -> Result<Vec<Run>> {
        let ids = {
            let mut stmt = self
                .conn
                .prepare("SELECT id FROM runs WHERE namespace = ?1 ORDER BY external_ref")
                .ctx("listing runs")?;
            let ids = stmt
                .query_map([ns.as_str()], |row| row.get::<String>(0))
                .ctx("listing runs")?
                .collect::<rusqlite::Result<Vec<_>>>()
                .ctx("listing runs")?;
            ids
        };
        let mut runs = Vec::with_capacity(ids.len());
        for id in ids {
            let id = parse_stored(RunId::parse(&id), "runs", "id", &id)?;
            runs.extend(read_run(&self.conn, &id)?);
        }
        Ok(runs)
    }
}

/// Inserts one message of ingest batch `batch`.
fn insert_message(tx: &Tx<'_>, msg: &SourceMessage, hash: &str, batch: i64) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO messages (id, namespace, session, seq, speaker, text, timestamp, attachments, external_ref, content_hash, batch)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )
    .ctx("preparing an ingest")?
    .execute(params![
        msg.id.as_str(),
        msg.namespace.as_str(),
        msg.session,
        msg.seq,
        msg.speaker,
        msg.text,
        fmt_ts(&msg.timestamp),
        to_json(&msg.attachments),
        msg.external_ref,
        hash,
        batch,
    ])
    .map_err(|source| match source {
        rusqlite::Error::SqliteFailure(e, _)
            if e.code == rusqlite::ErrorCode::ConstraintViolation =>
        {
            StoreError::Conflict {
                kind: "message ref",
                id: msg
                    .external_ref
                    .clone()
                    .unwrap_or_else(|| msg.id.to_string()),
                fields: vec!["ref".into()],
                existing: "another message with this ref".into(),
                incoming: describe_message(msg),
            }
        }
        source => crate::error::sql_error("inserting a message", source),
    })?;
    Ok(())
}

pub(crate) const MESSAGE_SELECT: &str =
    "SELECT id, namespace, session, seq, speaker, text, timestamp, attachments, external_ref FROM messages";

pub(crate) type MessageRow = (
    String,
    String,
    u32,
    u32,
    String,
    String,
    String,
    String,
    Option<String>,
);

pub(crate) fn message_row(row: &Row<'_>) -> rusqlite::Result<MessageRow> {
    message_row_at(row, 0)
}

/// [`message_row`] for a row whose message columns start at column `at`.
pub(crate) fn message_row_at(row: &Row<'_>, at: usize) -> rusqlite::Result<MessageRow> {
    Ok((
        row.get(at)?,
        row.get(at + 1)?,
        row.get(at + 2)?,
        row.get(at + 3)?,
        row.get(at + 4)?,
        row.get(at + 5)?,
        row.get(at + 6)?,
        row.get(at + 7)?,
        row.get(at + 8)?,
    ))
}

pub(crate) fn decode_message(row: MessageRow) -> Result<SourceMessage> {
    let (id, ns, session, seq, speaker, text, ts, attachments, external_ref) = row;
    Ok(SourceMessage {
        namespace: parse_stored(Namespace::new(ns), "messages", "namespace", &id)?,
        session,
        seq,
        speaker,
        text,
        timestamp: parse_ts(&ts, "messages", &id)?,
        attachments: from_json::<Vec<Attachment>>(&attachments, "messages", "attachments", &id)?,
        external_ref,
        id: parse_stored(MessageId::parse(&id), "messages", "id", &id)?,
    })
}

fn self_message(conn: &Db, id: &MessageId) -> Result<Option<SourceMessage>> {
    let row = conn
        .query_row(
            &format!("{MESSAGE_SELECT} WHERE id = ?1"),
            [id.as_str()],
            message_row,
        )
        .optional()
        .ctx("reading a message")?;
    row.map(decode_message).transpose()
}

fn read_run(conn: &Db, id: &RunId) -> Result<Option<Run>> {
    let head = conn
        .query_row(
            "SELECT namespace, external_ref, task, success, reward, metadata FROM runs WHERE id = ?1",
            [id.as_str()],
            |row| row.tuple::<(String, String, String, Option<bool>, Option<f64>, String)>(),
        )
        .optional()
        .ctx("reading a run")?;
    let Some((ns, external_ref, task, success, reward, metadata)) = head else {
        return Ok(None);
    };
    let mut stmt = conn
        .prepare_cached(
            "SELECT action, observation FROM run_steps WHERE run = ?1 ORDER BY position",
        )
        .ctx("reading run steps")?;
    let steps = stmt
        .query_map([id.as_str()], |row| {
            Ok(Step {
                action: row.get(0)?,
                observation: row.get(1)?,
            })
        })
        .ctx("reading run steps")?
        .collect::<rusqlite::Result<Vec<_>>>()
        .ctx("reading run steps")?;
    Ok(Some(Run {
        id: id.clone(),
        namespace: parse_stored(Namespace::new(ns), "runs", "namespace", id.as_str())?,
        external_ref,
        task,
        steps,
        outcome: Outcome { success, reward },
        metadata: from_json(&metadata, "runs", "metadata", id.as_str())?,
    }))
}
