//! The embedding interface shared by every embedding backend (CPU encoders, Qwen3 on CPU, CUDA).

use std::path::PathBuf;

/// Whether texts are embedded as queries or as documents. Instruction-tuned models (Qwen3-Embedding)
/// prefix queries with an instruction; documents get none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EmbedKind {
    /// A search query.
    Query,
    /// A document to be searched.
    Document,
}

/// A batch of L2-normalised embeddings, stored row-major in one contiguous buffer so that callers
/// (the store, NumPy) can take it without copying row by row.
#[derive(Debug, Clone, PartialEq)]
pub struct Embeddings {
    dim: usize,
    data: Vec<f32>,
}

impl Embeddings {
    /// Wraps a row-major buffer of `data.len() / dim` rows.
    pub fn new(dim: usize, data: Vec<f32>) -> Result<Self, EmbedError> {
        if dim == 0 || data.len() % dim != 0 {
            return Err(EmbedError::WrongDimension {
                expected: dim,
                got: data.len(),
            });
        }
        Ok(Embeddings { dim, data })
    }

    /// Dimension of each row.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.data.len() / self.dim
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Row `i`.
    pub fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.dim..(i + 1) * self.dim]
    }

    /// Rows in order.
    pub fn rows(&self) -> impl ExactSizeIterator<Item = &[f32]> {
        self.data.chunks_exact(self.dim)
    }

    /// The row-major buffer.
    pub fn as_slice(&self) -> &[f32] {
        &self.data
    }

    /// Takes the row-major buffer.
    pub fn into_vec(self) -> Vec<f32> {
        self.data
    }
}

/// Errors of embedding backends.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// No model where one was expected.
    #[error("no embedding model at {path}; {hint}")]
    ModelNotFound {
        /// Where it was looked for.
        path: PathBuf,
        /// How to obtain it (the command to run).
        hint: String,
    },
    /// A model folder that is present but unusable.
    #[error("invalid model at {path}: {what}")]
    InvalidModel {
        /// The file or folder at fault.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// A vector of the wrong size.
    #[error("wrong embedding dimension: expected {expected}, got {got}")]
    WrongDimension {
        /// The expected size.
        expected: usize,
        /// The size found.
        got: usize,
    },
    /// The requested device cannot be used.
    #[error("device unavailable: {reason}")]
    DeviceUnavailable {
        /// Why.
        reason: String,
    },
    /// A file that could not be read or written.
    #[error("cannot access {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A JSON file of a model (config, tokenizer index, pooling config) that does not parse into
    /// what is expected.
    #[error("invalid JSON in {path}")]
    Json {
        /// The file.
        path: PathBuf,
        /// The underlying error (it names the line, column and field).
        #[source]
        source: serde_json::Error,
    },
    /// A failure inside the backend (tokenizer, tensor library, driver).
    #[error("embedding backend failed during {stage}")]
    Backend {
        /// What the backend was doing.
        stage: &'static str,
        /// The underlying error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// A text embedding model. Implementations batch internally (by length buckets, to keep padding
/// small) and return one L2-normalised row per input text, in input order.
pub trait Embedder: Send + Sync {
    /// A stable identifier of the model and its output configuration (e.g. with MRL dimension);
    /// embeddings cached under one id are never mixed with another's.
    fn model_id(&self) -> &str;

    /// Output dimension.
    fn dim(&self) -> usize;

    /// Embeds `texts`; the result has `texts.len()` rows of [`dim`](Embedder::dim) values.
    fn embed(&self, texts: &[&str], kind: EmbedKind) -> Result<Embeddings, EmbedError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embeddings_shape() {
        let e = Embeddings::new(2, vec![1.0, 0.0, 0.0, 1.0, 0.6, 0.8]).unwrap();
        assert_eq!(e.len(), 3);
        assert_eq!(e.row(2), &[0.6, 0.8]);
        assert_eq!(e.rows().count(), 3);
        assert!(matches!(
            Embeddings::new(2, vec![1.0; 3]),
            Err(EmbedError::WrongDimension {
                expected: 2,
                got: 3
            })
        ));
    }
}
