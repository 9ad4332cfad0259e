//! A namespace's message vectors as retrieval sees them: rows in ingest order, in two segments —
//! a shared prefix that the index does not own (a memory-mapped vector file, in f16 or f32) and
//! a tail of f32 rows it holds (messages the file does not cover yet) — with the map between a
//! message (session, position order) and its row.
//!
//! Scoring scans each segment with the backend and merges the top-k lists, so that a search over
//! a memory-mapped namespace decodes nothing up front. A large namespace's shared rows may also
//! carry an approximate index ([`AnnIndex`]) over their first rows: those rows are then asked of
//! the index instead of scanned, and the rows after them are still scanned exactly.

use trajwiki_ann::AnnIndex;
use trajwiki_compute::sketch::Sketch;
use trajwiki_compute::{sort_hits, Hit, MatrixView, ScoringBackend};

use crate::index::{sketch_if_long, IndexError};
use crate::kept::KeptRows;

/// Rows stored outside the index, viewed as a matrix (e.g. a memory-mapped vector file).
pub trait SharedRows: Send + Sync {
    /// The rows.
    fn view(&self) -> MatrixView<'_>;

    /// Whether every row read so far was what the rows held when they were shared: false
    /// once their file was cut under them by another process (a mapped file's lost pages read
    /// as zeros), and what was computed from them since is wrong.
    fn intact(&self) -> bool {
        true
    }
}

/// The int8 sketch of a namespace's shared message rows, made apart from its vectors
/// ([`MessageVectors::sketch_shared`]).
pub struct SharedSketch(Sketch);

/// The message vectors of one namespace.
pub struct MessageVectors {
    dim: usize,
    shared: Option<Box<dyn SharedRows>>,
    shared_rows: usize,
    tail: Vec<f32>,
    /// Per message: its row (shared rows first, then the tail's).
    row_of: Vec<u32>,
    /// Per row: its message.
    message_of: Vec<u32>,
    /// Whether row `i` is message `i` throughout (messages ingested in conversation order).
    in_message_order: bool,
    /// An approximate index over the first shared rows.
    ann: Option<AnnIndex>,
    /// The shared rows' int8 sketch, when there are enough of them (see `index::Rows`).
    sketch: Option<Sketch>,
    /// The exactly scanned shared rows as the scoring backend keeps them (on a GPU).
    kept: KeptRows,
}

impl MessageVectors {
    /// Vectors held in memory, row `i` for message `i`.
    pub fn owned(dim: usize, rows: Vec<f32>) -> Result<Self, IndexError> {
        let n = rows.len().checked_div(dim).unwrap_or(0);
        let order: Vec<u32> = (0..n as u32).collect();
        Self::new(dim, None, rows, order)
    }

    /// `shared` rows, then `tail` rows (f32, `dim` each); `row_of[i]` is message `i`'s row, a
    /// permutation of all rows.
    pub fn new(
        dim: usize,
        shared: Option<Box<dyn SharedRows>>,
        tail: Vec<f32>,
        row_of: Vec<u32>,
    ) -> Result<Self, IndexError> {
        Self::with_sketch(dim, shared, tail, row_of, None)
    }

    /// [`MessageVectors::new`] with the shared rows' sketch made beforehand, beside other work,
    /// by [`MessageVectors::sketch_shared`] of the same rows: the same vectors. A sketch of
    /// another number of rows or dimension is made again.
    pub fn with_sketch(
        dim: usize,
        shared: Option<Box<dyn SharedRows>>,
        tail: Vec<f32>,
        row_of: Vec<u32>,
        sketch: Option<SharedSketch>,
    ) -> Result<Self, IndexError> {
        Self::made(dim, shared, tail, row_of, |view| {
            Ok(match sketch {
                Some(SharedSketch(sketch))
                    if sketch.rows() == view.rows() && sketch.view().dim() == view.dim() =>
                {
                    Some(sketch)
                }
                _ => sketch_if_long(view),
            })
        })
    }

    /// The sketch [`MessageVectors::new`] makes of `shared` rows (`None` for rows it does not
    /// sketch), for [`MessageVectors::with_sketch`].
    pub fn sketch_shared(shared: &dyn SharedRows) -> Option<SharedSketch> {
        sketch_if_long(&shared.view()).map(SharedSketch)
    }

