//! Trajectory matching (SPEC §2.3): candidate prefilter, the compatibility score g with every
//! bonus and penalty, and the decision to continue a trajectory or open a new one.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use trajwiki_core::Facet;

use crate::extract::is_specific;
use crate::text::{cosine, jaccard};
use crate::MemoryConfig;

/// What matching knows of a snapshot.
#[derive(Debug, Clone, Default)]
pub struct Features {
    /// Stemmed keywords K.
    pub keywords: BTreeSet<String>,
    /// Entity keys E.
    pub entities: BTreeSet<String>,
    /// Exact terms X.
    pub terms: BTreeSet<String>,
    /// Facets F.
    pub facets: BTreeSet<Facet>,
    /// L2-normalised embedding e.
    pub embedding: Vec<f32>,
    /// Session number.
    pub session: u32,
}

/// What matching knows of a trajectory.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TrajectoryFeatures {
    /// Union of its snapshots' keywords.
    pub keywords: BTreeSet<String>,
    /// Union of entity keys.
    pub entities: BTreeSet<String>,
    /// Union of exact terms.
    pub terms: BTreeSet<String>,
    /// Union of facets.
    pub facets: BTreeSet<Facet>,
    /// e_sum: the normalised mean of its snapshot embeddings (derived from the fold's running
    /// sum, so not persisted).
    #[serde(skip)]
    pub summary_embedding: Vec<f32>,
    /// e_latest: its latest snapshot's embedding.
    pub latest_embedding: Vec<f32>,
    /// Session of its latest snapshot.
    pub last_session: u32,
}

/// g and its parts, for one candidate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MatchScore {
    /// Index of the candidate trajectory.
    pub candidate: usize,
    /// The compatibility score g.
    pub g: f32,
    /// cos(e, e_sum(T)).
    pub cos_summary: f32,
    /// cos(e, e_latest(T)).
    pub cos_latest: f32,
    /// Jaccard(K, K_T).
    pub jaccard: f32,
    /// b_entity.
    pub b_entity: f32,
    /// b_facet.
    pub b_facet: f32,
    /// b_cont.
    pub b_cont: f32,
    /// p_mismatch.
    pub p_mismatch: f32,
    /// Specific terms shared.
    pub specific_shared: usize,
    /// A specific entity (not a speaker) is shared.
    pub specific_entity: bool,
    /// An exact facet value is shared.
    pub facet_value: bool,
    /// Sessions between the trajectory's latest snapshot and this one.
    pub session_gap: u32,
}

/// Computes g for a snapshot against one trajectory. `broad` holds the broad entity keys (the
/// speakers), which alone never make two statements about the same thing.
pub fn score(
    s: &Features,
    t: &TrajectoryFeatures,
    candidate: usize,
    broad: &BTreeSet<String>,
    c: &MemoryConfig,
) -> MatchScore {
    let cos_summary = cosine(&s.embedding, &t.summary_embedding);
    let cos_latest = cosine(&s.embedding, &t.latest_embedding);
    let jac = jaccard(&s.keywords, &t.keywords);
    let shared_entities: Vec<&String> = s.entities.intersection(&t.entities).collect();
    let specific_entity = shared_entities.iter().any(|e| !broad.contains(*e));
    let b_entity = if shared_entities.is_empty() {
        0.0
    } else {
        c.b_entity
    };
    let facet_value = s.facets.intersection(&t.facets).next().is_some();
    let facet_tag = s
        .facets
        .iter()
        .any(|f| t.facets.iter().any(|g| g.tag == f.tag));
    let b_facet = if facet_value {
        c.b_facet_value
    } else if facet_tag {
        c.b_facet_tag
    } else {
        0.0
    };
    let specific_shared = s
        .terms
        .intersection(&t.terms)
        .filter(|x| is_specific(x))
        .count()
        + shared_entities
            .iter()
            .filter(|e| !broad.contains(**e))
            .count();
    let b_cont = (c.b_cont_per_term * specific_shared as f32).min(c.b_cont_max);
    let words_overlap = s.keywords.intersection(&t.keywords).next().is_some();
    let p_mismatch = if specific_shared == 0 && !shared_entities.is_empty() && !specific_entity {
        c.p_broad_only
    } else if specific_shared == 0 && words_overlap {
        c.p_words_only
    } else {
        0.0
    };
    let g = c.w_cos_summary * cos_summary
        + c.w_cos_latest * cos_latest
        + c.w_jaccard * jac
        + b_entity
        + b_facet
        + b_cont
        - p_mismatch;
    MatchScore {
        candidate,
        g,
        cos_summary,
        cos_latest,
        jaccard: jac,
        b_entity,
        b_facet,
        b_cont,
        p_mismatch,
        specific_shared,
        specific_entity,
        facet_value,
        session_gap: s.session.saturating_sub(t.last_session),
    }
}

