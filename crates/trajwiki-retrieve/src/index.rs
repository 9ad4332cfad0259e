//! The per-namespace retrieval index: records, their embeddings, sparse term ids and BM25
//! indices, and the maps between levels (page → trajectories → snapshots → messages).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, OnceLock};

use half::f16;
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use trajwiki_compute::sketch::{Sketch, SketchView};
use trajwiki_compute::{Bm25Index, Bm25Params, ComputeError, MatrixView};
use trajwiki_core::{
    centroid_into, Claim, ClaimId, ClaimStatus, MessageId, PageKind, Snapshot, SnapshotId,
    SourceMessage, Trajectory, TrajectoryId, WikiPage,
};
use trajwiki_text::lexicon::ITEM_FAMILIES;

use crate::derived::{Derived, Keywords};
use crate::kept::KeptRows;
use crate::render::push_superseded;
use crate::vectors::MessageVectors;
use trajwiki_text::text::{each_word, keyword, keywords, stem, words};
use trajwiki_text::{entity_key, Lexicon};

/// The records of one namespace, as read from the store.
#[derive(Debug, Clone, Default)]
pub struct NamespaceRecords {
    /// Messages in session, seq order.
    pub messages: Vec<SourceMessage>,
    /// Snapshots.
    pub snapshots: Vec<Snapshot>,
    /// Trajectories.
    pub trajectories: Vec<Trajectory>,
    /// Current wiki pages (the index page included).
    pub pages: Vec<WikiPage>,
    /// Claims with their current status.
    pub claims: Vec<(Claim, ClaimStatus)>,
    /// The messages that restate a deprecated claim without being its source, by claim id,
    /// then in op order (as the store reads them): marked as the claim's sources are.
    pub restatements: Vec<(ClaimId, MessageId)>,
    /// The build's lexicon setting (`entity_min_count` of its configuration), so that a query
    /// sees the entities construction saw.
    pub entity_min_count: usize,
}

/// The texts of the derived levels, in record order: every level is scored lexically on them.
/// No level but the messages is embedded: snapshots and trajectories take the centroids of
/// their parts' vectors, exactly as construction does, and a page the centroid of its
/// trajectories' rows ([`page_row`]). The messages' texts are in their [`MessageSide`].
pub struct LevelTexts {
    /// One per snapshot: summary and claims.
    pub snapshots: Vec<String>,
    /// One per trajectory: its summary.
    pub trajectories: Vec<String>,
    /// One per non-index page: its routing text.
    pub pages: Vec<String>,
}

/// Vectors of the embedded level, the messages; every other level's are derived from them.
pub struct LevelVectors {
    /// Dimension.
    pub dim: usize,
    /// Messages.
    pub messages: MessageVectors,
}

/// The vectors of every level: the embedded messages' and the derived centroids.
///
/// The derived levels are scanned at f16, as the message vectors are stored: half the bytes a
/// search reads. A trajectory's row is its dense score's vector part, 0.75 × its centroid +
/// 0.15 × its latest snapshot's, so that scoring it is one dot product. A non-index page's row
/// is the normalised mean of its trajectories' rows ([`page_row`]): routing costs no
/// transformer pass, and a page's row follows its trajectories.
pub(crate) struct Vectors {
    pub messages: MessageVectors,
    pub snapshots: Rows,
    pub trajectories: Rows,
    pub pages: Rows,
}

/// A level of f16 rows, with their int8 sketch (see [`trajwiki_compute::sketch`]) when the level
/// is long enough for a scan to gain from one: a CPU scan then reads a byte per element for most
/// rows, and its hits are the same.
pub(crate) struct Rows {
    pub data: Vec<f16>,
    sketch: Option<Sketch>,
    dim: usize,
    /// The rows as the scoring backend keeps them (on a GPU), once a search has scored them.
    pub(crate) kept: KeptRows,
}

/// The fewest rows a level is sketched at: a scan gains from a sketch only when the rows are
/// many times the hits it keeps (see [`trajwiki_compute::topk::sketch_pays`]: a message scan
/// keeping 300 from about 4,800 rows on). Sketched from here, a warm search at 23,528 messages
/// scans in 1.13–1.23 ms instead of 1.36–1.49, and its first search pays about 9 ms to code the
/// rows (BENCHMARKS.md, "Sixth session").
pub(crate) const SKETCH_MIN_ROWS: usize = 4_096;

/// The sketch of `rows`, if there are [`SKETCH_MIN_ROWS`] of them.
pub(crate) fn sketch_if_long(rows: &MatrixView<'_>) -> Option<Sketch> {
    (rows.rows() >= SKETCH_MIN_ROWS).then(|| Sketch::of(rows))
}

impl Rows {
    pub(crate) fn new(data: Vec<f16>, dim: usize) -> Result<Self, IndexError> {
        let sketch = sketch_if_long(&MatrixView::f16(&data, dim)?);
        Ok(Rows {
            data,
            sketch,
            dim,
            kept: KeptRows::default(),
        })
    }

    /// Sets row `i` (an existing row, or the next one) to `row`, keeping the sketch in step
    /// (made when the rows reach [`SKETCH_MIN_ROWS`]); the backend's copy is let go of.
    pub(crate) fn set_row(&mut self, i: usize, row: &[f16]) -> Result<(), IndexError> {
        let n = self.len();
        if row.len() != self.dim || i > n {
            return Err(IndexError::Shape {
                level: "a row set in place",
                got: row.len(),
                rows: i,
                dim: self.dim,
            });
        }
        if i == n {
            self.data.extend_from_slice(row);
        } else {
            self.data[i * self.dim..(i + 1) * self.dim].copy_from_slice(row);
        }
        match &mut self.sketch {
            Some(sketch) => {
                let x: Vec<f32> = row.iter().map(|v| v.to_f32()).collect();
                sketch.set_row(i, &x)?;
            }
            None => self.sketch = sketch_if_long(&MatrixView::f16(&self.data, self.dim)?),
        }
        self.kept = KeptRows::default();
        Ok(())
    }

