//! Qwen3-Embedding on a CUDA device: the same model folder, tokenizer and [`Embedder`] contract
//! as the CPU model ([`trajwiki_embed::Qwen3Embedder`]), with the forward pass on the GPU.
//!
//! Texts are tokenised on the CPU (exactly as the CPU model does, through
//! [`trajwiki_embed::Qwen3Spec`]), sorted by length and cut into batches whose padded size
//! (texts × longest) stays within the token budget; each batch is left-padded so that every
//! text's last token (`<|endoftext|>`, the pooled one) sits in the last row. On the device
//! (kernels in `kernels/qwen3.cu`, matrix products through cuBLAS with bf16 inputs and f32
//! accumulation), per layer: RMSNorm of the f32 residual stream to bf16, the fused q/k/v
//! projection, per-head q/k RMSNorm and rotary embedding (positions counted from each text's first
//! real token), tiled causal grouped-query attention with the padding mask, the output projection
//! accumulated into the residual in f32, RMSNorm, the fused gate/up projection, SwiGLU and the down
//! projection accumulated likewise; then the final RMSNorm of each last token, Matryoshka
//! truncation and L2 normalisation. Weights are converted to bf16 on upload, tensor by tensor.
//!
//! The model id is the CPU model's: the weights and the output dimension are the same and the
//! vectors agree to bf16 precision (cosine ≥ 0.999, checked by `tests/qwen3_twin.rs`), so a store
//! built on one device can be queried from the other.

use std::path::Path;

use trajwiki_embed::{
    open_checkpoint, EmbedError, EmbedKind, EmbedOptions, Embedder, Embeddings, Qwen3Spec,
};

use crate::{CudaError, DeviceInfo};

/// Largest head size the attention kernel takes (`ATT_MAX_D` in `kernels/qwen3.cu`; it also
/// needs a multiple of 4); every Qwen3 model has 128.
pub const MAX_HEAD_DIM: usize = 128;

/// Texts per forward pass when the options give none.
pub const DEFAULT_MAX_BATCH: usize = 256;

/// Padded tokens (texts × longest text) per forward pass when the options give none.
pub const DEFAULT_MAX_BATCH_TOKENS: usize = 16_384;

/// Groups sequences of lengths `lens` into batches: indices sorted by length (stable), cut so that
/// a batch has at most `max_batch` members and, padded to its longest member, at most
/// `max_tokens` tokens (a single longer sequence forms its own batch).
pub fn plan_batches(lens: &[usize], max_batch: usize, max_tokens: usize) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..lens.len()).collect();
    order.sort_by_key(|&i| lens[i]);
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut cur: Vec<usize> = Vec::new();
    for i in order {
        // Sorted ascending: with `i` added, the batch's longest member is `i`.
        if !cur.is_empty()
            && (cur.len() >= max_batch.max(1) || (cur.len() + 1) * lens[i] > max_tokens)
        {
            out.push(std::mem::take(&mut cur));
        }
        cur.push(i);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// One left-padded batch: `ids` is `len` tokens per sequence (pad rows first, filled with
/// `pad_id`), `pad[b]` the number of pad rows of sequence `b`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaddedBatch {
    /// Token ids, `pad.len() × len`, row-major.
    pub ids: Vec<u32>,
    /// Pad rows at the start of each sequence.
    pub pad: Vec<u32>,
    /// Tokens per sequence after padding (the longest member's length).
    pub len: usize,
}

impl PaddedBatch {
    /// Left-pads `seqs` (each non-empty) to the longest one.
    pub fn left_pad(seqs: &[&[u32]], pad_id: u32) -> PaddedBatch {
        let len = seqs.iter().map(|s| s.len()).max().unwrap_or(0);
        let mut ids = Vec::with_capacity(seqs.len() * len);
        let mut pad = Vec::with_capacity(seqs.len());
        for s in seqs {
            let p = len - s.len();
            ids.extend(std::iter::repeat_n(pad_id, p));
            ids.extend_from_slice(s);
            pad.push(p as u32);
        }
        PaddedBatch { ids, pad, len }
    }
}

