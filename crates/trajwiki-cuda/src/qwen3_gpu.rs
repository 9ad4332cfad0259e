//! The device half of [`crate::CudaQwen3Embedder`]: the weights in device memory and the
//! forward pass of one padded batch, on a [`Worker`] thread.
#![allow(unsafe_code)] // FFI: cuBLAS calls on raw device pointers, kernel launches.

use cudarc::cublas::sys::cudaDataType_t;
use cudarc::driver::{
    CudaFunction, CudaSlice, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg,
};
use half::bf16;
use trajwiki_embed::{Qwen3Shape, Qwen3Tensors};

use crate::enabled::driver_err;
use crate::qwen3::PaddedBatch;
use crate::worker::{GemmTypes, Gpu, Worker};
use crate::{CudaError, DeviceInfo};

/// Threads of the row-wise kernels (`QW_THREADS` in qwen3.cu).
const ROW_THREADS: u32 = 256;
/// Query rows per attention block (`ATT_BQ`) and its threads (`ATT_WARPS · 32`).
const ATT_BQ: usize = 32;
const ATT_THREADS: u32 = 128;

/// One decoder layer on the device, bf16. Projections are `[out, in]` row-major as stored;
/// q/k/v and gate/up are concatenated along `out`.
struct Layer {
    input_norm: CudaSlice<bf16>,
    qkv: CudaSlice<bf16>,
    q_norm: CudaSlice<bf16>,
    k_norm: CudaSlice<bf16>,
    o: CudaSlice<bf16>,
    post_norm: CudaSlice<bf16>,
    gate_up: CudaSlice<bf16>,
    down: CudaSlice<bf16>,
}

/// The host copy of one layer, bf16, on its way to the device thread.
struct HostLayer {
    input_norm: Vec<bf16>,
    qkv: Vec<bf16>,
    q_norm: Vec<bf16>,
    k_norm: Vec<bf16>,
    o: Vec<bf16>,
    post_norm: Vec<bf16>,
    gate_up: Vec<bf16>,
    down: Vec<bf16>,
}

/// What the device thread owns.
struct State {
    gpu: Gpu,
    shape: Qwen3Shape,
    dim_out: usize,
    embed: Option<CudaSlice<bf16>>,
    final_norm: Option<CudaSlice<bf16>>,
    inv_freq: CudaSlice<f32>,
    layers: Vec<Layer>,
}

fn to_bf16(v: Vec<f32>) -> Vec<bf16> {
    v.into_iter().map(bf16::from_f32).collect()
}

/// The element type of a GEMM output.
#[derive(Clone, Copy)]
enum Out {
    /// bf16, overwritten (β = 0).
    Bf16,
    /// f32, accumulated into (β = 1): the residual stream.
    AccumulateF32,
}

/// The kernels of `kernels/qwen3.cu`.
const KERNELS: &[&str] = &[
    "embed_gather",
    "rms_norm_f32_bf16",
    "qk_norm_rope",
    "attention_bf16",
    "swiglu_bf16",
    "final_norm_pool",
];

impl State {
    fn function(&mut self, name: &'static str) -> Result<CudaFunction, CudaError> {
        self.gpu.function("qwen3", KERNELS, name)
    }

    fn push_layer(&mut self, l: HostLayer) -> Result<(), CudaError> {
        let g = &self.gpu;
        let layer = Layer {
            input_norm: g.upload(&l.input_norm)?,
            qkv: g.upload(&l.qkv)?,
            q_norm: g.upload(&l.q_norm)?,
            k_norm: g.upload(&l.k_norm)?,
            o: g.upload(&l.o)?,
            post_norm: g.upload(&l.post_norm)?,
            gate_up: g.upload(&l.gate_up)?,
            down: g.upload(&l.down)?,
        };
        // The host buffers are freed when this job returns; the copies must have completed.
        g.stream
            .synchronize()
            .map_err(driver_err("weight upload"))?;
        self.layers.push(layer);
        Ok(())
    }

