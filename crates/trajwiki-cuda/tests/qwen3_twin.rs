//! The CUDA Qwen3-Embedding model against its CPU twin ([`trajwiki_embed::Qwen3Embedder`], itself
//! checked against transformers) on the tiny random fixture of trajwiki-embed
//! (`scripts/make_qwen3_fixture.py`): documents and queries of varied lengths (so batches are
//! left-padded), several batch budgets (so texts are grouped and split differently), and MRL
//! truncation. The GPU runs bf16 weights and activations with f32 accumulation, so rows must
//! agree to bf16 precision: cosine ≥ 0.999 and max |Δ| ≤ 0.02 per unit vector.
//!
//! The fixture is found through `TRAJWIKI_QWEN3_FIXTURE` (gpu-check.sh sets it to the copy in
//! gpu-bin/), else in the source tree. Without a GPU (or without the `cuda` feature) the CUDA runs
//! skip with a message, unless TRAJWIKI_REQUIRE_GPU=1.

use std::path::PathBuf;

use trajwiki_cuda::CudaQwen3Embedder;
use trajwiki_embed::{EmbedError, EmbedKind, EmbedOptions, Embedder, Embeddings, Qwen3Embedder};

fn fixture() -> PathBuf {
    if let Some(p) = std::env::var_os("TRAJWIKI_QWEN3_FIXTURE") {
        return p.into();
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../trajwiki-embed/tests/fixtures/qwen3_tiny")
}

#[derive(serde::Deserialize)]
struct Reference {
    task: String,
    mrl_dim: usize,
    documents: Vec<String>,
    queries: Vec<String>,
    /// transformers' (f32) embeddings of `documents`.
    documents_embeddings: Vec<Vec<f32>>,
}

fn reference() -> Reference {
    let path = fixture().join("reference.json");
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap()
}

/// The fixture's texts plus longer ones (up to a few hundred tokens), so that lengths vary
/// widely within a batch.
fn texts(r: &Reference) -> Vec<String> {
    let mut t = r.documents.clone();
    for (i, d) in r.documents.iter().enumerate() {
        t.push(
            std::iter::repeat_n(d.as_str(), 3 + 7 * i)
                .collect::<Vec<_>>()
                .join(" "),
        );
    }
    t.push("x".into());
    t
}

fn opts(r: &Reference, dim: Option<usize>, max_batch_tokens: Option<usize>) -> EmbedOptions {
    EmbedOptions {
        threads: Some(2),
        dim,
        task: Some(r.task.clone()),
        max_batch_tokens,
        ..Default::default()
    }
}

/// Loads the CUDA model, or says why the test skips (a panic when a GPU is required).
fn cuda(o: &EmbedOptions) -> Option<CudaQwen3Embedder> {
    match CudaQwen3Embedder::load(&fixture(), o, 0) {
        Ok(m) => Some(m),
        Err(e @ EmbedError::DeviceUnavailable { .. }) => {
            if std::env::var("TRAJWIKI_REQUIRE_GPU").is_ok_and(|v| v == "1") {
                panic!("TRAJWIKI_REQUIRE_GPU=1 but CUDA is unusable: {e}");
            }
            eprintln!("skipping the CUDA Qwen3 twin: {e}");
            None
        }
        Err(e) => panic!("loading the CUDA Qwen3 model: {e}"),
    }
}

/// (min cosine, max |Δ|) over rows.
fn compare(cpu: &Embeddings, gpu: &Embeddings) -> (f32, f32) {
    assert_eq!(cpu.len(), gpu.len());
    assert_eq!(cpu.dim(), gpu.dim());
    let (mut min_cos, mut max_abs) = (f32::INFINITY, 0.0f32);
    for (a, b) in cpu.rows().zip(gpu.rows()) {
        let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        let na = a.iter().map(|x| x * x).sum::<f32>().sqrt();
        let nb = b.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((nb - 1.0).abs() < 1e-3, "GPU row not unit length: {nb}");
        min_cos = min_cos.min(dot / (na * nb));
        for (x, y) in a.iter().zip(b) {
            assert!(y.is_finite(), "non-finite GPU output");
            max_abs = max_abs.max((x - y).abs());
        }
    }
    (min_cos, max_abs)
}

fn check(label: &str, cpu: &Embeddings, gpu: &Embeddings) {
    let (cos, abs) = compare(cpu, gpu);
    eprintln!("qwen3 twin ({label}): min cosine {cos:.6}, max abs diff {abs:.2e}");
    println!("RESULT|qwen3_twin_{label}_min_cos|{cos:.6}|cosine");
    assert!(cos >= 0.999, "{label}: min cosine {cos}");
    assert!(abs <= 0.02, "{label}: max abs diff {abs}");
}

#[test]
fn cuda_qwen3_matches_the_cpu_model() {
    let r = reference();
    let t = texts(&r);
    let refs: Vec<&str> = t.iter().map(String::as_str).collect();
    let queries: Vec<&str> = r.queries.iter().map(String::as_str).collect();
    let cpu = Qwen3Embedder::load(&fixture(), &opts(&r, None, None)).unwrap();
    // One budget that takes everything at once, one that forces many small padded batches.
    for budget in [None, Some(300)] {
        let Some(gpu) = cuda(&opts(&r, None, budget)) else {
            return;
        };
        assert_eq!(gpu.model_id(), cpu.model_id());
        assert_eq!(gpu.dim(), cpu.dim());
        let label = if budget.is_some() {
            "small_batches"
        } else {
            "one_batch"
        };
        check(
            &format!("documents_{label}"),
            &cpu.embed(&refs, EmbedKind::Document).unwrap(),
            &gpu.embed(&refs, EmbedKind::Document).unwrap(),
        );
        check(
            &format!("queries_{label}"),
            &cpu.embed(&queries, EmbedKind::Query).unwrap(),
            &gpu.embed(&queries, EmbedKind::Query).unwrap(),
        );
        // And against transformers itself (the reference the CPU model is tested on).
        let docs: Vec<&str> = r.documents.iter().map(String::as_str).collect();
        let want: Vec<f32> = r.documents_embeddings.iter().flatten().copied().collect();
        check(
            &format!("transformers_{label}"),
            &Embeddings::new(cpu.dim(), want).unwrap(),
            &gpu.embed(&docs, EmbedKind::Document).unwrap(),
        );
    }
}

#[test]
fn cuda_qwen3_mrl_and_batch_invariance() {
    let r = reference();
    let t = texts(&r);
    let refs: Vec<&str> = t.iter().map(String::as_str).collect();
    let o = opts(&r, Some(r.mrl_dim), None);
    let Some(gpu) = cuda(&o) else {
        return;
    };
    let cpu = Qwen3Embedder::load(&fixture(), &o).unwrap();
    assert_eq!(gpu.dim(), r.mrl_dim);
    let batch = gpu.embed(&refs, EmbedKind::Document).unwrap();
    check(
        "mrl",
        &cpu.embed(&refs, EmbedKind::Document).unwrap(),
        &batch,
    );
    // A text alone (no padding) and inside a padded batch: the same vector up to rounding.
    for (i, text) in refs.iter().enumerate() {
        let one = gpu.embed(&[text], EmbedKind::Document).unwrap();
        let (cos, _) = compare(
            &one,
            &Embeddings::new(r.mrl_dim, batch.row(i).to_vec()).unwrap(),
        );
        assert!(cos >= 0.9999, "text {i}: alone vs batched cosine {cos}");
    }
    assert_eq!(gpu.embed(&[], EmbedKind::Document).unwrap().len(), 0);
    let err = gpu.embed_tokens(&[vec![1, 2], vec![]]).unwrap_err();
    assert!(err.to_string().contains("checking token ids"), "{err}");
}

#[test]
fn without_cuda_loading_is_a_device_error_not_a_panic() {
    if trajwiki_cuda::BUILT_WITH_CUDA {
        return;
    }
    let r = reference();
    let err = CudaQwen3Embedder::load(&fixture(), &opts(&r, None, None), 0).unwrap_err();
    assert!(matches!(err, EmbedError::DeviceUnavailable { .. }), "{err}");
    assert!(err.to_string().contains("--features cuda"), "{err}");
}
