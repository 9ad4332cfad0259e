//! The records of the data model (SPEC §1).
//!
//! Raw inputs ([`SourceMessage`], [`Run`]) are never edited. Derived records are immutable too,
//! except where a field is documented as derived state (a claim's current status, a trajectory's
//! summary and signals, a page's current revision), which is recomputed from immutable history.

use std::collections::BTreeMap;

use chrono::NaiveDateTime;
use serde::{Deserialize, Serialize};

use crate::hash::content_hash;
use crate::ids::{
    ClaimId, CompilationId, InsightId, MessageId, Namespace, OpId, PageId, RunId, SnapshotId,
    TrajectoryId,
};

/// Timestamps are naive local times, as conversations state them ("1:56 pm on 8 May, 2023").
/// They are stored and printed as `YYYY-MM-DDTHH:MM:SS`.
pub type Timestamp = NaiveDateTime;

/// The storage and display format of a [`Timestamp`].
pub const TIMESTAMP_FORMAT: &str = "%Y-%m-%dT%H:%M:%S";

/// Something attached to a message, such as a shared photo and its caption.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    /// What it is: `image`, `file`, ...
    pub kind: String,
    /// A text description (for an image, its caption); this is evidence like the message text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caption: Option<String>,
    /// Where the original lives, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// A raw input message. Never edited; re-ingesting the same message is a no-op.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceMessage {
    /// Content-derived id (from the namespace and the external ref, or session and position).
    pub id: MessageId,
    /// The memory this message belongs to.
    pub namespace: Namespace,
    /// Session number within the namespace.
    pub session: u32,
    /// Position within the session, from 1.
    pub seq: u32,
    /// Who said it.
    pub speaker: String,
    /// What was said.
    pub text: String,
    /// When it was said (for LoCoMo: the session's date and time).
    pub timestamp: Timestamp,
    /// Attachments such as image captions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment>,
    /// The id the source gave the message, e.g. LoCoMo `D3:12`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_ref: Option<String>,
}

impl SourceMessage {
    /// The text the message is embedded and matched from: speaker, text and image captions.
    /// Every derived level is embedded from these vectors (see [`crate::centroid`]), so each
    /// message is embedded once per model, whatever uses it.
    pub fn embedding_text(&self) -> String {
        let mut t = format!("{}: {}", self.speaker, self.text);
        for a in &self.attachments {
            if let Some(c) = &a.caption {
                t.push_str(&format!(" [image: {c}]"));
            }
        }
        t
    }

    /// Builds a message, deriving its id from the namespace and `external_ref` when present, else
    /// from the session and position.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        namespace: Namespace,
        session: u32,
        seq: u32,
        speaker: String,
        text: String,
        timestamp: Timestamp,
        attachments: Vec<Attachment>,
        external_ref: Option<String>,
    ) -> Self {
        let key = Self::identity_key(session, seq, external_ref.as_deref());
        SourceMessage {
            id: MessageId::derive(&namespace, &key),
            namespace,
            session,
            seq,
            speaker,
            text,
            timestamp,
            attachments,
            external_ref,
        }
    }

    /// The key a message's id is derived from: two messages with the same key in one namespace
    /// are the same message, and must have the same content.
    pub fn identity_key(session: u32, seq: u32, external_ref: Option<&str>) -> String {
        match external_ref {
            Some(r) => format!("ref:{r}"),
            None => format!("pos:{session}:{seq}"),
        }
    }

    /// Hash of everything but the id: equal hashes mean the same content.
    pub fn content_hash(&self) -> String {
        let ts = self.timestamp.format(TIMESTAMP_FORMAT).to_string();
        let session = self.session.to_string();
        let seq = self.seq.to_string();
        let attachments = serde_json::to_string(&self.attachments).expect("attachments serialize");
        content_hash([
            self.namespace.as_str(),
            session.as_str(),
            seq.as_str(),
            self.speaker.as_str(),
            self.text.as_str(),
            ts.as_str(),
            attachments.as_str(),
            self.external_ref.as_deref().unwrap_or(""),
        ])
    }
}

/// The status of a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClaimStatus {
    /// Currently believed.
    Active,
    /// Superseded or withdrawn; kept for history.
    Deprecated,
    /// In conflict with another claim.
    Contradictory,
    /// Uncertain until confirmed (plans, hedges).
    NeedsConfirmation,
}

impl ClaimStatus {
    /// Every status, in a fixed order.
    pub const ALL: [ClaimStatus; 4] = [
        ClaimStatus::Active,
        ClaimStatus::Deprecated,
        ClaimStatus::Contradictory,
        ClaimStatus::NeedsConfirmation,
    ];

