//! `Embedder`: the embedding engine on its own, returning NumPy arrays.

use std::sync::Arc;

use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyArray2};
use pyo3::prelude::*;
use trajwiki_core::{EmbedKind, Embedder as RustEmbedder};
use trajwiki_engine::layers::cuda::Device;

use crate::convert::strings;
use crate::errors::{raise, Kind, OrRaise};

/// An embedding model: `model` is a model folder, a name in the model cache (`minilm`), or
/// `hashing[-DIM]`.
#[pyclass(module = "trajwiki._trajwiki", frozen)]
pub struct Embedder {
    inner: Arc<dyn RustEmbedder>,
    device: Device,
    backend: &'static str,
}

#[pymethods]
impl Embedder {
    /// Loads the model for `device` (`cpu`, `cuda` or `auto`). Qwen3-Embedding and BERT-family
    /// models run on the GPU with `cuda` (and with `auto` when one is usable); `hashing` runs on
    /// the CPU. `cuda` that cannot run the model raises `ModelError`.
    #[new]
    #[pyo3(signature = (model = "minilm", device = "auto"))]
    fn new(py: Python<'_>, model: &str, device: &str) -> PyResult<Self> {
        let device = crate::convert::device(device)?;
        let loaded = py
            .detach(|| crate::convert::load_model(model, device))
            .or_raise()?;
        if let Some(note) = &loaded.note {
            let note = std::ffi::CString::new(note.message("device=\"cuda\"")).unwrap_or_default();
            PyErr::warn(
                py,
                &py.get_type::<pyo3::exceptions::PyUserWarning>(),
                &note,
                1,
            )?;
        }
        Ok(Embedder {
            inner: loaded.embedder.into(),
            device,
            backend: loaded.backend,
        })
    }

    /// Embeds `texts` as documents or queries (`kind`); returns a float32 array of shape
    /// (len(texts), dim) whose rows are L2-normalised. The vectors move into the array without
    /// a copy.
    #[pyo3(signature = (texts, kind = "document"))]
    fn embed<'py>(
        &self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
        kind: &str,
    ) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let texts = strings(texts, "texts")?;
        let kind = match kind {
            "document" => EmbedKind::Document,
            "query" => EmbedKind::Query,
            other => {
                return Err(raise(
                    Kind::Input,
                    format!("kind must be \"document\" or \"query\", not {other:?}"),
                ))
            }
        };
        let dim = self.inner.dim();
        let data = py
            .detach(|| -> Result<Vec<f32>, trajwiki_core::EmbedError> {
                if texts.is_empty() {
                    return Ok(Vec::new());
                }
                let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
                let rows = self.inner.embed(&refs, kind)?;
                if rows.dim() != dim || rows.len() != refs.len() {
                    return Err(trajwiki_core::EmbedError::WrongDimension {
                        expected: dim,
                        got: rows.dim(),
                    });
                }
                Ok(rows.into_vec())
            })
            .or_raise()?;
        let array = Array2::from_shape_vec((texts.len(), dim), data)
            .map_err(|e| raise(Kind::Model, format!("embedding shape: {e}")))?;
        Ok(array.into_pyarray(py))
    }

    /// The dimension of the vectors.
    #[getter]
    fn dim(&self) -> usize {
        self.inner.dim()
    }

    /// The model id: stable across runs, distinct per weights, pooling and dimension.
    #[getter]
    fn model_id(&self) -> String {
        self.inner.model_id().to_string()
    }

    /// The device asked for (`cpu`, `cuda` or `auto`).
    #[getter]
    fn device(&self) -> String {
        self.device.to_string()
    }

    /// Where the model runs: `cpu` or `cuda`.
    #[getter]
    fn backend(&self) -> &'static str {
        self.backend
    }

    fn __repr__(&self) -> String {
        format!(
            "Embedder(model_id={:?}, dim={})",
            self.inner.model_id(),
            self.inner.dim()
        )
    }
}
