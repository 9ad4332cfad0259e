//! trajwiki: long-term memory for LLM agents that never loses the path back to its evidence.
//!
//! This facade re-exports the workspace crates; see `ARCHITECTURE.md` for the map.

pub use trajwiki_core as core;
pub use trajwiki_embed as embed;
