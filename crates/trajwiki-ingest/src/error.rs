//! Input errors: each names the file, the line or record, the field, and what was expected.

use std::fmt;
use std::path::PathBuf;

/// Where in a file a problem is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A line of a JSONL file (from 1), with a column when the JSON parser gives one.
    Line {
        /// Line number.
        line: usize,
        /// Column, when known.
        column: Option<usize>,
    },
    /// A record inside a JSON document, as a path such as `conv-26.conversation.session_3[4]`.
    Record(String),
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Line {
                line,
                column: Some(col),
            } => write!(f, "line {line}, column {col}"),
            Location::Line { line, column: None } => write!(f, "line {line}"),
            Location::Record(path) => write!(f, "record {path}"),
        }
    }
}

/// Why an input could not be read.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// The file could not be read.
    #[error("{}: cannot read file", file.display())]
    Io {
        /// The file.
        file: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Not valid JSON (truncated, a syntax error).
    #[error("{}: {at}: invalid JSON: {message}", file.display())]
    Syntax {
        /// The file.
        file: PathBuf,
        /// Where.
        at: Location,
        /// The parser's message.
        message: String,
    },
    /// Valid JSON, but a field is missing or has the wrong type or value.
    #[error("{}: {at}: field `{field}`: expected {expected}, found {found}", file.display())]
    Field {
        /// The file.
        file: PathBuf,
        /// Where.
        at: Location,
        /// The field (a dotted path within the record).
        field: String,
        /// What was expected.
        expected: String,
        /// What was found.
        found: String,
    },
    /// A record past one of the input limits (see `trajwiki_core::limits`).
    #[error("{}: {at}: {limit}", file.display())]
    Limit {
        /// The file.
        file: PathBuf,
        /// Where.
        at: Location,
        /// The limit and the value.
        limit: trajwiki_core::limits::LimitError,
    },
    /// A line longer than any line holding a record within its limit could be: refused as soon as
    /// that many bytes are read, before the line is buffered whole.
    #[error("{}: line {line}: longer than {max} bytes, the most a line may take (room for {} of at most {limit_value} {} written with JSON escapes; set {} to change it); reading stopped there", file.display(), .limit.what, .limit.unit, .limit.var)]
    LineTooLong {
        /// The file.
        file: PathBuf,
        /// The line (from 1).
        line: usize,
        /// The most a line may take, in bytes.
        max: usize,
        /// The limit on the record the line holds.
        limit: trajwiki_core::limits::Limit,
        /// That limit's value in force.
        limit_value: usize,
    },
    /// A JSON document read whole (a LoCoMo file) past [`trajwiki_core::limits::DOCUMENT_BYTES`]:
    /// refused as soon as that many bytes are read.
    #[error("{}: longer than {max} bytes, the limit on {} (set {} to change it); reading stopped there", file.display(), .limit.what, .limit.var)]
    DocumentTooLarge {
        /// The file.
        file: PathBuf,
        /// The limit in force, in bytes.
        max: usize,
        /// The limit.
        limit: trajwiki_core::limits::Limit,
    },
    /// A limit's variable holds no usable value, so the input cannot be read against it.
    #[error("{}: {limit}", file.display())]
    Setting {
        /// The file.
        file: PathBuf,
        /// The variable and its value.
        limit: trajwiki_core::limits::LimitError,
    },
    /// The format could not be recognised.
    #[error("{}: cannot tell the input format ({reason}); pass --format locomo|messages|runs", file.display())]
    UnknownFormat {
        /// The file.
        file: PathBuf,
        /// Why detection failed.
        reason: String,
    },
}

/// Result alias of ingestion.
pub type Result<T, E = IngestError> = std::result::Result<T, E>;

/// How many characters of a value from the input an error shows.
pub const ECHO_CHARS: usize = 80;

/// A value from the input as an error shows it: quoted, and when longer than [`ECHO_CHARS`]
/// characters, its first ones (cut at a character boundary) and its length, so that an error
/// stays short whatever the input holds.
///
/// ```
/// use trajwiki_ingest::error::quote;
///
/// assert_eq!(quote("noon"), "\"noon\"");
/// let long = "é".repeat(100);
/// assert_eq!(quote(&long), format!("\"{}\"… (200 bytes)", "é".repeat(80)));
/// ```
pub fn quote(text: &str) -> String {
    match text.char_indices().nth(ECHO_CHARS) {
        Some((cut, _)) => format!("{:?}… ({} bytes)", &text[..cut], text.len()),
        None => format!("{text:?}"),
    }
}

/// Describes a JSON value briefly, for "found ..." in messages.
pub(crate) fn describe(value: Option<&serde_json::Value>) -> String {
    use serde_json::Value;
    match value {
        None => "nothing (missing)".into(),
        Some(Value::Null) => "null".into(),
        Some(Value::Bool(b)) => format!("boolean {b}"),
        Some(Value::Number(n)) => format!("number {n}"),
        Some(Value::String(s)) => format!("string {}", quote(s)),
        Some(Value::Array(a)) => format!("array of {}", a.len()),
        Some(Value::Object(_)) => "object".into(),
    }
}
