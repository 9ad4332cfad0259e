//! The kernel sources (embedded from the workspace's `kernels/`) and what compiling them gives.

/// Largest `k` the top-k kernels take (larger requests get `ComputeError::Unsupported`).
pub const MAX_GPU_K: usize = 1024;

/// Helpers prepended to every kernel source.
pub const COMMON: &str = include_str!("../../../kernels/common.cuh");

/// Every kernel file: `(id, source)`. The id is the file stem and the cache key.
pub const KERNELS: &[(&str, &str)] = &[
    ("topk", include_str!("../../../kernels/topk.cu")),
    ("rrf", include_str!("../../../kernels/rrf.cu")),
    ("select", include_str!("../../../kernels/select.cu")),
    ("qwen3", include_str!("../../../kernels/qwen3.cu")),
    ("bert", include_str!("../../../kernels/bert.cu")),
];

/// The full source NVRTC compiles for kernel `id` (common helpers first), or `None`.
pub fn source(id: &str) -> Option<(&'static str, String)> {
    KERNELS
        .iter()
        .find(|(k, _)| *k == id)
        .map(|(k, s)| (*k, format!("{COMMON}\n#line 1 \"{k}.cu\"\n{s}")))
}

/// A kernel compiled to PTX.
#[derive(Debug, Clone)]
pub struct CompiledKernel {
    /// The kernel id.
    pub id: &'static str,
    /// The virtual architecture, e.g. `compute_90`.
    pub arch: String,
    /// The PTX text.
    pub ptx: String,
    /// NVRTC's log (warnings); empty when clean.
    pub log: String,
}

/// What the probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Device name.
    pub name: String,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
    /// Streaming multiprocessors.
    pub multiprocessors: i32,
    /// Total memory in bytes.
    pub total_memory: usize,
}

/// Where the CUDA headers are looked for: `TRAJWIKI_CUDA_INCLUDE`, then `$CUDA_HOME/include`,
/// `$CUDA_PATH/include`, `/usr/local/cuda/include` (the first holding `cuda_fp16.h`).
pub fn include_dir() -> Option<std::path::PathBuf> {
    let mut dirs: Vec<std::path::PathBuf> = Vec::new();
    if let Some(d) = std::env::var_os("TRAJWIKI_CUDA_INCLUDE") {
        dirs.push(d.into());
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(d) = std::env::var_os(var) {
            dirs.push(std::path::PathBuf::from(d).join("include"));
        }
    }
    dirs.push("/usr/local/cuda/include".into());
    dirs.into_iter().find(|d| d.join("cuda_fp16.h").is_file())
}
