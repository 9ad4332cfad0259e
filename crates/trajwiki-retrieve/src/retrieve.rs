//! Retrieval (SPEC §3.1–3.5): route to pages, score trajectories, select with coverage, expand to
//! snapshots and source messages, and pack the evidence under a token budget.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use rayon::prelude::*;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use trajwiki_compute::sketch::SketchQuery;
use trajwiki_compute::topk::{
    order_key, ordered_bits, par_topk, par_topk_bounded, sketch_pays, sort_hits, Hit,
};
use trajwiki_compute::{
    Bm25Index, Candidate, CoverageWeights, QueryWants, ScoringBackend, SelectionBatch, SetWords,
    NO_CLUSTER,
};

use crate::index::{Index, IndexError, Rows};
use crate::shape::{analyse, Shape};
use crate::turns::{self, Features, Lookups, Routes, Turn};
use trajwiki_core::centroid;
use trajwiki_text::lexicon::ITEM_FAMILIES;

/// Retrieval strategies: the full design, the paper's ablations, and plain baselines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Pages → trajectories → snapshots → messages, with the direct paths as safety nets.
    Full,
    /// Direct trajectory retrieval, no wiki routing.
    NoWiki,
    /// Only what the routed wiki pages link to.
    WikiOnly,
    /// Raw messages, lexical (keyword Jaccard).
    Flat,
    /// Only the latest snapshot of each selected trajectory.
    LatestSnapshot,
    /// Baseline: BM25 over raw turns.
    TurnBm25,
    /// Baseline: dense over raw turns.
    TurnDense,
    /// Baseline: RRF of BM25 and dense over raw turns.
    TurnHybrid,
    /// Baseline: dense over whole sessions.
    SessionDense,
}

impl Mode {
    /// Every mode.
    pub const ALL: [Mode; 9] = [
        Mode::Full,
        Mode::NoWiki,
        Mode::WikiOnly,
        Mode::Flat,
        Mode::LatestSnapshot,
        Mode::TurnBm25,
        Mode::TurnDense,
        Mode::TurnHybrid,
        Mode::SessionDense,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Full => "full",
            Mode::NoWiki => "no-wiki",
            Mode::WikiOnly => "wiki-only",
            Mode::Flat => "flat",
            Mode::LatestSnapshot => "latest-snapshot",
            Mode::TurnBm25 => "turn-bm25",
            Mode::TurnDense => "turn-dense",
            Mode::TurnHybrid => "turn-hybrid",
            Mode::SessionDense => "session-dense",
        }
    }

    /// Parses a name.
    pub fn parse(s: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.name() == s)
    }
}

/// Retrieval constants (SPEC §3 defaults).
#[derive(Debug, Clone)]
pub struct RetrievalConfig {
    /// Pages kept after routing (t).
    pub pages: usize,
    /// Trajectories a routed page adds to the candidate universe: its members nearest the
    /// question (a page about a person links most of a conversation; the question picks the
    /// section of it that matters).
    pub route_per_page: usize,
    /// Trajectories selected (k).
    pub trajectories: usize,
    /// RRF constant.
    pub rrf_k: f32,
    /// Neighbour radius within a trajectory.
    pub neighbour_radius: usize,
    /// Messages ranked by each direct route.
    pub direct_depth: usize,
    /// The head of each other ranked list (pages, trajectories, snapshots) that fusion and
    /// selection look at. It bounds a query's work in a large namespace: past the scoring scans
    /// themselves, nothing a search does grows with the namespace. A namespace smaller than the
    /// depth is ranked whole, exactly as without it.
    pub depth: usize,
    /// Best direct hits whose neighbouring turns join the ranking.
    pub neighbour_seeds: usize,
    /// Weight of the structured evidence route (pages → trajectories → snapshots) when it is
    /// fused with the direct dense and BM25 routes over raw turns (weight 1 each).
    pub evidence_weight: f32,
    /// Weight of the neighbouring-turns route in that fusion.
    pub neighbour_weight: f32,
    /// Weight of each of the two speaker routes (the direct dense and BM25 rankings restricted
    /// to the turns of the speakers a question names): what a person did, said or owns is
    /// mostly in their own turns.
    pub speaker_weight: f32,
    /// Weight of the item-family route: for list and count questions about a family of items
    /// ("what activities", "how many pets"), the turns that mention an item of that family, in
    /// dense order.
    pub family_weight: f32,
    /// Exponent of the length prior in the final message order: a turn's fused score is
    /// multiplied by its length in tokens to this power. Longer documents are more often
    /// relevant than a length-blind score predicts (the observation behind pivoted length
    /// normalisation, Singhal et al. 1996); in dialogue, short acknowledgements share a
    /// question's topic words without holding any fact.
    pub length_prior: f32,
    /// Coverage selection weights.
    pub coverage: CoverageWeights,
    /// Order the turns of a direct search by the turn model ([`crate::turns`]); without it, by
    /// the weighted RRF of the routes times the length prior (the order before the model).
    pub turn_model: bool,
    /// Keep every candidate turn's features in [`Ranking::turn_features`] (for fitting the
    /// turn model; off in searches).
    pub turn_features: bool,
}

impl Default for RetrievalConfig {
    fn default() -> Self {
        RetrievalConfig {
            pages: 15,
            route_per_page: 4,
            trajectories: 15,
            rrf_k: 60.0,
            neighbour_radius: 1,
            direct_depth: 300,
            depth: 300,
            neighbour_seeds: 40,
            evidence_weight: 1.0,
            neighbour_weight: 1.0,
            speaker_weight: 1.0,
            family_weight: 1.0,
            length_prior: 0.5,
            coverage: CoverageWeights::default(),
            turn_model: true,
            turn_features: false,
        }
    }
}

/// One scored item on the retrieval path.
#[derive(Debug, Clone, Serialize)]
pub struct PathItem {
    /// Its id.
    pub id: String,
    /// A label (title, summary, ref).
    pub label: String,
    /// Its fused score.
    pub score: f32,
}

