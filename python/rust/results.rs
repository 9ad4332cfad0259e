//! The objects a search returns: the context and, for every source message in it, the memory
//! records it belongs to, plus the retrieval path and its diagnostics.

use pyo3::prelude::*;
use trajwiki_core::TIMESTAMP_FORMAT;
use trajwiki_engine::api::{Evidence as RustEvidence, Search};
use trajwiki_engine::layers::retrieve::PathItem as RustPathItem;

use crate::convert::to_python;

/// A claim grounded in a piece of evidence.
#[pyclass(module = "trajwiki._trajwiki", frozen, get_all)]
#[derive(Debug, Clone)]
pub struct EvidenceClaim {
    /// The claim id (`clm_…`).
    pub id: String,
    /// The claim's text.
    pub text: String,
    /// Its current status: active, deprecated, contradictory or needs_confirmation.
    pub status: String,
}

#[pymethods]
impl EvidenceClaim {
    fn __repr__(&self) -> String {
        format!(
            "EvidenceClaim(id={:?}, status={:?}, text={:?})",
            self.id, self.status, self.text
        )
    }
}

/// One source message of a context: what was said, where it is cited from, and the snapshot,
/// trajectory and claims of the memory that rest on it.
#[pyclass(module = "trajwiki._trajwiki", frozen, get_all)]
#[derive(Debug, Clone)]
pub struct Evidence {
    /// The ref the context cites (LoCoMo `D3:12`, else the message id).
    #[pyo3(name = "ref")]
    pub source_ref: String,
    /// The message id (`msg_…`).
    pub message_id: String,
    /// The session the message belongs to.
    pub session: u32,
    /// Who said it.
    pub speaker: String,
    /// What was said.
    pub text: String,
    /// When, as `YYYY-MM-DDTHH:MM:SS`.
    pub timestamp: String,
    /// The snapshot holding it (`snp_…`).
    pub snapshot: Option<String>,
    /// That snapshot's trajectory (`trj_…`).
    pub trajectory: Option<String>,
    /// The claims grounded in it.
    pub claims: Vec<EvidenceClaim>,
}

#[pymethods]
impl Evidence {
    fn __repr__(&self) -> String {
        format!(
            "Evidence(ref={:?}, speaker={:?}, timestamp={:?}, snapshot={}, claims={})",
            self.source_ref,
            self.speaker,
            self.timestamp,
            self.snapshot
                .as_deref()
                .map_or("None".to_string(), |s| format!("{s:?}")),
            self.claims.len()
        )
    }
}

impl From<RustEvidence> for Evidence {
    fn from(e: RustEvidence) -> Self {
        Evidence {
            source_ref: e.source_ref,
            message_id: e.message.id.to_string(),
            session: e.message.session,
            speaker: e.message.speaker,
            text: e.message.text,
            timestamp: e.message.timestamp.format(TIMESTAMP_FORMAT).to_string(),
            snapshot: e.snapshot.map(|s| s.to_string()),
            trajectory: e.trajectory.map(|t| t.to_string()),
            claims: e
                .claims
                .into_iter()
                .map(|c| EvidenceClaim {
                    id: c.id.to_string(),
                    text: c.text,
                    status: c.status.as_str().to_string(),
                })
                .collect(),
        }
    }
}

/// A page, trajectory or snapshot on the retrieval path, with its fused score.
#[pyclass(module = "trajwiki._trajwiki", frozen, get_all)]
#[derive(Debug, Clone)]
pub struct PathItem {
    /// The record id.
    pub id: String,
    /// Its title, summary or ref.
    pub label: String,
    /// Its fused score.
    pub score: f32,
}

#[pymethods]
impl PathItem {
    fn __repr__(&self) -> String {
        format!(
            "PathItem(id={:?}, score={:.4}, label={:?})",
            self.id, self.score, self.label
        )
    }
}

impl From<RustPathItem> for PathItem {
    fn from(p: RustPathItem) -> Self {
        PathItem {
            id: p.id,
            label: p.label,
            score: p.score,
        }
    }
}

/// The answer to `Memory.search`.
#[pyclass(module = "trajwiki._trajwiki", frozen, get_all)]
pub struct SearchResult {
    /// The question.
    pub question: String,
    /// The retrieval mode.
    pub mode: String,
    /// The context budget, in whitespace tokens.
    pub budget: usize,
    /// The context for a model: session headings and one line per source message, each
    /// starting with its ref.
    pub context: String,
    /// The refs of the context's messages, in order of appearance.
    pub source_refs: Vec<String>,
    /// Whitespace tokens of the context (never above the budget).
    pub context_tokens: usize,
    /// The context's source messages with their snapshots, trajectories and claims.
    pub evidence: Vec<Evidence>,
    /// Wiki pages the question was routed to.
    pub pages: Vec<PathItem>,
    /// Trajectories selected.
    pub trajectories: Vec<PathItem>,
    /// Snapshots expanded.
    pub snapshots: Vec<PathItem>,
    /// `candidate_universe`, `candidates` (each level's candidate universe), `shape` (what the
    /// question asks for), `timings_ms` and `embedded_on_load`.
    pub diagnostics: Py<PyAny>,
}

#[pymethods]
impl SearchResult {
    fn __repr__(&self) -> String {
        format!(
            "SearchResult(question={:?}, mode={:?}, context_tokens={}, evidence={}, trajectories={})",
            self.question,
            self.mode,
            self.context_tokens,
            self.evidence.len(),
            self.trajectories.len()
        )
    }
}

impl SearchResult {
    /// Converts a search; the diagnostics become a dict.
    pub fn from_search(py: Python<'_>, s: Search) -> PyResult<Self> {
        let diagnostics = to_python(
            py,
            &serde_json::json!({
                "candidate_universe": s.ranking.candidate_universe,
                "candidates": s.ranking.candidates,
                "shape": s.ranking.shape,
                "timings_ms": s.timings,
                "embedded_on_load": s.embedded_on_load,
            }),
        )?;
        Ok(SearchResult {
            question: s.question,
            mode: s.ranking.mode.name().to_string(),
            budget: s.budget,
            context: s.context.text,
            source_refs: s.context.source_refs,
            context_tokens: s.context.tokens,
            evidence: s.evidence.into_iter().map(Evidence::from).collect(),
            pages: s.ranking.pages.into_iter().map(PathItem::from).collect(),
            trajectories: s
                .ranking
                .trajectories
                .into_iter()
                .map(PathItem::from)
                .collect(),
            snapshots: s
                .ranking
                .snapshots
                .into_iter()
                .map(PathItem::from)
                .collect(),
            diagnostics,
        })
    }
}
