//! The build: messages → exchanges → snapshot drafts → embeddings → trajectories with claim
//! evolution → trajectory summaries → Memory Wiki. Deterministic: the same messages and
//! configuration give the same records, ids included.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use rayon::prelude::*;
use serde::Serialize;
use trajwiki_core::{
    centroid, Claim, ClaimId, ClaimOp, ClaimStatus, EmbedError, Facet, Namespace, OpId, OpKind,
    Signals, Snapshot, SnapshotId, SourceMessage, Trajectory, TrajectoryId, WikiPage,
};

use crate::evolve::{ClaimJudge, EarlierClaim, Judgement};
use crate::extract::{exchanges, ExtractError, Extractor, Lexicon, SnapshotDraft};
use crate::matcher::{candidates, score, Features, MatchDecider, TrajectoryFeatures};
use crate::wiki::{compile_wiki, WikiInput};
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
    /// Source messages.
    pub messages: usize,
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
    /// Milliseconds spent extracting.
    pub extract_ms: u128,
    /// Milliseconds spent embedding.
    pub embed_ms: u128,
    /// Milliseconds spent matching and evolving claims.
    pub match_ms: u128,
    /// Milliseconds spent compiling the wiki.
    pub wiki_ms: u128,
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

/// A trajectory during the build.
pub(crate) struct TrajState {
    pub features: TrajectoryFeatures,
    pub snapshots: Vec<usize>,
    /// Claims (indices into the build's claim list) with their current status.
    pub claims: Vec<usize>,
    pub continues: Option<usize>,
    pub continued: bool,
    pub subject_facets: BTreeSet<(String, String)>,
    pub items: BTreeSet<(String, String)>,
    pub counts: BTreeSet<String>,
}

fn check_rows(stage: &'static str, expected: usize, rows: &[Vec<f32>]) -> Result<(), BuildError> {
    if rows.len() != expected {
        return Err(BuildError::EmbedCount {
            stage,
            expected,
            got: rows.len(),
        });
    }
    Ok(())
}

