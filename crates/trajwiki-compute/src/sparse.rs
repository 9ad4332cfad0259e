//! Sparse scores over term ids: BM25 and Jaccard.

use std::collections::HashMap;

use rayon::prelude::*;

use crate::topk::{Hit, TopK};
use crate::ComputeError;

/// Checks that `set` is strictly increasing; `which` names it in the error.
pub fn check_sorted_set(set: &[u32], which: usize) -> Result<(), ComputeError> {
    match set.windows(2).position(|w| w[0] >= w[1]) {
        Some(p) => Err(ComputeError::UnsortedSet {
            which,
            position: p + 1,
        }),
        None => Ok(()),
    }
}

/// Jaccard similarity `|a ∩ b| / |a ∪ b|` of two strictly increasing term-id sets (0 when both
/// are empty).
pub fn jaccard(a: &[u32], b: &[u32]) -> Result<f32, ComputeError> {
    check_sorted_set(a, 0)?;
    check_sorted_set(b, 1)?;
    Ok(jaccard_sorted(a, b))
}

/// [`jaccard`] without the input check (inputs must be strictly increasing).
pub(crate) fn jaccard_sorted(a: &[u32], b: &[u32]) -> f32 {
    let (mut i, mut j, mut inter) = (0, 0, 0usize);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                inter += 1;
                i += 1;
                j += 1;
            }
        }
    }
    let union = a.len() + b.len() - inter;
    if union == 0 {
        0.0
    } else {
        inter as f32 / union as f32
    }
}

/// Jaccard of one query set against many document sets, in parallel. Document `i`'s error names
/// `which = i + 1` (the query is 0).
pub fn jaccard_many(query: &[u32], docs: &[&[u32]]) -> Result<Vec<f32>, ComputeError> {
    check_sorted_set(query, 0)?;
    for (i, d) in docs.iter().enumerate() {
        check_sorted_set(d, i + 1)?;
    }
    Ok(docs.par_iter().map(|d| jaccard_sorted(query, d)).collect())
}

thread_local! {
    /// [`Bm25Index::matches`]'s accumulator: `None` for a document no query term reached yet.
    static SCRATCH: std::cell::RefCell<Vec<Option<f32>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// BM25 parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bm25Params {
    /// Term-frequency saturation (1.2).
    pub k1: f32,
    /// Length normalisation (0.75).
    pub b: f32,
}

impl Default for Bm25Params {
    fn default() -> Self {
        Bm25Params { k1: 1.2, b: 0.75 }
    }
}

/// Inverse document frequency (the non-negative Lucene form).
#[inline]
pub fn bm25_idf(n_docs: usize, df: usize) -> f32 {
    let (n, df) = (n_docs as f64, df as f64);
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln() as f32
}

/// One term's BM25 contribution to one document — the expression every path uses.
#[inline]
pub fn bm25_term(idf: f32, tf: u32, doc_len: u32, avg_len: f32, p: Bm25Params) -> f32 {
    let tf = tf as f32;
    let norm = if avg_len > 0.0 {
        1.0 - p.b + p.b * (doc_len as f32 / avg_len)
    } else {
        1.0
    };
    idf * (tf * (p.k1 + 1.0)) / (tf + p.k1 * norm)
}

/// The average document length as every path computes it.
#[inline]
pub fn bm25_avg_len(total_len: u64, n_docs: usize) -> f32 {
    if n_docs == 0 {
        0.0
    } else {
        (total_len as f64 / n_docs as f64) as f32
    }
}

/// An inverted index over tokenised documents (term ids), scored by BM25, that takes documents
/// as they come: [`push`](Self::push) adds one, [`replace`](Self::replace) changes one.
///
/// Postings hold term frequencies, not weights: a document's contribution depends on the number
/// of documents and their average length, which every new document changes, so the weights are
/// computed when a query is scored (the same expression, [`bm25_term`], on the same inputs as a
/// build over all the documents at once). A query's terms are added in the order it gives them,
/// so that a caller that numbers its terms in any order scores alike when it orders the query
/// alike.
#[derive(Debug, Clone)]
pub struct Bm25Index {
    params: Bm25Params,
    doc_len: Vec<u32>,
    total_len: u64,
    /// term → postings of (doc, the term's frequency in it), in doc order.
    postings: HashMap<u32, Vec<(u32, u32)>>,
}

