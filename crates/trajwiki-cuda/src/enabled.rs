//! The real backend: NVRTC compilation, the device thread, and the kernel launches.
#![allow(unsafe_code)] // FFI: NVRTC program handles, library preloading, kernel launches.

use std::collections::HashMap;
use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, sync_channel, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;

use cudarc::driver::{
    sys::{CUdevice_attribute, CUfunction_attribute},
    CudaContext, CudaFunction, CudaSlice, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg,
    ValidAsZeroBits,
};
use cudarc::nvrtc::{result as nvrtc, Ptx};
use half::{bf16, f16};
use trajwiki_compute::rrf::check_k_const;
use trajwiki_compute::select::{CoverageWeights, SelectionBatch};
use trajwiki_compute::topk::{sort_hits, Hit, TopK};
use trajwiki_compute::{ComputeError, MatrixData, MatrixView, ScoringBackend};

use crate::kernels::{include_dir, source, MAX_GPU_K};
use crate::{CompiledKernel, CudaError, DeviceInfo};

const NO_INDEX: u32 = u32::MAX;
/// Queries per block of the top-k kernel (`TOPK_QT` in topk.cu).
const TOPK_QT: usize = 8;
/// Rows per chunk (`TOPK_CHUNK`).
const TOPK_CHUNK: usize = 256;

pub(crate) fn driver_err(
    stage: &'static str,
) -> impl FnOnce(cudarc::driver::DriverError) -> CudaError {
    move |e| CudaError::Driver {
        stage,
        message: e.to_string(),
    }
}

fn unsupported(reason: String) -> CudaError {
    CudaError::Input(ComputeError::Unsupported {
        backend: "cuda",
        reason,
    })
}

fn c_text(v: &[c_char]) -> String {
    let bytes: Vec<u8> = v
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Makes NVRTC loadable: preloads it from `TRAJWIKI_NVRTC_LIB_DIR` when set (so that cudarc's
/// lookup by soname finds it), then checks that it can be found, without panicking.
fn ensure_nvrtc() -> Result<(), CudaError> {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    READY
        .get_or_init(|| {
            if let Some(dir) = std::env::var_os("TRAJWIKI_NVRTC_LIB_DIR") {
                let dir = std::path::PathBuf::from(dir);
                for name in ["libnvrtc-builtins.so.13.0", "libnvrtc.so.13"] {
                    let path = dir.join(name);
                    if path.is_file() {
                        // SAFETY: loading NVIDIA's library runs its initialisers only; it is
                        // kept loaded for the life of the process.
                        match unsafe { libloading::Library::new(&path) } {
                            Ok(lib) => std::mem::forget(lib),
                            Err(e) => return Err(format!("cannot load {}: {e}", path.display())),
                        }
                    }
                }
            }
            // SAFETY: only tries to open the library by its candidate names.
            let present = catch_unwind(|| unsafe { cudarc::nvrtc::sys::is_culib_present() });
            match present {
                Ok(true) => Ok(()),
                _ => Err(
                    "libnvrtc not found; put its directory on LD_LIBRARY_PATH or in \
                          TRAJWIKI_NVRTC_LIB_DIR (scripts/fetch-nvrtc.sh fetches it)"
                        .into(),
                ),
            }
        })
        .clone()
        .map_err(|reason| CudaError::Unavailable { reason })
}

/// Whether NVRTC can be loaded (kernels are compiled at run time): an `Unavailable` error naming
/// where it is looked for otherwise.
pub fn nvrtc_ready() -> Result<(), CudaError> {
    ensure_nvrtc()
}

/// Compiles kernel `id` (a file stem under `kernels/`) to PTX for the virtual architecture
/// `arch` (e.g. `compute_90`) through NVRTC. The result is cached per process by `(id, arch)`;
/// the runtime and the PTX test both come through here. Errors carry NVRTC's log.
pub fn compile_kernel(id: &str, arch: &str) -> Result<CompiledKernel, CudaError> {
    static CACHE: OnceLock<Mutex<HashMap<(String, String), CompiledKernel>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let key = (id.to_string(), arch.to_string());
    if let Some(k) = cache.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return Ok(k.clone());
    }
    ensure_nvrtc()?;
    let (kid, src) = source(id).ok_or_else(|| CudaError::UnknownKernel(id.to_string()))?;
    let compile_err = |log: String| CudaError::Compile {
        kernel: kid,
        arch: arch.to_string(),
        log,
    };
    let mut opts = vec![
        format!("--gpu-architecture={arch}"),
        "--std=c++17".to_string(),
    ];
    if let Some(inc) = include_dir() {
        opts.push(format!("--include-path={}", inc.display()));
    }
    let src = CString::new(src).map_err(|e| compile_err(e.to_string()))?;
    let name = CString::new(format!("{kid}.cu")).map_err(|e| compile_err(e.to_string()))?;
    let compiled = catch_unwind(AssertUnwindSafe(|| -> Result<CompiledKernel, CudaError> {
        let prog = nvrtc::create_program(&src, Some(&name))
            .map_err(|e| compile_err(format!("nvrtcCreateProgram: {e:?}")))?;
        // SAFETY: `prog` was just created and is destroyed once, below.
        let status = unsafe { nvrtc::compile_program(prog, &opts) };
        let log = unsafe { nvrtc::get_program_log(prog) }
            .map(|l| c_text(&l))
            .unwrap_or_default();
        let ptx = match status {
            Ok(()) => unsafe { nvrtc::get_ptx(prog) }
                .map(|p| c_text(&p))
                .map_err(|e| compile_err(format!("nvrtcGetPTX: {e:?}\n{log}"))),
            Err(e) => Err(compile_err(format!("{e:?}\n{log}"))),
        };
        let _ = unsafe { nvrtc::destroy_program(prog) };
        Ok(CompiledKernel {
            id: kid,
            arch: arch.to_string(),
            ptx: ptx?,
            log: log.trim().to_string(),
        })
    }))
    .map_err(|_| CudaError::Unavailable {
        reason: "NVRTC panicked (library missing or incompatible)".into(),
    })??;
    cache
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key, compiled.clone());
    Ok(compiled)
}

