//! The operations that the command line and the Python bindings share: loading an embedder by
//! name, looking a record up by id, searching a namespace with its evidence, and reading the claim
//! history of a trajectory or a claim.
//!
//! Each returns plain data (serializable, no printing), so that `trajwiki query --json` and
//! `Memory.search` in Python are one code path with two presentations. One module per verb:
//! `model` (embedders by name, on a device), `records` (namespaces, a record by id), `search`
//! (an index loaded or updated, ranked, rendered with its evidence), `history` (a claim's or a
//! trajectory's edits as of a time), `ask` (a search and its checked answer) and `responses`
//! (the store's cache of model responses); [`ApiError`] is theirs.
//!
//! ```
//! use trajwiki_engine::api::{get, load_embedder, ApiError};
//! use trajwiki_store::Store;
//!
//! let embedder = load_embedder("hashing-64").unwrap();
//! assert_eq!(embedder.dim(), 64);
//! let dir = tempfile::tempdir().unwrap();
//! let store = Store::open(dir.path()).unwrap();
//! let missing = get(&store, "trj_0123456789abcdef");
//! assert!(matches!(missing, Err(ApiError::NotFound { .. })));
//! ```

use std::path::PathBuf;

use trajwiki_core::{EmbedError, IdError, IdKind, Namespace, ReplayError};
use trajwiki_retrieve::IndexError;
use trajwiki_store::StoreError;

use crate::pipeline::PipelineError;

/// A failure of one of the shared operations.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// A malformed id or namespace name.
    #[error(transparent)]
    Id(#[from] IdError),
    /// A well-formed id that names no record of this store.
    #[error("no {kind} with id {id} in this store")]
    NotFound {
        /// The kind the id names.
        kind: IdKind,
        /// The id.
        id: String,
    },
    /// A namespace without messages.
    #[error("namespace {namespace} has no messages in {}", store.display())]
    UnknownNamespace {
        /// The namespace.
        namespace: Namespace,
        /// The store directory.
        store: PathBuf,
    },
    /// A namespace whose memory has not been built.
    #[error("namespace {0} is not built; build it first (`trajwiki build --namespace {0}`)")]
    NotBuilt(Namespace),
    /// `history` of a record that has none.
    #[error("history takes a trajectory or a claim id, not a {0}")]
    NoHistory(IdKind),
    /// An input past one of the limits (a question too long; see `trajwiki_core::limits`).
    #[error(transparent)]
    Limit(#[from] trajwiki_core::limits::LimitError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Building the index or embedding the question failed.
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    /// Retrieval refused its input.
    #[error(transparent)]
    Retrieve(#[from] IndexError),
    /// The claim op log could not be replayed.
    #[error(transparent)]
    Replay(#[from] ReplayError),
    /// The embedding model could not be loaded.
    #[error("cannot load the embedding model")]
    Model(#[from] EmbedError),
    /// A step panicked (a defect): what it said. The step's work was rolled back; what was
    /// committed before it stays.
    #[error("{step} failed unexpectedly (a defect, please report it): {message}")]
    Panicked {
        /// The step.
        step: &'static str,
        /// The panic's message.
        message: String,
    },
    /// The build settings stored with a namespace do not parse.
    #[error("the stored build settings of namespace {namespace} do not parse")]
    StoredConfig {
        /// The namespace.
        namespace: Namespace,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
}

mod ask;
mod history;
mod model;
mod records;
mod responses;
mod search;

pub use ask::*;
pub use history::*;
pub use model::*;
pub use records::*;
pub use responses::*;
pub use search::*;
