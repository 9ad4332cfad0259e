//! Slow, obvious implementations: plain loops, full sorts, sets instead of bitsets. Tests check
//! the fast paths (and other backends) against them; nothing else should call them.

use std::collections::BTreeSet;

use crate::rrf::{check_k_const, rrf_term};
use crate::select::{
    anchor, gain, Counts, CoverageWeights, SelectionBatch, FLAG_FAMILY_MISMATCH, FLAG_HAS_COUNTS,
    FLAG_INVENTORY, NO_CLUSTER, QUERY_COUNT, QUERY_LIST,
};
use crate::sparse::{bm25_avg_len, bm25_idf, bm25_term, check_sorted_set, Bm25Params};
use crate::topk::{batch_len, dot, sanitize, sort_hits, Hit};
use crate::{ComputeError, MatrixView};

/// Scores every row, sorts, keeps `k`.
pub fn cosine_topk(
    matrix: &MatrixView<'_>,
    queries: &[f32],
    k: usize,
) -> Result<Vec<Vec<Hit>>, ComputeError> {
    let all: Vec<u32> = (0..matrix.rows() as u32).collect();
    let b = batch_len(queries, matrix.dim())?;
    let lists = vec![&all[..]; b];
    cosine_topk_subset(matrix, queries, &lists, k)
}

/// Scores the listed rows (duplicates once), sorts, keeps `k`.
pub fn cosine_topk_subset(
    matrix: &MatrixView<'_>,
    queries: &[f32],
    candidates: &[&[u32]],
    k: usize,
) -> Result<Vec<Vec<Hit>>, ComputeError> {
    let dim = matrix.dim();
    let b = batch_len(queries, dim)?;
    let cands = crate::topk::check_candidates(matrix.rows(), b, candidates)?;
    let mut out = Vec::new();
    let mut row = vec![0f32; dim];
    for (qi, c) in cands.iter().enumerate() {
        let q = &queries[qi * dim..(qi + 1) * dim];
        let mut hits = Vec::new();
        for &i in c {
            matrix.row_f32(i as usize, &mut row);
            hits.push((i, sanitize(dot(&row, q))));
        }
        sort_hits(&mut hits);
        hits.truncate(k);
        out.push(hits);
    }
    Ok(out)
}

/// For every id, sums its first-position terms over the rankings in order.
pub fn rrf(rankings: &[&[u32]], k_const: f32) -> Result<Vec<Hit>, ComputeError> {
    check_k_const(k_const)?;
    let ids: BTreeSet<u32> = rankings.iter().flat_map(|r| r.iter().copied()).collect();
    let mut out = Vec::new();
    for id in ids {
        let mut s = 0f32;
        for r in rankings {
            if let Some(p) = r.iter().position(|&x| x == id) {
                s += rrf_term(k_const, p as u32 + 1);
            }
        }
        out.push((id, s));
    }
    sort_hits(&mut out);
    Ok(out)
}

/// Jaccard by set operations.
pub fn jaccard(a: &[u32], b: &[u32]) -> Result<f32, ComputeError> {
    check_sorted_set(a, 0)?;
    check_sorted_set(b, 1)?;
    let a: BTreeSet<u32> = a.iter().copied().collect();
    let b: BTreeSet<u32> = b.iter().copied().collect();
    let union = a.union(&b).count();
    if union == 0 {
        return Ok(0.0);
    }
    Ok(a.intersection(&b).count() as f32 / union as f32)
}

/// BM25 top-`k` by scanning every document for every query term (each once, added in the
/// query's order).
pub fn bm25_topk(docs: &[&[u32]], params: Bm25Params, query: &[u32], k: usize) -> Vec<Hit> {
    let total: u64 = docs.iter().map(|d| d.len() as u64).sum();
    let avg = bm25_avg_len(total, docs.len());
    let mut terms: Vec<u32> = Vec::new();
    for &t in query {
        if !terms.contains(&t) {
            terms.push(t);
        }
    }
    let mut hits = Vec::new();
    for (d, doc) in docs.iter().enumerate() {
        let mut s = 0f32;
        let mut matched = false;
        for &t in &terms {
            let tf = doc.iter().filter(|&&x| x == t).count() as u32;
            if tf > 0 {
                let df = docs.iter().filter(|d| d.contains(&t)).count();
                s += bm25_term(bm25_idf(docs.len(), df), tf, doc.len() as u32, avg, params);
                matched = true;
            }
        }
        if matched {
            hits.push((d as u32, sanitize(s)));
        }
    }
    sort_hits(&mut hits);
    hits.truncate(k);
    hits
}

