//! Int8 sketches of a matrix's rows, with a bound on their error, so that an exact scan reads a
//! byte per element for most rows instead of two or four.
//!
//! Row `x` is stored as codes `c` (i8) and a scale `s`: `x̂ = s·c`, `e = x − x̂`. A query `q` is
//! coded the same way in i16 (`q̂ = t·d`, `f = q − q̂`), and `c·d` is an exact integer sum, so
//! `x·q = x̂·q̂ + e·q + x̂·f` and, by Cauchy–Schwarz, `|x·q − s·t·(c·d)| ≤ |e||q| + |x̂||f|`, padded
//! for the rounding of both dot products. A top-k scan estimates each row from its codes and
//! computes the exact dot product only where the estimate plus the bound reaches the current
//! bar: a row it skips cannot be in the top `k`, so the result is the exact scan's, bit for bit.
//! At 384 dimensions the codes are half the bytes of f16 rows.

use rayon::prelude::*;

use half::f16;
use half::slice::HalfFloatSliceExt;

use crate::{ComputeError, MatrixData, MatrixView};

/// The int8 sketches of a matrix's rows.
#[derive(Debug, Clone, Default)]
pub struct Sketch {
    dim: usize,
    codes: Vec<i8>,
    rows: Vec<RowCode>,
}

/// A row's scale, the bound on its error's norm `|e|` (padded) and its sketch's norm `|x̂|`.
#[derive(Debug, Clone, Copy, Default)]
struct RowCode {
    scale: f32,
    radius: f32,
    norm: f32,
}

/// A borrowed [`Sketch`], or rows of one.
#[derive(Debug, Clone, Copy)]
pub struct SketchView<'a> {
    dim: usize,
    codes: &'a [i8],
    rows: &'a [RowCode],
}

/// A query coded for a scan of sketches.
#[derive(Debug, Clone)]
pub struct SketchQuery {
    codes: Vec<i16>,
    /// The codes as two bytes each, `code = 256·high + low` (both i8), padded with zeros to a
    /// whole number of 64-byte blocks: the operands of u8 × i8 dot products (AVX-512 VNNI).
    high: Vec<i8>,
    low: Vec<i8>,
    /// `128·Σ code`, modulo 2³²: what a row's codes read as `c + 128` (u8) add to its sum.
    shift: i32,
    scale: f32,
    /// An upper bound on `|q|`.
    norm: f32,
    /// An upper bound on `|f|`, the query's coding error.
    radius: f32,
}

/// Rows sketched per rayon task.
const CHUNK_ROWS: usize = 1024;

/// The largest query code: the largest whose high byte (`code = 256·high + low`, `low` in
/// `-128..=127`) is an i8.
const QUERY_LIMIT: i32 = 127 * 256 + 127;

/// Rows whose integer dot products [`SketchView::bounds_into`] computes in one call.
const BLOCK_ROWS: usize = 256;

/// Relative padding of every bound for the rounding of f32 dot products: the exact scan's dot
/// product adds each of its 32 lanes in sequence, so it is within about (n/32 + 12)·2⁻²⁴ of
/// Σ|xᵢqᵢ| ≤ |x||q| of the real one — under 1e-4 up to about 50,000 dimensions — and the
/// estimate's three roundings are far smaller; the padding is applied to both.
const ROUNDING: f64 = 1e-4;

impl Sketch {
    /// Sketches every row of `matrix`.
    pub fn of(matrix: &MatrixView<'_>) -> Sketch {
        let (n, dim) = (matrix.rows(), matrix.dim());
        let mut codes = vec![0i8; n * dim];
        let mut rows = vec![RowCode::default(); n];
        codes
            .par_chunks_mut(CHUNK_ROWS * dim.max(1))
            .zip(rows.par_chunks_mut(CHUNK_ROWS))
            .enumerate()
            .for_each(|(c, (codes, rows))| {
                let mut row = vec![0f32; dim];
                for (j, (code, out)) in codes
                    .chunks_exact_mut(dim.max(1))
                    .zip(rows.iter_mut())
                    .enumerate()
                {
                    let i = c * CHUNK_ROWS + j;
                    *out = match matrix.data() {
                        // Converted as they are coded, where the CPU can.
                        MatrixData::F16(d) => {
                            code_row_f16(&d[i * dim..(i + 1) * dim], code, &mut row)
                        }
                        _ => {
                            matrix.row_f32(i, &mut row);
                            code_row(&row, code)
                        }
                    };
                }
            });
        Sketch { dim, codes, rows }
    }

    /// Sketches rows `from..` of `matrix` in place of those held from `from` on; the rows before
    /// `from` are kept (they must be `matrix`'s: rows that grow at their end, as a vector file's
    /// do). The sketch is then [`Sketch::of`] `matrix`'s.
    pub fn update(&mut self, matrix: &MatrixView<'_>, from: usize) -> Result<(), ComputeError> {
        if matrix.dim() != self.dim && !self.rows.is_empty() {
            return Err(ComputeError::WrongDimension {
                what: "rows to sketch",
                expected: self.dim,
                got: matrix.dim(),
            });
        }
        let from = from.min(self.rows.len()).min(matrix.rows());
        self.dim = matrix.dim();
        self.codes.truncate(from * self.dim);
        self.rows.truncate(from);
        let mut row = vec![0f32; self.dim];
        let mut code = vec![0i8; self.dim];
        for i in from..matrix.rows() {
            matrix.row_f32(i, &mut row);
            self.rows.push(code_row(&row, &mut code));
            self.codes.extend_from_slice(&code);
        }
        Ok(())
    }

