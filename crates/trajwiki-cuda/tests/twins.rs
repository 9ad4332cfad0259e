//! One test body per primitive, run on every backend: the CPU run checks the plumbing, the CUDA
//! run asserts against the CPU result — float tolerance for scores, exact ids for selections and
//! fusions (and for top-k wherever two scores are not within tolerance of a tie). Without a GPU
//! (or without the `cuda` feature) the CUDA runs skip with a message, unless
//! TRAJWIKI_REQUIRE_GPU=1, which `scripts/gpu-check.sh` sets.

use half::{bf16, f16};
use trajwiki_compute::synthetic::{unit_rows, Rng};
use trajwiki_compute::{
    Candidate, CoverageWeights, CpuScoring, Hit, MatrixView, QueryWants, ScoringBackend,
    SelectionBatch, SetWords,
};
use trajwiki_cuda::CudaScoring;

/// Runs `$body(backend)` on the CPU and, when a device can be opened, on CUDA.
macro_rules! test_backends {
    ($name:ident) => {
        mod $name {
            #[test]
            fn cpu() {
                super::$name(&trajwiki_compute::CpuScoring);
            }

            #[test]
            fn cuda() {
                match trajwiki_cuda::CudaScoring::new(0) {
                    Ok(gpu) => super::$name(&gpu),
                    Err(e) => super::skip(&e),
                }
            }
        }
    };
}

fn skip(e: &trajwiki_cuda::CudaError) {
    if std::env::var("TRAJWIKI_REQUIRE_GPU").is_ok_and(|v| v == "1") {
        panic!("TRAJWIKI_REQUIRE_GPU=1 but CUDA is unusable: {e}");
    }
    eprintln!("skipping the CUDA run: {e}");
}

/// Unit rows, with every 10th row a copy of the one before (exact ties).
fn rows(rng: &mut Rng, n: usize, d: usize) -> Vec<f32> {
    let mut v = unit_rows(rng, n, d);
    for i in (10..n).step_by(10) {
        let (a, b) = v.split_at_mut(i * d);
        b[..d].copy_from_slice(&a[(i - 1) * d..]);
    }
    v
}

fn assert_hits_close(got: &[Vec<Hit>], want: &[Vec<Hit>], tol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: batch size");
    for (q, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.len(), w.len(), "{what}: query {q} length");
        for (j, (a, b)) in g.iter().zip(w).enumerate() {
            assert!(
                (a.1 - b.1).abs() <= tol,
                "{what}: query {q} rank {j}: score {} vs {}",
                a.1,
                b.1
            );
            if a.0 != b.0 {
                // Only a near-tie may swap ids.
                let other = w.iter().find(|h| h.0 == a.0).map(|h| h.1);
                assert!(
                    other.is_some_and(|s| (s - b.1).abs() <= 2.0 * tol),
                    "{what}: query {q} rank {j}: id {} vs {} without a near-tie",
                    a.0,
                    b.0
                );
            }
        }
    }
}

fn cosine_topk(backend: &dyn ScoringBackend) {
    let mut rng = Rng::new(7);
    let (n, d) = (3000, 384);
    let m = rows(&mut rng, n, d);
    let m16: Vec<f16> = m.iter().map(|&x| f16::from_f32(x)).collect();
    let mb16: Vec<bf16> = m.iter().map(|&x| bf16::from_f32(x)).collect();
    let q = rows(&mut rng, 65, d);
    let views = [
        ("f32", MatrixView::f32(&m, d).unwrap(), 1e-4),
        ("f16", MatrixView::f16(&m16, d).unwrap(), 1e-3),
        ("bf16", MatrixView::bf16(&mb16, d).unwrap(), 1e-3),
    ];
    for (name, view, tol) in views {
        for b in [1usize, 9, 65] {
            for k in [1usize, 10, 100] {
                let got = backend.cosine_topk(&view, &q[..b * d], k).unwrap();
                let want = CpuScoring.cosine_topk(&view, &q[..b * d], k).unwrap();
                assert_hits_close(&got, &want, tol, &format!("{name} b={b} k={k}"));
            }
        }
    }
    // k larger than the matrix, and an empty batch.
    let small = MatrixView::f32(&m[..3 * d], d).unwrap();
    assert_eq!(
        backend.cosine_topk(&small, &q[..d], 10).unwrap()[0].len(),
        3
    );
    assert!(backend.cosine_topk(&small, &[], 10).unwrap().is_empty());
}
test_backends!(cosine_topk);

