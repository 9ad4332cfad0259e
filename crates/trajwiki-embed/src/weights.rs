//! Reading safetensors checkpoints (one file, or shards listed in `model.safetensors.index.json`)
//! into `f32` buffers, whatever the stored float type, through candle.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use candle_core::safetensors::BufferedSafetensors;
use candle_core::{DType, Device};
use trajwiki_core::embed::EmbedError;

use crate::ops::Dense;
use crate::resolve::{read_file, read_json};

/// All tensors of a checkpoint, keyed by name with an optional common prefix (`model.`, `bert.`)
/// removed, so that a model reads the same names whether or not it was saved inside a wrapper.
pub(crate) struct Weights {
    shards: Vec<(PathBuf, BufferedSafetensors)>,
    /// Tensor name (as stored) → shard index.
    index: HashMap<String, usize>,
    /// The prefix stored names carry, if any.
    prefix: String,
}

#[derive(serde::Deserialize)]
struct ShardIndex {
    weight_map: HashMap<String, String>,
}

fn backend(stage: &'static str, e: impl std::error::Error + Send + Sync + 'static) -> EmbedError {
    EmbedError::Backend {
        stage,
        source: Box::new(e),
    }
}

impl Weights {
    /// Opens `model.safetensors`, or the shards named by `model.safetensors.index.json`, in `dir`.
    /// `probe` is a tensor name (without prefix) that the model must have; the prefixes in
    /// `prefixes` are tried in order to find it.
    pub(crate) fn open(dir: &Path, probe: &str, prefixes: &[&str]) -> Result<Weights, EmbedError> {
        let single = dir.join("model.safetensors");
        let index_path = dir.join("model.safetensors.index.json");
        let files: Vec<PathBuf> = if single.is_file() {
            vec![single]
        } else if index_path.is_file() {
            let idx: ShardIndex = read_json(&index_path)?;
            let names: BTreeSet<&String> = idx.weight_map.values().collect();
            names.into_iter().map(|n| dir.join(n)).collect()
        } else {
            return Err(EmbedError::InvalidModel {
                path: dir.to_path_buf(),
                what: "neither model.safetensors nor model.safetensors.index.json is present"
                    .into(),
            });
        };
        let mut shards = Vec::with_capacity(files.len());
        let mut index = HashMap::new();
        for (i, file) in files.into_iter().enumerate() {
            let bytes = read_file(&file)?;
            let st = BufferedSafetensors::new(bytes).map_err(|e| EmbedError::InvalidModel {
                path: file.clone(),
                what: format!("not a readable safetensors file: {e}"),
            })?;
            for (name, _) in st.tensors() {
                index.insert(name, i);
            }
            shards.push((file, st));
        }
        let prefix = prefixes
            .iter()
            .find(|p| index.contains_key(&format!("{p}{probe}")))
            .ok_or_else(|| EmbedError::InvalidModel {
                path: dir.to_path_buf(),
                what: format!("no tensor named {probe} (with any of the prefixes {prefixes:?})"),
            })?
            .to_string();
        Ok(Weights {
            shards,
            index,
            prefix,
        })
    }

    /// Whether a tensor (name without prefix) exists.
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.index.contains_key(&format!("{}{name}", self.prefix))
    }

    /// The tensor `name` (without prefix) as `f32`, checked against `shape`.
    pub(crate) fn get(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, EmbedError> {
        let full = format!("{}{name}", self.prefix);
        let &shard = self
            .index
            .get(&full)
            .ok_or_else(|| EmbedError::InvalidModel {
                path: self.shards[0].0.clone(),
                what: format!("missing tensor {full}"),
            })?;
        let (path, st) = &self.shards[shard];
        let t = st
            .load(&full, &Device::Cpu)
            .map_err(|e| backend("loading weights", e))?;
        if t.dims() != shape {
            return Err(EmbedError::InvalidModel {
                path: path.clone(),
                what: format!(
                    "tensor {full} has shape {:?}, the config implies {shape:?}",
                    t.dims()
                ),
            });
        }
        t.to_dtype(DType::F32)
            .and_then(|t| t.flatten_all())
            .and_then(|t| t.to_vec1::<f32>())
            .map_err(|e| backend("converting weights", e))
    }

    /// A linear layer `prefix.weight` (`[out, in]`) with `prefix.bias` if present.
    pub(crate) fn linear(
        &self,
        prefix: &str,
        in_dim: usize,
        out_dim: usize,
    ) -> Result<Dense, EmbedError> {
        let weight = self.get(&format!("{prefix}.weight"), &[out_dim, in_dim])?;
        let bias_name = format!("{prefix}.bias");
        let bias = if self.contains(&bias_name) {
            Some(self.get(&bias_name, &[out_dim])?)
        } else {
            None
        };
        Ok(Dense {
            weight,
            bias,
            in_dim,
            out_dim,
        })
    }
}
