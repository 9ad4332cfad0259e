//! Namespaces and records by id.

use trajwiki_core::{
    Claim, ClaimId, ClaimOp, ClaimStatus, Compilation, CompilationId, IdKind, Insight, InsightId,
    MessageId, Namespace, OpId, PageId, Run, RunId, Snapshot, SnapshotId, SourceMessage,
    Trajectory, TrajectoryId, WikiPage,
};
use trajwiki_store::{Store, StoreError};

use super::*;

/// The namespaces of a store that hold messages, in name order.
pub fn namespaces_with_messages(store: &Store) -> Result<Vec<Namespace>, StoreError> {
    let mut out = Vec::new();
    for ns in store.namespaces()? {
        if store.namespace_counts(&ns)?.0 > 0 {
            out.push(ns);
        }
    }
    Ok(out)
}

/// The namespaces `messages` belong to, in the order first seen (what an ingest followed by a
/// build has to build).
pub fn namespaces_of<'a>(messages: impl IntoIterator<Item = &'a SourceMessage>) -> Vec<Namespace> {
    let mut seen = std::collections::HashSet::new();
    messages
        .into_iter()
        .filter(|m| seen.insert(&m.namespace))
        .map(|m| m.namespace.clone())
        .collect()
}

/// Any record, as looked up by [`get`].
#[derive(Debug, Clone)]
pub enum Record {
    /// A source message.
    Message(SourceMessage),
    /// An agent run.
    Run(Run),
    /// A snapshot.
    Snapshot(Snapshot),
    /// A claim and its current status (derived from the op log).
    Claim {
        /// The claim as created.
        claim: Claim,
        /// Its status now.
        status: ClaimStatus,
    },
    /// A claim op.
    Op(ClaimOp),
    /// A trajectory.
    Trajectory(Trajectory),
    /// A wiki page, current revision.
    Page(WikiPage),
    /// A compilation and its insights.
    Compilation {
        /// The compilation.
        compilation: Compilation,
        /// Its insights.
        insights: Vec<Insight>,
    },
    /// An insight.
    Insight(Insight),
}

impl Record {
    /// The kind of record.
    pub fn kind(&self) -> IdKind {
        match self {
            Record::Message(_) => IdKind::Message,
            Record::Run(_) => IdKind::Run,
            Record::Snapshot(_) => IdKind::Snapshot,
            Record::Claim { .. } => IdKind::Claim,
            Record::Op(_) => IdKind::Op,
            Record::Trajectory(_) => IdKind::Trajectory,
            Record::Page(_) => IdKind::Page,
            Record::Compilation { .. } => IdKind::Compilation,
            Record::Insight(_) => IdKind::Insight,
        }
    }

    /// The record as JSON: its fields; a claim adds `current_status`, a compilation is
    /// `{"compilation": …, "insights": […]}`.
    pub fn to_json(&self) -> serde_json::Value {
        let value = match self {
            Record::Message(m) => serde_json::to_value(m),
            Record::Run(r) => serde_json::to_value(r),
            Record::Snapshot(s) => serde_json::to_value(s),
            Record::Claim { claim, status } => serde_json::to_value(claim).map(|mut v| {
                v["current_status"] = serde_json::json!(status);
                v
            }),
            Record::Op(o) => serde_json::to_value(o),
            Record::Trajectory(t) => serde_json::to_value(t),
            Record::Page(p) => serde_json::to_value(p),
            Record::Compilation {
                compilation,
                insights,
            } => Ok(serde_json::json!({"compilation": compilation, "insights": insights})),
            Record::Insight(i) => serde_json::to_value(i),
        };
        value.expect("records serialize")
    }
}

/// Looks a record up by its id; the prefix tells the kind.
pub fn get(store: &Store, id: &str) -> Result<Record, ApiError> {
    let kind = IdKind::of(id)?;
    let found = match kind {
        IdKind::Message => store.message(&MessageId::parse(id)?)?.map(Record::Message),
        IdKind::Run => store.run(&RunId::parse(id)?)?.map(Record::Run),
        IdKind::Snapshot => store
            .snapshot(&SnapshotId::parse(id)?)?
            .map(Record::Snapshot),
        IdKind::Claim => {
            let cid = ClaimId::parse(id)?;
            match store.claim(&cid)? {
                Some(claim) => {
                    let status = store.claim_status(&cid)?.unwrap_or(claim.status);
                    Some(Record::Claim { claim, status })
                }
                None => None,
            }
        }
        IdKind::Op => store.claim_op(&OpId::parse(id)?)?.map(Record::Op),
        IdKind::Trajectory => store
            .trajectory(&TrajectoryId::parse(id)?)?
            .map(Record::Trajectory),
        IdKind::Page => store.page(&PageId::parse(id)?)?.map(Record::Page),
        IdKind::Compilation => {
            store
                .compilation(&CompilationId::parse(id)?)?
                .map(|(compilation, insights)| Record::Compilation {
                    compilation,
                    insights,
                })
        }
        IdKind::Insight => store.insight(&InsightId::parse(id)?)?.map(Record::Insight),
    };
    found.ok_or_else(|| ApiError::NotFound {
        kind,
        id: id.to_string(),
    })
}

/// [`get`] inside one namespace: a record of another namespace is not found, whatever its id
/// (ids derive from namespace and content, so they can be guessed; a command that names a
/// namespace must not reach outside it).
pub fn get_in(store: &Store, ns: &Namespace, id: &str) -> Result<Record, ApiError> {
    let record = get(store, id)?;
    let owner = match &record {
        Record::Message(m) => Some(m.namespace.clone()),
        Record::Run(r) => Some(r.namespace.clone()),
        Record::Snapshot(s) => Some(s.namespace.clone()),
        Record::Claim { claim, .. } => Some(claim.namespace.clone()),
        Record::Op(o) => Some(o.namespace.clone()),
        Record::Trajectory(t) => Some(t.namespace.clone()),
        Record::Page(p) => Some(p.namespace.clone()),
        Record::Compilation { compilation, .. } => {
            store.run(&compilation.run)?.map(|r| r.namespace)
        }
        Record::Insight(i) => store.run(&i.run)?.map(|r| r.namespace),
    };
    if owner.as_ref() != Some(ns) {
        return Err(ApiError::NotFound {
            kind: IdKind::of(id)?,
            id: id.to_string(),
        });
    }
    Ok(record)
}