/// Opens device `ordinal` and describes it; an error (never a panic) when the driver library
/// or the device is missing.
pub fn probe(ordinal: usize) -> Result<DeviceInfo, CudaError> {
    open(ordinal).map(|(_, info)| info)
}

pub(crate) fn open(ordinal: usize) -> Result<(Arc<CudaContext>, DeviceInfo), CudaError> {
    let unavailable = |reason: String| CudaError::Unavailable { reason };
    // SAFETY: only tries to open the library by its candidate names.
    let present = catch_unwind(|| unsafe { cudarc::driver::sys::is_culib_present() });
    if !matches!(present, Ok(true)) {
        return Err(unavailable(
            "no CUDA driver library (libcuda.so) found".into(),
        ));
    }
    catch_unwind(|| -> Result<_, CudaError> {
        let ctx = CudaContext::new(ordinal).map_err(|e| CudaError::Unavailable {
            reason: format!("cannot open CUDA device {ordinal}: {e}"),
        })?;
        let info = DeviceInfo {
            name: ctx.name().map_err(driver_err("device name"))?,
            compute_capability: ctx
                .compute_capability()
                .map_err(driver_err("compute capability"))?,
            multiprocessors: ctx
                .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
                .map_err(driver_err("multiprocessor count"))?,
            total_memory: ctx.total_mem().map_err(driver_err("total memory"))?,
        };
        Ok((ctx, info))
    })
    .map_err(|_| unavailable("the CUDA driver panicked while opening the device".into()))?
}

/// Rows on the device.
enum DevRows {
    F32(CudaSlice<f32>),
    F16(CudaSlice<f16>),
    Bf16(CudaSlice<bf16>),
}

/// Rows on the host, owned so that they can travel to the device thread.
enum HostRows {
    F32(Vec<f32>),
    F16(Vec<f16>),
    Bf16(Vec<bf16>),
}

impl HostRows {
    fn of(m: &MatrixView<'_>) -> Self {
        match m.data() {
            MatrixData::F32(d) => HostRows::F32(d.to_vec()),
            MatrixData::F16(d) => HostRows::F16(d.to_vec()),
            MatrixData::Bf16(d) => HostRows::Bf16(d.to_vec()),
        }
    }

    /// Only the listed rows, in order.
    fn gather(m: &MatrixView<'_>, rows: &[u32]) -> Self {
        let d = m.dim();
        fn pick<T: Copy>(src: &[T], rows: &[u32], d: usize) -> Vec<T> {
            let mut v = Vec::with_capacity(rows.len() * d);
            for &r in rows {
                v.extend_from_slice(&src[r as usize * d..(r as usize + 1) * d]);
            }
            v
        }
        match m.data() {
            MatrixData::F32(s) => HostRows::F32(pick(s, rows, d)),
            MatrixData::F16(s) => HostRows::F16(pick(s, rows, d)),
            MatrixData::Bf16(s) => HostRows::Bf16(pick(s, rows, d)),
        }
    }
}

struct Resident {
    rows: DevRows,
    n: usize,
    d: usize,
}

/// State owned by the device thread.
struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    arch: String,
    sms: usize,
    functions: HashMap<(&'static str, &'static str), CudaFunction>,
    matrices: HashMap<u64, Resident>,
    next_id: u64,
}

type Job = Box<dyn FnOnce(&mut Gpu) + Send>;

