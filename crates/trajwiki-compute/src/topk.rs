//! Exact cosine top-k: the order of hits, the dot product, and the rayon scan.

use std::cmp::Ordering;

use half::f16;
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
///
/// Compiled twice: for baseline x86-64 (the lanes in two SSE registers) and with AVX (one
/// register), picked at run time; the same operations in the same order either way.
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if has_avx() {
        // SAFETY: `dot_avx` only needs AVX, which the CPU has.
        #[allow(unsafe_code)]
        return unsafe { dot_avx(a, b) };
    }
    dot_lanes(a, b)
}

#[cfg(target_arch = "x86_64")]
fn has_avx() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| is_x86_feature_detected!("avx"))
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
#[allow(unsafe_code)]
unsafe fn dot_avx(a: &[f32], b: &[f32]) -> f32 {
    dot_lanes(a, b)
}

#[inline(always)]
fn dot_lanes(a: &[f32], b: &[f32]) -> f32 {
    dot_lanes_of(a, b, |x| x)
}

/// [`dot`]'s lanes and order over rows of any element type, each converted to f32 by `wide`.
#[inline(always)]
fn dot_lanes_of<T: Copy>(a: &[T], b: &[f32], wide: impl Fn(T) -> f32) -> f32 {
    let ca = a.chunks_exact(8);
    let cb = b.chunks_exact(8);
    let (ra, rb) = (ca.remainder(), cb.remainder());
    let mut acc = [0f32; 8];
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += wide(x[l]) * y[l];
        }
    }
    let mut s = reduce_lanes(acc);
    for (x, y) in ra.iter().zip(rb) {
        s += wide(*x) * y;
    }
    s
}

/// The sum of [`dot`]'s eight lanes, combined pairwise.
#[inline(always)]
fn reduce_lanes(acc: [f32; 8]) -> f32 {
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))
}

/// [`dot`] of an f16 row with an f32 vector. The halves convert exactly, and the products are
/// summed in [`dot`]'s lanes and order, so the result has the same bits as converting the row
/// first; with F16C (detected at run time) the conversion happens in registers, eight at a time.
#[inline]
pub fn dot_f16(a: &[f16], b: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if has_f16c() && a.len() == b.len() {
        // SAFETY: `dot_f16_f16c` needs AVX and F16C, which the CPU has; the slices have the same
        // length, the bound of every load.
        #[allow(unsafe_code)]
        return unsafe { dot_f16_f16c(a, b) };
    }
    dot_lanes_of(a, b, f16::to_f32)
}

#[cfg(target_arch = "x86_64")]
fn has_f16c() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| is_x86_feature_detected!("avx") && is_x86_feature_detected!("f16c"))
}

/// [`dot_f16`] with the conversion in F16C registers: a multiply then an add per lane (not
/// fused), as [`dot`] does.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx,f16c")]
#[allow(unsafe_code)]
unsafe fn dot_f16_f16c(a: &[f16], b: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    let n = a.len();
    let chunks = n / 8;
    let mut acc = _mm256_setzero_ps();
    for c in 0..chunks {
        // SAFETY: 8 values from `c * 8`, inside both slices (`chunks * 8 <= n`).
        let (x, y) = unsafe {
            (
                _mm256_cvtph_ps(_mm_loadu_si128(a.as_ptr().add(c * 8).cast())),
                _mm256_loadu_ps(b.as_ptr().add(c * 8)),
            )
        };
        acc = _mm256_add_ps(acc, _mm256_mul_ps(x, y));
    }
    let mut l = [0f32; 8];
    // SAFETY: `l` holds 8 values.
    unsafe { _mm256_storeu_ps(l.as_mut_ptr(), acc) };
    let mut s = reduce_lanes(l);
    for i in chunks * 8..n {
        s += a[i].to_f32() * b[i];
    }
    s
}

/// A bounded collection of the best `k` hits seen so far.
///
/// Hits better than the current `k`-th best are appended to a buffer; when the buffer holds
/// `2k` (at least [`MIN_BUFFER`]), a selection keeps the best `k` and raises the bar to the
/// `k`-th. Each hit costs a comparison, and the buffer is cut in linear time: a deep `k` over a
/// long scan costs far less than a binary heap's `log k` per replacement. [`hit_order`] is a
/// total order, so the `k` kept are the same whatever the order of the pushes.
#[derive(Clone)]
pub struct TopK {
    k: usize,
    buf: Vec<Hit>,
    /// The worst hit kept at the last cut: a hit not better than it cannot be in the top `k`.
    bar: Option<Hit>,
}

/// The smallest buffer a collector cuts at, so that a small `k` is not cut every few pushes.
const MIN_BUFFER: usize = 64;

