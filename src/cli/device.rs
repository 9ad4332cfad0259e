//! `--device cpu|cuda|auto`: which backend scores retrieval candidates and embeds with Qwen3.
//!
//! Scoring (batched cosine top-k, fusion, coverage selection) goes through
//! [`trajwiki_cuda::scoring_backend`]. Embedding uses the CUDA Qwen3 model when the model is
//! Qwen3-Embedding and the device is `cuda` (or `auto` with a usable GPU); BERT-family models
//! (MiniLM) and the hashing embedder always run on the CPU, which is said once on stderr when a
//! GPU was asked for. `cuda` without a usable GPU (or in a build without the `cuda` feature) is a
//! usage error (exit code 2); `auto` falls back to the CPU silently.

use std::sync::Arc;

use trajwiki_compute::ScoringBackend;
use trajwiki_core::Embedder;
use trajwiki_cuda::{CudaQwen3Embedder, Device};
use trajwiki_embed::{Architecture, EmbedError, EmbedOptions};

use super::{Global, UsageError};

/// Parses `--device` (`cpu`, `cuda` or `auto`).
pub(crate) fn parse_device(s: &str) -> Result<Device, String> {
    s.parse()
}

/// The scoring backend of `device`: `cuda` that cannot run is a usage error naming why.
pub(crate) fn scoring(device: Device) -> anyhow::Result<Arc<dyn ScoringBackend>> {
    trajwiki_cuda::scoring_backend(device).map_err(|e| {
        UsageError(format!(
            "--device {device}: {e} (use --device cpu or auto to run without a GPU)"
        ))
        .into()
    })
}

/// An embedder and the backend it runs on (`cpu` or `cuda`).
pub(crate) struct LoadedEmbedder {
    /// The model.
    pub embedder: Box<dyn Embedder>,
    /// `cpu` or `cuda`.
    pub backend: &'static str,
}

/// Loads model `spec` (a folder or a cached model name) for `device`; the CUDA Qwen3 model where
/// the architecture and device allow it, the CPU model otherwise.
pub(crate) fn load_model(
    spec: &str,
    opts: &EmbedOptions,
    device: Device,
    global: Global,
) -> anyhow::Result<LoadedEmbedder> {
    let not_found = |e: EmbedError| match e {
        e @ EmbedError::ModelNotFound { .. } => anyhow::Error::from(UsageError(e.to_string())),
        e => e.into(),
    };
    let cpu = |global: Global, why: Option<String>| -> anyhow::Result<LoadedEmbedder> {
        if let Some(why) = why {
            global.say(why);
        }
        Ok(LoadedEmbedder {
            embedder: trajwiki_embed::load_embedder(spec, opts).map_err(not_found)?,
            backend: "cpu",
        })
    };
    if device == Device::Cpu {
        return cpu(global, None);
    }
    let dir = trajwiki_embed::resolve_model(spec).map_err(not_found)?;
    match trajwiki_embed::architecture_of(&dir).map_err(not_found)? {
        Architecture::Qwen3 => match CudaQwen3Embedder::load(&dir, opts, 0) {
            Ok(m) => Ok(LoadedEmbedder {
                embedder: Box::new(m),
                backend: "cuda",
            }),
            Err(e @ EmbedError::DeviceUnavailable { .. }) if device == Device::Cuda => {
                Err(UsageError(format!(
                    "--device cuda: cannot run Qwen3 on CUDA: {e} (use --device cpu or auto)"
                ))
                .into())
            }
            Err(EmbedError::DeviceUnavailable { .. }) => cpu(global, None),
            Err(e) => Err(not_found(e)),
        },
        Architecture::Bert => cpu(
            global,
            (device == Device::Cuda).then(|| {
                format!(
                    "note: {spec} is a BERT-family model, which runs on the CPU; \
                     --device cuda applies to scoring"
                )
            }),
        ),
    }
}
