//! `--device cpu|cuda|auto`: which backend scores retrieval candidates and embeds.
//!
//! Scoring (batched cosine top-k, fusion, coverage selection) goes through
//! [`trajwiki::cuda::scoring_backend`]. Embedding uses the CUDA model (Qwen3-Embedding or a
//! BERT-family encoder such as MiniLM) when the device is `cuda` (or `auto` with a usable GPU);
//! the hashing embedder always runs on the CPU, which is said once on stderr when a GPU was asked
//! for. `cuda` without a usable GPU (or in a build without the `cuda` feature) is a
//! usage error (exit code 2); `auto` falls back to the CPU silently.

use std::sync::Arc;

use trajwiki::api::LoadedModel;
use trajwiki::compute::ScoringBackend;
use trajwiki::cuda::Device;
use trajwiki::embed::{EmbedError, EmbedOptions};

use super::{Global, UsageError};

/// Parses `--device` (`cpu`, `cuda` or `auto`).
pub(crate) fn parse_device(s: &str) -> Result<Device, String> {
    s.parse()
}

/// The scoring backend of `device`: `cuda` that cannot run is a usage error naming why.
pub(crate) fn scoring(device: Device) -> anyhow::Result<Arc<dyn ScoringBackend>> {
    trajwiki::cuda::scoring_backend(device).map_err(|e| {
        UsageError(format!(
            "--device {device}: {e} (use --device cpu or auto to run without a GPU)"
        ))
        .into()
    })
}

/// Loads model `spec` (a folder, a cached model name or `hashing[-DIM]`) for `device`, as
/// [`trajwiki::api::load_model`] decides; a model that is not there, or `cuda` that cannot run
/// it, is a usage error. The note on a model that stays on the CPU is said once.
pub(crate) fn load_model(
    spec: &str,
    opts: &EmbedOptions,
    device: Device,
    global: Global,
) -> anyhow::Result<LoadedModel> {
    match trajwiki::api::load_model(spec, opts, device) {
        Ok(loaded) => {
            if let Some(note) = &loaded.note {
                global.say(note.message("--device cuda"));
            }
            Ok(loaded)
        }
        Err(e @ (EmbedError::ModelNotFound { .. } | EmbedError::Setting { .. })) => {
            Err(UsageError(e.to_string()).into())
        }
        Err(e @ EmbedError::DeviceUnavailable { .. }) => Err(UsageError(format!(
            "--device {device}: cannot run the model on CUDA: {e} (model {spec}; use --device cpu or auto)"
        ))
        .into()),
        Err(e) => Err(e.into()),
    }
}
