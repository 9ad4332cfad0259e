//! The backend when built without the `cuda` feature: the same API, and every entry point
//! returns [`CudaError::NotBuilt`].

use trajwiki_compute::{
    ComputeError, CoverageWeights, Hit, MatrixView, ScoringBackend, SelectionBatch,
};

use crate::{CompiledKernel, CudaError, DeviceInfo};

/// The CUDA scoring backend (unavailable in this build).
#[derive(Debug)]
pub struct CudaScoring {
    _never: std::convert::Infallible,
}

/// A matrix resident in device memory (unavailable in this build).
#[derive(Debug)]
pub struct DeviceMatrix {
    _never: std::convert::Infallible,
}

impl DeviceMatrix {
    /// Number of rows.
    pub fn rows(&self) -> usize {
        match self._never {}
    }

    /// Dimension.
    pub fn dim(&self) -> usize {
        match self._never {}
    }
}

/// Whether NVRTC can be loaded (unavailable in this build).
pub fn nvrtc_ready() -> Result<(), CudaError> {
    Err(CudaError::NotBuilt)
}

/// Compiles kernel `id` to PTX for `arch` (unavailable in this build).
pub fn compile_kernel(_id: &str, _arch: &str) -> Result<CompiledKernel, CudaError> {
    Err(CudaError::NotBuilt)
}

/// Probes device `ordinal` (unavailable in this build).
pub fn probe(_ordinal: usize) -> Result<DeviceInfo, CudaError> {
    Err(CudaError::NotBuilt)
}

impl CudaScoring {
    /// Opens device `ordinal` (unavailable in this build).
    pub fn new(_ordinal: usize) -> Result<Self, CudaError> {
        Err(CudaError::NotBuilt)
    }

    /// The device's description.
    pub fn info(&self) -> &DeviceInfo {
        match self._never {}
    }

    /// Copies a matrix to the device.
    pub fn upload(&self, _matrix: &MatrixView<'_>) -> Result<DeviceMatrix, CudaError> {
        match self._never {}
    }

    /// Appends rows to a resident matrix in place.
    pub fn append(
        &self,
        _matrix: &mut DeviceMatrix,
        _rows: &MatrixView<'_>,
    ) -> Result<(), CudaError> {
        match self._never {}
    }

    /// Top-k over a resident matrix.
    pub fn cosine_topk_resident(
        &self,
        _matrix: &DeviceMatrix,
        _queries: &[f32],
        _k: usize,
    ) -> Result<Vec<Vec<Hit>>, CudaError> {
        match self._never {}
    }
}

impl CudaScoring {
    /// Measured device copy bandwidth in bytes/s.
    pub fn copy_bandwidth(&self, _bytes: usize, _iters: usize) -> Result<f64, CudaError> {
        match self._never {}
    }
}

impl ScoringBackend for CudaScoring {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn cosine_topk(
        &self,
        _matrix: &MatrixView<'_>,
        _queries: &[f32],
        _k: usize,
    ) -> Result<Vec<Vec<Hit>>, ComputeError> {
        match self._never {}
    }

    fn cosine_topk_subset(
        &self,
        _matrix: &MatrixView<'_>,
        _queries: &[f32],
        _candidates: &[&[u32]],
        _k: usize,
    ) -> Result<Vec<Vec<Hit>>, ComputeError> {
        match self._never {}
    }

    fn rrf_batch(
        &self,
        _batch: &[&[&[u32]]],
        _k_const: f32,
    ) -> Result<Vec<Vec<Hit>>, ComputeError> {
        match self._never {}
    }

    fn coverage_select(
        &self,
        _batch: &SelectionBatch,
        _weights: &CoverageWeights,
        _k: usize,
    ) -> Result<Vec<Vec<u32>>, ComputeError> {
        match self._never {}
    }
}

/// The device half of [`crate::CudaQwen3Embedder`] (unavailable in this build).
#[derive(Debug)]
pub(crate) struct Qwen3Device {
    _never: std::convert::Infallible,
}

impl Qwen3Device {
    /// Opens the device and uploads the weights (unavailable in this build).
    pub(crate) fn open(
        _ordinal: usize,
        _shape: &trajwiki_embed::Qwen3Shape,
        _dim_out: usize,
        _tensors: &trajwiki_embed::Qwen3Tensors,
    ) -> Result<Self, CudaError> {
        Err(CudaError::NotBuilt)
    }

    /// The device's description.
    pub(crate) fn info(&self) -> &DeviceInfo {
        match self._never {}
    }

    /// Runs one padded batch.
    pub(crate) fn forward(&self, _batch: crate::qwen3::PaddedBatch) -> Result<Vec<f32>, CudaError> {
        match self._never {}
    }
}

/// The device half of [`crate::CudaBertEmbedder`] (unavailable in this build).
#[derive(Debug)]
pub(crate) struct BertDevice {
    _never: std::convert::Infallible,
}

impl BertDevice {
    /// Opens the device and uploads the weights (unavailable in this build).
    pub(crate) fn open(
        _ordinal: usize,
        _spec: &trajwiki_embed::BertSpec,
        _weights: trajwiki_embed::BertWeights,
    ) -> Result<Self, CudaError> {
        Err(CudaError::NotBuilt)
    }

    /// The device's description.
    pub(crate) fn info(&self) -> &DeviceInfo {
        match self._never {}
    }

    /// Runs one packed batch.
    pub(crate) fn forward(&self, _batch: crate::bert::PackedBatch) -> Result<Vec<f32>, CudaError> {
        match self._never {}
    }
}
