//! Approximate nearest neighbours for large namespaces.
//!
//! A namespace's message vectors are scanned exactly while it is small; past a size (50,000
//! vectors by default) `trajwiki build` builds an HNSW graph (faiss `IndexHNSWFlat`, inner
//! product: cosine on unit vectors) over the rows the vector file holds, writes it next to the
//! file, and searches read it back and ask it for the best rows instead of scanning them. Rows
//! appended after the graph was built are still scanned exactly, so nothing is ever missed for
//! being new; the graph is rebuilt once that tail grows past a tenth of it, so that the work of
//! one more message stays bounded on average.
//!
//! faiss is a C++ library built from source: it is behind the `faiss` feature. Without it,
//! [`AnnIndex::build`] and [`AnnIndex::load`] return [`AnnError::Unavailable`] and every search
//! stays exact (which is the reference the approximate results are measured against: recall@10
//! of at least 0.95 is asserted in this crate's tests).
//!
//! ```
//! use trajwiki_ann::{AnnError, AnnIndex, AnnParams};
//!
//! let rows = vec![1.0, 0.0, 0.0, 1.0]; // two unit vectors of dimension 2
//! match AnnIndex::build(&rows, 2, AnnParams::default()) {
//!     Ok(index) => assert_eq!(index.search(&[1.0, 0.0], 1).unwrap()[0].0, 0),
//!     Err(AnnError::Unavailable) => assert!(!AnnIndex::available()),
//!     Err(e) => panic!("{e}"),
//! }
//! ```

use std::path::{Path, PathBuf};

/// A scored row: `(row index, inner product)`.
pub type Hit = (u32, f32);

/// Failures of the approximate index.
#[derive(Debug, thiserror::Error)]
pub enum AnnError {
    /// This build of trajwiki has no approximate index (built without the `faiss` feature).
    #[error("approximate search is not in this build of trajwiki (build with `--features faiss`)")]
    Unavailable,
    /// faiss refused the operation.
    #[error("faiss failed while {context}: {message}")]
    Faiss {
        /// What was being done.
        context: &'static str,
        /// faiss's message.
        message: String,
    },
    /// The index file could not be read or written.
    #[error("cannot use approximate index file {path}")]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Rows and dimension disagree.
    #[error("{values} values are not rows of dimension {dim}")]
    Shape {
        /// Values given.
        values: usize,
        /// Dimension.
        dim: usize,
    },
}

/// How the graph is built and searched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnnParams {
    /// Neighbours per node (HNSW's M); faiss keeps its default build effort (efConstruction).
    pub m: usize,
    /// Candidates kept while searching (efSearch); raised to k when k is larger.
    pub ef_search: usize,
}

impl Default for AnnParams {
    fn default() -> Self {
        AnnParams {
            m: 32,
            ef_search: 1024,
        }
    }
}

/// An HNSW graph over rows `0..rows()` of a matrix.
pub struct AnnIndex {
    rows: usize,
    dim: usize,
    #[cfg(feature = "faiss")]
    inner: std::sync::Mutex<faiss::index::IndexImpl>,
    #[cfg(feature = "faiss")]
    params: AnnParams,
}

impl std::fmt::Debug for AnnIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnnIndex")
            .field("rows", &self.rows)
            .field("dim", &self.dim)
            .finish()
    }
}

impl AnnIndex {
    /// Whether this build has approximate search.
    pub fn available() -> bool {
        cfg!(feature = "faiss")
    }

    /// Rows indexed.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Builds the graph over `rows` (row-major, `dim` each, unit length for cosine).
    pub fn build(rows: &[f32], dim: usize, params: AnnParams) -> Result<AnnIndex, AnnError> {
        if dim == 0 || !rows.len().is_multiple_of(dim) {
            return Err(AnnError::Shape {
                values: rows.len(),
                dim,
            });
        }
        imp::build(rows, dim, params)
    }

    /// The best `k` rows for query `q`, best first (ties to the lower row).
    pub fn search(&self, q: &[f32], k: usize) -> Result<Vec<Hit>, AnnError> {
        if q.len() != self.dim {
            return Err(AnnError::Shape {
                values: q.len(),
                dim: self.dim,
            });
        }
        if k == 0 || self.rows == 0 {
            return Ok(Vec::new());
        }
        imp::search(self, q, k.min(self.rows))
    }