impl Gpu {
    fn function(
        &mut self,
        kernel: &'static str,
        name: &'static str,
    ) -> Result<CudaFunction, CudaError> {
        if let Some(f) = self.functions.get(&(kernel, name)) {
            return Ok(f.clone());
        }
        let compiled = compile_kernel(kernel, &self.arch)?;
        let module = self
            .ctx
            .load_module(Ptx::from_src(compiled.ptx))
            .map_err(driver_err("module load"))?;
        let f = module
            .load_function(name)
            .map_err(driver_err("function load"))?;
        self.functions.insert((kernel, name), f.clone());
        Ok(f)
    }

    fn upload(&mut self, host: HostRows, d: usize) -> Result<u64, CudaError> {
        let s = &self.stream;
        let (rows, n) = match host {
            HostRows::F32(v) => (
                DevRows::F32(s.clone_htod(&v).map_err(driver_err("upload"))?),
                v.len() / d,
            ),
            HostRows::F16(v) => (
                DevRows::F16(s.clone_htod(&v).map_err(driver_err("upload"))?),
                v.len() / d,
            ),
            HostRows::Bf16(v) => (
                DevRows::Bf16(s.clone_htod(&v).map_err(driver_err("upload"))?),
                v.len() / d,
            ),
        };
        let id = self.next_id;
        self.next_id += 1;
        self.matrices.insert(id, Resident { rows, n, d });
        Ok(id)
    }

    /// Appends rows to resident matrix `id` in place: into its spare capacity, or, when it is
    /// full, into a buffer twice as large that the existing rows are copied to on the device (so
    /// appending n rows one at a time copies O(n) rows in all). Returns the new row count.
    fn append(&mut self, id: u64, host: HostRows) -> Result<usize, CudaError> {
        /// Writes `new` after the first `used` values of `slice`, growing it when needed.
        fn extend<T: DeviceRepr + ValidAsZeroBits>(
            s: &Arc<CudaStream>,
            slice: &mut CudaSlice<T>,
            used: usize,
            new: &[T],
        ) -> Result<(), CudaError> {
            let need = used + new.len();
            if need > slice.len() {
                let mut bigger = s
                    .alloc_zeros::<T>(need.max(2 * slice.len()))
                    .map_err(driver_err("append alloc"))?;
                s.memcpy_dtod(&slice.slice(..used), &mut bigger.slice_mut(..used))
                    .map_err(driver_err("append copy"))?;
                *slice = bigger;
            }
            s.memcpy_htod(new, &mut slice.slice_mut(used..need))
                .map_err(driver_err("append upload"))?;
            // `new` is freed when the caller returns: the copy must be complete.
            s.synchronize().map_err(driver_err("append upload"))
        }
        let stream = self.stream.clone();
        let m = self.matrices.get_mut(&id).ok_or(CudaError::ThreadGone)?;
        let used = m.n * m.d;
        let added = match (&mut m.rows, &host) {
            (DevRows::F32(d), HostRows::F32(v)) => extend(&stream, d, used, v).map(|_| v.len()),
            (DevRows::F16(d), HostRows::F16(v)) => extend(&stream, d, used, v).map(|_| v.len()),
            (DevRows::Bf16(d), HostRows::Bf16(v)) => extend(&stream, d, used, v).map(|_| v.len()),
            _ => Err(unsupported(
                "appended rows must have the resident matrix's element type".into(),
            )),
        }?;
        m.n += added / m.d;
        Ok(m.n)
    }

    fn set_smem(f: &CudaFunction, bytes: usize) -> Result<(), CudaError> {
        if bytes > 48 * 1024 {
            f.set_attribute(
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                bytes as i32,
            )
            .map_err(driver_err("shared memory attribute"))?;
        }
        Ok(())
    }

