//! The model-driven implementations of the construction and compilation seams, each checked
//! against its input and falling back to the deterministic implementation: [`extract`]
//! (`trajwiki_memory::Extractor`), [`matching`] (`trajwiki_memory::MatchDecider`), [`judge`]
//! (`trajwiki_memory::evolve::ClaimJudge`), [`pages`] ([`crate::pipeline::PageWriter`]) and
//! [`compile`] (`trajwiki_trace::RunCompiler`).
//!
//! They live here, not beside their traits: `trajwiki-memory` and `trajwiki-trace` do no I/O and
//! depend on no client, and the chat client (`trajwiki-llm`) knows nothing of memories. This
//! crate is where the two meet.

pub mod compile;
pub mod extract;
pub mod judge;
pub mod matching;
pub mod pages;