    /// These vectors after the shared rows grew at their end (a build wrote the rows of the
    /// messages that came since): `shared` holds the rows these held first, then more; `tail`
    /// and `row_of` as for [`MessageVectors::new`]. The sketch of the rows these held is
    /// extended, not made again, and the approximate index is kept; the vectors are those
    /// [`MessageVectors::new`] makes, with the same hits.
    pub fn grown(
        self,
        shared: Option<Box<dyn SharedRows>>,
        tail: Vec<f32>,
        row_of: Vec<u32>,
    ) -> Result<Self, IndexError> {
        let held = self.shared_rows;
        let (sketch, ann) = (self.sketch, self.ann);
        let mut grown = Self::made(self.dim, shared, tail, row_of, |view| match sketch {
            Some(mut sketch) if view.rows() >= held => {
                sketch.update(view, held)?;
                Ok(Some(sketch))
            }
            _ => Ok(sketch_if_long(view)),
        })?;
        if let Some(ann) = ann {
            grown = grown.with_ann(ann)?;
        }
        Ok(grown)
    }

    fn made(
        dim: usize,
        shared: Option<Box<dyn SharedRows>>,
        tail: Vec<f32>,
        row_of: Vec<u32>,
        sketch_of: impl FnOnce(&MatrixView<'_>) -> Result<Option<Sketch>, IndexError>,
    ) -> Result<Self, IndexError> {
        let shared_rows = shared.as_ref().map_or(0, |s| s.view().rows());
        if let Some(s) = &shared {
            if s.view().dim() != dim {
                return Err(IndexError::Shape {
                    level: "messages (vector file)",
                    got: s.view().dim(),
                    rows: shared_rows,
                    dim,
                });
            }
        }
        let rows = shared_rows + tail.len().checked_div(dim).unwrap_or(0);
        if !tail.len().is_multiple_of(dim.max(1)) || rows != row_of.len() {
            return Err(IndexError::Shape {
                level: "messages",
                got: shared_rows * dim + tail.len(),
                rows: row_of.len(),
                dim,
            });
        }
        let mut message_of = vec![u32::MAX; rows];
        for (m, &r) in row_of.iter().enumerate() {
            match message_of.get_mut(r as usize) {
                Some(slot) if *slot == u32::MAX => *slot = m as u32,
                _ => {
                    return Err(IndexError::Shape {
                        level: "messages (row map)",
                        got: r as usize,
                        rows,
                        dim,
                    })
                }
            }
        }
        let in_message_order = row_of.iter().enumerate().all(|(m, &r)| m == r as usize);
        let sketch = match &shared {
            Some(s) => sketch_of(&s.view())?,
            None => None,
        };
        Ok(MessageVectors {
            kept: KeptRows::default(),
            ann: None,
            sketch,
            in_message_order,
            dim,
            shared,
            shared_rows,
            tail,
            row_of,
            message_of,
        })
    }

    /// Searches the first `ann.rows()` shared rows through `ann` instead of scanning them. An
    /// index over more rows than are shared, or of another dimension, is refused.
    pub fn with_ann(mut self, ann: AnnIndex) -> Result<Self, IndexError> {
        if ann.rows() > self.shared_rows || ann.dim() != self.dim {
            return Err(IndexError::Shape {
                level: "messages (approximate index)",
                got: ann.rows() * ann.dim(),
                rows: self.shared_rows,
                dim: self.dim,
            });
        }
        self.ann = Some(ann);
        Ok(self)
    }

    /// The approximate index, if these vectors have one.
    pub fn ann(&self) -> Option<&AnnIndex> {
        self.ann.as_ref()
    }

    /// Rows searched through the approximate index (0 without one).
    pub fn ann_rows(&self) -> usize {
        self.ann.as_ref().map_or(0, AnnIndex::rows)
    }

    /// Messages.
    pub fn len(&self) -> usize {
        self.row_of.len()
    }

    /// Whether the shared rows read so far were theirs (see [`SharedRows::intact`]).
    pub fn intact(&self) -> bool {
        self.shared.as_ref().is_none_or(|s| s.intact())
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.row_of.is_empty()
    }

    /// Per message (in the index's order): its row.
    pub fn rows_of(&self) -> &[u32] {
        &self.row_of
    }

    /// The message (in the index's order) of row `r`.
    pub fn message_of_row(&self, r: usize) -> usize {
        self.message_of[r] as usize
    }

    /// These vectors without their approximate index.
    pub fn without_ann(mut self) -> Self {
        self.ann = None;
        self
    }

    /// Rows served from the shared segment (the memory-mapped file).
    pub fn shared_rows(&self) -> usize {
        self.shared_rows
    }

    /// Bytes held by the index itself (the tail, the row maps and the sketch; the shared rows
    /// are not).
    pub fn owned_bytes(&self) -> usize {
        self.tail.len() * 4 + self.row_of.len() * 8 + self.sketch.as_ref().map_or(0, Sketch::bytes)
    }

    /// Whether message `i`'s vector is a row of the shared segment (the vector file's rows never
    /// change; a tail row is embedded at load).
    pub(crate) fn is_shared(&self, i: usize) -> bool {
        (self.row_of[i] as usize) < self.shared_rows
    }

    /// Message `i`'s vector, as f32, into `out` (`dim` long).
    pub(crate) fn row_into(&self, i: usize, out: &mut [f32]) {
        let r = self.row_of[i] as usize;
        if r < self.shared_rows {
            let view = self.shared.as_ref().expect("shared rows").view();
            view.row_f32(r, out);
        } else {
            let t = r - self.shared_rows;
            out.copy_from_slice(&self.tail[t * self.dim..(t + 1) * self.dim]);
        }
    }

    /// Message `i`'s vector as f32.
    pub(crate) fn row(&self, i: usize) -> Vec<f32> {
        let mut out = vec![0.0; self.dim];
        self.row_into(i, &mut out);
        out
    }

    /// The best `k` messages for query `q`: (message index, cosine), best first, ties to the
    /// lower message index.
    pub(crate) fn topk(
        &self,
        q: &[f32],
        k: usize,
        backend: &dyn ScoringBackend,
    ) -> Result<Vec<Hit>, IndexError> {
        let mut hits: Vec<Hit> = Vec::new();
        let approximate = self.ann_rows();
        if let Some(ann) = &self.ann {
            hits.extend(
                ann.search(q, k)?
                    .into_iter()
                    .map(|(r, s)| (self.message_of[r as usize], s)),
            );
        }
        if let Some(shared) = &self.shared {
            let view = match &self.sketch {
                Some(sketch) => shared.view().with_sketch(sketch.view())?,
                None => shared.view(),
            };
            let view = view.rows_from(approximate);
            if view.rows() > 0 {
                let found = self
                    .kept
                    .cosine_topk(&view, q, k, backend)?
                    .into_iter()
                    .next();
                hits.extend(
                    found
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(r, s)| (self.message_of[approximate + r as usize], s)),
                );
            }
        }
        if !self.tail.is_empty() {
            let view = MatrixView::f32(&self.tail, self.dim)?;
            let found = backend.cosine_topk(&view, q, k)?.into_iter().next();
            hits.extend(
                found
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(r, s)| (self.message_of[self.shared_rows + r as usize], s)),
            );
        }
        let segments = [
            approximate > 0,
            self.shared_rows > approximate,
            !self.tail.is_empty(),
        ];
        if !self.in_message_order || segments.iter().filter(|s| **s).count() > 1 {
            // Two lists, or rows out of message order: the order is restored on message indices.
            sort_hits(&mut hits);
        }
        hits.truncate(k);
        Ok(hits)
    }
}

