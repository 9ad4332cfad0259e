//! Embedding models by name, on a device.

use std::path::PathBuf;

use trajwiki_core::{EmbedError, Embedder, HashingEmbedder};
use trajwiki_cuda::{CudaBertEmbedder, CudaQwen3Embedder, Device};
use trajwiki_embed::{Architecture, EmbedOptions, Precision};

/// Loads an embedding model by name, on the CPU: a model folder, a name in the model cache
/// (`minilm`), or `hashing[-DIM]` (lexical, no model files; 384 dimensions unless given).
pub fn load_embedder(spec: &str) -> Result<Box<dyn Embedder>, EmbedError> {
    Ok(load_model(spec, &EmbedOptions::default(), Device::Cpu)?.embedder)
}

/// An embedding model loaded for a device.
pub struct LoadedModel {
    /// The model.
    pub embedder: Box<dyn Embedder>,
    /// Where it runs: `cpu` or `cuda`.
    pub backend: &'static str,
    /// Set when a GPU was asked for but the model runs on the CPU, to tell the user once.
    pub note: Option<CpuOnly>,
}

/// A model that runs on the CPU although `cuda` was asked for; the GPU still scores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuOnly {
    /// The model as it was named.
    pub model: String,
    /// Why it stays on the CPU, e.g. "is lexical".
    pub reason: &'static str,
}

impl CpuOnly {
    /// The note, naming the device setting as the caller spells it (`--device cuda` on the
    /// command line, `device="cuda"` in Python).
    pub fn message(&self, device_setting: &str) -> String {
        format!(
            "note: {} {}, which runs on the CPU; {device_setting} applies to scoring",
            self.model, self.reason
        )
    }
}

/// Loads model `spec` (as [`load_embedder`]) for `device`. Qwen3-Embedding and BERT-family models
/// (MiniLM) run on the GPU with `cuda`, and with `auto` when a GPU is usable; the hashing
/// embedder always runs on the CPU (with a [`LoadedModel::note`] when `cuda` was asked for).
/// `cuda` for a model without a usable GPU, or in a build without the `cuda` feature, is
/// [`EmbedError::DeviceUnavailable`].
pub fn load_model(
    spec: &str,
    opts: &EmbedOptions,
    device: Device,
) -> Result<LoadedModel, EmbedError> {
    let loaded = load_model_unchecked(spec, opts, device)?;
    trajwiki_core::limits::EMBEDDING_DIM.check(loaded.embedder.dim())?;
    Ok(loaded)
}

fn load_model_unchecked(
    spec: &str,
    opts: &EmbedOptions,
    device: Device,
) -> Result<LoadedModel, EmbedError> {
    let cpu = |embedder: Box<dyn Embedder>, reason: Option<&'static str>| LoadedModel {
        embedder,
        backend: "cpu",
        note: reason
            .filter(|_| device == Device::Cuda)
            .map(|reason| CpuOnly {
                model: spec.to_owned(),
                reason,
            }),
    };
    if let Some(rest) = spec.strip_prefix("hashing") {
        let dim = match rest.strip_prefix('-') {
            None if rest.is_empty() => Some(384),
            Some(d) => d.parse().ok().filter(|&d: &usize| d > 0),
            None => None,
        };
        return match dim {
            // The dimension is checked by `load_model`, before anything is embedded.
            Some(dim) => Ok(cpu(Box::new(HashingEmbedder::new(dim)), Some("is lexical"))),
            None => Err(EmbedError::ModelNotFound {
                path: PathBuf::from(spec),
                hint: "the lexical model is named hashing or hashing-<dimension>".into(),
            }),
        };
    }
    if device == Device::Cpu {
        return Ok(cpu(trajwiki_embed::load_embedder(spec, opts)?, None));
    }
    // The CUDA encoders run their own formats; bf16 and int8 name the CPU kernels.
    let (name, precision) = trajwiki_embed::split_precision(spec)?;
    match precision.unwrap_or(opts.precision) {
        Precision::F32 => {}
        _ if device == Device::Auto => {
            return Ok(cpu(trajwiki_embed::load_embedder(spec, opts)?, None));
        }
        p => {
            return Err(EmbedError::DeviceUnavailable {
                reason: format!(
                "precision {} runs on the CPU (model {spec}); name the model without @{} on CUDA",
                p.name(),
                p.name()
            ),
            })
        }
    }
    let dir = trajwiki_embed::resolve_model(name)?;
    let on_gpu = match trajwiki_embed::architecture_of(&dir)? {
        Architecture::Qwen3 => {
            CudaQwen3Embedder::load(&dir, opts, 0).map(|m| Box::new(m) as Box<dyn Embedder>)
        }
        Architecture::Bert => {
            CudaBertEmbedder::load(&dir, opts, 0).map(|m| Box::new(m) as Box<dyn Embedder>)
        }
    };
    match on_gpu {
        Ok(embedder) => Ok(LoadedModel {
            embedder,
            backend: "cuda",
            note: None,
        }),
        Err(EmbedError::DeviceUnavailable { .. }) if device == Device::Auto => {
            Ok(cpu(trajwiki_embed::load_embedder(spec, opts)?, None))
        }
        Err(e) => Err(e),
    }
}
