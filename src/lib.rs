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

pub use trajwiki_core as core;
pub use trajwiki_engine::layers::{
    ann, compute, cuda, embed, ingest, llm, memory, retrieve, store, text, trace as wikitrace,
};

pub use trajwiki_engine as engine;
pub use trajwiki_engine::{
    answer, api, cache, eval, export, failure, markdown, messages, metrics, pipeline, render,
    retrieval, safe, trace, Engine,
};

pub mod plot;
pub mod server;
pub mod viewer;
