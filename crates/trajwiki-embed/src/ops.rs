//! CPU kernels on plain row-major `f32` slices: the `gemm` crate's product (for the `avx2` linear
//! layers of `crate::linear`), norms, activations and variable-length attention.
//!
//! Every forward pass in this crate works on *packed* token matrices: the tokens of all sequences
//! of a batch are stacked row after row (`[total_tokens, hidden]`), with no padding rows at all.
//! Linear layers do not care where one sequence ends; attention is computed per sequence from its
//! offsets. This is the variable-length layout of FlashAttention's `varlen` API, and for the
//! masked encoders and decoders here it computes exactly what a padded batch with an attention
//! mask computes, without spending work on padding.
//!
//! Row-wise kernels run in parallel on the current rayon pool; callers install the embedder's own
//! pool around a forward pass.

use rayon::prelude::*;

/// Whether the CPU has AVX2 and FMA (checked once).
#[cfg(target_arch = "x86_64")]
pub(crate) fn has_avx2() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"))
}

/// Whether the CPU has AVX-512F/BW/VL besides AVX2 and FMA (checked once).
#[cfg(target_arch = "x86_64")]
pub(crate) fn has_avx512() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| {
        has_avx2()
            && is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vl")
    })
}

/// Defines a kernel three times, for baseline x86-64 (SSE2), with AVX2 and with AVX-512 enabled,
/// and picks the widest the CPU has at run time. The body is the same code: the compiler
/// vectorises it 4, 8 or 16 lanes wide (and uses masked remainders on AVX-512). Operations are
/// not reordered or fused, so every version gives the same results.
macro_rules! multiversion {
    ($(#[$m:meta])* $vis:vis fn $name:ident($($a:ident: $t:ty),* $(,)?) $(-> $r:ty)? $body:block) => {
        $(#[$m])*
        #[allow(clippy::too_many_arguments)]
        $vis fn $name($($a: $t),*) $(-> $r)? {
            #[inline(always)]
            #[allow(clippy::too_many_arguments)]
            fn generic($($a: $t),*) $(-> $r)? $body

            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2,fma")]
            #[allow(unsafe_code, clippy::too_many_arguments)]
            unsafe fn avx2($($a: $t),*) $(-> $r)? {
                generic($($a),*)
            }

            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
            #[allow(unsafe_code, clippy::too_many_arguments)]
            unsafe fn avx512($($a: $t),*) $(-> $r)? {
                generic($($a),*)
            }

            #[cfg(target_arch = "x86_64")]
            if $crate::ops::has_avx512() {
                // SAFETY: `avx512` only needs AVX-512F/BW/VL, AVX2 and FMA, which the CPU has.
                #[allow(unsafe_code)]
                return unsafe { avx512($($a),*) };
            }
            #[cfg(target_arch = "x86_64")]
            if $crate::ops::has_avx2() {
                // SAFETY: `avx2` only needs the AVX2 and FMA instructions, which the CPU has.
                #[allow(unsafe_code)]
                return unsafe { avx2($($a),*) };
            }
            generic($($a),*)
        }
    };
}
pub(crate) use multiversion;

/// Rows handed to one rayon task by the row-wise kernels (keeps task overhead small).
const ROWS_PER_TASK: usize = 8;

/// A dense layer's weights as the checkpoint stores them: PyTorch `Linear` layout (`[out, in]`,
/// row-major) with an optional bias. [`crate::linear::Linear`] prepares it for a kernel.
#[derive(Debug, Clone)]
pub(crate) struct Dense {
    /// `[out, in]` row-major.
    pub(crate) weight: Vec<f32>,
    pub(crate) bias: Option<Vec<f32>>,
    pub(crate) in_dim: usize,
    pub(crate) out_dim: usize,
}

impl Dense {
    /// Stacks several layers with the same input size into one (`[sum out, in]`), so that e.g.
    /// the query, key and value projections run as one matrix product.
    pub(crate) fn concat(parts: Vec<Dense>) -> Dense {
        let in_dim = parts[0].in_dim;
        let out_dim = parts.iter().map(|p| p.out_dim).sum();
        let has_bias = parts.iter().any(|p| p.bias.is_some());
        let mut weight = Vec::with_capacity(out_dim * in_dim);
        let mut bias = Vec::with_capacity(if has_bias { out_dim } else { 0 });
        for p in parts {
            debug_assert_eq!(p.in_dim, in_dim);
            weight.extend_from_slice(&p.weight);
            if has_bias {
                match p.bias {
                    Some(b) => bias.extend_from_slice(&b),
                    None => bias.extend(std::iter::repeat_n(0.0, p.out_dim)),
                }
            }
        }
        Dense {
            weight,
            bias: has_bias.then_some(bias),
            in_dim,
            out_dim,
        }
    }
}

/// `dst (m×n) (+)= a (m×k) · bᵀ` where `b` is `n×k` row-major. When `accumulate` is set the product
/// is added to what `dst` holds (the bias, or a residual), otherwise `dst` is overwritten.
#[allow(clippy::too_many_arguments)]
pub(crate) fn matmul_wt(
    a: &[f32],
    b: &[f32],
    dst: &mut [f32],
    m: usize,
    k: usize,
    n: usize,
    accumulate: bool,
    threads: usize,
) {
    assert!(a.len() >= m * k, "lhs too small for {m}x{k}");
    assert!(b.len() >= n * k, "rhs too small for {n}x{k}");
    assert!(dst.len() >= m * n, "dst too small for {m}x{n}");
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            dst[..m * n].fill(0.0);
        }
        return;
    }
    if m <= SMALL_M {
        small_matmul_wt(a, b, dst, m, k, n, accumulate);
        return;
    }
    let parallelism = if threads > 1 {
        gemm::Parallelism::Rayon(threads)
    } else {
        gemm::Parallelism::None
    };
    raw_gemm(a, b, dst, m, k, n, accumulate, parallelism);
}

