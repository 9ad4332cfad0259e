//! AVX-512 micro-kernels of the linear layers, on weights packed once at load.
//!
//! A weight matrix `W` (`[out, in]`, PyTorch layout) is cut into *panels* of [`NR`] output
//! columns; a panel stores, for every input step, the weights of its 32 columns side by side, so
//! that one step of the micro-kernel loads two vectors of weights and broadcasts one value of each
//! of up to [`MR`] activation rows against them. The tile's `MR × 32` sums stay in 24 of the 32
//! vector registers for the whole input length. Packing happens when the model loads, never per
//! call: a single query reads each weight once, straight from its panel, which is what the
//! packing-free small-matrix path of the AVX2 kernels does for the same reason.
//!
//! Three number formats share the layout and the driver:
//! - `f32`: `vfmadd231ps`, one input step per iteration.
//! - `bf16`: weights and activations rounded to bfloat16, `vdpbf16ps` multiplies pairs of input
//!   steps and accumulates in f32 (AVX-512 BF16).
//! - `int8`: weights quantised per output column (symmetric, scale `max|w| / 127`), activations
//!   per row; `vpdpbusd` multiplies groups of four unsigned-by-signed bytes into i32 sums (AVX-512
//!   VNNI). Activations are stored offset by 128 (unsigned), and `128 · Σ w` is taken off again.
//!
//! The driver splits the output into row chunks × panel chunks and runs them on the current rayon
//! pool: many rows (a batch) split by rows, few rows (a query) by panels.

#![allow(unsafe_code)]

use std::arch::x86_64::{
    __m512, __m512bh, __m512i, _mm512_add_ps, _mm512_cvtepi32_ps, _mm512_dpbf16_ps,
    _mm512_dpbusd_epi32, _mm512_fmadd_ps, _mm512_loadu_ps, _mm512_loadu_si512,
    _mm512_mask_storeu_ps, _mm512_maskz_loadu_ps, _mm512_mul_ps, _mm512_set1_epi32, _mm512_set1_ps,
    _mm512_setzero_ps, _mm512_setzero_si512, _mm512_sub_epi32,
};

use rayon::prelude::*;

/// Output columns per panel (two vectors of 16 lanes).
pub(crate) const NR: usize = 32;

/// Most activation rows per tile (24 accumulators of the 32 vector registers).
pub(crate) const MR: usize = 12;

/// Whether the CPU has AVX-512F (checked once).
pub(crate) fn has_f32() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| is_x86_feature_detected!("avx512f"))
}

/// Whether the CPU has AVX-512F and AVX-512 BF16 (`vdpbf16ps`).
pub(crate) fn has_bf16() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| has_f32() && is_x86_feature_detected!("avx512bf16"))
}

/// Whether the CPU has AVX-512F and AVX-512 VNNI (`vpdpbusd`).
pub(crate) fn has_vnni() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| has_f32() && is_x86_feature_detected!("avx512vnni"))
}

/// The element a panel holds per output column and input step group, and how many input steps
/// one group covers (1 for f32, 2 for bf16 pairs, 4 for int8 quads).
pub(crate) trait Format: Copy + Default + Send + Sync + 'static {
    /// Input steps per stored group.
    const STEP: usize;
}

impl Format for f32 {
    const STEP: usize = 1;
}
/// bfloat16 bits.
impl Format for u16 {
    const STEP: usize = 2;
}
impl Format for i8 {
    const STEP: usize = 4;
}

/// A weight matrix packed into panels of [`NR`] columns, `k` padded to a multiple of the format's
/// step (with zeros).
#[derive(Debug, Clone)]
pub(crate) struct Panels<T> {
    /// `panels × kp × NR` values: panel `p`, step `t`, column `j` at `(p·kp + t)·NR + j` for f32;
    /// for grouped formats the `STEP` values of one column's group are adjacent.
    pub(crate) data: Vec<T>,
    /// Input size.
    pub(crate) k: usize,
    /// Input size padded to the step.
    pub(crate) kp: usize,
    /// Output size.
    pub(crate) n: usize,
}