fn bit_positions(words: &[u64]) -> BTreeSet<u32> {
    let mut s = BTreeSet::new();
    for (w, &x) in words.iter().enumerate() {
        for b in 0..64 {
            if x >> b & 1 == 1 {
                s.insert(w as u32 * 64 + b);
            }
        }
    }
    s
}

/// Greedy coverage selection with explicit sets.
pub fn coverage_select(
    batch: &SelectionBatch,
    w: &CoverageWeights,
    k: usize,
) -> Result<Vec<Vec<u32>>, ComputeError> {
    w.validate()?;
    let sw = batch.words();
    let (cw, qw) = (sw.candidate(), sw.query());
    let mut out = Vec::new();
    for q in 0..batch.len() {
        let lo = batch.offsets()[q] as usize;
        let hi = batch.offsets()[q + 1] as usize;
        let n = hi - lo;
        let qb = &batch.query_bits()[q * qw..(q + 1) * qw];
        let qe = bit_positions(&qb[..sw.entities]);
        let qf = bit_positions(&qb[sw.entities..sw.entities + sw.facets]);
        let qt = bit_positions(&qb[sw.entities + sw.facets..]);
        type Sets = (BTreeSet<u32>, BTreeSet<u32>, BTreeSet<u32>, BTreeSet<u32>);
        let sets: Vec<Sets> = (lo..hi)
            .map(|i| {
                let b = &batch.candidate_bits()[i * cw..(i + 1) * cw];
                let e = sw.entities;
                let f = e + sw.facets;
                let it = f + sw.items;
                (
                    bit_positions(&b[..e]),
                    bit_positions(&b[e..f]),
                    bit_positions(&b[f..it]),
                    bit_positions(&b[it..]),
                )
            })
            .collect();
        let qflags = batch.query_flags()[q];
        let mut picks: Vec<usize> = Vec::new();
        if n > 0 && k > 0 {
            picks.push(anchor(&batch.candidate_family()[lo..hi], qflags, w));
        }
        while picks.len() < k.min(n) {
            let mut ce = BTreeSet::new();
            let mut cf = BTreeSet::new();
            let mut ci = BTreeSet::new();
            let mut ct = BTreeSet::new();
            let mut clusters = BTreeSet::new();
            for &p in &picks {
                ce.extend(sets[p].0.iter().copied());
                cf.extend(sets[p].1.iter().copied());
                ci.extend(sets[p].2.iter().copied());
                ct.extend(sets[p].3.iter().copied());
                clusters.insert(batch.candidate_clusters()[lo + p]);
            }
            let mut gains: Vec<(usize, f32)> = Vec::new();
            for i in (0..n).filter(|i| !picks.contains(i)) {
                let (e, f, it, t) = &sets[i];
                let flags = batch.candidate_flags()[lo + i];
                let cl = batch.candidate_clusters()[lo + i];
                let c = Counts {
                    rank: (n - i) as f32 / n as f32,
                    new_e: e
                        .iter()
                        .filter(|x| qe.contains(x) && !ce.contains(x))
                        .count() as u32,
                    new_f: f
                        .iter()
                        .filter(|x| qf.contains(x) && !cf.contains(x))
                        .count() as u32,
                    new_i: it.iter().filter(|x| !ci.contains(x)).count() as u32,
                    new_t: t
                        .iter()
                        .filter(|x| qt.contains(x) && !ct.contains(x))
                        .count() as u32,
                    rep_e: e.iter().filter(|x| ce.contains(x)).count() as u32,
                    rep_t: t
                        .iter()
                        .filter(|x| qt.contains(x) && ct.contains(x))
                        .count() as u32,
                    rep_i: it.iter().filter(|x| ci.contains(x)).count() as u32,
                    inventory: qflags & QUERY_LIST != 0 && flags & FLAG_INVENTORY != 0,
                    counts: qflags & QUERY_COUNT != 0 && flags & FLAG_HAS_COUNTS != 0,
                    family: batch.candidate_family()[lo + i],
                    cluster_seen: cl != NO_CLUSTER && clusters.contains(&cl),
                    mismatch: flags & FLAG_FAMILY_MISMATCH != 0,
                };
                gains.push((i, gain(w, c)));
            }
            // Highest gain, then lowest index: a full sort of the gains.
            gains.sort_by(|a, b| {
                b.1.partial_cmp(&a.1)
                    .unwrap_or(std::cmp::Ordering::Equal)
                    .then(a.0.cmp(&b.0))
            });
            picks.push(gains[0].0);
        }
        out.push(picks.into_iter().map(|p| p as u32).collect());
    }
    Ok(out)
}
