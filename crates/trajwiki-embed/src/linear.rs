//! Linear layers on the CPU: the weights kept in the form the chosen kernel reads, in the chosen
//! precision.
//!
//! | kernel   | f32                         | bf16                                   | int8                          |
//! |----------|-----------------------------|----------------------------------------|-------------------------------|
//! | `avx512` | packed panels, FMA          | packed pairs, `vdpbf16ps` (else f32 panels of rounded values) | packed quads, `vpdpbusd` (else the portable quads) |
//! | `avx2`   | the `gemm` crate; a dot-product kernel for ≤ 32 rows | as f32, values rounded to bf16 | portable integer sums |
//! | `scalar` | portable dot products       | as f32, values rounded to bf16         | portable integer sums         |
//!
//! Every path of one precision computes the same function: bf16 rounds weights and activations
//! to bfloat16 (round to nearest even) and sums products in f32, whichever instruction does it;
//! int8 quantises weights per output column and activations per row and sums exactly in i32, so
//! its paths agree to the last bit of the integer sums.

use rayon::prelude::*;

#[cfg(target_arch = "x86_64")]
use crate::avx512::{self, Epilogue, Panels, NR};
use crate::engine::{CpuKernel, Precision};
use crate::ops::{self, Dense};
use crate::scratch;

/// Rounds an f32 to the nearest bfloat16 (ties to even), as its upper 16 bits.
#[inline(always)]
pub(crate) fn bf16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    if x.is_nan() {
        return ((b >> 16) | 0x40) as u16;
    }
    ((b + 0x7fff + ((b >> 16) & 1)) >> 16) as u16
}

/// The f32 value of bfloat16 bits.
#[inline(always)]
pub(crate) fn bf16_value(bits: u16) -> f32 {
    f32::from_bits((bits as u32) << 16)
}

/// `x` rounded to the nearest bfloat16 value.
#[inline(always)]
pub(crate) fn round_bf16(x: f32) -> f32 {
    bf16_value(bf16_bits(x))
}

/// How a linear layer's weights are kept.
#[derive(Debug, Clone)]
enum Weights {
    /// `[out, in]` rows (rounded to bf16 in bf16 mode), for the `gemm` crate or portable loops.
    Rows { w: Vec<f32>, portable: bool },
    /// f32 panels for the AVX-512 FMA kernel (bf16-rounded values in bf16 mode without BF16).
    #[cfg(target_arch = "x86_64")]
    F32(Panels<f32>),
    /// bfloat16 pairs for `vdpbf16ps`.
    #[cfg(target_arch = "x86_64")]
    Bf16(Panels<u16>),
    /// int8 quads, column scales and offsets; `vnni` when `vpdpbusd` runs them.
    Int8 { q: Int8Matrix, vnni: bool },
}

/// An int8 matrix in quads: the panel layout of the AVX-512 kernel, read by the portable loop
/// too.
#[derive(Debug, Clone)]
struct Int8Matrix {
    /// `[out, kp]` rows of quantised weights (portable) or panels (VNNI).
    #[cfg(target_arch = "x86_64")]
    panels: Panels<i8>,
    #[cfg(not(target_arch = "x86_64"))]
    rows: Vec<i8>,
    /// Per column: scale and `128 · Σ q` (padded to whole panels).
    scale: Vec<f32>,
    offset: Vec<i32>,
    kp: usize,
}

/// A dense layer `y = x · Wᵀ + b` (PyTorch `Linear` layout) ready for one kernel and precision.
#[derive(Debug, Clone)]
pub(crate) struct Linear {
    pub(crate) in_dim: usize,
    pub(crate) out_dim: usize,
    /// Bias, padded with zeros to whole panels (32 columns).
    bias: Option<Vec<f32>>,
    weights: Weights,
    precision: Precision,
}

/// What happens to the products after the bias.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Then {
    /// Stored as they are.
    Store,
    /// Exact-erf GELU, fused into the product's last pass over its output.
    Gelu,
}

