//! Qwen3-Embedding forward benchmark on a lent GPU, run by `scripts/gpu-check.sh` (no criterion:
//! fixed iterations, median). The GPU machine has no network, so the model is made here: random
//! weights of Qwen3-Embedding-0.6B's shape (hidden 1024, 28 layers, 16 query / 8 key-value heads
//! of 128, intermediate 3072, vocabulary 151 669: 595 776 512 parameters, as published), drawn
//! from a seeded generator and written as bf16 safetensors with `config.json`, a minimal
//! `tokenizer.json` and the token ids of the batch (`tokens.json`: 64 sequences of 193 to 256
//! tokens, left-padded to 256) into `TRAJWIKI_QWEN3_BENCH_DIR` (default: a temporary folder).
//! The pooled, normalised outputs go to `rust_pooled.f32` (raw little-endian f32, 64 × 1024),
//! which `scripts/torch_qwen3.py` compares with transformers on the same files.
//!
//! Prints `RESULT|qwen3_tokens_per_s|…` (real, unpadded tokens per second of the whole batch,
//! host to host) and `RESULT|qwen3_batch_ms|…`. `TRAJWIKI_QWEN3_BENCH_LAYERS` and
//! `TRAJWIKI_QWEN3_BENCH_HIDDEN` shrink the model (run by `cargo test`, without `--bench`, it is
//! one layer of hidden 128). Without a GPU it says so and stops before writing anything (an error
//! with TRAJWIKI_REQUIRE_GPU=1, which gpu-check.sh sets), unless
//! TRAJWIKI_QWEN3_BENCH_WRITE_ONLY=1, which only writes the files (to check the generator and the
//! PyTorch script's loading anywhere). A folder it chose itself is removed at the end.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use half::bf16;
use safetensors::tensor::{Dtype, TensorView};
use trajwiki_compute::synthetic::Rng;
use trajwiki_cuda::CudaQwen3Embedder;
use trajwiki_embed::{EmbedError, EmbedOptions};

const BATCH: usize = 64;
const MAX_LEN: usize = 256;
const VOCAB: usize = 151_669;
const END_ID: u32 = 151_643;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn result(name: &str, value: f64, unit: &str) {
    println!("RESULT|{name}|{value:.4}|{unit}");
}

/// `n` bf16 values `center + scale · U(-1, 1)`, as little-endian bytes.
fn tensor(rng: &mut Rng, n: usize, center: f32, scale: f32) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * 2);
    for _ in 0..n {
        out.extend_from_slice(&bf16::from_f32(center + scale * rng.unit()).to_le_bytes());
    }
    out
}

struct Shape {
    hidden: usize,
    layers: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    inter: usize,
}

fn write_model(dir: &Path, s: &Shape) -> anyhow::Result<Vec<Vec<u32>>> {
    std::fs::create_dir_all(dir)?;
    let config = serde_json::json!({
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "attention_bias": false,
        "attention_dropout": 0.0,
        "head_dim": s.head_dim,
        "hidden_act": "silu",
        "hidden_size": s.hidden,
        "intermediate_size": s.inter,
        "max_position_embeddings": 32768,
        "num_attention_heads": s.heads,
        "num_hidden_layers": s.layers,
        "num_key_value_heads": s.kv_heads,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1_000_000.0,
        "rope_scaling": null,
        "sliding_window": null,
        "use_sliding_window": false,
        "tie_word_embeddings": true,
        "torch_dtype": "bfloat16",
        "vocab_size": VOCAB,
        "eos_token_id": END_ID,
        "pad_token_id": END_ID,
    });
    std::fs::write(dir.join("config.json"), serde_json::to_vec_pretty(&config)?)?;
    // Only `<|endoftext|>` matters: the benchmark feeds token ids.
    let tokenizer = serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
        "normalizer": null, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null,
        "decoder": null,
        "model": {"type": "WordLevel", "vocab": {"<unk>": 0, "<|endoftext|>": END_ID},
                  "unk_token": "<unk>"}
    });
    std::fs::write(dir.join("tokenizer.json"), serde_json::to_vec(&tokenizer)?)?;

    let mut rng = Rng::new(0x5157_454e_3345_4d42);
    let (h, d) = (s.hidden, s.head_dim);
    let w = 1.0 / (h as f32).sqrt();
    let mut tensors: Vec<(String, Vec<usize>, Vec<u8>)> = vec![(
        "embed_tokens.weight".into(),
        vec![VOCAB, h],
        tensor(&mut rng, VOCAB * h, 0.0, 0.05),
    )];
    for i in 0..s.layers {
        let p = format!("layers.{i}");
        let mut add = |name: &str, shape: Vec<usize>, center: f32, scale: f32| {
            let n = shape.iter().product();
            tensors.push((
                format!("{p}.{name}"),
                shape,
                tensor(&mut rng, n, center, scale),
            ));
        };
        add("input_layernorm.weight", vec![h], 1.0, 0.1);
        add("self_attn.q_proj.weight", vec![s.heads * d, h], 0.0, w);
        add("self_attn.k_proj.weight", vec![s.kv_heads * d, h], 0.0, w);
        add("self_attn.v_proj.weight", vec![s.kv_heads * d, h], 0.0, w);
        add("self_attn.q_norm.weight", vec![d], 1.0, 0.1);
        add("self_attn.k_norm.weight", vec![d], 1.0, 0.1);
        add(
            "self_attn.o_proj.weight",
            vec![h, s.heads * d],
            0.0,
            w * 0.5,
        );
        add("post_attention_layernorm.weight", vec![h], 1.0, 0.1);
        add("mlp.gate_proj.weight", vec![s.inter, h], 0.0, w);
        add("mlp.up_proj.weight", vec![s.inter, h], 0.0, w);
        add(
            "mlp.down_proj.weight",
            vec![h, s.inter],
            0.0,
            0.5 / (s.inter as f32).sqrt(),
        );
    }
    tensors.push(("norm.weight".into(), vec![h], tensor(&mut rng, h, 1.0, 0.1)));
    let views = tensors
        .iter()
        .map(|(n, shape, bytes)| {
            Ok((
                n.clone(),
                TensorView::new(Dtype::BF16, shape.clone(), bytes)?,
            ))
        })
        .collect::<Result<Vec<_>, safetensors::SafeTensorError>>()?;
    // transformers refuses safetensors files without a known `format` in the metadata.
    let st_meta: HashMap<String, String> = [("format".to_string(), "pt".to_string())].into();
    safetensors::serialize_to_file(views, Some(st_meta), &dir.join("model.safetensors"))?;

    // Lengths 193..=256, every sequence ending with <|endoftext|>.
    let seqs: Vec<Vec<u32>> = (0..BATCH)
        .map(|i| {
            let len = MAX_LEN - (i * 37) % 64;
            let mut v: Vec<u32> = (0..len - 1)
                .map(|_| rng.below(END_ID as u64) as u32)
                .collect();
            v.push(END_ID);
            v
        })
        .collect();
    let meta = serde_json::json!({ "ids": seqs, "pad_id": END_ID, "max_len": MAX_LEN });
    std::fs::write(dir.join("tokens.json"), serde_json::to_vec(&meta)?)?;
    Ok(seqs)
}