/// Row counts up to which `matmul_wt` computes dot products directly from the weights instead of
/// calling `gemm`. A general GEMM first packs the whole right-hand matrix into panels; for the few
/// rows of a query that copy costs more than the product itself (it was half the time of a MiniLM
/// query forward). Weight rows are contiguous in `[out, in]` layout, so a dot-product kernel reads
/// each of them once, straight from memory.
const SMALL_M: usize = 32;

/// Rows of `a` and columns of the output computed together by the small-row kernel: every loaded
/// weight vector is used for `SMALL_MR` rows, every row vector for `SMALL_NR` weight rows (twelve
/// accumulators, which with the weight vectors fill the sixteen AVX2 registers).
const SMALL_MR: usize = 4;
const SMALL_NR: usize = 3;

/// Output columns (weight rows) per rayon task of the small-row kernel (a multiple of `SMALL_NR`).
const SMALL_COLS_PER_TASK: usize = 48;

/// `dst (+)= a · bᵀ` for few rows of `a`, parallel over output columns. Each task computes the
/// transposed block of its columns, which is then added to (or written into) `dst`.
#[allow(clippy::too_many_arguments)]
fn small_matmul_wt(
    a: &[f32],
    b: &[f32],
    dst: &mut [f32],
    m: usize,
    k: usize,
    n: usize,
    accumulate: bool,
) {
    let tasks = 2 * rayon::current_num_threads();
    let cols = n.div_ceil(tasks).div_ceil(SMALL_NR).max(1) * SMALL_NR;
    let cols = cols.max(SMALL_COLS_PER_TASK);
    let mut out_t = vec![0.0f32; n * m];
    out_t
        .par_chunks_mut(cols * m)
        .zip(b[..n * k].par_chunks(cols * k))
        .for_each(|(o, w)| dot_columns(&a[..m * k], w, k, m, o));
    for (i, row) in dst[..m * n].chunks_exact_mut(n).enumerate() {
        for (j, d) in row.iter_mut().enumerate() {
            let v = out_t[j * m + i];
            *d = if accumulate { *d + v } else { v };
        }
    }
}