impl Linear {
    /// Prepares a layer's weights for `kernel` in `precision`.
    pub(crate) fn new(dense: Dense, precision: Precision, kernel: CpuKernel) -> Linear {
        let Dense {
            weight,
            bias,
            in_dim,
            out_dim,
        } = dense;
        assert_eq!(
            weight.len(),
            in_dim * out_dim,
            "weight is not {out_dim}x{in_dim}"
        );
        let padded = out_dim.next_multiple_of(32);
        let bias = bias.map(|mut b| {
            b.resize(padded, 0.0);
            b
        });
        let weights = match precision {
            Precision::Int8 => Weights::Int8 {
                q: Int8Matrix::quantize(&weight, out_dim, in_dim),
                vnni: kernel == CpuKernel::Avx512 && native_int8(),
            },
            Precision::F32 | Precision::Bf16 => {
                let bf16 = precision == Precision::Bf16;
                let rounded = |v: f32| if bf16 { round_bf16(v) } else { v };
                match kernel {
                    #[cfg(target_arch = "x86_64")]
                    CpuKernel::Avx512 if bf16 && avx512::has_bf16() => {
                        Weights::Bf16(Panels::pack(&weight, out_dim, in_dim, |v, _| bf16_bits(v)))
                    }
                    #[cfg(target_arch = "x86_64")]
                    CpuKernel::Avx512 if avx512::has_f32() => {
                        Weights::F32(Panels::pack(&weight, out_dim, in_dim, |v, _| rounded(v)))
                    }
                    k => Weights::Rows {
                        w: weight.into_iter().map(rounded).collect(),
                        portable: k == CpuKernel::Scalar,
                    },
                }
            }
        };
        Linear {
            in_dim,
            out_dim,
            bias,
            weights,
            precision,
        }
    }

    /// `x · Wᵀ + b` for `rows` rows of `in_dim` values, then `then`; returns `rows × out_dim`
    /// in a buffer from [`scratch::F32`] (to be given back there).
    pub(crate) fn forward(&self, x: &[f32], rows: usize, then: Then) -> Vec<f32> {
        let mut out = scratch::F32.take(rows * self.out_dim);
        self.run(x, rows, &mut out, false, then);
        out
    }

    /// `out += x · Wᵀ + b` (a residual added in place).
    pub(crate) fn forward_add(&self, x: &[f32], rows: usize, out: &mut [f32]) {
        self.run(x, rows, out, true, Then::Store);
    }

    fn run(&self, x: &[f32], rows: usize, out: &mut [f32], accumulate: bool, then: Then) {
        let (k, n) = (self.in_dim, self.out_dim);
        assert!(x.len() >= rows * k && out.len() >= rows * n);
        if rows == 0 || n == 0 {
            return;
        }
        let post: Option<fn(&mut [f32])> = match then {
            Then::Store => None,
            Then::Gelu => Some(ops::gelu_erf_slice),
        };
        let bf16 = self.precision == Precision::Bf16;
        match &self.weights {
            Weights::Rows { w, portable } => {
                let rounded = bf16.then(|| round_rows(&x[..rows * k]));
                let x = rounded.as_deref().unwrap_or(&x[..rows * k]);
                if *portable {
                    portable_f32(x, w, rows, k, n, self.bias.as_deref(), accumulate, out);
                } else {
                    let out = &mut out[..rows * n];
                    if let (Some(b), false) = (&self.bias, accumulate) {
                        for row in out.chunks_exact_mut(n) {
                            row.copy_from_slice(&b[..n]);
                        }
                    }
                    ops::matmul_wt(
                        x,
                        w,
                        out,
                        rows,
                        k,
                        n,
                        accumulate || self.bias.is_some(),
                        rayon::current_num_threads(),
                    );
                    if let (Some(b), true) = (&self.bias, accumulate) {
                        for row in out.chunks_exact_mut(n) {
                            row.iter_mut().zip(b).for_each(|(v, b)| *v += b);
                        }
                    }
                }
                if let Some(post) = post {
                    out[..rows * n].par_chunks_mut(n * 8).for_each(post);
                }
                if let Some(r) = rounded {
                    scratch::F32.give(r);
                }
            }
            #[cfg(target_arch = "x86_64")]
            Weights::F32(p) => {
                let rounded = bf16.then(|| round_rows(&x[..rows * k]));
                let x = rounded.as_deref().unwrap_or(&x[..rows * k]);
                let ep = Epilogue {
                    bias: self.bias.as_deref(),
                    accumulate,
                };
                avx512::matmul_f32(x, k, rows, p, out, ep, post);
                if let Some(r) = rounded {
                    scratch::F32.give(r);
                }
            }
            #[cfg(target_arch = "x86_64")]
            Weights::Bf16(p) => {
                let a = to_bf16_rows(x, rows, k, p.kp);
                let ep = Epilogue {
                    bias: self.bias.as_deref(),
                    accumulate,
                };
                avx512::matmul_bf16(&a, p.kp, rows, p, out, ep, post);
                scratch::BF16.give(a);
            }
            Weights::Int8 { q, vnni } => {
                let (a, scale) = quantize_rows(x, rows, k, q.kp);
                #[cfg(target_arch = "x86_64")]
                if *vnni {
                    let ep = Epilogue {
                        bias: self.bias.as_deref(),
                        accumulate,
                    };
                    let cols = (&q.scale[..], &q.offset[..]);
                    avx512::matmul_int8(&a, q.kp, &scale, rows, &q.panels, cols, out, ep, post);
                    scratch::U8.give(a);
                    scratch::F32.give(scale);
                    return;
                }
                let _ = vnni;
                q.portable(&a, &scale, rows, n, self.bias.as_deref(), accumulate, out);
                scratch::U8.give(a);
                scratch::F32.give(scale);
                if let Some(post) = post {
                    out[..rows * n].par_chunks_mut(n * 8).for_each(post);
                }
            }
        }
    }
}