    /// Sketches `x` as row `i` (an existing row, or the next one).
    pub fn set_row(&mut self, i: usize, x: &[f32]) -> Result<(), ComputeError> {
        if x.len() != self.dim {
            return Err(ComputeError::WrongDimension {
                what: "row to sketch",
                expected: self.dim,
                got: x.len(),
            });
        }
        if i > self.rows.len() {
            return Err(ComputeError::IndexOutOfRange {
                what: "sketch rows (or the next)",
                index: i as u64,
                len: self.rows.len(),
            });
        }
        let mut code = vec![0i8; self.dim];
        let row = code_row(x, &mut code);
        if i == self.rows.len() {
            self.rows.push(row);
            self.codes.extend_from_slice(&code);
        } else {
            self.rows[i] = row;
            self.codes[i * self.dim..(i + 1) * self.dim].copy_from_slice(&code);
        }
        Ok(())
    }

    /// Rows sketched.
    pub fn rows(&self) -> usize {
        self.rows.len()
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.codes.len() + std::mem::size_of::<RowCode>() * self.rows.len()
    }

    /// The view of every row.
    pub fn view(&self) -> SketchView<'_> {
        SketchView {
            dim: self.dim,
            codes: &self.codes,
            rows: &self.rows,
        }
    }
}

/// Codes `x` into `code` (`|code| ≤ limit`, rounded half away from zero; any code would do, the
/// error being measured from the code chosen); returns the scale, `|x − x̂|` and `|x̂|`, the
/// norms in f64, or `None` when `x` has no finite scale.
fn code_into<T: Copy>(
    x: &[f32],
    code: &mut [T],
    limit: i32,
    from: impl Fn(i32) -> T,
) -> Option<(f32, f64, f64)> {
    let max = x.iter().fold(0f32, |m, v| m.max(v.abs()));
    if !max.is_finite() || x.iter().any(|v| v.is_nan()) {
        return None;
    }
    let scale = max / limit as f32;
    let (mut err, mut norm) = (0f64, 0f64);
    for (v, c) in x.iter().zip(code.iter_mut()) {
        let q = if scale > 0.0 {
            let r = v / scale;
            ((r + 0.5f32.copysign(r)) as i32).clamp(-limit, limit)
        } else {
            0
        };
        *c = from(q);
        let hat = f64::from(scale) * f64::from(q);
        err += (f64::from(*v) - hat).powi(2);
        norm += hat.powi(2);
    }
    Some((scale, err.sqrt(), norm.sqrt()))
}

/// Codes row `x` into `code`: in f32 lanes where the CPU can ([`code_row_lanes`]), otherwise in
/// f64 ([`code_row_f64`]).
fn code_row(x: &[f32], code: &mut [i8]) -> RowCode {
    #[cfg(target_arch = "x86_64")]
    if let Some(row) = code_row_lanes(Lanes::F32(x), code) {
        return row;
    }
    code_row_f64(x, code)
}

/// [`code_row`] of an f16 row: converted as it is coded where the CPU can code in f32 lanes
/// (the same values, so the same codes and bounds), else through `buf`.
fn code_row_f16(x: &[f16], code: &mut [i8], buf: &mut [f32]) -> RowCode {
    #[cfg(target_arch = "x86_64")]
    if let Some(row) = code_row_lanes(Lanes::F16(x), code) {
        return row;
    }
    x.convert_to_f32_slice(buf);
    code_row_f64(buf, code)
}

/// Codes row `x` in f32 lanes: with AVX-512 where the CPU has it, else with AVX2, FMA and F16C
/// where it has them (detected at run time); `None` without them, or for a row the coder
/// leaves to the f64 path.
#[cfg(target_arch = "x86_64")]
fn code_row_lanes(x: Lanes<'_>, code: &mut [i8]) -> Option<RowCode> {
    match simd() {
        // SAFETY: the CPU has the features.
        #[allow(unsafe_code)]
        Simd::Avx512 | Simd::Avx512Vnni => unsafe { code_row_avx512(x, code) },
        Simd::Avx2 if is_x86_feature_detected!("fma") && is_x86_feature_detected!("f16c") => {
            // SAFETY: the CPU has the features (AVX2 and AVX with it).
            #[allow(unsafe_code)]
            unsafe {
                code_row_avx2(x, code)
            }
        }
        _ => None,
    }
}

/// A row that [`code_row_avx512`] reads 16 lanes at a time, as f32.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
enum Lanes<'a> {
    F32(&'a [f32]),
    F16(&'a [f16]),
}

#[cfg(target_arch = "x86_64")]
impl Lanes<'_> {
    fn len(&self) -> usize {
        match self {
            Lanes::F32(x) => x.len(),
            Lanes::F16(x) => x.len(),
        }
    }

    /// Lanes `16·b..` under `mask` (the others zero), as f32: an f16 value converts exactly.
    ///
    /// # Safety
    /// The CPU has AVX-512F, BW and VL; the mask keeps the load inside the row.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    #[inline]
    #[allow(unsafe_code)]
    unsafe fn load(
        &self,
        b: usize,
        mask: std::arch::x86_64::__mmask16,
    ) -> std::arch::x86_64::__m512 {
        use std::arch::x86_64::*;
        // SAFETY: as the caller promises.
        unsafe {
            match self {
                Lanes::F32(x) => _mm512_maskz_loadu_ps(mask, x.as_ptr().add(16 * b)),
                Lanes::F16(x) => _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(
                    mask,
                    x.as_ptr().add(16 * b).cast(),
                )),
            }
        }
    }
}

