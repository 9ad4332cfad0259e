//! The fast CPU paths against the slow references, on random inputs with many ties.

use half::{bf16, f16};
use proptest::prelude::*;
use trajwiki_compute::{
    reference, Bm25Index, Bm25Params, Candidate, ComputeError, CoverageWeights, CpuScoring,
    MatrixView, QueryWants, ScoringBackend, SelectionBatch, SetWords,
};

/// Values from a small grid, so that equal scores (ties) are common.
fn grid() -> impl Strategy<Value = f32> {
    (-3i32..=3).prop_map(|v| v as f32 * 0.25)
}

prop_compose! {
    fn matrix_case()(n in 0usize..150, d in 1usize..20, b in 0usize..4)
        (m in proptest::collection::vec(grid(), n * d),
         q in proptest::collection::vec(grid(), b * d),
         k in 0usize..(n + 6), d in Just(d)) -> (Vec<f32>, Vec<f32>, usize, usize) {
        (m, q, d, k)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn topk_matches_reference((m, q, d, k) in matrix_case()) {
        let view = MatrixView::f32(&m, d).unwrap();
        prop_assert_eq!(
            CpuScoring.cosine_topk(&view, &q, k).unwrap(),
            reference::cosine_topk(&view, &q, k).unwrap()
        );
        let h: Vec<f16> = m.iter().map(|&x| f16::from_f32(x)).collect();
        let view = MatrixView::f16(&h, d).unwrap();
        prop_assert_eq!(
            CpuScoring.cosine_topk(&view, &q, k).unwrap(),
            reference::cosine_topk(&view, &q, k).unwrap()
        );
        let h: Vec<bf16> = m.iter().map(|&x| bf16::from_f32(x)).collect();
        let view = MatrixView::bf16(&h, d).unwrap();
        let got = CpuScoring.cosine_topk(&view, &q, k).unwrap();
        prop_assert_eq!(&got, &reference::cosine_topk(&view, &q, k).unwrap());
        for hits in &got {
            prop_assert_eq!(hits.len(), k.min(m.len() / d));
        }
    }

    #[test]
    fn subset_matches_reference(
        (m, q, d, k) in matrix_case(),
        picks in proptest::collection::vec(proptest::collection::vec(any::<u32>(), 0..40), 4),
    ) {
        let n = (m.len() / d) as u32;
        let b = q.len() / d;
        let lists: Vec<Vec<u32>> = picks
            .iter()
            .take(b)
            .map(|p| p.iter().filter(|_| n > 0).map(|x| x % n.max(1)).collect())
            .collect();
        let refs: Vec<&[u32]> = lists.iter().map(|l| &l[..]).collect();
        let view = MatrixView::f32(&m, d).unwrap();
        prop_assert_eq!(
            CpuScoring.cosine_topk_subset(&view, &q, &refs, k).unwrap(),
            reference::cosine_topk_subset(&view, &q, &refs, k).unwrap()
        );
    }

    #[test]
    fn rrf_matches_reference(
        rankings in proptest::collection::vec(proptest::collection::vec(0u32..30, 0..25), 0..5),
        k_const in prop_oneof![Just(60.0f32), 0.0f32..100.0],
    ) {
        let refs: Vec<&[u32]> = rankings.iter().map(|r| &r[..]).collect();
        let fast = trajwiki_compute::rrf(&refs, k_const).unwrap();
        prop_assert_eq!(&fast, &reference::rrf(&refs, k_const).unwrap());
        let batch = [&refs[..], &refs[..]];
        let twice = CpuScoring.rrf_batch(&batch, k_const).unwrap();
        prop_assert_eq!(&twice[1], &fast);
    }

    #[test]
    fn jaccard_matches_reference(
        a in proptest::collection::btree_set(0u32..40, 0..20),
        b in proptest::collection::btree_set(0u32..40, 0..20),
    ) {
        let a: Vec<u32> = a.into_iter().collect();
        let b: Vec<u32> = b.into_iter().collect();
        prop_assert_eq!(
            trajwiki_compute::jaccard(&a, &b).unwrap(),
            reference::jaccard(&a, &b).unwrap()
        );
        let many = CpuScoring.jaccard_batch(&[&a[..]], &[&b[..], &a[..]]).unwrap();
        prop_assert_eq!(many[0][1], if a.is_empty() { 0.0 } else { 1.0 });
    }

    #[test]
    fn bm25_matches_reference(
        docs in proptest::collection::vec(proptest::collection::vec(0u32..25, 0..30), 0..40),
        query in proptest::collection::vec(0u32..30, 0..6),
        k in 0usize..50,
    ) {
        let refs: Vec<&[u32]> = docs.iter().map(|d| &d[..]).collect();
        let index = Bm25Index::build(&refs, Bm25Params::default()).unwrap();
        prop_assert_eq!(
            index.topk(&query, k),
            reference::bm25_topk(&refs, Bm25Params::default(), &query, k)
        );
    }

    #[test]
    fn bm25_pushed_and_replaced_matches_one_build(
        docs in proptest::collection::vec(proptest::collection::vec(0u32..25, 0..30), 1..40),
        changes in proptest::collection::vec(
            (0usize..40, proptest::collection::vec(0u32..25, 0..30)), 0..10),
        query in proptest::collection::vec(0u32..30, 0..6),
        k in 0usize..50,
    ) {
        // Pushed one by one, then some replaced, against one build over the final documents.
        let mut index = Bm25Index::empty(Bm25Params::default()).unwrap();
        let mut held = docs.clone();
        for d in &docs {
            index.push(d).unwrap();
        }
        for (at, new) in &changes {
            let at = at % held.len();
            index.replace(at as u32, &held[at], new).unwrap();
            held[at] = new.clone();
        }
        let refs: Vec<&[u32]> = held.iter().map(|d| &d[..]).collect();
        let built = Bm25Index::build(&refs, Bm25Params::default()).unwrap();
        prop_assert_eq!(index.topk(&query, k), built.topk(&query, k));
        prop_assert_eq!(
            index.topk(&query, k),
            reference::bm25_topk(&refs, Bm25Params::default(), &query, k)
        );
    }

    #[test]
    fn selection_matches_reference(
        problems in proptest::collection::vec(
            (proptest::collection::vec(cand_strategy(), 0..25), want_strategy()), 0..5),
        k in 0usize..30,
    ) {
        let words = SetWords { entities: 1, facets: 1, items: 2, terms: 1 };
        let mut batch = SelectionBatch::new(words);
        for (cands, wants) in &problems {
            let cs: Vec<Candidate<'_>> = cands.iter().map(RawCand::view).collect();
            batch.push_query(&wants.view(), &cs).unwrap();
        }
        let w = CoverageWeights::default();
        let fast = CpuScoring.coverage_select(&batch, &w, k).unwrap();
        prop_assert_eq!(&fast, &reference::coverage_select(&batch, &w, k).unwrap());
        for (picks, (cands, _)) in fast.iter().zip(&problems) {
            prop_assert_eq!(picks.len(), k.min(cands.len()));
            let mut sorted = picks.clone();
            sorted.sort_unstable();
            sorted.dedup();
            prop_assert_eq!(sorted.len(), picks.len());
        }
    }
}

#[derive(Debug, Clone)]
struct RawCand {
    e: Vec<u64>,
    f: Vec<u64>,
    i: Vec<u64>,
    t: Vec<u64>,
    cluster: u32,
    flags: (bool, bool, bool),
    family: f32,
}

impl RawCand {
    fn view(&self) -> Candidate<'_> {
        Candidate {
            entities: &self.e,
            facets: &self.f,
            items: &self.i,
            terms: &self.t,
            cluster: self.cluster,
            inventory: self.flags.0,
            has_counts: self.flags.1,
            family_mismatch: self.flags.2,
            family_score: self.family,
        }
    }
}