/// `out[j·m + i] = a_i · w_j` for the `m` rows of `a` and every `k`-row `w_j` of `w`, in tiles of
/// up to `SMALL_MR × SMALL_NR` products.
fn dot_columns(a: &[f32], w: &[f32], k: usize, m: usize, out: &mut [f32]) {
    type Tile = fn(&[f32], &[f32], usize, usize, usize, usize, &mut [f32]);
    #[cfg(target_arch = "x86_64")]
    let tile: Tile = if has_avx2() {
        avx2::dot_tile
    } else {
        dot_tile_generic
    };
    #[cfg(not(target_arch = "x86_64"))]
    let tile: Tile = dot_tile_generic;
    let cols = w.len() / k;
    assert!(a.len() >= m * k && out.len() >= cols * m);
    for j in (0..cols).step_by(SMALL_NR) {
        let nr = (cols - j).min(SMALL_NR);
        for i in (0..m).step_by(SMALL_MR) {
            let mr = (m - i).min(SMALL_MR);
            tile(
                &a[i * k..(i + mr) * k],
                &w[j * k..(j + nr) * k],
                k,
                m,
                mr,
                nr,
                &mut out[j * m + i..],
            );
        }
    }
}

/// Portable twin of `avx2::dot_tile`: `out[c·m + r] = a_r · w_c` for `r < mr`, `c < nr`.
#[allow(clippy::too_many_arguments)]
fn dot_tile_generic(
    a: &[f32],
    w: &[f32],
    k: usize,
    m: usize,
    mr: usize,
    nr: usize,
    out: &mut [f32],
) {
    for r in 0..mr {
        for c in 0..nr {
            out[c * m + r] = dot(&a[r * k..(r + 1) * k], &w[c * k..(c + 1) * k]);
        }
    }
}