/// Whether int8 runs on `vpdpbusd` on this CPU.
fn native_int8() -> bool {
    #[cfg(target_arch = "x86_64")]
    return avx512::has_vnni();
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Rows per rayon task of the conversions below.
const ROWS_PER_TASK: usize = 16;

/// `x` with every value rounded to bf16 (in a buffer of [`scratch::F32`]).
fn round_rows(x: &[f32]) -> Vec<f32> {
    let mut out = scratch::F32.take(x.len());
    out.copy_from_slice(x);
    out.par_chunks_mut(4096).for_each(round_chunk);
    out
}

ops::multiversion! {
    fn round_chunk(c: &mut [f32]) {
        for v in c {
            *v = round_bf16(*v);
        }
    }
}

/// `rows × k` values as bf16 bits in rows of `kp` (zero-padded).
#[cfg(target_arch = "x86_64")]
fn to_bf16_rows(x: &[f32], rows: usize, k: usize, kp: usize) -> Vec<u16> {
    let mut out = scratch::BF16.take(rows * kp);
    out.par_chunks_mut(kp * ROWS_PER_TASK)
        .zip(x[..rows * k].par_chunks(k * ROWS_PER_TASK))
        .for_each(|(o, x)| bf16_chunk(o, x, k, kp));
    out
}

ops::multiversion! {
    fn bf16_chunk(o: &mut [u16], x: &[f32], k: usize, kp: usize) {
        for (o, x) in o.chunks_exact_mut(kp).zip(x.chunks_exact(k)) {
            for (o, x) in o.iter_mut().zip(x) {
                *o = bf16_bits(*x);
            }
            o[k..].fill(0);
        }
    }
}

/// Quantises each row of `x` (`rows × k`) symmetrically to int8 with scale `max|x| / 127`
/// (rounding ties to even), stored offset by 128 as bytes in rows of `kp` (padded with 128,
/// that is 0); returns the bytes and the scale of each row.
fn quantize_rows(x: &[f32], rows: usize, k: usize, kp: usize) -> (Vec<u8>, Vec<f32>) {
    let mut out = scratch::U8.take(rows * kp);
    let mut scale = scratch::F32.take(rows);
    out.par_chunks_mut(kp * ROWS_PER_TASK)
        .zip(scale.par_chunks_mut(ROWS_PER_TASK))
        .zip(x[..rows * k].par_chunks(k * ROWS_PER_TASK))
        .for_each(|((o, s), x)| quantize_chunk(o, s, x, k, kp));
    (out, scale)
}

ops::multiversion! {
    fn quantize_chunk(o: &mut [u8], s: &mut [f32], x: &[f32], k: usize, kp: usize) {
        for ((o, s), x) in o.chunks_exact_mut(kp).zip(s).zip(x.chunks_exact(k)) {
            *s = int8_scale(x);
            let inv = 1.0 / *s;
            for (o, v) in o.iter_mut().zip(x) {
                // |v · inv| ≤ 127 (plus rounding), far inside the magic range.
                let q = ops::magic_int(v * inv + ops::MAGIC).clamp(-127, 127);
                *o = (q + 128) as u8;
            }
            o[k..].fill(128);
        }
    }
}

/// The symmetric int8 scale of `v`: `max|v| / 127` (1 for a zero row), the maximum taken over
/// sixteen lanes so that it vectorises.
#[inline(always)]
fn int8_scale(v: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 16];
    let c = v.chunks_exact(16);
    let mut max = c.remainder().iter().fold(0.0f32, |m, x| m.max(x.abs()));
    for x in c {
        for i in 0..16 {
            lanes[i] = lanes[i].max(x[i].abs());
        }
    }
    for l in lanes {
        max = max.max(l);
    }
    if max > 0.0 {
        max / 127.0
    } else {
        1.0
    }
}