#[derive(Debug, Clone)]
struct RawWants {
    e: Vec<u64>,
    f: Vec<u64>,
    t: Vec<u64>,
    flags: (bool, bool, bool),
}

impl RawWants {
    fn view(&self) -> QueryWants<'_> {
        QueryWants {
            entities: &self.e,
            facets: &self.f,
            terms: &self.t,
            list: self.flags.0,
            count: self.flags.1,
            family: self.flags.2,
        }
    }
}

/// Sparse random words over few bits, so that overlaps are frequent.
fn sparse_word() -> impl Strategy<Value = u64> {
    (any::<u64>(), any::<u64>()).prop_map(|(a, b)| a & b & 0x00ff_00ff_0000_00ff)
}

fn cand_strategy() -> impl Strategy<Value = RawCand> {
    (
        proptest::collection::vec(sparse_word(), 0..=1),
        proptest::collection::vec(sparse_word(), 0..=1),
        proptest::collection::vec(sparse_word(), 0..=2),
        proptest::collection::vec(sparse_word(), 0..=1),
        prop_oneof![Just(u32::MAX), 0u32..4],
        any::<(bool, bool, bool)>(),
        (0u32..5).prop_map(|x| x as f32 * 0.25),
    )
        .prop_map(|(e, f, i, t, cluster, flags, family)| RawCand {
            e,
            f,
            i,
            t,
            cluster,
            flags,
            family,
        })
}