/// The small-row kernel's tiles with AVX2 and FMA: eight lanes per product, fused multiply-adds,
/// the tile's accumulators held in registers for the whole length `k`.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod avx2 {
    use std::arch::x86_64::{
        __m256, _mm256_castps256_ps128, _mm256_extractf128_ps, _mm256_fmadd_ps, _mm256_loadu_ps,
        _mm256_setzero_ps, _mm_add_ps, _mm_add_ss, _mm_cvtss_f32, _mm_movehl_ps, _mm_shuffle_ps,
    };

    use super::{SMALL_MR, SMALL_NR};

    /// `out[c·m + r] = a_r · w_c` for the `mr ≤ SMALL_MR` rows of `a` and `nr ≤ SMALL_NR` rows of
    /// `w`, all of length `k`. Only to be chosen after `has_avx2()` (as `dot_columns` does).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn dot_tile(
        a: &[f32],
        w: &[f32],
        k: usize,
        m: usize,
        mr: usize,
        nr: usize,
        out: &mut [f32],
    ) {
        assert!(mr <= SMALL_MR && nr <= SMALL_NR && mr > 0 && nr > 0);
        assert!(a.len() >= mr * k && w.len() >= nr * k && out.len() > (nr - 1) * m + mr - 1);
        // SAFETY: `dot_columns` picks this only when `has_avx2()`; the assertions above bound
        // every pointer read (`r < mr` rows of `a`, `c < nr` rows of `w`, offsets below `k`) and
        // every write of `out`.
        unsafe {
            match (mr, nr) {
                (4, 3) => tile::<4, 3>(a, w, k, m, out),
                (3, 3) => tile::<3, 3>(a, w, k, m, out),
                (2, 3) => tile::<2, 3>(a, w, k, m, out),
                (1, 3) => tile::<1, 3>(a, w, k, m, out),
                (4, 2) => tile::<4, 2>(a, w, k, m, out),
                (3, 2) => tile::<3, 2>(a, w, k, m, out),
                (2, 2) => tile::<2, 2>(a, w, k, m, out),
                (1, 2) => tile::<1, 2>(a, w, k, m, out),
                (4, 1) => tile::<4, 1>(a, w, k, m, out),
                (3, 1) => tile::<3, 1>(a, w, k, m, out),
                (2, 1) => tile::<2, 1>(a, w, k, m, out),
                _ => tile::<1, 1>(a, w, k, m, out),
            }
        }
    }

    /// Sum of the eight lanes, in a fixed order.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    fn hsum(v: __m256) -> f32 {
        let lo = _mm256_castps256_ps128(v);
        let hi = _mm256_extractf128_ps::<1>(v);
        let s = _mm_add_ps(lo, hi);
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_shuffle_ps::<0b01>(s, s));
        _mm_cvtss_f32(s)
    }

    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn tile<const R: usize, const C: usize>(
        a: &[f32],
        w: &[f32],
        k: usize,
        m: usize,
        out: &mut [f32],
    ) {
        let (ap, wp) = (a.as_ptr(), w.as_ptr());
        let mut acc = [[_mm256_setzero_ps(); C]; R];
        let body = k - k % 8;
        let mut t = 0;
        while t < body {
            let mut wv = [_mm256_setzero_ps(); C];
            for (c, v) in wv.iter_mut().enumerate() {
                // SAFETY: c < C rows of `w`, t + 8 ≤ k (checked by `dot_tile`).
                *v = unsafe { _mm256_loadu_ps(wp.add(c * k + t)) };
            }
            for (r, acc_r) in acc.iter_mut().enumerate() {
                // SAFETY: r < R rows of `a`, t + 8 ≤ k.
                let av = unsafe { _mm256_loadu_ps(ap.add(r * k + t)) };
                for (acc_rc, v) in acc_r.iter_mut().zip(&wv) {
                    *acc_rc = _mm256_fmadd_ps(av, *v, *acc_rc);
                }
            }
            t += 8;
        }
        for (r, acc_r) in acc.iter().enumerate() {
            for (c, lanes) in acc_r.iter().enumerate() {
                let mut s = hsum(*lanes);
                for t in body..k {
                    s += a[r * k + t] * w[c * k + t];
                }
                out[c * m + r] = s;
            }
        }
    }
}

/// The one unsafe call of the crate, wrapped so that the slice lengths checked by the caller
/// bound every access.
#[allow(unsafe_code, clippy::too_many_arguments)]
fn raw_gemm(
    a: &[f32],
    b: &[f32],
    dst: &mut [f32],
    m: usize,
    k: usize,
    n: usize,
    accumulate: bool,
    parallelism: gemm::Parallelism,
) {
    // SAFETY: `matmul_wt` asserted that `a` holds m·k values (row stride k, column stride 1),
    // `b` holds n·k values read as the k×n matrix bᵀ (row stride 1, column stride k) and `dst`
    // holds m·n values (row stride n, column stride 1); `dst` is uniquely borrowed and does not
    // alias `a` or `b`.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            accumulate,
            a.as_ptr(),
            1,
            k as isize,
            b.as_ptr(),
            k as isize,
            1,
            1.0f32,
            1.0f32,
            false,
            false,
            false,
            parallelism,
        )
    }
}

/// Sum with eight independent accumulators (vectorises, unlike a sequential f32 sum).
#[inline(always)]
fn sum8(v: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let c = v.chunks_exact(8);
    let rest = c.remainder().iter().sum::<f32>();
    for x in c {
        for i in 0..8 {
            acc[i] += x[i];
        }
    }
    acc.iter().sum::<f32>() + rest
}