#[cfg(test)]
mod tests {
    use trajwiki_compute::synthetic::{unit_rows, Rng};
    use trajwiki_compute::CpuScoring;

    use super::*;
    use crate::index::SKETCH_MIN_ROWS;

    /// f32 rows held in memory, shared as a vector file's would be.
    struct Held(Vec<f32>, usize);

    impl SharedRows for Held {
        fn view(&self) -> MatrixView<'_> {
            MatrixView::f32(&self.0, self.1).expect("whole rows")
        }
    }

    #[test]
    fn a_sketch_made_beside_is_the_sketch_made_in_line() {
        let (dim, n) = (8, SKETCH_MIN_ROWS + 5);
        let mut rng = Rng::new(3);
        let rows = unit_rows(&mut rng, n, dim);
        let order: Vec<u32> = (0..n as u32).collect();
        let shared = |rows: &[f32]| Some(Box::new(Held(rows.to_vec(), dim)) as Box<dyn SharedRows>);
        let in_line = MessageVectors::new(dim, shared(&rows), Vec::new(), order.clone()).unwrap();
        let beside = MessageVectors::sketch_shared(&Held(rows.clone(), dim));
        assert!(beside.is_some(), "rows enough to be sketched");
        let made =
            MessageVectors::with_sketch(dim, shared(&rows), Vec::new(), order.clone(), beside)
                .unwrap();
        // A sketch of fewer rows is not taken for theirs: it is made again.
        let short = MessageVectors::sketch_shared(&Held(rows[..(n - 1) * dim].to_vec(), dim));
        let remade =
            MessageVectors::with_sketch(dim, shared(&rows), Vec::new(), order, short).unwrap();
        for v in [&made, &remade] {
            assert_eq!(
                v.owned_bytes(),
                in_line.owned_bytes(),
                "the same sketch held"
            );
        }
        for q in unit_rows(&mut rng, 5, dim).chunks_exact(dim) {
            let want = in_line.topk(q, 300, &CpuScoring).unwrap();
            assert_eq!(made.topk(q, 300, &CpuScoring).unwrap(), want);
            assert_eq!(remade.topk(q, 300, &CpuScoring).unwrap(), want);
        }
    }
}
