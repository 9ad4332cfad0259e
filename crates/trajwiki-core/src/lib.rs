//! The vocabulary of trajwiki: ids, the records of the data model, errors, and the traits that
//! the other crates implement.
//!
//! Everything here is plain data. The store (`trajwiki-store`) persists these records, ingestion
//! (`trajwiki-ingest`) produces them from files, and the engines (embedding, memory construction,
//! retrieval) consume them through the traits defined in [`embed`]. No crate in the workspace
//! depends sideways on another when a type or trait from this crate would do.
//!
//! Ids are stable and content-derived: the same message ingested twice gets the same id, so
//! rebuilding a memory from the same sources yields the same records.
//!
//! ```
//! use trajwiki_core::{MessageId, Namespace};
//!
//! let ns = Namespace::new("conv-26").unwrap();
//! let id = MessageId::derive(&ns, "ref:D1:3");
//! assert!(id.as_str().starts_with("msg_"));
//! assert_eq!(id, MessageId::derive(&ns, "ref:D1:3"));
//! ```

pub mod embed;
pub mod hash;
pub mod ids;
pub mod limits;
pub mod records;

pub use embed::{
    centroid, centroid_into, EmbedError, EmbedKind, Embedder, Embeddings, HashingEmbedder,
};
pub use hash::{content_hash, text_hash};
pub use ids::{
    ClaimId, CompilationId, IdError, IdKind, InsightId, MessageId, Namespace, OpId, PageId, RunId,
    SnapshotId, TrajectoryId,
};
pub use records::*;
