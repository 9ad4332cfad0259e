//! BERT-family encoder benchmark on a lent GPU, run by `scripts/gpu-check.sh` (no criterion:
//! fixed iterations, median). The GPU machine has no network, so the model is made here: random
//! weights of all-MiniLM-L6-v2's shape (hidden 384, 6 layers, 12 heads of 32, intermediate
//! 1536, vocabulary 30 522, mean pooling) written as f32 safetensors with a WordPiece
//! `tokenizer.json` into `TRAJWIKI_BERT_BENCH_DIR` (default: a temporary folder, removed at the
//! end), and 20,000 token sequences with the lengths of LoCoMo-like turns (8 to 98 tokens, mean
//! about 38, `[CLS]` … `[SEP]`) in `tokens.json`. The pooled, normalised outputs go to
//! `rust_pooled.f32` (raw little-endian f32, 20,000 × 384), which `scripts/torch_bert.py`
//! compares with transformers on the same files, where it also times the sentence-transformers
//! computation.
//!
//! Prints `RESULT|minilm_texts_per_s|…`, `RESULT|minilm_tokens_per_s|…` (real tokens, host to
//! host, median of 5 passes over all texts) and `RESULT|minilm_one_text_ms|…` (one text of 38
//! tokens, median of 50). Run by `cargo test` (without `--bench`) it is two layers, 1,000 texts.
//! Without a GPU it says so and stops before writing anything (an error with
//! TRAJWIKI_REQUIRE_GPU=1, which gpu-check.sh sets), unless TRAJWIKI_BERT_BENCH_WRITE_ONLY=1,
//! which only writes the files (to check the generator and the PyTorch script's loading anywhere).

use std::path::{Path, PathBuf};
use std::time::Instant;

use trajwiki_cuda::CudaBertEmbedder;
use trajwiki_embed::{EmbedError, EmbedOptions};

#[path = "../tests/common/bert_model.rs"]
mod bert_model;
use bert_model::{write_model, Rng, Shape};

fn result(name: &str, value: f64, unit: &str) {
    println!("RESULT|{name}|{value:.4}|{unit}");
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// `n` sequences `[CLS] … [SEP]` of 8 to 98 tokens (8 + ⌊90·u²⌋: many short turns, a long tail).
fn sequences(n: usize, vocab: usize, rng: &mut Rng) -> Vec<Vec<u32>> {
    (0..n)
        .map(|_| {
            let u = (rng.uniform() + 1.0) / 2.0;
            let len = 8 + (90.0 * u * u) as usize;
            let mut v = vec![2u32];
            v.extend((0..len - 2).map(|_| {
                let r = (rng.uniform() + 1.0) / 2.0;
                4 + ((vocab - 5) as f32 * r) as u32
            }));
            v.push(3);
            v
        })
        .collect()
}

fn main() -> anyhow::Result<()> {
    let full = std::env::args().any(|a| a == "--bench");
    let require = std::env::var("TRAJWIKI_REQUIRE_GPU").is_ok_and(|v| v == "1");
    let write_only = std::env::var("TRAJWIKI_BERT_BENCH_WRITE_ONLY").is_ok_and(|v| v == "1");
    if let Err(e) = trajwiki_cuda::probe(0) {
        if require {
            anyhow::bail!("TRAJWIKI_REQUIRE_GPU=1 but CUDA is unusable: {e}");
        }
        if !write_only {
            println!("no GPU: {e}; nothing to benchmark");
            return Ok(());
        }
    }
    let (dir, temporary): (PathBuf, bool) = match std::env::var_os("TRAJWIKI_BERT_BENCH_DIR") {
        Some(d) => (d.into(), false),
        None => (
            std::env::temp_dir().join(format!("trajwiki-bert-bench-{}", std::process::id())),
            true,
        ),
    };
    let outcome = run(&dir, full, write_only, require);
    if temporary {
        let _ = std::fs::remove_dir_all(&dir);
    }
    outcome
}

fn run(dir: &Path, full: bool, write_only: bool, require: bool) -> anyhow::Result<()> {
    let shape = Shape {
        hidden: 384,
        heads: 12,
        layers: if full { 6 } else { 2 },
        intermediate: 1536,
        cls: false,
        vocab: Some(30_522),
    };
    let n = if full { 20_000 } else { 1_000 };
    let t = Instant::now();
    let vocab = write_model(dir, &shape, 42);
    let seqs = sequences(n, vocab, &mut Rng(7));
    std::fs::write(
        dir.join("tokens.json"),
        serde_json::to_vec(&serde_json::json!({ "ids": seqs }))?,
    )?;
    println!(
        "wrote a random MiniLM-shaped model ({} layers) and {n} sequences to {} in {:.1} s",
        shape.layers,
        dir.display(),
        t.elapsed().as_secs_f64()
    );
    if write_only {
        return Ok(());
    }
    let t = Instant::now();
    let model = match CudaBertEmbedder::load(dir, &EmbedOptions::default(), 0) {
        Ok(m) => m,
        Err(e @ EmbedError::DeviceUnavailable { .. }) => {
            if require {
                anyhow::bail!("TRAJWIKI_REQUIRE_GPU=1 but CUDA is unusable: {e}");
            }
            println!("no GPU: {e}; nothing to benchmark");
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    let info = model.info().clone();
    println!(
        "device: {} (sm_{}{}); model loaded in {:.1} s",
        info.name,
        info.compute_capability.0,
        info.compute_capability.1,
        t.elapsed().as_secs_f64()
    );
    let tokens: usize = seqs.iter().map(Vec::len).sum();
    let out = model.embed_tokens(&seqs)?;
    let times = (0..5)
        .map(|_| {
            let t = Instant::now();
            model.embed_tokens(&seqs).map(|_| t.elapsed().as_secs_f64())
        })
        .collect::<Result<Vec<_>, _>>()?;
    let med = median(times);
    result("minilm_texts_per_s", n as f64 / med, "texts/s");
    result("minilm_tokens_per_s", tokens as f64 / med, "tok/s");
    let one = vec![seqs
        .iter()
        .find(|s| s.len() == 38)
        .unwrap_or(&seqs[0])
        .clone()];
    let times = (0..50)
        .map(|_| {
            let t = Instant::now();
            model.embed_tokens(&one).map(|_| t.elapsed().as_secs_f64())
        })
        .collect::<Result<Vec<_>, _>>()?;
    result("minilm_one_text_ms", median(times) * 1e3, "ms");
    if out.as_slice().iter().any(|v| !v.is_finite()) {
        anyhow::bail!("non-finite values in the pooled output");
    }
    let bytes: Vec<u8> = out
        .as_slice()
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    std::fs::write(dir.join("rust_pooled.f32"), bytes)?;
    println!(
        "pooled output written to {}",
        dir.join("rust_pooled.f32").display()
    );
    Ok(())
}
