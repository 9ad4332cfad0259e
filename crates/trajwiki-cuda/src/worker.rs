//! What the model forward passes on the device share: a thread that owns the context, its
//! stream, the cuBLAS handle and the model's state, fed by a channel (callers never hold the
//! context); the kernels of one file, compiled on first use; and the matrix product with 16-bit
//! inputs and f32 compute.
#![allow(unsafe_code)] // FFI: cuBLAS calls on raw device pointers.

use std::collections::HashMap;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, sync_channel, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

use cudarc::cublas::{result as blas, sys as blas_sys, CudaBlas};
use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, DeviceRepr};
use cudarc::nvrtc::Ptx;

use crate::enabled::{driver_err, open};
use crate::{compile_kernel, CudaError, DeviceInfo};

/// The device, as the thread that owns it sees it.
pub(crate) struct Gpu {
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) stream: Arc<CudaStream>,
    blas: CudaBlas,
    arch: String,
    functions: HashMap<&'static str, CudaFunction>,
}

/// Element types of a matrix product: the inputs', the output's, and whether the output is
/// accumulated into (β = 1) or overwritten.
#[derive(Clone, Copy)]
pub(crate) struct GemmTypes {
    pub(crate) input: blas_sys::cudaDataType_t,
    pub(crate) output: blas_sys::cudaDataType_t,
    pub(crate) accumulate: bool,
}

fn blas_err(stage: &'static str) -> impl FnOnce(blas::CublasError) -> CudaError {
    move |e| CudaError::Driver {
        stage,
        message: format!("cuBLAS: {e:?}"),
    }
}

impl Gpu {
    /// Opens the context, stream and cuBLAS handle of device `ordinal`, without panicking when a
    /// library is missing.
    fn open(ordinal: usize) -> Result<(Gpu, DeviceInfo), CudaError> {
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
            let (maj, min) = info.compute_capability;
            Ok((
                Gpu {
                    ctx,
                    stream,
                    blas,
                    arch: format!("compute_{maj}{min}"),
                    functions: HashMap::new(),
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

    /// Kernel `name` of kernel file `file`, whose entries are `names`; the file is compiled for
    /// this device and loaded the first time one of them is asked for.
    pub(crate) fn function(
        &mut self,
        file: &'static str,
        names: &[&'static str],
        name: &'static str,
    ) -> Result<CudaFunction, CudaError> {
        if let Some(f) = self.functions.get(name) {
            return Ok(f.clone());
        }
        let compiled = compile_kernel(file, &self.arch)?;
        let module = self
            .ctx
            .load_module(Ptx::from_src(compiled.ptx))
            .map_err(driver_err("module load"))?;
        for &n in names {
            let f = module
                .load_function(n)
                .map_err(driver_err("function load"))?;
            self.functions.insert(n, f);
        }
        self.functions
            .get(name)
            .cloned()
            .ok_or_else(|| CudaError::UnknownKernel(format!("{file}::{name}")))
    }

    /// Copies `v` to the device (asynchronously: keep `v` alive until the stream is synchronised).
    pub(crate) fn upload<T: DeviceRepr>(&self, v: &[T]) -> Result<CudaSlice<T>, CudaError> {
        self.stream
            .clone_htod(v)
            .map_err(driver_err("weight upload"))
    }

    /// Row-major `y[rows, n] (=|+=) x[rows, k] · w[n, k]ᵀ` with f32 compute, on raw device
    /// pointers. In cuBLAS's column-major terms this is `yᵀ (n × rows, ld n) = op(w) · xᵀ` with
    /// `op(w) = wᵀ` of the column-major `k × n` view of `w` (ld k) and `xᵀ` the column-major
    /// `k × rows` view of `x` (ld k).
    ///
    /// # Safety
    /// `w` must hold n·k and `x` rows·k values of `types.input`, `y` rows·n values of
    /// `types.output`, all on this device and ordered on this stream.
    pub(crate) unsafe fn gemm(
        &self,
        x: u64,
        w: u64,
        y: u64,
        types: GemmTypes,
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
        let beta = if types.accumulate { 1.0f32 } else { 0.0 };
        // SAFETY: the caller's contract; the handle is bound to this thread's stream; alpha and
        // beta live until the call returns (cuBLAS reads host scalars before returning).
        unsafe {
            blas::gemm_ex(
                *self.blas.handle(),
                blas_sys::cublasOperation_t::CUBLAS_OP_T,
                blas_sys::cublasOperation_t::CUBLAS_OP_N,
                m_,
                n_,
                k_,
                (&alpha) as *const f32 as *const c_void,
                w as *const c_void,
                types.input,
                k_,
                x as *const c_void,
                types.input,
                k_,
                (&beta) as *const f32 as *const c_void,
                y as *mut c_void,
                types.output,
                m_,
                blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                blas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(blas_err("GEMM"))
    }
}

type Job<S> = Box<dyn FnOnce(&mut S) + Send>;

/// A device thread owning a [`Gpu`] inside the state `S` that `init` makes of it; calls from any
/// thread are serialised through its channel.
pub(crate) struct Worker<S> {
    tx: Option<Sender<Job<S>>>,
    thread: Option<JoinHandle<()>>,
    info: DeviceInfo,
}

impl<S> std::fmt::Debug for Worker<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker").field("info", &self.info).finish()
    }
}

impl<S: 'static> Worker<S> {
    /// Starts thread `name` on device `ordinal` with the state `init` makes of the opened device.
    pub(crate) fn start(
        name: String,
        ordinal: usize,
        init: impl FnOnce(Gpu) -> Result<S, CudaError> + Send + 'static,
    ) -> Result<Self, CudaError> {
        let (tx, rx) = channel::<Job<S>>();
        let (init_tx, init_rx) = sync_channel(1);
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || {
                let opened = Gpu::open(ordinal).and_then(|(gpu, info)| {
                    catch_unwind(AssertUnwindSafe(|| init(gpu)))
                        .map_err(|_| CudaError::ThreadGone)?
                        .map(|state| (state, info))
                });
                let mut state = match opened {
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
        Ok(Worker {
            tx: Some(tx),
            thread: Some(thread),
            info,
        })
    }

    /// The device's description.
    pub(crate) fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// Runs `f` on the device thread and waits for its result.
    pub(crate) fn run<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut S) -> Result<R, CudaError> + Send + 'static,
    ) -> Result<R, CudaError> {
        let (rtx, rrx) = sync_channel(1);
        self.tx
            .as_ref()
            .ok_or(CudaError::ThreadGone)?
            .send(Box::new(move |s: &mut S| {
                let _ = rtx.send(f(s));
            }))
            .map_err(|_| CudaError::ThreadGone)?;
        rrx.recv().map_err(|_| CudaError::ThreadGone)?
    }
}

impl<S> Drop for Worker<S> {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
