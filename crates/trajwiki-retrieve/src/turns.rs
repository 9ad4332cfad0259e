//! The final order of a structured search's turns.
//!
//! Every route of a search (dense and BM25 over raw turns, the structured evidence, the turns
//! beside the best hits, the named speakers' own turns, an item family's turns) ranks turns; a
//! turn is described by what those routes say of it — its place in each, its similarity to the
//! question and its neighbours', whether the memory kept a fact from it, who said it, its
//! length — and scored by a linear model of those [`FEATURES`].

use rustc_hash::FxHashMap;
use trajwiki_compute::topk::Hit;

/// How many features a turn has (the last, a constant 1, carries the bias).
pub const FEATURES: usize = 23;

/// The features' names, in order (the fitting script and the dumps use them).
pub const NAMES: [&str; FEATURES] = [
    "dense",
    "dense_gap",
    "bm25",
    "rr_dense",
    "rr_bm25",
    "rr_evidence",
    "rr_beside",
    "rr_own_dense",
    "rr_own_bm25",
    "rr_family",
    "nb_dense_gap",
    "nb_bm25",
    "nb2_dense_gap",
    "session_dense_gap",
    "session_bm25",
    "log_tokens",
    "question",
    "caption",
    "claims",
    "own_speaker",
    "other_speaker",
    "snapshot",
    "bias",
];

/// One turn's features.
pub type Features = [f32; FEATURES];

/// The model's weights, one per feature (the last is the bias): a logistic regression of "this
/// turn is gold evidence for the question" fitted by `scripts/fit_turns.py` on the LoCoMo
/// conversations conv-26, conv-30, conv-41 and conv-42 only (MiniLM), so that the others
/// measure it unseen. Another embedding model puts cosines on another scale; the features that
/// weigh most read them relative to the question's best hit (the gaps), not as they are.
pub const WEIGHTS: Features = [
    -1.1121,  // dense
    3.1883,   // dense_gap
    2.8589,   // bm25
    0.030305, // rr_dense
    -0.80519, // rr_bm25
    1.5391,   // rr_evidence
    0.69309,  // rr_beside
    1.7239,   // rr_own_dense
    0.40617,  // rr_own_bm25
    1.3216,   // rr_family
    2.5403,   // nb_dense_gap
    0.10194,  // nb_bm25
    1.9843,   // nb2_dense_gap
    1.4825,   // session_dense_gap
    1.7024,   // session_bm25
    0.91046,  // log_tokens
    -0.31122, // question
    -0.43226, // caption
    1.1977,   // claims
    -1.046,   // own_speaker
    -3.1988,  // other_speaker
    -1.0058,  // snapshot
    -7.5131,  // bias
];

/// A turn's score: the model's logit, the log-odds that it is evidence (monotone in the
/// probability, so turns are ordered by either alike).
pub fn score(f: &Features) -> f32 {
    f.iter().zip(&WEIGHTS).map(|(x, w)| x * w).sum()
}

/// What the routes of one search said, read per turn.
pub(crate) struct Routes<'a> {
    /// Dense hits over raw turns (message, cosine), best first.
    pub dense: &'a [Hit],
    /// BM25 hits over raw turns, best first.
    pub bm25: &'a [Hit],
    /// The other ranked lists, in the order of their features: the structured evidence, the
    /// turns beside the best direct hits, the named speakers' dense and BM25 turns, the item
    /// family's turns.
    pub lists: [&'a [u32]; 5],
    /// Per snapshot, its rank in the fused snapshot ranking.
    pub snapshot_rank: &'a FxHashMap<u32, usize>,
    /// The RRF constant.
    pub rrf_k: f32,
}

/// A turn's own properties the features read (the index has them per message).
pub(crate) struct Turn<'a> {
    /// Its line's whitespace tokens.
    pub tokens: usize,
    /// It asks a question.
    pub question: bool,
    /// It carries an image caption.
    pub caption: bool,
    /// Claims the memory grounded in it.
    pub claims: usize,
    /// The question names its speaker (some named, not all speakers).
    pub own_speaker: bool,
    /// The question names speakers, none of them its.
    pub other_speaker: bool,
    /// The snapshots that hold it.
    pub snapshots: &'a [usize],
    /// Its neighbours in its session (the turn before and after).
    pub neighbours: [Option<usize>; 2],
    /// The turns two before and two after it in its session (mostly its speaker's own).
    pub second: [Option<usize>; 2],
    /// Its session.
    pub session: u32,
}

/// What the routes said of one turn: its place (from 1; 0 when absent) and score in the dense
/// and the BM25 hits ([`DENSE`], [`BM25`]), its place in each other list.
#[derive(Clone, Copy)]
struct Seen {
    scored: [(u32, f32); 2],
    lists: [u32; 5],
}