/// The prefilter: candidates sharing any keyword, specific entity or facet with the snapshot, at
/// most `prefilter_cap`, by overlap count (ties: earlier trajectory first); all open trajectories
/// when none overlaps.
pub fn candidates(
    s: &Features,
    open: &[(usize, &TrajectoryFeatures)],
    broad: &BTreeSet<String>,
    c: &MemoryConfig,
) -> Vec<usize> {
    let mut overlapping: Vec<(usize, usize)> = open
        .iter()
        .map(|(i, t)| {
            let n = s.keywords.intersection(&t.keywords).count()
                + s.entities
                    .intersection(&t.entities)
                    .filter(|e| !broad.contains(*e))
                    .count()
                + s.facets.intersection(&t.facets).count();
            (*i, n)
        })
        .filter(|(_, n)| *n > 0)
        .collect();
    if overlapping.is_empty() {
        return open.iter().map(|(i, _)| *i).collect();
    }
    overlapping.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    overlapping.truncate(c.prefilter_cap);
    overlapping.into_iter().map(|(i, _)| i).collect()
}

/// Decides whether a snapshot continues one of the scored candidates (`Some(index into scores)`)
/// or opens a new trajectory (`None`). The LLM decider chooses among the top 3 or NEW.
pub trait MatchDecider: Send + Sync {
    /// A name recorded with what it decided.
    fn name(&self) -> &str;
    /// `scores` are sorted best first.
    fn decide(&self, snapshot: &Features, scores: &[MatchScore]) -> Option<usize>;
    /// [`MatchDecider::decide`] with the texts a model reads: the snapshot's summary and each
    /// scored candidate's summary, aligned with `scores`. The deterministic decider reads none.
    fn decide_with_texts(
        &self,
        snapshot: &Features,
        scores: &[MatchScore],
        _summary: &str,
        _candidates: &[&str],
    ) -> Option<usize> {
        self.decide(snapshot, scores)
    }
}

/// The offline decider: the best candidate continues when g reaches `delta_deterministic` and the
/// lexical gate holds — a shared specific term, or an equal facet value together with a shared
/// specific entity — within `max_session_gap` sessions (SPEC §7: with small embedding models the
/// paper's δ is never reached, and a shared speaker alone is never enough).
#[derive(Debug, Clone, Default)]
pub struct DeterministicDecider {
    config: MemoryConfig,
}

impl DeterministicDecider {
    /// A decider with the given thresholds.
    pub fn new(config: MemoryConfig) -> Self {
        DeterministicDecider { config }
    }
}

impl MatchDecider for DeterministicDecider {
    fn name(&self) -> &str {
        "deterministic"
    }