/// LayerNorm of one row in place.
#[inline(always)]
fn layer_norm_row(row: &mut [f32], weight: &[f32], bias: &[f32], eps: f32) {
    let n = row.len() as f32;
    let mean = sum8(row) / n;
    let mut acc = [0.0f32; 8];
    let c = row.chunks_exact(8);
    let mut rest = 0.0f32;
    for v in c.remainder() {
        rest += (v - mean) * (v - mean);
    }
    for x in c {
        for i in 0..8 {
            acc[i] += (x[i] - mean) * (x[i] - mean);
        }
    }
    let var = (acc.iter().sum::<f32>() + rest) / n;
    let inv = 1.0 / (var + eps).sqrt();
    for ((v, w), b) in row.iter_mut().zip(weight).zip(bias) {
        *v = (*v - mean) * inv * w + b;
    }
}

/// In-place LayerNorm over rows of `dim` values.
pub(crate) fn layer_norm(x: &mut [f32], dim: usize, weight: &[f32], bias: &[f32], eps: f32) {
    x.par_chunks_mut(dim * ROWS_PER_TASK)
        .for_each(|rows| add_layer_norm_rows(rows, None, dim, weight, bias, eps));
}

multiversion! {
    /// `rows += y` (when given), then LayerNorm of each `dim`-row.
    fn add_layer_norm_rows(
        rows: &mut [f32],
        y: Option<&[f32]>,
        dim: usize,
        weight: &[f32],
        bias: &[f32],
        eps: f32,
    ) {
        for (r, row) in rows.chunks_exact_mut(dim).enumerate() {
            if let Some(y) = y {
                for (v, y) in row.iter_mut().zip(&y[r * dim..(r + 1) * dim]) {
                    *v += y;
                }
            }
            layer_norm_row(row, weight, bias, eps);
        }
    }
}

/// `x += y` then LayerNorm, in place on `x`.
pub(crate) fn add_layer_norm(
    x: &mut [f32],
    y: &[f32],
    dim: usize,
    weight: &[f32],
    bias: &[f32],
    eps: f32,
) {
    x.par_chunks_mut(dim * ROWS_PER_TASK)
        .zip(y.par_chunks(dim * ROWS_PER_TASK))
        .for_each(|(xs, ys)| add_layer_norm_rows(xs, Some(ys), dim, weight, bias, eps));
}

/// RMSNorm of one row into `out`.
#[inline(always)]
pub(crate) fn rms_norm_row(row: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    let ms = dot(row, row) / row.len() as f32;
    let inv = 1.0 / (ms + eps).sqrt();
    for ((o, v), w) in out.iter_mut().zip(row).zip(weight) {
        *o = v * inv * w;
    }
}

/// RMSNorm of every `dim`-row of `x`, written to a buffer of [`crate::scratch::F32`].
pub(crate) fn rms_norm(x: &[f32], dim: usize, weight: &[f32], eps: f32) -> Vec<f32> {
    let mut out = crate::scratch::F32.take(x.len());
    out.par_chunks_mut(dim * ROWS_PER_TASK)
        .zip(x.par_chunks(dim * ROWS_PER_TASK))
        .for_each(|(os, xs)| rms_norm_rows(xs, dim, weight, eps, os));
    out
}

multiversion! {
    /// RMSNorm of each `dim`-row of `xs` into `os`.
    fn rms_norm_rows(xs: &[f32], dim: usize, weight: &[f32], eps: f32, os: &mut [f32]) {
        for (o, row) in os.chunks_exact_mut(dim).zip(xs.chunks_exact(dim)) {
            rms_norm_row(row, weight, eps, o);
        }
    }
}

multiversion! {
    /// Exact (erf) GELU in place, as BERT uses it.
    pub(crate) fn gelu_erf_slice(xs: &mut [f32]) {
        for v in xs {
            *v = 0.5 * *v * (1.0 + erf_f32(*v * std::f32::consts::FRAC_1_SQRT_2));
        }
    }
}