    /// The stored name.
    pub const fn as_str(self) -> &'static str {
        match self {
            ClaimStatus::Active => "active",
            ClaimStatus::Deprecated => "deprecated",
            ClaimStatus::Contradictory => "contradictory",
            ClaimStatus::NeedsConfirmation => "needs_confirmation",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

/// A source-grounded atomic statement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Claim {
    /// Stable id.
    pub id: ClaimId,
    /// The memory it belongs to.
    pub namespace: Namespace,
    /// The snapshot that introduced it.
    pub snapshot: SnapshotId,
    /// The statement.
    pub text: String,
    /// Status when the claim was created; the current status is derived from the op log.
    pub status: ClaimStatus,
    /// The messages it rests on (at least one).
    pub source_message_ids: Vec<MessageId>,
    /// A span that occurs verbatim in one of the source messages.
    pub quote: String,
    /// The claim this one revises, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revised_from: Option<ClaimId>,
}

/// The kind of a claim edit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum OpKind {
    /// A new claim.
    Add,
    /// A new claim replaces an old one; the old one becomes deprecated.
    Revise,
    /// An existing claim changes status.
    Deprecate,
}

impl OpKind {
    /// The stored name.
    pub const fn as_str(self) -> &'static str {
        match self {
            OpKind::Add => "ADD",
            OpKind::Revise => "REVISE",
            OpKind::Deprecate => "DEPRECATE",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        [OpKind::Add, OpKind::Revise, OpKind::Deprecate]
            .into_iter()
            .find(|v| v.as_str() == s)
    }
}

/// One entry of the append-only claim op log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClaimOp {
    /// Stable id.
    pub id: OpId,
    /// The memory it belongs to.
    pub namespace: Namespace,
    /// Position in the namespace's log, from 1.
    pub seq: u64,
    /// What the op does.
    pub op: OpKind,
    /// The existing claim it acts on (REVISE, DEPRECATE).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<ClaimId>,
    /// The claim it introduces (ADD, REVISE).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_claim: Option<ClaimId>,
    /// The status the target takes (DEPRECATE).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_status: Option<ClaimStatus>,
    /// The messages that justify the op.
    pub source_message_ids: Vec<MessageId>,
    /// Why.
    pub rationale: String,
    /// The snapshot during whose integration the op was emitted.
    pub snapshot: SnapshotId,
}

/// An immutable record of one exchange.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Stable id.
    pub id: SnapshotId,
    /// The memory it belongs to.
    pub namespace: Namespace,
    /// The trajectory it was appended to.
    pub trajectory: TrajectoryId,
    /// Position in the trajectory, from 1.
    pub version: u32,
    /// When the exchange happened.
    pub timestamp: Timestamp,
    /// One-line summary.
    pub summary: String,
    /// Surrounding context (who, where in the conversation).
    pub context: String,
    /// Keywords, sorted.
    pub keywords: Vec<String>,
    /// The claims extracted from the exchange.
    pub claim_ids: Vec<ClaimId>,
    /// The messages of the exchange, in order.
    pub source_message_ids: Vec<MessageId>,
}

/// A relation/value tag such as `home_country = Sweden`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Facet {
    /// The relation (`home_country`, `activity_location`, ...).
    pub tag: String,
    /// The value.
    pub value: String,
}

/// The lexical signals of a trajectory, all sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Signals {
    /// Keywords.
    pub keywords: Vec<String>,
    /// Normalised entity keys.
    pub entities: Vec<String>,
    /// Exact terms (numbers, titles, items).
    pub terms: Vec<String>,
    /// Facets.
    pub facets: Vec<Facet>,
}

/// The history of one evolving memory: an ordered list of snapshots.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trajectory {
    /// Stable id.
    pub id: TrajectoryId,
    /// The memory it belongs to.
    pub namespace: Namespace,
    /// Snapshots in order (append-only, at most m).
    pub snapshot_ids: Vec<SnapshotId>,
    /// The full trajectory this one continues, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continues: Option<TrajectoryId>,
    /// Derived summary text (its embedding is cached by text hash).
    pub summary: String,
    /// Derived signals.
    pub signals: Signals,
}

/// The kind of a wiki page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PageKind {
    /// The one page linking every trajectory.
    Index,
    /// Trajectories sharing an entity (or an entity facet).
    Entity,
    /// Trajectories sharing repeated keywords.
    Topic,
    /// List-like trajectories: items and counts.
    Inventory,
}

impl PageKind {
    /// The stored name.
    pub const fn as_str(self) -> &'static str {
        match self {
            PageKind::Index => "index",
            PageKind::Entity => "entity",
            PageKind::Topic => "topic",
            PageKind::Inventory => "inventory",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        [
            PageKind::Index,
            PageKind::Entity,
            PageKind::Topic,
            PageKind::Inventory,
        ]
        .into_iter()
        .find(|v| v.as_str() == s)
    }
}

