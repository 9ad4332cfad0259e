//! Exact cosine top-k: the order of hits, the dot product, and the rayon scan.

use std::cmp::Ordering;
use std::sync::atomic::{AtomicU32, Ordering as MemoryOrder};

use half::f16;
use rayon::prelude::*;

use crate::sketch::SketchQuery;
use crate::{ComputeError, MatrixData, MatrixView};

/// A scored index: `(index, score)`.
pub type Hit = (u32, f32);

/// The most buffer a collector reserves before it has hits to keep.
const INITIAL_BUFFER: usize = 2048;

/// Rows between two exchanges of a scan's collectors with its [`SharedBar`].
const SHARE_EVERY: usize = 256;

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
    hits.sort_unstable_by_key(order_key);
}

/// A hit's place in [`hit_order`] as one integer, best first: the score's [`ordered_bits`]
/// inverted above the index (`-0.0` counted as `0.0`). Sorting and selecting on it gives the
/// order of [`hit_order`] for sanitised scores, with an integer comparison instead of a float
/// one and a tie-break.
#[inline]
pub fn order_key(&(index, score): &Hit) -> u64 {
    let score = if score == 0.0 { 0.0 } else { score };
    (u64::from(!ordered_bits(score)) << 32) | u64::from(index)
}

/// The dot product used by every CPU path (fast and reference alike, so that they agree to the
/// bit): 32 lanes — four accumulators of eight, eight-element chunk `c` going to accumulator
/// `c mod 4` — each a multiply then an add (not fused); the accumulators combined as
/// `(a0 + a2) + (a1 + a3)`, their eight lanes pairwise, then the tail in order.
///
/// Four independent chains keep the adder busy: with one, each row waited on the latency of
/// its additions in sequence (a 384-dimension row is 48 dependent additions). Compiled for
/// AVX-512F (two 16-lane registers), AVX (four 8-lane ones) and baseline x86-64, picked at run
/// time; the same operations in the same order on every path.
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    match simd() {
        // SAFETY: each path needs only the features `simd` found.
        #[allow(unsafe_code)]
        Simd::Avx512 => return unsafe { dot_avx512(a, b) },
        #[allow(unsafe_code)]
        Simd::Avx => return unsafe { dot_avx(a, b) },
        Simd::None => {}
    }
    dot_lanes_of(a, b, |x| x)
}

/// [`dot`] of an f16 row with an f32 vector. The halves convert exactly, and the products are
/// summed in [`dot`]'s lanes and order, so the result has the same bits as converting the row
/// first; with F16C or AVX-512F (detected at run time) the conversion happens in registers.
#[inline]
pub fn dot_f16(a: &[f16], b: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    match simd() {
        // SAFETY: each path needs only the features `simd` found.
        #[allow(unsafe_code)]
        Simd::Avx512 => return unsafe { dot_f16_avx512(a, b) },
        #[allow(unsafe_code)]
        Simd::Avx if has_f16c() => return unsafe { dot_f16_f16c(a, b) },
        _ => {}
    }
    dot_lanes_of(a, b, f16::to_f32)
}

#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
enum Simd {
    Avx512,
    Avx,
    None,
}

#[cfg(target_arch = "x86_64")]
fn simd() -> Simd {
    static HAS: std::sync::OnceLock<Simd> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| {
        if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("f16c") {
            Simd::Avx512
        } else if is_x86_feature_detected!("avx") {
            Simd::Avx
        } else {
            Simd::None
        }
    })
}

#[cfg(target_arch = "x86_64")]
fn has_f16c() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| is_x86_feature_detected!("f16c"))
}

/// Lanes of one accumulator.
const LANES: usize = 8;

/// Accumulators of [`dot`]: chunk `c` of [`LANES`] elements goes to accumulator `c % ACCS`.
const ACCS: usize = 4;

/// [`dot`]'s lanes and order over rows of any element type, each converted to f32 by `wide`.
#[inline(always)]
fn dot_lanes_of<T: Copy>(a: &[T], b: &[f32], wide: impl Fn(T) -> f32) -> f32 {
    let n = a.len().min(b.len());
    let chunks = n / LANES;
    let mut acc = [[0f32; LANES]; ACCS];
    for c in 0..chunks {
        let (x, y) = (
            &a[c * LANES..(c + 1) * LANES],
            &b[c * LANES..(c + 1) * LANES],
        );
        let acc = &mut acc[c % ACCS];
        for l in 0..LANES {
            acc[l] += wide(x[l]) * y[l];
        }
    }
    let mut s = reduce_lanes(combine(acc));
    for i in chunks * LANES..n {
        s += wide(a[i]) * b[i];
    }
    s
}

