//! Qwen3 embedding forward against transformers on a tiny random model
//! (`tests/fixtures/qwen3_tiny`, made by `scripts/make_qwen3_fixture.py`): left-padded mixed-length
//! batches, the query instruction, MRL truncation, and sharded weights with a `model.` prefix.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use trajwiki_embed::{
    CpuKernel, EmbedKind, EmbedOptions, Embedder, Embeddings, Precision, Qwen3Embedder,
};

#[derive(serde::Deserialize)]
struct Reference {
    task: String,
    mrl_dim: usize,
    documents: Vec<String>,
    queries: Vec<String>,
    documents_embeddings: Vec<Vec<f32>>,
    queries_embeddings: Vec<Vec<f32>>,
    queries_embeddings_mrl: Vec<Vec<f32>>,
    documents_embeddings_mrl: Vec<Vec<f32>>,
}

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/qwen3_tiny")
}

fn reference() -> Reference {
    serde_json::from_slice(&std::fs::read(fixture().join("reference.json")).unwrap()).unwrap()
}

fn load(dir: &Path, r: &Reference, dim: Option<usize>, threads: usize) -> Qwen3Embedder {
    let opts = EmbedOptions {
        threads: Some(threads),
        dim,
        task: Some(r.task.clone()),
        ..Default::default()
    };
    Qwen3Embedder::load(dir, &opts).unwrap()
}