/// The result of ranking: messages in order of value, and how they were reached.
#[derive(Debug, Clone, Serialize)]
pub struct Ranking {
    /// The mode.
    pub mode: Mode,
    /// Query shape.
    pub shape: Shape,
    /// Message indices, most valuable first.
    pub messages: Vec<usize>,
    /// Routed pages.
    pub pages: Vec<PathItem>,
    /// Selected trajectories.
    pub trajectories: Vec<PathItem>,
    /// Expanded snapshots.
    pub snapshots: Vec<PathItem>,
    /// Size of the candidate universe (trajectories reachable from routed pages, or considered).
    pub candidate_universe: usize,
    /// The candidate universe of each level: the records this search could return.
    pub candidates: Candidates,
    /// Milliseconds per stage.
    pub timings: BTreeMap<String, f64>,
    /// Every candidate turn with its features, when [`RetrievalConfig::turn_features`] asks.
    #[serde(skip)]
    pub turn_features: Vec<(usize, Features)>,
}

/// The candidate universe of each level: the records a search could return there. Routing
/// through the wiki (modes `full`, `wiki-only`, `latest-snapshot`) narrows the trajectories to
/// those the routed pages add (each its `route_per_page` members nearest the question) and the
/// snapshots to theirs; the messages are every message where the direct routes over raw turns
/// stay as the safety net (`full`, `latest-snapshot`), else the messages of the evidence.
/// Without routing (`no-wiki`) it is every trajectory, snapshot and message. (Routing through
/// pages, the trajectories are scored among the routed ones; the dense and BM25 scans of the
/// pages, snapshots and messages still read whole levels: see BENCHMARKS.md, item 3.)
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Candidates {
    /// Wiki pages (the index page excluded).
    pub pages: usize,
    /// Trajectories.
    pub trajectories: usize,
    /// Snapshots.
    pub snapshots: usize,
    /// Messages.
    pub messages: usize,
}

/// What a reranker orders (see [`Index::rank_reranked`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reranked {
    /// The routed wiki pages, by their routing texts (title first).
    Pages,
    /// The selected trajectories, by their summaries.
    Trajectories,
}

/// A reranker: given what it orders and their texts in the fused order, positions into them,
/// best first, or `None` to keep the fused order (see [`Index::rank_reranked`]).
pub type Rerank<'a> = dyn Fn(Reranked, &[&str]) -> Option<Vec<usize>> + 'a;

/// `items` in `order` (positions into them; out of range or repeated ones skipped), then the
/// rest in their own order.
fn reordered<T: Copy>(items: &[T], order: &[usize]) -> Vec<T> {
    let mut taken = vec![false; items.len()];
    let mut out = Vec::with_capacity(items.len());
    for &p in order {
        if p < items.len() && !taken[p] {
            taken[p] = true;
            out.push(items[p]);
        }
    }
    out.extend(
        items
            .iter()
            .zip(&taken)
            .filter(|(_, t)| !**t)
            .map(|(i, _)| *i),
    );
    out
}

/// Weighted reciprocal rank fusion: Σ w / (k + rank), rank from 1. Returns every listed id
/// with its fused score, in id order.
fn weighted_rrf(lists: &[(&[u32], f32)], k: f32) -> Vec<(usize, f32)> {
    // Each id's terms are added in list order whatever the map, and the caller orders the
    // result totally: hash maps give the same ranking as ordered ones, faster. Each id keeps the
    // last list that added to it, so that a repeat within one list adds nothing.
    let mut score: FxHashMap<u32, (f32, usize)> = FxHashMap::default();
    score.reserve(lists.iter().map(|(l, _)| l.len()).sum());
    for (l, (list, w)) in lists.iter().enumerate() {
        for (r, &id) in list.iter().enumerate() {
            let (s, last) = score.entry(id).or_insert((0.0, usize::MAX));
            if *last != l {
                *s += w / (k + r as f32 + 1.0);
                *last = l;
            }
        }
    }
    let mut out: Vec<(usize, f32)> = score
        .into_iter()
        .map(|(i, (s, _))| (i as usize, s))
        .collect();
    out.sort_unstable_by_key(|h| h.0);
    out
}

/// Orders turns by the turn model's score, best first, ties by index.
fn by_turn_model(features: &[(usize, Features)]) -> Vec<usize> {
    let mut v: Vec<u64> = features
        .iter()
        .map(|(i, f)| (u64::from(!ordered_bits(turns::score(f))) << 32) | *i as u64)
        .collect();
    v.sort_unstable();
    v.into_iter()
        .map(|key| (key & 0xffff_ffff) as usize)
        .collect()
}

/// Orders scored messages by `score · tokens^exponent`, best first, ties by index.
fn with_length_prior(
    scored: Vec<(usize, f32)>,
    exponent: f32,
    tokens: impl Fn(usize) -> usize,
) -> Vec<usize> {
    // Sorted on one integer: the score's total order inverted, then the index.
    let mut v: Vec<u64> = scored
        .into_iter()
        .map(|(i, s)| {
            let s = s * (tokens(i).max(1) as f32).powf(exponent);
            (u64::from(!ordered_bits(s)) << 32) | i as u64
        })
        .collect();
    v.sort_unstable();
    v.into_iter()
        .map(|key| (key & 0xffff_ffff) as usize)
        .collect()
}