    fn topk(&mut self, id: u64, queries: Vec<f32>, k: usize) -> Result<Vec<Vec<Hit>>, CudaError> {
        let (n, d) = match self.matrices.get(&id) {
            Some(m) => (m.n, m.d),
            None => return Err(CudaError::ThreadGone),
        };
        let b = queries.len() / d;
        if b == 0 {
            return Ok(Vec::new());
        }
        let k = k.min(n);
        if k == 0 {
            return Ok(vec![Vec::new(); b]);
        }
        if k > MAX_GPU_K {
            return Err(unsupported(format!("k = {k} > {MAX_GPU_K}")));
        }
        let smem = (TOPK_QT * d + TOPK_QT * TOPK_CHUNK + 2 * TOPK_QT * k) * 4;
        if smem > 200 * 1024 {
            return Err(unsupported(format!(
                "dim {d} with k {k} needs {smem} B of shared memory"
            )));
        }
        let ydim = b.div_ceil(TOPK_QT);
        if ydim > 65_535 {
            return Err(unsupported(format!("batch of {b} queries")));
        }
        let chunks = n.div_ceil(TOPK_CHUNK);
        let p = (self.sms * 4 / ydim).clamp(1, 4096).min(chunks);
        let name = match self.matrices[&id].rows {
            DevRows::F32(_) => "topk_partial_f32",
            DevRows::F16(_) => "topk_partial_f16",
            DevRows::Bf16(_) => "topk_partial_bf16",
        };
        let partial = self.function("topk", name)?;
        let merge = self.function("topk", "topk_merge")?;
        Self::set_smem(&partial, smem)?;
        let s = self.stream.clone();
        let q = s.clone_htod(&queries).map_err(driver_err("query upload"))?;
        let mut part_s = s
            .alloc_zeros::<f32>(p * b * k)
            .map_err(driver_err("alloc"))?;
        let mut part_i = s
            .alloc_zeros::<u32>(p * b * k)
            .map_err(driver_err("alloc"))?;
        let mut out_s = s.alloc_zeros::<f32>(b * k).map_err(driver_err("alloc"))?;
        let mut out_i = s.alloc_zeros::<u32>(b * k).map_err(driver_err("alloc"))?;
        let (n32, d32, b32, k32, p32) = (n as u32, d as u32, b as u32, k as u32, p as u32);
        let cfg = LaunchConfig {
            grid_dim: (p32, ydim as u32, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: smem as u32,
        };
        let m = &self.matrices[&id].rows;
        let mut lb = s.launch_builder(&partial);
        match m {
            DevRows::F32(x) => lb.arg(x),
            DevRows::F16(x) => lb.arg(x),
            DevRows::Bf16(x) => lb.arg(x),
        };
        lb.arg(&n32).arg(&d32).arg(&q).arg(&b32).arg(&k32);
        lb.arg(&mut part_s).arg(&mut part_i);
        // SAFETY: argument types and order match `topk_partial_*` in kernels/topk.cu; buffers
        // have the sizes the kernel indexes (p·b·k partials, b·d queries, n·d rows).
        unsafe { lb.launch(cfg) }.map_err(driver_err("topk_partial launch"))?;
        let cfg = LaunchConfig {
            grid_dim: (b32, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: (p * 4) as u32,
        };
        let mut lb = s.launch_builder(&merge);
        lb.arg(&part_s).arg(&part_i).arg(&p32).arg(&k32);
        lb.arg(&mut out_s).arg(&mut out_i);
        // SAFETY: matches `topk_merge`; out buffers hold b·k entries.
        unsafe { lb.launch(cfg) }.map_err(driver_err("topk_merge launch"))?;
        let hs = s.clone_dtoh(&out_s).map_err(driver_err("download"))?;
        let hi = s.clone_dtoh(&out_i).map_err(driver_err("download"))?;
        Ok((0..b)
            .map(|qy| {
                (0..k)
                    .map(|j| (hi[qy * k + j], hs[qy * k + j]))
                    .filter(|h| h.0 != NO_INDEX)
                    .collect()
            })
            .collect())
    }

    /// Scores listed rows of a resident matrix; `offsets` is CSR over queries into `rows`.
    fn subset_scores(
        &mut self,
        id: u64,
        queries: Vec<f32>,
        offsets: Vec<u32>,
        rows: Vec<u32>,
    ) -> Result<Vec<f32>, CudaError> {
        let (d, name) = match self.matrices.get(&id) {
            Some(m) => (
                m.d,
                match m.rows {
                    DevRows::F32(_) => "subset_scores_f32",
                    DevRows::F16(_) => "subset_scores_f16",
                    DevRows::Bf16(_) => "subset_scores_bf16",
                },
            ),
            None => return Err(CudaError::ThreadGone),
        };
        let total = rows.len();
        if total == 0 {
            return Ok(Vec::new());
        }
        let f = self.function("topk", name)?;
        let s = self.stream.clone();
        let q = s.clone_htod(&queries).map_err(driver_err("upload"))?;
        let qof = s.clone_htod(&offsets).map_err(driver_err("upload"))?;
        let cand = s.clone_htod(&rows).map_err(driver_err("upload"))?;
        let mut out = s.alloc_zeros::<f32>(total).map_err(driver_err("alloc"))?;
        let (d32, b32) = (d as u32, (offsets.len() - 1) as u32);
        let threads = 256usize;
        let cfg = LaunchConfig {
            grid_dim: ((total * 32).div_ceil(threads) as u32, 1, 1),
            block_dim: (threads as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        let m = &self.matrices[&id].rows;
        let mut lb = s.launch_builder(&f);
        match m {
            DevRows::F32(x) => lb.arg(x),
            DevRows::F16(x) => lb.arg(x),
            DevRows::Bf16(x) => lb.arg(x),
        };
        lb.arg(&d32)
            .arg(&q)
            .arg(&b32)
            .arg(&qof)
            .arg(&cand)
            .arg(&mut out);
        // SAFETY: matches `subset_scores_*`; one warp per (query, candidate) pair.
        unsafe { lb.launch(cfg) }.map_err(driver_err("subset_scores launch"))?;
        s.clone_dtoh(&out).map_err(driver_err("download"))
    }

    fn rrf_dense(
        &mut self,
        ranks: Vec<u32>,
        b: usize,
        r: usize,
        u: usize,
        k_const: f32,
    ) -> Result<Vec<f32>, CudaError> {
        if b * u == 0 {
            return Ok(vec![0.0; b * u]);
        }
        let f = self.function("rrf", "rrf_dense")?;
        let s = self.stream.clone();
        let ranks_d = s.clone_htod(&ranks).map_err(driver_err("upload"))?;
        let mut out = s.alloc_zeros::<f32>(b * u).map_err(driver_err("alloc"))?;
        let (b32, r32, u32_) = (b as u32, r as u32, u as u32);
        let cfg = LaunchConfig::for_num_elems((b * u) as u32);
        let mut lb = s.launch_builder(&f);
        lb.arg(&ranks_d)
            .arg(&b32)
            .arg(&r32)
            .arg(&u32_)
            .arg(&k_const)
            .arg(&mut out);
        // SAFETY: matches `rrf_dense`; ranks hold b·r·u entries, out b·u.
        unsafe { lb.launch(cfg) }.map_err(driver_err("rrf_dense launch"))?;
        s.clone_dtoh(&out).map_err(driver_err("download"))
    }

    fn select(
        &mut self,
        batch: SelectionBatch,
        w: [f32; 17],
        k: usize,
    ) -> Result<Vec<Vec<u32>>, CudaError> {
        let b = batch.len();
        if b == 0 {
            return Ok(Vec::new());
        }
        if k == 0 {
            return Ok(vec![Vec::new(); b]);
        }
        let sw = batch.words();
        let off = batch.offsets();
        let n_max = off
            .windows(2)
            .map(|x| (x[1] - x[0]) as usize)
            .max()
            .unwrap_or(0);
        let kk = k.min(n_max.max(1));
        let smem = sw.candidate() * 8 + n_max + 4 + kk * 4 + 8;
        if smem > 200 * 1024 {
            return Err(unsupported(format!(
                "{n_max} candidates need {smem} B of shared memory"
            )));
        }
        let f = self.function("select", "coverage_select")?;
        Self::set_smem(&f, smem)?;
        let s = self.stream.clone();
        // Zero-length buffers are padded to one element: the driver refuses empty allocations.
        fn pad<T: Copy + Default>(v: &[T]) -> Vec<T> {
            if v.is_empty() {
                vec![T::default()]
            } else {
                v.to_vec()
            }
        }
        let up = |e| CudaError::Driver {
            stage: "upload",
            message: format!("{e}"),
        };
        let offsets = s.clone_htod(off).map_err(up)?;
        let cbits = s.clone_htod(&pad(batch.candidate_bits())).map_err(up)?;
        let ccl = s.clone_htod(&pad(batch.candidate_clusters())).map_err(up)?;
        let cfl = s.clone_htod(&pad(batch.candidate_flags())).map_err(up)?;
        let cfam = s.clone_htod(&pad(batch.candidate_family())).map_err(up)?;
        let qbits = s.clone_htod(&pad(batch.query_bits())).map_err(up)?;
        let qfl = s.clone_htod(batch.query_flags()).map_err(up)?;
        let wd = s.clone_htod(&w).map_err(up)?;
        let mut picks = s.alloc_zeros::<u32>(b * kk).map_err(driver_err("alloc"))?;
        let (we, wf, wi, wt) = (
            sw.entities as u32,
            sw.facets as u32,
            sw.items as u32,
            sw.terms as u32,
        );
        let (k32, nmax32) = (kk as u32, n_max as u32);
        let cfg = LaunchConfig {
            grid_dim: (b as u32, 1, 1),
            block_dim: (128, 1, 1),
            shared_mem_bytes: smem as u32,
        };
        let mut lb = s.launch_builder(&f);
        lb.arg(&offsets)
            .arg(&cbits)
            .arg(&ccl)
            .arg(&cfl)
            .arg(&cfam)
            .arg(&qbits)
            .arg(&qfl)
            .arg(&wd);
        lb.arg(&we)
            .arg(&wf)
            .arg(&wi)
            .arg(&wt)
            .arg(&k32)
            .arg(&nmax32)
            .arg(&mut picks);
        // SAFETY: matches `coverage_select` in kernels/select.cu; the batch arrays are the
        // validated `SelectionBatch` layout; picks hold b·kk entries.
        unsafe { lb.launch(cfg) }.map_err(driver_err("coverage_select launch"))?;
        let h = s.clone_dtoh(&picks).map_err(driver_err("download"))?;
        Ok(h.chunks(kk)
            .map(|c| c.iter().copied().take_while(|&i| i != NO_INDEX).collect())
            .collect())
    }

    fn copy_bandwidth(&mut self, bytes: usize, iters: usize) -> Result<f64, CudaError> {
        let s = self.stream.clone();
        let src = s.alloc_zeros::<u8>(bytes).map_err(driver_err("alloc"))?;
        let mut dst = s.alloc_zeros::<u8>(bytes).map_err(driver_err("alloc"))?;
        s.memcpy_dtod(&src, &mut dst).map_err(driver_err("copy"))?;
        s.synchronize().map_err(driver_err("sync"))?;
        let t = std::time::Instant::now();
        for _ in 0..iters {
            s.memcpy_dtod(&src, &mut dst).map_err(driver_err("copy"))?;
        }
        s.synchronize().map_err(driver_err("sync"))?;
        // A copy reads and writes every byte.
        Ok(2.0 * (bytes * iters) as f64 / t.elapsed().as_secs_f64())
    }
}

/// The CUDA scoring backend. Cloning is not offered: one value owns one device thread.
pub struct CudaScoring {
    tx: Option<Sender<Job>>,
    thread: Option<JoinHandle<()>>,
    info: DeviceInfo,
    /// This backend's number in the process, which the matrices it keeps carry.
    owner: u64,
}

/// Numbers for [`CudaScoring::owner`].
static OWNERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl std::fmt::Debug for CudaScoring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaScoring")
            .field("info", &self.info)
            .finish()
    }
}

/// A matrix resident in device memory, freed when dropped.
pub struct DeviceMatrix {
    id: u64,
    rows: usize,
    dim: usize,
    tx: Sender<Job>,
    /// The [`CudaScoring`] that holds it.
    owner: u64,
}

impl trajwiki_compute::Kept for DeviceMatrix {
    fn rows(&self) -> usize {
        self.rows
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl std::fmt::Debug for DeviceMatrix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceMatrix")
            .field("rows", &self.rows)
            .field("dim", &self.dim)
            .finish()
    }
}

impl DeviceMatrix {
    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }
}

impl Drop for DeviceMatrix {
    fn drop(&mut self) {
        let id = self.id;
        let _ = self.tx.send(Box::new(move |g: &mut Gpu| {
            g.matrices.remove(&id);
        }));
    }
}

impl CudaScoring {
    /// Opens device `ordinal` on a new device thread. Fails (without panicking) when there is
    /// no driver or device; kernels are compiled lazily, on first use.
    pub fn new(ordinal: usize) -> Result<Self, CudaError> {
        let (tx, rx) = channel::<Job>();
        let (init_tx, init_rx) = sync_channel(1);
        let thread = std::thread::Builder::new()
            .name(format!("trajwiki-cuda-{ordinal}"))
            .spawn(move || {
                let opened = open(ordinal).and_then(|(ctx, info)| {
                    let stream = ctx.new_stream().map_err(driver_err("stream"))?;
                    Ok((ctx, stream, info))
                });
                let mut gpu = match opened {
                    Ok((ctx, stream, info)) => {
                        let (maj, min) = info.compute_capability;
                        let gpu = Gpu {
                            ctx,
                            stream,
                            arch: format!("compute_{maj}{min}"),
                            sms: info.multiprocessors.max(1) as usize,
                            functions: HashMap::new(),
                            matrices: HashMap::new(),
                            next_id: 0,
                        };
                        let _ = init_tx.send(Ok(info));
                        gpu
                    }
                    Err(e) => {
                        let _ = init_tx.send(Err(e));
                        return;
                    }
                };
                while let Ok(job) = rx.recv() {
                    // A panicking job drops its reply channel; the caller sees ThreadGone.
                    let _ = catch_unwind(AssertUnwindSafe(|| job(&mut gpu)));
                }
            })
            .map_err(|e| CudaError::Unavailable {
                reason: format!("cannot start the device thread: {e}"),
            })?;
        let info = init_rx.recv().map_err(|_| CudaError::ThreadGone)??;
        Ok(CudaScoring {
            tx: Some(tx),
            thread: Some(thread),
            info,
            owner: OWNERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        })
    }

