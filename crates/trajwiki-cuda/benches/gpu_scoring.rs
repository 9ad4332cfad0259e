//! GPU scoring benchmark, run by `scripts/gpu-check.sh` on a lent GPU (no criterion: the device
//! time is short, so it runs fixed iterations and reports medians). Fused cosine top-k over
//! N × d fp16 (default 1M × 1024, `TRAJWIKI_BENCH_N`, `TRAJWIKI_BENCH_D`) at query batch 1 and 64,
//! against the measured device copy bandwidth (the memory floor); coverage selection 64 × 500
//! against the CPU. Every number is printed as `RESULT|name|value|unit`; the clock stops after
//! the results are back on the host (the call synchronises).

use std::time::Instant;

use half::f16;
use trajwiki_compute::{CpuScoring, MatrixView, ScoringBackend};
use trajwiki_cuda::CudaScoring;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn result(name: &str, value: f64, unit: &str) {
    println!("RESULT|{name}|{value:.4}|{unit}");
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v[v.len() / 2]
}

fn main() -> anyhow::Result<()> {
    // `cargo bench` passes `--bench`; nothing else is parsed.
    let gpu = match CudaScoring::new(0) {
        Ok(g) => g,
        Err(e) => {
            println!("no GPU: {e}; nothing to benchmark");
            return Ok(());
        }
    };
    let info = gpu.info().clone();
    println!(
        "device: {} (sm_{}{}, {} SMs)",
        info.name, info.compute_capability.0, info.compute_capability.1, info.multiprocessors
    );
    let n = env_usize("TRAJWIKI_BENCH_N", 1_000_000);
    let d = env_usize("TRAJWIKI_BENCH_D", 1024);
    let k = env_usize("TRAJWIKI_BENCH_K", 10);

    let bw = gpu.copy_bandwidth(1 << 30, 20)?;
    result("copy_bandwidth", bw / 1e9, "GB/s");

    let t = Instant::now();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let host: Vec<f16> = (0..n * d)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            f16::from_f32(((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.0625)
        })
        .collect();
    let queries: Vec<f32> = (0..64 * d)
        .map(|i| ((i * 7919 % 1013) as f32 / 1013.0 - 0.5) * 0.0625)
        .collect();
    println!(
        "generated {n} x {d} fp16 in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let view = MatrixView::f16(&host, d)?;
    let dm = gpu.upload(&view)?;
    let bytes = (n * d * 2) as f64;

    for b in [1usize, 64] {
        let q = &queries[..b * d];
        for _ in 0..3 {
            gpu.cosine_topk_resident(&dm, q, k)?;
        }
        let iters = if b == 1 { 30 } else { 10 };
        let mut times = Vec::with_capacity(iters);
        for _ in 0..iters {
            let t = Instant::now();
            std::hint::black_box(gpu.cosine_topk_resident(&dm, q, k)?);
            times.push(t.elapsed().as_secs_f64());
        }
        let s = median(times);
        result(&format!("topk_b{b}_ms"), s * 1e3, "ms");
        result(&format!("topk_b{b}_qps"), b as f64 / s, "queries/s");
        result(&format!("topk_b{b}_matrix_GBps"), bytes / s / 1e9, "GB/s");
        // The floor: one read of the matrix at the copy bandwidth's read half.
        result(
            &format!("topk_b{b}_vs_floor"),
            (bytes / (bw / 2.0)) / s,
            "fraction",
        );
    }

    // Agreement with the CPU at full size, batch 1.
    let t = Instant::now();
    let cpu = CpuScoring.cosine_topk(&view, &queries[..d], k)?;
    let cpu_s = t.elapsed().as_secs_f64();
    result("topk_b1_cpu_ms", cpu_s * 1e3, "ms");
    let g = gpu.cosine_topk_resident(&dm, &queries[..d], k)?;
    let max_dev = g[0]
        .iter()
        .zip(&cpu[0])
        .map(|(a, b)| (a.1 - b.1).abs())
        .fold(0f32, f32::max);
    let same_ids = g[0].iter().zip(&cpu[0]).filter(|(a, b)| a.0 == b.0).count();
    result("topk_b1_max_score_dev", max_dev as f64, "abs");
    result("topk_b1_same_ids", same_ids as f64, &format!("of {k}"));
    Ok(())
}