/// Builds the memory of one namespace from its messages (in session, seq order).
pub fn build(
    messages: &[SourceMessage],
    embed: &mut EmbedFn<'_>,
    b: &Builders<'_>,
) -> Result<BuiltMemory, BuildError> {
    let ns = match messages.first() {
        Some(m) => m.namespace.clone(),
        None => return Err(BuildError::Namespace("no messages".into())),
    };
    if let Some(other) = messages.iter().find(|m| m.namespace != ns) {
        return Err(BuildError::Namespace(format!(
            "{ns} and {}",
            other.namespace
        )));
    }
    let c = b.config;
    let mut report = BuildReport {
        namespace: ns.to_string(),
        messages: messages.len(),
        ..Default::default()
    };

    // 1. Exchanges and drafts (parallel; the order is kept).
    let t0 = Instant::now();
    let lexicon = Lexicon::build(messages, c);
    let mut groups = exchanges(messages);
    groups.sort_by_key(|g| {
        (
            messages[g[0]].timestamp,
            messages[g[0]].session,
            messages[g[0]].seq,
        )
    });
    let drafts: Vec<SnapshotDraft> = groups
        .par_iter()
        .map(|g| {
            let ms: Vec<&SourceMessage> = g.iter().map(|&i| &messages[i]).collect();
            b.extractor.extract(&ms, &lexicon)
        })
        .collect::<Result<_, _>>()?;
    report.extract_ms = t0.elapsed().as_millis();

    // 2. Embeddings, one batch: every message once; a snapshot's vector is the centroid of its
    //    messages' vectors (retrieval derives the same vectors from the same cached rows).
    let t0 = Instant::now();
    let texts: Vec<String> = messages.iter().map(SourceMessage::embedding_text).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let message_vecs = embed(&refs).map_err(|source| BuildError::Embed {
        stage: "messages",
        source,
    })?;
    check_rows("messages", messages.len(), &message_vecs)?;
    let dim = message_vecs.first().map_or(0, Vec::len);
    let snap_vecs: Vec<Vec<f32>> = groups
        .iter()
        .map(|g| centroid(g.iter().map(|&i| message_vecs[i].as_slice()), dim))
        .collect();
    report.embed_ms += t0.elapsed().as_millis();
    report.embedded_texts += texts.len();

    // 3. Matching and claim evolution, in time order.
    let t0 = Instant::now();
    let broad = lexicon.speakers.clone();
    let mut trajs: Vec<TrajState> = Vec::new();
    let mut snapshot_traj: Vec<usize> = Vec::with_capacity(drafts.len());
    // Per claim: (snapshot index, index within its draft, current status, revised_from).
    let mut claim_rows: Vec<(usize, usize, ClaimStatus, Option<usize>)> = Vec::new();
    // Per op: (kind, target claim, new claim, new status, snapshot, claim within the draft, rationale).
    #[allow(clippy::type_complexity)]
    let mut op_rows: Vec<(
        OpKind,
        Option<usize>,
        Option<usize>,
        Option<ClaimStatus>,
        usize,
        usize,
        String,
    )> = Vec::new();
    for (si, (d, e)) in drafts.iter().zip(&snap_vecs).enumerate() {
        let session = messages[groups[si][0]].session;
        let f = Features {
            keywords: d.keywords.clone(),
            entities: d.entities.clone(),
            terms: d.terms.clone(),
            facets: d.facets.clone(),
            embedding: e.clone(),
            session,
        };
        let open: Vec<(usize, &TrajectoryFeatures)> = trajs
            .iter()
            .enumerate()
            .filter(|(_, t)| !t.continued)
            .map(|(i, t)| (i, &t.features))
            .collect();
        let mut scores: Vec<_> = candidates(&f, &open, &broad, c)
            .into_iter()
            .map(|i| score(&f, &trajs[i].features, i, &broad, c))
            .collect();
        scores.sort_by(|a, b| b.g.total_cmp(&a.g).then(a.candidate.cmp(&b.candidate)));
        let chosen = b.decider.decide(&f, &scores).map(|k| scores[k].candidate);
        let ti = match chosen {
            Some(t) if trajs[t].snapshots.len() < c.max_trajectory_len => {
                report.continued_snapshots += 1;
                t
            }
            full => {
                if let Some(t) = full {
                    trajs[t].continued = true;
                    report.continuations += 1;
                }
                trajs.push(TrajState {
                    features: TrajectoryFeatures::default(),
                    snapshots: vec![],
                    claims: vec![],
                    continues: full,
                    continued: false,
                    subject_facets: BTreeSet::new(),
                    items: BTreeSet::new(),
                    counts: BTreeSet::new(),
                });
                trajs.len() - 1
            }
        };
        snapshot_traj.push(ti);
        // Claim evolution against the trajectory's current claims.
        for (k, claim) in d.claims.iter().enumerate() {
            let t = &trajs[ti];
            let current: Vec<usize> = t
                .claims
                .iter()
                .copied()
                .filter(|&ci| claim_rows[ci].2 != ClaimStatus::Deprecated)
                .collect();
            let earlier: Vec<EarlierClaim<'_>> = current
                .iter()
                .map(|&ci| EarlierClaim {
                    draft: &drafts[claim_rows[ci].0].claims[claim_rows[ci].1],
                    status: claim_rows[ci].2,
                })
                .collect();
            let judgement = b.judge.judge(claim, &earlier);
            let new = claim_rows.len();
            match judgement {
                Judgement::Add { rationale } => {
                    claim_rows.push((si, k, claim.status, None));
                    op_rows.push((OpKind::Add, None, Some(new), None, si, k, rationale));
                }
                Judgement::Revise { target, rationale } => {
                    let old = current[target];
                    claim_rows[old].2 = ClaimStatus::Deprecated;
                    claim_rows.push((si, k, claim.status, Some(old)));
                    op_rows.push((OpKind::Revise, Some(old), Some(new), None, si, k, rationale));
                }
                Judgement::Deprecate { target, rationale } => {
                    let old = current[target];
                    claim_rows[old].2 = ClaimStatus::Deprecated;
                    op_rows.push((
                        OpKind::Deprecate,
                        Some(old),
                        None,
                        Some(ClaimStatus::Deprecated),
                        si,
                        k,
                        rationale,
                    ));
                    claim_rows.push((si, k, claim.status, None));
                    op_rows.push((
                        OpKind::Add,
                        None,
                        Some(new),
                        None,
                        si,
                        k,
                        "statement after a withdrawal".into(),
                    ));
                }
            }
            trajs[ti].claims.push(new);
        }
        // Fold the snapshot into the trajectory's features.
        let t = &mut trajs[ti];
        t.snapshots.push(si);
        t.features.keywords.extend(d.keywords.iter().cloned());
        t.features.entities.extend(d.entities.iter().cloned());
        t.features.terms.extend(d.terms.iter().cloned());
        t.features.facets.extend(d.facets.iter().cloned());
        t.items.extend(d.items.iter().cloned());
        t.counts.extend(d.counts.iter().cloned());
        for claim in &d.claims {
            for fct in &claim.facets {
                t.subject_facets
                    .insert((claim.subject.clone(), fct.tag.clone()));
            }
        }
        t.features.summary_embedding =
            centroid(t.snapshots.iter().map(|&si| snap_vecs[si].as_slice()), dim);
        t.features.latest_embedding = e.clone();
        t.features.last_session = session;
    }
    report.match_ms = t0.elapsed().as_millis();

    // 4. Records with stable ids.
    let snap_ids: Vec<SnapshotId> = groups
        .iter()
        .map(|g| SnapshotId::derive(&ns, messages[g[0]].id.as_str()))
        .collect();
    let traj_ids: Vec<TrajectoryId> = trajs
        .iter()
        .map(|t| TrajectoryId::derive(&ns, snap_ids[t.snapshots[0]].as_str()))
        .collect();
    let claim_ids: Vec<ClaimId> = claim_rows
        .iter()
        .map(|(si, k, _, _)| ClaimId::derive(&ns, &format!("{}/{k}", snap_ids[*si])))
        .collect();
    let mut claims_of_snapshot: Vec<Vec<ClaimId>> = vec![vec![]; drafts.len()];
    let claims: Vec<Claim> = claim_rows
        .iter()
        .enumerate()
        .map(|(ci, (si, k, _, from))| {
            let draft = &drafts[*si].claims[*k];
            claims_of_snapshot[*si].push(claim_ids[ci].clone());
            Claim {
                id: claim_ids[ci].clone(),
                namespace: ns.clone(),
                snapshot: snap_ids[*si].clone(),
                text: draft.text.clone(),
                status: draft.status,
                source_message_ids: vec![draft.source.clone()],
                quote: draft.quote.clone(),
                revised_from: from.map(|f| claim_ids[f].clone()),
            }
        })
        .collect();
    let mut version_of = vec![0u32; drafts.len()];
    for t in &trajs {
        for (v, &si) in t.snapshots.iter().enumerate() {
            version_of[si] = v as u32 + 1;
        }
    }
    let snapshots: Vec<Snapshot> = drafts
        .iter()
        .enumerate()
        .map(|(si, d)| Snapshot {
            id: snap_ids[si].clone(),
            namespace: ns.clone(),
            trajectory: traj_ids[snapshot_traj[si]].clone(),
            version: version_of[si],
            timestamp: messages[groups[si][0]].timestamp,
            summary: d.summary.clone(),
            context: d.context.clone(),
            keywords: d.keywords.iter().cloned().collect(),
            claim_ids: claims_of_snapshot[si].clone(),
            source_message_ids: groups[si].iter().map(|&i| messages[i].id.clone()).collect(),
        })
        .collect();
    let ops: Vec<ClaimOp> = op_rows
        .iter()
        .enumerate()
        .map(
            |(i, (kind, target, new, status, si, k, rationale))| ClaimOp {
                id: OpId::derive(&ns, &format!("{}#{}", snap_ids[*si], i)),
                namespace: ns.clone(),
                seq: i as u64 + 1,
                op: *kind,
                target: target.map(|t| claim_ids[t].clone()),
                new_claim: new.map(|n| claim_ids[n].clone()),
                new_status: *status,
                // The message of the statement that caused the op.
                source_message_ids: vec![drafts[*si].claims[*k].source.clone()],
                rationale: rationale.clone(),
                snapshot: snap_ids[*si].clone(),
            },
        )
        .collect();
    for op in &ops {
        match op.op {
            OpKind::Add => report.adds += 1,
            OpKind::Revise => report.revises += 1,
            OpKind::Deprecate => report.deprecates += 1,
        }
    }
    let status_now: Vec<ClaimStatus> = claim_rows.iter().map(|r| r.2).collect();

    // 5. Trajectory summaries (deterministic sections) and their embeddings.
    let trajectories: Vec<Trajectory> = trajs
        .iter()
        .enumerate()
        .map(|(ti, t)| Trajectory {
            id: traj_ids[ti].clone(),
            namespace: ns.clone(),
            snapshot_ids: t.snapshots.iter().map(|&si| snap_ids[si].clone()).collect(),
            continues: t.continues.map(|p| traj_ids[p].clone()),
            summary: summarize(t, &drafts, &claims, &status_now, &lexicon),
            signals: Signals {
                keywords: t.features.keywords.iter().cloned().collect(),
                entities: t.features.entities.iter().cloned().collect(),
                terms: t.features.terms.iter().cloned().collect(),
                facets: t.features.facets.iter().cloned().collect::<Vec<Facet>>(),
            },
        })
        .collect();
    // A trajectory's vector is e_sum, the centroid of its snapshots' vectors in order.
    let traj_vecs: Vec<Vec<f32>> = trajs
        .iter()
        .map(|t| centroid(t.snapshots.iter().map(|&si| snap_vecs[si].as_slice()), dim))
        .collect();

    // 6. The Memory Wiki.
    let t0 = Instant::now();
    let pages = compile_wiki(&WikiInput {
        namespace: &ns,
        config: c,
        lexicon: &lexicon,
        trajectories: &trajectories,
        states: &trajs,
        embeddings: &traj_vecs,
        claims: &claims,
        status: &status_now,
        refs: messages
            .iter()
            .map(|m| {
                (
                    m.id.clone(),
                    m.external_ref.clone().unwrap_or_else(|| m.id.to_string()),
                )
            })
            .collect(),
    });
    report.wiki_ms = t0.elapsed().as_millis();
    for p in &pages {
        *report.pages.entry(p.kind.as_str().to_string()).or_default() += 1;
    }
    report.snapshots = snapshots.len();
    report.claims = claims.len();
    report.trajectories = trajectories.len();
    Ok(BuiltMemory {
        namespace: ns,
        trajectories,
        snapshots,
        claims,
        ops,
        pages,
        trajectory_embeddings: traj_vecs,
        report,
    })
}

