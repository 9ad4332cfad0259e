//! The scoring core of retrieval: exact cosine top-k over f32/f16/bf16 embedding matrices,
//! reciprocal rank fusion, BM25 and Jaccard over term ids, and batched greedy
//! coverage/redundancy selection (SPEC §3.4, §5, §7).
//!
//! Every primitive is defined here once, on the CPU, with rayon, deterministically: results are
//! ordered by score and then by the lower index, and the floating-point expressions are fixed
//! (see [`topk::dot`], [`rrf::rrf_term`], [`select::gain`]) so that a second implementation can
//! reproduce them. [`ScoringBackend`] is the seam where such a second implementation plugs in:
//! [`CpuScoring`] implements it here and the CUDA crate (`trajwiki-cuda`) implements it again
//! with kernels, tested against this crate's results. The module [`reference`] holds slow,
//! obvious versions (plain loops, full sorts, sets instead of bitsets) that the tests hold the
//! fast paths to.
//!
//! The crate knows nothing of conversations, pages or trajectories: callers turn their records
//! into rows, term ids and bitsets.
//!
//! ```
//! use trajwiki_compute::{CpuScoring, MatrixView, ScoringBackend};
//!
//! // Three unit rows of dimension 2, one query.
//! let rows = [1.0, 0.0, 0.0, 1.0, 0.6, 0.8];
//! let m = MatrixView::f32(&rows, 2).unwrap();
//! let hits = CpuScoring.cosine_topk(&m, &[0.0, 1.0], 2).unwrap();
//! assert_eq!(hits[0][0].0, 1);
//! assert_eq!(hits[0][1], (2, 0.8));
//!
//! // Fuse a dense and a sparse ranking.
//! let fused = trajwiki_compute::rrf(&[&[7, 3, 5], &[3, 9]], 60.0).unwrap();
//! assert_eq!(fused[0].0, 3);
//! ```

pub mod backend;
pub mod error;
pub mod matrix;
pub mod reference;
pub mod rrf;
pub mod select;
pub mod sketch;
pub mod sparse;
pub mod synthetic;
pub mod topk;

pub use backend::{CpuScoring, Kept, ScoringBackend};
pub use error::ComputeError;
pub use matrix::{Dtype, MatrixData, MatrixView};
pub use rrf::{rrf, RRF_K};
pub use select::{
    coverage_select, Candidate, CoverageWeights, QueryWants, SelectionBatch, SetWords, NO_CLUSTER,
};
pub use sparse::{jaccard, jaccard_many, Bm25Index, Bm25Params};
pub use topk::{cosine_topk, cosine_topk_subset, hit_order, sort_hits, Hit};