fn want_strategy() -> impl Strategy<Value = RawWants> {
    (
        proptest::collection::vec(sparse_word(), 1),
        proptest::collection::vec(sparse_word(), 1),
        proptest::collection::vec(sparse_word(), 1),
        any::<(bool, bool, bool)>(),
    )
        .prop_map(|(e, f, t, flags)| RawWants { e, f, t, flags })
}

#[test]
fn coverage_beats_rank_and_cluster_repeats_are_penalised() {
    let words = SetWords {
        entities: 1,
        facets: 1,
        items: 1,
        terms: 1,
    };
    // Query wants entities 0 and 1. Candidate 0 (anchor) has entity 0; candidate 1 repeats it in
    // the same cluster (0.75 − 0.10 − 0.22 = 0.43); candidate 2 adds entity 1 (0.5 + 0.9);
    // candidate 3 adds one item (0.25 + 0.30 = 0.55).
    let c = |e: u64, item: u64, cluster: u32| Candidate {
        entities: std::slice::from_ref(Box::leak(Box::new(e))),
        items: std::slice::from_ref(Box::leak(Box::new(item))),
        cluster,
        ..Default::default()
    };
    let cands = [c(1, 0, 0), c(1, 0, 0), c(2, 0, 1), c(0, 1, 2)];
    let mut batch = SelectionBatch::new(words);
    batch
        .push_query(
            &QueryWants {
                entities: &[3],
                list: true,
                ..Default::default()
            },
            &cands,
        )
        .unwrap();
    let w = CoverageWeights::default();
    assert_eq!(
        CpuScoring.coverage_select(&batch, &w, 3).unwrap(),
        vec![vec![0, 2, 3]]
    );
}

#[test]
fn low_family_anchor_switches_to_best_family_match() {
    let words = SetWords::default();
    let c = |f: f32| Candidate {
        family_score: f,
        cluster: u32::MAX,
        ..Default::default()
    };
    let mut batch = SelectionBatch::new(words);
    let wants = QueryWants {
        family: true,
        ..Default::default()
    };
    batch.push_query(&wants, &[c(0.1), c(0.9), c(0.9)]).unwrap();
    let w = CoverageWeights::default();
    let got = CpuScoring.coverage_select(&batch, &w, 1).unwrap();
    assert_eq!(got, vec![vec![1]]);
}

#[test]
fn bad_inputs_are_errors() {
    let m = [0f32; 6];
    assert!(matches!(
        MatrixView::f32(&m, 4),
        Err(ComputeError::WrongDimension { .. })
    ));
    assert!(matches!(
        MatrixView::f32(&m, 0),
        Err(ComputeError::ZeroDimension)
    ));
    let v = MatrixView::f32(&m, 3).unwrap();
    assert!(matches!(
        CpuScoring.cosine_topk(&v, &[1.0, 0.0], 1),
        Err(ComputeError::WrongDimension {
            expected: 3,
            got: 2,
            ..
        })
    ));
    assert!(matches!(
        CpuScoring.cosine_topk_subset(&v, &[1.0, 0.0, 0.0], &[&[5]], 1),
        Err(ComputeError::IndexOutOfRange { index: 5, .. })
    ));
    assert!(matches!(
        CpuScoring.cosine_topk_subset(&v, &[1.0, 0.0, 0.0], &[], 1),
        Err(ComputeError::BatchMismatch { .. })
    ));
    assert!(matches!(
        trajwiki_compute::rrf(&[&[1]], f32::NAN),
        Err(ComputeError::InvalidParameter { .. })
    ));
    assert!(matches!(
        trajwiki_compute::jaccard(&[2, 1], &[]),
        Err(ComputeError::UnsortedSet {
            which: 0,
            position: 1
        })
    ));
    let mut batch = SelectionBatch::new(SetWords {
        entities: 1,
        ..Default::default()
    });
    assert!(matches!(
        batch.push_query(
            &QueryWants {
                entities: &[1, 2],
                ..Default::default()
            },
            &[]
        ),
        Err(ComputeError::WrongDimension { .. })
    ));
    assert!(batch.is_empty());
    let nan_rows = [f32::NAN, 1.0, 0.5, 0.5];
    let v = MatrixView::f32(&nan_rows, 2).unwrap();
    let hits = CpuScoring.cosine_topk(&v, &[1.0, 0.0], 2).unwrap();
    assert_eq!(hits[0], vec![(1, 0.5), (0, f32::NEG_INFINITY)]);
}
