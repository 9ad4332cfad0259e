//! BERT-family sentence encoders (all-MiniLM-L6-v2, BGE, E5 …) on a CUDA device: the same model
//! folder, tokenizer, pooling, model id and [`Embedder`] contract as the CPU encoder
//! ([`trajwiki_embed::BertEmbedder`]), with the forward pass on the GPU.
//!
//! Texts are tokenised on the CPU exactly as the CPU encoder does ([`BertSpec::tokenize`]), sorted
//! by length and cut into batches within a token budget; each batch is *packed* — its texts' tokens
//! stacked without padding — so no work is spent on padding, and attention runs per text over its
//! own rows. On the device (kernels in `kernels/bert.cu`, matrix products through cuBLAS with f16
//! inputs and f32 output and compute): the embedding sum and its LayerNorm into an f32 residual
//! stream with an f16 copy; per layer the fused q/k/v projection (bias added on the way to f16),
//! tiled bidirectional attention with an online softmax, the output projection with bias, residual
//! and LayerNorm in one kernel, the feed-forward up projection with bias and exact GELU in one
//! kernel, the down projection with bias, residual and LayerNorm in one kernel; then mean or CLS
//! pooling, truncation to the output dimension and L2 normalisation. Embeddings, biases and
//! LayerNorm parameters stay f32; projection weights are f16.
//!
//! The model id is the CPU encoder's: the vectors agree to f16 precision (`tests/bert_twin.rs`), so
//! a store built on one device can be queried from the other.

use std::path::Path;

use trajwiki_embed::{
    open_bert, BertSpec, EmbedError, EmbedKind, EmbedOptions, Embedder, Embeddings,
};

use crate::qwen3::embed_planned;
use crate::DeviceInfo;

/// Largest head size the attention kernels take (they also need a multiple of 4).
pub const MAX_HEAD_DIM: usize = 128;

/// Largest hidden size the row kernels take (`BT_MAX_PER · BT_THREADS` in `kernels/bert.cu`).
pub const MAX_HIDDEN: usize = 4096;

/// Texts per forward pass when the options give none.
pub const DEFAULT_MAX_BATCH: usize = 1024;

/// Tokens per forward pass (the batch's texts × its longest) when the options give none.
pub const DEFAULT_MAX_BATCH_TOKENS: usize = 65_536;

/// One packed batch: the texts' tokens stacked without padding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackedBatch {
    /// Token ids, all texts in order.
    pub ids: Vec<u32>,
    /// Each token's position within its text.
    pub pos: Vec<u32>,
    /// Row offsets: text `b` is rows `starts[b]..starts[b + 1]` (one more entry than texts).
    pub starts: Vec<u32>,
    /// The longest text's length.
    pub longest: usize,
}

impl PackedBatch {
    /// Packs `seqs` (each non-empty).
    pub fn pack(seqs: &[&[u32]]) -> PackedBatch {
        let total: usize = seqs.iter().map(|s| s.len()).sum();
        let mut ids = Vec::with_capacity(total);
        let mut pos = Vec::with_capacity(total);
        let mut starts = Vec::with_capacity(seqs.len() + 1);
        starts.push(0);
        for s in seqs {
            ids.extend_from_slice(s);
            pos.extend(0..s.len() as u32);
            starts.push(ids.len() as u32);
        }
        PackedBatch {
            ids,
            pos,
            starts,
            longest: seqs.iter().map(|s| s.len()).max().unwrap_or(0),
        }
    }

    /// Texts in the batch.
    pub fn texts(&self) -> usize {
        self.starts.len().saturating_sub(1)
    }
}

/// A BERT-family encoder on CUDA device `ordinal`. It owns one device thread (context, stream,
/// cuBLAS handle, the weights); calls from any thread are serialised through it.
pub struct CudaBertEmbedder {
    spec: BertSpec,
    max_batch: usize,
    max_batch_tokens: usize,
    device: crate::imp::BertDevice,
}

impl std::fmt::Debug for CudaBertEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaBertEmbedder")
            .field("spec", &self.spec)
            .field("device", self.device.info())
            .finish()
    }
}

impl CudaBertEmbedder {
    /// Loads the BERT-family model folder `dir` (as [`trajwiki_embed::BertEmbedder::load`] does)
    /// onto CUDA device `ordinal`; the host copy of the weights is freed once uploaded.
    /// `opts.threads` is ignored; `max_batch` and `max_batch_tokens` bound each forward pass
    /// (defaults [`DEFAULT_MAX_BATCH`], [`DEFAULT_MAX_BATCH_TOKENS`]). Without a usable device
    /// (or built without the `cuda` feature) this is [`EmbedError::DeviceUnavailable`].
    pub fn load(
        dir: &Path,
        opts: &EmbedOptions,
        ordinal: usize,
    ) -> Result<CudaBertEmbedder, EmbedError> {
        let (spec, weights) = open_bert(dir, opts)?;
        let s = spec.shape();
        let invalid = |what: String| EmbedError::InvalidModel {
            path: dir.join("config.json"),
            what,
        };
        if s.head_dim() > MAX_HEAD_DIM || s.head_dim() % 4 != 0 {
            return Err(invalid(format!(
                "head size {}: the CUDA attention kernels take multiples of 4 up to {MAX_HEAD_DIM}",
                s.head_dim()
            )));
        }
        if s.hidden > MAX_HIDDEN {
            return Err(invalid(format!(
                "hidden_size {}: the CUDA encoder takes up to {MAX_HIDDEN}",
                s.hidden
            )));
        }
        let device = crate::imp::BertDevice::open(ordinal, &spec, weights)?;
        Ok(CudaBertEmbedder {
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

    /// The model's shape, tokenizer, pooling and output dimension.
    pub fn spec(&self) -> &BertSpec {
        &self.spec
    }

    /// Embeds token-id sequences (each non-empty, at most the model's position limit long); one
    /// L2-normalised row per sequence, in input order.
    pub fn embed_tokens(&self, seqs: &[Vec<u32>]) -> Result<Embeddings, EmbedError> {
        embed_planned(
            seqs,
            (self.spec.dim(), self.spec.shape().max_positions),
            (self.max_batch, self.max_batch_tokens),
            |members| self.device.forward(PackedBatch::pack(members)),
        )
    }
}

impl Embedder for CudaBertEmbedder {
    fn model_id(&self) -> &str {
        self.spec.model_id()
    }

    fn dim(&self) -> usize {
        self.spec.dim()
    }

    fn embed(&self, texts: &[&str], _kind: EmbedKind) -> Result<Embeddings, EmbedError> {
        let seqs = self.spec.tokenize(texts)?;
        self.embed_tokens(&seqs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_stacks_texts_with_their_positions() {
        let (a, b, c) = ([5u32, 6, 7], [9u32], [1u32, 2]);
        let p = PackedBatch::pack(&[&a, &b, &c]);
        assert_eq!(p.ids, vec![5, 6, 7, 9, 1, 2]);
        assert_eq!(p.pos, vec![0, 1, 2, 0, 0, 1]);
        assert_eq!(p.starts, vec![0, 3, 4, 6]);
        assert_eq!((p.longest, p.texts()), (3, 3));
        let empty = PackedBatch::pack(&[]);
        assert_eq!(
            (empty.starts.clone(), empty.longest, empty.texts()),
            (vec![0], 0, 0)
        );
    }
}