    /// The rows as a matrix, with their sketch if they have one.
    pub(crate) fn view(&self) -> Result<MatrixView<'_>, IndexError> {
        let view = MatrixView::f16(&self.data, self.dim)?;
        Ok(match &self.sketch {
            Some(sketch) => view.with_sketch(sketch.view())?,
            None => view,
        })
    }

    /// The rows' sketch, if they have one.
    pub(crate) fn sketch(&self) -> Option<SketchView<'_>> {
        self.sketch.as_ref().map(Sketch::view)
    }

    /// Rows.
    pub(crate) fn len(&self) -> usize {
        self.data.len().checked_div(self.dim).unwrap_or(0)
    }

    /// Bytes held.
    pub(crate) fn bytes(&self) -> usize {
        2 * self.data.len() + self.sketch.as_ref().map_or(0, Sketch::bytes)
    }
}

/// Index build failures.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// The vectors do not match the records.
    #[error("{level}: {got} values for {rows} rows of dimension {dim}")]
    Shape {
        /// Which level.
        level: &'static str,
        /// Values given.
        got: usize,
        /// Rows expected.
        rows: usize,
        /// Dimension.
        dim: usize,
    },
    /// A record refers to one that is not in the namespace.
    #[error("{what} refers to {missing}, which is not in the namespace")]
    Dangling {
        /// The referring record.
        what: String,
        /// The missing id.
        missing: String,
    },
    /// The scoring core refused its input.
    #[error(transparent)]
    Compute(#[from] ComputeError),
    /// The approximate index failed.
    #[error(transparent)]
    Ann(#[from] trajwiki_ann::AnnError),
    /// A stored index (an index segment) does not decode into an index.
    #[error("stored index: {0}")]
    Stored(String),
}

/// A superseded statement in a message: the deprecated claim and where it was revised.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Superseded {
    /// The ref of the message that revised it, if a revision did.
    pub by: Option<String>,
}

/// The retrieval index of one namespace.
pub struct Index {
    /// The records.
    pub records: NamespaceRecords,
    /// Embedding dimension.
    pub dim: usize,
    pub(crate) vectors: Vectors,
    /// Non-index pages (indices into `records.pages`).
    pub(crate) pages: Vec<usize>,
    pub(crate) page_trajs: Vec<Vec<usize>>,
    pub(crate) traj_snaps: Vec<Vec<usize>>,
    pub(crate) snap_traj: Vec<usize>,
    pub(crate) snap_msgs: Vec<Vec<usize>>,
    /// Per entity, the trajectories that name it, in index order.
    pub(crate) entity_trajectories: FxHashMap<String, Vec<u32>>,
    pub(crate) vocab: Vocab,
    pub(crate) msg_terms: Vec<Vec<u32>>,
    /// Per trajectory, the term ids of its summary (sorted, each once), as a query's are found.
    pub(crate) traj_terms: Vec<Vec<u32>>,
    pub(crate) msg_bm25: Bm25Index,
    pub(crate) snap_bm25: Bm25Index,
    pub(crate) traj_bm25: Bm25Index,
    pub(crate) page_bm25: Bm25Index,
    pub(crate) lexicon: Lexicon,
    /// Messages in no snapshot yet (ingested after the last build, or an open exchange): the
    /// direct turn routes still reach them.
    pub unbuilt: usize,
    /// Snapshots linked by claim revisions (both ways).
    pub(crate) update_links: Vec<Vec<usize>>,
    /// Per message: superseded statements in it.
    pub(crate) superseded: Vec<Vec<Superseded>>,
    /// Sessions in order, with their first message index.
    pub(crate) session_of: Vec<u32>,
    /// Per message: the normalised key of its speaker.
    pub(crate) speaker_of: Vec<String>,
    /// Per message: bit f set when it mentions an item of `ITEM_FAMILIES[f]`.
    pub(crate) families_of: Vec<u64>,
    /// Per message: its rendered context line and that line's whitespace tokens.
    pub(crate) lines: Vec<(String, usize)>,
    /// Per message: its line's bytes and tokens as the message alone decides it (before what
    /// later records say of it).
    pub(crate) base_len: Vec<(usize, usize)>,
    /// Per non-index page: its term ids.
    pub(crate) page_terms: Vec<Vec<u32>>,
    /// The records' positions by id.
    pub(crate) ids: Ids,
    /// Per revised claim: the claim that revised it (the last in record order).
    pub(crate) revised_by: FxHashMap<ClaimId, u32>,
    /// Per message: the snapshots that hold it, in record order.
    pub(crate) msg_snaps: Vec<Vec<usize>>,
    /// Per message: the claims grounded in it, in record order.
    pub(crate) msg_claims: Vec<Vec<usize>>,
    /// Per message that restates a deprecated claim (`records.restatements`): those claims, in
    /// record order.
    pub(crate) restated_in: FxHashMap<usize, Vec<usize>>,
}

/// The item families (`ITEM_FAMILIES`, by position) that `text` mentions an item of, compared
/// on stems so that "painted" meets "painting".
#[cfg(test)]
pub(crate) fn family_bits(text: &str) -> u64 {
    let stems: Vec<String> = words(text).into_iter().map(|(_, w)| stem(w)).collect();
    family_bits_of(&stems.iter().map(String::as_str).collect::<Vec<_>>())
}

/// [`family_bits`] of each text, stemming each distinct word once per thread.
pub(crate) fn family_bits_all(texts: &[String]) -> Vec<u64> {
    texts
        .par_iter()
        .map_init(HashMap::<String, String>::new, |cache, text| {
            let ws = words(text);
            for (_, w) in &ws {
                if !cache.contains_key(*w) {
                    cache.insert(w.to_string(), stem(w));
                }
            }
            let stems: Vec<&str> = ws.iter().map(|(_, w)| cache[*w].as_str()).collect();
            family_bits_of(&stems)
        })
        .collect()
}