impl Int8Matrix {
    /// Quantises `w` (`n × k`) per output column: scale `max|w_j| / 127`, values rounded.
    fn quantize(w: &[f32], n: usize, k: usize) -> Int8Matrix {
        let kp = k.next_multiple_of(4);
        let padded = n.next_multiple_of(32);
        let mut scale = vec![0.0f32; padded];
        let mut offset = vec![0i32; padded];
        let mut q = vec![0i8; n * k];
        for j in 0..n {
            let row = &w[j * k..(j + 1) * k];
            let s = int8_scale(row);
            let mut sum = 0i32;
            for (q, v) in q[j * k..(j + 1) * k].iter_mut().zip(row) {
                *q = (v / s).round_ties_even().clamp(-127.0, 127.0) as i8;
                sum += *q as i32;
            }
            scale[j] = s;
            offset[j] = 128 * sum;
        }
        Int8Matrix {
            #[cfg(target_arch = "x86_64")]
            panels: {
                let qf: Vec<f32> = q.iter().map(|&v| v as f32).collect();
                Panels::pack(&qf, n, k, |v, _| v as i8)
            },
            #[cfg(not(target_arch = "x86_64"))]
            rows: {
                let mut rows = vec![0i8; n * kp];
                for j in 0..n {
                    rows[j * kp..j * kp + k].copy_from_slice(&q[j * k..(j + 1) * k]);
                }
                rows
            },
            scale,
            offset,
            kp,
        }
    }

