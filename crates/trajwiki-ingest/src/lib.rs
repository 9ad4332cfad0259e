//! Readers for everything trajwiki ingests, producing core records, with errors that name the
//! file, the line or record, the field and what was expected.
//!
//! - [`locomo`]: the LoCoMo benchmark layout, with its quirks. The same loader gives the
//!   evaluation its questions, so evaluation and memory agree on refs.
//! - [`jsonl`]: a generic one-message-per-line conversation format and the JSONL agent-run format,
//!   with writers for both, so `trajwiki export` round-trips through `trajwiki ingest`.
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
pub mod jsonl;
pub mod locomo;

use std::path::Path;

pub use error::{IngestError, Location, Result};

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
    /// Tells the format of a file: `.json` is LoCoMo; a `.jsonl` file is told by its first
    /// record's fields (`steps` or `task`: runs; `speaker` and `text`: messages).
    pub fn detect(file: &Path) -> Result<Format> {
        let ext = file.extension().and_then(|e| e.to_str()).unwrap_or("");
        if ext.eq_ignore_ascii_case("json") {
            return Ok(Format::Locomo);
        }
        let unknown = |reason: &str| IngestError::UnknownFormat {
            file: file.to_path_buf(),
            reason: reason.to_string(),
        };
        // The whole file is read as the parse reads it, so that bytes that are not UTF-8 are
        // reported with their line wherever they are.
        let text = jsonl::read(file)?;
        let first = text
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or_default()
            .to_string();
        if first.is_empty() {
            return Err(unknown("the file is empty"));
        }
        let value: serde_json::Value =
            serde_json::from_str(&first).map_err(|e| IngestError::Syntax {
                file: file.to_path_buf(),
                at: Location::Line {
                    line: 1,
                    column: Some(e.column()),
                },
                message: e.to_string(),
            })?;
        let has = |k: &str| value.get(k).is_some();
        if has("steps") || has("task") {
            Ok(Format::Runs)
        } else if has("speaker") && has("text") {
            Ok(Format::Messages)
        } else {
            Err(unknown(
                "its first record has neither `steps`/`task` nor `speaker`/`text`",
            ))
        }
    }
}