/// The item families whose items occur, as whole stemmed phrases, in `stems`.
fn family_bits_of(stems: &[&str]) -> u64 {
    // Each item's stems with its family, by the item's first stem.
    type Items = HashMap<String, Vec<(Vec<String>, usize)>>;
    static ITEMS: OnceLock<Items> = OnceLock::new();
    let items = ITEMS.get_or_init(|| {
        let mut by_first = Items::new();
        for (f, (_, items)) in ITEM_FAMILIES.iter().enumerate() {
            for item in *items {
                let stems: Vec<String> = item.split_whitespace().map(stem).collect();
                by_first
                    .entry(stems[0].clone())
                    .or_default()
                    .push((stems, f));
            }
        }
        by_first
    });
    let mut bits = 0u64;
    for (i, first) in stems.iter().enumerate() {
        for (item, f) in items.get(*first).into_iter().flatten() {
            let rest = &stems[i..];
            if rest.len() >= item.len() && item.iter().zip(rest).all(|(a, b)| a == b) {
                bits |= 1 << f;
            }
        }
    }
    bits
}

/// The texts a chunk of [`chunk_keywords`] holds, for `len` texts: chunks that keep every thread
/// busy, of at least 256 texts.
pub(crate) fn keyword_chunk_len(len: usize) -> usize {
    len.div_ceil(4 * rayon::current_num_threads()).max(256)
}

/// The terms of an index, numbered as they were met, with the number of documents that use
/// each: a term no document uses any longer (a trajectory's summary changed) is unknown to
/// queries, as it is to an index loaded now.
#[derive(Default, Clone)]
pub(crate) struct Vocab {
    ids: FxHashMap<Arc<str>, u32>,
    terms: Vec<Arc<str>>,
    uses: Vec<u32>,
}

impl Vocab {
    /// The id of `term`, numbered next if it is new, counting one more use of it.
    fn id_of(&mut self, term: &Arc<str>) -> u32 {
        let id = match self.ids.get(&**term) {
            Some(&id) => id,
            None => {
                let id = self.terms.len() as u32;
                self.ids.insert(Arc::clone(term), id);
                self.terms.push(Arc::clone(term));
                self.uses.push(0);
                id
            }
        };
        self.uses[id as usize] += 1;
        id
    }

    /// One use fewer of each of `ids`.
    pub(crate) fn release(&mut self, ids: &[u32]) {
        for &id in ids {
            let uses = &mut self.uses[id as usize];
            *uses = uses.saturating_sub(1);
        }
    }

    /// The id of `term`, if a document of the index uses it.
    pub(crate) fn get(&self, term: &str) -> Option<u32> {
        self.ids
            .get(term)
            .copied()
            .filter(|&id| self.uses[id as usize] > 0)
    }

    /// The text of term `id`.
    pub(crate) fn term(&self, id: u32) -> &str {
        &self.terms[id as usize]
    }

    /// Approximate heap bytes.
    fn heap_bytes(&self) -> usize {
        self.terms.iter().map(|k| 60 + k.len()).sum()
    }

    /// The terms by id and each one's uses (for storing the vocabulary).
    pub(crate) fn parts(&self) -> (&[Arc<str>], &[u32]) {
        (&self.terms, &self.uses)
    }

    /// The vocabulary whose [`parts`](Self::parts) these are; `None` when they differ in length
    /// or name a term twice.
    pub(crate) fn from_parts(terms: Vec<String>, uses: Vec<u32>) -> Option<Vocab> {
        if terms.len() != uses.len() {
            return None;
        }
        let terms: Vec<Arc<str>> = terms.into_iter().map(Arc::from).collect();
        let mut ids = FxHashMap::default();
        ids.reserve(terms.len());
        for (id, t) in terms.iter().enumerate() {
            if ids.insert(Arc::clone(t), id as u32).is_some() {
                return None;
            }
        }
        Some(Vocab { ids, terms, uses })
    }
}

/// Term ids of texts given by their keywords (each text's in keyword order, without repeats;
/// see [`Derived::keywords`]): a keyword new to `vocab` is numbered next, in text order, then in
/// the text's keyword order, as one pass over the texts numbers them. Each text's ids sorted.
pub(crate) fn numbered(vocab: &mut Vocab, texts: &[Keywords]) -> Vec<Vec<u32>> {
    texts
        .iter()
        .map(|keywords| {
            let mut row: Vec<u32> = keywords.iter().map(|k| vocab.id_of(k)).collect();
            row.sort_unstable();
            row
        })
        .collect()
}

/// The keywords of a run of texts: each distinct keyword once, and per text the indices of its
/// keywords, sorted by keyword and without repeats.
pub(crate) struct ChunkKeywords {
    pub(crate) keywords: Vec<String>,
    pub(crate) texts: Vec<Vec<u32>>,
}

pub(crate) fn chunk_keywords(texts: &[String]) -> ChunkKeywords {
    // A word as written → the index of its keyword, or `NONE` when it is no keyword.
    const NONE: u32 = u32::MAX;
    let mut seen: FxHashMap<&str, u32> = FxHashMap::default();
    let mut index: FxHashMap<String, u32> = FxHashMap::default();
    let mut keywords: Vec<String> = Vec::new();
    let mut rows: Vec<Vec<u32>> = texts
        .iter()
        .map(|text| {
            let mut row: Vec<u32> = Vec::new();
            each_word(text, |_, w| {
                let k = *seen.entry(w).or_insert_with(|| match keyword(w) {
                    Some(k) => *index.entry(k).or_insert_with_key(|k| {
                        keywords.push(k.clone());
                        keywords.len() as u32 - 1
                    }),
                    None => NONE,
                });
                if k != NONE {
                    row.push(k);
                }
            });
            row
        })
        .collect();
    // Keywords renumbered in their sorted order, so that a text's list sorts as integers.
    let mut order: Vec<u32> = (0..keywords.len() as u32).collect();
    order.sort_unstable_by(|&a, &b| keywords[a as usize].cmp(&keywords[b as usize]));
    let mut rank = vec![0u32; keywords.len()];
    for (r, &k) in order.iter().enumerate() {
        rank[k as usize] = r as u32;
    }
    let mut slots: Vec<Option<String>> = keywords.into_iter().map(Some).collect();
    let keywords = order
        .iter()
        .map(|&k| slots[k as usize].take().expect("a permutation"))
        .collect();
    for row in &mut rows {
        for k in row.iter_mut() {
            *k = rank[*k as usize];
        }
        row.sort_unstable();
        row.dedup();
    }
    ChunkKeywords {
        keywords,
        texts: rows,
    }
}