/// `e^x` in f32 without a library call, so that loops over it vectorise (Cephes' `expf`: range
/// reduction by powers of two and a degree-5 polynomial; relative error about 2e-7 over the range
/// where the result is a normal number, 0 below it).
#[inline(always)]
pub(crate) fn exp_f32(x: f32) -> f32 {
    let x = x.clamp(-87.0, 88.0);
    // Round to nearest by adding and removing 1.5·2²³ (no `floor`, which is a library call on
    // baseline x86-64 and stops vectorisation); |r| ≤ ln2/2 either way. The integer `n = fx` is
    // read from the bits of the sum, where it sits in the low mantissa bits: an `as i32`
    // conversion would be saturating, lane by lane.
    let t = x * std::f32::consts::LOG2_E + MAGIC;
    let fx = t - MAGIC;
    let n = magic_int(t);
    let r = x - fx * 0.693_359_4 + fx * 2.121_944_4e-4;
    let z = r * r;
    let p = ((((1.987_569_1e-4 * r + 1.398_2e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r
        + 0.166_666_65)
        * r
        + 0.5;
    let y = p * z + r + 1.0;
    // n is in -126..=127 after the clamp, so the exponent field stays in range.
    y * f32::from_bits(((n + 127) as u32) << 23)
}

/// 1.5·2²³: added to an f32 of magnitude below 2²², it rounds it to an integer (ties to even),
/// which [`magic_int`] reads back.
pub(crate) const MAGIC: f32 = 12_582_912.0;

/// The integer held by `t = v + MAGIC` (`v` rounded to nearest even), from its bits.
#[inline(always)]
pub(crate) fn magic_int(t: f32) -> i32 {
    (t.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32)
}

/// The error function in f32 (Numerical Recipes' Chebyshev fit of `erfc`, absolute error below
/// 1.2e-7 in exact arithmetic), branch-free so that it vectorises.
#[inline(always)]
pub(crate) fn erf_f32(x: f32) -> f32 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_2
        + t * (1.000_023_7
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_204
                                + t * (1.488_515_9 + t * (-0.822_152_2 + t * 0.170_872_77))))))));
    let r = t * exp_f32(poly);
    let e = 1.0 - r;
    if x >= 0.0 {
        e
    } else {
        -e
    }
}

/// `silu(gate) * up` for rows laid out as `[gate (inter) | up (inter)]`; returns `rows × inter`
/// in a buffer of [`crate::scratch::F32`].
pub(crate) fn swiglu(gate_up: &[f32], inter: usize) -> Vec<f32> {
    let rows = gate_up.len() / (2 * inter);
    let mut out = crate::scratch::F32.take(rows * inter);
    out.par_chunks_mut(inter)
        .zip(gate_up.par_chunks(2 * inter))
        .for_each(|(o, gu)| swiglu_row(o, gu, inter));
    out
}

multiversion! {
    fn swiglu_row(o: &mut [f32], gu: &[f32], inter: usize) {
        let (g, u) = gu.split_at(inter);
        for ((o, g), u) in o.iter_mut().zip(g).zip(u) {
            *o = g / (1.0 + exp_f32(-g)) * u;
        }
    }
}

/// [`dot`] compiled for baseline x86-64, whatever the CPU: the portable kernel's dot product.
pub(crate) fn dot_portable(a: &[f32], b: &[f32]) -> f32 {
    dot(a, b)
}

/// Dot product written so that the compiler vectorises it (eight independent accumulators).
#[inline(always)]
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let ca = a.chunks_exact(8);
    let cb = b.chunks_exact(8);
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    let mut s = acc.iter().sum::<f32>();
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

/// `out += w * v`, vectorisable.
#[inline(always)]
fn axpy(out: &mut [f32], w: f32, v: &[f32]) {
    for (o, x) in out.iter_mut().zip(v) {
        *o += w * x;
    }
}

/// Shape of a packed attention problem.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AttnShape {
    /// Query heads.
    pub(crate) heads: usize,
    /// Key/value heads (`heads` must be a multiple of it: grouped-query attention).
    pub(crate) kv_heads: usize,
    /// Size of one head.
    pub(crate) head_dim: usize,
    /// Whether a token attends only to itself and earlier tokens.
    pub(crate) causal: bool,
}

