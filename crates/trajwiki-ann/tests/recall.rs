//! Recall of the approximate index against the exact scan (the reference): recall@10 of at
//! least 0.95, on vectors shaped like a namespace's (clustered unit vectors), after a round trip
//! through the index file. Runs with `--features faiss`; without it, checks that the index says
//! it is unavailable.

use trajwiki_ann::{AnnError, AnnIndex, AnnParams};
use trajwiki_compute::synthetic::Rng;
use trajwiki_compute::{cosine_topk, MatrixView};

/// `n` unit vectors of dimension `d` around `clusters` random centres (topics of a long
/// conversation), with noise: harder than uniform data for a graph to get wrong by much.
fn clustered(rng: &mut Rng, n: usize, d: usize, clusters: usize) -> Vec<f32> {
    let gauss = |rng: &mut Rng| {
        let (u, v) = (rng.unit().max(1e-7), rng.unit());
        (-2.0 * u.ln()).sqrt() * (std::f32::consts::TAU * v).cos()
    };
    let centres: Vec<Vec<f32>> = (0..clusters)
        .map(|_| (0..d).map(|_| gauss(rng)).collect())
        .collect();
    let mut out = Vec::with_capacity(n * d);
    for i in 0..n {
        let c = &centres[(rng.below(clusters as u64) as usize + i) % clusters];
        let mut v: Vec<f32> = c.iter().map(|x| x + 0.8 * gauss(rng)).collect();
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter_mut().for_each(|x| *x /= norm);
        out.extend(v);
    }
    out
}

#[test]
fn recall_at_10_against_the_exact_scan() {
    let (n, d, k, queries) = (20_000, 64, 10, 200);
    let mut rng = Rng::new(0xa77);
    let rows = clustered(&mut rng, n, d, 50);
    let qs = clustered(&mut rng, queries, d, 50);
    let built = match AnnIndex::build(&rows, d, AnnParams::default()) {
        Err(AnnError::Unavailable) => {
            assert!(!AnnIndex::available());
            eprintln!("SKIPPED: built without the `faiss` feature; approximate search is off");
            return;
        }
        other => other.unwrap(),
    };
    let dir = std::env::temp_dir().join(format!("trajwiki-ann-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("rows.hnsw");
    built.save(&path).unwrap();
    let index = AnnIndex::load(&path, AnnParams::default()).unwrap();
    assert_eq!((index.rows(), index.dim()), (n, d));
    let exact = cosine_topk(&MatrixView::f32(&rows, d).unwrap(), &qs, k).unwrap();
    let mut found = 0;
    for (q, want) in qs.chunks_exact(d).zip(&exact) {
        let got = index.search(q, k).unwrap();
        assert_eq!(got.len(), k);
        assert!(got.windows(2).all(|w| w[0].1 >= w[1].1), "best first");
        found += want
            .iter()
            .filter(|(r, _)| got.iter().any(|(g, _)| g == r))
            .count();
    }
    let recall = found as f64 / (queries * k) as f64;
    eprintln!("recall@{k} over {n} x {d}: {recall:.4}");
    assert!(recall >= 0.95, "recall@{k} {recall:.4} < 0.95");
    std::fs::remove_dir_all(&dir).unwrap();
}
