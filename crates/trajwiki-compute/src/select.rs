//! Batched greedy coverage/redundancy selection (SPEC §3.4, §7 "Coverage selection objective").
//!
//! Per query, candidates come in rank order (index 0 is the best-ranked). Each carries feature
//! sets as bitsets — entities, facets, items, terms — a cluster id and a few flags; the query
//! carries the entities, facets and terms it wants. The anchor is the best-ranked candidate
//! (switched to the best family match when the query names an item family and the anchor's
//! family score is low); every next pick maximises the gain below over the candidates not yet
//! picked, ties going to the lower index. With `E, F, I, T` the candidate's sets, `QE, QF, QT`
//! the query's, and `cE, cF, cI, cT` the unions over the picked candidates:
//!
//! ```text
//! g = (N − i)/N
//!   + w.entity · |E ∩ QE \ cE|          + w.facet · |F ∩ QF \ cF|
//!   + w.item · min(item_cap, |I \ cI|)  + w.term · min(term_cap, |T ∩ QT \ cT|)
//!   + w.inventory·[list ∧ inventory]    + w.count·[count ∧ has_counts]
//!   + w.family · family_score
//!   − (|I \ cI| = 0 ? w.repeated_entity_no_item : w.repeated_entity) · |E ∩ cE|
//!   − w.repeated_term · min(cap, |T ∩ QT ∩ cT|) − w.repeated_item · min(cap, |I ∩ cI|)
//!   − w.cluster·[cluster already picked]  − w.family_mismatch·[family mismatch]
//! ```
//!
//! evaluated in f32 exactly in this order, each product rounded before its sum (the CUDA kernel
//! uses `__fmul_rn`/`__fadd_rn` so that it picks the same candidates).

use rayon::prelude::*;

use crate::ComputeError;

/// The cluster id meaning "no cluster".
pub const NO_CLUSTER: u32 = u32::MAX;

/// Candidate flag: inventory-like (a list of items).
pub const FLAG_INVENTORY: u32 = 1;
/// Candidate flag: has counts.
pub const FLAG_HAS_COUNTS: u32 = 2;
/// Candidate flag: its item family contradicts the query's.
pub const FLAG_FAMILY_MISMATCH: u32 = 4;

/// Query flag: list-like query.
pub const QUERY_LIST: u32 = 1;
/// Query flag: count-like query.
pub const QUERY_COUNT: u32 = 2;
/// Query flag: the query names an item family (enables the anchor switch).
pub const QUERY_FAMILY: u32 = 4;

/// The weights of the objective, SPEC defaults in [`Default`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CoverageWeights {
    /// Per new query entity (0.90).
    pub entity: f32,
    /// Per new query facet value (0.65).
    pub facet: f32,
    /// Per new item, up to `item_cap` (0.30).
    pub item: f32,
    /// Cap on new items (6).
    pub item_cap: u32,
    /// Per new query term, up to `term_cap` (0.12).
    pub term: f32,
    /// Cap on new query terms (4).
    pub term_cap: u32,
    /// List query and inventory-like candidate (0.18).
    pub inventory: f32,
    /// Count query and candidate with counts (0.18).
    pub count: f32,
    /// Times the family score (0.75).
    pub family: f32,
    /// Per repeated entity (0.04).
    pub repeated_entity: f32,
    /// Per repeated entity when the candidate adds no item (0.10).
    pub repeated_entity_no_item: f32,
    /// Per repeated query term, up to `repeated_cap` (0.03).
    pub repeated_term: f32,
    /// Per repeated item, up to `repeated_cap` (0.06).
    pub repeated_item: f32,
    /// Cap on repeated terms and items (6).
    pub repeated_cap: u32,
    /// Candidate's cluster already picked (0.22).
    pub cluster: f32,
    /// Family mismatch (0.35).
    pub family_mismatch: f32,
    /// Family score under which the anchor switches to the best family match (0.5).
    pub anchor_family_low: f32,
}

