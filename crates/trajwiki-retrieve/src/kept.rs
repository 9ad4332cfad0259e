//! A level's vectors as the scoring backend keeps them in its own memory (a GPU's), made on the
//! first search that scores them, so that a loaded index uploads each level once, not once per
//! query.

use std::sync::OnceLock;

use trajwiki_compute::{ComputeError, Hit, Kept, MatrixView, ScoringBackend};

/// The kept copy of one level's rows; empty until a backend that keeps matrices scores them.
/// The first backend to score the level decides: an index is searched through one backend for
/// its life (a second one scores the host rows, as it would without this).
#[derive(Default)]
pub(crate) struct KeptRows(OnceLock<Option<Box<dyn Kept>>>);

impl KeptRows {
    /// The best `k` rows of `view` for each query of `queries` on `backend`, from the backend's
    /// kept copy of `view` (made now if this is the first call) where it keeps one, else from
    /// `view` itself: the same hits either way.
    pub(crate) fn cosine_topk(
        &self,
        view: &MatrixView<'_>,
        queries: &[f32],
        k: usize,
        backend: &dyn ScoringBackend,
    ) -> Result<Vec<Vec<Hit>>, ComputeError> {
        // A device that cannot take the level (out of memory, say) leaves it on the host.
        let kept = self.0.get_or_init(|| backend.keep(view).ok().flatten());
        if let Some(kept) = kept {
            if kept.rows() == view.rows() {
                if let Ok(hits) = backend.cosine_topk_kept(kept.as_ref(), queries, k) {
                    return Ok(hits);
                }
            }
        }
        backend.cosine_topk(view, queries, k)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use trajwiki_compute::{CoverageWeights, CpuScoring, SelectionBatch};

    use super::*;

    /// A backend that keeps a host copy of each matrix, counting what it is asked.
    #[derive(Default)]
    struct Keeping {
        kept: AtomicUsize,
        scored_kept: AtomicUsize,
        scored_views: AtomicUsize,
    }

    struct Copy(Vec<f32>, usize);

    impl Kept for Copy {
        fn rows(&self) -> usize {
            self.0.len() / self.1
        }
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
    }

    impl ScoringBackend for Keeping {
        fn name(&self) -> &'static str {
            "keeping"
        }
        fn cosine_topk(
            &self,
            m: &MatrixView<'_>,
            q: &[f32],
            k: usize,
        ) -> Result<Vec<Vec<Hit>>, ComputeError> {
            self.scored_views.fetch_add(1, Ordering::SeqCst);
            CpuScoring.cosine_topk(m, q, k)
        }
        fn keep(&self, m: &MatrixView<'_>) -> Result<Option<Box<dyn Kept>>, ComputeError> {
            self.kept.fetch_add(1, Ordering::SeqCst);
            let mut rows = vec![0.0; m.rows() * m.dim()];
            for (r, out) in rows.chunks_exact_mut(m.dim()).enumerate() {
                m.row_f32(r, out);
            }
            Ok(Some(Box::new(Copy(rows, m.dim()))))
        }
        fn cosine_topk_kept(
            &self,
            kept: &dyn Kept,
            q: &[f32],
            k: usize,
        ) -> Result<Vec<Vec<Hit>>, ComputeError> {
            self.scored_kept.fetch_add(1, Ordering::SeqCst);
            let c = kept.as_any().downcast_ref::<Copy>().expect("ours");
            CpuScoring.cosine_topk(&MatrixView::f32(&c.0, c.1)?, q, k)
        }
        fn cosine_topk_subset(
            &self,
            m: &MatrixView<'_>,
            q: &[f32],
            c: &[&[u32]],
            k: usize,
        ) -> Result<Vec<Vec<Hit>>, ComputeError> {
            CpuScoring.cosine_topk_subset(m, q, c, k)
        }
        fn rrf_batch(&self, b: &[&[&[u32]]], c: f32) -> Result<Vec<Vec<Hit>>, ComputeError> {
            CpuScoring.rrf_batch(b, c)
        }
        fn coverage_select(
            &self,
            b: &SelectionBatch,
            w: &CoverageWeights,
            k: usize,
        ) -> Result<Vec<Vec<u32>>, ComputeError> {
            CpuScoring.coverage_select(b, w, k)
        }
    }

    #[test]
    fn a_level_is_kept_once_and_scored_from_the_copy() {
        let d = 8;
        let mut rng = trajwiki_compute::synthetic::Rng::new(5);
        let rows = trajwiki_compute::synthetic::unit_rows(&mut rng, 50, d);
        let view = MatrixView::f32(&rows, d).unwrap();
        let slot = KeptRows::default();
        let backend = Keeping::default();
        for i in 0..5 {
            let q = &rows[i * d..(i + 1) * d];
            let got = slot.cosine_topk(&view, q, 7, &backend).unwrap();
            assert_eq!(got, CpuScoring.cosine_topk(&view, q, 7).unwrap());
        }
        assert_eq!(backend.kept.load(Ordering::SeqCst), 1);
        assert_eq!(backend.scored_kept.load(Ordering::SeqCst), 5);
        assert_eq!(backend.scored_views.load(Ordering::SeqCst), 0);
        // The CPU keeps nothing: the view is scored each time.
        let cpu_slot = KeptRows::default();
        let q = &rows[..d];
        let got = cpu_slot.cosine_topk(&view, q, 3, &CpuScoring).unwrap();
        assert_eq!(got, CpuScoring.cosine_topk(&view, q, 3).unwrap());
        // A copy of another size than the view (never in an index: levels do not change) is
        // not used.
        let shorter = MatrixView::f32(&rows[..10 * d], d).unwrap();
        let got = slot.cosine_topk(&shorter, q, 3, &backend).unwrap();
        assert_eq!(got, CpuScoring.cosine_topk(&shorter, q, 3).unwrap());
        assert_eq!(backend.scored_views.load(Ordering::SeqCst), 1);
    }
}
