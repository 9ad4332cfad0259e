#![allow(missing_docs)]
//! Embedding throughput of MiniLM on LoCoMo-length texts: texts/s and tokens/s at batch 1, 32 and
//! 256, and one query in each precision. Reads turns from `../shared/data/locomo/locomo7.json` when present (else generated
//! sentences of similar length); skips without the model (`trajwiki model fetch minilm`).

use std::hint::black_box;
use std::path::Path;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use trajwiki::embed::{BertEmbedder, EmbedKind, EmbedOptions, Embedder, Precision};

/// Up to `n` LoCoMo turns as `speaker: text`, or deterministic sentences of similar length.
fn texts(n: usize) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/locomo/locomo7.json");
    let mut out = Vec::new();
    if let Ok(bytes) = std::fs::read(&path) {
        if let Ok(serde_json::Value::Array(convs)) = serde_json::from_slice(&bytes) {
            for conv in &convs {
                let Some(c) = conv.get("conversation").and_then(|c| c.as_object()) else {
                    continue;
                };
                let mut sessions: Vec<(usize, &serde_json::Value)> = c
                    .iter()
                    .filter_map(|(k, v)| {
                        let n = k.strip_prefix("session_")?.parse().ok()?;
                        Some((n, v))
                    })
                    .collect();
                sessions.sort_by_key(|s| s.0);
                for (_, turns) in sessions {
                    for t in turns.as_array().into_iter().flatten() {
                        if let (Some(s), Some(x)) = (t["speaker"].as_str(), t["text"].as_str()) {
                            out.push(format!("{s}: {x}"));
                        }
                    }
                }
            }
        }
    }
    if out.is_empty() {
        eprintln!("{} not found; using generated sentences", path.display());
        let words = [
            "yesterday",
            "I",
            "went",
            "to",
            "the",
            "lake",
            "with",
            "my",
            "kids",
            "and",
            "we",
            "painted",
            "a",
            "sunset",
            "together",
            "it",
            "was",
            "really",
            "fun",
            "support",
        ];
        for i in 0..n {
            let len = 12 + (i * 7) % 30;
            let s: Vec<&str> = (0..len)
                .map(|j| words[(i * 31 + j * 17) % words.len()])
                .collect();
            out.push(format!("Caroline: {}.", s.join(" ")));
        }
    }
    out.truncate(n);
    out
}

fn bench(c: &mut Criterion) {
    let dir =
        trajwiki::embed::resolve::models_dir(&trajwiki::embed::trajwiki_home()).join("minilm");
    if !dir.join("model.safetensors").is_file() {
        eprintln!(
            "SKIPPED: MiniLM not fetched ({}); run `trajwiki model fetch minilm`",
            dir.display()
        );
        return;
    }
    let threads = std::env::var("TRAJWIKI_BENCH_THREADS")
        .ok()
        .and_then(|s| s.parse().ok());
    let model = match BertEmbedder::load(
        &dir,
        &EmbedOptions {
            threads,
            ..Default::default()
        },
    ) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("SKIPPED: cannot load MiniLM: {e}");
            return;
        }
    };
    let all = texts(256);
    for (unit, per_token) in [("texts", false), ("tokens", true)] {
        let mut g = c.benchmark_group(format!("minilm_{unit}"));
        g.sample_size(10);
        for batch in [1usize, 32, 256] {
            let texts: Vec<&str> = all.iter().take(batch).map(String::as_str).collect();
            let n = if per_token {
                model
                    .tokenize(&texts)
                    .map_or(0, |t| t.iter().map(Vec::len).sum())
            } else {
                texts.len()
            };
            g.throughput(Throughput::Elements(n as u64));
            g.bench_with_input(BenchmarkId::from_parameter(batch), &texts, |b, t| {
                b.iter(|| black_box(model.embed(t, EmbedKind::Document)))
            });
        }
        g.finish();
    }
    // One query in each precision (`minilm_query/f32`, `/bf16`, `/int8`).
    let mut g = c.benchmark_group("minilm_query");
    g.sample_size(20);
    let query = ["When did Caroline go to the LGBTQ support group?"];
    for precision in Precision::ALL {
        let opts = EmbedOptions {
            threads,
            precision,
            ..Default::default()
        };
        let Ok(model) = BertEmbedder::load(&dir, &opts) else {
            continue;
        };
        g.bench_function(precision.name(), |b| {
            b.iter(|| black_box(model.embed(&query, EmbedKind::Query)))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