    /// The device's description.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn sender(&self) -> Result<&Sender<Job>, CudaError> {
        self.tx.as_ref().ok_or(CudaError::ThreadGone)
    }

    /// Runs `f` on the device thread and waits for its result.
    fn run<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Gpu) -> Result<R, CudaError> + Send + 'static,
    ) -> Result<R, CudaError> {
        let (rtx, rrx) = sync_channel(1);
        self.sender()?
            .send(Box::new(move |g: &mut Gpu| {
                let _ = rtx.send(f(g));
            }))
            .map_err(|_| CudaError::ThreadGone)?;
        rrx.recv().map_err(|_| CudaError::ThreadGone)?
    }

    /// Copies a matrix to device memory, where it stays until the handle is dropped.
    pub fn upload(&self, matrix: &MatrixView<'_>) -> Result<DeviceMatrix, CudaError> {
        let host = HostRows::of(matrix);
        let d = matrix.dim();
        let id = self.run(move |g| g.upload(host, d))?;
        Ok(DeviceMatrix {
            id,
            rows: matrix.rows(),
            dim: d,
            tx: self.sender()?.clone(),
            owner: self.owner,
        })
    }

    /// Appends `rows` (same dimension and element type) to a resident matrix in place; the
    /// device keeps spare capacity, so a namespace that grows a message at a time copies each
    /// row to the device once (and its existing rows only when the capacity doubles).
    pub fn append(
        &self,
        matrix: &mut DeviceMatrix,
        rows: &MatrixView<'_>,
    ) -> Result<(), CudaError> {
        self.check_owner(matrix)?;
        if rows.dim() != matrix.dim {
            return Err(CudaError::Input(ComputeError::WrongDimension {
                what: "appended rows",
                expected: matrix.dim,
                got: rows.dim(),
            }));
        }
        if rows.rows() == 0 {
            return Ok(());
        }
        let (id, host) = (matrix.id, HostRows::of(rows));
        matrix.rows = self.run(move |g| g.append(id, host))?;
        Ok(())
    }

    /// Refuses a matrix that another `CudaScoring` holds (its ids mean nothing here).
    fn check_owner(&self, matrix: &DeviceMatrix) -> Result<(), CudaError> {
        if matrix.owner == self.owner {
            Ok(())
        } else {
            Err(unsupported(
                "the matrix is held by another CUDA backend".into(),
            ))
        }
    }

    /// Fused cosine top-k over a resident matrix (see [`ScoringBackend::cosine_topk`]).
    pub fn cosine_topk_resident(
        &self,
        matrix: &DeviceMatrix,
        queries: &[f32],
        k: usize,
    ) -> Result<Vec<Vec<Hit>>, CudaError> {
        self.check_owner(matrix)?;
        if !queries.len().is_multiple_of(matrix.dim) {
            return Err(CudaError::Input(ComputeError::WrongDimension {
                what: "queries (a multiple of the matrix dim)",
                expected: (queries.len() / matrix.dim + 1) * matrix.dim,
                got: queries.len(),
            }));
        }
        let (id, q) = (matrix.id, queries.to_vec());
        self.run(move |g| g.topk(id, q, k))
    }

    /// Measured device-to-device copy bandwidth in bytes/s (reads + writes), the floor the
    /// top-k benchmark is compared with.
    pub fn copy_bandwidth(&self, bytes: usize, iters: usize) -> Result<f64, CudaError> {
        self.run(move |g| g.copy_bandwidth(bytes, iters.max(1)))
    }
}

