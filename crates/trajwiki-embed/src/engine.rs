//! What every CPU embedder shares: options, the thread pool, length-bucketed batching and the
//! final truncation and normalisation.

use rayon::ThreadPool;
use trajwiki_core::embed::{EmbedError, Embeddings};

use crate::ops::l2_normalize;

/// Options for loading an embedder. `Default` gives the model's own settings on all cores.
#[derive(Debug, Clone, Default)]
pub struct EmbedOptions {
    /// Worker threads (`None`: `RAYON_NUM_THREADS`, else every core).
    pub threads: Option<usize>,
    /// Output dimension (Matryoshka/MRL truncation, then renormalisation); `None`: the model's
    /// hidden size. Meaningful for MRL-trained models (Qwen3-Embedding).
    pub dim: Option<usize>,
    /// Token limit per text (`None`: the model folder's setting, see each model).
    pub max_len: Option<usize>,
    /// Task description put into the query instruction of instruction-tuned models (`None`: the
    /// model's default, see [`crate::qwen3::DEFAULT_TASK`]).
    pub task: Option<String>,
    /// Most texts per forward pass (`None`: 256).
    pub max_batch: Option<usize>,
    /// Most tokens per forward pass (`None`: 16 384).
    pub max_batch_tokens: Option<usize>,
    /// Number format of the linear layers' weights and products (`f32` unless asked).
    pub precision: Precision,
    /// The CPU kernels (`None`: the best this CPU has, see [`CpuKernel::detect`]).
    pub kernel: Option<CpuKernel>,
}

/// Number format of a model's linear layers on the CPU. It is part of the model id of every
/// precision but `f32`, so that vectors of different precisions are never cached as one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Precision {
    /// 32-bit floats: the checkpoint's values, parity with PyTorch.
    #[default]
    F32,
    /// Weights and activations rounded to bfloat16, products summed in f32 (`vdpbf16ps` on
    /// AVX-512 BF16).
    Bf16,
    /// Weights quantised to int8 per output column, activations per row, products summed exactly
    /// in i32 (`vpdpbusd` on AVX-512 VNNI).
    Int8,
}

impl Precision {
    /// Every precision, in the order they are documented.
    pub const ALL: [Precision; 3] = [Precision::F32, Precision::Bf16, Precision::Int8];

    /// The name used in model specs (`minilm@bf16`) and model ids.
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::Bf16 => "bf16",
            Precision::Int8 => "int8",
        }
    }

    /// The precision named `s` (`f32`, `bf16` or `int8`).
    pub fn from_name(s: &str) -> Option<Precision> {
        Precision::ALL.into_iter().find(|p| p.name() == s)
    }

    /// What a model id gets for this precision: nothing for f32, `-bf16` or `-int8` otherwise.
    pub(crate) fn id_suffix(self) -> String {
        match self {
            Precision::F32 => String::new(),
            p => format!("-{}", p.name()),
        }
    }
}

/// Which CPU kernels run the linear layers. Every kernel computes the same function of one
/// precision (see the crate's `linear` module); they differ in speed and in the order f32 sums
/// are taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CpuKernel {
    /// AVX-512F FMA tiles on weights packed at load; BF16 and VNNI instructions where the CPU has
    /// them.
    Avx512,
    /// The `gemm` crate's AVX2/FMA kernels (it picks its own fallback on older CPUs), and a
    /// dot-product kernel for few rows.
    Avx2,
    /// Portable loops, no instruction beyond baseline x86-64 (or the target's baseline).
    Scalar,
}

impl CpuKernel {
    /// The fastest kernel this CPU runs.
    pub fn detect() -> CpuKernel {
        [CpuKernel::Avx512, CpuKernel::Avx2]
            .into_iter()
            .find(|k| k.available())
            .unwrap_or(CpuKernel::Scalar)
    }

    /// The kernel named by `TRAJWIKI_CPU_KERNEL` (`avx512`, `avx2` or `scalar`), if set: to
    /// compare kernels, or to pin one across machines.
    pub fn from_env() -> Result<Option<CpuKernel>, EmbedError> {
        let Some(v) = std::env::var(KERNEL_ENV)
            .ok()
            .filter(|v| !v.trim().is_empty())
        else {
            return Ok(None);
        };
        [CpuKernel::Avx512, CpuKernel::Avx2, CpuKernel::Scalar]
            .into_iter()
            .find(|k| k.name() == v.trim())
            .map(Some)
            .ok_or_else(|| EmbedError::Setting {
                reason: format!("{KERNEL_ENV}={v:?}: expected avx512, avx2 or scalar"),
            })
    }

    /// The kernel's name (`avx512`, `avx2`, `scalar`).
    pub fn name(self) -> &'static str {
        match self {
            CpuKernel::Avx512 => "avx512",
            CpuKernel::Avx2 => "avx2",
            CpuKernel::Scalar => "scalar",
        }
    }

    /// Whether this CPU runs the kernel.
    pub fn available(self) -> bool {
        match self {
            #[cfg(target_arch = "x86_64")]
            CpuKernel::Avx512 => crate::avx512::has_f32(),
            #[cfg(target_arch = "x86_64")]
            CpuKernel::Avx2 => is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"),
            #[cfg(not(target_arch = "x86_64"))]
            CpuKernel::Avx512 | CpuKernel::Avx2 => false,
            CpuKernel::Scalar => true,
        }
    }

    /// The kernel's name, with the instructions a precision uses on this CPU
    /// (`avx512-vnni`, `avx512-f32` for emulated bf16, …).
    pub fn describe(self, precision: Precision) -> String {
        let base = self.name();
        #[cfg(target_arch = "x86_64")]
        let native = match (self, precision) {
            (CpuKernel::Avx512, Precision::Bf16) if crate::avx512::has_bf16() => "bf16",
            (CpuKernel::Avx512, Precision::Int8) if crate::avx512::has_vnni() => "vnni",
            (_, Precision::Int8) => "int8-portable",
            (_, Precision::Bf16) => "bf16-emulated",
            _ => "f32",
        };
        #[cfg(not(target_arch = "x86_64"))]
        let native = precision.name();
        format!("{base}-{native}")
    }
}