fn cosine_topk_subset(backend: &dyn ScoringBackend) {
    let mut rng = Rng::new(11);
    let (n, d) = (3000, 256);
    let m: Vec<f16> = rows(&mut rng, n, d)
        .iter()
        .map(|&x| f16::from_f32(x))
        .collect();
    let view = MatrixView::f16(&m, d).unwrap();
    let q = rows(&mut rng, 16, d);
    let lists: Vec<Vec<u32>> = (0..16)
        .map(|i| {
            (0..200 + i * 10)
                .map(|_| rng.below(n as u64) as u32)
                .collect()
        })
        .collect();
    let refs: Vec<&[u32]> = lists.iter().map(|l| &l[..]).collect();
    let got = backend.cosine_topk_subset(&view, &q, &refs, 15).unwrap();
    let want = CpuScoring.cosine_topk_subset(&view, &q, &refs, 15).unwrap();
    assert_hits_close(&got, &want, 1e-3, "subset");
}
test_backends!(cosine_topk_subset);

fn rrf_batch(backend: &dyn ScoringBackend) {
    let mut rng = Rng::new(13);
    let rankings: Vec<Vec<Vec<u32>>> = (0..64)
        .map(|_| {
            (0..2 + rng.below(3) as usize)
                .map(|_| (0..rng.below(60)).map(|_| rng.below(80) as u32).collect())
                .collect()
        })
        .collect();
    let inner: Vec<Vec<&[u32]>> = rankings
        .iter()
        .map(|q| q.iter().map(|r| &r[..]).collect())
        .collect();
    let batch: Vec<&[&[u32]]> = inner.iter().map(|v| &v[..]).collect();
    let got = backend.rrf_batch(&batch, 60.0).unwrap();
    let want = CpuScoring.rrf_batch(&batch, 60.0).unwrap();
    assert_eq!(got, want, "RRF must match to the bit");
}
test_backends!(rrf_batch);

fn coverage_select(backend: &dyn ScoringBackend) {
    let mut rng = Rng::new(17);
    let words = SetWords {
        entities: 1,
        facets: 1,
        items: 2,
        terms: 2,
    };
    let mut batch = SelectionBatch::new(words);
    for qi in 0..64 {
        let sparse = |rng: &mut Rng, n: usize| -> Vec<u64> {
            (0..n)
                .map(|_| rng.next_u64() & rng.next_u64() & rng.next_u64())
                .collect()
        };
        let qe = sparse(&mut rng, 1);
        let qf = sparse(&mut rng, 1);
        let qt = sparse(&mut rng, 2);
        let n = if qi == 0 {
            0
        } else {
            1 + rng.below(500) as usize
        };
        let feats: Vec<[Vec<u64>; 4]> = (0..n)
            .map(|_| {
                [
                    sparse(&mut rng, 1),
                    sparse(&mut rng, 1),
                    sparse(&mut rng, 2),
                    sparse(&mut rng, 2),
                ]
            })
            .collect();
        let cands: Vec<Candidate<'_>> = feats
            .iter()
            .enumerate()
            .map(|(i, f)| Candidate {
                entities: &f[0],
                facets: &f[1],
                items: &f[2],
                terms: &f[3],
                cluster: if i % 3 == 0 {
                    u32::MAX
                } else {
                    (i % 23) as u32
                },
                inventory: i % 5 == 0,
                has_counts: i % 7 == 0,
                family_score: (rng.next_u64() % 5) as f32 * 0.25,
                family_mismatch: i % 11 == 0,
            })
            .collect();
        let wants = QueryWants {
            entities: &qe,
            facets: &qf,
            terms: &qt,
            list: qi % 2 == 0,
            count: qi % 3 == 0,
            family: qi % 4 == 0,
        };
        batch.push_query(&wants, &cands).unwrap();
    }
    let w = CoverageWeights::default();
    for k in [0usize, 1, 15, 600] {
        let got = backend.coverage_select(&batch, &w, k).unwrap();
        let want = CpuScoring.coverage_select(&batch, &w, k).unwrap();
        assert_eq!(got, want, "selections must be identical (k = {k})");
    }
}
test_backends!(coverage_select);

