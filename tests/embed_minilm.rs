//! all-MiniLM-L6-v2 against sentence-transformers (`tests/fixtures/minilm_reference.json`, made by
//! `scripts/make_minilm_fixture.py`). Skipped when the model is not fetched.

mod common;

use trajwiki::embed::{BertEmbedder, EmbedKind, EmbedOptions, Embedder, Pooling};

#[derive(serde::Deserialize)]
struct Reference {
    sentences: Vec<String>,
    token_counts: Vec<usize>,
    embeddings: Vec<Vec<f32>>,
}

fn reference() -> Reference {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/minilm_reference.json"
    );
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn load(threads: usize) -> Option<BertEmbedder> {
    let dir = common::minilm_dir()?;
    let opts = EmbedOptions {
        threads: Some(threads),
        ..Default::default()
    };
    Some(BertEmbedder::load(&dir, &opts).unwrap())
}

#[test]
fn minilm_matches_sentence_transformers() {
    let Some(model) = load(2) else { return };
    let r = reference();
    assert_eq!(model.pooling(), Pooling::Mean);
    assert_eq!(model.dim(), 384);
    let texts: Vec<&str> = r.sentences.iter().map(String::as_str).collect();
    let lens: Vec<usize> = model
        .tokenize(&texts)
        .unwrap()
        .iter()
        .map(Vec::len)
        .collect();
    assert_eq!(lens, r.token_counts, "token counts (truncation at 256)");
    let got = model.embed(&texts, EmbedKind::Document).unwrap();
    let mut worst = 1.0f64;
    for (i, want) in r.embeddings.iter().enumerate() {
        let c = common::cosine(got.row(i), want);
        worst = worst.min(c);
        assert!(c >= 0.9999, "sentence {i} {:?}: cosine {c}", r.sentences[i]);
        let norm: f32 = got.row(i).iter().map(|v| v * v).sum();
        assert!((norm - 1.0).abs() < 1e-5);
    }
    eprintln!(
        "MiniLM parity: min cosine {worst:.7} over {} sentences",
        texts.len()
    );
}

#[test]
fn minilm_batch_equals_single() {
    let Some(model) = load(2) else { return };
    let r = reference();
    let texts: Vec<&str> = r.sentences.iter().map(String::as_str).collect();
    let batch = model.embed(&texts, EmbedKind::Query).unwrap();
    let mut worst = 0.0f32;
    for (i, t) in texts.iter().enumerate() {
        let single = model.embed(&[t], EmbedKind::Query).unwrap();
        for (a, b) in single.row(0).iter().zip(batch.row(i)) {
            worst = worst.max((a - b).abs());
        }
    }
    assert!(worst <= 1e-5, "batch vs single max abs diff {worst}");
    // One thread gives the same vectors.
    let one = load(1).unwrap().embed(&texts, EmbedKind::Query).unwrap();
    for (a, b) in one.as_slice().iter().zip(batch.as_slice()) {
        assert!((a - b).abs() <= 1e-5);
    }
}

#[test]
fn minilm_model_id_is_stable_and_dim_specific() {
    let Some(dir) = common::minilm_dir() else {
        return;
    };
    let a = BertEmbedder::load(&dir, &EmbedOptions::default()).unwrap();
    let b = BertEmbedder::load(&dir, &EmbedOptions::default()).unwrap();
    let c = BertEmbedder::load(
        &dir,
        &EmbedOptions {
            dim: Some(128),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(a.model_id(), b.model_id());
    assert_ne!(a.model_id(), c.model_id());
    assert_eq!(c.embed(&["hi"], EmbedKind::Document).unwrap().dim(), 128);
    assert!(a.embed(&[], EmbedKind::Document).unwrap().is_empty());
}

/// Every kernel this CPU runs, in every precision, against sentence-transformers (f32): f32 to
/// parity, bf16 to cosine 0.999 and int8 to 0.995 on every sentence. Kernels the CPU lacks are
/// said skipped.
#[test]
fn minilm_every_kernel_and_precision_against_sentence_transformers() {
    use trajwiki::embed::{CpuKernel, Precision};
    let Some(dir) = common::minilm_dir() else {
        return;
    };
    let r = reference();
    let texts: Vec<&str> = r.sentences.iter().map(String::as_str).collect();
    let mut ids = std::collections::HashSet::new();
    for kernel in [CpuKernel::Avx512, CpuKernel::Avx2, CpuKernel::Scalar] {
        if !kernel.available() {
            eprintln!("SKIPPED: this CPU cannot run the {} kernels", kernel.name());
            continue;
        }
        for precision in Precision::ALL {
            let opts = EmbedOptions {
                threads: Some(2),
                precision,
                kernel: Some(kernel),
                ..Default::default()
            };
            let model = BertEmbedder::load(&dir, &opts).unwrap();
            ids.insert((precision, model.model_id().to_owned()));
            let got = model.embed(&texts, EmbedKind::Document).unwrap();
            let worst = r
                .embeddings
                .iter()
                .enumerate()
                .map(|(i, want)| common::cosine(got.row(i), want))
                .fold(1.0f64, f64::min);
            let label = format!("{} {}", kernel.name(), precision.name());
            eprintln!(
                "MiniLM {label} ({}): min cosine {worst:.7}",
                model.kernel().unwrap_or_default()
            );
            let floor = match precision {
                Precision::F32 => 0.999_999,
                Precision::Bf16 => 0.999,
                Precision::Int8 => 0.995,
            };
            assert!(worst >= floor, "{label}: min cosine {worst} < {floor}");
        }
    }
    // One model id per precision, whatever the kernel; f32 keeps the id it always had.
    let per_precision: std::collections::HashSet<_> = ids.iter().map(|(p, _)| *p).collect();
    assert_eq!(ids.len(), per_precision.len(), "{ids:?}");
    assert_eq!(per_precision.len(), 3);
}

/// On the AVX-512 kernels a text's vector does not depend on what it is batched with, nor on the
/// thread count: every row is computed by the same sequence of operations whatever the tile it
/// falls in, so the vectors are equal to the bit, in every precision (a memory fed message by
/// message caches the same vectors as one built in a batch).
#[test]
fn minilm_avx512_vectors_do_not_depend_on_the_batch() {
    use trajwiki::embed::{CpuKernel, Precision};
    let Some(dir) = common::minilm_dir() else {
        return;
    };
    if !CpuKernel::Avx512.available() {
        eprintln!("SKIPPED: this CPU cannot run the avx512 kernels");
        return;
    }
    let r = reference();
    let texts: Vec<&str> = r.sentences.iter().map(String::as_str).collect();
    for precision in Precision::ALL {
        let load = |threads| {
            let opts = EmbedOptions {
                threads: Some(threads),
                precision,
                kernel: Some(CpuKernel::Avx512),
                ..Default::default()
            };
            BertEmbedder::load(&dir, &opts).unwrap()
        };
        let (two, one) = (load(2), load(1));
        let batch = two.embed(&texts, EmbedKind::Document).unwrap();
        for (i, t) in texts.iter().enumerate() {
            let single = one.embed(&[t], EmbedKind::Document).unwrap();
            assert_eq!(
                single.row(0),
                batch.row(i),
                "{precision:?}: sentence {i} alone"
            );
        }
        for chunk in texts.chunks(4).zip((0..).step_by(4)) {
            let part = two.embed(chunk.0, EmbedKind::Document).unwrap();
            for (j, row) in part.rows().enumerate() {
                assert_eq!(
                    row,
                    batch.row(chunk.1 + j),
                    "{precision:?}: in a batch of 4"
                );
            }
        }
    }
}