impl TopK {
    /// An empty collector for `k` hits.
    pub fn new(k: usize) -> Self {
        TopK {
            k,
            // Grown as hits come: a deep k over a short scan costs what the scan finds.
            buf: Vec::with_capacity(Self::cut_at(k).min(CHUNK_ROWS)),
            bar: None,
        }
    }

    fn cut_at(k: usize) -> usize {
        (2 * k).max(MIN_BUFFER)
    }

    /// Offers a hit (its score is sanitised here).
    #[inline]
    pub fn push(&mut self, index: u32, score: f32) {
        if self.k == 0 {
            return;
        }
        let hit = (index, sanitize(score));
        if let Some(bar) = &self.bar {
            if hit_order(&hit, bar) != Ordering::Less {
                return;
            }
        }
        self.buf.push(hit);
        if self.buf.len() >= Self::cut_at(self.k) {
            self.cut();
        }
    }

    /// Keeps the best `k` of the buffer and raises the bar to the worst of them.
    fn cut(&mut self) {
        if self.buf.len() > self.k {
            self.buf.select_nth_unstable_by(self.k - 1, hit_order);
            self.buf.truncate(self.k);
            // Element k−1 is the k-th in order; those before it are better.
            self.bar = Some(self.buf[self.k - 1]);
        }
    }

    /// Offers every hit of another collector.
    pub fn merge(&mut self, other: TopK) {
        for (i, s) in other.buf {
            self.push(i, s);
        }
    }

    /// The hits in [`hit_order`].
    pub fn into_sorted(mut self) -> Vec<Hit> {
        self.cut();
        sort_hits(&mut self.buf);
        self.buf
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
                for (q, top) in queries.chunks_exact(dim).zip(tops.iter_mut()) {
                    top.push(i as u32, row_dot(matrix, i, q, &mut row));
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

/// [`dot`] of row `i` with `q`: an f16 row converted as it is read, a bf16 row through `buf`.
#[inline]
fn row_dot(matrix: &MatrixView<'_>, i: usize, q: &[f32], buf: &mut [f32]) -> f32 {
    let dim = matrix.dim();
    match matrix.data() {
        MatrixData::F16(d) => dot_f16(&d[i * dim..(i + 1) * dim], q),
        _ => dot(row_at(matrix, i, buf), q),
    }
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
                top.push(i, row_dot(matrix, i as usize, q, &mut row));
            }
            top.into_sorted()
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scores with many ties (and a NaN), in a scrambled order.
    fn hits(n: u32) -> Vec<Hit> {
        let mut x = 12345u64;
        (0..n)
            .map(|i| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let s = if i == 7 {
                    f32::NAN
                } else {
                    ((x >> 33) % 50) as f32 / 7.0
                };
                ((x >> 13) as u32 % (4 * n), s)
            })
            .collect()
    }

    fn best(hits: &[Hit], k: usize) -> Vec<Hit> {
        let mut all: Vec<Hit> = hits.iter().map(|&(i, s)| (i, sanitize(s))).collect();
        sort_hits(&mut all);
        all.truncate(k);
        all
    }

    #[test]
    fn f16_dot_has_the_bits_of_converting_first() {
        let mut x = 99u64;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((x >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        };
        for n in [0, 1, 7, 8, 9, 383, 384, 1000] {
            let a: Vec<f16> = (0..n).map(|_| f16::from_f32(next())).collect();
            let b: Vec<f32> = (0..n).map(|_| next()).collect();
            let wide: Vec<f32> = a.iter().map(|h| h.to_f32()).collect();
            assert_eq!(
                dot_f16(&a, &b).to_bits(),
                dot(&wide, &b).to_bits(),
                "n = {n}"
            );
        }
    }

    #[test]
    fn keeps_exactly_the_best_k_in_order_through_cuts_and_merges() {
        let all = hits(5000);
        for k in [0, 1, 5, 31, 32, 100, 1000, 4999, 5000, 6000] {
            let mut one = TopK::new(k);
            for &(i, s) in &all {
                one.push(i, s);
            }
            assert_eq!(one.into_sorted(), best(&all, k), "k = {k}");
            // Split over collectors, merged: the same hits.
            let mut parts: Vec<TopK> = (0..3).map(|_| TopK::new(k)).collect();
            for (j, &(i, s)) in all.iter().enumerate() {
                parts[j % 3].push(i, s);
            }
            let mut merged = parts.pop().unwrap();
            for p in parts {
                merged.merge(p);
            }
            assert_eq!(merged.into_sorted(), best(&all, k), "merged, k = {k}");
        }
    }
}