    /// The quantised weights of column `j`, `kp` values.
    fn column(&self, j: usize, buf: &mut [i8]) {
        #[cfg(target_arch = "x86_64")]
        {
            let (p, c) = (j / NR, j % NR);
            let panel = &self.panels.data[p * self.kp * NR..(p + 1) * self.kp * NR];
            for (g, quad) in buf.chunks_exact_mut(4).enumerate() {
                quad.copy_from_slice(&panel[(g * NR + c) * 4..(g * NR + c) * 4 + 4]);
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        buf.copy_from_slice(&self.rows[j * self.kp..(j + 1) * self.kp]);
    }

    /// The int8 product without VNNI: exact i32 sums, then the same dequantisation as the AVX-512
    /// kernel, operation for operation.
    #[allow(clippy::too_many_arguments)]
    fn portable(
        &self,
        a: &[u8],
        a_scale: &[f32],
        rows: usize,
        n: usize,
        bias: Option<&[f32]>,
        accumulate: bool,
        out: &mut [f32],
    ) {
        let kp = self.kp;
        let mut cols = vec![0i8; n * kp];
        cols.par_chunks_mut(kp)
            .enumerate()
            .for_each(|(j, c)| self.column(j, c));
        out[..rows * n]
            .par_chunks_mut(n)
            .zip(a.par_chunks(kp))
            .zip(a_scale.par_iter())
            .for_each(|((o, a), &sa)| {
                for (j, o) in o.iter_mut().enumerate() {
                    let sum = int_dot(a, &cols[j * kp..(j + 1) * kp]);
                    let mut v = (sum - self.offset[j]) as f32 * (sa * self.scale[j]);
                    if let Some(b) = bias {
                        v += b[j];
                    }
                    *o = if accumulate { *o + v } else { v };
                }
            });
    }
}

/// `Σ a·b` of unsigned and signed bytes, exactly.
fn int_dot(a: &[u8], b: &[i8]) -> i32 {
    a.iter().zip(b).map(|(&a, &b)| a as i32 * b as i32).sum()
}

/// The portable f32 product: one dot product per output value, rows in parallel.
#[allow(clippy::too_many_arguments)]
fn portable_f32(
    x: &[f32],
    w: &[f32],
    rows: usize,
    k: usize,
    n: usize,
    bias: Option<&[f32]>,
    accumulate: bool,
    out: &mut [f32],
) {
    out[..rows * n]
        .par_chunks_mut(n)
        .zip(x[..rows * k].par_chunks(k))
        .for_each(|(o, x)| {
            for (j, o) in o.iter_mut().enumerate() {
                let mut v = ops::dot_portable(x, &w[j * k..(j + 1) * k]);
                if let Some(b) = bias {
                    v += b[j];
                }
                *o = if accumulate { *o + v } else { v };
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::tests::pseudo;

    /// `x · Wᵀ + b` in f64, from the values the precision sees.
    fn reference(x: &[f32], w: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f64> {
        let mut out = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                let dot: f64 = (0..k)
                    .map(|t| x[i * k + t] as f64 * w[j * k + t] as f64)
                    .sum();
                out[i * n + j] = dot + b[j] as f64;
            }
        }
        out
    }

    /// Shapes with every remainder: rows below, at and above a tile and a chunk, columns below,
    /// at and above a panel, odd input sizes (bf16 pairs and int8 quads padded).
    const SHAPES: [(usize, usize, usize); 8] = [
        (1, 3, 2),
        (7, 33, 19),
        (5, 384, 67),
        (12, 41, 32),
        (13, 40, 33),
        (32, 64, 96),
        (65, 128, 70),
        (130, 37, 100),
    ];

    fn kernels() -> Vec<CpuKernel> {
        let all = [CpuKernel::Avx512, CpuKernel::Avx2, CpuKernel::Scalar];
        let (run, skip): (Vec<_>, Vec<_>) = all.into_iter().partition(|k| k.available());
        for k in skip {
            eprintln!("SKIPPED: this CPU cannot run the {k:?} kernels");
        }
        run
    }

    fn pool(threads: usize) -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
    }

    /// Runs `lin` on `x`, with and without the residual, at 1 and 3 threads; checks both against
    /// `want` within `tol` (relative to the row's largest value).
    fn check(lin: &Linear, x: &[f32], want: &[f64], m: usize, tol: f64, what: &str) {
        let n = lin.out_dim;
        for threads in [1, 3] {
            let got = pool(threads).install(|| lin.forward(x, m, Then::Store));
            let mut resid: Vec<f32> = (0..m * n).map(|i| (i % 7) as f32 - 3.0).collect();
            pool(threads).install(|| lin.forward_add(x, m, &mut resid));
            for i in 0..m {
                let row = &want[i * n..(i + 1) * n];
                let scale = row.iter().fold(1.0f64, |a, v| a.max(v.abs()));
                for j in 0..n {
                    let e = row[j];
                    let g = got[i * n + j] as f64;
                    let r = resid[i * n + j] as f64 - ((i * n + j) % 7) as f64 + 3.0;
                    assert!(
                        (g - e).abs() <= tol * scale && (r - e).abs() <= tol * scale,
                        "{what}, {threads} threads: [{i},{j}] = {g} (with residual {r}), want {e}"
                    );
                }
            }
        }
    }

    #[test]
    fn f32_kernels_match_the_reference() {
        for kernel in kernels() {
            for &(m, k, n) in &SHAPES {
                let (x, w, b) = (pseudo(m * k, 1), pseudo(n * k, 2), pseudo(n, 3));
                let dense = Dense {
                    weight: w.clone(),
                    bias: Some(b.clone()),
                    in_dim: k,
                    out_dim: n,
                };
                let lin = Linear::new(dense, Precision::F32, kernel);
                let want = reference(&x, &w, &b, m, k, n);
                check(
                    &lin,
                    &x,
                    &want,
                    m,
                    2e-6,
                    &format!("f32 {kernel:?} {m}x{k}x{n}"),
                );
            }
        }
    }

    #[test]
    fn bf16_kernels_compute_the_rounded_product() {
        for kernel in kernels() {
            for &(m, k, n) in &SHAPES {
                let (x, w, b) = (pseudo(m * k, 4), pseudo(n * k, 5), pseudo(n, 6));
                let dense = Dense {
                    weight: w.clone(),
                    bias: Some(b.clone()),
                    in_dim: k,
                    out_dim: n,
                };
                let lin = Linear::new(dense, Precision::Bf16, kernel);
                let r = |v: &[f32]| v.iter().map(|&v| round_bf16(v)).collect::<Vec<_>>();
                // The exact product of the rounded values: f32 sums of exact bf16 products.
                let want = reference(&r(&x), &r(&w), &b, m, k, n);
                check(
                    &lin,
                    &x,
                    &want,
                    m,
                    2e-6,
                    &format!("bf16 {kernel:?} {m}x{k}x{n}"),
                );
            }
        }
    }

    #[test]
    fn int8_kernels_agree_to_the_bit_and_approximate_f32() {
        let mut first: Option<Vec<Vec<f32>>> = None;
        for kernel in kernels() {
            let mut outs = Vec::new();
            for &(m, k, n) in &SHAPES {
                let (x, w, b) = (pseudo(m * k, 7), pseudo(n * k, 8), pseudo(n, 9));
                let dense = Dense {
                    weight: w.clone(),
                    bias: Some(b.clone()),
                    in_dim: k,
                    out_dim: n,
                };
                let lin = Linear::new(dense, Precision::Int8, kernel);
                let want = reference(&x, &w, &b, m, k, n);
                // Quantisation error: about sqrt(k) · (1/127)² of the unit-range values.
                let tol = 0.02;
                check(
                    &lin,
                    &x,
                    &want,
                    m,
                    tol,
                    &format!("int8 {kernel:?} {m}x{k}x{n}"),
                );
                outs.push(pool(2).install(|| lin.forward(&x, m, Then::Store)));
            }
            match &first {
                None => first = Some(outs),
                Some(f) => assert_eq!(f, &outs, "int8 {kernel:?} differs from the first kernel"),
            }
        }
    }

    #[test]
    fn fused_gelu_is_gelu_of_the_product() {
        for kernel in kernels() {
            for precision in Precision::ALL {
                let (m, k, n) = (19, 48, 70);
                let (x, w, b) = (pseudo(m * k, 10), pseudo(n * k, 11), pseudo(n, 12));
                let dense = Dense {
                    weight: w,
                    bias: Some(b),
                    in_dim: k,
                    out_dim: n,
                };
                let lin = Linear::new(dense, precision, kernel);
                let plain = pool(2).install(|| lin.forward(&x, m, Then::Store));
                let fused = pool(2).install(|| lin.forward(&x, m, Then::Gelu));
                let mut want = plain.clone();
                ops::gelu_erf_slice(&mut want);
                assert_eq!(fused, want, "{kernel:?} {precision:?}");
            }
        }
    }

    #[test]
    fn bf16_rounding_is_to_nearest_even() {
        assert_eq!(bf16_bits(1.0), 0x3f80);
        // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties to the even 1.0.
        assert_eq!(bf16_bits(1.0 + 1.0 / 256.0), 0x3f80);
        assert_eq!(bf16_bits(1.0 + 3.0 / 256.0), 0x3f82);
        assert_eq!(round_bf16(-2.5), -2.5);
        assert!(round_bf16(f32::NAN).is_nan());
        assert_eq!(round_bf16(f32::INFINITY), f32::INFINITY);
    }
}