/// The keywords of each derived level's texts, in record order.
struct LevelKeywords {
    snapshots: Vec<Keywords>,
    trajectories: Vec<Keywords>,
    pages: Vec<Keywords>,
}

/// The sparse side of an index: term ids and a BM25 index per level.
struct Sparse {
    msg: Bm25Index,
    snap: Bm25Index,
    traj: Bm25Index,
    page: Bm25Index,
    vocab: Vocab,
    msg_terms: Vec<Vec<u32>>,
    traj_terms: Vec<Vec<u32>>,
    page_terms: Vec<Vec<u32>>,
}

/// The links between an index's records and its per-message lists.
struct Linked {
    update_links: Vec<Vec<usize>>,
    superseded: Vec<Vec<Superseded>>,
    msg_snaps: Vec<Vec<usize>>,
    msg_claims: Vec<Vec<usize>>,
    restated_in: FxHashMap<usize, Vec<usize>>,
    revised_by: FxHashMap<ClaimId, u32>,
}

/// Message `mi` restates claim `ci`: `ci` joins the message's restated claims, in record
/// order, once.
pub(crate) fn add_restated(restated_in: &mut FxHashMap<usize, Vec<usize>>, mi: usize, ci: usize) {
    let claims = restated_in.entry(mi).or_default();
    if let Err(at) = claims.binary_search(&ci) {
        claims.insert(at, ci);
    }
}

impl Sparse {
    /// The derived levels' keywords numbered after the messages' terms (in `vocab`), level
    /// after level, and the four BM25 indexes, built side by side (they share nothing).
    fn new(
        mut vocab: Vocab,
        msg_terms: Vec<Vec<u32>>,
        keywords: &LevelKeywords,
    ) -> Result<Sparse, ComputeError> {
        // The derived levels' keywords numbered level after level.
        let snap_terms = numbered(&mut vocab, &keywords.snapshots);
        let traj_terms = numbered(&mut vocab, &keywords.trajectories);
        let page_terms = numbered(&mut vocab, &keywords.pages);
        let bm25 = |docs: &[Vec<u32>]| -> Result<Bm25Index, ComputeError> {
            let refs: Vec<&[u32]> = docs.iter().map(Vec::as_slice).collect();
            Bm25Index::build(&refs, Bm25Params::default())
        };
        // The four indexes share nothing: built side by side.
        let ((msg, snap), (traj, page)) = rayon::join(
            || rayon::join(|| bm25(&msg_terms), || bm25(&snap_terms)),
            || rayon::join(|| bm25(&traj_terms), || bm25(&page_terms)),
        );
        Ok(Sparse {
            msg: msg?,
            snap: snap?,
            traj: traj?,
            page: page?,
            vocab,
            msg_terms,
            traj_terms,
            page_terms,
        })
    }
}

/// The positions of an index's records by id.
#[derive(Default)]
pub(crate) struct Ids {
    pub messages: FxHashMap<MessageId, u32>,
    pub snapshots: FxHashMap<SnapshotId, u32>,
    pub trajectories: FxHashMap<TrajectoryId, u32>,
    pub claims: FxHashMap<ClaimId, u32>,
}

impl Ids {
    pub(crate) fn of(records: &NamespaceRecords) -> Ids {
        fn positions<'a, K: Clone + Eq + std::hash::Hash + Send + 'a>(
            keys: impl Iterator<Item = &'a K>,
        ) -> FxHashMap<K, u32> {
            keys.enumerate()
                .map(|(i, k)| (k.clone(), i as u32))
                .collect()
        }
        // Four maps that share nothing: made side by side.
        let ((messages, snapshots), (trajectories, claims)) = rayon::join(
            || {
                rayon::join(
                    || positions(records.messages.iter().map(|m| &m.id)),
                    || positions(records.snapshots.iter().map(|s| &s.id)),
                )
            },
            || {
                rayon::join(
                    || positions(records.trajectories.iter().map(|t| &t.id)),
                    || positions(records.claims.iter().map(|(c, _)| &c.id)),
                )
            },
        );
        Ids {
            messages,
            snapshots,
            trajectories,
            claims,
        }
    }

    pub fn message(&self, id: &MessageId) -> Option<usize> {
        self.messages.get(id).map(|&i| i as usize)
    }

    pub fn snapshot(&self, id: &SnapshotId) -> Option<usize> {
        self.snapshots.get(id).map(|&i| i as usize)
    }

    pub fn trajectory(&self, id: &TrajectoryId) -> Option<usize> {
        self.trajectories.get(id).map(|&i| i as usize)
    }

    pub fn claim(&self, id: &ClaimId) -> Option<usize> {
        self.claims.get(id).map(|&i| i as usize)
    }

    /// Approximate heap bytes.
    fn heap_bytes(&self) -> usize {
        72 * (self.messages.len()
            + self.snapshots.len()
            + self.trajectories.len()
            + self.claims.len())
    }
}

/// The superseded statements in message `mi`: its deprecated claims (`msg_claims`, then the
/// deprecated claims it restates, `restated`, each in record order), each with where it was
/// revised (`revised_by`: a revised claim's reviser).
pub(crate) fn superseded_in(
    records: &NamespaceRecords,
    ids: &Ids,
    revised_by: &FxHashMap<ClaimId, u32>,
    msg_claims: &[usize],
    restated: Option<&Vec<usize>>,
) -> Vec<Superseded> {
    msg_claims
        .iter()
        .chain(restated.into_iter().flatten())
        .filter(|&&ci| records.claims[ci].1 == ClaimStatus::Deprecated)
        .map(|&ci| {
            let by = revised_by
                .get(&records.claims[ci].0.id)
                .and_then(|&r| records.claims[r as usize].0.source_message_ids.first())
                .and_then(|m| ids.message(m))
                .map(|mi| {
                    let m = &records.messages[mi];
                    m.external_ref.clone().unwrap_or_else(|| m.id.to_string())
                });
            Superseded { by }
        })
        .collect()
}

