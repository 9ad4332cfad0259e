//! Scoring benchmarks on the CPU backend: exact cosine top-k over N = 100k × d = 384 (f32 and
//! f16) at query batch 1 and 64, and greedy coverage selection for 64 queries × 500 candidates.
//! Fixtures are deterministic (a fixed-seed xorshift), so runs compare.
//!
//! Run with `cargo bench --bench scoring`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use half::f16;
use std::hint::black_box;
use trajwiki::compute::synthetic::{unit_rows, Rng};
use trajwiki::compute::{
    Candidate, CoverageWeights, CpuScoring, MatrixView, QueryWants, ScoringBackend, SelectionBatch,
    SetWords,
};

fn bench_topk(c: &mut Criterion) {
    let (n, d, k) = (100_000, 384, 10);
    let mut rng = Rng::new(0x5eed);
    let rows = unit_rows(&mut rng, n, d);
    let rows16: Vec<f16> = rows.iter().map(|&x| f16::from_f32(x)).collect();
    let queries = unit_rows(&mut rng, 64, d);
    let mut group = c.benchmark_group("cosine_topk_100k_x_384");
    group.sample_size(10);
    for b in [1usize, 64] {
        group.throughput(Throughput::Elements((n * b) as u64));
        let q = &queries[..b * d];
        let m = MatrixView::f32(&rows, d).unwrap();
        group.bench_with_input(BenchmarkId::new("f32", b), &b, |bch, _| {
            bch.iter(|| black_box(CpuScoring.cosine_topk(&m, q, k).unwrap()))
        });
        let m = MatrixView::f16(&rows16, d).unwrap();
        group.bench_with_input(BenchmarkId::new("f16", b), &b, |bch, _| {
            bch.iter(|| black_box(CpuScoring.cosine_topk(&m, q, k).unwrap()))
        });
    }
    group.finish();
}

fn bench_select(c: &mut Criterion) {
    let (queries, cands, k) = (64, 500, 15);
    let words = SetWords {
        entities: 1,
        facets: 1,
        items: 2,
        terms: 2,
    };
    let mut rng = Rng::new(0xc0ffee);
    // Sparse sets: each word keeps about 1 bit in 8.
    let sparse = |rng: &mut Rng, n: usize| -> Vec<u64> {
        (0..n)
            .map(|_| rng.next_u64() & rng.next_u64() & rng.next_u64())
            .collect()
    };
    let mut batch = SelectionBatch::new(words);
    for _ in 0..queries {
        let qe = sparse(&mut rng, 1);
        let qf = sparse(&mut rng, 1);
        let qt = sparse(&mut rng, 2);
        let feats: Vec<[Vec<u64>; 4]> = (0..cands)
            .map(|_| {
                [
                    sparse(&mut rng, 1),
                    sparse(&mut rng, 1),
                    sparse(&mut rng, 2),
                    sparse(&mut rng, 2),
                ]
            })
            .collect();
        let cs: Vec<Candidate<'_>> = feats
            .iter()
            .enumerate()
            .map(|(i, f)| Candidate {
                entities: &f[0],
                facets: &f[1],
                items: &f[2],
                terms: &f[3],
                cluster: (i % 37) as u32,
                inventory: i % 5 == 0,
                has_counts: i % 7 == 0,
                family_score: (i % 4) as f32 * 0.25,
                family_mismatch: i % 11 == 0,
            })
            .collect();
        let wants = QueryWants {
            entities: &qe,
            facets: &qf,
            terms: &qt,
            list: true,
            count: false,
            family: true,
        };
        batch.push_query(&wants, &cs).unwrap();
    }
    let w = CoverageWeights::default();
    let mut group = c.benchmark_group("coverage_select");
    group.throughput(Throughput::Elements(queries as u64));
    group.bench_function("64q_x_500c_k15", |b| {
        b.iter(|| black_box(CpuScoring.coverage_select(&batch, &w, k).unwrap()))
    });
    group.finish();
}

criterion_group!(benches, bench_topk, bench_select);
criterion_main!(benches);