impl Drop for CudaScoring {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl ScoringBackend for CudaScoring {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn cosine_topk(
        &self,
        matrix: &MatrixView<'_>,
        queries: &[f32],
        k: usize,
    ) -> Result<Vec<Vec<Hit>>, ComputeError> {
        if !queries.len().is_multiple_of(matrix.dim()) {
            return Err(ComputeError::WrongDimension {
                what: "queries (a multiple of the matrix dim)",
                expected: (queries.len() / matrix.dim() + 1) * matrix.dim(),
                got: queries.len(),
            });
        }
        if queries.is_empty() {
            return Ok(Vec::new());
        }
        if matrix.rows() == 0 || k == 0 {
            return Ok(vec![Vec::new(); queries.len() / matrix.dim()]);
        }
        let dm = self.upload(matrix)?;
        Ok(self.cosine_topk_resident(&dm, queries, k)?)
    }

    fn keep(
        &self,
        matrix: &MatrixView<'_>,
    ) -> Result<Option<Box<dyn trajwiki_compute::Kept>>, ComputeError> {
        if matrix.rows() == 0 {
            return Ok(None);
        }
        Ok(Some(Box::new(self.upload(matrix)?)))
    }

    fn cosine_topk_kept(
        &self,
        kept: &dyn trajwiki_compute::Kept,
        queries: &[f32],
        k: usize,
    ) -> Result<Vec<Vec<Hit>>, ComputeError> {
        let matrix = kept
            .as_any()
            .downcast_ref::<DeviceMatrix>()
            .ok_or_else(|| unsupported("not a matrix kept by the CUDA backend".into()))?;
        if queries.is_empty() {
            return Ok(Vec::new());
        }
        if k == 0 {
            return Ok(vec![Vec::new(); queries.len() / matrix.dim.max(1)]);
        }
        Ok(self.cosine_topk_resident(matrix, queries, k)?)
    }