/// Links snapshots `a` and `b` (both ways) when claim `c` revises a claim (of another
/// snapshot), as [`Linked::new`] does for each claim in record order.
pub(crate) fn link_revision(
    records: &NamespaceRecords,
    ids: &Ids,
    c: &Claim,
    update_links: &mut [Vec<usize>],
) {
    let Some(from) = &c.revised_from else {
        return;
    };
    let snapshot_of = |id: &ClaimId| {
        ids.claim(id)
            .and_then(|ci| ids.snapshot(&records.claims[ci].0.snapshot))
    };
    if let (Some(a), Some(b)) = (snapshot_of(from), snapshot_of(&c.id)) {
        if a != b {
            update_links[a].push(b);
            update_links[b].push(a);
        }
    }
}

impl Linked {
    /// The links of `records` (`ids` their positions, `snap_msgs` each snapshot's messages):
    /// claim revisions link snapshots, deprecated claims flag their messages, and each message
    /// lists its snapshots and claims.
    fn new(records: &NamespaceRecords, ids: &Ids, snap_msgs: &[Vec<usize>]) -> Linked {
        let mut update_links = vec![Vec::new(); records.snapshots.len()];
        let mut revised_by: FxHashMap<ClaimId, u32> = FxHashMap::default();
        for (ci, (c, _)) in records.claims.iter().enumerate() {
            if let Some(from) = &c.revised_from {
                revised_by.insert(from.clone(), ci as u32);
                link_revision(records, ids, c, &mut update_links);
            }
        }
        let mut msg_snaps = vec![Vec::new(); records.messages.len()];
        for (si, ms) in snap_msgs.iter().enumerate() {
            for &mi in ms {
                msg_snaps[mi].push(si);
            }
        }
        let mut msg_claims = vec![Vec::new(); records.messages.len()];
        for (ci, (c, _)) in records.claims.iter().enumerate() {
            for m in &c.source_message_ids {
                if let Some(mi) = ids.message(m) {
                    msg_claims[mi].push(ci);
                }
            }
        }
        let mut restated_in = FxHashMap::default();
        for (c, m) in &records.restatements {
            if let (Some(ci), Some(mi)) = (ids.claim(c), ids.message(m)) {
                add_restated(&mut restated_in, mi, ci);
            }
        }
        let superseded = msg_claims
            .par_iter()
            .enumerate()
            .map(|(mi, cs)| superseded_in(records, ids, &revised_by, cs, restated_in.get(&mi)))
            .collect();
        Linked {
            update_links,
            superseded,
            msg_snaps,
            msg_claims,
            restated_in,
            revised_by,
        }
    }
}

/// What an index keeps per message that the messages alone decide: their sparse terms (which
/// are numbered first in the vocabulary), item families, speakers and sessions, the namespace
/// lexicon, and their context lines as far as the messages decide them. Prepared on its own, it
/// can be computed while the rest of a namespace is read.
pub struct MessageSide {
    vocab: Vocab,
    terms: Vec<Vec<u32>>,
    families_of: Vec<u64>,
    speaker_of: Vec<String>,
    session_of: Vec<u32>,
    lexicon: Lexicon,
    base_lines: Vec<(String, usize)>,
}

impl MessageSide {
    /// Prepares the side of `messages`, in the index's order (session, position), with the
    /// build's lexicon setting; what `derived` keeps of a message is reused, what it lacks is
    /// derived now (and kept, unless it is [`Derived::transient`]).
    pub fn new(
        messages: &[&SourceMessage],
        entity_min_count: usize,
        derived: &mut Derived,
    ) -> MessageSide {
        let (parts, lexicon) = derived.messages_and_lexicon(messages, entity_min_count);
        let keywords: Vec<Keywords> = parts.iter().map(|p| Arc::clone(&p.keywords)).collect();
        let mut vocab = Vocab::default();
        let terms = numbered(&mut vocab, &keywords);
        MessageSide {
            vocab,
            terms,
            families_of: parts.iter().map(|p| p.families).collect(),
            speaker_of: parts.iter().map(|p| p.speaker.clone()).collect(),
            session_of: messages.iter().map(|m| m.session).collect(),
            lexicon,
            base_lines: parts.iter().map(|p| p.line.clone()).collect(),
        }
    }
}

/// Approximate heap bytes an index spends on a message: the record, its line, terms, postings
/// and maps.
pub(crate) fn message_bytes(m: &SourceMessage) -> usize {
    160 + m.text.len() + m.speaker.len()
}

/// Approximate heap bytes of a snapshot record.
pub(crate) fn snapshot_bytes(s: &Snapshot) -> usize {
    200 + s.summary.len()
        + s.context.len()
        + 40 * (s.claim_ids.len() + s.source_message_ids.len() + s.keywords.len())
}

/// Approximate heap bytes of a trajectory record.
pub(crate) fn trajectory_bytes(t: &Trajectory) -> usize {
    200 + t.summary.len() + 40 * t.snapshot_ids.len()
}

/// Approximate heap bytes of a page record.
pub(crate) fn page_bytes(p: &WikiPage) -> usize {
    200 + p.title.len() + p.body.len() + p.routing_text.len() + 40 * p.trajectory_ids.len()
}

/// Approximate heap bytes of a claim record.
pub(crate) fn claim_bytes(c: &Claim) -> usize {
    160 + c.text.len() + c.quote.len() + 40 * c.source_message_ids.len()
}

/// Snapshot `s`'s messages and trajectory, by position.
pub(crate) fn snapshot_links(s: &Snapshot, ids: &Ids) -> Result<(Vec<usize>, usize), IndexError> {
    let dangling = |missing: String| IndexError::Dangling {
        what: s.id.to_string(),
        missing,
    };
    let ms = s
        .source_message_ids
        .iter()
        .map(|m| ids.message(m).ok_or_else(|| dangling(m.to_string())))
        .collect::<Result<Vec<_>, _>>()?;
    let t = ids
        .trajectory(&s.trajectory)
        .ok_or_else(|| dangling(s.trajectory.to_string()))?;
    Ok((ms, t))
}

/// Trajectory `t`'s snapshots, by position.
pub(crate) fn trajectory_snapshots(t: &Trajectory, ids: &Ids) -> Result<Vec<usize>, IndexError> {
    t.snapshot_ids
        .iter()
        .map(|s| {
            ids.snapshot(s).ok_or_else(|| IndexError::Dangling {
                what: t.id.to_string(),
                missing: s.to_string(),
            })
        })
        .collect()
}

