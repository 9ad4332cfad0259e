//! trajwiki: long-term memory for LLM agents that never loses the path back to its evidence.
//!
//! This facade re-exports the workspace crates so that applications depend on one package:
//! [`core`] (ids, records, traits), [`store`] (the SQLite system of record) and [`ingest`]
//! (readers for LoCoMo, JSONL conversations and JSONL agent runs). `ARCHITECTURE.md` maps them.
//!
//! ```
//! use trajwiki::{ingest::locomo::normalize_evidence, store::Store};
//!
//! assert_eq!(normalize_evidence("D8:6; D9:17"), ["D8:6", "D9:17"]);
//! let dir = tempfile::tempdir().unwrap();
//! let store = Store::open(dir.path()).unwrap();
//! assert_eq!(store.stats().unwrap().messages, 0);
//! ```

pub use trajwiki_ann as ann;
pub use trajwiki_compute as compute;
pub use trajwiki_core as core;
pub use trajwiki_embed as embed;
pub use trajwiki_ingest as ingest;
pub use trajwiki_llm as llm;
pub use trajwiki_memory as memory;
pub use trajwiki_store as store;
pub use trajwiki_text as text;

pub use trajwiki_engine as engine;
pub use trajwiki_engine::{
    answer, api, cache, eval, export, failure, messages, metrics, pipeline, retrieval, trace,
    Engine,
};

pub mod markdown;
pub mod plot;
pub mod render;
pub mod safe;
pub mod server;
pub mod viewer;
pub use trajwiki_retrieve as retrieve;
pub use trajwiki_trace as wikitrace;