impl<T: Format> Panels<T> {
    /// Packs `w` (`n × k` row-major) converted by `conv`.
    pub(crate) fn pack(w: &[f32], n: usize, k: usize, conv: impl Fn(f32, usize) -> T) -> Self {
        let kp = k.next_multiple_of(T::STEP);
        let panels = n.div_ceil(NR);
        let mut data = vec![T::default(); panels * kp * NR];
        for col in 0..n {
            let (p, j) = (col / NR, col % NR);
            for t in 0..k {
                let (g, q) = (t / T::STEP, t % T::STEP);
                data[((p * kp / T::STEP + g) * NR + j) * T::STEP + q] = conv(w[col * k + t], col);
            }
        }
        Panels { data, k, kp, n }
    }

    /// Number of panels.
    pub(crate) fn panels(&self) -> usize {
        self.n.div_ceil(NR)
    }

    /// The values of panel `p`.
    fn panel(&self, p: usize) -> &[T] {
        &self.data[p * self.kp * NR..(p + 1) * self.kp * NR]
    }
}

/// What is added to the products before they are stored.
#[derive(Clone, Copy)]
pub(crate) struct Epilogue<'a> {
    /// Bias per output column, padded to whole panels.
    pub(crate) bias: Option<&'a [f32]>,
    /// Add the products to what the output holds (a residual) instead of overwriting it.
    pub(crate) accumulate: bool,
}

/// The output matrix, shared by the tasks of one product; each writes its own rectangle.
#[derive(Clone, Copy)]
struct Out {
    ptr: *mut f32,
    ld: usize,
}

impl Out {
    /// The address of row `r`, column `c` (a method, so that closures capture the whole `Out`,
    /// which is `Sync`, not its raw pointer field).
    fn at(self, r: usize, c: usize) -> *mut f32 {
        self.ptr.wrapping_add(r * self.ld + c)
    }
}

// SAFETY: `run_tasks` hands each task a disjoint rectangle of the output, which it alone writes.
unsafe impl Send for Out {}
unsafe impl Sync for Out {}

/// Splits `rows × panels` into tasks and runs `tile(r0, mr, p)` for every tile of each, on the
/// current rayon pool; then `post` over each row of the task's rectangle of `out` (a fused
/// activation, while the rectangle is still in cache).
fn run_tasks(
    rows: usize,
    panels: usize,
    out: Out,
    n: usize,
    tile: impl Fn(usize, usize, usize) + Sync,
    post: Option<fn(&mut [f32])>,
) {
    let threads = rayon::current_num_threads();
    let blocks = rows.div_ceil(MR);
    // Row chunks of up to 8 tiles (96 rows: the chunk's activations stay in L2 while its panels
    // pass); panels split only when there are too few row chunks to keep every thread busy.
    let chunk_blocks = blocks.min(8);
    let row_tasks = blocks.div_ceil(chunk_blocks);
    let want = if threads > 1 { 2 * threads } else { 1 };
    let panel_tasks = want.div_ceil(row_tasks).clamp(1, panels);
    let per_panel_task = panels.div_ceil(panel_tasks);
    let per_row_task = chunk_blocks * MR;
    (0..row_tasks * panel_tasks)
        .into_par_iter()
        .for_each(|task| {
            let (rt, pt) = (task / panel_tasks, task % panel_tasks);
            let (r0, r1) = (rt * per_row_task, ((rt + 1) * per_row_task).min(rows));
            let (p0, p1) = (pt * per_panel_task, ((pt + 1) * per_panel_task).min(panels));
            if r0 >= r1 || p0 >= p1 {
                return;
            }
            // Tiles of nearly equal height (15 rows: 8 + 7, not 12 + 3).
            let tiles = (r1 - r0).div_ceil(MR);
            for p in p0..p1 {
                let mut r = r0;
                for i in 0..tiles {
                    let mr = (r1 - r).div_ceil(tiles - i);
                    tile(r, mr, p);
                    r += mr;
                }
            }
            if let Some(post) = post {
                let (c0, c1) = (p0 * NR, (p1 * NR).min(n));
                for r in r0..r1 {
                    // SAFETY: row `r < rows`, columns `c0..c1 ≤ n` of the output (`check` bounded
                    // it), inside this task's rectangle, which no other task touches; the tiles that
                    // wrote it ran above, on this thread.
                    let row = unsafe { std::slice::from_raw_parts_mut(out.at(r, c0), c1 - c0) };
                    post(row);
                }
            }
        });
}

/// Masks of the valid lanes of the two vectors of a panel with `cols` valid columns.
fn masks(cols: usize) -> (u16, u16) {
    let lo = if cols >= 16 {
        u16::MAX
    } else {
        (1u16 << cols) - 1
    };
    let hi = if cols >= NR {
        u16::MAX
    } else if cols > 16 {
        (1u16 << (cols - 16)) - 1
    } else {
        0
    };
    (lo, hi)
}