fn max_abs_diff(got: &Embeddings, want: &[Vec<f32>]) -> f32 {
    assert_eq!(got.len(), want.len());
    let mut worst = 0.0f32;
    for (g, w) in got.rows().zip(want) {
        assert_eq!(g.len(), w.len());
        for (a, b) in g.iter().zip(w) {
            worst = worst.max((a - b).abs());
        }
    }
    worst
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn check_all(dir: &Path, label: &str) {
    let r = reference();
    let m = load(dir, &r, None, 2);
    assert_eq!(m.dim(), 64);
    let docs = m.embed(&strs(&r.documents), EmbedKind::Document).unwrap();
    let queries = m.embed(&strs(&r.queries), EmbedKind::Query).unwrap();
    let d_doc = max_abs_diff(&docs, &r.documents_embeddings);
    let d_query = max_abs_diff(&queries, &r.queries_embeddings);

    let mrl = load(dir, &r, Some(r.mrl_dim), 1);
    assert_eq!(mrl.dim(), r.mrl_dim);
    assert_ne!(mrl.model_id(), m.model_id());
    let q_mrl = mrl.embed(&strs(&r.queries), EmbedKind::Query).unwrap();
    let d_mrl = mrl.embed(&strs(&r.documents), EmbedKind::Document).unwrap();
    let d_qm = max_abs_diff(&q_mrl, &r.queries_embeddings_mrl);
    let d_dm = max_abs_diff(&d_mrl, &r.documents_embeddings_mrl);
    eprintln!(
        "qwen3 parity ({label}): max abs diff documents {d_doc:.2e}, queries {d_query:.2e}, \
         MRL queries {d_qm:.2e}, MRL documents {d_dm:.2e}"
    );
    for d in [d_doc, d_query, d_qm, d_dm] {
        assert!(d <= 1e-4, "{label}: max abs diff {d}");
    }
}

#[test]
fn qwen3_matches_transformers() {
    check_all(&fixture(), "single file");
}

#[test]
fn qwen3_batch_equals_single_and_queries_differ_from_documents() {
    let r = reference();
    let m = load(&fixture(), &r, None, 2);
    let texts = strs(&r.documents);
    let batch = m.embed(&texts, EmbedKind::Document).unwrap();
    for (i, t) in texts.iter().enumerate() {
        let one = m.embed(&[t], EmbedKind::Document).unwrap();
        let d = max_abs_diff(&one, &[batch.row(i).to_vec()]);
        assert!(d <= 1e-5, "text {i}: {d}");
    }
    let as_query = m.embed(&texts[1..2], EmbedKind::Query).unwrap();
    assert!(max_abs_diff(&as_query, &[batch.row(1).to_vec()]) > 1e-3);
    assert_eq!(
        m.format_input("x", EmbedKind::Query),
        format!("Instruct: {}\nQuery:x", r.task)
    );
}

/// Rewrites the fixture as two shards with the `model.` prefix and an index.
#[test]
fn qwen3_sharded_with_prefix() {
    let src = fixture();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    for f in ["config.json", "tokenizer.json"] {
        std::fs::copy(src.join(f), dir.join(f)).unwrap();
    }
    let tensors =
        candle_core::safetensors::load(src.join("model.safetensors"), &candle_core::Device::Cpu)
            .unwrap();
    let mut names: Vec<&String> = tensors.keys().collect();
    names.sort();
    let mut shards: [HashMap<String, candle_core::Tensor>; 2] = Default::default();
    let mut weight_map = serde_json::Map::new();
    for (i, name) in names.iter().enumerate() {
        let file = format!("model-0000{}-of-00002.safetensors", i % 2 + 1);
        shards[i % 2].insert(format!("model.{name}"), tensors[*name].clone());
        weight_map.insert(format!("model.{name}"), file.into());
    }
    for (i, s) in shards.iter().enumerate() {
        candle_core::safetensors::save(
            s,
            dir.join(format!("model-0000{}-of-00002.safetensors", i + 1)),
        )
        .unwrap();
    }
    let index = serde_json::json!({ "metadata": {}, "weight_map": weight_map });
    std::fs::write(
        dir.join("model.safetensors.index.json"),
        serde_json::to_vec(&index).unwrap(),
    )
    .unwrap();
    check_all(dir, "sharded, model. prefix");
}

#[test]
fn qwen3_rejects_a_bad_dimension() {
    let r = reference();
    let opts = EmbedOptions {
        dim: Some(65),
        ..Default::default()
    };
    let err = Qwen3Embedder::load(&fixture(), &opts).unwrap_err();
    assert!(err.to_string().contains("65"), "{err}");
    let _ = r;
}

/// The kernels this CPU runs; the others are said skipped.
fn kernels() -> Vec<CpuKernel> {
    let all = [CpuKernel::Avx512, CpuKernel::Avx2, CpuKernel::Scalar];
    let (run, skip): (Vec<_>, Vec<_>) = all.into_iter().partition(|k| k.available());
    for k in skip {
        eprintln!("SKIPPED: this CPU cannot run the {} kernels", k.name());
    }
    run
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum();
    let na: f64 = a.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    dot / (na * nb)
}

#[test]
fn qwen3_every_kernel_and_precision_against_transformers() {
    let r = reference();
    for kernel in kernels() {
        for precision in Precision::ALL {
            let opts = EmbedOptions {
                threads: Some(2),
                task: Some(r.task.clone()),
                precision,
                kernel: Some(kernel),
                ..Default::default()
            };
            let m = Qwen3Embedder::load(&fixture(), &opts).unwrap();
            let label = format!("{} {}", kernel.name(), precision.name());
            assert_eq!(
                m.model_id().ends_with("-bf16") || m.model_id().ends_with("-int8"),
                precision != Precision::F32,
                "{label}: {}",
                m.model_id()
            );
            let docs = m.embed(&strs(&r.documents), EmbedKind::Document).unwrap();
            let queries = m.embed(&strs(&r.queries), EmbedKind::Query).unwrap();
            let worst = docs
                .rows()
                .zip(&r.documents_embeddings)
                .chain(queries.rows().zip(&r.queries_embeddings))
                .map(|(g, w)| cosine(g, w))
                .fold(1.0f64, f64::min);
            let (d_doc, d_query) = (
                max_abs_diff(&docs, &r.documents_embeddings),
                max_abs_diff(&queries, &r.queries_embeddings),
            );
            eprintln!(
                "qwen3 {label}: min cosine {worst:.7}, max abs diff {d_doc:.1e} / {d_query:.1e}"
            );
            match precision {
                Precision::F32 => assert!(d_doc <= 1e-4 && d_query <= 1e-4, "{label}"),
                Precision::Bf16 => assert!(worst >= 0.999, "{label}: cosine {worst}"),
                Precision::Int8 => assert!(worst >= 0.995, "{label}: cosine {worst}"),
            }
        }
    }
}
