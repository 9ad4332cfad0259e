//! TrajWiki memory construction (SPEC §2), deterministic and offline.
//!
//! [`build`] turns one namespace's messages into its derived memory:
//! exchanges (a turn and its reply; no message is ever dropped) → one [`SnapshotDraft`] per
//! exchange from an [`Extractor`] → snapshot embeddings → trajectory matching with the
//! compatibility score g ([`matcher`]) decided by a [`MatchDecider`] → claim evolution
//! (ADD / REVISE / DEPRECATE, [`evolve`]) judged by a [`ClaimJudge`] → deterministic trajectory
//! summaries → the Memory Wiki ([`wiki`]). The three deciding parts are traits so that the LLM
//! issue can implement them a second time; the rule tables of the deterministic extractor are
//! data, in [`lexicon`]; every constant is in [`MemoryConfig`].
//!
//! Same messages, same configuration, same embedder: same records, ids included.
//!
//! ```
//! use trajwiki_memory::temporal::resolve;
//!
//! let said = chrono::NaiveDate::from_ymd_opt(2023, 5, 8).unwrap();
//! let anchors = resolve("I went to a support group yesterday.", said);
//! assert_eq!(anchors[0].resolved, "7 May 2023");
//! ```

pub mod build;
pub mod claims;
pub mod config;
pub mod evolve;
pub mod extract;
pub mod fold;
pub mod matcher;
pub mod slots;
pub mod wiki;

/// Text analysis, from `trajwiki-text` (shared with retrieval).
pub use trajwiki_text::{lexicon, temporal, text};

pub use build::{
    build, fold_exchanges, fold_exchanges_told, wiki, wiki_with_members, BuildError, BuildReport,
    Builders, BuiltMemory, EmbedFn,
};
pub use config::{ConfigError, MemoryConfig};
pub use evolve::{ClaimJudge, DeterministicJudge, Judgement};
pub use extract::{
    claim_from_quote, exchanges, ClaimDraft, DeterministicExtractor, Extractor, Lexicon,
    LexiconStats, SnapshotDraft,
};
pub use fold::{ClaimEntry, Delta, Fold, FoldHeader, TrajState, TrajStateV1};
pub use matcher::{DeterministicDecider, MatchDecider, MatchScore};