impl Bm25Index {
    /// Approximate heap bytes: document lengths and postings.
    pub fn heap_bytes(&self) -> usize {
        self.doc_len.len() * 4
            + self
                .postings
                .values()
                .map(|p| 24 + p.len() * 8)
                .sum::<usize>()
    }

    /// An index of no documents.
    pub fn empty(params: Bm25Params) -> Result<Self, ComputeError> {
        if !params.k1.is_finite() || params.k1 < 0.0 {
            return Err(ComputeError::InvalidParameter {
                name: "k1",
                value: params.k1 as f64,
                expected: "a finite number ≥ 0",
            });
        }
        if !(0.0..=1.0).contains(&params.b) {
            return Err(ComputeError::InvalidParameter {
                name: "b",
                value: params.b as f64,
                expected: "a number in [0, 1]",
            });
        }
        Ok(Bm25Index {
            params,
            doc_len: Vec::new(),
            total_len: 0,
            postings: HashMap::new(),
        })
    }

    /// Builds the index. Documents are bags of term ids (any order, repeats are frequencies).
    pub fn build(docs: &[&[u32]], params: Bm25Params) -> Result<Self, ComputeError> {
        let mut index = Self::empty(params)?;
        index.doc_len.reserve(docs.len());
        for terms in docs {
            index.push(terms)?;
        }
        Ok(index)
    }

    /// Adds a document (a bag of term ids) after the others; returns its id.
    pub fn push(&mut self, terms: &[u32]) -> Result<u32, ComputeError> {
        let doc = u32::try_from(self.doc_len.len())
            .ok()
            .filter(|&d| d < u32::MAX)
            .ok_or(ComputeError::IndexOutOfRange {
                what: "document count (ids are u32)",
                index: self.doc_len.len() as u64,
                len: u32::MAX as usize,
            })?;
        self.doc_len.push(terms.len() as u32);
        self.total_len += terms.len() as u64;
        for (t, f) in frequencies(terms) {
            self.postings.entry(t).or_default().push((doc, f));
        }
        Ok(doc)
    }

    /// Replaces document `doc`, which held `old`, by `new`. `old` must be the bag the document
    /// was pushed (or last replaced) with.
    pub fn replace(&mut self, doc: u32, old: &[u32], new: &[u32]) -> Result<(), ComputeError> {
        let len = self.doc_len.len();
        let slot = self
            .doc_len
            .get_mut(doc as usize)
            .ok_or(ComputeError::IndexOutOfRange {
                what: "document",
                index: doc as u64,
                len,
            })?;
        if *slot as usize != old.len() {
            return Err(ComputeError::InvalidParameter {
                name: "old document",
                value: old.len() as f64,
                expected: "the terms the document holds",
            });
        }
        self.total_len = self.total_len - old.len() as u64 + new.len() as u64;
        *slot = new.len() as u32;
        for (t, _) in frequencies(old) {
            if let Some(list) = self.postings.get_mut(&t) {
                if let Ok(at) = list.binary_search_by_key(&doc, |p| p.0) {
                    list.remove(at);
                }
                if list.is_empty() {
                    self.postings.remove(&t);
                }
            }
        }
        for (t, f) in frequencies(new) {
            let list = self.postings.entry(t).or_default();
            let at = list.partition_point(|p| p.0 < doc);
            list.insert(at, (doc, f));
        }
        Ok(())
    }

    /// Number of documents.
    pub fn len(&self) -> usize {
        self.doc_len.len()
    }

    /// Whether the index has no documents.
    pub fn is_empty(&self) -> bool {
        self.doc_len.is_empty()
    }

    /// Scores of the documents that contain at least one query term, as `(doc, score)` in doc
    /// order. Query terms count once each, added in the query's order.
    pub fn matches(&self, query: &[u32]) -> Vec<Hit> {
        let mut hits = Vec::new();
        self.each_match(query, |d, s| hits.push((d, s)));
        hits.sort_unstable_by_key(|h| h.0);
        hits
    }