const DENSE: usize = 0;
const BM25: usize = 1;

const UNSEEN: Seen = Seen {
    scored: [(0, 0.0); 2],
    lists: [0; 5],
};

/// The per-turn lookups of a search's routes, made once: one map from a turn to what every
/// route said of it, whose keys are the search's candidate turns.
pub(crate) struct Lookups {
    seen: FxHashMap<u32, Seen>,
    best_dense: f32,
    floor_dense: f32,
    best_bm25: f32,
    /// Per session, the best cosine and BM25 score of its turns.
    sessions: FxHashMap<u32, [f32; 2]>,
}

impl Lookups {
    /// The lookups of `routes`; `session_of` gives a turn's session.
    pub(crate) fn new(routes: &Routes<'_>, session_of: impl Fn(usize) -> u32) -> Self {
        let mut seen: FxHashMap<u32, Seen> = FxHashMap::default();
        seen.reserve(routes.dense.len().max(routes.bm25.len()));
        let mut sessions: FxHashMap<u32, [f32; 2]> = FxHashMap::default();
        // A turn below the dense list's depth is at most as similar as its last hit.
        let floor_dense = routes.dense.last().map_or(0.0, |h| h.1);
        // The dense hits, then the BM25 ones: their places, scores and sessions' best scores.
        for (kind, hits) in [routes.dense, routes.bm25].into_iter().enumerate() {
            for (r, &(m, s)) in hits.iter().enumerate() {
                let e = seen.entry(m).or_insert(UNSEEN);
                if e.scored[kind].0 == 0 {
                    e.scored[kind] = (r as u32 + 1, s);
                }
                let best = sessions
                    .entry(session_of(m as usize))
                    .or_insert([floor_dense, 0.0]);
                best[kind] = best[kind].max(s);
            }
        }
        for (l, list) in routes.lists.iter().enumerate() {
            for (r, &m) in list.iter().enumerate() {
                let e = seen.entry(m).or_insert(UNSEEN);
                if e.lists[l] == 0 {
                    e.lists[l] = r as u32 + 1;
                }
            }
        }
        Lookups {
            seen,
            sessions,
            best_dense: routes.dense.first().map_or(0.0, |h| h.1),
            floor_dense,
            best_bm25: routes
                .bm25
                .first()
                .map_or(0.0, |h| h.1)
                .max(f32::MIN_POSITIVE),
        }
    }

    /// The candidate turns: every turn some route ranked, in index order.
    pub(crate) fn candidates(&self) -> Vec<usize> {
        let mut out: Vec<usize> = self.seen.keys().map(|&m| m as usize).collect();
        out.sort_unstable();
        out
    }

    fn seen(&self, m: usize) -> Seen {
        self.seen.get(&(m as u32)).copied().unwrap_or(UNSEEN)
    }

    fn cosine(&self, seen: Seen) -> f32 {
        match seen.scored[DENSE] {
            (0, _) => self.floor_dense,
            (_, s) => s,
        }
    }

    fn bm25(&self, seen: Seen) -> f32 {
        seen.scored[BM25].1 / self.best_bm25
    }

