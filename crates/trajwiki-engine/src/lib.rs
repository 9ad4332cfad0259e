//! The application layer of trajwiki: what the command line, the HTTP server, the MCP tools and
//! the Python bindings all do, in one place.
//!
//! [`Engine`] owns a store's location and connections, the embedding model, the scoring
//! backend and the caches (loaded indexes by namespace, each kept with the index state it was
//! loaded at); [`Engine::namespace`] hands out a [`NamespaceHandle`] holding the namespace's
//! writer lock and the construction fold its last build left, with ingest, append, build,
//! search, ask, delete and export as its methods. The faces (`trajwiki` CLI, `trajwiki serve`,
//! `trajwiki._trajwiki`) convert arguments and results around it.
//!
//! The modules under it are the operations themselves: [`pipeline`] (build a namespace with the
//! store's embedding cache), [`retrieval`] (load an index), [`api`] (models, records, search,
//! history, ask), [`answer`] (a checked answer from a model), [`trace`] (the run memory),
//! [`export`], [`messages`] (appended messages from JSON), [`cache`] (the index LRU), [`eval`]
//! (the LoCoMo evaluation and its [`metrics`]), [`llm`] (the model-driven drivers of a build
//! and of run compilation), [`render`] (records as text), [`markdown`] (the memories as linked
//! markdown files) and [`safe`] (stored text escaped for a terminal). What the faces read —
//! namespaces and their counts, pages, the store's totals and check — are operations of
//! [`Engine`] and [`NamespaceHandle`] too, failing as one [`api::ApiError`].

pub mod answer;
pub mod api;
pub mod build;
pub mod cache;
mod engine;
pub mod eval;
pub mod export;
pub mod failure;
pub mod llm;
pub mod load;
pub mod markdown;
pub mod messages;
pub mod metrics;
pub mod pipeline;
mod reads;
pub mod render;
pub mod retrieval;
pub mod safe;
pub mod segment;
pub mod trace;

/// The crates under the engine, for the types its operations take and give: a face depends on
/// the engine (and on trajwiki-core for the records) and reaches these through it, so that the
/// engine's features (`cuda`, `faiss`) are the faces' too. A face writes through the engine's
/// operations ([`Engine`], [`NamespaceHandle`]), never through these: the root crate's
/// `tests/door.rs` keeps both rules.
pub mod layers {
    pub use trajwiki_ann as ann;
    pub use trajwiki_compute as compute;
    pub use trajwiki_cuda as cuda;
    pub use trajwiki_embed as embed;
    pub use trajwiki_ingest as ingest;
    pub use trajwiki_llm as llm;
    pub use trajwiki_memory as memory;
    pub use trajwiki_retrieve as retrieve;
    pub use trajwiki_store as store;
    pub use trajwiki_text as text;
    pub use trajwiki_trace as trace;
}

pub use build::{BuildPlan, Built, ModelPart};
pub use engine::{
    build_config, Appended, Compiled, Engine, KeptIndex, Model, NamespaceHandle, Writer,
};
pub use reads::Listed;