fn ranks(hits: &[(u32, f32)]) -> Vec<u32> {
    hits.iter().map(|h| h.0).collect()
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

fn words_for(n: usize) -> usize {
    n.div_ceil(64).max(1)
}

fn bits(ids: impl IntoIterator<Item = usize>, words: usize) -> Vec<u64> {
    let mut out = vec![0u64; words];
    for i in ids {
        if i / 64 < words {
            out[i / 64] |= 1 << (i % 64);
        }
    }
    out
}

/// A level's dense and BM25 rankings (item indices, best first).
type Lists = (Vec<u32>, Vec<u32>);

/// A level's dense and BM25 hits (item index and score, best first).
type ScoredLists = (Vec<Hit>, Vec<Hit>);

/// The trajectories' dense and BM25 hits, each when a search scores it before routing.
type TrajectoryHits = (Option<Vec<Hit>>, Option<Vec<Hit>>);

/// The rankings of a structured search that depend on the question alone (see `Index::scans`).
struct Scans {
    /// Pages: dense and BM25 ranks, when the mode routes through the wiki.
    pages: Option<Lists>,
    /// Trajectories' dense scores, best first, cut at the depth: on the direct path (else they
    /// are scored after routing, over the trajectories the pages reach).
    trajectories: Option<Vec<Hit>>,
    /// Trajectories' BM25 hits, when every trajectory is a candidate (routing through pages,
    /// they are scored among the routed universe instead: [`Index::bm25_among`]).
    traj_bm25: Option<Vec<Hit>>,
    /// Snapshots: dense and BM25 ranks over all of them (also when routing through pages: a
    /// routed snapshot's rank among all snapshots is what fusion weighs; ranked among the
    /// routed universe alone, held-out coverage fell, see BENCHMARKS.md).
    snapshots: Lists,
    /// Messages: dense and BM25 hits (message, score), on the direct path.
    messages: Option<ScoredLists>,
}

impl Index {
    fn dense(
        &self,
        level: &Rows,
        q: &[f32],
        k: usize,
        backend: &dyn ScoringBackend,
    ) -> Result<Vec<(u32, f32)>, IndexError> {
        if level.len() == 0 {
            return Ok(Vec::new());
        }
        let m = level.view()?;
        Ok(level
            .kept
            .cosine_topk(&m, q, k, backend)?
            .into_iter()
            .next()
            .unwrap_or_default())
    }

    /// Reciprocal rank fusion of one query's rankings, on the backend.
    fn fuse(
        &self,
        lists: &[&[u32]],
        k_const: f32,
        backend: &dyn ScoringBackend,
    ) -> Result<Vec<(u32, f32)>, IndexError> {
        Ok(backend
            .rrf_batch(&[lists], k_const)?
            .into_iter()
            .next()
            .unwrap_or_default())
    }

    /// The query's terms in the order a BM25 sum adds them: the order of their text, not of
    /// their ids (a term's id depends on when the index met it, and a sum's value on the order
    /// of its terms).
    fn bm25_order(&self, q_terms: &[u32]) -> Vec<u32> {
        let mut q_terms = q_terms.to_vec();
        q_terms.sort_unstable_by(|&a, &b| self.term(a).cmp(self.term(b)));
        q_terms
    }

    /// BM25 top-`k` of one query among the documents `docs` of `index`: scored and ordered as
    /// [`Index::bm25`] scores them, the others left out.
    fn bm25_among(
        &self,
        index: &Bm25Index,
        q_terms: &[u32],
        docs: &[u32],
        k: usize,
    ) -> Result<Vec<Hit>, IndexError> {
        Ok(index.topk_among(&self.bm25_order(q_terms), docs, k)?)
    }

    /// BM25 top-`k` of one query over `index`, on the backend.
    fn bm25(
        &self,
        index: &Bm25Index,
        q_terms: &[u32],
        k: usize,
        backend: &dyn ScoringBackend,
    ) -> Result<Vec<(u32, f32)>, IndexError> {
        let q_terms = self.bm25_order(q_terms);
        Ok(backend
            .bm25_topk_batch(index, &[&q_terms], k)?
            .into_iter()
            .next()
            .unwrap_or_default())
    }

    /// Ranks the namespace's messages for a question, in the given mode.
    pub fn rank(
        &self,
        question: &str,
        qvec: &[f32],
        mode: Mode,
        config: &RetrievalConfig,
        backend: &dyn ScoringBackend,
    ) -> Result<Ranking, IndexError> {
        self.rank_reranked(question, qvec, mode, config, backend, &|_, _| None)
    }

    /// [`Index::rank`] with the routed pages and the selected trajectories put in the order
    /// `rerank` gives: it gets the pages' routing texts, then the trajectories' summaries, each
    /// in the fused order, and returns positions into them, best first (the ones it leaves out
    /// follow in the fused order), or `None` to keep the fused order. Positions out of range or
    /// repeated are ignored. The pages' order is the route's: a trajectory takes the rank of the
    /// best page that links it. Structured modes only; the baselines route and select nothing.
    pub fn rank_reranked(
        &self,
        question: &str,
        qvec: &[f32],
        mode: Mode,
        config: &RetrievalConfig,
        backend: &dyn ScoringBackend,
        rerank: &Rerank<'_>,
    ) -> Result<Ranking, IndexError> {
        let mut timings = BTreeMap::new();
        let t0 = Instant::now();
        let q_terms = self.query_terms(question);
        let q_entities = self.query_entities(question);
        let shape = analyse(question, &q_entities);
        timings.insert("analyse".into(), ms(t0));
        let n_msgs = self.records.messages.len();
        let mut ranking = Ranking {
            mode,
            shape: shape.clone(),
            messages: vec![],
            pages: vec![],
            trajectories: vec![],
            snapshots: vec![],
            candidate_universe: 0,
            candidates: Candidates::default(),
            timings: BTreeMap::new(),
            turn_features: Vec::new(),
        };
        // Baselines rank every message, so that a large budget is never starved by the depth.
        let depth = n_msgs;
        let t0 = Instant::now();
        let msg_dense = || self.vectors.messages.topk(qvec, depth, backend);
        let msg_sparse = || self.bm25(&self.msg_bm25, &q_terms, depth, backend);
        match mode {
            Mode::TurnBm25 => {
                ranking.messages = ranks(&msg_sparse()?)
                    .into_iter()
                    .map(|i| i as usize)
                    .collect()
            }
            Mode::TurnDense => {
                ranking.messages = ranks(&msg_dense()?)
                    .into_iter()
                    .map(|i| i as usize)
                    .collect()
            }
            Mode::TurnHybrid => {
                let (d, s) = (ranks(&msg_dense()?), ranks(&msg_sparse()?));
                ranking.messages = self
                    .fuse(&[&d, &s], config.rrf_k, backend)?
                    .into_iter()
                    .map(|h| h.0 as usize)
                    .collect();
            }
            Mode::Flat => {
                let docs: Vec<&[u32]> = self.msg_terms.iter().map(Vec::as_slice).collect();
                let mut scored: Vec<(usize, f32)> = backend
                    .jaccard_batch(&[&q_terms], &docs)?
                    .into_iter()
                    .next()
                    .unwrap_or_default()
                    .into_iter()
                    .enumerate()
                    .filter(|(_, s)| *s > 0.0)
                    .collect();
                scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                ranking.messages = scored.into_iter().map(|(i, _)| i).collect();
            }
            Mode::SessionDense => {
                // A session's vector is the centroid of its messages'.
                let mut sessions: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
                for (i, s) in self.session_of.iter().enumerate() {
                    sessions.entry(*s).or_default().push(i);
                }
                let mut scored: Vec<(u32, f32)> = sessions
                    .iter()
                    .map(|(s, members)| {
                        let rows: Vec<Vec<f32>> = members
                            .iter()
                            .map(|&m| self.vectors.messages.row(m))
                            .collect();
                        let c = centroid(rows.iter().map(Vec::as_slice), self.dim);
                        (*s, c.iter().zip(qvec).map(|(a, b)| a * b).sum::<f32>())
                    })
                    .collect();
                scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                ranking.messages = scored
                    .iter()
                    .flat_map(|(s, _)| sessions[s].iter().copied())
                    .collect();
            }
            Mode::Full | Mode::NoWiki | Mode::WikiOnly | Mode::LatestSnapshot => {
                self.rank_structured(
                    &mut ranking,
                    question,
                    qvec,
                    &q_terms,
                    &q_entities,
                    config,
                    backend,
                    rerank,
                    &mut timings,
                )?;
            }
        }
        if !matches!(
            mode,
            Mode::Full | Mode::NoWiki | Mode::WikiOnly | Mode::LatestSnapshot
        ) {
            ranking.candidates.messages = n_msgs;
        }
        timings.insert("rank".into(), ms(t0));
        ranking.timings = timings;
        Ok(ranking)
    }

    #[allow(clippy::too_many_arguments)]
    fn rank_structured(
        &self,
        ranking: &mut Ranking,
        question: &str,
        qvec: &[f32],
        q_terms: &[u32],
        q_entities: &BTreeSet<String>,
        config: &RetrievalConfig,
        backend: &dyn ScoringBackend,
        rerank: &Rerank<'_>,
        timings: &mut BTreeMap<String, f64>,
    ) -> Result<(), IndexError> {
        let mode = ranking.mode;
        let n_traj = self.records.trajectories.len();
        let use_wiki = matches!(mode, Mode::Full | Mode::WikiOnly | Mode::LatestSnapshot);
        let direct = matches!(mode, Mode::Full | Mode::NoWiki | Mode::LatestSnapshot);

        // 0. The rankings that depend on the question alone — each level's dense and BM25 lists,
        //    the trajectories' dense scores — computed at once, in parallel.
        let t0 = Instant::now();
        let scans = self.scans(qvec, q_terms, q_entities, use_wiki, direct, config, backend)?;
        timings.insert("scan".into(), ms(t0));

        // 1. Page routing: dense + sparse, RRF, top t; the index page is never routed to. Each
        //    routed page adds its `route_per_page` members nearest the question (by the
        //    trajectories' dense score) to the candidate universe; the structured levels are
        //    scored inside it. The direct routes over raw turns stay beside it as the safety net.
        let t0 = Instant::now();
        let mut universe: BTreeMap<usize, usize> = BTreeMap::new(); // trajectory → best page rank
        let mut routed_pages: Vec<u32> = Vec::new();
        if let Some((d, s)) = &scans.pages {
            let fused = self.fuse(&[d.as_slice(), s.as_slice()], config.rrf_k, backend)?;
            let top: Vec<(u32, f32)> = fused.into_iter().take(config.pages).collect();
            let texts: Vec<&str> = top
                .iter()
                .map(|(p, _)| {
                    self.records.pages[self.pages[*p as usize]]
                        .routing_text
                        .as_str()
                })
                .collect();
            let top = match rerank(Reranked::Pages, &texts) {
                Some(order) => reordered(&top, &order),
                None => top,
            };
            for (p, score) in &top {
                let page = &self.records.pages[self.pages[*p as usize]];
                ranking.pages.push(crate::retrieve::PathItem {
                    id: page.id.to_string(),
                    label: page.title.clone(),
                    score: *score,
                });
                routed_pages.push(*p);
            }
        }
        // The trajectories the routed pages link, each scored once; a page adds its
        // `route_per_page` best (by score, then position: their order in a ranking of all the
        // linked ones, which is not made — a speaker's page links most of the history).
        let linked: Vec<usize> = {
            let mut all: Vec<usize> = routed_pages
                .iter()
                .flat_map(|&p| self.page_trajs[p as usize].iter().copied())
                .collect();
            all.sort_unstable();
            all.dedup();
            all
        };
        let scores = if use_wiki {
            self.trajectory_scores(&linked, qvec, q_entities)
        } else {
            Vec::new()
        };
        let linked_hit = |t: usize| -> Hit { (t as u32, scores[t]) };
        for (rank, &p) in routed_pages.iter().enumerate() {
            let members = &self.page_trajs[p as usize];
            for t in best_members(members, config.route_per_page.max(1), linked_hit) {
                universe.entry(t).or_insert(rank);
            }
        }
        // Full mode scores its structured levels inside the routed universe; no-wiki (or a
        // namespace without pages) ranks every trajectory directly.
        let everything = self.scores_everything(use_wiki);
        ranking.candidate_universe = if everything { n_traj } else { universe.len() };
        ranking.candidates = Candidates {
            pages: if use_wiki { self.pages.len() } else { 0 },
            trajectories: ranking.candidate_universe,
            snapshots: if everything {
                self.records.snapshots.len()
            } else {
                // Every snapshot's trajectory looked up: in a bitmap, not the universe's tree
                // (12,049 tree lookups took 0.1–0.2 ms of a search at 23,528 messages).
                let mut routed = vec![false; n_traj];
                for &t in universe.keys() {
                    routed[t] = true;
                }
                self.snap_traj.iter().filter(|&&t| routed[t]).count()
            },
            messages: if direct {
                self.records.messages.len()
            } else {
                0
            },
        };
        timings.insert("route".into(), ms(t0));

        // 2. Trajectory scoring: dense = 0.75 cos(q, summary) + 0.15 cos(q, latest snapshot)
        //    + 0.10 entity bonus; sparse = BM25; fused by RRF with the page route.
        let t0 = Instant::now();
        let dense: Vec<Hit> = match scans.trajectories {
            Some(dense) => dense,
            None => {
                let mut hits: Vec<Hit> = universe.keys().map(|&t| linked_hit(t)).collect();
                sort_hits(&mut hits);
                hits.truncate(config.depth);
                hits
            }
        };
        let sparse: Vec<u32> = match scans.traj_bm25 {
            Some(hits) => hits.into_iter().map(|h| h.0).collect(),
            None => {
                let among: Vec<u32> = universe.keys().map(|&t| t as u32).collect();
                self.bm25_among(&self.traj_bm25, q_terms, &among, config.depth)?
                    .into_iter()
                    .map(|h| h.0)
                    .collect()
            }
        };
        let d = ranks(&dense);
        // The routed trajectories by their best page's rank, those of one page by their dense
        // rank (then position), not by when they were made.
        let dense_rank: FxHashMap<u32, usize> =
            d.iter().enumerate().map(|(i, &t)| (t, i)).collect();
        let mut routed: Vec<(usize, usize)> = universe.iter().map(|(t, r)| (*t, *r)).collect();
        routed.sort_by_key(|&(t, r)| {
            let dr = dense_rank.get(&(t as u32)).copied().unwrap_or(usize::MAX);
            (r, dr, t)
        });
        let routed: Vec<u32> = routed.into_iter().map(|(t, _)| t as u32).collect();
        let lists: Vec<&[u32]> = if use_wiki {
            vec![&d, &sparse, &routed]
        } else {
            vec![&d, &sparse]
        };
        let fused = self.fuse(&lists, config.rrf_k, backend)?;
        timings.insert("score".into(), ms(t0));

        // 3. Selection of k: coverage-aware for list/count/comparison/multi-entity queries.
        let t0 = Instant::now();
        let k = config.trajectories;
        let selected: Vec<u32> = if ranking.shape.wants_coverage() && fused.len() > 1 {
            self.coverage(&fused, q_entities, q_terms, &ranking.shape, config, backend)?
        } else {
            fused.iter().take(k).map(|h| h.0).collect()
        };
        let selected = {
            let summaries: Vec<&str> = selected
                .iter()
                .map(|&t| self.records.trajectories[t as usize].summary.as_str())
                .collect();
            match rerank(Reranked::Trajectories, &summaries) {
                Some(order) => reordered(&selected, &order),
                None => selected,
            }
        };
        let fused_score: BTreeMap<u32, f32> = fused.iter().copied().collect();
        for &t in &selected {
            let tr = &self.records.trajectories[t as usize];
            ranking.trajectories.push(PathItem {
                id: tr.id.to_string(),
                label: tr.summary.lines().next().unwrap_or("").to_string(),
                score: fused_score.get(&t).copied().unwrap_or(0.0),
            });
        }
        timings.insert("select".into(), ms(t0));

        // 4. Evidence: the best snapshot of each selected trajectory, then snapshots by global
        //    similarity up to 2k, then neighbours and update-linked snapshots.
        let t0 = Instant::now();
        let (snap_d, snap_s) = &scans.snapshots;
        let snap_fused = self.fuse(
            &[snap_d.as_slice(), snap_s.as_slice()],
            config.rrf_k,
            backend,
        )?;
        let snap_rank: BTreeMap<u32, usize> = snap_fused
            .iter()
            .enumerate()
            .map(|(r, h)| (h.0, r))
            .collect();
        let best_of = |t: usize| -> usize {
            *self.traj_snaps[t]
                .iter()
                .min_by_key(|s| {
                    (
                        snap_rank.get(&(**s as u32)).copied().unwrap_or(usize::MAX),
                        **s,
                    )
                })
                .expect("a trajectory has a snapshot")
        };
        let mut seeds: Vec<usize> = Vec::new();
        let push = |s: usize, seeds: &mut Vec<usize>| {
            if !seeds.contains(&s) {
                seeds.push(s);
            }
        };
        if mode == Mode::LatestSnapshot {
            for &t in &selected {
                push(
                    *self.traj_snaps[t as usize].last().expect("non-empty"),
                    &mut seeds,
                );
            }
        } else {
            for &t in &selected {
                push(best_of(t as usize), &mut seeds);
            }
            let selected_set: BTreeSet<usize> = selected.iter().map(|&t| t as usize).collect();
            for h in &snap_fused {
                if seeds.len() >= 2 * k {
                    break;
                }
                let s = h.0 as usize;
                if everything
                    || selected_set.contains(&self.snap_traj[s])
                    || universe.contains_key(&self.snap_traj[s])
                {
                    push(s, &mut seeds);
                }
            }
            let core = seeds.clone();
            for &s in &core {
                let t = self.snap_traj[s];
                let pos = self.traj_snaps[t]
                    .iter()
                    .position(|x| *x == s)
                    .expect("member");
                let lo = pos.saturating_sub(config.neighbour_radius);
                let hi = (pos + config.neighbour_radius).min(self.traj_snaps[t].len() - 1);
                for p in lo..=hi {
                    push(self.traj_snaps[t][p], &mut seeds);
                }
                for &u in &self.update_links[s] {
                    push(u, &mut seeds);
                }
            }
        }
        for &s in &seeds {
            let snap = &self.records.snapshots[s];
            ranking.snapshots.push(PathItem {
                id: snap.id.to_string(),
                label: snap.summary.clone(),
                score: snap_fused
                    .iter()
                    .find(|h| h.0 as usize == s)
                    .map_or(0.0, |h| h.1),
            });
        }
        timings.insert("expand".into(), ms(t0));

        // 5. Messages: the evidence route, fused with the direct message routes (dense and BM25
        //    over raw turns) — the raw-message safety net.
        let t0 = Instant::now();
        let evidence: Vec<u32> = seeds
            .iter()
            .flat_map(|&s| self.snap_msgs[s].iter().map(|&m| m as u32))
            .collect();
        if !direct {
            ranking.candidates.messages = evidence.len();
        }
        ranking.messages = if let Some((md_hits, msp_hits)) = scans.messages {
            let (md, msp) = (ranks(&md_hits), ranks(&msp_hits));
            // The turns next to the best direct hits: an answer often sits beside the turn that
            // matches the question's words (a question and its reply).
            let direct_hits = self.fuse(&[&md, &msp], config.rrf_k, backend)?;
            let mut beside: Vec<u32> = Vec::new();
            for h in direct_hits.iter().take(config.neighbour_seeds) {
                let m = h.0 as usize;
                for n in [m.wrapping_sub(1), m + 1] {
                    if n < self.session_of.len()
                        && self.session_of[n] == self.session_of[m]
                        && !beside.contains(&(n as u32))
                    {
                        beside.push(n as u32);
                    }
                }
            }
            // The speakers the question names, when it names some but not all of them.
            let named: BTreeSet<&String> = q_entities
                .iter()
                .filter(|e| self.lexicon.speakers.contains(*e))
                .collect();
            let own = |list: &[u32]| -> Vec<u32> {
                if named.is_empty() || named.len() == self.lexicon.speakers.len() {
                    return Vec::new();
                }
                list.iter()
                    .copied()
                    .filter(|&m| named.contains(&self.speaker_of[m as usize]))
                    .collect()
            };
            let (md_own, msp_own) = (own(&md), own(&msp));
            let family = ranking
                .shape
                .family
                .as_deref()
                .and_then(|f| ITEM_FAMILIES.iter().position(|(name, _)| *name == f))
                .filter(|_| ranking.shape.list || ranking.shape.count);
            let family_route: Vec<u32> = match family {
                Some(f) => {
                    let base = if md_own.is_empty() { &md } else { &md_own };
                    base.iter()
                        .copied()
                        .filter(|&m| self.families_of[m as usize] & (1 << f) != 0)
                        .collect()
                }
                None => Vec::new(),
            };
            let lists: [(&[u32], f32); 7] = [
                (&md, 1.0),
                (&msp, 1.0),
                (&evidence, config.evidence_weight),
                (&beside, config.neighbour_weight),
                (&md_own, config.speaker_weight),
                (&msp_own, config.speaker_weight),
                (&family_route, config.family_weight),
            ];
            let features = (config.turn_model || config.turn_features).then(|| {
                let routes = Routes {
                    dense: &md_hits,
                    bm25: &msp_hits,
                    lists: [&evidence, &beside, &md_own, &msp_own, &family_route],
                    snapshot_rank: &snap_fused
                        .iter()
                        .enumerate()
                        .map(|(r, h)| (h.0, r))
                        .collect(),
                    rrf_k: config.rrf_k,
                };
                let some_named = !named.is_empty() && named.len() < self.lexicon.speakers.len();
                self.turn_features(&routes, some_named, &named)
            });
            let order = match &features {
                Some(features) if config.turn_model => by_turn_model(features),
                _ => self.by_fusion(&lists, config),
            };
            if config.turn_features {
                ranking.turn_features = features.unwrap_or_default();
            }
            order
        } else {
            evidence.into_iter().map(|m| m as usize).collect()
        };
        let _ = question;
        timings.insert("messages".into(), ms(t0));
        Ok(())
    }

    /// Turns by the weighted RRF of the routes' lists times the length prior (the order before
    /// the turn model): short turns ("Thanks!", "Sounds fun!") match a question's words as
    /// easily as informative ones but rarely hold its answer.
    fn by_fusion(&self, lists: &[(&[u32], f32)], config: &RetrievalConfig) -> Vec<usize> {
        with_length_prior(
            weighted_rrf(lists, config.rrf_k),
            config.length_prior,
            |i| self.line(i).1,
        )
    }

    /// Every turn some route found, in index order, with its features.
    fn turn_features(
        &self,
        routes: &Routes<'_>,
        some_named: bool,
        named: &BTreeSet<&String>,
    ) -> Vec<(usize, Features)> {
        let lookups = Lookups::new(routes, |m| self.session_of[m]);
        // Each turn's features are its own: computed in parallel.
        lookups
            .candidates()
            .into_par_iter()
            .map(|m| {
                let turn = self.turn(m, some_named, named);
                (m, lookups.features(routes, m, &turn))
            })
            .collect()
    }

    /// Turn `m` as the turn model reads it.
    fn turn(&self, m: usize, some_named: bool, named: &BTreeSet<&String>) -> Turn<'_> {
        let msg = &self.records.messages[m];
        let tokens = self.line(m).1;
        let beside = |n: usize| {
            (n < self.session_of.len() && self.session_of[n] == self.session_of[m]).then_some(n)
        };
        let own = named.contains(&self.speaker_of[m]);
        Turn {
            tokens,
            question: msg.text.trim_end().ends_with('?'),
            caption: msg.attachments.iter().any(|a| a.caption.is_some()),
            claims: self.msg_claims[m].len(),
            own_speaker: some_named && own,
            other_speaker: some_named && !own,
            snapshots: &self.msg_snaps[m],
            neighbours: [m.checked_sub(1).and_then(beside), beside(m + 1)],
            second: [m.checked_sub(2).and_then(beside), beside(m + 2)],
            session: self.session_of[m],
        }
    }

    /// Whether a search scores every trajectory and snapshot: without routing through the wiki,
    /// or in a namespace without pages (else only the routed universe is scored).
    fn scores_everything(&self, use_wiki: bool) -> bool {
        !use_wiki || self.pages.is_empty()
    }

    /// The rankings of a structured search that depend on the question alone, computed at once:
    /// each level's dense and BM25 lists side by side, the levels themselves in parallel. The
    /// lists are those each stage would compute in turn.
    #[allow(clippy::too_many_arguments)]
    fn scans(
        &self,
        qvec: &[f32],
        q_terms: &[u32],
        q_entities: &BTreeSet<String>,
        use_wiki: bool,
        direct: bool,
        config: &RetrievalConfig,
        backend: &dyn ScoringBackend,
    ) -> Result<Scans, IndexError> {
        let n_traj = self.records.trajectories.len();
        let with_messages = direct;
        // A level's dense and BM25 hits, side by side.
        let both = |dense: &(dyn Fn() -> Result<Vec<Hit>, IndexError> + Sync),
                    sparse: &Bm25Index,
                    depth: usize|
         -> Result<ScoredLists, IndexError> {
            let (d, s) = rayon::join(dense, || self.bm25(sparse, q_terms, depth, backend));
            Ok((d?, s?))
        };
        let ranked = |(d, s): ScoredLists| -> Lists { (ranks(&d), ranks(&s)) };
        let pages = || -> Result<Option<Lists>, IndexError> {
            if !use_wiki || self.pages.is_empty() {
                return Ok(None);
            }
            let depth = self.pages.len().min(config.depth);
            let dense = || self.dense(&self.vectors.pages, qvec, depth, backend);
            both(&dense, &self.page_bm25, depth).map(|hits| Some(ranked(hits)))
        };
        // Routing through pages, the trajectories are scored inside the routed universe, after
        // routing; else every trajectory is a candidate, ranked here.
        let everything = self.scores_everything(use_wiki);
        let direct = direct && everything;
        let trajectories = || -> Result<TrajectoryHits, IndexError> {
            if !everything {
                return Ok((None, None));
            }
            let bm25_depth = if direct {
                config.depth.min(n_traj)
            } else {
                n_traj
            };
            let (dense, sparse) = rayon::join(
                || direct.then(|| self.trajectory_dense(qvec, q_entities, config.depth)),
                || self.bm25(&self.traj_bm25, q_terms, bm25_depth, backend),
            );
            Ok((dense, Some(sparse?)))
        };
        let snapshots = || -> Result<Lists, IndexError> {
            let depth = self.records.snapshots.len().min(config.depth);
            let dense = || self.dense(&self.vectors.snapshots, qvec, depth, backend);
            both(&dense, &self.snap_bm25, depth).map(ranked)
        };
        let messages = || -> Result<Option<ScoredLists>, IndexError> {
            if !with_messages {
                return Ok(None);
            }
            let depth = config.direct_depth.min(self.records.messages.len());
            let dense = || self.vectors.messages.topk(qvec, depth, backend);
            both(&dense, &self.msg_bm25, depth).map(Some)
        };
        let ((pages, trajectories), (snapshots, messages)) = rayon::join(
            || rayon::join(pages, trajectories),
            || rayon::join(snapshots, messages),
        );
        let (trajectories, traj_bm25) = trajectories?;
        Ok(Scans {
            pages: pages?,
            trajectories,
            traj_bm25,
            snapshots: snapshots?,
            messages: messages?,
        })
    }

    /// The dense score of each trajectory of `pool` ([`Index::trajectory_score`]), at
    /// its position in a list of every trajectory's (0 for those not in `pool`).
    fn trajectory_scores(
        &self,
        pool: &[usize],
        qvec: &[f32],
        q_entities: &BTreeSet<String>,
    ) -> Vec<f32> {
        let (score, _) = self.trajectory_score(qvec, q_entities);
        let scored: Vec<f32> = pool.par_iter().map(|&t| score(t).1).collect();
        let mut all = vec![0f32; self.records.trajectories.len()];
        for (&t, s) in pool.iter().zip(scored) {
            all[t] = s;
        }
        all
    }

    /// Each trajectory's dense score, as a function of its position: 0.75 cos(q, centroid) +
    /// 0.15 cos(q, latest snapshot) — one dot product with the trajectory's row, which holds
    /// that sum of vectors — + 0.10 when the trajectory names an entity of the question that is
    /// not a speaker. The bonus comes apart as the second function, for bounds.
    fn trajectory_score<'a>(
        &'a self,
        qvec: &'a [f32],
        q_entities: &BTreeSet<String>,
    ) -> (
        impl Fn(usize) -> Hit + Sync + 'a,
        impl Fn(usize) -> f32 + Sync + 'a,
    ) {
        let tv = &self.vectors.trajectories;
        // The trajectories that name an entity of the question that is not a speaker.
        let mut named: Vec<u32> = q_entities
            .iter()
            .filter(|e| !self.lexicon.speakers.contains(*e))
            .filter_map(|e| self.entity_trajectories.get(e.as_str()))
            .flatten()
            .copied()
            .collect();
        named.sort_unstable();
        named.dedup();
        let bonus = move |t: usize| -> f32 {
            if named.binary_search(&(t as u32)).is_ok() {
                0.10
            } else {
                0.0
            }
        };
        let with_bonus = bonus.clone();
        let score = move |t: usize| -> Hit {
            let dim = qvec.len();
            let row = &tv.data[t * dim..(t + 1) * dim];
            (
                t as u32,
                trajwiki_compute::topk::dot_f16(row, qvec) + with_bonus(t),
            )
        };
        (score, bonus)
    }

    /// The dense scores of every trajectory ([`Index::trajectory_score`]), best first, cut at
    /// `depth`.
    fn trajectory_dense(
        &self,
        qvec: &[f32],
        q_entities: &BTreeSet<String>,
        depth: usize,
    ) -> Vec<Hit> {
        let tv = &self.vectors.trajectories;
        let (score, bonus) = self.trajectory_score(qvec, q_entities);
        // Each trajectory's score is its own: scored in parallel, the same hits in any order.
        match tv.sketch().filter(|_| sketch_pays(tv.len(), depth)) {
            // Bounded by the sketch, the bonus added to both bounds (rounding is monotonic).
            Some(sketch) => {
                let coded = SketchQuery::new(qvec);
                let bounds = |start: usize, out: &mut [(f32, f32)]| {
                    sketch.bounds_into(start, &coded, out);
                    for (t, (lo, hi)) in (start..).zip(out.iter_mut()) {
                        (*lo, *hi) = (*lo + bonus(t), *hi + bonus(t));
                    }
                };
                par_topk_bounded(tv.len(), depth, bounds, |_| {}, score)
            }
            None => par_topk(tv.len(), depth, score),
        }
    }

    fn coverage(
        &self,
        fused: &[(u32, f32)],
        q_entities: &BTreeSet<String>,
        q_terms: &[u32],
        shape: &Shape,
        config: &RetrievalConfig,
        backend: &dyn ScoringBackend,
    ) -> Result<Vec<u32>, IndexError> {
        // Feature spaces local to this query: entities, facets, items, terms, each a bit index.
        let cands: Vec<usize> = fused
            .iter()
            .take(config.trajectories * 4)
            .map(|h| h.0 as usize)
            .collect();
        let mut ent: BTreeMap<&str, usize> = BTreeMap::new();
        let mut fac: BTreeMap<String, usize> = BTreeMap::new();
        let mut itm: BTreeMap<&str, usize> = BTreeMap::new();
        let mut trm: BTreeMap<u32, usize> = BTreeMap::new();
        let q_term_set: BTreeSet<u32> = q_terms.iter().copied().collect();
        let mut feats = Vec::with_capacity(cands.len());
        for &t in &cands {
            let tr = &self.records.trajectories[t];
            let e: Vec<usize> = tr
                .signals
                .entities
                .iter()
                .map(|x| {
                    let l = ent.len();
                    *ent.entry(x.as_str()).or_insert(l)
                })
                .collect();
            let f: Vec<usize> = tr
                .signals
                .facets
                .iter()
                .map(|x| {
                    let l = fac.len();
                    *fac.entry(format!("{}={}", x.tag, x.value)).or_insert(l)
                })
                .collect();
            let i: Vec<usize> = tr
                .signals
                .terms
                .iter()
                .map(|x| {
                    let l = itm.len();
                    *itm.entry(x.as_str()).or_insert(l)
                })
                .collect();
            let terms: Vec<usize> = self.traj_terms[t]
                .iter()
                .copied()
                .filter(|x| q_term_set.contains(x))
                .map(|x| {
                    let l = trm.len();
                    *trm.entry(x).or_insert(l)
                })
                .collect();
            feats.push((e, f, i, terms));
        }
        let q_ent: Vec<usize> = q_entities
            .iter()
            .filter_map(|e| ent.get(e.as_str()).copied())
            .collect();
        let q_trm: Vec<usize> = q_terms.iter().filter_map(|t| trm.get(t).copied()).collect();
        let words = SetWords {
            entities: words_for(ent.len()),
            facets: words_for(fac.len()),
            items: words_for(itm.len()),
            terms: words_for(trm.len()),
        };
        let family = shape.family.as_deref();
        let bitsets: Vec<[Vec<u64>; 4]> = feats
            .iter()
            .map(|(e, f, i, t)| {
                [
                    bits(e.iter().copied(), words.entities),
                    bits(f.iter().copied(), words.facets),
                    bits(i.iter().copied(), words.items),
                    bits(t.iter().copied(), words.terms),
                ]
            })
            .collect();
        let candidates: Vec<Candidate<'_>> = cands
            .iter()
            .zip(&bitsets)
            .map(|(&t, b)| {
                let tr = &self.records.trajectories[t];
                let fam_items = family.map_or(0, |f| {
                    tr.signals
                        .terms
                        .iter()
                        .filter(|x| trajwiki_text::lexicon::item_family(x) == Some(f))
                        .count()
                });
                Candidate {
                    entities: &b[0],
                    facets: &b[1],
                    items: &b[2],
                    terms: &b[3],
                    cluster: NO_CLUSTER,
                    inventory: tr.signals.terms.len() >= 3,
                    has_counts: tr
                        .signals
                        .terms
                        .iter()
                        .any(|x| x.starts_with(|c: char| c.is_ascii_digit())),
                    family_score: (fam_items as f32 / 3.0).min(1.0),
                    family_mismatch: false,
                }
            })
            .collect();
        let q_bits = [
            bits(q_ent, words.entities),
            bits(std::iter::empty(), words.facets),
            bits(q_trm, words.terms),
        ];
        let mut batch = SelectionBatch::new(words);
        batch.push_query(
            &QueryWants {
                entities: &q_bits[0],
                facets: &q_bits[1],
                terms: &q_bits[2],
                list: shape.list,
                count: shape.count,
                family: shape.family.is_some(),
            },
            &candidates,
        )?;
        let picks = backend.coverage_select(&batch, &config.coverage, config.trajectories)?;
        Ok(picks
            .into_iter()
            .next()
            .unwrap_or_default()
            .into_iter()
            .map(|i| cands[i as usize] as u32)
            .collect())
    }
}

