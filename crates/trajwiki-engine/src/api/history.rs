//! The claim history of a trajectory or a claim, as of a time.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use trajwiki_core::{
    replay_ops, ClaimId, ClaimOp, ClaimStatus, IdKind, Namespace, Timestamp, TrajectoryId,
    TIMESTAMP_FORMAT,
};
use trajwiki_store::Store;

use super::*;

/// A source message of a claim op, as history shows it.
#[derive(Debug, Clone, Serialize)]
pub struct HistorySource {
    /// Its external ref, else its id.
    #[serde(rename = "ref")]
    pub source_ref: String,
    /// When it was said.
    pub timestamp: String,
    /// Who said it.
    pub speaker: String,
    /// What was said.
    pub text: String,
}

/// One claim op of a history, with the state it leads to.
#[derive(Debug, Clone, Serialize)]
pub struct HistoryEntry {
    /// The op's position in the namespace's log.
    pub seq: u64,
    /// ADD, REVISE or DEPRECATE (the stored name).
    pub op: &'static str,
    /// When it happened: its snapshot's time.
    pub at: Option<String>,
    /// The claim the op creates, else the one it changes.
    pub claim: ClaimId,
    /// That claim's text.
    pub text: Option<String>,
    /// That claim's status at the end of the history.
    pub status: Option<ClaimStatus>,
    /// The claim the op changes.
    pub target: Option<ClaimId>,
    /// Its text.
    pub target_text: Option<String>,
    /// Its status at the end of the history.
    pub target_status: Option<ClaimStatus>,
    /// Why.
    pub rationale: String,
    /// The messages the op rests on.
    pub sources: Vec<HistorySource>,
}

/// The claim timeline of a trajectory or a claim.
#[derive(Debug, Clone, Serialize)]
pub struct History {
    /// The namespace.
    pub namespace: Namespace,
    /// The ops, in log order.
    pub entries: Vec<HistoryEntry>,
}

/// The claim ops of a trajectory (every claim of its snapshots) or of a claim (its revision
/// chain, both ways), optionally only those up to `as_of`, with the statuses they lead to.
pub fn history(store: &Store, id: &str, as_of: Option<Timestamp>) -> Result<History, ApiError> {
    let not_found = |kind| ApiError::NotFound {
        kind,
        id: id.to_string(),
    };
    let (ns, claims): (Namespace, BTreeSet<ClaimId>) = match IdKind::of(id)? {
        IdKind::Trajectory => {
            let t = store
                .trajectory(&TrajectoryId::parse(id)?)?
                .ok_or_else(|| not_found(IdKind::Trajectory))?;
            let mut ids = BTreeSet::new();
            for s in &t.snapshot_ids {
                if let Some(s) = store.snapshot(s)? {
                    ids.extend(s.claim_ids);
                }
            }
            (t.namespace, ids)
        }
        IdKind::Claim => {
            let cid = ClaimId::parse(id)?;
            let c = store.claim(&cid)?.ok_or_else(|| not_found(IdKind::Claim))?;
            let all = store.claims(&c.namespace)?;
            let mut chain: BTreeSet<ClaimId> = [cid].into();
            loop {
                let before = chain.len();
                for other in &all {
                    if let Some(from) = &other.revised_from {
                        if chain.contains(from) || chain.contains(&other.id) {
                            chain.insert(from.clone());
                            chain.insert(other.id.clone());
                        }
                    }
                }
                if chain.len() == before {
                    break;
                }
            }
            (c.namespace, chain)
        }
        other => return Err(ApiError::NoHistory(other)),
    };
    let mut ops: Vec<(ClaimOp, Option<Timestamp>)> = Vec::new();
    for op in store.claim_ops(&ns)? {
        if !op
            .target
            .iter()
            .chain(&op.new_claim)
            .any(|c| claims.contains(c))
        {
            continue;
        }
        let at = store.snapshot(&op.snapshot)?.map(|s| s.timestamp);
        if as_of.is_none_or(|cut| at.is_some_and(|at| at <= cut)) {
            ops.push((op, at));
        }
    }
    // The statuses at the end of the shown ops: their claims' initial statuses, replayed.
    let mut initial = BTreeMap::new();
    for (op, _) in &ops {
        for c in op.target.iter().chain(&op.new_claim) {
            if let Some(claim) = store.claim(c)? {
                initial.insert(c.clone(), claim.status);
            }
        }
    }
    let state = replay_ops(
        ops.iter()
            .map(|(op, _)| op)
            .filter(|op| op.target.as_ref().is_none_or(|t| initial.contains_key(t))),
        |c| initial.get(c).copied(),
    )?;
    let mut entries = Vec::with_capacity(ops.len());
    for (op, at) in &ops {
        let claim = op
            .new_claim
            .as_ref()
            .or(op.target.as_ref())
            .expect("an op names a claim");
        let mut sources = Vec::new();
        for m in &op.source_message_ids {
            if let Some(m) = store.message(m)? {
                sources.push(HistorySource {
                    source_ref: m.external_ref.clone().unwrap_or_else(|| m.id.to_string()),
                    timestamp: m.timestamp.format(TIMESTAMP_FORMAT).to_string(),
                    speaker: m.speaker,
                    text: m.text,
                });
            }
        }
        let target_text = match &op.target {
            Some(t) => store.claim(t)?.map(|c| c.text),
            None => None,
        };
        entries.push(HistoryEntry {
            seq: op.seq,
            op: op.op.as_str(),
            at: at.map(|t| t.format(TIMESTAMP_FORMAT).to_string()),
            claim: claim.clone(),
            text: store.claim(claim)?.map(|c| c.text),
            status: state.get(claim).copied(),
            target: op.target.clone(),
            target_text,
            target_status: op.target.as_ref().and_then(|t| state.get(t)).copied(),
            rationale: op.rationale.clone(),
            sources,
        });
    }
    Ok(History {
        namespace: ns,
        entries,
    })
}
