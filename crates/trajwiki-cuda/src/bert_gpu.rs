//! The device half of [`crate::CudaBertEmbedder`]: the weights in device memory and the forward
//! pass of one packed batch, on a [`Worker`] thread.
#![allow(unsafe_code)] // FFI: cuBLAS calls on raw device pointers, kernel launches.

use cudarc::cublas::sys::cudaDataType_t;
use cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg,
};
use half::f16;
use trajwiki_embed::{BertLinear, BertNorm, BertShape, BertSpec, BertWeights, Pooling};

use crate::bert::PackedBatch;
use crate::enabled::driver_err;
use crate::worker::{GemmTypes, Gpu, Worker};
use crate::{CudaError, DeviceInfo};

/// Threads of the row kernels (`BT_THREADS` in bert.cu).
const ROW_THREADS: u32 = 256;
/// Query rows per attention block (`BA_BQ`) and its threads (`BA_WARPS · 32`).
const ATT_BQ: usize = 32;
const ATT_THREADS: u32 = 128;
/// Threads of the element-wise kernels.
const ELEM_THREADS: u32 = 256;

/// The kernels of `kernels/bert.cu`.
const KERNELS: &[&str] = &[
    "bert_embed_norm",
    "bert_bias_residual_norm",
    "bert_bias_half",
    "bert_bias_gelu_half",
    "bert_attention_32",
    "bert_attention_64",
    "bert_attention_128",
    "bert_pool",
];

/// A projection on the device: f16 weight `[out, in]`, f32 bias.
struct Linear {
    weight: CudaSlice<f16>,
    bias: CudaSlice<f32>,
}

/// A LayerNorm on the device, f32.
struct Norm {
    weight: CudaSlice<f32>,
    bias: CudaSlice<f32>,
}

struct Layer {
    qkv: Linear,
    attn_out: Linear,
    attn_norm: Norm,
    inter: Linear,
    out: Linear,
    out_norm: Norm,
}

/// What the device thread owns.
struct State {
    gpu: Gpu,
    shape: BertShape,
    pooling: Pooling,
    dim_out: usize,
    word: CudaSlice<f32>,
    position: CudaSlice<f32>,
    token_type: CudaSlice<f32>,
    embed_norm: Norm,
    layers: Vec<Layer>,
}

fn upload_linear(gpu: &Gpu, l: &BertLinear) -> Result<Linear, CudaError> {
    let weight: Vec<f16> = l.weight.iter().map(|&v| f16::from_f32(v)).collect();
    let out = Linear {
        weight: gpu.upload(&weight)?,
        bias: gpu.upload(&l.bias)?,
    };
    // `weight` is freed when this returns; the copy must have completed.
    gpu.stream
        .synchronize()
        .map_err(driver_err("weight upload"))?;
    Ok(out)
}

fn upload_norm(gpu: &Gpu, n: &BertNorm) -> Result<Norm, CudaError> {
    Ok(Norm {
        weight: gpu.upload(&n.weight)?,
        bias: gpu.upload(&n.bias)?,
    })
}

