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
        if dim == 0 || !data.len().is_multiple_of(dim) {
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

/// The L2-normalised sum of `rows`, added in the given order: the vector of a record made of
/// embedded parts (a snapshot of its messages, a trajectory of its snapshots). Construction and
/// retrieval both derive vectors with it, in the same order, so they agree to the bit.
/// All-zero when there are no rows (or they cancel out).
///
/// ```
/// let c = trajwiki_core::centroid([[1.0, 0.0].as_slice(), [0.0, 1.0].as_slice()], 2);
/// assert!((c[0] - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-7 && c[0] == c[1]);
/// ```
pub fn centroid<'a>(rows: impl IntoIterator<Item = &'a [f32]>, dim: usize) -> Vec<f32> {
    let mut sum = vec![0.0f32; dim];
    for row in rows {
        sum.iter_mut().zip(row).for_each(|(s, x)| *s += x);
    }
    normalise(&mut sum);
    sum
}

/// [`centroid`] of `parts` rows written into `out`, each row put into `scratch` by `row(part,
/// scratch)` when its turn comes: the same sums, without holding the rows.
pub fn centroid_into(
    out: &mut [f32],
    scratch: &mut [f32],
    parts: impl IntoIterator<Item = usize>,
    mut row: impl FnMut(usize, &mut [f32]),
) {
    out.fill(0.0);
    for part in parts {
        row(part, scratch);
        out.iter_mut().zip(&*scratch).for_each(|(s, x)| *s += x);
    }
    normalise(out);
}

/// Divides `sum` by its L2 norm (left as it is when that is zero).
fn normalise(sum: &mut [f32]) {
    let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        sum.iter_mut().for_each(|x| *x /= norm);
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
    /// A setting of the embedding run (the CPU kernels asked for, a precision) that cannot be
    /// honoured.
    #[error("invalid embedding setting: {reason}")]
    Setting {
        /// What was asked and why it cannot be.
        reason: String,
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
    /// A model past one of the limits (its dimension; see [`crate::limits`]).
    #[error(transparent)]
    Limit(#[from] crate::limits::LimitError),
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

    /// What computes the vectors, for reports: the CPU kernels and precision (`avx512-bf16`),
    /// a device, or nothing to say.
    fn kernel(&self) -> Option<String> {
        None
    }
}

/// A lexical embedder: signed feature hashing of lower-cased words and word bigrams, L2
/// normalised. It needs no model files and is exact and fast, so tests and quick offline runs use
/// it; its vectors measure word overlap, not meaning — real memories use a neural model.
#[derive(Debug, Clone)]
pub struct HashingEmbedder {
    dim: usize,
    id: String,
}

impl HashingEmbedder {
    /// An embedder of `dim` dimensions (at least 1).
    pub fn new(dim: usize) -> Self {
        let dim = dim.max(1);
        HashingEmbedder {
            dim,
            id: format!("hashing-{dim}"),
        }
    }

    fn fnv1a(bytes: &[u8]) -> u64 {
        bytes.iter().fold(0xcbf29ce484222325, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x100000001b3)
        })
    }

    fn embed_one(&self, text: &str, out: &mut [f32]) {
        let words: Vec<String> = text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect();
        let mut add = |feature: &str, weight: f32| {
            let h = Self::fnv1a(feature.as_bytes());
            let sign = if h >> 63 == 0 { 1.0 } else { -1.0 };
            out[(h % self.dim as u64) as usize] += sign * weight;
        };
        for w in &words {
            add(w, 1.0);
        }
        for pair in words.windows(2) {
            add(&format!("{} {}", pair[0], pair[1]), 0.5);
        }
        let norm = out.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            out.iter_mut().for_each(|x| *x /= norm);
        } else {
            out[0] = 1.0;
        }
    }
}

impl Embedder for HashingEmbedder {
    fn model_id(&self) -> &str {
        &self.id
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&self, texts: &[&str], _kind: EmbedKind) -> Result<Embeddings, EmbedError> {
        let mut data = vec![0.0; texts.len() * self.dim];
        for (text, row) in texts.iter().zip(data.chunks_exact_mut(self.dim)) {
            self.embed_one(text, row);
        }
        Embeddings::new(self.dim, data)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn hashing_embedder_is_normalised_and_lexical() {
        let e = HashingEmbedder::new(64);
        let v = e
            .embed(
                &["the cat sat", "the cat sat", "quantum physics", ""],
                EmbedKind::Document,
            )
            .unwrap();
        for row in v.rows() {
            let n: f32 = row.iter().map(|x| x * x).sum();
            assert!((n - 1.0).abs() < 1e-5);
        }
        assert_eq!(v.row(0), v.row(1));
        let dot: f32 = v.row(0).iter().zip(v.row(2)).map(|(a, b)| a * b).sum();
        assert!(dot < 0.9);
        assert_eq!(e.model_id(), "hashing-64");
    }

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
