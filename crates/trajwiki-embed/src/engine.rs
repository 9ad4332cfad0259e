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
}

/// Runtime settings derived from [`EmbedOptions`].
pub(crate) struct Runtime {
    pub(crate) pool: ThreadPool,
    pub(crate) threads: usize,
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
            threads,
            max_batch: opts.max_batch.filter(|&b| b > 0).unwrap_or(256),
            max_batch_tokens: opts.max_batch_tokens.filter(|&b| b > 0).unwrap_or(16_384),
        })
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