/// Environment variable that pins the CPU kernels (see [`CpuKernel::from_env`]).
pub const KERNEL_ENV: &str = "TRAJWIKI_CPU_KERNEL";

/// Runtime settings derived from [`EmbedOptions`].
pub(crate) struct Runtime {
    pub(crate) pool: ThreadPool,
    pub(crate) precision: Precision,
    pub(crate) kernel: CpuKernel,
    pub(crate) max_batch: usize,
    pub(crate) max_batch_tokens: usize,
}

impl Runtime {
    pub(crate) fn new(opts: &EmbedOptions) -> Result<Runtime, EmbedError> {
        let threads = opts
            .threads
            .filter(|&t| t > 0)
            .or_else(|| {
                std::env::var("RAYON_NUM_THREADS")
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .filter(|&t: &usize| t > 0)
            })
            .unwrap_or_else(|| {
                std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
            });
        let kernel = match opts
            .kernel
            .map_or_else(CpuKernel::from_env, |k| Ok(Some(k)))?
        {
            None => CpuKernel::detect(),
            Some(k) if k.available() => k,
            Some(k) => {
                return Err(EmbedError::Setting {
                    reason: format!("this CPU cannot run the {} kernels", k.name()),
                })
            }
        };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("trajwiki-embed-{i}"))
            .build()
            .map_err(|e| EmbedError::Backend {
                stage: "starting the thread pool",
                source: Box::new(e),
            })?;
        Ok(Runtime {
            pool,
            precision: opts.precision,
            kernel,
            max_batch: opts.max_batch.filter(|&b| b > 0).unwrap_or(256),
            max_batch_tokens: opts.max_batch_tokens.filter(|&b| b > 0).unwrap_or(16_384),
        })
    }

    /// `dense` prepared for this runtime's kernel and precision.
    pub(crate) fn linear(&self, dense: crate::ops::Dense) -> crate::linear::Linear {
        crate::linear::Linear::new(dense, self.precision, self.kernel)
    }

    /// A layer that int8 loses too much in, prepared for this runtime: as [`Runtime::linear`],
    /// except that int8 keeps it in bf16. These are the query, key and value projection (its
    /// input is a normalised residual stream whose few outlier channels set the per-row int8
    /// scale, and its errors pass through the softmax) and the feed-forward down projection (its
    /// input, the GELU or SwiGLU output, is heavy-tailed). On MiniLM, all layers in int8 leave the
    /// worst of 21 varied sentences at cosine 0.989 to f32 (short texts: mean pooling over few
    /// tokens averages little error away); these two in bf16, 0.995; on 2,000 LoCoMo turns 0.996
    /// and 0.997.
    pub(crate) fn linear_sensitive(&self, dense: crate::ops::Dense) -> crate::linear::Linear {
        let precision = match self.precision {
            Precision::Int8 => Precision::Bf16,
            p => p,
        };
        crate::linear::Linear::new(dense, precision, self.kernel)
    }

    /// Runs `forward` over `seqs` in length-sorted batches and returns one row of `out_dim` values
    /// per sequence, in input order, each truncated from `hidden` values and L2-normalised.
    /// `forward` gets a batch of sequences and returns `batch × hidden` pooled values.
    pub(crate) fn run_batched<F>(
        &self,
        seqs: &[Vec<u32>],
        hidden: usize,
        out_dim: usize,
        forward: F,
    ) -> Result<Embeddings, EmbedError>
    where
        F: Fn(&[&[u32]]) -> Vec<f32> + Sync,
    {
        let mut order: Vec<usize> = (0..seqs.len()).collect();
        order.sort_by_key(|&i| seqs[i].len());
        let mut out = vec![0.0f32; seqs.len() * out_dim];
        self.pool.install(|| {
            let mut start = 0;
            while start < order.len() {
                let mut end = start;
                let mut tokens = 0;
                while end < order.len()
                    && end - start < self.max_batch
                    && (end == start || tokens + seqs[order[end]].len() <= self.max_batch_tokens)
                {
                    tokens += seqs[order[end]].len();
                    end += 1;
                }
                let batch: Vec<&[u32]> = order[start..end].iter().map(|&i| &seqs[i][..]).collect();
                let pooled = forward(&batch);
                for (row, &i) in pooled.chunks_exact(hidden).zip(&order[start..end]) {
                    let dst = &mut out[i * out_dim..(i + 1) * out_dim];
                    dst.copy_from_slice(&row[..out_dim]);
                    l2_normalize(dst);
                }
                start = end;
            }
        });
        Embeddings::new(out_dim, out)
    }
}

/// Row ranges `(offset, len)` of packed sequences.
pub(crate) fn offsets(batch: &[&[u32]]) -> Vec<(usize, usize)> {
    let mut off = 0;
    batch
        .iter()
        .map(|s| {
            let r = (off, s.len());
            off += s.len();
            r
        })
        .collect()
}

/// Checks a requested output dimension against the hidden size.
pub(crate) fn out_dim(requested: Option<usize>, hidden: usize) -> Result<usize, EmbedError> {
    match requested {
        None => Ok(hidden),
        Some(d) if d > 0 && d <= hidden => Ok(d),
        Some(d) => Err(EmbedError::WrongDimension {
            expected: hidden,
            got: d,
        }),
    }
}