/// The longest row [`code_row_avx2`] codes.
#[cfg(target_arch = "x86_64")]
const AVX2_MAX_DIM: usize = 1024;

/// [`code_row_avx512`] with AVX2, FMA (and F16C for an f16 row), 8 lanes at a time, from a
/// copy of the row in f32 padded with zeros: the same codes, and bounds padded as there, for
/// rows of at most [`AVX2_MAX_DIM`] dimensions (a sum of `n` squares fused into 8 lanes is
/// within `(n/8 + 4)·u` of the real one, under 1e-5 up to there).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx,avx2,fma,f16c")]
#[allow(unsafe_code)]
unsafe fn code_row_avx2(x: Lanes<'_>, code: &mut [i8]) -> Option<RowCode> {
    use std::arch::x86_64::*;
    let n = x.len();
    if n > AVX2_MAX_DIM || n != code.len() {
        return None;
    }
    let mut row = [0f32; AVX2_MAX_DIM];
    match x {
        Lanes::F32(x) => row[..n].copy_from_slice(x),
        // An f16 value converts exactly.
        Lanes::F16(x) => x.convert_to_f32_slice(&mut row[..n]),
    }
    let blocks = n.div_ceil(8);
    let at = |b: usize| row[8 * b..].as_ptr();
    let mut lanes = [0f32; 8];
    let mut sum = |v: __m256| -> f32 {
        // SAFETY: `lanes` holds eight values.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), v) };
        let l = &lanes;
        ((l[0] + l[4]) + (l[1] + l[5])) + ((l[2] + l[6]) + (l[3] + l[7]))
    };
    let abs = _mm256_castsi256_ps(_mm256_set1_epi32(i32::MAX));
    let (mut max, mut sum_x) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    for b in 0..blocks {
        // SAFETY: block `b` is inside `row`.
        let v = unsafe { _mm256_loadu_ps(at(b)) };
        max = _mm256_max_ps(max, _mm256_and_ps(v, abs));
        sum_x = _mm256_fmadd_ps(v, v, sum_x);
    }
    let max = {
        let m = _mm_max_ps(_mm256_castps256_ps128(max), _mm256_extractf128_ps::<1>(max));
        let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)))
    };
    let norm_x = sum(sum_x);
    // A NaN or ∞ anywhere makes the sum of squares NaN or ∞.
    if !norm_x.is_finite() || !max.is_finite() || max < 1.0 / 1_048_576.0 {
        return None;
    }
    let scale = max / 127.0;
    let (inverse, scales) = (_mm256_set1_ps(1.0 / scale), _mm256_set1_ps(scale));
    let (low, high) = (_mm256_set1_ps(-127.0), _mm256_set1_ps(127.0));
    let (mut err, mut norm) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    let mut codes = [0i8; AVX2_MAX_DIM];
    for b in 0..blocks {
        // SAFETY: block `b` is inside `row`.
        let v = unsafe { _mm256_loadu_ps(at(b)) };
        let q = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
            _mm256_mul_ps(v, inverse),
        );
        let q = _mm256_min_ps(_mm256_max_ps(q, low), high);
        // Narrowed in a register: each half's four values packed to bytes, the halves' first
        // four bytes side by side.
        let words = _mm256_packs_epi32(_mm256_cvtps_epi32(q), _mm256_setzero_si256());
        let bytes = _mm256_packs_epi16(words, _mm256_setzero_si256());
        let eight = _mm_unpacklo_epi32(
            _mm256_castsi256_si128(bytes),
            _mm256_extracti128_si256::<1>(bytes),
        );
        // SAFETY: bytes `8·b..8·b + 8` are inside `codes`.
        unsafe { _mm_storel_epi64(codes[8 * b..].as_mut_ptr().cast(), eight) };
        let hat = _mm256_mul_ps(scales, q);
        let e = _mm256_sub_ps(v, hat);
        err = _mm256_fmadd_ps(e, e, err);
        norm = _mm256_fmadd_ps(hat, hat, norm);
    }
    code.copy_from_slice(&codes[..n]);
    lanes_row_code(scale, sum(err), sum(norm), norm_x)
}

/// A row's code from the sums of squares a coder in f32 lanes found — of the error, of the
/// sketch, of the row — padded for their rounding as [`code_row_avx512`] says; `None` when
/// they are not finite.
#[cfg(target_arch = "x86_64")]
fn lanes_row_code(scale: f32, err: f32, norm: f32, norm_x: f32) -> Option<RowCode> {
    let err = f64::from(err).sqrt();
    let norm = f64::from(norm).sqrt();
    if !err.is_finite() || !norm.is_finite() {
        return None;
    }
    let pad = 1.0 + 1e-5;
    let norm_x = f64::from(norm_x).sqrt() * pad;
    let norm = norm * pad;
    let radius = (err * pad + 2e-6 * norm + ROUNDING * (norm_x + norm)) * (1.0 + 1e-6);
    Some(RowCode {
        scale,
        radius: radius as f32 * (1.0 + 1e-6),
        norm: (norm * (1.0 + 1e-6)) as f32 * (1.0 + 1e-6),
    })
}

