//! Exact cosine top-k: the order of hits, the dot product, and the rayon scan.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use rayon::prelude::*;

use crate::{ComputeError, MatrixData, MatrixView};

/// A scored index: `(index, score)`.
pub type Hit = (u32, f32);

/// Rows scanned per rayon task.
const CHUNK_ROWS: usize = 2048;

/// Replaces NaN by −∞ so that every score has a place in the order.
#[inline]
pub fn sanitize(score: f32) -> f32 {
    if score.is_nan() {
        f32::NEG_INFINITY
    } else {
        score
    }
}

/// The order of results everywhere in trajwiki: higher score first, then lower index. Scores
/// must be sanitised (no NaN); `-0.0` and `0.0` are equal.
#[inline]
pub fn hit_order(a: &Hit, b: &Hit) -> Ordering {
    b.1.partial_cmp(&a.1)
        .unwrap_or(Ordering::Equal)
        .then(a.0.cmp(&b.0))
}

/// Sorts hits into [`hit_order`].
pub fn sort_hits(hits: &mut [Hit]) {
    hits.sort_unstable_by(hit_order);
}

/// The dot product used by every CPU path (fast and reference alike, so that they agree to the
/// bit): eight interleaved f32 accumulators, combined pairwise, then the tail in order.
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let ca = a.chunks_exact(8);
    let cb = b.chunks_exact(8);
    let (ra, rb) = (ca.remainder(), cb.remainder());
    let mut acc = [0f32; 8];
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    let mut s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

/// Heap entry whose maximum is the worst hit, so the heap top is the one to evict.
#[derive(Clone, Copy)]
struct Worst(Hit);

impl PartialEq for Worst {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Worst {}
impl PartialOrd for Worst {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Worst {
    fn cmp(&self, other: &Self) -> Ordering {
        // Greater = later in hit order = worse.
        hit_order(&self.0, &other.0)
    }
}

/// A bounded collection of the best `k` hits seen so far.
#[derive(Clone)]
pub struct TopK {
    k: usize,
    heap: BinaryHeap<Worst>,
}

impl TopK {
    /// An empty collector for `k` hits.
    pub fn new(k: usize) -> Self {
        TopK {
            k,
            // Grown as hits come: a deep k over a short scan costs what the scan finds.
            heap: BinaryHeap::with_capacity(k.min(CHUNK_ROWS) + 1),
        }
    }

    /// Offers a hit (its score is sanitised here).
    #[inline]
    pub fn push(&mut self, index: u32, score: f32) {
        if self.k == 0 {
            return;
        }
        let hit = (index, sanitize(score));
        if self.heap.len() < self.k {
            self.heap.push(Worst(hit));
        } else if let Some(top) = self.heap.peek() {
            if hit_order(&hit, &top.0) == Ordering::Less {
                self.heap.pop();
                self.heap.push(Worst(hit));
            }
        }
    }

    /// Offers every hit of another collector.
    pub fn merge(&mut self, other: TopK) {
        for Worst((i, s)) in other.heap {
            self.push(i, s);
        }
    }

    /// The hits in [`hit_order`].
    pub fn into_sorted(self) -> Vec<Hit> {
        let mut v: Vec<Hit> = self.heap.into_iter().map(|w| w.0).collect();
        sort_hits(&mut v);
        v
    }
}

/// Checks that `queries` is a whole number of `dim`-sized rows and returns how many.
pub(crate) fn batch_len(queries: &[f32], dim: usize) -> Result<usize, ComputeError> {
    if dim == 0 {
        return Err(ComputeError::ZeroDimension);
    }
    if queries.len() % dim != 0 {
        return Err(ComputeError::WrongDimension {
            what: "queries (a multiple of the matrix dim)",
            expected: (queries.len() / dim + 1) * dim,
            got: queries.len(),
        });
    }
    Ok(queries.len() / dim)
}

/// Exact top-`k` rows of `matrix` by dot product with each query row of `queries` (`b × dim`,
/// row-major). Rows are scanned in parallel chunks; the result does not depend on the chunking.
pub fn cosine_topk(
    matrix: &MatrixView<'_>,
    queries: &[f32],
    k: usize,
) -> Result<Vec<Vec<Hit>>, ComputeError> {
    let dim = matrix.dim();
    let b = batch_len(queries, dim)?;
    if b == 0 {
        return Ok(Vec::new());
    }
    let k = k.min(matrix.rows());
    if k == 0 {
        return Ok(vec![Vec::new(); b]);
    }
    let n_chunks = matrix.rows().div_ceil(CHUNK_ROWS);
    let merged = (0..n_chunks)
        .into_par_iter()
        .map(|c| {
            let mut tops = vec![TopK::new(k); b];
            let mut row = vec![0f32; dim];
            let end = ((c + 1) * CHUNK_ROWS).min(matrix.rows());
            for i in c * CHUNK_ROWS..end {
                let r = row_at(matrix, i, &mut row);
                for (q, top) in queries.chunks_exact(dim).zip(tops.iter_mut()) {
                    top.push(i as u32, dot(r, q));
                }
            }
            tops
        })
        .reduce_with(|mut a, b| {
            for (x, y) in a.iter_mut().zip(b) {
                x.merge(y);
            }
            a
        })
        .unwrap_or_default();
    Ok(merged.into_iter().map(TopK::into_sorted).collect())
}

/// Row `i` as f32: borrowed from an f32 matrix, converted into `buf` otherwise.
#[inline]
fn row_at<'a>(matrix: &'a MatrixView<'_>, i: usize, buf: &'a mut [f32]) -> &'a [f32] {
    let dim = matrix.dim();
    match matrix.data() {
        MatrixData::F32(d) => &d[i * dim..(i + 1) * dim],
        _ => {
            matrix.row_f32(i, buf);
            buf
        }
    }
}

/// Sorted, de-duplicated, range-checked candidate lists, one per query.
pub(crate) fn check_candidates(
    rows: usize,
    b: usize,
    candidates: &[&[u32]],
) -> Result<Vec<Vec<u32>>, ComputeError> {
    if candidates.len() != b {
        return Err(ComputeError::BatchMismatch {
            what: "candidate lists",
            expected: b,
            got: candidates.len(),
        });
    }
    candidates
        .iter()
        .map(|c| {
            if let Some(&bad) = c.iter().find(|&&i| i as usize >= rows) {
                return Err(ComputeError::IndexOutOfRange {
                    what: "matrix rows",
                    index: bad as u64,
                    len: rows,
                });
            }
            let mut v = c.to_vec();
            v.sort_unstable();
            v.dedup();
            Ok(v)
        })
        .collect()
}

/// Like [`cosine_topk`], but query `j` scores only the rows listed in `candidates[j]` (any
/// order; duplicates count once). Indices in the result are matrix row indices.
pub fn cosine_topk_subset(
    matrix: &MatrixView<'_>,
    queries: &[f32],
    candidates: &[&[u32]],
    k: usize,
) -> Result<Vec<Vec<Hit>>, ComputeError> {
    let dim = matrix.dim();
    let b = batch_len(queries, dim)?;
    let cands = check_candidates(matrix.rows(), b, candidates)?;
    Ok(queries
        .par_chunks_exact(dim)
        .zip(cands.par_iter())
        .map(|(q, c)| {
            let mut top = TopK::new(k);
            let mut row = vec![0f32; dim];
            for &i in c {
                top.push(i, dot(row_at(matrix, i as usize, &mut row), q));
            }
            top.into_sorted()
        })
        .collect())
}