    fn decide(&self, _snapshot: &Features, scores: &[MatchScore]) -> Option<usize> {
        scores.iter().position(|m| {
            let gate = m.specific_shared > 0 || (m.facet_value && m.specific_entity);
            m.g >= self.config.delta_deterministic
                && gate
                && m.session_gap <= self.config.max_session_gap
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(xs: &[&str]) -> BTreeSet<String> {
        xs.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn g_components() {
        let c = MemoryConfig::default();
        let broad = set(&["ann"]);
        let s = Features {
            keywords: set(&["pottery", "bowl", "class"]),
            entities: set(&["ann", "okafor"]),
            terms: set(&["pottery workshop", "bowl"]),
            facets: [Facet {
                tag: "event_type".into(),
                value: "pottery workshop".into(),
            }]
            .into(),
            embedding: vec![1.0, 0.0],
            session: 2,
        };
        let t = TrajectoryFeatures {
            keywords: set(&["pottery", "class", "saturday"]),
            entities: set(&["ann", "okafor"]),
            terms: set(&["pottery workshop"]),
            facets: [Facet {
                tag: "event_type".into(),
                value: "pottery workshop".into(),
            }]
            .into(),
            summary_embedding: vec![0.6, 0.8],
            latest_embedding: vec![1.0, 0.0],
            last_session: 1,
        };
        let m = score(&s, &t, 0, &broad, &c);
        assert!((m.cos_summary - 0.6).abs() < 1e-6 && (m.cos_latest - 1.0).abs() < 1e-6);
        assert!((m.jaccard - 0.5).abs() < 1e-6);
        assert_eq!((m.b_entity, m.b_facet), (0.08, 0.06));
        // one specific term + one specific entity shared
        assert_eq!(m.specific_shared, 2);
        assert!((m.b_cont - 0.08).abs() < 1e-6);
        assert_eq!(m.p_mismatch, 0.0);
        let expected = 0.6 * 0.6 + 0.2 * 1.0 + 0.2 * 0.5 + 0.08 + 0.06 + 0.08;
        assert!((m.g - expected).abs() < 1e-5, "{} vs {expected}", m.g);

        // Only the speaker in common: broad-only penalty, and the gate refuses it.
        let t2 = TrajectoryFeatures {
            keywords: set(&["marathon"]),
            entities: set(&["ann"]),
            summary_embedding: vec![1.0, 0.0],
            latest_embedding: vec![1.0, 0.0],
            last_session: 2,
            ..Default::default()
        };
        let m2 = score(&s, &t2, 1, &broad, &c);
        assert_eq!(m2.p_mismatch, 0.10);
        assert_eq!(m2.specific_shared, 0);
        let d = DeterministicDecider::new(c.clone());
        assert_eq!(
            d.decide(&s, &[m2]),
            None,
            "a shared speaker alone is never enough"
        );
        assert_eq!(d.decide(&s, &[m2, m]), Some(1));
        // Words overlap without a specific term.
        let t3 = TrajectoryFeatures {
            keywords: set(&["bowl"]),
            ..t2.clone()
        };
        let s3 = Features {
            entities: set(&[]),
            ..s.clone()
        };
        assert_eq!(score(&s3, &t3, 2, &broad, &c).p_mismatch, 0.04);
        // Too far back in the conversation.
        let far = Features {
            session: 9,
            ..s.clone()
        };
        assert_eq!(d.decide(&far, &[score(&far, &t, 0, &broad, &c)]), None);
    }

    #[test]
    fn prefilter_caps_and_orders() {
        let c = MemoryConfig {
            prefilter_cap: 2,
            ..MemoryConfig::default()
        };
        let s = Features {
            keywords: set(&["a", "b", "c"]),
            ..Default::default()
        };
        let ts: Vec<TrajectoryFeatures> =
            [vec!["a"], vec!["a", "b"], vec!["z"], vec!["a", "b", "c"]]
                .into_iter()
                .map(|k| TrajectoryFeatures {
                    keywords: set(&k),
                    ..Default::default()
                })
                .collect();
        let open: Vec<(usize, &TrajectoryFeatures)> = ts.iter().enumerate().collect();
        assert_eq!(candidates(&s, &open, &BTreeSet::new(), &c), vec![3, 1]);
        let none = Features {
            keywords: set(&["q"]),
            ..Default::default()
        };
        assert_eq!(
            candidates(&none, &open, &BTreeSet::new(), &c),
            vec![0, 1, 2, 3]
        );
    }
}