    fn cosine_topk_subset(
        &self,
        matrix: &MatrixView<'_>,
        queries: &[f32],
        candidates: &[&[u32]],
        k: usize,
    ) -> Result<Vec<Vec<Hit>>, ComputeError> {
        let d = matrix.dim();
        if !queries.len().is_multiple_of(d) {
            return Err(ComputeError::WrongDimension {
                what: "queries (a multiple of the matrix dim)",
                expected: (queries.len() / d + 1) * d,
                got: queries.len(),
            });
        }
        let b = queries.len() / d;
        if candidates.len() != b {
            return Err(ComputeError::BatchMismatch {
                what: "candidate lists",
                expected: b,
                got: candidates.len(),
            });
        }
        // Unique rows across the batch are gathered and uploaded once; pairs refer to them.
        let mut lists: Vec<Vec<u32>> = Vec::with_capacity(b);
        for c in candidates {
            if let Some(&bad) = c.iter().find(|&&i| i as usize >= matrix.rows()) {
                return Err(ComputeError::IndexOutOfRange {
                    what: "matrix rows",
                    index: bad as u64,
                    len: matrix.rows(),
                });
            }
            let mut v = c.to_vec();
            v.sort_unstable();
            v.dedup();
            lists.push(v);
        }
        let mut uniq: Vec<u32> = lists.iter().flatten().copied().collect();
        uniq.sort_unstable();
        uniq.dedup();
        if uniq.is_empty() {
            return Ok(vec![Vec::new(); b]);
        }
        let mut offsets = vec![0u32];
        let mut local = Vec::new();
        for l in &lists {
            local.extend(l.iter().map(|r| uniq.binary_search(r).unwrap_or(0) as u32));
            offsets.push(local.len() as u32);
        }
        let host = HostRows::gather(matrix, &uniq);
        let q = queries.to_vec();
        let scores = self.run(move |g| {
            let id = g.upload(host, d)?;
            let r = g.subset_scores(id, q, offsets, local);
            g.matrices.remove(&id);
            r
        })?;
        let mut out = Vec::with_capacity(b);
        let mut at = 0;
        for l in &lists {
            let mut top = TopK::new(k);
            for &row in l {
                top.push(row, scores[at]);
                at += 1;
            }
            out.push(top.into_sorted());
        }
        Ok(out)
    }

