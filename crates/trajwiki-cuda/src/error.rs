//! Errors of the CUDA backend.

use trajwiki_compute::ComputeError;

/// What can go wrong on the CUDA path.
#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    /// The crate was built without the `cuda` feature.
    #[error("built without CUDA (rebuild with `--features cuda`)")]
    NotBuilt,
    /// No usable driver, library or device.
    #[error("CUDA unavailable: {reason}")]
    Unavailable {
        /// Why.
        reason: String,
    },
    /// NVRTC rejected a kernel; `log` is its full output.
    #[error("NVRTC failed to compile kernel {kernel} for {arch}:\n{log}")]
    Compile {
        /// The kernel id (file stem under `kernels/`).
        kernel: &'static str,
        /// The virtual architecture, e.g. `compute_90`.
        arch: String,
        /// The NVRTC log.
        log: String,
    },
    /// No kernel with this id.
    #[error("no kernel named {0}")]
    UnknownKernel(String),
    /// A driver call failed.
    #[error("CUDA driver failed during {stage}: {message}")]
    Driver {
        /// What the backend was doing.
        stage: &'static str,
        /// The driver's error.
        message: String,
    },
    /// The device thread is gone (it panicked or was shut down).
    #[error("the CUDA device thread has stopped")]
    ThreadGone,
    /// Invalid input, reported by the shared scoring checks.
    #[error(transparent)]
    Input(#[from] ComputeError),
}

impl From<CudaError> for ComputeError {
    fn from(e: CudaError) -> Self {
        match e {
            CudaError::Input(e) => e,
            CudaError::NotBuilt | CudaError::Unavailable { .. } => {
                ComputeError::DeviceUnavailable {
                    reason: e.to_string(),
                }
            }
            other => ComputeError::Backend {
                backend: "cuda",
                stage: match &other {
                    CudaError::Compile { .. } | CudaError::UnknownKernel(_) => "kernel compilation",
                    CudaError::ThreadGone => "device thread",
                    _ => "driver call",
                },
                source: Box::new(other),
            },
        }
    }
}