#[test]
fn resident_matrix_matches_the_upload_path() {
    let gpu = match CudaScoring::new(0) {
        Ok(g) => g,
        Err(e) => return skip(&e),
    };
    let mut rng = Rng::new(19);
    let d = 128;
    let m = rows(&mut rng, 1000, d);
    let view = MatrixView::f32(&m, d).unwrap();
    let q = rows(&mut rng, 3, d);
    let dm = gpu.upload(&view).unwrap();
    let a = gpu.cosine_topk_resident(&dm, &q, 5).unwrap();
    let b = CpuScoring.cosine_topk(&view, &q, 5).unwrap();
    assert_hits_close(&a, &b, 1e-4, "resident");
}

/// A resident f16 matrix grown in place, a few rows at a time past several capacity doublings,
/// ranks exactly as the CPU ranks the whole matrix, ties broken the same way; rows of another
/// dimension or element type are refused.
#[test]
fn resident_matrix_appended_in_place_matches_the_cpu() {
    let gpu = match CudaScoring::new(0) {
        Ok(g) => g,
        Err(e) => return skip(&e),
    };
    let mut rng = Rng::new(23);
    let d = 96;
    let all: Vec<f16> = rows(&mut rng, 700, d)
        .into_iter()
        .map(f16::from_f32)
        .collect();
    // A duplicated row makes a tie, which both sides break by the lower index.
    let mut all = all;
    let copy = all[10 * d..11 * d].to_vec();
    all[650 * d..651 * d].copy_from_slice(&copy);
    let q: Vec<f32> = all[10 * d..11 * d].iter().map(|v| v.to_f32()).collect();
    let mut dm = gpu
        .upload(&MatrixView::f16(&all[..5 * d], d).unwrap())
        .unwrap();
    let mut at = 5;
    for step in [1, 2, 3, 57, 1, 200, 431] {
        let part = MatrixView::f16(&all[at * d..(at + step) * d], d).unwrap();
        gpu.append(&mut dm, &part).unwrap();
        at += step;
        assert_eq!(dm.rows(), at);
        let seen = MatrixView::f16(&all[..at * d], d).unwrap();
        let got = gpu.cosine_topk_resident(&dm, &q, 8).unwrap();
        let want = CpuScoring.cosine_topk(&seen, &q, 8).unwrap();
        let ids = |h: &[Vec<Hit>]| h[0].iter().map(|x| x.0).collect::<Vec<_>>();
        assert_eq!(ids(&got), ids(&want), "after {at} rows");
        assert_hits_close(&got, &want, 1e-4, "appended");
    }
    assert_eq!(at, 700);
    let f32_rows = rows(&mut rng, 2, d);
    assert!(gpu
        .append(&mut dm, &MatrixView::f32(&f32_rows, d).unwrap())
        .is_err());
    let narrow = vec![f16::ZERO; 2 * 64];
    assert!(gpu
        .append(&mut dm, &MatrixView::f16(&narrow, 64).unwrap())
        .is_err());
    assert_eq!(dm.rows(), 700);
}

/// A matrix kept through the `ScoringBackend` seam (what a loaded index does with each level)
/// ranks as its view does, and only for the backend that keeps it.
#[test]
fn kept_matrices_rank_as_their_view_and_only_for_their_backend() {
    let gpu = match CudaScoring::new(0) {
        Ok(g) => g,
        Err(e) => return skip(&e),
    };
    let other = CudaScoring::new(0).unwrap();
    let mut rng = Rng::new(29);
    let d = 64;
    let m: Vec<f16> = rows(&mut rng, 3000, d)
        .into_iter()
        .map(f16::from_f32)
        .collect();
    let view = MatrixView::f16(&m, d).unwrap();
    let q = rows(&mut rng, 4, d);
    let kept = ScoringBackend::keep(&gpu, &view)
        .unwrap()
        .expect("the GPU keeps");
    assert_eq!(kept.rows(), 3000);
    let got = gpu.cosine_topk_kept(kept.as_ref(), &q, 10).unwrap();
    let want = CpuScoring.cosine_topk(&view, &q, 10).unwrap();
    assert_hits_close(&got, &want, 1e-4, "kept");
    assert!(other.cosine_topk_kept(kept.as_ref(), &q, 10).is_err());
    // The CPU keeps nothing, and scores nothing kept.
    assert!(CpuScoring.keep(&view).unwrap().is_none());
    assert!(CpuScoring.cosine_topk_kept(kept.as_ref(), &q, 10).is_err());
}