/// [`code_row_f64`] in f32, 16 lanes at a time; `None` for a row it leaves to the f64 path:
/// one longer than 2,048, with a value that is not finite, whose sums overflow, or whose
/// largest value is under 2⁻²⁰ (squares that underflow lose at most `n·2⁻¹⁴⁹` of a sum, far
/// under the bound's `ROUNDING·|x|` from there on). Codes are rounded half to even.
///
/// Each element's error `v − fl(s·q)` is within `u·(|x̂ᵢ| + |eᵢ|)` of the real `eᵢ`
/// (`u = 2⁻²⁴`), so `|e| ≤ (1 + u)·|e'| + u·|x̂|`, and a sum of `n` squares fused into 16 lanes
/// is within `(n/16 + 5)·u` of the real one (under 1e-5 up to 2,048 dimensions): the norms
/// are padded by 1e-5, and the error's norm by 1e-5 and 2e-6 · `|x̂|`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
#[allow(unsafe_code)]
unsafe fn code_row_avx512(x: Lanes<'_>, code: &mut [i8]) -> Option<RowCode> {
    use std::arch::x86_64::*;
    let n = x.len();
    if n > 2048 || n != code.len() {
        return None;
    }
    // The last block's lanes past the row read as zeros: they add nothing to any sum.
    let blocks = n.div_ceil(16);
    let mask = |b: usize| -> __mmask16 {
        let left = n - 16 * b;
        if left >= 16 {
            0xFFFF
        } else {
            (1u16 << left) - 1
        }
    };
    let cp = code.as_mut_ptr();
    let (mut max, mut sum_x) = (_mm512_setzero_ps(), _mm512_setzero_ps());
    for b in 0..blocks {
        // SAFETY: the mask keeps the load inside the row.
        let v = unsafe { x.load(b, mask(b)) };
        max = _mm512_max_ps(max, _mm512_abs_ps(v));
        sum_x = _mm512_fmadd_ps(v, v, sum_x);
    }
    let max = _mm512_reduce_max_ps(max);
    let norm_x = _mm512_reduce_add_ps(sum_x);
    // A NaN or ∞ anywhere makes the sum of squares NaN or ∞.
    if !norm_x.is_finite() || !max.is_finite() || max < 1.0 / 1_048_576.0 {
        return None;
    }
    let scale = max / 127.0;
    let (inverse, scales) = (_mm512_set1_ps(1.0 / scale), _mm512_set1_ps(scale));
    let (low, high) = (_mm512_set1_ps(-127.0), _mm512_set1_ps(127.0));
    let (mut err, mut norm) = (_mm512_setzero_ps(), _mm512_setzero_ps());
    for b in 0..blocks {
        let m = mask(b);
        // SAFETY: as above, for the loads and the stores.
        let v = unsafe { x.load(b, m) };
        let q = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
            _mm512_mul_ps(v, inverse),
        );
        let q = _mm512_min_ps(_mm512_max_ps(q, low), high);
        // Narrowed in a register, then stored (a narrowing store to memory is slow on some
        // CPUs).
        let bytes = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(q));
        unsafe { _mm_mask_storeu_epi8(cp.add(16 * b).cast(), m, bytes) };
        let hat = _mm512_mul_ps(scales, q);
        let e = _mm512_sub_ps(v, hat);
        err = _mm512_fmadd_ps(e, e, err);
        norm = _mm512_fmadd_ps(hat, hat, norm);
    }
    lanes_row_code(
        scale,
        _mm512_reduce_add_ps(err),
        _mm512_reduce_add_ps(norm),
        norm_x,
    )
}

/// Codes row `x` into `code` with its error and norms summed in f64.
fn code_row_f64(x: &[f32], code: &mut [i8]) -> RowCode {
    match code_into(x, code, 127, |q| q as i8) {
        Some((scale, err, norm)) => {
            let norm_x: f64 = x.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>().sqrt();
            let radius = (err + ROUNDING * (norm_x + norm)) * (1.0 + 1e-6);
            RowCode {
                scale,
                radius: radius as f32 * (1.0 + 1e-6),
                norm: (norm * (1.0 + 1e-6)) as f32 * (1.0 + 1e-6),
            }
        }
        // No bound holds: +∞ makes every scan score this row exactly.
        None => {
            code.fill(0);
            RowCode {
                scale: 0.0,
                radius: f32::INFINITY,
                norm: 0.0,
            }
        }
    }
}

impl SketchQuery {
    /// Codes `q` for rows of `q.len()` dimensions, in i16 scaled so that no integer sum of a
    /// row's products overflows an i32.
    pub fn new(q: &[f32]) -> SketchQuery {
        let limit = ((i32::MAX as usize / 127 / q.len().max(1)) as i32 - 1).clamp(1, QUERY_LIMIT);
        let mut codes = vec![0i16; q.len()];
        let coded = code_into(q, &mut codes, limit, |v| v as i16);
        let padded = q.len().div_ceil(64) * 64;
        let (mut high, mut low) = (vec![0i8; padded], vec![0i8; padded]);
        let mut sum = 0i64;
        for ((&c, h), l) in codes.iter().zip(&mut high).zip(&mut low) {
            let c = i32::from(c);
            let rest = (c + 128).rem_euclid(256) - 128;
            // |c| ≤ QUERY_LIMIT: both parts fit.
            (*h, *l) = (((c - rest) / 256) as i8, rest as i8);
            sum += i64::from(c);
        }
        let shift = (sum * 128) as i32;
        match coded {
            Some((scale, err, _)) => {
                let norm: f64 = q.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>().sqrt();
                SketchQuery {
                    codes,
                    high,
                    low,
                    shift,
                    scale,
                    norm: (norm * (1.0 + 1e-6)) as f32 * (1.0 + 1e-6),
                    radius: (err * (1.0 + 1e-6)) as f32 * (1.0 + 1e-6),
                }
            }
            None => SketchQuery {
                codes,
                high,
                low,
                shift,
                scale: 0.0,
                norm: f32::INFINITY,
                radius: f32::INFINITY,
            },
        }
    }
}

