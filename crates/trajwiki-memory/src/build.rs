//! The build: messages → exchanges → the construction fold ([`Fold`]: snapshot drafts,
//! trajectories with claim evolution, trajectory summaries) → Memory Wiki. Deterministic: the
//! same messages in the same order and configuration give the same records, ids included,
//! however they are split into appends.

use std::collections::BTreeMap;
use std::time::Instant;

use serde::Serialize;
use trajwiki_core::{
    Claim, ClaimOp, EmbedError, Namespace, PageId, Snapshot, SourceMessage, Trajectory, WikiPage,
};

use crate::evolve::ClaimJudge;
use crate::extract::{ExtractError, Extractor};
use crate::fold::{Delta, Fold};
use crate::matcher::MatchDecider;
use crate::MemoryConfig;

/// Embeds a batch of texts as documents: one L2-normalised row per text.
pub type EmbedFn<'a> = dyn FnMut(&[&str]) -> Result<Vec<Vec<f32>>, EmbedError> + 'a;

/// A build failure.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The extractor failed.
    #[error(transparent)]
    Extract(#[from] ExtractError),
    /// Embedding failed.
    #[error("embedding failed during {stage}")]
    Embed {
        /// What was being embedded.
        stage: &'static str,
        /// The embedder's error.
        #[source]
        source: EmbedError,
    },
    /// The embedder returned the wrong number of rows.
    #[error("the embedder returned {got} vectors for {expected} texts during {stage}")]
    EmbedCount {
        /// What was being embedded.
        stage: &'static str,
        /// Texts given.
        expected: usize,
        /// Vectors returned.
        got: usize,
    },
    /// Messages of several namespaces, or none.
    #[error("a build takes the messages of one namespace ({0})")]
    Namespace(String),
}

/// The deciding parts of a build; each has a deterministic implementation and an LLM one.
pub struct Builders<'a> {
    /// Constants.
    pub config: &'a MemoryConfig,
    /// Exchange → snapshot draft.
    pub extractor: &'a dyn Extractor,
    /// Continue a trajectory or open a new one.
    pub decider: &'a dyn MatchDecider,
    /// ADD / REVISE / DEPRECATE.
    pub judge: &'a dyn ClaimJudge,
}

/// Counts and timings of a build.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BuildReport {
    /// The namespace.
    pub namespace: String,
    /// Source messages consumed by the fold (built, or pending in the open exchange).
    pub messages: usize,
    /// Exchanges appended by this build.
    pub appended: usize,
    /// Messages of the open exchange, not built yet (its reply may still come).
    pub pending_messages: usize,
    /// What a rebuild replaced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaced: Option<String>,
    /// Snapshots (one per exchange).
    pub snapshots: usize,
    /// Claims.
    pub claims: usize,
    /// ADD ops.
    pub adds: usize,
    /// REVISE ops.
    pub revises: usize,
    /// DEPRECATE ops.
    pub deprecates: usize,
    /// Trajectories.
    pub trajectories: usize,
    /// Trajectories that continue a full one.
    pub continuations: usize,
    /// Snapshots that continued an existing trajectory.
    pub continued_snapshots: usize,
    /// Pages by kind.
    pub pages: BTreeMap<String, usize>,
    /// Texts embedded (the messages; every other level is derived from their vectors).
    pub embedded_texts: usize,
    /// Rows appended to the namespace's vector file.
    pub vectors_appended: usize,
    /// Rows of the vector file searched through the approximate index (0: exact search only).
    pub ann_rows: usize,
    /// Milliseconds spent embedding.
    pub embed_ms: u128,
    /// Milliseconds spent folding exchanges: extraction, matching, claim evolution, summaries.
    pub match_ms: u128,
    /// Milliseconds spent rendering the wiki pages that changed.
    pub wiki_ms: u128,
    /// Milliseconds spent reading the fold's state back from the store.
    pub load_ms: u128,
    /// Milliseconds spent committing (records, pages and the fold's state, one transaction).
    pub commit_ms: u128,
}

/// A built memory: every derived record of one namespace.
#[derive(Debug, Clone)]
pub struct BuiltMemory {
    /// The namespace.
    pub namespace: Namespace,
    /// Trajectories, in creation order.
    pub trajectories: Vec<Trajectory>,
    /// Snapshots, in build order (each trajectory's versions ascend).
    pub snapshots: Vec<Snapshot>,
    /// Claims, in build order.
    pub claims: Vec<Claim>,
    /// The op log, in seq order.
    pub ops: Vec<ClaimOp>,
    /// Wiki pages, sorted by kind then id.
    pub pages: Vec<WikiPage>,
    /// Trajectory vectors (e_sum, the centroid of their snapshots' vectors), aligned with
    /// `trajectories`.
    pub trajectory_embeddings: Vec<Vec<f32>>,
    /// Counts and timings.
    pub report: BuildReport,
}

