//! Limits on what one input may hold. Each has a default and an environment variable that
//! changes it; past a limit, the input is refused with an error that names the limit, its value
//! and the variable. They keep one careless or hostile input from making every later query slow
//! (a 50 MB message is read, scored and rendered by each search that reaches it) or from
//! exhausting memory (a model of 4,294,967,296 dimensions).
//!
//! | limit | default | variable |
//! |---|---:|---|
//! | a message: every field (text, speaker, namespace, timestamp, ref, attachments) | 262,144 bytes | `TRAJWIKI_MAX_MESSAGE_BYTES` |
//! | a run: every field (id, namespace, task, steps, metadata) | 16,777,216 bytes | `TRAJWIKI_MAX_RUN_BYTES` |
//! | steps of a run | 10,000 | `TRAJWIKI_MAX_RUN_STEPS` |
//! | a question | 16,384 bytes | `TRAJWIKI_MAX_QUESTION_BYTES` |
//! | an embedding model's dimension | 8,192 | `TRAJWIKI_MAX_DIM` |
//! | a JSON document read whole (a LoCoMo file) | 268,435,456 bytes | `TRAJWIKI_MAX_DOCUMENT_BYTES` |
//! | a namespace name | 128 characters | (fixed: names are keys) |
//!
//! A line of JSONL input is bounded too, before it is read whole: by six times the limit of the
//! record it holds (each byte of a field may be written as a six-byte `\u` escape) plus 64 KiB of
//! field names, punctuation and spacing (see `trajwiki_ingest::input`).

/// One limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// What it bounds, for messages: "a message (all its fields)".
    pub what: &'static str,
    /// The unit: "bytes", "steps", "dimensions".
    pub unit: &'static str,
    /// The default value.
    pub default: usize,
    /// The environment variable that sets it.
    pub var: &'static str,
}

/// A message's fields together (text, speaker, namespace, timestamp, ref, attachments), in bytes.
pub const MESSAGE_BYTES: Limit = Limit {
    what: "a message (all its fields)",
    unit: "bytes",
    default: 256 << 10,
    var: "TRAJWIKI_MAX_MESSAGE_BYTES",
};

/// A run's fields together (id, namespace, task, actions, observations, metadata), in bytes.
pub const RUN_BYTES: Limit = Limit {
    what: "a run (all its fields)",
    unit: "bytes",
    default: 16 << 20,
    var: "TRAJWIKI_MAX_RUN_BYTES",
};

/// The steps of one run.
pub const RUN_STEPS: Limit = Limit {
    what: "the steps of a run",
    unit: "steps",
    default: 10_000,
    var: "TRAJWIKI_MAX_RUN_STEPS",
};

/// A JSON document that is read whole (a LoCoMo file), in bytes: what a reader holds in memory
/// at once.
pub const DOCUMENT_BYTES: Limit = Limit {
    what: "a JSON document (a LoCoMo file)",
    unit: "bytes",
    default: 256 << 20,
    var: "TRAJWIKI_MAX_DOCUMENT_BYTES",
};

/// A question, in bytes.
pub const QUESTION_BYTES: Limit = Limit {
    what: "a question",
    unit: "bytes",
    default: 16 << 10,
    var: "TRAJWIKI_MAX_QUESTION_BYTES",
};

/// An embedding model's output dimension.
pub const EMBEDDING_DIM: Limit = Limit {
    what: "an embedding model",
    unit: "dimensions",
    default: 8192,
    var: "TRAJWIKI_MAX_DIM",
};

/// A value past a limit, or a limit's variable set to something that is not a positive whole
/// number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    /// The value is past the limit.
    #[error("{}: {got} {}, over the limit of {limit} (set {} to change it)", .which.what, .which.unit, .which.var)]
    Exceeded {
        /// The limit.
        which: Limit,
        /// Its value in force.
        limit: usize,
        /// The value offered.
        got: usize,
    },
    /// The variable does not hold a positive whole number.
    #[error("{}={value:?} is not a positive whole number (the limit on {})", .which.var, .which.what)]
    BadSetting {
        /// The limit.
        which: Limit,
        /// What the variable holds.
        value: String,
    },
}

impl Limit {
    /// The value in force: the variable's when set, else the default.
    pub fn value(&self) -> Result<usize, LimitError> {
        match std::env::var(self.var) {
            Err(_) => Ok(self.default),
            Ok(text) => match text.trim().replace('_', "").parse::<usize>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(LimitError::BadSetting {
                    which: *self,
                    value: text,
                }),
            },
        }
    }

    /// `Ok` when `got` is within the limit in force.
    pub fn check(&self, got: usize) -> Result<(), LimitError> {
        let limit = self.value()?;
        if got > limit {
            return Err(LimitError::Exceeded {
                which: *self,
                limit,
                got,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_name_the_limit_and_its_variable() {
        assert!(QUESTION_BYTES.check(10).is_ok());
        let err = QUESTION_BYTES.check(1 << 20).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("a question: 1048576 bytes"), "{text}");
        assert!(text.contains("limit of 16384"), "{text}");
        assert!(text.contains("TRAJWIKI_MAX_QUESTION_BYTES"), "{text}");
    }
}