    /// Row-major `y[rows, n] (=|+=) x[rows, k] · w[n, k]ᵀ` with bf16 inputs and f32 compute.
    fn gemm(
        &self,
        x: &CudaSlice<bf16>,
        w: &CudaSlice<bf16>,
        y: u64,
        out: Out,
        dims: (usize, usize, usize),
    ) -> Result<(), CudaError> {
        let types = GemmTypes {
            input: cudaDataType_t::CUDA_R_16BF,
            output: match out {
                Out::Bf16 => cudaDataType_t::CUDA_R_16BF,
                Out::AccumulateF32 => cudaDataType_t::CUDA_R_32F,
            },
            accumulate: matches!(out, Out::AccumulateF32),
        };
        let (xp, _gx) = x.device_ptr(&self.gpu.stream);
        let (wp, _gw) = w.device_ptr(&self.gpu.stream);
        // SAFETY: w holds n·k, x rows·k bf16 values and y rows·n values of the output type (the
        // callers allocate them so), all on this stream.
        unsafe { self.gpu.gemm(xp, wp, y, types, dims) }
    }

    /// The forward pass of one left-padded batch; returns `B × dim_out` L2-normalised rows.
    fn forward(&mut self, batch: PaddedBatch) -> Result<Vec<f32>, CudaError> {
        let sh = self.shape;
        let (h, d, hq, hkv, inter) = (
            sh.hidden,
            sh.head_dim,
            sh.heads,
            sh.kv_heads,
            sh.intermediate,
        );
        let b = batch.pad.len();
        let len = batch.len;
        let t = b * len;
        if t == 0 {
            return Ok(Vec::new());
        }
        let qkv_w = (hq + 2 * hkv) * d;
        let f_embed = self.function("embed_gather")?;
        let f_rms = self.function("rms_norm_f32_bf16")?;
        let f_qk = self.function("qk_norm_rope")?;
        let f_att = self.function("attention_bf16")?;
        let f_swiglu = self.function("swiglu_bf16")?;
        let f_pool = self.function("final_norm_pool")?;
        let s = self.gpu.stream.clone();
        let alloc = driver_err("activation alloc");
        let ids = s.clone_htod(&batch.ids).map_err(driver_err("id upload"))?;
        let pad = s.clone_htod(&batch.pad).map_err(driver_err("id upload"))?;
        let mut x = s.alloc_zeros::<f32>(t * h).map_err(alloc)?;
        let mut hn = s
            .alloc_zeros::<bf16>(t * h)
            .map_err(driver_err("activation alloc"))?;
        let mut qkv = s
            .alloc_zeros::<bf16>(t * qkv_w)
            .map_err(driver_err("activation alloc"))?;
        let mut ctx = s
            .alloc_zeros::<bf16>(t * hq * d)
            .map_err(driver_err("activation alloc"))?;
        let mut gu = s
            .alloc_zeros::<bf16>(t * 2 * inter)
            .map_err(driver_err("activation alloc"))?;
        let mut act = s
            .alloc_zeros::<bf16>(t * inter)
            .map_err(driver_err("activation alloc"))?;
        let mut pooled = s
            .alloc_zeros::<f32>(b * self.dim_out)
            .map_err(driver_err("activation alloc"))?;

        let (t32, h32, d32) = (t as u32, h as u32, d as u32);
        let (len32, hq32, hkv32, inter32) = (len as u32, hq as u32, hkv as u32, inter as u32);
        let eps = sh.rms_norm_eps;
        let rows_cfg = LaunchConfig {
            grid_dim: (t32, 1, 1),
            block_dim: (ROW_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let vocab32 = sh.vocab as u32;
        let embed = self.embed.as_ref().ok_or(CudaError::ThreadGone)?;
        let mut lb = s.launch_builder(&f_embed);
        lb.arg(&ids).arg(embed).arg(&vocab32).arg(&t32).arg(&h32);
        lb.arg(&mut x);
        // SAFETY: matches `embed_gather`: ids has t entries, the table vocab·h, x t·h.
        unsafe { lb.launch(rows_cfg) }.map_err(driver_err("embed_gather launch"))?;

        let qk_threads = (d / 2).div_ceil(32).clamp(1, 32) as u32 * 32;
        let qk_cfg = LaunchConfig {
            grid_dim: (t32, (hq + hkv) as u32, 1),
            block_dim: (qk_threads, 1, 1),
            shared_mem_bytes: 0,
        };
        let att_cfg = LaunchConfig {
            grid_dim: (len.div_ceil(ATT_BQ) as u32, hq32, b as u32),
            block_dim: (ATT_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let swiglu_n = t * inter;
        let swiglu_cfg = LaunchConfig {
            grid_dim: (swiglu_n.div_ceil(256) as u32, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let scale = 1.0f32 / (d as f32).sqrt();
        for layer in &self.layers {
            let mut lb = s.launch_builder(&f_rms);
            lb.arg(&x).arg(&layer.input_norm).arg(&mut hn);
            lb.arg(&t32).arg(&h32).arg(&eps);
            // SAFETY: matches `rms_norm_f32_bf16`: x and hn hold t·h values, the weight h.
            unsafe { lb.launch(rows_cfg) }.map_err(driver_err("rms_norm launch"))?;

            let (qp, _g) = qkv.device_ptr_mut(&s);
            self.gemm(&hn, &layer.qkv, qp, Out::Bf16, (t, h, qkv_w))?;
            drop(_g);

            let mut lb = s.launch_builder(&f_qk);
            lb.arg(&mut qkv)
                .arg(&layer.q_norm)
                .arg(&layer.k_norm)
                .arg(&self.inv_freq)
                .arg(&pad);
            lb.arg(&len32).arg(&hq32).arg(&hkv32).arg(&d32).arg(&eps);
            // SAFETY: matches `qk_norm_rope`: qkv is t·(hq + 2hkv)·d, the norms d, inv_freq d/2,
            // pad b entries; the grid covers t rows × (hq + hkv) heads.
            unsafe { lb.launch(qk_cfg) }.map_err(driver_err("qk_norm_rope launch"))?;

            let mut lb = s.launch_builder(&f_att);
            lb.arg(&qkv).arg(&pad).arg(&mut ctx);
            lb.arg(&len32).arg(&hq32).arg(&hkv32).arg(&d32).arg(&scale);
            // SAFETY: matches `attention_bf16`: qkv as above, ctx t·hq·d, d ≤ ATT_MAX_D (checked
            // at load), grid z = b ≤ 65 535 (the batch limit).
            unsafe { lb.launch(att_cfg) }.map_err(driver_err("attention launch"))?;

            let (xp, _g) = x.device_ptr_mut(&s);
            self.gemm(&ctx, &layer.o, xp, Out::AccumulateF32, (t, hq * d, h))?;
            drop(_g);

            let mut lb = s.launch_builder(&f_rms);
            lb.arg(&x).arg(&layer.post_norm).arg(&mut hn);
            lb.arg(&t32).arg(&h32).arg(&eps);
            // SAFETY: as the first RMSNorm.
            unsafe { lb.launch(rows_cfg) }.map_err(driver_err("rms_norm launch"))?;

            let (gp, _g) = gu.device_ptr_mut(&s);
            self.gemm(&hn, &layer.gate_up, gp, Out::Bf16, (t, h, 2 * inter))?;
            drop(_g);

            let mut lb = s.launch_builder(&f_swiglu);
            lb.arg(&gu).arg(&mut act).arg(&t32).arg(&inter32);
            // SAFETY: matches `swiglu_bf16`: gu is t·2·inter, act t·inter; one thread each.
            unsafe { lb.launch(swiglu_cfg) }.map_err(driver_err("swiglu launch"))?;

            let (xp, _g) = x.device_ptr_mut(&s);
            self.gemm(&act, &layer.down, xp, Out::AccumulateF32, (t, inter, h))?;
            drop(_g);
        }

        let final_norm = self.final_norm.as_ref().ok_or(CudaError::ThreadGone)?;
        let dim32 = self.dim_out as u32;
        let mut lb = s.launch_builder(&f_pool);
        lb.arg(&x)
            .arg(final_norm)
            .arg(&len32)
            .arg(&h32)
            .arg(&dim32)
            .arg(&eps);
        lb.arg(&mut pooled);
        let pool_cfg = LaunchConfig {
            grid_dim: (b as u32, 1, 1),
            block_dim: (ROW_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: matches `final_norm_pool`: x is b·len·h, the weight h, pooled b·dim_out.
        unsafe { lb.launch(pool_cfg) }.map_err(driver_err("final_norm_pool launch"))?;
        s.clone_dtoh(&pooled).map_err(driver_err("download"))
    }
}

/// The device thread and the model on it.
#[derive(Debug)]
pub(crate) struct Qwen3Device(Worker<State>);

impl Qwen3Device {
    /// Starts the device thread, compiles the kernels and uploads the weights layer by layer
    /// (each converted to bf16 on this thread, so the host holds one layer at a time).
    pub(crate) fn open(
        ordinal: usize,
        shape: &Qwen3Shape,
        dim_out: usize,
        tensors: &Qwen3Tensors,
    ) -> Result<Self, CudaError> {
        let shape_c = *shape;
        let worker = Worker::start(
            format!("trajwiki-cuda-qwen3-{ordinal}"),
            ordinal,
            move |gpu| {
                let inv_freq = gpu.upload(&shape_c.inv_freq())?;
                Ok(State {
                    gpu,
                    shape: shape_c,
                    dim_out,
                    embed: None,
                    final_norm: None,
                    inv_freq,
                    layers: Vec::new(),
                })
            },
        )?;
        let dev = Qwen3Device(worker);
        // Compile first: a kernel problem shows before gigabytes are read.
        dev.0.run(|g| g.function("attention_bf16").map(|_| ()))?;
        dev.upload_weights(shape, tensors)?;
        Ok(dev)
    }

    fn upload_weights(&self, s: &Qwen3Shape, w: &Qwen3Tensors) -> Result<(), CudaError> {
        let (h, nh, nkv, d, inter) = (s.hidden, s.heads, s.kv_heads, s.head_dim, s.intermediate);
        let get = |name: &str, shape: &[usize]| -> Result<Vec<bf16>, CudaError> {
            w.get(name, shape)
                .map(to_bf16)
                .map_err(|e| CudaError::Driver {
                    stage: "reading weights",
                    message: format!("{e}"),
                })
        };
        let embed = get("embed_tokens.weight", &[s.vocab, h])?;
        let final_norm = get("norm.weight", &[h])?;
        self.0.run(move |g| {
            g.embed = Some(g.gpu.upload(&embed)?);
            g.final_norm = Some(g.gpu.upload(&final_norm)?);
            g.gpu
                .stream
                .synchronize()
                .map_err(driver_err("weight upload"))
        })?;
        for i in 0..s.layers {
            let p = format!("layers.{i}");
            let mut qkv = get(&format!("{p}.self_attn.q_proj.weight"), &[nh * d, h])?;
            qkv.extend(get(&format!("{p}.self_attn.k_proj.weight"), &[nkv * d, h])?);
            qkv.extend(get(&format!("{p}.self_attn.v_proj.weight"), &[nkv * d, h])?);
            let mut gate_up = get(&format!("{p}.mlp.gate_proj.weight"), &[inter, h])?;
            gate_up.extend(get(&format!("{p}.mlp.up_proj.weight"), &[inter, h])?);
            let layer = HostLayer {
                input_norm: get(&format!("{p}.input_layernorm.weight"), &[h])?,
                qkv,
                q_norm: get(&format!("{p}.self_attn.q_norm.weight"), &[d])?,
                k_norm: get(&format!("{p}.self_attn.k_norm.weight"), &[d])?,
                o: get(&format!("{p}.self_attn.o_proj.weight"), &[h, nh * d])?,
                post_norm: get(&format!("{p}.post_attention_layernorm.weight"), &[h])?,
                gate_up,
                down: get(&format!("{p}.mlp.down_proj.weight"), &[h, inter])?,
            };
            self.0.run(move |g| g.push_layer(layer))?;
        }
        Ok(())
    }

    /// The device's description.
    pub(crate) fn info(&self) -> &DeviceInfo {
        self.0.info()
    }

    /// Runs one padded batch; `B × dim_out` L2-normalised rows.
    pub(crate) fn forward(&self, batch: PaddedBatch) -> Result<Vec<f32>, CudaError> {
        self.0.run(move |g| g.forward(batch))
    }
}