    /// Calls `f` with each document that contains at least one query term and its score, in no
    /// particular order. Query terms count once each, and are added in the query's order.
    fn each_match(&self, query: &[u32], mut f: impl FnMut(u32, f32)) {
        let n = self.doc_len.len();
        let avg_len = bm25_avg_len(self.total_len, n);
        // A dense accumulator: each document's terms are added in the query's order, so the sums
        // are the same as any other accumulation in that order. It is the thread's scratch,
        // grown to the largest index it served and left empty (only the touched entries are
        // reset), so a query allocates what it matches, not the size of the index.
        SCRATCH.with(|scratch| {
            let mut acc = scratch.borrow_mut();
            if acc.len() < n {
                acc.resize(n, None);
            }
            let mut touched: Vec<u32> = Vec::new();
            for (i, t) in query.iter().enumerate() {
                if query[..i].contains(t) {
                    continue;
                }
                let Some(list) = self.postings.get(t) else {
                    continue;
                };
                let idf = bm25_idf(n, list.len());
                for &(d, tf) in list {
                    let w = bm25_term(idf, tf, self.doc_len[d as usize], avg_len, self.params);
                    match &mut acc[d as usize] {
                        Some(sum) => *sum += w,
                        slot => {
                            *slot = Some(w);
                            touched.push(d);
                        }
                    }
                }
            }
            for d in touched {
                f(d, acc[d as usize].take().expect("touched"));
            }
        })
    }

    /// The `k` best matching documents, by score then doc id (terms added in the query's order).
    pub fn topk(&self, query: &[u32], k: usize) -> Vec<Hit> {
        let mut top = TopK::new(k);
        // The top k do not depend on the order of the pushes.
        self.each_match(query, |d, s| top.push(d, s));
        top.into_sorted()
    }

    /// The `k` best matching documents among `docs` (distinct ids, any order), scored and
    /// ordered as [`topk`](Self::topk) scores and orders them: the whole index's ranking with
    /// every other document left out. Its work is a look-up per document and query term, not
    /// the query terms' postings, so a small candidate set costs the same however large the
    /// index grows. Ids past the index are refused.
    pub fn topk_among(
        &self,
        query: &[u32],
        docs: &[u32],
        k: usize,
    ) -> Result<Vec<Hit>, ComputeError> {
        let n = self.doc_len.len();
        if let Some(&d) = docs.iter().find(|&&d| d as usize >= n) {
            return Err(ComputeError::IndexOutOfRange {
                what: "a candidate document",
                index: d as u64,
                len: n,
            });
        }
        let avg_len = bm25_avg_len(self.total_len, n);
        // Each distinct query term once, in the query's order, with its postings and weight.
        let terms: Vec<(&[(u32, u32)], f32)> = query
            .iter()
            .enumerate()
            .filter(|&(i, t)| !query[..i].contains(t))
            .filter_map(|(_, t)| self.postings.get(t))
            .map(|list| (list.as_slice(), bm25_idf(n, list.len())))
            .collect();
        let mut top = TopK::new(k);
        for &d in docs {
            let mut sum: Option<f32> = None;
            for &(list, idf) in &terms {
                if let Ok(at) = list.binary_search_by_key(&d, |p| p.0) {
                    let w = bm25_term(
                        idf,
                        list[at].1,
                        self.doc_len[d as usize],
                        avg_len,
                        self.params,
                    );
                    // Added in the query's order, as `each_match` adds them: the same sum.
                    sum = Some(sum.map_or(w, |s| s + w));
                }
            }
            if let Some(s) = sum {
                top.push(d, s);
            }
        }
        Ok(top.into_sorted())
    }

    /// [`topk`](Self::topk) for many queries in parallel.
    pub fn topk_batch(&self, queries: &[&[u32]], k: usize) -> Vec<Vec<Hit>> {
        queries.par_iter().map(|q| self.topk(q, k)).collect()
    }

    /// Per-document lengths (for the reference implementation and other backends).
    pub fn doc_lengths(&self) -> &[u32] {
        &self.doc_len
    }

    /// The parameters.
    pub fn params(&self) -> Bm25Params {
        self.params
    }

    /// Each document's length, by document id (for storing the index; see
    /// [`Bm25Index::from_parts`]).
    pub fn doc_lens(&self) -> &[u32] {
        &self.doc_len
    }