/// Stores one tile row: `v + bias (+ out)` into the valid columns of `out`.
///
/// # Safety
/// AVX-512F must be available; `out` must be valid for the columns the masks select and `bias`
/// (when given) for 32 values.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn store_row(out: *mut f32, v: [__m512; 2], m: (u16, u16), bias: *const f32, acc: bool) {
    let mut v = v;
    // SAFETY: the caller's contract: `bias` holds 32 values, `out` the masked columns.
    unsafe {
        if !bias.is_null() {
            v[0] = _mm512_add_ps(v[0], _mm512_loadu_ps(bias));
            v[1] = _mm512_add_ps(v[1], _mm512_loadu_ps(bias.add(16)));
        }
        if acc {
            v[0] = _mm512_add_ps(v[0], _mm512_maskz_loadu_ps(m.0, out));
            v[1] = _mm512_add_ps(v[1], _mm512_maskz_loadu_ps(m.1, out.add(16)));
        }
        _mm512_mask_storeu_ps(out, m.0, v[0]);
        _mm512_mask_storeu_ps(out.add(16), m.1, v[1]);
    }
}

/// Checks the operands of a product and returns the bias pointer of panel `p` (null without one).
fn bias_at(ep: &Epilogue<'_>, p: usize) -> *const f32 {
    ep.bias.map_or(std::ptr::null(), |b| b[p * NR..].as_ptr())
}

fn check<T: Format>(
    a_len: usize,
    lda: usize,
    rows: usize,
    w: &Panels<T>,
    out: &[f32],
    ep: &Epilogue,
) {
    assert!(
        lda >= w.kp && a_len >= rows.saturating_sub(1) * lda + w.kp,
        "activations too small"
    );
    assert!(out.len() >= rows * w.n, "output too small");
    assert_eq!(w.data.len(), w.panels() * w.kp * NR, "malformed panels");
    if let Some(b) = ep.bias {
        assert!(
            b.len() >= w.panels() * NR,
            "bias not padded to whole panels"
        );
    }
}

/// One tile of a product, as [`drive`] hands it to a format's kernel: rows `r0..r0 + mr` of the
/// activations, the `cols` valid columns of panel `p`, whose values start at `panel`, the bias of
/// those columns (null without one) and the tile's first output value at `dst` (rows `ldc`
/// apart). `drive` has checked that all of these are in bounds and that no other task writes
/// the tile's outputs.
struct Tile<T> {
    r0: usize,
    mr: usize,
    p: usize,
    cols: usize,
    panel: *const T,
    bias: *const f32,
    dst: *mut f32,
    ldc: usize,
}

/// Checks a product's operands and runs `tile` on each of its tiles, in parallel (see
/// [`run_tasks`]).
#[allow(clippy::too_many_arguments)]
fn drive<T: Format>(
    a_len: usize,
    lda: usize,
    rows: usize,
    w: &Panels<T>,
    out: &mut [f32],
    ep: Epilogue<'_>,
    post: Option<fn(&mut [f32])>,
    tile: impl Fn(&Tile<T>) + Sync,
) {
    check(a_len, lda, rows, w, out, &ep);
    let o = Out {
        ptr: out.as_mut_ptr(),
        ld: w.n,
    };
    let each = |r0: usize, mr: usize, p: usize| {
        tile(&Tile {
            r0,
            mr,
            p,
            cols: (w.n - p * NR).min(NR),
            panel: w.panel(p).as_ptr(),
            bias: bias_at(&ep, p),
            dst: o.at(r0, p * NR),
            ldc: o.ld,
        })
    };
    run_tasks(rows, w.panels(), o, w.n, each, post);
}

/// Expands `$body` once per tile height `1..=MR` with `$r` a constant.
macro_rules! by_height {
    ($mr:expr, $f:ident, ($($arg:expr),*)) => {
        match $mr {
            1 => $f::<1>($($arg),*),
            2 => $f::<2>($($arg),*),
            3 => $f::<3>($($arg),*),
            4 => $f::<4>($($arg),*),
            5 => $f::<5>($($arg),*),
            6 => $f::<6>($($arg),*),
            7 => $f::<7>($($arg),*),
            8 => $f::<8>($($arg),*),
            9 => $f::<9>($($arg),*),
            10 => $f::<10>($($arg),*),
            11 => $f::<11>($($arg),*),
            _ => $f::<12>($($arg),*),
        }
    };
}