impl Default for CoverageWeights {
    fn default() -> Self {
        CoverageWeights {
            entity: 0.90,
            facet: 0.65,
            item: 0.30,
            item_cap: 6,
            term: 0.12,
            term_cap: 4,
            inventory: 0.18,
            count: 0.18,
            family: 0.75,
            repeated_entity: 0.04,
            repeated_entity_no_item: 0.10,
            repeated_term: 0.03,
            repeated_item: 0.06,
            repeated_cap: 6,
            cluster: 0.22,
            family_mismatch: 0.35,
            anchor_family_low: 0.5,
        }
    }
}

impl CoverageWeights {
    /// Rejects non-finite weights.
    pub fn validate(&self) -> Result<(), ComputeError> {
        let named = [
            ("entity", self.entity),
            ("facet", self.facet),
            ("item", self.item),
            ("term", self.term),
            ("inventory", self.inventory),
            ("count", self.count),
            ("family", self.family),
            ("repeated_entity", self.repeated_entity),
            ("repeated_entity_no_item", self.repeated_entity_no_item),
            ("repeated_term", self.repeated_term),
            ("repeated_item", self.repeated_item),
            ("cluster", self.cluster),
            ("family_mismatch", self.family_mismatch),
            ("anchor_family_low", self.anchor_family_low),
        ];
        for (name, v) in named {
            if !v.is_finite() {
                return Err(ComputeError::InvalidParameter {
                    name,
                    value: v as f64,
                    expected: "a finite weight",
                });
            }
        }
        Ok(())
    }

    /// The weights as the 17 f32 values the CUDA kernel reads (caps converted exactly), in
    /// field order.
    pub fn to_array(&self) -> [f32; 17] {
        [
            self.entity,
            self.facet,
            self.item,
            self.item_cap as f32,
            self.term,
            self.term_cap as f32,
            self.inventory,
            self.count,
            self.family,
            self.repeated_entity,
            self.repeated_entity_no_item,
            self.repeated_term,
            self.repeated_item,
            self.repeated_cap as f32,
            self.cluster,
            self.family_mismatch,
            self.anchor_family_low,
        ]
    }
}

/// How many 64-bit words each feature set has in a batch (fixed for the batch so that a GPU
/// kernel can index them). A set given with fewer words is padded with zeros.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SetWords {
    /// Entity words.
    pub entities: usize,
    /// Facet words.
    pub facets: usize,
    /// Item words.
    pub items: usize,
    /// Term words.
    pub terms: usize,
}

impl SetWords {
    /// Words per candidate: `entities + facets + items + terms`, stored in that order.
    pub fn candidate(&self) -> usize {
        self.entities + self.facets + self.items + self.terms
    }

    /// Words per query: `entities + facets + terms`, stored in that order.
    pub fn query(&self) -> usize {
        self.entities + self.facets + self.terms
    }
}

/// One candidate's features (borrowed), for [`SelectionBatch::push_query`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Candidate<'a> {
    /// Entity bitset.
    pub entities: &'a [u64],
    /// Facet-value bitset.
    pub facets: &'a [u64],
    /// Item bitset.
    pub items: &'a [u64],
    /// Term bitset.
    pub terms: &'a [u64],
    /// Cluster id, or [`NO_CLUSTER`].
    pub cluster: u32,
    /// Inventory-like.
    pub inventory: bool,
    /// Has counts.
    pub has_counts: bool,
    /// Family score (finite).
    pub family_score: f32,
    /// Family mismatch.
    pub family_mismatch: bool,
}

/// What one query wants (borrowed), for [`SelectionBatch::push_query`].
#[derive(Debug, Clone, Copy, Default)]
pub struct QueryWants<'a> {
    /// Wanted entity bitset.
    pub entities: &'a [u64],
    /// Wanted facet-value bitset.
    pub facets: &'a [u64],
    /// Wanted term bitset.
    pub terms: &'a [u64],
    /// List-like query.
    pub list: bool,
    /// Count-like query.
    pub count: bool,
    /// The query names an item family.
    pub family: bool,
}

