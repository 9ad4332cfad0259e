//! Hierarchical retrieval with provenance (SPEC §3.1–3.5).
//!
//! An [`Index`] holds one namespace's records (messages, snapshots, trajectories, pages), their
//! embeddings and BM25 indices. [`Index::rank`] routes a question to wiki pages (dense + sparse,
//! reciprocal rank fusion, top t), scores the trajectories they link (and, in the full mode, all
//! trajectories: a direct path), selects k of them — with coverage-aware greedy selection for
//! list, count, comparison and multi-entity questions — expands to snapshots (best per
//! trajectory, then by similarity up to 2k, neighbours, update-linked), and orders the source
//! messages, fused with direct dense and BM25 routes over raw turns. [`Index::render`] packs the
//! most valuable messages under a budget of whitespace tokens and renders them in conversation
//! order, each with its ref, so that an answer can cite them.
//!
//! The scoring primitives come from `trajwiki-compute` through its [`ScoringBackend`] trait, so
//! the same retrieval runs on the CPU reference or on CUDA.
//!
//! [`ScoringBackend`]: trajwiki_compute::ScoringBackend
//!
//! ```
//! use trajwiki_retrieve::shape::analyse;
//!
//! let shape = analyse("What books has Melanie read?", &Default::default());
//! assert!(shape.list && shape.wants_coverage());
//! ```

mod apply;
mod derived;
pub mod index;
mod kept;
mod order;
pub mod render;
pub mod retrieve;
pub mod shape;
mod stored;
pub mod turns;
pub mod vectors;

pub use apply::{Applied, IndexDelta, PageChanges};
pub use derived::Derived;
pub use index::{Index, IndexError, LevelTexts, LevelVectors, MessageSide, NamespaceRecords};
pub use render::Context;
pub use retrieve::{Candidates, Mode, PathItem, Ranking, Rerank, Reranked, RetrievalConfig};
pub use stored::StoredIndex;
pub use vectors::{MessageVectors, SharedRows, SharedSketch};
