//! Runtime device selection: `cuda`, `cpu` or `auto`.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use trajwiki_compute::{CpuScoring, ScoringBackend};

use crate::{CudaError, CudaScoring};

/// Which backend to run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Device {
    /// The CPU reference (always available).
    Cpu,
    /// CUDA device 0; an error when it cannot be used.
    Cuda,
    /// CUDA when a device can be used, the CPU otherwise.
    #[default]
    Auto,
}

impl FromStr for Device {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "cpu" => Ok(Device::Cpu),
            "cuda" | "gpu" => Ok(Device::Cuda),
            "auto" => Ok(Device::Auto),
            other => Err(format!(
                "unknown device {other:?}; expected cuda, cpu or auto"
            )),
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Device::Cpu => "cpu",
            Device::Cuda => "cuda",
            Device::Auto => "auto",
        })
    }
}

/// The scoring backend for `device`. CUDA needs a device and NVRTC (the kernels are compiled on
/// first use, so a missing NVRTC is caught here rather than in the middle of a query). `Auto`
/// probes safely and falls back to the CPU.
pub fn scoring_backend(device: Device) -> Result<Arc<dyn ScoringBackend>, CudaError> {
    let cuda = || -> Result<CudaScoring, CudaError> {
        let c = CudaScoring::new(0)?;
        crate::nvrtc_ready()?;
        Ok(c)
    };
    match device {
        Device::Cpu => Ok(Arc::new(CpuScoring)),
        Device::Cuda => Ok(Arc::new(cuda()?)),
        Device::Auto => match cuda() {
            Ok(c) => Ok(Arc::new(c)),
            Err(_) => Ok(Arc::new(CpuScoring)),
        },
    }
}