impl BuildReport {
    /// Fills in the counts of a fold (totals of the namespace) and of its wiki; the timings and
    /// the other fields stay as they are.
    pub fn count(&mut self, fold: &Fold) {
        let h = &fold.header;
        self.namespace = fold.namespace.to_string();
        self.messages = h.messages;
        self.snapshots = h.snapshots;
        self.claims = h.claims;
        self.adds = h.adds;
        self.revises = h.revises;
        self.deprecates = h.deprecates;
        self.trajectories = fold.trajectories.len();
        self.continuations = h.continuations;
        self.continued_snapshots = h.continued_snapshots;
        self.pages = fold.wiki.page_counts();
    }
}

/// Folds closed exchanges into `fold`, embedding their messages in one batch first (every
/// message once; a snapshot's vector is the centroid of its messages' vectors). Times go to
/// `report`.
pub fn fold_exchanges(
    fold: &mut Fold,
    groups: &[Vec<&SourceMessage>],
    embed: &mut EmbedFn<'_>,
    b: &Builders<'_>,
    report: &mut BuildReport,
) -> Result<Delta, BuildError> {
    fold_exchanges_told(fold, groups, embed, b, report, &mut |_, _| {})
}

/// [`fold_exchanges`], telling `folded` the messages folded so far and their total after each
/// exchange (for a progress bar).
pub fn fold_exchanges_told(
    fold: &mut Fold,
    groups: &[Vec<&SourceMessage>],
    embed: &mut EmbedFn<'_>,
    b: &Builders<'_>,
    report: &mut BuildReport,
    folded: &mut dyn FnMut(usize, usize),
) -> Result<Delta, BuildError> {
    let mut delta = Delta::default();
    if groups.is_empty() {
        return Ok(delta);
    }
    let t0 = Instant::now();
    let texts: Vec<String> = groups
        .iter()
        .flatten()
        .map(|m| m.embedding_text())
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let vectors = embed(&refs).map_err(|source| BuildError::Embed {
        stage: "messages",
        source,
    })?;
    if vectors.len() != texts.len() {
        return Err(BuildError::EmbedCount {
            stage: "messages",
            expected: texts.len(),
            got: vectors.len(),
        });
    }
    report.embed_ms += t0.elapsed().as_millis();
    let t0 = Instant::now();
    let mut at = 0;
    for g in groups {
        let rows: Vec<&[f32]> = vectors[at..at + g.len()]
            .iter()
            .map(Vec::as_slice)
            .collect();
        at += g.len();
        fold.append(g, &rows, b, &mut delta)?;
        folded(at, texts.len());
    }
    report.match_ms += t0.elapsed().as_millis();
    Ok(delta)
}

/// Renders the wiki pages changed since the last call (sorted by kind, then id), and lists the
/// pages retired.
pub fn wiki(fold: &mut Fold, report: &mut BuildReport) -> (Vec<WikiPage>, Vec<PageId>) {
    let (changed, retired) = wiki_with_members(fold, report);
    (changed.into_iter().map(|(p, _)| p).collect(), retired)
}

/// [`wiki`], each page with the positions in `fold.trajectories` of the trajectories it links
/// (aligned with its `trajectory_ids`).
pub fn wiki_with_members(
    fold: &mut Fold,
    report: &mut BuildReport,
) -> (Vec<(WikiPage, Vec<usize>)>, Vec<PageId>) {
    let t0 = Instant::now();
    let changed = fold
        .wiki
        .take_pages_with_members(&fold.namespace, &fold.trajectories);
    report.wiki_ms += t0.elapsed().as_millis();
    changed
}

/// Builds the memory of one namespace from its messages (in the order they arrived), every
/// exchange closed: the fold over all of them, then the wiki.
pub fn build(
    messages: &[SourceMessage],
    embed: &mut EmbedFn<'_>,
    b: &Builders<'_>,
) -> Result<BuiltMemory, BuildError> {
    let ns = match messages.first() {
        Some(m) => m.namespace.clone(),
        None => return Err(BuildError::Namespace("no messages".into())),
    };
    let mut fold = Fold::new(ns.clone());
    let mut report = BuildReport::default();
    let groups: Vec<Vec<&SourceMessage>> = crate::extract::exchanges(messages)
        .into_iter()
        .map(|g| g.into_iter().map(|i| &messages[i]).collect())
        .collect();
    let delta = fold_exchanges(&mut fold, &groups, embed, b, &mut report)?;
    let (pages, _) = wiki(&mut fold, &mut report);
    report.count(&fold);
    report.embedded_texts = messages.len();
    Ok(BuiltMemory {
        namespace: ns.clone(),
        trajectories: fold.trajectories.iter().map(|t| t.record(&ns)).collect(),
        trajectory_embeddings: fold
            .trajectories
            .iter()
            .map(|t| t.features.summary_embedding.clone())
            .collect(),
        snapshots: delta.snapshots,
        claims: delta.claims,
        ops: delta.ops,
        pages,
        report,
    })
}