/// Attention over a packed batch. `qkv` holds, per token row, the query heads, then the key heads,
/// then the value heads (`(heads + 2·kv_heads) · head_dim` values); `seqs` are the `(offset, len)`
/// row ranges of the sequences. Returns the context, `rows × heads·head_dim`, in a buffer of
/// [`crate::scratch::F32`].
pub(crate) fn attention(qkv: &[f32], seqs: &[(usize, usize)], shape: AttnShape) -> Vec<f32> {
    let stride = (shape.heads + 2 * shape.kv_heads) * shape.head_dim;
    let hidden = shape.heads * shape.head_dim;
    let rows: usize = seqs.iter().map(|s| s.1).sum();
    let mut ctx = crate::scratch::F32.take_filled(rows * hidden, 0.0);

    // One mutable block of context rows per sequence, computed in parallel.
    let mut blocks: Vec<(&mut [f32], usize, usize)> = Vec::with_capacity(seqs.len());
    let mut rest = ctx.as_mut_slice();
    for &(off, len) in seqs {
        let (head, tail) = rest.split_at_mut(len * hidden);
        blocks.push((head, off, len));
        rest = tail;
    }
    #[cfg(target_arch = "x86_64")]
    let wide = crate::avx512::has_f32();
    #[cfg(not(target_arch = "x86_64"))]
    let wide = false;
    blocks.into_par_iter().for_each(|(out, off, len)| {
        let tokens = &qkv[off * stride..(off + len) * stride];
        #[cfg(target_arch = "x86_64")]
        if wide {
            crate::avx512::attend_sequence(out, tokens, len, shape);
            return;
        }
        let _ = wide;
        attend_sequence(out, tokens, len, shape);
    });
    ctx
}

multiversion! {
    /// Attention of one sequence: `tokens` are its `len` rows of packed query, key and value heads;
    /// `out` receives its `len` context rows.
    fn attend_sequence(out: &mut [f32], tokens: &[f32], len: usize, shape: AttnShape) {
        let AttnShape {
            heads,
            kv_heads,
            head_dim: d,
            causal,
        } = shape;
        let stride = (heads + 2 * kv_heads) * d;
        let hidden = heads * d;
        let group = heads / kv_heads;
        let scale = 1.0 / (d as f32).sqrt();
        let mut scores = vec![0.0f32; len];
        // Per head: the keys transposed (`d × len`, so that the scores of one query over all
        // keys are `d` vectorised axpys, no horizontal sums) and the values contiguous.
        let mut kt = vec![0.0f32; d * len];
        let mut vs = vec![0.0f32; len * d];
        for kvh in 0..kv_heads {
            let k_col = hidden + kvh * d;
            let v_col = hidden + kv_heads * d + kvh * d;
            for j in 0..len {
                let k = &tokens[j * stride + k_col..j * stride + k_col + d];
                for (t, kv) in k.iter().enumerate() {
                    kt[t * len + j] = *kv;
                }
                vs[j * d..(j + 1) * d]
                    .copy_from_slice(&tokens[j * stride + v_col..j * stride + v_col + d]);
            }
            for h in kvh * group..(kvh + 1) * group {
                for i in 0..len {
                    let q = &tokens[i * stride + h * d..i * stride + (h + 1) * d];
                    let n_keys = if causal { i + 1 } else { len };
                    let sc = &mut scores[..n_keys];
                    sc.fill(0.0);
                    for (t, qv) in q.iter().enumerate() {
                        axpy(sc, qv * scale, &kt[t * len..t * len + n_keys]);
                    }
                    let mut max = f32::NEG_INFINITY;
                    for s in sc.iter() {
                        max = max.max(*s);
                    }
                    for s in sc.iter_mut() {
                        *s = exp_f32(*s - max);
                    }
                    let inv = 1.0 / sum8(sc);
                    let o = &mut out[i * hidden + h * d..i * hidden + (h + 1) * d];
                    for (j, s) in sc.iter().enumerate() {
                        axpy(o, s * inv, &vs[j * d..(j + 1) * d]);
                    }
                }
            }
        }
    }
}