/// `out (+)= a · Wᵀ + bias` in f32; `a` is `rows × lda` (`lda ≥ k`), `out` `rows × n`.
/// Only to be called when [`has_f32`].
pub(crate) fn matmul_f32(
    a: &[f32],
    lda: usize,
    rows: usize,
    w: &Panels<f32>,
    out: &mut [f32],
    ep: Epilogue<'_>,
    post: Option<fn(&mut [f32])>,
) {
    assert!(has_f32());
    drive(a.len(), lda, rows, w, out, ep, post, |t| {
        // SAFETY: AVX-512F is available (asserted); `drive` checked the operands and bounds the
        // tile (see `Tile`); row `r0` of `a` starts at `r0 · lda`.
        unsafe {
            let a = a.as_ptr().add(t.r0 * lda);
            let (k, acc) = (w.k, ep.accumulate);
            by_height!(
                t.mr,
                tile_f32,
                (a, lda, t.panel, k, t.dst, t.ldc, t.cols, t.bias, acc)
            );
        }
    });
}

#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn tile_f32<const R: usize>(
    a: *const f32,
    lda: usize,
    panel: *const f32,
    k: usize,
    out: *mut f32,
    ldc: usize,
    cols: usize,
    bias: *const f32,
    accumulate: bool,
) {
    let mut acc = [[_mm512_setzero_ps(); 2]; R];
    // SAFETY (whole body): see `matmul_f32`: rows `r < R` of `a` hold `k` values at `r·lda`, the
    // panel `k · NR`, `out` the masked columns of rows `r < R`.
    unsafe {
        for t in 0..k {
            let w0 = _mm512_loadu_ps(panel.add(t * NR));
            let w1 = _mm512_loadu_ps(panel.add(t * NR + 16));
            for (r, acc) in acc.iter_mut().enumerate() {
                let av = _mm512_set1_ps(*a.add(r * lda + t));
                acc[0] = _mm512_fmadd_ps(av, w0, acc[0]);
                acc[1] = _mm512_fmadd_ps(av, w1, acc[1]);
            }
        }
        let m = masks(cols);
        for (r, v) in acc.into_iter().enumerate() {
            store_row(out.add(r * ldc), v, m, bias, accumulate);
        }
    }
}

/// `out (+)= a · Wᵀ + bias` in bf16 with f32 sums; `a` holds bfloat16 bits, `rows × lda`
/// (`lda ≥ kp`, even, zero past `k`). Only to be called when [`has_bf16`].
pub(crate) fn matmul_bf16(
    a: &[u16],
    lda: usize,
    rows: usize,
    w: &Panels<u16>,
    out: &mut [f32],
    ep: Epilogue<'_>,
    post: Option<fn(&mut [f32])>,
) {
    assert!(has_bf16());
    assert!(lda.is_multiple_of(2));
    drive(a.len(), lda, rows, w, out, ep, post, |t| {
        // SAFETY: as in `matmul_f32`, with AVX-512 BF16 asserted and `kp / 2` pairs per row.
        unsafe {
            let a = a.as_ptr().add(t.r0 * lda);
            let (kp, acc) = (w.kp, ep.accumulate);
            by_height!(
                t.mr,
                tile_bf16,
                (a, lda, t.panel, kp, t.dst, t.ldc, t.cols, t.bias, acc)
            );
        }
    });
}

#[target_feature(enable = "avx512f,avx512bf16")]
#[allow(clippy::too_many_arguments)]
unsafe fn tile_bf16<const R: usize>(
    a: *const u16,
    lda: usize,
    panel: *const u16,
    kp: usize,
    out: *mut f32,
    ldc: usize,
    cols: usize,
    bias: *const f32,
    accumulate: bool,
) {
    let mut acc = [[_mm512_setzero_ps(); 2]; R];
    // SAFETY (whole body): rows `r < R` of `a` hold `kp` bf16 values at `r·lda` (read as `kp/2`
    // unaligned u32 pairs), the panel `kp · NR`; `__m512i` and `__m512bh` are both 64 bytes.
    unsafe {
        for g in 0..kp / 2 {
            let w0: __m512bh = std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(
                panel.add(g * 2 * NR).cast(),
            ));
            let w1: __m512bh = std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(
                panel.add(g * 2 * NR + NR).cast(),
            ));
            for (r, acc) in acc.iter_mut().enumerate() {
                let pair = a.add(r * lda + 2 * g).cast::<u32>().read_unaligned();
                let av = std::mem::transmute::<__m512i, __m512bh>(_mm512_set1_epi32(pair as i32));
                acc[0] = _mm512_dpbf16_ps(acc[0], av, w0);
                acc[1] = _mm512_dpbf16_ps(acc[1], av, w1);
            }
        }
        let m = masks(cols);
        for (r, v) in acc.into_iter().enumerate() {
            store_row(out.add(r * ldc), v, m, bias, accumulate);
        }
    }
}