    /// Each term's postings, (doc, frequency) in doc order, in no particular term order (for
    /// storing the index; see [`Bm25Index::from_parts`]).
    pub fn postings(&self) -> impl Iterator<Item = (u32, &[(u32, u32)])> + '_ {
        self.postings.iter().map(|(&t, p)| (t, p.as_slice()))
    }

    /// The index whose [`doc_lens`](Self::doc_lens) and [`postings`](Self::postings) these
    /// are: it scores as the one they were taken from. Postings that name a document past
    /// `doc_len`, out of doc order, or a term twice are refused.
    pub fn from_parts(
        params: Bm25Params,
        doc_len: Vec<u32>,
        postings: Vec<(u32, Vec<(u32, u32)>)>,
    ) -> Result<Self, ComputeError> {
        let mut index = Self::empty(params)?;
        let n = doc_len.len();
        index.total_len = doc_len.iter().map(|&l| l as u64).sum();
        index.doc_len = doc_len;
        index.postings.reserve(postings.len());
        for (t, list) in postings {
            let in_order = list.windows(2).all(|w| w[0].0 < w[1].0);
            if let Some(&(d, _)) = list.iter().find(|p| p.0 as usize >= n) {
                return Err(ComputeError::IndexOutOfRange {
                    what: "a stored posting's document",
                    index: d as u64,
                    len: n,
                });
            }
            if !in_order || list.is_empty() || index.postings.insert(t, list).is_some() {
                return Err(ComputeError::InvalidParameter {
                    name: "stored postings",
                    value: t as f64,
                    expected: "one non-empty list per term, in document order",
                });
            }
        }
        Ok(index)
    }
}

/// Each distinct term of a bag and its count, by term.
fn frequencies(terms: &[u32]) -> Vec<(u32, u32)> {
    let mut sorted = terms.to_vec();
    sorted.sort_unstable();
    let mut out: Vec<(u32, u32)> = Vec::with_capacity(sorted.len());
    for t in sorted {
        match out.last_mut() {
            Some((x, f)) if *x == t => *f += 1,
            _ => out.push((t, 1)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_index_from_its_parts_scores_as_the_index() {
        let docs: Vec<Vec<u32>> = vec![vec![1, 2, 2, 5], vec![2, 3], vec![5, 5, 7, 1], vec![]];
        let refs: Vec<&[u32]> = docs.iter().map(Vec::as_slice).collect();
        let mut index = Bm25Index::build(&refs, Bm25Params::default()).unwrap();
        index.replace(1, &[2, 3], &[3, 7]).unwrap();
        let postings: Vec<(u32, Vec<(u32, u32)>)> =
            index.postings().map(|(t, p)| (t, p.to_vec())).collect();
        let copy =
            Bm25Index::from_parts(index.params(), index.doc_lens().to_vec(), postings.clone())
                .unwrap();
        for query in [&[2u32, 5][..], &[7, 1, 3], &[9]] {
            assert_eq!(copy.matches(query), index.matches(query));
        }
        // Postings past the documents, out of order, or a term twice are refused.
        let past = vec![(1, vec![(9, 1)])];
        let unordered = vec![(1, vec![(2, 1), (0, 1)])];
        let twice = vec![(1, vec![(0, 1)]), (1, vec![(2, 1)])];
        for bad in [past, unordered, twice] {
            assert!(Bm25Index::from_parts(index.params(), index.doc_lens().to_vec(), bad).is_err());
        }
    }

    #[test]
    fn a_ranking_among_candidates_is_the_whole_ranking_without_the_others() {
        // Many short documents over few terms: many ties, repeated query terms, a changed
        // document, and candidates in no order.
        let mut x = 7u64;
        let mut next = |m: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        let docs: Vec<Vec<u32>> = (0..300)
            .map(|_| (0..next(6)).map(|_| next(12) as u32).collect())
            .collect();
        let refs: Vec<&[u32]> = docs.iter().map(Vec::as_slice).collect();
        let mut index = Bm25Index::build(&refs, Bm25Params::default()).unwrap();
        index.replace(3, &docs[3], &[4, 4, 9]).unwrap();
        for round in 0..40 {
            let query: Vec<u32> = (0..1 + next(4)).map(|_| next(14) as u32).collect();
            let mut among: Vec<u32> = (0..300).filter(|_| next(3) == 0).collect();
            among.reverse();
            let k = if round % 2 == 0 { 5 } else { 300 };
            let whole: Vec<Hit> = index
                .topk(&query, 300)
                .into_iter()
                .filter(|h| among.contains(&h.0))
                .take(k)
                .collect();
            assert_eq!(
                index.topk_among(&query, &among, k).unwrap(),
                whole,
                "{query:?}"
            );
        }
        assert!(index.topk_among(&[1], &[300], 3).is_err());
    }
}