impl<'a> SketchView<'a> {
    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows.len()
    }

    /// Dimension of each row.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Rows `start..` (empty when `start` is past the end).
    pub fn rows_from(&self, start: usize) -> SketchView<'a> {
        let start = start.min(self.rows());
        SketchView {
            dim: self.dim,
            codes: &self.codes[start * self.dim..],
            rows: &self.rows[start..],
        }
    }

    /// Bounds `(lower, upper)` on row `i`'s dot product with the query `q` codes. A NaN bound
    /// must be taken as no bound.
    #[inline]
    pub fn bounds(&self, i: usize, q: &SketchQuery) -> (f32, f32) {
        let code = &self.codes[i * self.dim..(i + 1) * self.dim];
        bound(self.rows[i], q, dot_i8_i16(code, &q.codes))
    }

    /// [`SketchView::bounds`] of rows `start..start + out.len()`, into `out`: the same bounds,
    /// the integer sums computed a block of rows at a time (with AVX-512 VNNI where the CPU has
    /// it).
    pub fn bounds_into(&self, start: usize, q: &SketchQuery, out: &mut [(f32, f32)]) {
        let mut dots = [0i32; BLOCK_ROWS];
        for (b, out) in out.chunks_mut(BLOCK_ROWS).enumerate() {
            let first = start + b * BLOCK_ROWS;
            let dots = &mut dots[..out.len()];
            self.dots_into(first, q, dots);
            for ((o, &dot), &r) in out.iter_mut().zip(dots.iter()).zip(&self.rows[first..]) {
                *o = bound(r, q, dot);
            }
        }
    }

    /// The integer dot products of rows `start..start + out.len()` with `q`'s codes.
    fn dots_into(&self, start: usize, q: &SketchQuery, out: &mut [i32]) {
        let dim = self.dim;
        let codes = &self.codes[start * dim..(start + out.len()) * dim];
        #[cfg(target_arch = "x86_64")]
        if matches!(simd(), Simd::Avx512Vnni) && q.codes.len() == dim && dim > 0 {
            // SAFETY: the CPU has the features; `codes` holds `out.len()` rows of `dim`, and
            // `q.high`, `q.low` `dim` values padded to whole 64-byte blocks.
            #[allow(unsafe_code)]
            unsafe {
                dots_vnni(codes, dim, q, out)
            };
            return;
        }
        for (o, code) in out.iter_mut().zip(codes.chunks_exact(dim.max(1))) {
            *o = dot_i8_i16(code, &q.codes);
        }
    }
}

/// A row's bounds from its integer dot product with the query's codes.
#[inline]
fn bound(r: RowCode, q: &SketchQuery, dot: i32) -> (f32, f32) {
    let estimate = (r.scale * q.scale) * dot as f32;
    let radius = r.radius * q.norm + r.norm * q.radius + ROUNDING as f32 * r.norm * q.norm;
    (estimate - radius, estimate + radius)
}

/// The integer dot products of consecutive rows of `dim` codes with `q`'s, 64 codes at a time:
/// each code read as the u8 `c + 128` and multiplied with the query's high and low bytes
/// (`vpdpbusd`), so that `Σ c·q = 256·Σ (c + 128)·high + Σ (c + 128)·low − 128·Σ q` — in
/// wrapping i32 arithmetic, exact because the sum itself fits ([`SketchQuery::new`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
#[allow(unsafe_code)]
unsafe fn dots_vnni(codes: &[i8], dim: usize, q: &SketchQuery, out: &mut [i32]) {
    use std::arch::x86_64::*;
    let blocks = dim.div_ceil(64);
    let last: __mmask64 = match dim % 64 {
        0 => !0,
        left => (1u64 << left) - 1,
    };
    let flip = _mm512_set1_epi8(i8::MIN);
    let (high, low) = (q.high.as_ptr(), q.low.as_ptr());
    for (r, o) in out.iter_mut().enumerate() {
        let row = codes[r * dim..].as_ptr();
        let (mut h, mut l) = (_mm512_setzero_si512(), _mm512_setzero_si512());
        for b in 0..blocks {
            let mask = if b + 1 == blocks { last } else { !0 };
            // SAFETY: the mask keeps the row's load inside its `dim` codes; the query's parts
            // hold `blocks` whole blocks. Codes past the row read as 0, i.e. 128 as u8, and
            // meet the query's zero padding.
            unsafe {
                let x = _mm512_xor_si512(_mm512_maskz_loadu_epi8(mask, row.add(64 * b)), flip);
                h = _mm512_dpbusd_epi32(h, x, _mm512_loadu_si512(high.add(64 * b).cast()));
                l = _mm512_dpbusd_epi32(l, x, _mm512_loadu_si512(low.add(64 * b).cast()));
            }
        }
        let sum = _mm512_add_epi32(_mm512_slli_epi32::<8>(h), l);
        *o = _mm512_reduce_add_epi32(sum).wrapping_sub(q.shift);
    }
}

/// Checks that a sketch fits a matrix: the same rows and dimension.
pub(crate) fn check_fits(
    sketch: &SketchView<'_>,
    rows: usize,
    dim: usize,
) -> Result<(), ComputeError> {
    if sketch.dim != dim || sketch.rows() != rows {
        return Err(ComputeError::WrongDimension {
            what: "sketch (rows × dim of its matrix)",
            expected: rows * dim,
            got: sketch.rows() * sketch.dim,
        });
    }
    Ok(())
}

