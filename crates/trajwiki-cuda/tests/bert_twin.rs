//! The CUDA BERT-family encoder against its CPU twin ([`trajwiki_embed::BertEmbedder`], itself
//! checked against sentence-transformers on all-MiniLM-L6-v2): small random BERT models written
//! here (a WordPiece tokenizer, f32 safetensors, mean and CLS pooling, head sizes 32 and 64, a
//! truncated output dimension) and, when it is installed, the real MiniLM. Texts of 1 to a few
//! hundred tokens (several attention tiles), several batch budgets (texts grouped and split
//! differently), and each text alone: the GPU runs f16 projections with f32 accumulation, so rows
//! must agree to f16 precision, cosine ≥ 0.9999 per text.
//!
//! Without a GPU (or without the `cuda` feature) the CUDA runs skip with a message, unless
//! TRAJWIKI_REQUIRE_GPU=1. The shape checks run everywhere.

use std::path::{Path, PathBuf};

use trajwiki_cuda::CudaBertEmbedder;
use trajwiki_embed::{BertEmbedder, EmbedError, EmbedKind, EmbedOptions, Embedder, Embeddings};

#[path = "common/bert_model.rs"]
mod bert_model;
use bert_model::{write_model, Shape};

/// Texts from one character to a few hundred tokens, with words outside the vocabulary.
fn texts() -> Vec<String> {
    let base = [
        "I went camping with the kids last week.",
        "Caroline: the adoption support group met on Friday!",
        "Melanie painted a sunset; it's her 3rd painting this year.",
        "x",
        "",
        "Zebras quietly juxtapose wizardry: qualms?",
    ];
    let mut t: Vec<String> = base.iter().map(|s| s.to_string()).collect();
    for (i, s) in base.iter().enumerate() {
        t.push(
            std::iter::repeat_n(*s, 2 + 9 * i)
                .collect::<Vec<_>>()
                .join(" "),
        );
    }
    t
}

fn opts(dim: Option<usize>, max_batch_tokens: Option<usize>) -> EmbedOptions {
    EmbedOptions {
        threads: Some(2),
        dim,
        max_batch_tokens,
        ..Default::default()
    }
}

/// Loads the CUDA model, or says why the test skips (a panic when a GPU is required).
fn cuda(dir: &Path, o: &EmbedOptions) -> Option<CudaBertEmbedder> {
    match CudaBertEmbedder::load(dir, o, 0) {
        Ok(m) => Some(m),
        Err(e @ EmbedError::DeviceUnavailable { .. }) => {
            if std::env::var("TRAJWIKI_REQUIRE_GPU").is_ok_and(|v| v == "1") {
                panic!("TRAJWIKI_REQUIRE_GPU=1 but CUDA is unusable: {e}");
            }
            eprintln!("skipping the CUDA BERT twin: {e}");
            None
        }
        Err(e) => panic!("loading the CUDA BERT model from {}: {e}", dir.display()),
    }
}

/// The lowest cosine between corresponding rows (both sets are unit vectors).
fn min_cosine(a: &Embeddings, b: &Embeddings) -> f32 {
    assert_eq!((a.len(), a.dim()), (b.len(), b.dim()));
    (0..a.len())
        .map(|i| {
            a.row(i)
                .iter()
                .zip(b.row(i))
                .map(|(x, y)| x * y)
                .sum::<f32>()
        })
        .fold(f32::INFINITY, f32::min)
}

/// CPU against CUDA on `dir` at several batch budgets and one text at a time.
fn check_twin(dir: &Path, dim: Option<usize>) -> bool {
    let texts = texts();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let cpu = BertEmbedder::load(dir, &opts(dim, None)).unwrap();
    let want = cpu.embed(&refs, EmbedKind::Document).unwrap();
    let lens: Vec<usize> = cpu.tokenize(&refs).unwrap().iter().map(Vec::len).collect();
    assert!(
        lens.iter().any(|&l| l > 64) && lens.contains(&2),
        "{lens:?}"
    );
    for budget in [None, Some(512), Some(64)] {
        let Some(gpu) = cuda(dir, &opts(dim, budget)) else {
            return false;
        };
        assert_eq!(gpu.model_id(), cpu.model_id());
        assert_eq!(gpu.dim(), cpu.dim());
        let got = gpu.embed(&refs, EmbedKind::Document).unwrap();
        let c = min_cosine(&want, &got);
        eprintln!("{}: budget {budget:?}: min cosine {c:.6}", dir.display());
        assert!(c >= 0.9999, "budget {budget:?}: min cosine {c}");
        // Batch invariance: each text alone gives its row of the batch, to f16 precision.
        for (i, t) in refs.iter().enumerate() {
            let alone = gpu.embed(&[t], EmbedKind::Document).unwrap();
            let c: f32 = alone
                .row(0)
                .iter()
                .zip(got.row(i))
                .map(|(x, y)| x * y)
                .sum();
            assert!(c >= 0.99999, "text {i} alone: cosine {c} to its batch row");
        }
    }
    true
}

fn folder(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("trajwiki-bert-twin-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn mean_pooled_head_size_32_matches_the_cpu() {
    let dir = folder("mean32");
    let shape = Shape {
        hidden: 64,
        heads: 2,
        layers: 2,
        intermediate: 256,
        cls: false,
        vocab: None,
    };
    write_model(&dir, &shape, 7);
    check_twin(&dir, None);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cls_pooled_head_size_64_truncated_matches_the_cpu() {
    let dir = folder("cls64");
    let shape = Shape {
        hidden: 128,
        heads: 2,
        layers: 3,
        intermediate: 512,
        cls: true,
        vocab: None,
    };
    write_model(&dir, &shape, 11);
    check_twin(&dir, Some(48));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_installed_minilm_matches_the_cpu() {
    let dir = std::env::var_os("TRAJWIKI_MINILM_DIR")
        .map(PathBuf::from)
        .or_else(|| trajwiki_embed::resolve_model("minilm").ok());
    match dir {
        Some(dir) if dir.join("config.json").is_file() => {
            check_twin(&dir, None);
        }
        _ => eprintln!("skipping the MiniLM twin: no model (trajwiki model fetch minilm)"),
    }
}

#[test]
fn head_sizes_the_kernels_cannot_take_are_refused_before_the_device() {
    // 60 / 4 heads = 15: not a multiple of 4.
    let dir = folder("odd");
    let shape = Shape {
        hidden: 60,
        heads: 4,
        layers: 1,
        intermediate: 64,
        cls: false,
        vocab: None,
    };
    write_model(&dir, &shape, 3);
    match CudaBertEmbedder::load(&dir, &opts(None, None), 0) {
        Err(EmbedError::InvalidModel { what, .. }) => {
            assert!(what.contains("head size 15"), "{what}")
        }
        other => panic!("expected InvalidModel, got {other:?}"),
    }
    // The CPU encoder takes it, so the folder itself is fine.
    BertEmbedder::load(&dir, &opts(None, None)).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