/// The four accumulators combined lane by lane: `(a0 + a2) + (a1 + a3)`.
#[inline(always)]
fn combine(acc: [[f32; LANES]; ACCS]) -> [f32; LANES] {
    std::array::from_fn(|l| (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]))
}

/// The sum of an accumulator's eight lanes, combined pairwise.
#[inline(always)]
fn reduce_lanes(acc: [f32; LANES]) -> f32 {
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))
}

/// The AVX form of [`dot_lanes_of`]: `load(c)` gives chunk `c` of the row as eight f32 lanes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
#[inline]
#[allow(unsafe_code)]
unsafe fn dot_avx_chunks(
    n: usize,
    load: impl Fn(usize) -> std::arch::x86_64::__m256,
    b: &[f32],
    tail: impl Fn(usize) -> f32,
) -> f32 {
    use std::arch::x86_64::*;
    let chunks = n / LANES;
    // SAFETY (every load below): chunk `c < chunks` lies inside both slices.
    let y = |c: usize| unsafe { _mm256_loadu_ps(b.as_ptr().add(c * LANES)) };
    let mut acc = [_mm256_setzero_ps(); ACCS];
    let mut c = 0;
    while c + ACCS <= chunks {
        for (j, acc) in acc.iter_mut().enumerate() {
            *acc = _mm256_add_ps(*acc, _mm256_mul_ps(load(c + j), y(c + j)));
        }
        c += ACCS;
    }
    for (j, acc) in acc.iter_mut().enumerate().take(chunks - c) {
        *acc = _mm256_add_ps(*acc, _mm256_mul_ps(load(c + j), y(c + j)));
    }
    let sum = _mm256_add_ps(_mm256_add_ps(acc[0], acc[2]), _mm256_add_ps(acc[1], acc[3]));
    let mut l = [0f32; LANES];
    // SAFETY: `l` holds 8 values.
    unsafe { _mm256_storeu_ps(l.as_mut_ptr(), sum) };
    let mut s = reduce_lanes(l);
    for i in chunks * LANES..n {
        s += tail(i);
    }
    s
}