fn main() -> anyhow::Result<()> {
    // `cargo bench` passes `--bench`; `cargo test` runs this without it: then the model is tiny.
    let full = std::env::args().any(|a| a == "--bench");
    let require = std::env::var("TRAJWIKI_REQUIRE_GPU").is_ok_and(|v| v == "1");
    let write_only = std::env::var("TRAJWIKI_QWEN3_BENCH_WRITE_ONLY").is_ok_and(|v| v == "1");
    if let Err(e) = trajwiki_cuda::probe(0) {
        if require {
            anyhow::bail!("TRAJWIKI_REQUIRE_GPU=1 but CUDA is unusable: {e}");
        }
        if !write_only {
            println!("no GPU: {e}; nothing to benchmark");
            return Ok(());
        }
    }
    let hidden = env_usize("TRAJWIKI_QWEN3_BENCH_HIDDEN", if full { 1024 } else { 128 });
    let shape = Shape {
        hidden,
        layers: env_usize("TRAJWIKI_QWEN3_BENCH_LAYERS", if full { 28 } else { 1 }),
        heads: 16,
        kv_heads: 8,
        head_dim: 128,
        inter: hidden * 3,
    };
    let (dir, temporary): (PathBuf, bool) = match std::env::var_os("TRAJWIKI_QWEN3_BENCH_DIR") {
        Some(d) => (d.into(), false),
        None => (
            std::env::temp_dir().join(format!("trajwiki-qwen3-bench-{}", std::process::id())),
            true,
        ),
    };
    let outcome = run(&dir, &shape, write_only, require);
    if temporary {
        let _ = std::fs::remove_dir_all(&dir);
    }
    outcome
}

fn run(dir: &Path, shape: &Shape, write_only: bool, require: bool) -> anyhow::Result<()> {
    let t = Instant::now();
    let seqs = write_model(dir, shape)?;
    println!(
        "wrote random Qwen3 weights ({} layers, hidden {}) and {BATCH} sequences to {} in {:.1} s",
        shape.layers,
        shape.hidden,
        dir.display(),
        t.elapsed().as_secs_f64()
    );
    if write_only {
        return Ok(());
    }
    let opts = EmbedOptions {
        max_batch: Some(BATCH),
        max_batch_tokens: Some(BATCH * MAX_LEN),
        max_len: Some(MAX_LEN),
        ..Default::default()
    };
    let t = Instant::now();
    let model = match CudaQwen3Embedder::load(dir, &opts, 0) {
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
    let mut out = model.embed_tokens(&seqs)?;
    for _ in 0..2 {
        out = model.embed_tokens(&seqs)?;
    }
    let mut times: Vec<f64> = (0..7)
        .map(|_| {
            let t = Instant::now();
            model.embed_tokens(&seqs).map(|_| t.elapsed().as_secs_f64())
        })
        .collect::<Result<_, _>>()?;
    times.sort_by(|a, b| a.total_cmp(b));
    let med = times[times.len() / 2];
    result("qwen3_batch_ms", med * 1e3, "ms");
    result("qwen3_tokens_per_s", tokens as f64 / med, "tok/s");
    if out.as_slice().iter().any(|v| !v.is_finite()) {
        anyhow::bail!("non-finite values in the pooled output");
    }
    let bytes: Vec<u8> = out
        .as_slice()
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    std::fs::write(dir.join("rust_pooled.f32"), bytes)?;
    let shape_info: HashMap<&str, usize> = [("rows", out.len()), ("dim", out.dim())].into();
    std::fs::write(
        dir.join("rust_pooled.json"),
        serde_json::to_vec(&shape_info)?,
    )?;
    println!(
        "pooled output written to {}",
        dir.join("rust_pooled.f32").display()
    );
    Ok(())
}