/// A batch of selection problems in flat arrays (structure of arrays, CSR over queries), the
/// layout the CUDA kernel reads directly.
#[derive(Debug, Clone, Default)]
pub struct SelectionBatch {
    words: SetWords,
    /// `queries + 1` offsets into the candidate arrays.
    pub(crate) offsets: Vec<u32>,
    pub(crate) cand_bits: Vec<u64>,
    pub(crate) cand_cluster: Vec<u32>,
    pub(crate) cand_flags: Vec<u32>,
    pub(crate) cand_family: Vec<f32>,
    pub(crate) query_bits: Vec<u64>,
    pub(crate) query_flags: Vec<u32>,
}

fn flag(on: bool, bit: u32) -> u32 {
    if on {
        bit
    } else {
        0
    }
}

fn put_words(
    out: &mut Vec<u64>,
    set: &[u64],
    words: usize,
    what: &'static str,
) -> Result<(), ComputeError> {
    if set.len() > words {
        return Err(ComputeError::WrongDimension {
            what,
            expected: words,
            got: set.len(),
        });
    }
    out.extend_from_slice(set);
    out.extend(std::iter::repeat_n(0, words - set.len()));
    Ok(())
}

impl SelectionBatch {
    /// An empty batch whose sets have `words` words.
    pub fn new(words: SetWords) -> Self {
        SelectionBatch {
            words,
            offsets: vec![0],
            ..Default::default()
        }
    }