    /// Writes the graph to `path` (through a temporary file renamed into place, so a reader
    /// never sees half a file).
    pub fn save(&self, path: &Path) -> Result<(), AnnError> {
        imp::save(self, path)
    }

    /// Reads a graph written by [`save`](Self::save).
    pub fn load(path: &Path, params: AnnParams) -> Result<AnnIndex, AnnError> {
        imp::load(path, params)
    }
}

#[cfg(feature = "faiss")]
mod imp {
    use std::path::Path;
    use std::sync::{Mutex, PoisonError};

    use faiss::index::autotune::ParameterSpace;
    use faiss::{Index, MetricType};

    use super::{AnnError, AnnIndex, AnnParams, Hit};

    fn faiss_error(context: &'static str) -> impl FnOnce(faiss::error::Error) -> AnnError {
        move |e| AnnError::Faiss {
            context,
            message: e.to_string(),
        }
    }

    fn set(index: &faiss::index::IndexImpl, name: &str, value: usize) -> Result<(), AnnError> {
        let space = ParameterSpace::new().map_err(faiss_error("setting a search parameter"))?;
        space
            .set_index_parameter(index, name, value as f64)
            .map_err(faiss_error("setting a search parameter"))
    }

    pub(super) fn build(rows: &[f32], dim: usize, params: AnnParams) -> Result<AnnIndex, AnnError> {
        let mut index = faiss::index_factory(
            dim as u32,
            format!("HNSW{},Flat", params.m),
            MetricType::InnerProduct,
        )
        .map_err(faiss_error("creating an HNSW index"))?;
        index.add(rows).map_err(faiss_error("adding rows"))?;
        Ok(AnnIndex {
            rows: rows.len() / dim,
            dim,
            inner: Mutex::new(index),
            params,
        })
    }

    pub(super) fn search(a: &AnnIndex, q: &[f32], k: usize) -> Result<Vec<Hit>, AnnError> {
        let mut index = a.inner.lock().unwrap_or_else(PoisonError::into_inner);
        set(&index, "efSearch", a.params.ef_search.max(k))?;
        let found = index.search(q, k).map_err(faiss_error("searching"))?;
        let mut hits: Vec<Hit> = found
            .labels
            .iter()
            .zip(&found.distances)
            .filter_map(|(l, d)| l.get().map(|r| (r as u32, *d)))
            .collect();
        hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        Ok(hits)
    }

    pub(super) fn save(a: &AnnIndex, path: &Path) -> Result<(), AnnError> {
        let tmp = path.with_extension("partial");
        let index = a.inner.lock().unwrap_or_else(PoisonError::into_inner);
        faiss::write_index(&*index, tmp.to_string_lossy().as_ref())
            .map_err(faiss_error("writing an index file"))?;
        std::fs::rename(&tmp, path).map_err(|source| AnnError::File {
            path: path.to_path_buf(),
            source,
        })
    }

    pub(super) fn load(path: &Path, params: AnnParams) -> Result<AnnIndex, AnnError> {
        if !path.is_file() {
            return Err(AnnError::File {
                path: path.to_path_buf(),
                source: std::io::ErrorKind::NotFound.into(),
            });
        }
        let index = faiss::read_index(path.to_string_lossy().as_ref())
            .map_err(faiss_error("reading an index file"))?;
        Ok(AnnIndex {
            rows: index.ntotal() as usize,
            dim: index.d() as usize,
            inner: Mutex::new(index),
            params,
        })
    }
}

#[cfg(not(feature = "faiss"))]
mod imp {
    use std::path::Path;

    use super::{AnnError, AnnIndex, AnnParams, Hit};

    pub(super) fn build(_: &[f32], _: usize, _: AnnParams) -> Result<AnnIndex, AnnError> {
        Err(AnnError::Unavailable)
    }

    pub(super) fn search(_: &AnnIndex, _: &[f32], _: usize) -> Result<Vec<Hit>, AnnError> {
        Err(AnnError::Unavailable)
    }

    pub(super) fn save(_: &AnnIndex, _: &Path) -> Result<(), AnnError> {
        Err(AnnError::Unavailable)
    }

    pub(super) fn load(_: &Path, _: AnnParams) -> Result<AnnIndex, AnnError> {
        Err(AnnError::Unavailable)
    }
}