/// An item and how often it is mentioned.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ItemCount {
    /// The item.
    pub item: String,
    /// Its count.
    pub count: u32,
}

/// One revision of a Memory Wiki page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WikiPage {
    /// Stable id (stable across recompiles while the linked trajectory set is unchanged).
    pub id: PageId,
    /// The memory it belongs to.
    pub namespace: Namespace,
    /// Page kind.
    pub kind: PageKind,
    /// Title.
    pub title: String,
    /// Markdown body.
    pub body: String,
    /// The text embedded for routing.
    pub routing_text: String,
    /// Keywords, sorted.
    pub keywords: Vec<String>,
    /// Linked trajectories, sorted.
    pub trajectory_ids: Vec<TrajectoryId>,
    /// Exact terms, sorted.
    pub terms: Vec<String>,
    /// Items and counts.
    pub items: Vec<ItemCount>,
    /// Revision number, from 1.
    pub revision: u32,
}

/// One step of an agent run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    /// What the agent did.
    pub action: String,
    /// What the environment answered.
    pub observation: String,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// Whether the task was solved, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success: Option<bool>,
    /// The reward, when the environment gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reward: Option<f64>,
}

/// A raw agent run (WikiTrace input). Never edited.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// Content-derived id (from the namespace and the external id).
    pub id: RunId,
    /// The memory it belongs to.
    pub namespace: Namespace,
    /// The id the source gave the run.
    pub external_ref: String,
    /// The task statement.
    pub task: String,
    /// Steps in order.
    pub steps: Vec<Step>,
    /// Outcome.
    pub outcome: Outcome,
    /// Everything else the source recorded, verbatim.
    #[serde(default)]
    pub metadata: BTreeMap<String, serde_json::Value>,
}

impl Run {
    /// Builds a run, deriving its id from the namespace and external ref.
    pub fn new(
        namespace: Namespace,
        external_ref: String,
        task: String,
        steps: Vec<Step>,
        outcome: Outcome,
        metadata: BTreeMap<String, serde_json::Value>,
    ) -> Self {
        Run {
            id: RunId::derive(&namespace, &external_ref),
            namespace,
            external_ref,
            task,
            steps,
            outcome,
            metadata,
        }
    }

    /// Hash of everything but the id.
    pub fn content_hash(&self) -> String {
        let body = serde_json::to_string(&(&self.task, &self.steps, &self.outcome, &self.metadata))
            .expect("run serializes");
        content_hash([
            self.namespace.as_str(),
            self.external_ref.as_str(),
            body.as_str(),
        ])
    }
}

/// Why a run succeeded or failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Compilation {
    /// Stable id.
    pub id: CompilationId,
    /// The compiled run.
    pub run: RunId,
    /// The diagnosis.
    pub diagnosis: String,
    /// Which compiler produced it (`deterministic`, or a model name).
    pub compiler: String,
}

/// A lesson drawn from a run; always resolves to its compilation and run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Insight {
    /// Stable id.
    pub id: InsightId,
    /// The compilation it comes from.
    pub compilation: CompilationId,
    /// The run it comes from.
    pub run: RunId,
    /// What to do.
    pub guideline: String,
    /// When it applies.
    pub applies_when: String,
}

/// Replays a namespace's claim op log (in `seq` order) over the claims it references and returns
/// the current status of every claim the log touches. This is the definition of claim state: the
/// store's derived status table must equal it.
///
/// `initial_status` gives the status a claim is created with (its [`Claim::status`]).
pub fn replay_ops<'a>(
    ops: impl IntoIterator<Item = &'a ClaimOp>,
    initial_status: impl Fn(&ClaimId) -> Option<ClaimStatus>,
) -> Result<BTreeMap<ClaimId, ClaimStatus>, ReplayError> {
    let mut state = BTreeMap::new();
    apply_ops(&mut state, ops, initial_status)?;
    Ok(state)
}