/// A trajectory's row from its snapshots' centroids (`snapshot(i, out)` writes snapshot `i`'s):
/// 0.75 × the centroid of its snapshots + 0.15 × its latest snapshot's, in f16.
pub(crate) fn trajectory_row(
    out: &mut [f16],
    snaps: &[usize],
    c: &mut [f32],
    scratch: &mut [f32],
    mut snapshot: impl FnMut(usize, &mut [f32]),
) {
    centroid_into(c, scratch, snaps.iter().copied(), &mut snapshot);
    let mut latest = vec![0.0f32; out.len()];
    snapshot(
        *snaps.last().expect("a trajectory has a snapshot"),
        &mut latest,
    );
    for ((o, &t), &s) in out.iter_mut().zip(c.iter()).zip(&latest) {
        *o = f16::from_f32(0.75 * t + 0.15 * s);
    }
}

/// A non-index page's row: the mean of its trajectories' rows (`members`, positions into
/// `trajectories`, f16 rows of `out.len()` values), summed in `members`' order at f32 and
/// normalised to unit length (zero for a page of no trajectory the index holds). A load and an
/// in-place change compute it from the same rows in the same order, so they agree bit for bit.
pub(crate) fn page_row(out: &mut [f16], members: &[usize], trajectories: &[f16]) {
    let dim = out.len();
    let mut sum = vec![0.0f32; dim];
    for &t in members {
        for (s, v) in sum.iter_mut().zip(&trajectories[t * dim..(t + 1) * dim]) {
            *s += v.to_f32();
        }
    }
    let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt();
    let scale = if norm > 0.0 { 1.0 / norm } else { 0.0 };
    for (o, s) in out.iter_mut().zip(&sum) {
        *o = f16::from_f32(s * scale);
    }
}

/// Snapshot `s`'s centroid (of its messages `ms`), the one `derived` kept or computed now.
pub(crate) fn snapshot_centroid(
    derived: &Derived,
    messages: &MessageVectors,
    s: &Snapshot,
    ms: &[usize],
    out: &mut [f32],
    scratch: &mut [f32],
) {
    match derived.centroid(&s.id, &s.source_message_ids) {
        Some(c) if c.len() == out.len() => out.copy_from_slice(c),
        _ => centroid_into(out, scratch, ms.iter().copied(), |i, row| {
            messages.row_into(i, row)
        }),
    }
}

/// Keeps snapshot `s`'s centroid `c` in `derived` when its sources' rows are the vector
/// file's: they never change, while a row embedded at load may be stored at another precision
/// by the next build.
pub(crate) fn keep_centroid(
    derived: &mut Derived,
    messages: &MessageVectors,
    s: &Snapshot,
    ms: &[usize],
    c: &[f32],
) {
    if ms.iter().all(|&i| messages.is_shared(i)) {
        derived.keep_centroid(&s.id, &s.source_message_ids, c);
    }
}

/// Appends to a message's line (and its tokens) what its superseded statements say.
pub(crate) fn add_superseded(line: &mut (String, usize), superseded: &[Superseded]) {
    if superseded.is_empty() {
        return;
    }
    // The suffix starts with a space: its tokens add to the line's.
    let at = line.0.len();
    push_superseded(&mut line.0, superseded);
    line.1 += line.0[at..].split_whitespace().count();
}

/// A snapshot's text as every level scores it lexically: its summary, then the text of each of
/// its claims that `claim_text` finds, a line each.
pub(crate) fn snapshot_text<'a>(
    s: &Snapshot,
    claim_text: impl Fn(&ClaimId) -> Option<&'a str>,
) -> String {
    let mut t = s.summary.clone();
    for x in s.claim_ids.iter().filter_map(claim_text) {
        t.push('\n');
        t.push_str(x);
    }
    t
}

/// Page `p`'s trajectories, by position (those in the namespace).
pub(crate) fn page_trajectories(p: &WikiPage, ids: &Ids) -> Vec<usize> {
    p.trajectory_ids
        .iter()
        .filter_map(|t| ids.trajectory(t))
        .collect()
}

impl Index {
    /// Whether the message vectors the index shares (a mapped vector file) were whole at every
    /// read so far: false once another process cut the file under it, and the answers computed
    /// since are to be thrown away with the index (see [`crate::vectors::SharedRows::intact`]).
    pub fn intact(&self) -> bool {
        self.vectors.messages.intact()
    }

    /// The routing texts of the non-index pages of `records` ([`LevelTexts::pages`]), which
    /// BM25 scores (their rows are derived from their trajectories', not embedded).
    pub fn page_texts(records: &NamespaceRecords) -> Vec<String> {
        records
            .pages
            .iter()
            .filter(|p| p.kind != PageKind::Index)
            .map(|p| p.routing_text.clone())
            .collect()
    }

    /// The texts of the levels made of parts, [`LevelTexts::snapshots`] (summary and claims)
    /// and [`LevelTexts::trajectories`].
    pub fn part_texts(records: &NamespaceRecords) -> (Vec<String>, Vec<String>) {
        let claim_text: FxHashMap<&ClaimId, &str> = records
            .claims
            .iter()
            .map(|(c, _)| (&c.id, c.text.as_str()))
            .collect();
        let snapshots = records
            .snapshots
            .par_iter()
            .map(|s| snapshot_text(s, |c| claim_text.get(c).copied()))
            .collect();
        let trajectories = records
            .trajectories
            .iter()
            .map(|t| t.summary.clone())
            .collect();
        (snapshots, trajectories)
    }