/// The `k` best of `members` by their hits' order ([`sort_hits`]: score, then position), best
/// first — the first `k` of `members` sorted so (a member listed twice counts twice) — without
/// sorting them.
fn best_members(members: &[usize], k: usize, hit: impl Fn(usize) -> Hit) -> Vec<usize> {
    let mut best: Vec<u64> = Vec::with_capacity(k + 1);
    for &t in members {
        let key = order_key(&hit(t));
        if best.len() < k || best.last().is_some_and(|&worst| key < worst) {
            let at = best.partition_point(|&b| b <= key);
            best.insert(at, key);
            best.truncate(k);
        }
    }
    best.into_iter()
        .map(|key| (key & u64::from(u32::MAX)) as usize)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rerank_order_skips_what_is_out_of_range_or_repeated() {
        assert_eq!(
            reordered(&[10, 11, 12, 13], &[2, 9, 2, 0]),
            [12, 10, 11, 13]
        );
        assert_eq!(reordered(&[10, 11], &[]), [10, 11]);
    }

    #[test]
    fn a_pages_best_members_are_the_first_of_them_sorted_by_their_hits() {
        // Scores with ties, a negative zero, a NaN; members listed out of order and twice.
        let scores = [0.5, 0.9, 0.5, -0.0, 0.0, f32::NAN, 0.9, 0.1];
        let hit = |t: usize| -> Hit { (t as u32, scores[t]) };
        let members = [7, 2, 0, 6, 1, 4, 3, 5, 2, 1];
        for k in 1..=members.len() + 1 {
            let mut sorted: Vec<usize> = members.to_vec();
            sorted.sort_by_key(|&t| order_key(&hit(t)));
            sorted.truncate(k);
            assert_eq!(best_members(&members, k, hit), sorted, "k = {k}");
        }
        assert!(best_members(&[], 4, hit).is_empty());
    }

    #[test]
    fn weighted_rrf_sums_weighted_reciprocal_ranks_once_per_list() {
        let a: &[u32] = &[3, 1, 3];
        let b: &[u32] = &[1];
        let got = weighted_rrf(&[(a, 1.0), (b, 2.0)], 60.0);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0], (1, 1.0 / 62.0 + 2.0 / 61.0));
        assert_eq!(got[1], (3, 1.0 / 61.0));
    }

    #[test]
    fn length_prior_lets_a_longer_turn_overtake_a_short_one() {
        // Message 0: "Thanks!" (1 token) scored 1.0; message 1: 16 tokens scored 0.3.
        let scored = vec![(0, 1.0), (1, 0.3), (2, 0.3)];
        let len = |i: usize| [1, 16, 16][i];
        assert_eq!(with_length_prior(scored.clone(), 0.0, len), vec![0, 1, 2]);
        // 0.3 · 16^0.5 = 1.2 > 1.0; equal scores keep index order.
        assert_eq!(with_length_prior(scored, 0.5, len), vec![1, 2, 0]);
    }
}