    fn rrf_batch(&self, batch: &[&[&[u32]]], k_const: f32) -> Result<Vec<Vec<Hit>>, ComputeError> {
        check_k_const(k_const)?;
        let b = batch.len();
        let r = batch.iter().map(|x| x.len()).max().unwrap_or(0);
        let universes: Vec<Vec<u32>> = batch
            .iter()
            .map(|rankings| {
                let mut u: Vec<u32> = rankings.iter().flat_map(|x| x.iter().copied()).collect();
                u.sort_unstable();
                u.dedup();
                u
            })
            .collect();
        let u = universes.iter().map(Vec::len).max().unwrap_or(0);
        if b == 0 {
            return Ok(Vec::new());
        }
        let mut ranks = vec![0u32; b * r * u];
        for (qy, rankings) in batch.iter().enumerate() {
            for (j, ranking) in rankings.iter().enumerate() {
                let row = &mut ranks[(qy * r + j) * u..(qy * r + j + 1) * u];
                for (pos, id) in ranking.iter().enumerate() {
                    let slot = universes[qy].binary_search(id).unwrap_or(0);
                    if row[slot] == 0 {
                        row[slot] = pos as u32 + 1;
                    }
                }
            }
        }
        let scores = self.run(move |g| g.rrf_dense(ranks, b, r, u, k_const))?;
        Ok(universes
            .iter()
            .enumerate()
            .map(|(qy, ids)| {
                let mut hits: Vec<Hit> = ids
                    .iter()
                    .enumerate()
                    .map(|(j, &id)| (id, scores[qy * u + j]))
                    .collect();
                sort_hits(&mut hits);
                hits
            })
            .collect())
    }

    fn coverage_select(
        &self,
        batch: &SelectionBatch,
        weights: &CoverageWeights,
        k: usize,
    ) -> Result<Vec<Vec<u32>>, ComputeError> {
        weights.validate()?;
        let (owned, w) = (batch.clone(), weights.to_array());
        Ok(self.run(move |g| g.select(owned, w, k))?)
    }
}