    /// Builds the index from `records` (in an index's order: [`NamespaceRecords::sort_for_index`]
    /// before the level texts are made), the [`MessageSide`] of `records.messages` and the
    /// level texts of `records` ([`Index::part_texts`] and [`Index::page_texts`]), reusing what
    /// `derived` kept of the records' keywords and centroids (and keeping what it derives now).
    pub fn new(
        records: NamespaceRecords,
        side: MessageSide,
        vectors: LevelVectors,
        texts: &LevelTexts,
        derived: &mut Derived,
    ) -> Result<Index, IndexError> {
        let dim = vectors.dim;
        if side.session_of.len() != records.messages.len() {
            return Err(IndexError::Shape {
                level: "message side",
                got: side.session_of.len(),
                rows: records.messages.len(),
                dim: 1,
            });
        }
        if vectors.messages.len() != records.messages.len() {
            return Err(IndexError::Shape {
                level: "messages",
                got: vectors.messages.len() * dim,
                rows: records.messages.len(),
                dim,
            });
        }
        let ids = Ids::of(&records);
        let mut snap_msgs = Vec::with_capacity(records.snapshots.len());
        let mut snap_traj = Vec::with_capacity(records.snapshots.len());
        for s in &records.snapshots {
            let (ms, t) = snapshot_links(s, &ids)?;
            snap_msgs.push(ms);
            snap_traj.push(t);
        }
        let traj_snaps = records
            .trajectories
            .iter()
            .map(|t| trajectory_snapshots(t, &ids))
            .collect::<Result<Vec<_>, _>>()?;
        // Snapshot and trajectory vectors: centroids of their parts, in order, as construction
        // computes them.
        let mut snapshots = vec![0.0f32; snap_msgs.len() * dim];
        {
            let kept = &*derived;
            snapshots
                .par_chunks_mut(dim.max(1))
                .zip(&snap_msgs)
                .zip(&records.snapshots)
                .for_each_init(
                    || vec![0.0f32; dim],
                    |scratch, ((out, ms), s)| {
                        snapshot_centroid(kept, &vectors.messages, s, ms, out, scratch)
                    },
                );
        }
        for ((s, ms), c) in records
            .snapshots
            .iter()
            .zip(&snap_msgs)
            .zip(snapshots.chunks(dim.max(1)))
        {
            keep_centroid(derived, &vectors.messages, s, ms, c);
        }
        let keywords = LevelKeywords {
            snapshots: derived.keywords(&texts.snapshots),
            trajectories: derived.keywords(&texts.trajectories),
            pages: derived.keywords(&texts.pages),
        };
        let mut trajectories = vec![f16::ZERO; traj_snaps.len() * dim];
        trajectories
            .par_chunks_mut(dim.max(1))
            .zip(&traj_snaps)
            .for_each_init(
                || (vec![0.0f32; dim], vec![0.0f32; dim]),
                |(c, scratch), (out, ss)| {
                    trajectory_row(out, ss, c, scratch, |i, r| {
                        r.copy_from_slice(&snapshots[i * dim..(i + 1) * dim])
                    })
                },
            );
        let pages: Vec<usize> = records
            .pages
            .iter()
            .enumerate()
            .filter(|(_, p)| p.kind != PageKind::Index)
            .map(|(i, _)| i)
            .collect();
        let page_trajs: Vec<Vec<usize>> = pages
            .iter()
            .map(|&pi| page_trajectories(&records.pages[pi], &ids))
            .collect();
        if texts.pages.len() != pages.len() {
            return Err(IndexError::Shape {
                level: "page texts",
                got: texts.pages.len(),
                rows: pages.len(),
                dim: 1,
            });
        }
        let mut page_rows = vec![f16::ZERO; pages.len() * dim];
        page_rows
            .par_chunks_mut(dim.max(1))
            .zip(&page_trajs)
            .for_each(|(out, members)| page_row(out, members, &trajectories));
        let to_f16 = |v: &[f32]| v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<f16>>();
        let vectors = Vectors {
            messages: vectors.messages,
            snapshots: Rows::new(to_f16(&snapshots), dim)?,
            trajectories: Rows::new(trajectories, dim)?,
            pages: Rows::new(page_rows, dim)?,
        };
        let mut entity_trajectories: FxHashMap<String, Vec<u32>> = FxHashMap::default();
        for (t, traj) in records.trajectories.iter().enumerate() {
            for e in &traj.signals.entities {
                match entity_trajectories.get_mut(e.as_str()) {
                    Some(list) => list.push(t as u32),
                    None => {
                        entity_trajectories.insert(e.clone(), vec![t as u32]);
                    }
                }
            }
        }

        // Sparse terms and BM25 per level, on one thread while the rest of the index is built
        // on the other (they share nothing). The messages' terms come numbered first.
        let MessageSide {
            vocab,
            terms: msg_terms,
            families_of,
            speaker_of,
            session_of,
            lexicon,
            base_lines,
        } = side;
        let (sparse, linked) = rayon::join(
            || Sparse::new(vocab, msg_terms, &keywords),
            || Linked::new(&records, &ids, &snap_msgs),
        );
        let Sparse {
            msg: msg_bm25,
            snap: snap_bm25,
            traj: traj_bm25,
            page: page_bm25,
            vocab,
            msg_terms,
            traj_terms,
            page_terms,
        } = sparse?;
        let Linked {
            update_links,
            superseded,
            msg_snaps,
            msg_claims,
            restated_in,
            revised_by,
        } = linked;
        let unbuilt = msg_snaps.iter().filter(|s| s.is_empty()).count();
        let base_len = base_lines.iter().map(|(l, t)| (l.len(), *t)).collect();
        let mut index = Index {
            dim,
            vectors,
            pages,
            page_trajs,
            traj_snaps,
            snap_traj,
            snap_msgs,
            entity_trajectories,
            vocab,
            msg_terms,
            traj_terms,
            page_terms,
            msg_bm25,
            snap_bm25,
            traj_bm25,
            page_bm25,
            lexicon,
            unbuilt,
            update_links,
            superseded,
            session_of,
            speaker_of,
            families_of,
            lines: base_lines,
            base_len,
            records,
            msg_snaps,
            msg_claims,
            restated_in,
            ids,
            revised_by,
        };
        // Every line is rendered once, at load: a search's length prior reads thousands of them.
        // The messages' side rendered what the messages decide; what later records say of a
        // message is appended here.
        let Index {
            lines, superseded, ..
        } = &mut index;
        lines
            .par_iter_mut()
            .zip(&*superseded)
            .filter(|(_, s)| !s.is_empty())
            .for_each(|(line, s)| add_superseded(line, s));
        Ok(index)
    }