/// The exact integer dot product of i8 codes with i16 codes (the same on every path), with
/// AVX-512BW or AVX2 where the CPU has them (detected at run time).
#[inline]
fn dot_i8_i16(a: &[i8], b: &[i16]) -> i32 {
    #[cfg(target_arch = "x86_64")]
    if a.len() == b.len() {
        match simd() {
            // SAFETY: the CPU has the features; the slices have the same length.
            #[allow(unsafe_code)]
            Simd::Avx512 | Simd::Avx512Vnni => return unsafe { dot_i8_i16_avx512(a, b) },
            #[allow(unsafe_code)]
            Simd::Avx2 => return unsafe { dot_i8_i16_avx2(a, b) },
            Simd::None => {}
        }
    }
    dot_i8_i16_scalar(a, b)
}

fn dot_i8_i16_scalar(a: &[i8], b: &[i16]) -> i32 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| i32::from(x) * i32::from(y))
        .sum()
}

#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
enum Simd {
    /// AVX-512 F and BW with VNNI: the block scan of [`dots_vnni`] too.
    Avx512Vnni,
    Avx512,
    Avx2,
    None,
}

#[cfg(target_arch = "x86_64")]
fn simd() -> Simd {
    static HAS: std::sync::OnceLock<Simd> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| {
        if is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vl")
        {
            if is_x86_feature_detected!("avx512vnni") {
                Simd::Avx512Vnni
            } else {
                Simd::Avx512
            }
        } else if is_x86_feature_detected!("avx2") {
            Simd::Avx2
        } else {
            Simd::None
        }
    })
}

/// 32 codes at a time: widened to i16, multiplied and summed in pairs into i32 lanes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
#[allow(unsafe_code)]
unsafe fn dot_i8_i16_avx512(a: &[i8], b: &[i16]) -> i32 {
    use std::arch::x86_64::*;
    let n = a.len();
    let chunks = n / 32;
    let mut acc = _mm512_setzero_si512();
    for c in 0..chunks {
        // SAFETY: 32 values from `c * 32`, inside both slices (`chunks * 32 <= n`).
        unsafe {
            let x = _mm512_cvtepi8_epi16(_mm256_loadu_si256(a.as_ptr().add(c * 32).cast()));
            let y = _mm512_loadu_si512(b.as_ptr().add(c * 32).cast());
            acc = _mm512_add_epi32(acc, _mm512_madd_epi16(x, y));
        }
    }
    _mm512_reduce_add_epi32(acc) + dot_i8_i16_scalar(&a[chunks * 32..], &b[chunks * 32..])
}