/// The AVX-512 form: accumulators 0 and 1 in the halves of one register, 2 and 3 of another, so
/// that a block of four chunks is two 16-lane steps; the last chunks (fewer than four) go on
/// 8-lane halves as in [`dot_avx_chunks`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
#[allow(unsafe_code)]
unsafe fn dot_avx512_chunks(
    n: usize,
    load16: impl Fn(usize) -> std::arch::x86_64::__m512,
    load8: impl Fn(usize) -> std::arch::x86_64::__m256,
    b: &[f32],
    tail: impl Fn(usize) -> f32,
) -> f32 {
    use std::arch::x86_64::*;
    let chunks = n / LANES;
    // SAFETY (every load below): the chunks read lie inside both slices.
    let y16 = |c: usize| unsafe { _mm512_loadu_ps(b.as_ptr().add(c * LANES)) };
    let y8 = |c: usize| unsafe { _mm256_loadu_ps(b.as_ptr().add(c * LANES)) };
    let (mut lo, mut hi) = (_mm512_setzero_ps(), _mm512_setzero_ps());
    let mut c = 0;
    while c + ACCS <= chunks {
        lo = _mm512_add_ps(lo, _mm512_mul_ps(load16(c), y16(c)));
        hi = _mm512_add_ps(hi, _mm512_mul_ps(load16(c + 2), y16(c + 2)));
        c += ACCS;
    }
    let mut acc = [
        _mm512_castps512_ps256(lo),
        _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(lo))),
        _mm512_castps512_ps256(hi),
        _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(hi))),
    ];
    for (j, acc) in acc.iter_mut().enumerate().take(chunks - c) {
        *acc = _mm256_add_ps(*acc, _mm256_mul_ps(load8(c + j), y8(c + j)));
    }
    let sum = _mm256_add_ps(_mm256_add_ps(acc[0], acc[2]), _mm256_add_ps(acc[1], acc[3]));
    let mut l = [0f32; LANES];
    // SAFETY: `l` holds 8 values.
    unsafe { _mm256_storeu_ps(l.as_mut_ptr(), sum) };
    let mut s = reduce_lanes(l);
    for i in chunks * LANES..n {
        s += tail(i);
    }
    s
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
#[allow(unsafe_code)]
unsafe fn dot_avx(a: &[f32], b: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    let n = a.len().min(b.len());
    // SAFETY: the chunks read lie inside `a` (`n <= a.len()`).
    let load = |c: usize| unsafe { _mm256_loadu_ps(a.as_ptr().add(c * LANES)) };
    // SAFETY: AVX is enabled here; `n` bounds both slices.
    unsafe { dot_avx_chunks(n, load, b, |i| a[i] * b[i]) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx,f16c")]
#[allow(unsafe_code)]
unsafe fn dot_f16_f16c(a: &[f16], b: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    let n = a.len().min(b.len());
    // SAFETY: the chunks read lie inside `a` (`n <= a.len()`).
    let load =
        |c: usize| unsafe { _mm256_cvtph_ps(_mm_loadu_si128(a.as_ptr().add(c * LANES).cast())) };
    // SAFETY: AVX and F16C are enabled here; `n` bounds both slices.
    unsafe { dot_avx_chunks(n, load, b, |i| a[i].to_f32() * b[i]) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(unsafe_code)]
unsafe fn dot_avx512(a: &[f32], b: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    let n = a.len().min(b.len());
    // SAFETY: the chunks read lie inside `a` (`n <= a.len()`).
    let load16 = |c: usize| unsafe { _mm512_loadu_ps(a.as_ptr().add(c * LANES)) };
    let load8 = |c: usize| unsafe { _mm256_loadu_ps(a.as_ptr().add(c * LANES)) };
    // SAFETY: AVX-512F is enabled here; `n` bounds both slices.
    unsafe { dot_avx512_chunks(n, load16, load8, b, |i| a[i] * b[i]) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,f16c")]
#[allow(unsafe_code)]
unsafe fn dot_f16_avx512(a: &[f16], b: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    let n = a.len().min(b.len());
    // SAFETY: the chunks read lie inside `a` (`n <= a.len()`).
    let load16 =
        |c: usize| unsafe { _mm512_cvtph_ps(_mm256_loadu_si256(a.as_ptr().add(c * LANES).cast())) };
    let load8 =
        |c: usize| unsafe { _mm256_cvtph_ps(_mm_loadu_si128(a.as_ptr().add(c * LANES).cast())) };
    // SAFETY: AVX-512F and F16C are enabled here; `n` bounds both slices.
    unsafe { dot_avx512_chunks(n, load16, load8, b, |i| a[i].to_f32() * b[i]) }
}

/// The highest bar any collector of one scan has reached: every collector of the scan keeps `k`
/// hits at least this good, so a score below it cannot be in the scan's top `k`. Parts scanned
/// in parallel share one, so that each skips what another has already beaten instead of filling
/// `k` of its own first.
pub struct SharedBar(AtomicU32);

impl SharedBar {
    /// No bar yet (−∞).
    pub fn new() -> Self {
        SharedBar(AtomicU32::new(ordered_bits(f32::NEG_INFINITY)))
    }

    /// The bar.
    #[inline]
    pub fn get(&self) -> f32 {
        from_ordered_bits(self.0.load(MemoryOrder::Relaxed))
    }

    /// Raises the bar to `score` if that is higher.
    pub fn raise(&self, score: f32) {
        self.0.fetch_max(ordered_bits(score), MemoryOrder::Relaxed);
    }
}

impl Default for SharedBar {
    fn default() -> Self {
        Self::new()
    }
}

/// An f32 as a u32 in the same order: that of [`f32::total_cmp`] (`-0.0` below `0.0`, NaNs at
/// the ends).
pub fn ordered_bits(x: f32) -> u32 {
    let b = x.to_bits();
    if b & 0x8000_0000 != 0 {
        !b
    } else {
        b | 0x8000_0000
    }
}

fn from_ordered_bits(b: u32) -> f32 {
    if b & 0x8000_0000 != 0 {
        f32::from_bits(b & 0x7fff_ffff)
    } else {
        f32::from_bits(!b)
    }
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
    /// A score below which no hit can be in the top `k` (from a [`SharedBar`]; −∞ without one).
    floor: f32,
}

/// The smallest buffer a collector cuts at, so that a small `k` is not cut every few pushes.
const MIN_BUFFER: usize = 64;

impl TopK {
    /// An empty collector for `k` hits.
    pub fn new(k: usize) -> Self {
        TopK {
            k,
            // Grown as hits come: a deep k over a short scan costs what the scan finds.
            buf: Vec::with_capacity(Self::cut_at(k).min(INITIAL_BUFFER)),
            bar: None,
            floor: f32::NEG_INFINITY,
        }
    }

    /// A score below which no hit can be kept.
    #[inline]
    pub fn floor(&self) -> f32 {
        self.floor
    }

    /// Publishes this collector's bar to `shared` and takes the shared bar as its floor.
    pub fn share(&mut self, shared: &SharedBar) {
        if self.bar.is_none() {
            // A first bar as soon as there are `k` hits, not at `2k`.
            self.cut();
        }
        if let Some((_, score)) = self.bar {
            shared.raise(score);
        }
        self.floor = self.floor.max(shared.get());
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
        if hit.1 < self.floor {
            return;
        }
        if let Some(bar) = &self.bar {
            if order_key(&hit) >= order_key(bar) {
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
        if self.k > 0 && self.buf.len() >= self.k {
            self.buf.select_nth_unstable_by_key(self.k - 1, order_key);
            self.buf.truncate(self.k);
            // Element k−1 is the k-th in order; those before it are better.
            let bar = self.buf[self.k - 1];
            self.bar = Some(bar);
            self.floor = self.floor.max(bar.1);
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
    if !queries.len().is_multiple_of(dim) {
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
    if let (Some(sketch), 1) = (matrix.sketch(), b) {
        // One query over sketched rows: the sketches bound every row, the exact dot product is
        // computed for those whose bound reaches the bar. A batch reads each row once for all
        // its queries instead.
        if sketch_pays(matrix.rows(), k) {
            let coded = SketchQuery::new(queries);
            return Ok(vec![par_topk_bounded(
                matrix.rows(),
                k,
                |start, out| sketch.bounds_into(start, &coded, out),
                |i| prefetch_row(matrix, i),
                |i| (i as u32, exact_dot(matrix, i, queries)),
            )]);
        }
    }
    // One set of collectors per part, sharing a bar per query.
    let bars: Vec<SharedBar> = (0..b).map(|_| SharedBar::new()).collect();
    let merged = parts(matrix.rows())
        .into_par_iter()
        .map(|part| {
            let mut tops = vec![TopK::new(k); b];
            let mut row = vec![0f32; dim];
            for (j, i) in part.enumerate() {
                if j % SHARE_EVERY == 0 {
                    for (top, bar) in tops.iter_mut().zip(&bars) {
                        top.share(bar);
                    }
                }
                for (q, top) in queries.chunks_exact(dim).zip(tops.iter_mut()) {
                    top.push(i as u32, row_dot(matrix, i, q, &mut row));
                }
            }
            for (top, bar) in tops.iter_mut().zip(&bars) {
                top.share(bar);
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

/// Contiguous ranges covering `0..n` for a parallel scan: a few per thread (so that a busy
/// thread does not hold the others up), none shorter than [`MIN_PART`] items where avoidable.
fn parts(n: usize) -> Vec<std::ops::Range<usize>> {
    let count = (rayon::current_num_threads() * 4).clamp(1, n.div_ceil(MIN_PART).max(1));
    let len = n.div_ceil(count).max(1);
    (0..n).step_by(len).map(|s| s..(s + len).min(n)).collect()
}

/// The shortest part of a parallel top-k scan.
const MIN_PART: usize = 4096;

/// The best `k` of the hits `hit(0)`, …, `hit(n - 1)` in [`hit_order`], scored in parallel
/// parts, each with one collector, the collectors sharing a bar. The same hits however the
/// items are split.
pub fn par_topk(n: usize, k: usize, hit: impl Fn(usize) -> Hit + Sync) -> Vec<Hit> {
    let k = k.min(n);
    if k == 0 {
        return Vec::new();
    }
    let bar = SharedBar::new();
    parts(n)
        .into_par_iter()
        .map(|part| {
            let mut top = TopK::new(k);
            for (j, i) in part.enumerate() {
                if j % SHARE_EVERY == 0 {
                    top.share(&bar);
                }
                let (index, score) = hit(i);
                top.push(index, score);
            }
            top.share(&bar);
            top
        })
        .reduce_with(|mut a, b| {
            a.merge(b);
            a
        })
        .map(TopK::into_sorted)
        .unwrap_or_default()
}

/// [`par_topk`] of items whose scores are bounded cheaply: `bounds(start, out)` writes
/// `(lower, upper)` around the scores of items `start..start + out.len()`. A first pass
/// collects the best `k` lower bounds, whose worst is a bar at least `k` scores reach, and the
/// items whose upper bound may reach it; `hit` is then computed only for those whose upper bound
/// reaches the bar, in item order. The same hits as [`par_topk`], if the bounds hold.
///
/// The items scored are scattered (a few hundred rows of tens of thousands, each read from
/// memory rather than cache): `ahead(i)` is called [`AHEAD`] items before `hit(i)`, for a
/// prefetch of what `hit` will read ([`prefetch_row`]; it changes no result).
pub fn par_topk_bounded(
    n: usize,
    k: usize,
    bounds: impl Fn(usize, &mut [(f32, f32)]) + Sync,
    ahead: impl Fn(usize) + Sync,
    hit: impl Fn(usize) -> Hit + Sync,
) -> Vec<Hit> {
    let k = k.min(n);
    if k == 0 {
        return Vec::new();
    }
    let bar = SharedBar::new();
    // A part's candidates are pruned to its bar whenever they outgrow this.
    let prune_at = 4 * k + 4096;
    let (lower, mut candidates) = parts(n)
        .into_par_iter()
        .map(|part| {
            let mut lower = TopK::new(k);
            let mut candidates: Vec<(u32, f32)> = Vec::new();
            let mut block = [(0f32, 0f32); SHARE_EVERY];
            for start in part.clone().step_by(SHARE_EVERY) {
                lower.share(&bar);
                if candidates.len() > prune_at {
                    let floor = lower.floor();
                    candidates.retain(|&(_, hi)| may_reach(hi, floor));
                }
                let block = &mut block[..SHARE_EVERY.min(part.end - start)];
                bounds(start, block);
                for (i, &(lo, hi)) in (start..).zip(block.iter()) {
                    if may_reach(hi, lower.floor()) {
                        lower.push(i as u32, lo);
                        candidates.push((i as u32, hi));
                    }
                }
            }
            lower.share(&bar);
            (lower, candidates)
        })
        // In part order: the candidates stay in item order.
        .reduce_with(|(mut lower, mut candidates), (other, more)| {
            lower.merge(other);
            candidates.extend(more);
            (lower, candidates)
        })
        .unwrap_or_else(|| (TopK::new(k), Vec::new()));
    // The k-th best lower bound of all items: k scores reach it.
    let lower = lower.into_sorted();
    let floor = match lower.get(k - 1) {
        Some(&(_, lo)) => lo,
        None => f32::NEG_INFINITY,
    };
    candidates.retain(|&(_, hi)| may_reach(hi, floor));
    par_topk(candidates.len(), k, |j| {
        if let Some(&(next, _)) = candidates.get(j + AHEAD) {
            ahead(next as usize);
        }
        hit(candidates[j].0 as usize)
    })
}

/// How many items ahead of its scoring [`par_topk_bounded`] announces an item: enough rows in
/// flight to hide a memory access behind the dot products before it.
pub const AHEAD: usize = 8;

/// Asks the CPU to bring row `i` of `matrix` into cache (a hint: no effect on any result, none
/// where the architecture has no prefetch instruction).
#[inline]
pub fn prefetch_row(matrix: &MatrixView<'_>, i: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        fn lines<T>(data: &[T], i: usize, dim: usize) {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            if let Some(row) = data.get(i * dim..(i + 1) * dim) {
                let start = row.as_ptr().cast::<i8>();
                for offset in (0..std::mem::size_of_val(row)).step_by(64) {
                    // SAFETY: SSE is part of x86_64; a prefetch reads nothing and cannot fault
                    // (the address lies inside the row anyway).
                    #[allow(unsafe_code)]
                    unsafe {
                        _mm_prefetch::<_MM_HINT_T0>(start.wrapping_add(offset))
                    };
                }
            }
        }
        let dim = matrix.dim();
        match matrix.data() {
            MatrixData::F16(d) => lines(d, i, dim),
            MatrixData::Bf16(d) => lines(d, i, dim),
            MatrixData::F32(d) => lines(d, i, dim),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (matrix, i);
}

/// Whether a scan for the best `k` of `rows` rows gains from reading their sketches first: not
/// unless the rows are many times `k`, most of them being scored exactly otherwise.
pub fn sketch_pays(rows: usize, k: usize) -> bool {
    rows >= 16 * k
}

/// Whether an upper bound `hi` reaches `floor`. A NaN bound bounds nothing: it reaches any.
#[inline]
fn may_reach(hi: f32, floor: f32) -> bool {
    hi >= floor || hi.is_nan()
}

/// [`row_dot`] without a caller's buffer.
#[inline]
fn exact_dot(matrix: &MatrixView<'_>, i: usize, q: &[f32]) -> f32 {
    // Only a bf16 row needs a buffer to be converted into.
    match matrix.data() {
        MatrixData::Bf16(_) => row_dot(matrix, i, q, &mut vec![0f32; matrix.dim()]),
        _ => row_dot(matrix, i, q, &mut []),
    }
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
    use std::sync::Mutex;

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

    /// Sorting on [`order_key`] is sorting in [`hit_order`]: ties, signed zeros, infinities.
    #[test]
    fn order_keys_sort_as_hit_order() {
        let mut x = 5u64;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x >> 33
        };
        let specials = [
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            1e-40,
            -1e-40,
            0.5,
        ];
        let hits: Vec<Hit> = (0..2000)
            .map(|_| {
                let v = next();
                let score = if v % 3 == 0 {
                    specials[(v / 3) as usize % specials.len()]
                } else {
                    (v % 41) as f32 / 8.0 - 2.5
                };
                ((next() % 500) as u32, score)
            })
            .collect();
        let mut by_key = hits.clone();
        sort_hits(&mut by_key);
        let mut by_order = hits;
        by_order.sort_by(hit_order);
        for (a, b) in by_key.iter().zip(&by_order) {
            assert_eq!(hit_order(a, b), Ordering::Equal, "{a:?} against {b:?}");
        }
    }

    /// Every compiled path of the two dot products gives the scalar lanes' bits, at lengths
    /// around the chunk and block sizes. The AVX-512 and AVX paths run where the CPU has them
    /// and say so when it has not.
    #[test]
    fn every_dot_path_has_the_bits_of_the_scalar_lanes() {
        let mut x = 7u64;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((x >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        };
        #[allow(unsafe_code)]
        for n in [
            0, 1, 7, 8, 9, 15, 16, 24, 31, 32, 33, 40, 56, 63, 64, 65, 100, 383, 384, 1030,
        ] {
            let a: Vec<f32> = (0..n).map(|_| next()).collect();
            let h: Vec<f16> = (0..n).map(|_| f16::from_f32(next())).collect();
            let b: Vec<f32> = (0..n).map(|_| next()).collect();
            let want = dot_lanes_of(&a, &b, |x| x).to_bits();
            let want_h = dot_lanes_of(&h, &b, f16::to_f32).to_bits();
            assert_eq!(dot(&a, &b).to_bits(), want, "dot, n = {n}");
            assert_eq!(dot_f16(&h, &b).to_bits(), want_h, "dot_f16, n = {n}");
            #[cfg(target_arch = "x86_64")]
            {
                if is_x86_feature_detected!("avx") && is_x86_feature_detected!("f16c") {
                    // SAFETY: the CPU has the features these need.
                    let (d, dh) = unsafe { (dot_avx(&a, &b), dot_f16_f16c(&h, &b)) };
                    assert_eq!(d.to_bits(), want, "AVX dot, n = {n}");
                    assert_eq!(dh.to_bits(), want_h, "F16C dot, n = {n}");
                } else if n == 0 {
                    eprintln!("no AVX/F16C on this CPU: its dot paths not tested");
                }
                if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("f16c") {
                    // SAFETY: as above.
                    let (d, dh) = unsafe { (dot_avx512(&a, &b), dot_f16_avx512(&h, &b)) };
                    assert_eq!(d.to_bits(), want, "AVX-512 dot, n = {n}");
                    assert_eq!(dh.to_bits(), want_h, "AVX-512 f16 dot, n = {n}");
                } else if n == 0 {
                    eprintln!("no AVX-512F on this CPU: its dot paths not tested");
                }
            }
        }
    }

    #[test]
    fn a_sketched_scan_returns_the_exact_scans_hits() {
        use crate::sketch::Sketch;
        use crate::synthetic::{unit_rows, Rng};
        let mut rng = Rng::new(3);
        let dim = 48;
        // Clustered rows (many close scores) and exact duplicates (ties), over several chunks.
        let base = unit_rows(&mut rng, 40, dim);
        let mut rows = Vec::new();
        for i in 0..9000 {
            let b = &base[(i % 40) * dim..(i % 40 + 1) * dim];
            let noise = unit_rows(&mut rng, 1, dim);
            let w = if i % 7 == 0 { 0.0 } else { 0.05 };
            rows.extend(b.iter().zip(&noise).map(|(x, n)| x + w * n));
        }
        let rows16: Vec<f16> = rows.iter().map(|&x| f16::from_f32(x)).collect();
        let queries = unit_rows(&mut rng, 3, dim);
        for (name, m) in [
            ("f32", MatrixView::f32(&rows, dim).unwrap()),
            ("f16", MatrixView::f16(&rows16, dim).unwrap()),
        ] {
            let sketch = Sketch::of(&m);
            let sketched = m.with_sketch(sketch.view()).unwrap();
            for k in [1, 10, 500, 1000, 9000] {
                // One query at a time (a batch reads the rows, not the sketch), against the
                // batch's exact lists.
                let exact = cosine_topk(&m, &queries, k).unwrap();
                for (q, e) in queries.chunks_exact(dim).zip(&exact) {
                    let fast = cosine_topk(&sketched, q, k).unwrap();
                    let bits =
                        |h: &[Hit]| h.iter().map(|&(i, s)| (i, s.to_bits())).collect::<Vec<_>>();
                    assert_eq!(bits(e), bits(&fast[0]), "{name}, k = {k}");
                }
                // And over rows from an offset (the sketch follows the view).
                let tail = cosine_topk(&m.rows_from(5000), &queries[..dim], k).unwrap();
                let fast_tail = cosine_topk(&sketched.rows_from(5000), &queries[..dim], k).unwrap();
                assert_eq!(tail, fast_tail, "{name}, rows from 5000, k = {k}");
            }
        }
        let other = Sketch::of(&MatrixView::f32(&rows[..dim * 10], dim).unwrap());
        assert!(MatrixView::f32(&rows, dim)
            .unwrap()
            .with_sketch(other.view())
            .is_err());
    }

    #[test]
    fn a_bounded_parallel_top_k_is_the_sorted_best_k() {
        let all = hits(20_000);
        for k in [0, 1, 10, 300, 5000, 20_000, 30_000] {
            let expected = best(&all, k);
            assert_eq!(par_topk(all.len(), k, |i| all[i]), expected, "k = {k}");
            // Bounds that hold, exact (ties at the bar), narrow or wide, change nothing; a NaN
            // bound bounds nothing.
            for width in [0.0, 0.01, 0.5, 100.0] {
                let bounds = |start: usize, out: &mut [(f32, f32)]| {
                    for (i, o) in (start..).zip(out.iter_mut()) {
                        let s = sanitize(all[i].1);
                        *o = if i.is_multiple_of(5) {
                            (f32::NAN, f32::NAN)
                        } else {
                            (s - width, s + width)
                        };
                    }
                };
                // Every item scored but the last `AHEAD` announces one more, scored as well.
                let (announced, scored) = (Mutex::new(Vec::new()), Mutex::new(Vec::new()));
                let ahead = |i: usize| announced.lock().unwrap().push(i);
                let hit = |i: usize| {
                    scored.lock().unwrap().push(i);
                    all[i]
                };
                let got = par_topk_bounded(all.len(), k, bounds, ahead, hit);
                assert_eq!(got, expected, "k = {k}, width = {width}");
                let mut scored = scored.into_inner().unwrap();
                let mut announced = announced.into_inner().unwrap();
                assert_eq!(
                    announced.len(),
                    scored.len().saturating_sub(AHEAD),
                    "k = {k}"
                );
                scored.sort_unstable();
                announced.sort_unstable();
                assert!(announced.iter().all(|i| scored.binary_search(i).is_ok()));
            }
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