/// Continues a replay: applies `ops` (in `seq` order) to `state`, the statuses a replay of the
/// earlier log gave (only the claims these ops target are needed). [`replay_ops`] is this from an
/// empty state, so appending ops and replaying the whole log agree.
pub fn apply_ops<'a>(
    state: &mut BTreeMap<ClaimId, ClaimStatus>,
    ops: impl IntoIterator<Item = &'a ClaimOp>,
    initial_status: impl Fn(&ClaimId) -> Option<ClaimStatus>,
) -> Result<(), ReplayError> {
    let mut last_seq = 0;
    for op in ops {
        if op.seq <= last_seq {
            return Err(ReplayError::OutOfOrder {
                op: op.id.clone(),
                seq: op.seq,
                previous: last_seq,
            });
        }
        last_seq = op.seq;
        let missing = |what: &'static str| ReplayError::Incomplete {
            op: op.id.clone(),
            what,
        };
        let created = |id: &ClaimId| {
            initial_status(id).ok_or_else(|| ReplayError::UnknownClaim {
                op: op.id.clone(),
                claim: id.clone(),
            })
        };
        let known = |state: &BTreeMap<ClaimId, ClaimStatus>, id: &ClaimId| {
            if state.contains_key(id) {
                Ok(())
            } else {
                Err(ReplayError::UnknownClaim {
                    op: op.id.clone(),
                    claim: id.clone(),
                })
            }
        };
        match op.op {
            OpKind::Add => {
                let new = op.new_claim.as_ref().ok_or_else(|| missing("new_claim"))?;
                state.insert(new.clone(), created(new)?);
            }
            OpKind::Revise => {
                let target = op.target.as_ref().ok_or_else(|| missing("target"))?;
                let new = op.new_claim.as_ref().ok_or_else(|| missing("new_claim"))?;
                known(state, target)?;
                state.insert(target.clone(), ClaimStatus::Deprecated);
                state.insert(new.clone(), created(new)?);
            }
            OpKind::Deprecate => {
                let target = op.target.as_ref().ok_or_else(|| missing("target"))?;
                let status = op.new_status.ok_or_else(|| missing("new_status"))?;
                known(state, target)?;
                state.insert(target.clone(), status);
            }
        }
    }
    Ok(())
}

/// Why an op log cannot be replayed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    /// Ops are not in strictly increasing `seq` order.
    #[error("op {op} has seq {seq}, not after {previous}")]
    OutOfOrder {
        /// The op.
        op: OpId,
        /// Its seq.
        seq: u64,
        /// The previous op's seq.
        previous: u64,
    },
    /// An op lacks a field its kind requires.
    #[error("op {op} lacks its {what}")]
    Incomplete {
        /// The op.
        op: OpId,
        /// The missing field.
        what: &'static str,
    },
    /// An op refers to a claim that does not exist (or, for a target, was never added).
    #[error("op {op} refers to unknown claim {claim}")]
    UnknownClaim {
        /// The op.
        op: OpId,
        /// The claim.
        claim: ClaimId,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(seq: u64, kind: OpKind, target: Option<&ClaimId>, new: Option<&ClaimId>) -> ClaimOp {
        let ns = Namespace::new("n").unwrap();
        ClaimOp {
            id: OpId::derive(&ns, &seq.to_string()),
            namespace: ns.clone(),
            seq,
            op: kind,
            target: target.cloned(),
            new_claim: new.cloned(),
            new_status: (kind == OpKind::Deprecate).then_some(ClaimStatus::Contradictory),
            source_message_ids: vec![],
            rationale: String::new(),
            snapshot: SnapshotId::derive(&ns, "s"),
        }
    }

    #[test]
    fn replay_add_revise_deprecate() {
        let ns = Namespace::new("n").unwrap();
        let a = ClaimId::derive(&ns, "a");
        let b = ClaimId::derive(&ns, "b");
        let c = ClaimId::derive(&ns, "c");
        let ops = [
            op(1, OpKind::Add, None, Some(&a)),
            op(2, OpKind::Revise, Some(&a), Some(&b)),
            op(3, OpKind::Add, None, Some(&c)),
            op(4, OpKind::Deprecate, Some(&c), None),
        ];
        let state = replay_ops(&ops, |_| Some(ClaimStatus::Active)).unwrap();
        assert_eq!(state[&a], ClaimStatus::Deprecated);
        assert_eq!(state[&b], ClaimStatus::Active);
        assert_eq!(state[&c], ClaimStatus::Contradictory);

        let bad = [op(1, OpKind::Revise, Some(&a), Some(&b))];
        assert!(matches!(
            replay_ops(&bad, |_| Some(ClaimStatus::Active)),
            Err(ReplayError::UnknownClaim { .. })
        ));
        let unordered = [
            op(2, OpKind::Add, None, Some(&a)),
            op(1, OpKind::Add, None, Some(&b)),
        ];
        assert!(matches!(
            replay_ops(&unordered, |_| Some(ClaimStatus::Active)),
            Err(ReplayError::OutOfOrder { .. })
        ));
    }

    #[test]
    fn message_identity_and_content() {
        let ns = Namespace::new("n").unwrap();
        let ts = chrono::NaiveDate::from_ymd_opt(2023, 5, 8)
            .unwrap()
            .and_hms_opt(13, 56, 0)
            .unwrap();
        let m = |text: &str| {
            SourceMessage::new(
                ns.clone(),
                1,
                3,
                "Caroline".into(),
                text.into(),
                ts,
                vec![],
                Some("D1:3".into()),
            )
        };
        assert_eq!(m("a").id, m("b").id);
        assert_ne!(m("a").content_hash(), m("b").content_hash());
        assert_eq!(m("a").content_hash(), m("a").content_hash());
    }
}