    /// Approximate heap bytes of the index (records, vectors it owns, sparse indexes, rendered
    /// lines; not the memory-mapped vector file): what a cache of indexes counts.
    pub fn heap_bytes(&self) -> usize {
        let r = &self.records;
        let messages: usize = r.messages.iter().map(message_bytes).sum();
        let snapshots: usize = r.snapshots.iter().map(snapshot_bytes).sum();
        let trajectories: usize = r.trajectories.iter().map(trajectory_bytes).sum();
        let pages: usize = r.pages.iter().map(page_bytes).sum();
        let claims: usize = r.claims.iter().map(|(c, _)| claim_bytes(c)).sum();
        let v = &self.vectors;
        let vectors = v.messages.owned_bytes()
            + v.snapshots.bytes()
            + v.trajectories.bytes()
            + v.pages.bytes();
        let sparse = self.msg_bm25.heap_bytes()
            + self.snap_bm25.heap_bytes()
            + self.traj_bm25.heap_bytes()
            + self.page_bm25.heap_bytes()
            + self
                .msg_terms
                .iter()
                .chain(&self.traj_terms)
                .map(|t| 24 + 4 * t.len())
                .sum::<usize>()
            + self.vocab.heap_bytes()
            + self.ids.heap_bytes();
        let lines = self.lines.iter().map(|(l, _)| 32 + l.len()).sum::<usize>();
        // The per-message links: snapshots, claims, restated claims (24 bytes a list, 8 an
        // entry; a map entry its key and list), revisions, speakers, item families, line sizes.
        let lists = |l: &[Vec<usize>]| l.iter().map(|v| 24 + 8 * v.len()).sum::<usize>();
        let links = lists(&self.msg_snaps)
            + lists(&self.msg_claims)
            + self
                .restated_in
                .values()
                .map(|v| 40 + 8 * v.len())
                .sum::<usize>()
            + r.restatements
                .iter()
                .map(|(c, m)| 48 + c.as_str().len() + m.as_str().len())
                .sum::<usize>()
            + self
                .revised_by
                .keys()
                .map(|c| 32 + c.as_str().len())
                .sum::<usize>()
            + self.speaker_of.iter().map(|s| 24 + s.len()).sum::<usize>()
            + 8 * self.families_of.len()
            + 16 * self.base_len.len()
            + self
                .page_terms
                .iter()
                .map(|t| 24 + 4 * t.len())
                .sum::<usize>();
        messages + snapshots + trajectories + pages + claims + vectors + sparse + lines + links
    }

    /// Message `i`'s context line and its whitespace tokens.
    pub(crate) fn line(&self, i: usize) -> &(String, usize) {
        &self.lines[i]
    }

    /// The whitespace tokens of message `i`'s context line.
    pub fn line_tokens(&self, i: usize) -> usize {
        self.lines[i].1
    }

    /// The message vectors.
    pub fn vectors(&self) -> &MessageVectors {
        &self.vectors.messages
    }

    /// The snapshots (indices into `records.snapshots`) that hold message `i`, in record order.
    pub fn snapshots_of(&self, i: usize) -> &[usize] {
        &self.msg_snaps[i]
    }

    /// The claims (indices into `records.claims`) grounded in message `i`, in record order.
    pub fn claims_of(&self, i: usize) -> &[usize] {
        &self.msg_claims[i]
    }

    /// The text of term `id`.
    pub(crate) fn term(&self, id: u32) -> &str {
        self.vocab.term(id)
    }

    /// Term ids of a query (words unknown to the namespace are dropped).
    pub(crate) fn query_terms(&self, query: &str) -> Vec<u32> {
        let mut ids: Vec<u32> = keywords(query)
            .into_iter()
            .filter_map(|k| self.vocab.get(&k))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// Entity keys of the namespace named in a query (speakers included).
    pub(crate) fn query_entities(&self, query: &str) -> BTreeSet<String> {
        let mut out = self.lexicon.mentions(query);
        // Lower-case mentions of known entities too ("caroline's").
        for (_, w) in trajwiki_text::text::words(query) {
            let key = entity_key(w.trim_end_matches("'s"));
            if self.lexicon.entities.contains_key(&key) {
                out.insert(key);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn term_ids_are_those_of_one_pass_in_text_order() {
        let vocabulary = [
            "Painting",
            "paintings",
            "painted",
            "the",
            "Oslo",
            "harbour",
            "and",
            "running",
            "ran",
            "Caroline's",
            "42",
            "cats",
            "Cat",
            "trip",
            "to",
            "Lisbon",
            "garden",
            "roses",
            "dogs",
        ];
        let mut x = 7u64;
        let texts: Vec<String> = (0..3000)
            .map(|_| {
                (0..12)
                    .map(|_| {
                        x = x
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        vocabulary[(x >> 33) as usize % vocabulary.len()]
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        // The reference: each text's keywords in keyword order, new ones numbered as they come.
        let mut reference: HashMap<String, u32> = HashMap::new();
        let expected: Vec<Vec<u32>> = texts
            .iter()
            .map(|t| {
                let mut ids: Vec<u32> = keywords(t)
                    .into_iter()
                    .map(|k| {
                        let next = reference.len() as u32;
                        *reference.entry(k).or_insert(next)
                    })
                    .collect();
                ids.sort_unstable();
                ids
            })
            .collect();
        let mut vocab = Vocab::default();
        let keywords = Derived::transient().keywords(&texts);
        assert_eq!(numbered(&mut vocab, &keywords), expected);
        let numbered: HashMap<String, u32> = vocab
            .ids
            .into_iter()
            .map(|(k, id)| (k.to_string(), id))
            .collect();
        assert_eq!(numbered, reference);
    }

    #[test]
    fn item_families_match_on_stems_and_whole_phrases() {
        let family =
            |name: &str| 1u64 << ITEM_FAMILIES.iter().position(|(f, _)| *f == name).unwrap();
        assert_eq!(family_bits("Mel: I painted all day"), family("activity"));
        assert_ne!(family_bits("we played a board game") & family("game"), 0);
        assert_ne!(family_bits("my dogs love the beach") & family("pet"), 0);
        assert_ne!(family_bits("my dogs love the beach") & family("place"), 0);
        // Whole words only: "cathedral" holds no cat.
        assert_eq!(family_bits("the cathedral"), 0);
    }
}
