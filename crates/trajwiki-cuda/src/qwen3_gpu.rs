//! The device half of [`crate::CudaQwen3Embedder`]: the weights in device memory, the cuBLAS
//! handle and the forward pass of one padded batch, all owned by one device thread.
#![allow(unsafe_code)] // FFI: cuBLAS calls on raw device pointers, kernel launches.

use std::collections::HashMap;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, sync_channel, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

use cudarc::cublas::{result as blas, sys as blas_sys, CudaBlas};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, LaunchConfig,
    PushKernelArg,
};
use cudarc::nvrtc::Ptx;
use half::bf16;
use trajwiki_embed::{Qwen3Shape, Qwen3Tensors};

use crate::enabled::{driver_err, open};
use crate::qwen3::PaddedBatch;
use crate::{compile_kernel, CudaError, DeviceInfo};

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
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    blas: CudaBlas,
    arch: String,
    functions: HashMap<&'static str, CudaFunction>,
    shape: Qwen3Shape,
    dim_out: usize,
    embed: Option<CudaSlice<bf16>>,
    final_norm: Option<CudaSlice<bf16>>,
    inv_freq: CudaSlice<f32>,
    layers: Vec<Layer>,
}

type Job = Box<dyn FnOnce(&mut State) + Send>;

fn blas_err(stage: &'static str) -> impl FnOnce(blas::CublasError) -> CudaError {
    move |e| CudaError::Driver {
        stage,
        message: format!("cuBLAS: {e:?}"),
    }
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

impl State {
    fn function(&mut self, name: &'static str) -> Result<CudaFunction, CudaError> {
        if let Some(f) = self.functions.get(name) {
            return Ok(f.clone());
        }
        let compiled = compile_kernel("qwen3", &self.arch)?;
        let module = self
            .ctx
            .load_module(Ptx::from_src(compiled.ptx))
            .map_err(driver_err("module load"))?;
        for n in [
            "embed_gather",
            "rms_norm_f32_bf16",
            "qk_norm_rope",
            "attention_bf16",
            "swiglu_bf16",
            "final_norm_pool",
        ] {
            let f = module
                .load_function(n)
                .map_err(driver_err("function load"))?;
            self.functions.insert(n, f);
        }
        self.functions
            .get(name)
            .cloned()
            .ok_or_else(|| CudaError::UnknownKernel(format!("qwen3::{name}")))
    }

    fn upload(&self, v: &[bf16]) -> Result<CudaSlice<bf16>, CudaError> {
        self.stream
            .clone_htod(v)
            .map_err(driver_err("weight upload"))
    }

    fn push_layer(&mut self, l: HostLayer) -> Result<(), CudaError> {
        let layer = Layer {
            input_norm: self.upload(&l.input_norm)?,
            qkv: self.upload(&l.qkv)?,
            q_norm: self.upload(&l.q_norm)?,
            k_norm: self.upload(&l.k_norm)?,
            o: self.upload(&l.o)?,
            post_norm: self.upload(&l.post_norm)?,
            gate_up: self.upload(&l.gate_up)?,
            down: self.upload(&l.down)?,
        };
        // The host buffers are freed when this job returns; the copies must have completed.
        self.stream
            .synchronize()
            .map_err(driver_err("weight upload"))?;
        self.layers.push(layer);
        Ok(())
    }

    /// Row-major `y[rows, n] (=|+=) x[rows, k] · w[n, k]ᵀ` with bf16 inputs and f32 compute.
    /// In cuBLAS's column-major terms this is `yᵀ (n × rows, ld n) = op(w) · xᵀ` with
    /// `op(w) = wᵀ` of the column-major `k × n` view of `w` (ld k) and `xᵀ` the column-major
    /// `k × rows` view of `x` (ld k).
    fn gemm(
        &self,
        x: &CudaSlice<bf16>,
        w: &CudaSlice<bf16>,
        y: u64,
        out: Out,
        (rows, k, n): (usize, usize, usize),
    ) -> Result<(), CudaError> {
        let dims = |v: usize| {
            i32::try_from(v).map_err(|_| CudaError::Driver {
                stage: "GEMM shape",
                message: format!("dimension {v} exceeds cuBLAS's 32-bit sizes"),
            })
        };
        let (m_, n_, k_) = (dims(n)?, dims(rows)?, dims(k)?);
        let alpha = 1.0f32;
        let beta = match out {
            Out::Bf16 => 0.0f32,
            Out::AccumulateF32 => 1.0f32,
        };
        let c_type = match out {
            Out::Bf16 => blas_sys::cudaDataType_t::CUDA_R_16BF,
            Out::AccumulateF32 => blas_sys::cudaDataType_t::CUDA_R_32F,
        };
        let (xp, _gx) = x.device_ptr(&self.stream);
        let (wp, _gw) = w.device_ptr(&self.stream);
        // SAFETY: w holds n·k, x rows·k bf16 values and y rows·n values of `c_type` (the callers
        // allocate them so); the handle is bound to this thread's stream; alpha and beta live
        // until the call returns (cuBLAS reads host scalars before returning).
        unsafe {
            blas::gemm_ex(
                *self.blas.handle(),
                blas_sys::cublasOperation_t::CUBLAS_OP_T,
                blas_sys::cublasOperation_t::CUBLAS_OP_N,
                m_,
                n_,
                k_,
                (&alpha) as *const f32 as *const c_void,
                wp as *const c_void,
                blas_sys::cudaDataType_t::CUDA_R_16BF,
                k_,
                xp as *const c_void,
                blas_sys::cudaDataType_t::CUDA_R_16BF,
                k_,
                (&beta) as *const f32 as *const c_void,
                y as *mut c_void,
                c_type,
                m_,
                blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                blas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(blas_err("GEMM"))
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
        let s = self.stream.clone();
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
pub(crate) struct Qwen3Device {
    tx: Option<Sender<Job>>,
    thread: Option<JoinHandle<()>>,
    info: DeviceInfo,
}

impl std::fmt::Debug for Qwen3Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Qwen3Device")
            .field("info", &self.info)
            .finish()
    }
}

/// Opens the context, stream and cuBLAS handle, without panicking when a library is missing.
fn open_state(
    ordinal: usize,
    shape: &Qwen3Shape,
    dim_out: usize,
) -> Result<(State, DeviceInfo), CudaError> {
    let (ctx, info) = open(ordinal)?;
    // SAFETY: only tries to open the library by its candidate names.
    let present = catch_unwind(|| unsafe { blas_sys::is_culib_present() });
    if !matches!(present, Ok(true)) {
        return Err(CudaError::Unavailable {
            reason: "no cuBLAS library (libcublas.so / libcublasLt.so) found; put the CUDA \
                     toolkit's or the nvidia-cublas wheel's lib directory on LD_LIBRARY_PATH"
                .into(),
        });
    }
    catch_unwind(AssertUnwindSafe(|| -> Result<_, CudaError> {
        // One stream, used in order: cross-stream event tracking only costs time.
        // SAFETY: nothing else uses this context's slices on another stream.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().map_err(driver_err("stream"))?;
        let blas = CudaBlas::new(stream.clone()).map_err(|e| CudaError::Unavailable {
            reason: format!("cannot create a cuBLAS handle: {e:?}"),
        })?;
        let inv_freq = stream
            .clone_htod(&shape.inv_freq())
            .map_err(driver_err("upload"))?;
        let (maj, min) = info.compute_capability;
        Ok((
            State {
                ctx,
                stream,
                blas,
                arch: format!("compute_{maj}{min}"),
                functions: HashMap::new(),
                shape: *shape,
                dim_out,
                embed: None,
                final_norm: None,
                inv_freq,
                layers: Vec::new(),
            },
            info,
        ))
    }))
    .map_err(|_| CudaError::Unavailable {
        reason: "the CUDA driver or cuBLAS panicked while starting (library missing or \
                 incompatible)"
            .into(),
    })?
}

impl Qwen3Device {
    /// Starts the device thread, compiles the kernels and uploads the weights layer by layer
    /// (each converted to bf16 on this thread, so the host holds one layer at a time).
    pub(crate) fn open(
        ordinal: usize,
        shape: &Qwen3Shape,
        dim_out: usize,
        tensors: &Qwen3Tensors,
    ) -> Result<Self, CudaError> {
        let (tx, rx) = channel::<Job>();
        let (init_tx, init_rx) = sync_channel(1);
        let (shape_c, dim_c) = (*shape, dim_out);
        let thread = std::thread::Builder::new()
            .name(format!("trajwiki-cuda-qwen3-{ordinal}"))
            .spawn(move || {
                let mut state = match open_state(ordinal, &shape_c, dim_c) {
                    Ok((state, info)) => {
                        let _ = init_tx.send(Ok(info));
                        state
                    }
                    Err(e) => {
                        let _ = init_tx.send(Err(e));
                        return;
                    }
                };
                while let Ok(job) = rx.recv() {
                    // A panicking job drops its reply channel; the caller sees ThreadGone.
                    let _ = catch_unwind(AssertUnwindSafe(|| job(&mut state)));
                }
            })
            .map_err(|e| CudaError::Unavailable {
                reason: format!("cannot start the device thread: {e}"),
            })?;
        let info = init_rx.recv().map_err(|_| CudaError::ThreadGone)??;
        let dev = Qwen3Device {
            tx: Some(tx),
            thread: Some(thread),
            info,
        };
        // Compile first: a kernel problem shows before gigabytes are read.
        dev.run(|g| g.function("attention_bf16").map(|_| ()))?;
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
        self.run(move |g| {
            g.embed = Some(g.upload(&embed)?);
            g.final_norm = Some(g.upload(&final_norm)?);
            g.stream.synchronize().map_err(driver_err("weight upload"))
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
            self.run(move |g| g.push_layer(layer))?;
        }
        Ok(())
    }

    /// The device's description.
    pub(crate) fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn run<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut State) -> Result<R, CudaError> + Send + 'static,
    ) -> Result<R, CudaError> {
        let (rtx, rrx) = sync_channel(1);
        self.tx
            .as_ref()
            .ok_or(CudaError::ThreadGone)?
            .send(Box::new(move |g: &mut State| {
                let _ = rtx.send(f(g));
            }))
            .map_err(|_| CudaError::ThreadGone)?;
        rrx.recv().map_err(|_| CudaError::ThreadGone)?
    }

    /// Runs one padded batch; `B × dim_out` L2-normalised rows.
    pub(crate) fn forward(&self, batch: PaddedBatch) -> Result<Vec<f32>, CudaError> {
        self.run(move |g| g.forward(batch))
    }
}

impl Drop for Qwen3Device {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
