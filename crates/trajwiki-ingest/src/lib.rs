//! Readers for everything trajwiki ingests, producing core records, with errors that name the
//! file, the line or record, the field and what was expected.
//!
//! - [`locomo`]: the LoCoMo benchmark layout, with its quirks. The same loader gives the
//!   evaluation its questions, so evaluation and memory agree on refs.
//! - [`jsonl`]: a generic one-message-per-line conversation format and the JSONL agent-run format,
//!   with writers for both, so `trajwiki export` round-trips through `trajwiki ingest`.
//! - [`input`]: an input (a file, a pipe, a FIFO, standard input) opened and read once, its
//!   format told from its first bytes, every line and document bounded before it is buffered.
//!
//! ```
//! use std::path::Path;
//! use trajwiki_ingest::jsonl::parse_messages;
//!
//! let line = r#"{"namespace": "me", "session": 1, "speaker": "Ann", "text": "I moved to Oslo.", "timestamp": "2024-03-01T09:00:00"}"#;
//! let messages = parse_messages(Path::new("inline.jsonl"), line).unwrap();
//! assert_eq!(messages[0].speaker, "Ann");
//! ```

pub mod error;
mod fields;
pub mod input;
pub mod jsonl;
pub mod locomo;

use std::path::Path;

pub use error::{IngestError, Location, Result};
pub use input::Input;

/// The input formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The LoCoMo JSON layout.
    Locomo,
    /// JSONL, one message per line.
    Messages,
    /// JSONL, one agent run per line.
    Runs,
}

impl Format {
    /// Tells the format of a file: `.json` is LoCoMo; otherwise a document that opens with `[`
    /// is LoCoMo, and JSONL is told by its first record's fields (`steps` or `task`: runs;
    /// `speaker` and `text`: messages). This reads the start of the file; to read a pipe or
    /// standard input once, open it as an [`Input`] and call [`Input::detect`] then a `read_*`.
    pub fn detect(file: &Path) -> Result<Format> {
        Input::open(file)?.detect()
    }
}