/// `out (+)= dequant(a · Wᵀ) + bias` in int8 with i32 sums; `a` holds activations offset by 128
/// (`rows × lda`, `lda ≥ kp`, a multiple of 4, 128 past `k`), `a_scale` their scale per row;
/// `w_scale` and `w_offset` are the columns' scales and `128 · Σ w`, padded to whole panels.
/// Only to be called when [`has_vnni`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn matmul_int8(
    a: &[u8],
    lda: usize,
    a_scale: &[f32],
    rows: usize,
    w: &Panels<i8>,
    (w_scale, w_offset): (&[f32], &[i32]),
    out: &mut [f32],
    ep: Epilogue<'_>,
    post: Option<fn(&mut [f32])>,
) {
    assert!(has_vnni());
    assert!(lda.is_multiple_of(4) && a_scale.len() >= rows);
    assert!(w_scale.len() >= w.panels() * NR && w_offset.len() >= w.panels() * NR);
    drive(a.len(), lda, rows, w, out, ep, post, |t| {
        let cw = (w_scale[t.p * NR..].as_ptr(), w_offset[t.p * NR..].as_ptr());
        // SAFETY: as in `matmul_f32`, with AVX-512 VNNI asserted, `kp / 4` quads per row, the
        // scales of rows `r0..r0+mr` and 32 column scales and offsets from `p · NR`.
        unsafe {
            let a = a.as_ptr().add(t.r0 * lda);
            let sa = a_scale.as_ptr().add(t.r0);
            let (kp, acc) = (w.kp, ep.accumulate);
            by_height!(
                t.mr,
                tile_int8,
                (a, lda, sa, t.panel, kp, cw, t.dst, t.ldc, t.cols, t.bias, acc)
            );
        }
    });
}

#[target_feature(enable = "avx512f,avx512vnni")]
#[allow(clippy::too_many_arguments)]
unsafe fn tile_int8<const R: usize>(
    a: *const u8,
    lda: usize,
    a_scale: *const f32,
    panel: *const i8,
    kp: usize,
    (scale, offset): (*const f32, *const i32),
    out: *mut f32,
    ldc: usize,
    cols: usize,
    bias: *const f32,
    accumulate: bool,
) {
    let mut acc = [[_mm512_setzero_si512(); 2]; R];
    // SAFETY (whole body): rows `r < R` of `a` hold `kp` bytes at `r·lda` (read as `kp/4`
    // unaligned u32 quads), the panel `kp · NR` bytes, `scale` and `offset` 32 values each.
    unsafe {
        for g in 0..kp / 4 {
            let w0 = _mm512_loadu_si512(panel.add(g * 4 * NR).cast());
            let w1 = _mm512_loadu_si512(panel.add(g * 4 * NR + 2 * NR).cast());
            for (r, acc) in acc.iter_mut().enumerate() {
                let quad = a.add(r * lda + 4 * g).cast::<u32>().read_unaligned();
                let av = _mm512_set1_epi32(quad as i32);
                acc[0] = _mm512_dpbusd_epi32(acc[0], av, w0);
                acc[1] = _mm512_dpbusd_epi32(acc[1], av, w1);
            }
        }
        let (s0, s1) = (_mm512_loadu_ps(scale), _mm512_loadu_ps(scale.add(16)));
        let (o0, o1) = (
            _mm512_loadu_si512(offset.cast()),
            _mm512_loadu_si512(offset.add(16).cast()),
        );
        let m = masks(cols);
        for (r, v) in acc.into_iter().enumerate() {
            let sa = _mm512_set1_ps(*a_scale.add(r));
            let f0 = _mm512_cvtepi32_ps(_mm512_sub_epi32(v[0], o0));
            let f1 = _mm512_cvtepi32_ps(_mm512_sub_epi32(v[1], o1));
            let v = [
                _mm512_mul_ps(f0, _mm512_mul_ps(sa, s0)),
                _mm512_mul_ps(f1, _mm512_mul_ps(sa, s1)),
            ];
            store_row(out.add(r * ldc), v, m, bias, accumulate);
        }
    }
}

