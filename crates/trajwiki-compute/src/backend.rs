//! The backend trait and its CPU implementation.

use rayon::prelude::*;

use crate::rrf::{check_k_const, rrf};
use crate::select::{coverage_select, CoverageWeights, SelectionBatch};
use crate::sparse::{jaccard_many, Bm25Index};
use crate::topk::{cosine_topk, cosine_topk_subset, Hit};
use crate::{ComputeError, MatrixView};

/// A matrix a backend keeps in its own memory (a GPU's) between calls, made by
/// [`ScoringBackend::keep`] and scored by [`ScoringBackend::cosine_topk_kept`]: a loaded index
/// uploads each level once, not once per query.
pub trait Kept: Send + Sync + std::any::Any {
    /// Rows held.
    fn rows(&self) -> usize;

    /// The value itself, for the backend that made it to recognise it.
    fn as_any(&self) -> &dyn std::any::Any;
}

/// The scoring primitives of retrieval, implemented once per device. Every implementation
/// returns the same results as [`CpuScoring`]: identical ids and order for selections and
/// fusions, scores within float tolerance (and ids wherever scores are not within tolerance of
/// a tie) for dot products.
///
/// Methods take whole batches so that a device backend can amortise its launches.
pub trait ScoringBackend: Send + Sync {
    /// A short name ("cpu", "cuda").
    fn name(&self) -> &'static str;

    /// For each query row of `queries` (`b × dim`), the `k` rows of `matrix` with the highest
    /// dot product (cosine, rows being L2-normalised), by score then row index.
    fn cosine_topk(
        &self,
        matrix: &MatrixView<'_>,
        queries: &[f32],
        k: usize,
    ) -> Result<Vec<Vec<Hit>>, ComputeError>;

    /// Keeps `matrix` in the backend's own memory for [`cosine_topk_kept`](Self::cosine_topk_kept),
    /// where it has memory of its own; `None` (the default, and the CPU's answer: it reads the
    /// host's rows where they are) means "score the view each time".
    fn keep(&self, _matrix: &MatrixView<'_>) -> Result<Option<Box<dyn Kept>>, ComputeError> {
        Ok(None)
    }

    /// [`cosine_topk`](Self::cosine_topk) over a matrix this backend kept; the same results as
    /// over the view it was made from. A matrix another backend kept is
    /// [`ComputeError::Unsupported`].
    fn cosine_topk_kept(
        &self,
        _kept: &dyn Kept,
        _queries: &[f32],
        _k: usize,
    ) -> Result<Vec<Vec<Hit>>, ComputeError> {
        Err(ComputeError::Unsupported {
            backend: self.name(),
            reason: "this backend keeps no matrices".into(),
        })
    }

    /// Like [`cosine_topk`](Self::cosine_topk), restricted per query to the listed rows.
    fn cosine_topk_subset(
        &self,
        matrix: &MatrixView<'_>,
        queries: &[f32],
        candidates: &[&[u32]],
        k: usize,
    ) -> Result<Vec<Vec<Hit>>, ComputeError>;

    /// Reciprocal rank fusion of each query's rankings (see [`rrf`](crate::rrf())).
    fn rrf_batch(&self, batch: &[&[&[u32]]], k_const: f32) -> Result<Vec<Vec<Hit>>, ComputeError>;

    /// Greedy coverage selection of up to `k` candidates per query (see [`crate::select`]).
    fn coverage_select(
        &self,
        batch: &SelectionBatch,
        weights: &CoverageWeights,
        k: usize,
    ) -> Result<Vec<Vec<u32>>, ComputeError>;

    /// Jaccard of each query set with every document set (strictly increasing term ids). The
    /// default runs on the CPU.
    fn jaccard_batch(
        &self,
        queries: &[&[u32]],
        docs: &[&[u32]],
    ) -> Result<Vec<Vec<f32>>, ComputeError> {
        queries.iter().map(|q| jaccard_many(q, docs)).collect()
    }

    /// BM25 top-`k` for each query. The default runs on the CPU.
    fn bm25_topk_batch(
        &self,
        index: &Bm25Index,
        queries: &[&[u32]],
        k: usize,
    ) -> Result<Vec<Vec<Hit>>, ComputeError> {
        Ok(index.topk_batch(queries, k))
    }
}

/// The CPU backend: rayon over rows or queries, deterministic, always available. It is the
/// reference the other backends are tested against.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuScoring;

impl ScoringBackend for CpuScoring {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn cosine_topk(
        &self,
        matrix: &MatrixView<'_>,
        queries: &[f32],
        k: usize,
    ) -> Result<Vec<Vec<Hit>>, ComputeError> {
        cosine_topk(matrix, queries, k)
    }

    fn cosine_topk_subset(
        &self,
        matrix: &MatrixView<'_>,
        queries: &[f32],
        candidates: &[&[u32]],
        k: usize,
    ) -> Result<Vec<Vec<Hit>>, ComputeError> {
        cosine_topk_subset(matrix, queries, candidates, k)
    }

    fn rrf_batch(&self, batch: &[&[&[u32]]], k_const: f32) -> Result<Vec<Vec<Hit>>, ComputeError> {
        check_k_const(k_const)?;
        batch.par_iter().map(|r| rrf(r, k_const)).collect()
    }

    fn coverage_select(
        &self,
        batch: &SelectionBatch,
        weights: &CoverageWeights,
        k: usize,
    ) -> Result<Vec<Vec<u32>>, ComputeError> {
        coverage_select(batch, weights, k)
    }
}