/// Launch shape of a row kernel over `rows` rows.
fn per_row(rows: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (rows as u32, 1, 1),
        block_dim: (ROW_THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Launch shape of an element-wise kernel over `n` values.
fn per_value(n: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (n.div_ceil(ELEM_THREADS as usize) as u32, 1, 1),
        block_dim: (ELEM_THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

impl State {
    fn function(&mut self, name: &'static str) -> Result<CudaFunction, CudaError> {
        self.gpu.function("bert", KERNELS, name)
    }

    /// The attention kernel for this model's head size.
    fn attention(&mut self) -> Result<CudaFunction, CudaError> {
        match self.shape.head_dim() {
            0..=32 => self.function("bert_attention_32"),
            33..=64 => self.function("bert_attention_64"),
            _ => self.function("bert_attention_128"),
        }
    }

    /// Row-major `y[rows, n] = x[rows, k] · w[n, k]ᵀ`, f16 inputs, f32 output and compute.
    fn gemm(
        &self,
        x: &CudaSlice<f16>,
        w: &CudaSlice<f16>,
        y: &mut CudaSlice<f32>,
        dims: (usize, usize, usize),
    ) -> Result<(), CudaError> {
        let s = &self.gpu.stream;
        let (xp, _gx) = x.device_ptr(s);
        let (wp, _gw) = w.device_ptr(s);
        let (yp, _gy) = y.device_ptr_mut(s);
        let types = GemmTypes {
            input: cudaDataType_t::CUDA_R_16F,
            output: cudaDataType_t::CUDA_R_32F,
            accumulate: false,
        };
        // SAFETY: the callers allocate w with n·k, x with at least rows·k f16 values and y with
        // at least rows·n f32 values, all on this stream.
        unsafe { self.gpu.gemm(xp, wp, yp, types, dims) }
    }

    /// The forward pass of one packed batch; `B × dim_out` L2-normalised rows.
    fn forward(&mut self, batch: PackedBatch) -> Result<Vec<f32>, CudaError> {
        let sh = self.shape;
        let (h, heads, d, inter) = (sh.hidden, sh.heads, sh.head_dim(), sh.intermediate);
        let (t, b) = (batch.ids.len(), batch.texts());
        if t == 0 {
            return Ok(Vec::new());
        }
        let f_embed = self.function("bert_embed_norm")?;
        let f_norm = self.function("bert_bias_residual_norm")?;
        let f_bias = self.function("bert_bias_half")?;
        let f_gelu = self.function("bert_bias_gelu_half")?;
        let f_att = self.attention()?;
        let f_pool = self.function("bert_pool")?;
        let s: std::sync::Arc<CudaStream> = self.gpu.stream.clone();
        let up = driver_err("batch upload");
        let ids = s.clone_htod(&batch.ids).map_err(up)?;
        let pos = s
            .clone_htod(&batch.pos)
            .map_err(driver_err("batch upload"))?;
        let starts = s
            .clone_htod(&batch.starts)
            .map_err(driver_err("batch upload"))?;
        let alloc = |n: usize| {
            s.alloc_zeros::<f32>(n)
                .map_err(driver_err("activation alloc"))
        };
        let alloc_h = |n: usize| {
            s.alloc_zeros::<f16>(n)
                .map_err(driver_err("activation alloc"))
        };
        let mut x = alloc(t * h)?;
        let mut xh = alloc_h(t * h)?;
        let mut y = alloc(t * (3 * h).max(inter))?;
        let mut qkv = alloc_h(t * 3 * h)?;
        let mut ctx = alloc_h(t * h)?;
        let mut act = alloc_h(t * inter)?;
        let mut pooled = alloc(b * self.dim_out)?;

        let (t32, h32, heads32, d32) = (t as u32, h as u32, heads as u32, d as u32);
        let (qkv32, inter32) = ((3 * h) as u32, inter as u32);
        let eps = sh.layer_norm_eps;
        let vocab32 = sh.vocab as u32;
        let mut lb = s.launch_builder(&f_embed);
        lb.arg(&ids).arg(&pos).arg(&self.word).arg(&self.position);
        lb.arg(&self.token_type)
            .arg(&self.embed_norm.weight)
            .arg(&self.embed_norm.bias);
        lb.arg(&vocab32).arg(&t32).arg(&h32).arg(&eps);
        lb.arg(&mut x).arg(&mut xh);
        // SAFETY: matches `bert_embed_norm`: ids and pos hold t entries (positions below the
        // model's limit, checked by the caller), the tables vocab·h and max_positions·h, the
        // type row and the norm h, x and xh t·h; h ≤ MAX_HIDDEN (checked at load).
        unsafe { lb.launch(per_row(t)) }.map_err(driver_err("bert_embed_norm launch"))?;

        let att_cfg = LaunchConfig {
            grid_dim: (batch.longest.div_ceil(ATT_BQ) as u32, heads32, b as u32),
            block_dim: (ATT_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let scale = 1.0f32 / (d as f32).sqrt();
        for layer in &self.layers {
            self.gemm(&xh, &layer.qkv.weight, &mut y, (t, h, 3 * h))?;
            let mut lb = s.launch_builder(&f_bias);
            lb.arg(&y)
                .arg(&layer.qkv.bias)
                .arg(&t32)
                .arg(&qkv32)
                .arg(&mut qkv);
            // SAFETY: matches `bert_bias_half`: y holds at least t·3h values, the bias 3h, qkv
            // t·3h; one thread per value.
            unsafe { lb.launch(per_value(t * 3 * h)) }
                .map_err(driver_err("bert_bias_half launch"))?;

            let mut lb = s.launch_builder(&f_att);
            lb.arg(&qkv).arg(&starts).arg(&mut ctx);
            lb.arg(&heads32).arg(&d32).arg(&scale);
            // SAFETY: matches `bert_attention_*`: qkv is t·3·heads·d, starts b + 1 row offsets
            // ending at t, ctx t·heads·d; d is a multiple of 4 within the kernel's MAX_D (checked
            // at load and by the kernel choice); grid z = b ≤ 65 535 (the batch limit).
            unsafe { lb.launch(att_cfg) }.map_err(driver_err("bert_attention launch"))?;

            self.gemm(&ctx, &layer.attn_out.weight, &mut y, (t, h, h))?;
            let mut lb = s.launch_builder(&f_norm);
            lb.arg(&y)
                .arg(&layer.attn_out.bias)
                .arg(&layer.attn_norm.weight)
                .arg(&layer.attn_norm.bias);
            lb.arg(&t32).arg(&h32).arg(&eps).arg(&mut x).arg(&mut xh);
            // SAFETY: matches `bert_bias_residual_norm`: y holds at least t·h values, the bias
            // and norm h, x and xh t·h.
            unsafe { lb.launch(per_row(t)) }
                .map_err(driver_err("bert_bias_residual_norm launch"))?;

            self.gemm(&xh, &layer.inter.weight, &mut y, (t, h, inter))?;
            let mut lb = s.launch_builder(&f_gelu);
            lb.arg(&y)
                .arg(&layer.inter.bias)
                .arg(&t32)
                .arg(&inter32)
                .arg(&mut act);
            // SAFETY: matches `bert_bias_gelu_half`: y holds at least t·inter values, the bias
            // inter, act t·inter; one thread per value.
            unsafe { lb.launch(per_value(t * inter)) }
                .map_err(driver_err("bert_bias_gelu_half launch"))?;

            self.gemm(&act, &layer.out.weight, &mut y, (t, inter, h))?;
            let mut lb = s.launch_builder(&f_norm);
            lb.arg(&y)
                .arg(&layer.out.bias)
                .arg(&layer.out_norm.weight)
                .arg(&layer.out_norm.bias);
            lb.arg(&t32).arg(&h32).arg(&eps).arg(&mut x).arg(&mut xh);
            // SAFETY: as the first residual LayerNorm.
            unsafe { lb.launch(per_row(t)) }
                .map_err(driver_err("bert_bias_residual_norm launch"))?;
        }

        let cls = u32::from(self.pooling == Pooling::Cls);
        let dim32 = self.dim_out as u32;
        let mut lb = s.launch_builder(&f_pool);
        lb.arg(&x)
            .arg(&starts)
            .arg(&cls)
            .arg(&h32)
            .arg(&dim32)
            .arg(&mut pooled);
        // SAFETY: matches `bert_pool`: x is t·h, starts b + 1 offsets, pooled b·dim_out with
        // dim_out ≤ h ≤ MAX_HIDDEN.
        unsafe { lb.launch(per_row(b)) }.map_err(driver_err("bert_pool launch"))?;
        s.clone_dtoh(&pooled).map_err(driver_err("download"))
    }
}

/// The device thread and the model on it.
#[derive(Debug)]
pub(crate) struct BertDevice(Worker<State>);

impl BertDevice {
    /// Starts the device thread, compiles the kernels and uploads the weights (projections
    /// converted to f16 one at a time).
    pub(crate) fn open(
        ordinal: usize,
        spec: &BertSpec,
        weights: BertWeights,
    ) -> Result<Self, CudaError> {
        let (shape, pooling, dim_out) = (spec.shape(), spec.pooling(), spec.dim());
        let worker = Worker::start(
            format!("trajwiki-cuda-bert-{ordinal}"),
            ordinal,
            move |mut gpu| {
                // Compile first: a kernel problem shows before the weights are read.
                gpu.function("bert", KERNELS, "bert_pool")?;
                let embed_norm = upload_norm(&gpu, &weights.embed_norm)?;
                let (word, position, token_type) = (
                    gpu.upload(&weights.word)?,
                    gpu.upload(&weights.position)?,
                    gpu.upload(&weights.token_type)?,
                );
                let mut layers = Vec::with_capacity(weights.layers.len());
                for l in &weights.layers {
                    layers.push(Layer {
                        qkv: upload_linear(&gpu, &l.qkv)?,
                        attn_out: upload_linear(&gpu, &l.attn_out)?,
                        attn_norm: upload_norm(&gpu, &l.attn_norm)?,
                        inter: upload_linear(&gpu, &l.inter)?,
                        out: upload_linear(&gpu, &l.out)?,
                        out_norm: upload_norm(&gpu, &l.out_norm)?,
                    });
                }
                // The host weights are dropped with this closure; the copies must be done.
                gpu.stream
                    .synchronize()
                    .map_err(driver_err("weight upload"))?;
                Ok(State {
                    gpu,
                    shape,
                    pooling,
                    dim_out,
                    word,
                    position,
                    token_type,
                    embed_norm,
                    layers,
                })
            },
        )?;
        Ok(BertDevice(worker))
    }

    /// The device's description.
    pub(crate) fn info(&self) -> &DeviceInfo {
        self.0.info()
    }

    /// Runs one packed batch; `B × dim_out` L2-normalised rows.
    pub(crate) fn forward(&self, batch: PackedBatch) -> Result<Vec<f32>, CudaError> {
        self.0.run(move |g| g.forward(batch))
    }
}