/// `out = a · Wᵀ` on one thread, for the small products inside attention: `a` is `rows × lda`,
/// `panels` the packed `W` (`n` columns, `k` steps; [`Panels`] layout), `out` `rows × ldc`.
#[allow(clippy::too_many_arguments)]
fn gemm_seq(
    a: &[f32],
    lda: usize,
    rows: usize,
    panels: &[f32],
    k: usize,
    n: usize,
    out: &mut [f32],
    ldc: usize,
) {
    if rows == 0 || n == 0 {
        return;
    }
    assert!(has_f32());
    assert!(
        lda >= k && a.len() >= (rows - 1) * lda + k,
        "activations too small"
    );
    assert!(panels.len() >= n.div_ceil(NR) * k * NR, "panels too small");
    assert!(
        ldc >= n && out.len() >= (rows - 1) * ldc + n,
        "output too small"
    );
    let tiles = rows.div_ceil(MR);
    for p in 0..n.div_ceil(NR) {
        let cols = (n - p * NR).min(NR);
        let mut r = 0;
        for i in 0..tiles {
            let mr = (rows - r).div_ceil(tiles - i);
            // SAFETY: AVX-512F asserted; rows `r..r+mr` of `a` (`k ≤ lda` values each) and of
            // `out` (columns `p·NR..p·NR+cols ≤ n ≤ ldc`) are in bounds by the assertions; the
            // panel holds `k · NR` values.
            unsafe {
                let ap = a.as_ptr().add(r * lda);
                let pp = panels.as_ptr().add(p * k * NR);
                let dst = out.as_mut_ptr().add(r * ldc + p * NR);
                by_height!(
                    mr,
                    tile_f32,
                    (ap, lda, pp, k, dst, ldc, cols, std::ptr::null(), false)
                );
            }
            r += mr;
        }
    }
}

/// Attention of one sequence on AVX-512, as two small products per head through the f32 tile
/// kernel: scores `S = Q · Kᵀ` (keys packed as panels of 32 keys), the softmax of each row in
/// place, then `O = P · V` (values packed as panels of 32 dimensions). `tokens` are the
/// sequence's `len` rows of packed query, key and value heads; `out` its `len` context rows.
/// Only to be called when [`has_f32`].
pub(crate) fn attend_sequence(
    out: &mut [f32],
    tokens: &[f32],
    len: usize,
    shape: crate::ops::AttnShape,
) {
    let crate::ops::AttnShape {
        heads,
        kv_heads,
        head_dim: d,
        causal,
    } = shape;
    let stride = (heads + 2 * kv_heads) * d;
    let hidden = heads * d;
    let group = heads / kv_heads;
    let scale = 1.0 / (d as f32).sqrt();
    let lp = len.next_multiple_of(NR);
    let dp = d.next_multiple_of(NR);
    let mut kpan = vec![0.0f32; lp * d];
    let mut vpan = vec![0.0f32; dp * len];
    let mut scores = vec![0.0f32; len * lp];
    for kvh in 0..kv_heads {
        let k_col = hidden + kvh * d;
        let v_col = hidden + kv_heads * d + kvh * d;
        for j in 0..len {
            let (p, c) = (j / NR, j % NR);
            let k = &tokens[j * stride + k_col..j * stride + k_col + d];
            for (t, kv) in k.iter().enumerate() {
                kpan[(p * d + t) * NR + c] = *kv;
            }
            let v = &tokens[j * stride + v_col..j * stride + v_col + d];
            for (c, vv) in v.iter().enumerate() {
                let p = c / NR;
                vpan[(p * len + j) * NR + c % NR] = *vv;
            }
        }
        for h in kvh * group..(kvh + 1) * group {
            let q = &tokens[h * d..];
            gemm_seq(q, stride, len, &kpan, d, len, &mut scores, lp);
            for (i, row) in scores.chunks_exact_mut(lp).enumerate() {
                let keys = if causal { i + 1 } else { len };
                crate::ops::softmax_scaled(&mut row[..len], keys, scale);
            }
            gemm_seq(&scores, lp, len, &vpan, len, d, &mut out[h * d..], hidden);
        }
    }
}