    /// The features of turn `m`.
    pub(crate) fn features(&self, routes: &Routes<'_>, m: usize, turn: &Turn<'_>) -> Features {
        // A place from 1, 0 for none: RRF's term, scaled to 1 at the top.
        let rr = |r: u32| {
            if r == 0 {
                0.0
            } else {
                routes.rrf_k / (routes.rrf_k + r as f32)
            }
        };
        let own = self.seen(m);
        let dense = self.cosine(own);
        let around = |ns: &[Option<usize>; 2]| ns.map(|n| n.map(|n| self.seen(n)));
        let (beside, second) = (around(&turn.neighbours), around(&turn.second));
        let nb_dense = beside
            .iter()
            .flatten()
            .map(|&n| self.cosine(n))
            .fold(f32::NEG_INFINITY, f32::max);
        let nb_bm25 = beside
            .iter()
            .flatten()
            .map(|&n| self.bm25(n))
            .fold(0.0, f32::max);
        let nb2_dense = second
            .iter()
            .flatten()
            .map(|&n| self.cosine(n))
            .fold(self.floor_dense, f32::max);
        let [session_dense, session_bm25] = self
            .sessions
            .get(&turn.session)
            .copied()
            .unwrap_or([self.floor_dense, 0.0]);
        let snapshot = turn
            .snapshots
            .iter()
            .filter_map(|s| routes.snapshot_rank.get(&(*s as u32)))
            .min()
            .copied();
        let flag = |b: bool| if b { 1.0 } else { 0.0 };
        [
            dense,
            dense - self.best_dense,
            self.bm25(own),
            rr(own.scored[DENSE].0),
            rr(own.scored[BM25].0),
            rr(own.lists[0]),
            rr(own.lists[1]),
            rr(own.lists[2]),
            rr(own.lists[3]),
            rr(own.lists[4]),
            if nb_dense.is_finite() {
                nb_dense - self.best_dense
            } else {
                self.floor_dense - self.best_dense
            },
            nb_bm25,
            nb2_dense - self.best_dense,
            session_dense - self.best_dense,
            session_bm25 / self.best_bm25,
            (turn.tokens.max(1) as f32).ln(),
            flag(turn.question),
            flag(turn.caption),
            (turn.claims.min(3) as f32) / 3.0,
            flag(turn.own_speaker),
            flag(turn.other_speaker),
            snapshot.map_or(0.0, |r| rr(r as u32 + 1)),
            1.0,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(neighbours: [Option<usize>; 2], session: u32) -> Turn<'static> {
        Turn {
            tokens: 20,
            question: false,
            caption: false,
            claims: 1,
            own_speaker: false,
            other_speaker: false,
            snapshots: &[],
            neighbours,
            second: [None, None],
            session,
        }
    }

    fn value(f: &Features, name: &str) -> f32 {
        f[NAMES.iter().position(|n| *n == name).expect("a feature")]
    }

    #[test]
    fn features_read_each_routes_place_and_score() {
        let snapshot_rank = FxHashMap::default();
        let routes = Routes {
            dense: &[(3, 0.9), (1, 0.5), (2, 0.2)],
            bm25: &[(1, 8.0), (4, 2.0)],
            lists: [&[2], &[2, 4], &[], &[], &[]],
            snapshot_rank: &snapshot_rank,
            rrf_k: 60.0,
        };
        // Turns 0-2 in session 1, 3-4 in session 2.
        let lookups = Lookups::new(&routes, |m| if m < 3 { 1 } else { 2 });
        assert_eq!(
            lookups.candidates(),
            [1, 2, 3, 4],
            "every listed turn, once"
        );

        let f = lookups.features(&routes, 1, &turn([Some(0), Some(2)], 1));
        assert_eq!(value(&f, "dense"), 0.5);
        assert_eq!(value(&f, "dense_gap"), 0.5 - 0.9);
        assert_eq!(value(&f, "bm25"), 1.0, "the best BM25 hit");
        assert_eq!(value(&f, "rr_dense"), 60.0 / 62.0, "second place");
        assert_eq!(value(&f, "rr_bm25"), 60.0 / 61.0, "first place");
        assert_eq!(value(&f, "rr_evidence"), 0.0, "not in the evidence");
        // Its neighbours: turn 0, unranked (taken as similar as the last dense hit), and turn 2.
        assert_eq!(value(&f, "nb_dense_gap"), 0.2 - 0.9);
        assert_eq!(value(&f, "nb_bm25"), 0.0);
        // Session 1's best turn is turn 1 itself.
        assert_eq!(value(&f, "session_dense_gap"), 0.5 - 0.9);
        assert_eq!(value(&f, "session_bm25"), 1.0);
        assert_eq!(value(&f, "bias"), 1.0);

        let f = lookups.features(&routes, 4, &turn([Some(3), None], 2));
        assert_eq!(
            value(&f, "dense"),
            0.2,
            "below the dense list: its last hit's cosine"
        );
        assert_eq!(value(&f, "rr_dense"), 0.0);
        assert_eq!(value(&f, "bm25"), 0.25);
        assert_eq!(value(&f, "rr_beside"), 60.0 / 62.0);
        assert_eq!(value(&f, "nb_dense_gap"), 0.0, "beside the best dense hit");
        assert_eq!(value(&f, "session_dense_gap"), 0.0);
        assert_eq!(value(&f, "session_bm25"), 0.25);
    }

    #[test]
    fn the_model_prefers_what_the_routes_put_first_and_a_named_speakers_turns() {
        let snapshot_rank = FxHashMap::default();
        let routes = Routes {
            dense: &[(0, 0.8), (1, 0.1)],
            bm25: &[(0, 5.0), (1, 0.5)],
            lists: [&[0, 1], &[], &[], &[], &[]],
            snapshot_rank: &snapshot_rank,
            rrf_k: 60.0,
        };
        let lookups = Lookups::new(&routes, |m| m as u32);
        let first = lookups.features(&routes, 0, &turn([None, None], 0));
        let last = lookups.features(&routes, 1, &turn([None, None], 1));
        assert!(score(&first) > score(&last));
        // The same turn said by a speaker the question does not name scores lower.
        let mut other = turn([None, None], 0);
        other.other_speaker = true;
        assert!(score(&lookups.features(&routes, 0, &other)) < score(&first));
        // A turn that asks scores lower than one that tells.
        let mut asks = turn([None, None], 0);
        asks.question = true;
        assert!(score(&lookups.features(&routes, 0, &asks)) < score(&first));
    }
}