/// The deterministic trajectory summary, in sections (SPEC §7): profile (label, up to 8
/// entities, up to 10 active claims), item sets (up to 16 values), relations (facts and the last
/// 3 snapshot notes), conflicts.
fn summarize(
    t: &TrajState,
    drafts: &[SnapshotDraft],
    claims: &[Claim],
    status: &[ClaimStatus],
    lexicon: &Lexicon,
) -> String {
    let label = trajectory_label(t, lexicon);
    let entities: Vec<&str> = t
        .features
        .entities
        .iter()
        .filter_map(|k| lexicon.entities.get(k).map(String::as_str))
        .take(8)
        .collect();
    let mut out = format!("Profile: {label}");
    if !entities.is_empty() {
        out.push_str(&format!("\nEntities: {}", entities.join(", ")));
    }
    let active: Vec<&str> = t
        .claims
        .iter()
        .rev()
        .filter(|&&ci| status[ci] == ClaimStatus::Active)
        .take(10)
        .map(|&ci| claims[ci].text.as_str())
        .collect();
    for c in active.iter().rev() {
        out.push_str(&format!("\n- {c}"));
    }
    let mut items: Vec<&str> = t.items.iter().map(|(i, _)| i.as_str()).collect();
    items.extend(t.counts.iter().map(String::as_str));
    items.truncate(16);
    if !items.is_empty() {
        out.push_str(&format!("\nItems: {}", items.join(", ")));
    }
    let facts: Vec<String> = t
        .features
        .facets
        .iter()
        .take(8)
        .map(|f| format!("{}={}", f.tag, f.value))
        .collect();
    if !facts.is_empty() {
        out.push_str(&format!("\nFacts: {}", facts.join("; ")));
    }
    let notes: Vec<&str> = t
        .snapshots
        .iter()
        .rev()
        .take(3)
        .map(|&si| drafts[si].summary.as_str())
        .collect();
    for n in notes.iter().rev() {
        out.push_str(&format!("\nNote: {n}"));
    }
    let conflicts: Vec<&str> = t
        .claims
        .iter()
        .filter(|&&ci| {
            matches!(
                status[ci],
                ClaimStatus::Deprecated | ClaimStatus::Contradictory
            )
        })
        .take(5)
        .map(|&ci| claims[ci].text.as_str())
        .collect();
    for c in conflicts {
        out.push_str(&format!("\nSuperseded: {c}"));
    }
    out
}

/// A short label: the most specific entity, else the top terms, else the top keywords.
pub(crate) fn trajectory_label(t: &TrajState, lexicon: &Lexicon) -> String {
    let specific: Vec<&str> = t
        .features
        .entities
        .iter()
        .filter(|k| !lexicon.speakers.contains(*k))
        .filter_map(|k| lexicon.entities.get(k).map(String::as_str))
        .take(2)
        .collect();
    let terms: Vec<&str> = t
        .features
        .terms
        .iter()
        .map(String::as_str)
        .take(3)
        .collect();
    let speakers: Vec<&str> = t
        .features
        .entities
        .iter()
        .filter(|k| lexicon.speakers.contains(*k))
        .filter_map(|k| lexicon.entities.get(k).map(String::as_str))
        .collect();
    let topic = if !specific.is_empty() {
        specific.join(", ")
    } else if !terms.is_empty() {
        terms.join(", ")
    } else {
        t.features
            .keywords
            .iter()
            .take(3)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ")
    };
    if speakers.is_empty() {
        topic
    } else {
        format!("{} — {topic}", speakers.join(" & "))
    }
}