/// Qwen3-Embedding on CUDA device `ordinal`. Like [`crate::CudaScoring`], it owns one device
/// thread (context, stream, cuBLAS handle, the weights); calls from any thread are serialised
/// through it.
pub struct CudaQwen3Embedder {
    spec: Qwen3Spec,
    max_batch: usize,
    max_batch_tokens: usize,
    device: crate::imp::Qwen3Device,
}

impl std::fmt::Debug for CudaQwen3Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaQwen3Embedder")
            .field("spec", &self.spec)
            .field("device", self.device.info())
            .finish()
    }
}

impl CudaQwen3Embedder {
    /// Loads the Qwen3 model folder `dir` (as [`trajwiki_embed::Qwen3Embedder::load`] does) onto
    /// CUDA device `ordinal`. `opts.threads` is ignored; `max_batch` and `max_batch_tokens`
    /// bound each forward pass (defaults [`DEFAULT_MAX_BATCH`], [`DEFAULT_MAX_BATCH_TOKENS`]).
    /// Without a usable device (or built without the `cuda` feature) this is
    /// [`EmbedError::DeviceUnavailable`].
    pub fn load(
        dir: &Path,
        opts: &EmbedOptions,
        ordinal: usize,
    ) -> Result<CudaQwen3Embedder, EmbedError> {
        let (spec, tensors) = open_checkpoint(dir, opts)?;
        let s = spec.shape;
        if s.head_dim > MAX_HEAD_DIM || s.head_dim % 4 != 0 {
            return Err(EmbedError::InvalidModel {
                path: dir.join("config.json"),
                what: format!(
                    "head_dim {}: the CUDA attention kernel takes multiples of 4 up to \
                     {MAX_HEAD_DIM}",
                    s.head_dim
                ),
            });
        }
        for i in 0..s.layers {
            for proj in ["q_proj", "k_proj", "v_proj", "o_proj"] {
                let name = format!("layers.{i}.self_attn.{proj}.bias");
                if tensors.contains(&name) {
                    return Err(EmbedError::InvalidModel {
                        path: dir.to_path_buf(),
                        what: format!("{name}: projection biases are not supported on CUDA"),
                    });
                }
            }
        }
        let device = crate::imp::Qwen3Device::open(ordinal, &s, spec.dim(), &tensors)?;
        Ok(CudaQwen3Embedder {
            max_batch: opts
                .max_batch
                .filter(|&b| b > 0)
                .unwrap_or(DEFAULT_MAX_BATCH)
                .min(65_535),
            max_batch_tokens: opts
                .max_batch_tokens
                .filter(|&b| b > 0)
                .unwrap_or(DEFAULT_MAX_BATCH_TOKENS),
            spec,
            device,
        })
    }

    /// The device the model runs on.
    pub fn info(&self) -> &DeviceInfo {
        self.device.info()
    }

    /// The checkpoint's shape, tokenizer and output configuration.
    pub fn spec(&self) -> &Qwen3Spec {
        &self.spec
    }

    /// Embeds token-id sequences (each non-empty, ending with the token to pool, at most the
    /// model's position limit long); one L2-normalised row per sequence, in input order.
    pub fn embed_tokens(&self, seqs: &[Vec<u32>]) -> Result<Embeddings, EmbedError> {
        let end = self.spec.end_id();
        embed_planned(
            seqs,
            (self.spec.dim(), self.spec.shape.max_positions),
            (self.max_batch, self.max_batch_tokens),
            |members| self.device.forward(PaddedBatch::left_pad(members, end)),
        )
    }
}

/// Embeds token-id sequences (each non-empty and at most `max_len` long) batch by batch as
/// [`plan_batches`] groups them, `forward` turning a batch's members into their `dim`-wide rows;
/// the rows come back in input order.
pub(crate) fn embed_planned(
    seqs: &[Vec<u32>],
    (dim, max_len): (usize, usize),
    (max_batch, max_batch_tokens): (usize, usize),
    mut forward: impl FnMut(&[&[u32]]) -> Result<Vec<f32>, CudaError>,
) -> Result<Embeddings, EmbedError> {
    if let Some((i, s)) = seqs
        .iter()
        .enumerate()
        .find(|(_, s)| s.is_empty() || s.len() > max_len)
    {
        return Err(EmbedError::Backend {
            stage: "checking token ids",
            source: format!(
                "sequence {i} has {} tokens; expected 1 to {max_len}",
                s.len()
            )
            .into(),
        });
    }
    let lens: Vec<usize> = seqs.iter().map(Vec::len).collect();
    let mut out = vec![0.0f32; seqs.len() * dim];
    for batch in plan_batches(&lens, max_batch, max_batch_tokens) {
        let members: Vec<&[u32]> = batch.iter().map(|&i| &seqs[i][..]).collect();
        let rows = forward(&members)?;
        for (row, &i) in rows.chunks_exact(dim).zip(&batch) {
            out[i * dim..(i + 1) * dim].copy_from_slice(row);
        }
    }
    Embeddings::new(dim, out)
}

