//! Text analysis, shared by memory construction and retrieval so that both read a text the same
//! way: [`text`] (sentences as exact source spans, words, light stemming, keywords), [`temporal`]
//! (relative time expressions resolved against the time they were said), [`entities`]
//! (Title-Case runs, entity keys and the namespace [`Lexicon`], grown message by message through
//! [`LexiconStats`]) and the rule tables in [`lexicon`] (data, not code).
//!
//! The crate does no I/O and depends only on `trajwiki-core`.
//!
//! ```
//! use trajwiki_text::{entities::entity_key, text::keywords};
//!
//! assert_eq!(entity_key("Rio de Janeiro"), "rio de janeiro");
//! assert!(keywords("We went camping in Yosemite").contains("camp"));
//! ```

pub mod entities;
#[rustfmt::skip]
pub mod lexicon;
pub mod temporal;
pub mod text;

pub use entities::{entity_key, is_specific, Lexicon, LexiconStats};