/// 16 codes at a time, as [`dot_i8_i16_avx512`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(unsafe_code)]
unsafe fn dot_i8_i16_avx2(a: &[i8], b: &[i16]) -> i32 {
    use std::arch::x86_64::*;
    let n = a.len();
    let chunks = n / 16;
    let mut acc = _mm256_setzero_si256();
    for c in 0..chunks {
        // SAFETY: 16 values from `c * 16`, inside both slices (`chunks * 16 <= n`).
        unsafe {
            let x = _mm256_cvtepi8_epi16(_mm_loadu_si128(a.as_ptr().add(c * 16).cast()));
            let y = _mm256_loadu_si256(b.as_ptr().add(c * 16).cast());
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(x, y));
        }
    }
    let mut l = [0i32; 8];
    // SAFETY: `l` holds 8 values.
    unsafe { _mm256_storeu_si256(l.as_mut_ptr().cast(), acc) };
    l.iter().sum::<i32>() + dot_i8_i16_scalar(&a[chunks * 16..], &b[chunks * 16..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::{unit_rows, Rng};
    use crate::topk::dot;

    #[test]
    fn the_bound_holds_for_every_row_and_query() {
        let mut rng = Rng::new(7);
        for dim in [1, 7, 16, 384] {
            let mut rows = unit_rows(&mut rng, 300, dim);
            // Rows of other norms and shapes: zero, one large value, tiny values.
            rows[..dim].fill(0.0);
            rows[dim..2 * dim].fill(0.0);
            rows[dim] = 3.0;
            for x in &mut rows[2 * dim..3 * dim] {
                *x *= 1e-6;
            }
            let m = MatrixView::f32(&rows, dim).unwrap();
            let sketch = Sketch::of(&m);
            let queries = unit_rows(&mut rng, 20, dim);
            for q in queries.chunks_exact(dim) {
                let coded = SketchQuery::new(q);
                for (i, row) in rows.chunks_exact(dim).enumerate() {
                    let exact = dot(row, q);
                    let (lower, upper) = sketch.view().bounds(i, &coded);
                    assert!(
                        lower <= exact && exact <= upper,
                        "dim {dim} row {i}: {exact} ∉ [{lower}, {upper}]"
                    );
                    // And tight enough to prune: within 0.1 of the truth.
                    assert!(upper - lower < 0.1, "dim {dim} row {i}: [{lower}, {upper}]");
                }
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn rows_coded_with_avx512_bound_their_error_as_tightly_as_in_f64() {
        if !matches!(simd(), Simd::Avx512 | Simd::Avx512Vnni) {
            eprintln!("skipped: this CPU has no AVX-512");
            return;
        }
        // SAFETY: the CPU has the features (checked above).
        #[allow(unsafe_code)]
        let code_row_avx =
            |x: &[f32], code: &mut [i8]| unsafe { code_row_avx512(Lanes::F32(x), code) };
        rows_coded_in_f32_bound_their_error_as_tightly_as_in_f64(code_row_avx, 2048);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn rows_coded_with_avx2_bound_their_error_as_tightly_as_in_f64() {
        if !(is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c"))
        {
            eprintln!("skipped: this CPU has no AVX2, FMA or F16C");
            return;
        }
        // SAFETY: the CPU has the features (checked above).
        #[allow(unsafe_code)]
        let code_row_avx =
            |x: &[f32], code: &mut [i8]| unsafe { code_row_avx2(Lanes::F32(x), code) };
        rows_coded_in_f32_bound_their_error_as_tightly_as_in_f64(code_row_avx, 1024);
        // An f16 row codes as its f32 values do.
        let mut rng = Rng::new(23);
        for dim in [1, 7, 8, 9, 384, 1000] {
            let x: Vec<f16> = unit_rows(&mut rng, 1, dim)
                .iter()
                .map(|&v| f16::from_f32(v))
                .collect();
            let wide: Vec<f32> = x.iter().map(|v| v.to_f32()).collect();
            let (mut a, mut b) = (vec![0i8; dim], vec![0i8; dim]);
            // SAFETY: the CPU has the features (checked above).
            #[allow(unsafe_code)]
            let from_f16 = unsafe { code_row_avx2(Lanes::F16(&x), &mut a) }.unwrap();
            let from_f32 = code_row_avx(&wide, &mut b).unwrap();
            assert_eq!(a, b, "dim {dim}");
            assert_eq!(
                format!("{from_f16:?}"),
                format!("{from_f32:?}"),
                "dim {dim}"
            );
        }
    }

    /// Checks a coder of rows in f32 against [`code_row_f64`]: the same codes, a radius that
    /// bounds the real error and is as tight, for rows up to `max_dim` long.
    #[cfg(target_arch = "x86_64")]
    fn rows_coded_in_f32_bound_their_error_as_tightly_as_in_f64(
        code_row_avx: impl Fn(&[f32], &mut [i8]) -> Option<RowCode>,
        max_dim: usize,
    ) {
        let mut rng = Rng::new(11);
        for dim in [1, 7, 8, 9, 16, 17, 384, 1000, max_dim] {
            let mut rows = unit_rows(&mut rng, 50, dim);
            for x in &mut rows[..dim] {
                *x *= 1e4;
            }
            for (i, x) in rows.chunks_exact(dim).enumerate() {
                let (mut lanes, mut wide) = (vec![0i8; dim], vec![0i8; dim]);
                let coded = code_row_avx(x, &mut lanes).expect("a unit row codes in f32");
                let exact = code_row_f64(x, &mut wide);
                assert_eq!(lanes, wide, "dim {dim} row {i}: the codes");
                // The real error's norm, from the codes chosen, in f64.
                let err: f64 = x
                    .iter()
                    .zip(&lanes)
                    .map(|(&v, &c)| (f64::from(v) - f64::from(coded.scale) * f64::from(c)).powi(2))
                    .sum::<f64>()
                    .sqrt();
                assert!(f64::from(coded.radius) >= err, "dim {dim} row {i}");
                assert!(coded.norm >= exact.norm / (1.0 + 1e-6), "dim {dim} row {i}");
                assert!(
                    coded.radius <= exact.radius * 1.001 + 3e-6 * exact.norm
                        && coded.norm <= exact.norm * 1.001,
                    "dim {dim} row {i}: {coded:?} against {exact:?}"
                );
            }
        }
        // Rows left to f64: not finite, tiny, overflowing, too long.
        let mut code = vec![0i8; 4];
        assert!(code_row_avx(&[1.0, f32::NAN, 0.0, 0.0], &mut code).is_none());
        assert!(code_row_avx(&[1.0, f32::INFINITY, 0.0, 0.0], &mut code).is_none());
        assert!(code_row_avx(&[1e-7, 0.0, 0.0, 0.0], &mut code).is_none());
        assert!(code_row_avx(&[3e19, 3e19, 0.0, 0.0], &mut code).is_none());
        let long = max_dim + 1;
        assert!(code_row_avx(&vec![0.5; long], &mut vec![0i8; long]).is_none());
    }

    #[test]
    fn a_sketch_updated_row_by_row_is_the_sketch_of_the_rows() {
        let mut rng = Rng::new(5);
        let dim = 16;
        let rows = unit_rows(&mut rng, 50, dim);
        let whole = Sketch::of(&MatrixView::f32(&rows, dim).unwrap());
        // Grown from the first 20 rows, with one row first sketched as another's.
        let mut grown = Sketch::of(&MatrixView::f32(&rows[..20 * dim], dim).unwrap());
        grown.set_row(3, &rows[40 * dim..41 * dim]).unwrap();
        grown
            .update(&MatrixView::f32(&rows, dim).unwrap(), 20)
            .unwrap();
        grown.set_row(3, &rows[3 * dim..4 * dim]).unwrap();
        assert_eq!(grown.codes, whole.codes);
        assert_eq!(format!("{:?}", grown.rows), format!("{:?}", whole.rows));
        assert!(grown.set_row(51, &rows[..dim]).is_err());
        assert!(grown.set_row(0, &rows[..dim - 1]).is_err());
    }

    #[test]
    fn a_row_with_no_finite_scale_is_never_skipped() {
        let rows = [1.0, f32::INFINITY, 0.5, 0.5];
        let sketch = Sketch::of(&MatrixView::f32(&rows, 2).unwrap());
        let q = SketchQuery::new(&[1.0, 0.0]);
        assert_eq!(sketch.view().bounds(0, &q).1, f32::INFINITY);
        let (lower, upper) = sketch.view().bounds(1, &q);
        assert!(lower <= 0.5 && upper >= 0.5);
        // Nor with a query that has none.
        let q = SketchQuery::new(&[f32::NAN, 0.0]);
        let upper = sketch.view().bounds(1, &q).1;
        assert!(upper.is_nan() || upper >= 1.0, "{upper}");
    }

    #[test]
    fn every_integer_path_gives_the_same_sum_without_overflow() {
        let mut rng = Rng::new(11);
        for dim in [0, 1, 15, 16, 31, 32, 33, 384, 1024, 4096] {
            let a: Vec<i8> = (0..dim)
                .map(|i| if i % 3 == 0 { -127 } else { 127 })
                .collect();
            let q = unit_rows(&mut rng, 1, dim.max(1));
            let mut worst: Vec<f32> = q[..dim].iter().map(|x| x.signum()).collect();
            worst.iter_mut().step_by(3).for_each(|x| *x = -1.0);
            let coded = SketchQuery::new(&worst);
            let expected: i64 = a
                .iter()
                .zip(&coded.codes)
                .map(|(&x, &y)| i64::from(x) * i64::from(y))
                .sum();
            assert_eq!(
                i64::from(dot_i8_i16_scalar(&a, &coded.codes)),
                expected,
                "dim {dim}"
            );
            assert_eq!(
                i64::from(dot_i8_i16(&a, &coded.codes)),
                expected,
                "dim {dim}"
            );
            #[cfg(target_arch = "x86_64")]
            #[allow(unsafe_code)]
            {
                if is_x86_feature_detected!("avx2") {
                    // SAFETY: the CPU has AVX2; the slices have the same length.
                    let sum = unsafe { dot_i8_i16_avx2(&a, &coded.codes) };
                    assert_eq!(i64::from(sum), expected, "AVX2, dim {dim}");
                }
                if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw") {
                    // SAFETY: the CPU has AVX-512F and BW; the slices have the same length.
                    let sum = unsafe { dot_i8_i16_avx512(&a, &coded.codes) };
                    assert_eq!(i64::from(sum), expected, "AVX-512, dim {dim}");
                }
            }
        }
    }

    #[test]
    fn a_block_of_rows_gets_each_rows_bounds() {
        let mut rng = Rng::new(13);
        for dim in [1, 15, 63, 64, 65, 128, 384, 1000, 4096] {
            let n = 600;
            let mut rows = unit_rows(&mut rng, n, dim);
            // Extreme codes (±127 in every lane) and a zero row.
            for (j, x) in rows[..dim].iter_mut().enumerate() {
                *x = if j % 3 == 0 { -1.0 } else { 1.0 };
            }
            rows[dim..2 * dim].fill(0.0);
            let sketch = Sketch::of(&MatrixView::f32(&rows, dim).unwrap());
            let view = sketch.view();
            let mut worst: Vec<f32> = rows[..dim].to_vec();
            worst.iter_mut().step_by(2).for_each(|x| *x = -*x);
            for q in unit_rows(&mut rng, 3, dim)
                .chunks_exact(dim)
                .chain([&worst[..]])
            {
                let coded = SketchQuery::new(q);
                // Every path's integer sums, from several starts and lengths.
                for (start, len) in [(0, n), (1, 299), (257, 343), (n, 0)] {
                    let mut dots = vec![0i32; len];
                    view.dots_into(start, &coded, &mut dots);
                    for (i, &dot) in (start..).zip(&dots) {
                        let code = &view.codes[i * dim..(i + 1) * dim];
                        assert_eq!(
                            dot,
                            dot_i8_i16_scalar(code, &coded.codes),
                            "dim {dim} row {i}"
                        );
                    }
                    let mut bounds = vec![(0f32, 0f32); len];
                    view.bounds_into(start, &coded, &mut bounds);
                    for (i, &b) in (start..).zip(&bounds) {
                        assert_eq!(
                            format!("{b:?}"),
                            format!("{:?}", view.bounds(i, &coded)),
                            "dim {dim} row {i}"
                        );
                    }
                }
                // The query's bytes put back together are its codes.
                for (j, &c) in coded.codes.iter().enumerate() {
                    let whole = 256 * i32::from(coded.high[j]) + i32::from(coded.low[j]);
                    assert_eq!(whole, i32::from(c), "dim {dim} lane {j}");
                }
                assert!(coded.high[dim..]
                    .iter()
                    .chain(&coded.low[dim..])
                    .all(|&b| b == 0));
            }
        }
    }

    #[test]
    fn f16_rows_sketch_as_their_f32_values_do() {
        let mut rng = Rng::new(17);
        for dim in [1, 16, 17, 384, 2048, 2049] {
            let mut rows = unit_rows(&mut rng, 40, dim);
            rows[..dim].fill(0.0);
            rows[dim] = f32::INFINITY;
            let halves: Vec<f16> = rows.iter().map(|&x| f16::from_f32(x)).collect();
            let exact: Vec<f32> = halves.iter().map(|x| x.to_f32()).collect();
            let from_f16 = Sketch::of(&MatrixView::f16(&halves, dim).unwrap());
            let from_f32 = Sketch::of(&MatrixView::f32(&exact, dim).unwrap());
            assert_eq!(from_f16.codes, from_f32.codes, "dim {dim}");
            assert_eq!(
                format!("{:?}", from_f16.rows),
                format!("{:?}", from_f32.rows),
                "dim {dim}"
            );
        }
    }
}