impl Embedder for CudaQwen3Embedder {
    fn model_id(&self) -> &str {
        self.spec.model_id()
    }

    fn dim(&self) -> usize {
        self.spec.dim()
    }

    fn embed(&self, texts: &[&str], kind: EmbedKind) -> Result<Embeddings, EmbedError> {
        let seqs = self.spec.tokenize(texts, kind)?;
        self.embed_tokens(&seqs)
    }
}

impl From<CudaError> for EmbedError {
    fn from(e: CudaError) -> Self {
        match e {
            CudaError::NotBuilt | CudaError::Unavailable { .. } => EmbedError::DeviceUnavailable {
                reason: e.to_string(),
            },
            other => EmbedError::Backend {
                stage: "running the model on CUDA",
                source: Box::new(other),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_are_length_sorted_and_within_budget() {
        let lens = [5, 1, 9, 3, 3, 7, 2, 8];
        let plan = plan_batches(&lens, 3, 16);
        let mut seen: Vec<usize> = plan.iter().flatten().copied().collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..lens.len()).collect::<Vec<_>>());
        let flat: Vec<usize> = plan.iter().flatten().map(|&i| lens[i]).collect();
        assert!(flat.windows(2).all(|w| w[0] <= w[1]), "{flat:?}");
        for b in &plan {
            let longest = b.iter().map(|&i| lens[i]).max().unwrap();
            assert!(b.len() <= 3);
            assert!(b.len() == 1 || b.len() * longest <= 16, "{b:?}");
        }
        // [1, 2, 3] (9 tokens), [3, 5] (10), [7, 8] (16), [9]
        assert_eq!(plan.len(), 4);
        // A sequence longer than the budget still gets a batch of its own.
        assert_eq!(plan_batches(&[100, 1], 8, 10), vec![vec![1], vec![0]]);
        assert!(plan_batches(&[], 8, 10).is_empty());
    }

    #[test]
    fn planned_rows_come_back_in_input_order() {
        // Each row is (first token, length): the batches see the texts sorted by length.
        let seqs: Vec<Vec<u32>> = vec![vec![7, 1, 1], vec![3], vec![9, 2], vec![4, 4, 4, 4]];
        let mut batches = Vec::new();
        let out = embed_planned(&seqs, (2, 4), (2, 6), |members| {
            batches.push(members.iter().map(|m| m.len()).collect::<Vec<_>>());
            Ok(members
                .iter()
                .flat_map(|m| [m[0] as f32, m.len() as f32])
                .collect())
        })
        .unwrap();
        assert_eq!(batches, vec![vec![1, 2], vec![3], vec![4]]);
        let rows: Vec<&[f32]> = (0..4).map(|i| out.row(i)).collect();
        assert_eq!(rows, [[7.0, 3.0], [3.0, 1.0], [9.0, 2.0], [4.0, 4.0]]);
        // Empty or over-long sequences are refused before any batch runs.
        for bad in [vec![vec![1], vec![]], vec![vec![1; 5]]] {
            let err = embed_planned(&bad, (2, 4), (2, 6), |_| unreachable!()).unwrap_err();
            assert!(err.to_string().contains("checking token ids"), "{err}");
        }
    }

    #[test]
    fn left_padding_puts_last_tokens_in_the_last_row() {
        let a = [1u32, 2, 3];
        let b = [7u32];
        let p = PaddedBatch::left_pad(&[&a, &b], 0);
        assert_eq!(p.len, 3);
        assert_eq!(p.ids, vec![1, 2, 3, 0, 0, 7]);
        assert_eq!(p.pad, vec![0, 2]);
    }
}
