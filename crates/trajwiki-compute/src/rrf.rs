//! Reciprocal rank fusion.

use rustc_hash::FxHashMap;

use crate::topk::{sort_hits, Hit};
use crate::ComputeError;

/// The RRF constant of SPEC §3 (`1/(60 + r)`).
pub const RRF_K: f32 = 60.0;

/// The contribution of rank `rank` (1-based) — the one expression every backend uses.
#[inline]
pub fn rrf_term(k_const: f32, rank: u32) -> f32 {
    1.0 / (k_const + rank as f32)
}

/// Rejects a non-finite or negative RRF constant.
pub fn check_k_const(k_const: f32) -> Result<(), ComputeError> {
    if !k_const.is_finite() || k_const < 0.0 {
        return Err(ComputeError::InvalidParameter {
            name: "k_const",
            value: k_const as f64,
            expected: "a finite number ≥ 0",
        });
    }
    Ok(())
}

/// Fuses rankings (each a list of ids, best first) by reciprocal rank fusion:
/// `score(id) = Σ_r 1 / (k_const + rank_r(id))`, ranks 1-based, rankings that miss an id add
/// nothing, and an id repeated within one ranking counts at its first position only. Terms are
/// added in ranking order, so the scores are reproducible to the bit. Sorted by score, then id.
pub fn rrf(rankings: &[&[u32]], k_const: f32) -> Result<Vec<Hit>, ComputeError> {
    check_k_const(k_const)?;
    // Each id's score and the last ranking that added to it (so that a repeat in one ranking
    // adds nothing); the result is sorted totally, so the map's order does not show.
    let ids: usize = rankings.iter().map(|r| r.len()).sum();
    let mut scores: FxHashMap<u32, (f32, usize)> = FxHashMap::default();
    scores.reserve(ids);
    for (r, ranking) in rankings.iter().enumerate() {
        for (pos, &id) in ranking.iter().enumerate() {
            let (score, last) = scores.entry(id).or_insert((0.0, usize::MAX));
            if *last != r {
                *score += rrf_term(k_const, pos as u32 + 1);
                *last = r;
            }
        }
    }
    let mut out: Vec<Hit> = scores.into_iter().map(|(id, (s, _))| (id, s)).collect();
    sort_hits(&mut out);
    Ok(out)
}