multiversion! {
    /// The softmax of `scores[..keys] · scale` in place; the scores from `keys` on become 0
    /// (masked keys).
    pub(crate) fn softmax_scaled(scores: &mut [f32], keys: usize, scale: f32) {
        let (live, masked) = scores.split_at_mut(keys);
        masked.fill(0.0);
        let mut max = f32::NEG_INFINITY;
        for s in live.iter() {
            max = max.max(*s);
        }
        for s in live.iter_mut() {
            *s = exp_f32((*s - max) * scale);
        }
        let inv = 1.0 / sum8(live);
        for s in live.iter_mut() {
            *s *= inv;
        }
    }
}

/// L2-normalises `v` in place (a zero vector stays zero).
pub(crate) fn l2_normalize(v: &mut [f32]) {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if n > 0.0 {
        for x in v {
            *x /= n;
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn pseudo(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2_654_435_761).max(1);
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s % 2000) as f32 / 1000.0 - 1.0
            })
            .collect()
    }

    #[test]
    fn erf_is_accurate() {
        // Reference values of erf.
        for (x, e) in [
            (0.0, 0.0),
            (0.5, 0.520_499_877_8),
            (1.0, 0.842_700_792_9),
            (-2.0, -0.995_322_265_0),
            (3.0, 0.999_977_909_5),
            (-0.1, -0.112_462_916_0),
        ] {
            assert!((erf_f32(x as f32) as f64 - e).abs() < 3e-7, "erf({x})");
        }
    }

    #[test]
    fn exp_is_accurate() {
        let mut x = -87.0f32;
        while x < 88.0 {
            let (got, want) = (exp_f32(x) as f64, (x as f64).exp());
            assert!(
                ((got - want) / want).abs() < 4e-7,
                "exp({x}) = {got}, want {want}"
            );
            x += 0.037;
        }
        assert_eq!(exp_f32(-1000.0), exp_f32(-87.0));
    }

    /// The AVX-512 attention (two tile products per head) against the portable one: packed
    /// batches of short and long sequences (key panels and value panels with remainders),
    /// bidirectional and causal, grouped-query heads.
    #[test]
    fn wide_attention_matches_the_portable_one() {
        #[cfg(target_arch = "x86_64")]
        {
            if !crate::avx512::has_f32() {
                eprintln!("SKIPPED: this CPU has no AVX-512F");
                return;
            }
            for (heads, kv_heads, d, causal) in [
                (2, 2, 32, false),
                (4, 2, 16, true),
                (2, 1, 40, true),
                (3, 3, 64, false),
            ] {
                let shape = AttnShape {
                    heads,
                    kv_heads,
                    head_dim: d,
                    causal,
                };
                let stride = (heads + 2 * kv_heads) * d;
                let lens = [1usize, 5, 32, 33, 70];
                for (i, &len) in lens.iter().enumerate() {
                    let tokens = pseudo(len * stride, 20 + i as u32);
                    let hidden = heads * d;
                    let mut want = vec![0.0f32; len * hidden];
                    attend_sequence(&mut want, &tokens, len, shape);
                    let mut got = vec![f32::NAN; len * hidden];
                    crate::avx512::attend_sequence(&mut got, &tokens, len, shape);
                    for (g, w) in got.iter().zip(&want) {
                        assert!((g - w).abs() <= 1e-5, "{shape:?} len {len}: {g} vs {w}");
                    }
                }
            }
        }
    }

    #[test]
    fn attention_causal_first_token_is_its_value() {
        // One sequence, one head: the first token can only see itself.
        let d = 4;
        let qkv = pseudo(3 * 3 * d, 5);
        let shape = AttnShape {
            heads: 1,
            kv_heads: 1,
            head_dim: d,
            causal: true,
        };
        let ctx = attention(&qkv, &[(0, 3)], shape);
        assert_eq!(&ctx[..d], &qkv[2 * d..3 * d]);
    }
}
