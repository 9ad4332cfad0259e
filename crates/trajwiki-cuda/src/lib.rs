//! The CUDA backend of trajwiki, and the only crate that touches `cudarc`.
//!
//! [`CudaScoring`] implements [`trajwiki_compute::ScoringBackend`] with kernels from the
//! workspace's `kernels/*.cu`: a fused cosine + top-k that never writes the score matrix to
//! device memory, batched reciprocal rank fusion, and batched greedy coverage selection (one
//! block per query) that reproduces the CPU's picks exactly. The kernel sources are embedded
//! with `include_str!` and compiled by NVRTC for the device's compute capability once per
//! process ([`compile_kernel`] is the one compile path, used at run time and by the PTX test);
//! compile errors carry the NVRTC log. All device work runs on one thread that owns the context
//! and its stream and is fed by a channel, so callers (async servers, Python) never hold the
//! context.
//!
//! [`CudaQwen3Embedder`] (module [`qwen3`]) is Qwen3-Embedding on the GPU: the same model folder,
//! tokenizer, model id and [`trajwiki_embed::Embedder`] contract as the CPU model, with the
//! projections through cuBLAS (bf16 inputs, f32 accumulation into an f32 residual stream) and the
//! rest in `kernels/qwen3.cu`; texts are grouped by length and left-padded.
//!
//! [`CudaBertEmbedder`] (module [`bert`]) is the same for BERT-family sentence encoders (the
//! default MiniLM among them): f16 projections through cuBLAS with f32 accumulation, the rest in
//! `kernels/bert.cu`; texts are grouped by length and packed without padding.
//!
//! Built without the `cuda` feature, the same API exists and every constructor returns
//! [`CudaError::NotBuilt`]; callers select a backend with [`Device`] and [`scoring_backend`]
//! and never write `#[cfg]` themselves. `Device::Auto` probes the driver without panicking
//! (cudarc loads the libraries dynamically and panics when one is missing; the probe checks for
//! them first and catches any panic) and falls back to the CPU.
//!
//! ```
//! use trajwiki_compute::{MatrixView, ScoringBackend};
//! use trajwiki_cuda::{scoring_backend, Device};
//!
//! let backend = scoring_backend("cpu".parse::<Device>().unwrap()).unwrap();
//! let rows = [1.0, 0.0, 0.0, 1.0];
//! let m = MatrixView::f32(&rows, 2).unwrap();
//! assert_eq!(backend.cosine_topk(&m, &[0.0, 1.0], 1).unwrap()[0][0].0, 1);
//! // `auto` gives the GPU when there is one and the CPU otherwise.
//! let any = scoring_backend(Device::Auto).unwrap();
//! assert!(["cpu", "cuda"].contains(&any.name()));
//! ```

pub mod bert;
mod device;
mod error;
pub mod kernels;
pub mod qwen3;

#[cfg(feature = "cuda")]
mod bert_gpu;
#[cfg(feature = "cuda")]
mod enabled;
#[cfg(feature = "cuda")]
mod qwen3_gpu;
#[cfg(feature = "cuda")]
mod worker;
#[cfg(feature = "cuda")]
mod imp {
    pub(crate) use crate::bert_gpu::BertDevice;
    pub use crate::enabled::{compile_kernel, nvrtc_ready, probe, CudaScoring, DeviceMatrix};
    pub(crate) use crate::qwen3_gpu::Qwen3Device;
}

#[cfg(not(feature = "cuda"))]
mod disabled;
#[cfg(not(feature = "cuda"))]
use disabled as imp;

pub use bert::CudaBertEmbedder;
pub use device::{scoring_backend, Device};
pub use error::CudaError;
pub use imp::{compile_kernel, nvrtc_ready, probe, CudaScoring, DeviceMatrix};
pub use kernels::{CompiledKernel, DeviceInfo, KERNELS, MAX_GPU_K};
pub use qwen3::CudaQwen3Embedder;

/// Whether this build contains the CUDA backend (the `cuda` feature).
pub const BUILT_WITH_CUDA: bool = cfg!(feature = "cuda");