    /// Appends one query and its candidates in rank order. On error the batch is unchanged.
    pub fn push_query(
        &mut self,
        wants: &QueryWants<'_>,
        candidates: &[Candidate<'_>],
    ) -> Result<(), ComputeError> {
        let w = self.words;
        let total = self.cand_cluster.len() + candidates.len();
        if total > u32::MAX as usize - 1 {
            return Err(ComputeError::IndexOutOfRange {
                what: "candidates in a batch",
                index: total as u64,
                len: u32::MAX as usize - 1,
            });
        }
        let mut qbits = Vec::with_capacity(w.query());
        put_words(&mut qbits, wants.entities, w.entities, "query entity words")?;
        put_words(&mut qbits, wants.facets, w.facets, "query facet words")?;
        put_words(&mut qbits, wants.terms, w.terms, "query term words")?;
        let mut cbits = Vec::with_capacity(w.candidate() * candidates.len());
        for c in candidates {
            put_words(&mut cbits, c.entities, w.entities, "candidate entity words")?;
            put_words(&mut cbits, c.facets, w.facets, "candidate facet words")?;
            put_words(&mut cbits, c.items, w.items, "candidate item words")?;
            put_words(&mut cbits, c.terms, w.terms, "candidate term words")?;
            if !c.family_score.is_finite() {
                return Err(ComputeError::InvalidParameter {
                    name: "family_score",
                    value: c.family_score as f64,
                    expected: "a finite number",
                });
            }
        }
        self.query_bits.extend(qbits);
        self.query_flags.push(
            flag(wants.list, QUERY_LIST)
                | flag(wants.count, QUERY_COUNT)
                | flag(wants.family, QUERY_FAMILY),
        );
        self.cand_bits.extend(cbits);
        for c in candidates {
            self.cand_cluster.push(c.cluster);
            self.cand_flags.push(
                flag(c.inventory, FLAG_INVENTORY)
                    | flag(c.has_counts, FLAG_HAS_COUNTS)
                    | flag(c.family_mismatch, FLAG_FAMILY_MISMATCH),
            );
            self.cand_family.push(c.family_score);
        }
        self.offsets.push(total as u32);
        Ok(())
    }

    /// Words per set.
    pub fn words(&self) -> SetWords {
        self.words
    }

    /// Number of queries.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Whether the batch has no queries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Candidate offsets per query (`len() + 1` values).
    pub fn offsets(&self) -> &[u32] {
        &self.offsets
    }

    /// Candidate bitsets, `words().candidate()` words per candidate.
    pub fn candidate_bits(&self) -> &[u64] {
        &self.cand_bits
    }

    /// Candidate cluster ids.
    pub fn candidate_clusters(&self) -> &[u32] {
        &self.cand_cluster
    }

    /// Candidate flags (`FLAG_*`).
    pub fn candidate_flags(&self) -> &[u32] {
        &self.cand_flags
    }

    /// Candidate family scores.
    pub fn candidate_family(&self) -> &[f32] {
        &self.cand_family
    }

    /// Query bitsets, `words().query()` words per query.
    pub fn query_bits(&self) -> &[u64] {
        &self.query_bits
    }

    /// Query flags (`QUERY_*`).
    pub fn query_flags(&self) -> &[u32] {
        &self.query_flags
    }
}

/// The anchor: index 0, or the best family match when the query names a family and index 0's
/// family score is below `anchor_family_low` (only if that match scores higher).
pub fn anchor(family: &[f32], query_flags: u32, w: &CoverageWeights) -> usize {
    if family.is_empty() || query_flags & QUERY_FAMILY == 0 || family[0] >= w.anchor_family_low {
        return 0;
    }
    let mut best = 0;
    for (i, &f) in family.iter().enumerate() {
        if f > family[best] {
            best = i;
        }
    }
    best
}

fn pc(x: u64) -> u32 {
    x.count_ones()
}

/// Greedy selection of up to `k` candidates per query; candidate indices (within the query) in
/// pick order. Queries run in parallel.
pub fn coverage_select(
    batch: &SelectionBatch,
    w: &CoverageWeights,
    k: usize,
) -> Result<Vec<Vec<u32>>, ComputeError> {
    w.validate()?;
    Ok((0..batch.len())
        .into_par_iter()
        .map(|q| select_one(batch, w, k, q))
        .collect())
}

fn select_one(batch: &SelectionBatch, w: &CoverageWeights, k: usize, q: usize) -> Vec<u32> {
    let sw = batch.words;
    let (lo, hi) = (batch.offsets[q] as usize, batch.offsets[q + 1] as usize);
    let n = hi - lo;
    let k = k.min(n);
    if k == 0 {
        return Vec::new();
    }
    let qf = batch.query_flags[q];
    let qb = &batch.query_bits[q * sw.query()..(q + 1) * sw.query()];
    let (qe, rest) = qb.split_at(sw.entities);
    let (qfa, qt) = rest.split_at(sw.facets);
    let cw = sw.candidate();
    let bits = |i: usize| {
        let b = &batch.cand_bits[(lo + i) * cw..(lo + i + 1) * cw];
        let (e, r) = b.split_at(sw.entities);
        let (f, r) = r.split_at(sw.facets);
        let (it, t) = r.split_at(sw.items);
        (e, f, it, t)
    };
    let mut cov = vec![0u64; cw];
    let mut picked = vec![false; n];
    let mut clusters: Vec<u32> = Vec::with_capacity(k);
    let mut out: Vec<u32> = Vec::with_capacity(k);
    let take = |i: usize,
                cov: &mut Vec<u64>,
                picked: &mut Vec<bool>,
                clusters: &mut Vec<u32>,
                out: &mut Vec<u32>| {
        picked[i] = true;
        out.push(i as u32);
        for (c, b) in cov
            .iter_mut()
            .zip(&batch.cand_bits[(lo + i) * cw..(lo + i + 1) * cw])
        {
            *c |= b;
        }
        clusters.push(batch.cand_cluster[lo + i]);
    };
    let a = anchor(&batch.cand_family[lo..hi], qf, w);
    take(a, &mut cov, &mut picked, &mut clusters, &mut out);
    let list = qf & QUERY_LIST != 0;
    let count = qf & QUERY_COUNT != 0;
    let nf = n as f32;
    while out.len() < k {
        let (ce, r) = cov.split_at(sw.entities);
        let (cf, r) = r.split_at(sw.facets);
        let (ci, ct) = r.split_at(sw.items);
        let mut best: Option<(usize, f32)> = None;
        for (i, _) in picked.iter().enumerate().filter(|(_, &p)| !p) {
            let (e, f, it, t) = bits(i);
            let mut new_e = 0;
            let mut rep_e = 0;
            for j in 0..sw.entities {
                new_e += pc(e[j] & qe[j] & !ce[j]);
                rep_e += pc(e[j] & ce[j]);
            }
            let mut new_f = 0;
            for j in 0..sw.facets {
                new_f += pc(f[j] & qfa[j] & !cf[j]);
            }
            let mut new_i = 0;
            let mut rep_i = 0;
            for j in 0..sw.items {
                new_i += pc(it[j] & !ci[j]);
                rep_i += pc(it[j] & ci[j]);
            }
            let mut new_t = 0;
            let mut rep_t = 0;
            for j in 0..sw.terms {
                new_t += pc(t[j] & qt[j] & !ct[j]);
                rep_t += pc(t[j] & qt[j] & ct[j]);
            }
            let flags = batch.cand_flags[lo + i];
            let cl = batch.cand_cluster[lo + i];
            let g = gain(
                w,
                Counts {
                    rank: (n - i) as f32 / nf,
                    new_e,
                    new_f,
                    new_i,
                    new_t,
                    rep_e,
                    rep_t,
                    rep_i,
                    inventory: list && flags & FLAG_INVENTORY != 0,
                    counts: count && flags & FLAG_HAS_COUNTS != 0,
                    family: batch.cand_family[lo + i],
                    cluster_seen: cl != NO_CLUSTER && clusters.contains(&cl),
                    mismatch: flags & FLAG_FAMILY_MISMATCH != 0,
                },
            );
            // Strictly greater: on a tie the lower index (seen first) stays.
            if best.is_none_or(|(_, bg)| g > bg) {
                best = Some((i, g));
            }
        }
        match best {
            Some((i, _)) => take(i, &mut cov, &mut picked, &mut clusters, &mut out),
            None => break,
        }
    }
    out
}

/// The quantities the gain is computed from.
#[derive(Debug, Clone, Copy)]
pub struct Counts {
    /// Rank score `(N − i)/N`.
    pub rank: f32,
    /// New query entities.
    pub new_e: u32,
    /// New query facet values.
    pub new_f: u32,
    /// New items.
    pub new_i: u32,
    /// New query terms.
    pub new_t: u32,
    /// Repeated entities.
    pub rep_e: u32,
    /// Repeated query terms.
    pub rep_t: u32,
    /// Repeated items.
    pub rep_i: u32,
    /// List query and inventory-like candidate.
    pub inventory: bool,
    /// Count query and candidate with counts.
    pub counts: bool,
    /// Family score.
    pub family: f32,
    /// The candidate's cluster is already picked.
    pub cluster_seen: bool,
    /// Family mismatch.
    pub mismatch: bool,
}

/// The gain of one candidate, in the documented order of f32 operations.
pub fn gain(w: &CoverageWeights, c: Counts) -> f32 {
    let mut g = c.rank;
    g += w.entity * c.new_e as f32;
    g += w.facet * c.new_f as f32;
    g += w.item * c.new_i.min(w.item_cap) as f32;
    g += w.term * c.new_t.min(w.term_cap) as f32;
    if c.inventory {
        g += w.inventory;
    }
    if c.counts {
        g += w.count;
    }
    g += w.family * c.family;
    let per_entity = if c.new_i == 0 {
        w.repeated_entity_no_item
    } else {
        w.repeated_entity
    };
    g -= per_entity * c.rep_e as f32;
    g -= w.repeated_term * c.rep_t.min(w.repeated_cap) as f32;
    g -= w.repeated_item * c.rep_i.min(w.repeated_cap) as f32;
    if c.cluster_seen {
        g -= w.cluster;
    }
    if c.mismatch {
        g -= w.family_mismatch;
    }
    g
}
