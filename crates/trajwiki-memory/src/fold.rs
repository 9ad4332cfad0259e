//! Construction as a causal fold (SPEC §2.6): [`Fold::append`] consumes one exchange and reads
//! only what the exchanges before it left — entity statistics so far, the open trajectories
//! inside the session window, their claims — so building message by message, session by session
//! or all at once gives the same records.
//!
//! The fold's state is plain data ([`FoldHeader`] plus one [`TrajState`] per trajectory), which
//! the store persists between builds: an append touches one trajectory and the header, so only
//! those are written again. Candidate trajectories come from an inverted index of specific terms
//! and entities over the *live* trajectories (open, and at most `max_session_gap` sessions behind
//! the latest session seen), so the cost of an append does not grow with the history.
//!
//! Late arrival: messages may arrive out of time order (a backfill of older history, sessions
//! streamed in another order). A trajectory's versions follow arrival and never go back in time:
//! an exchange continues only a trajectory whose latest snapshot is not later than it, so the
//! latest version stays the trajectory's current state and a backfilled statement never revises
//! a newer one; else it opens a trajectory of its own. A late exchange (its session behind the
//! latest seen) also finds the trajectories of its own time, the open ones whose latest session
//! is at most `late_session_gap` before its own, though they left the live window.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use trajwiki_core::{
    centroid, Claim, ClaimId, ClaimOp, ClaimStatus, Facet, Namespace, OpId, OpKind, Signals,
    Snapshot, SnapshotId, SourceMessage, Timestamp, Trajectory, TrajectoryId,
};

use crate::build::{BuildError, Builders};
use crate::evolve::{EarlierClaim, Judgement};
use crate::extract::{is_specific, ClaimDraft, Lexicon, LexiconStats};
use crate::matcher::{candidates, score, Features, TrajectoryFeatures};
use crate::slots::{self, Slot};
use crate::text::keyword_surfaces;
use crate::wiki::{group_keys, Group, Wiki};
use crate::MemoryConfig;

/// A claim as the fold keeps it: its id, what the extractor drafted, its current status and the
/// ref of its source message (for citing it on wiki pages).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClaimEntry {
    /// The claim's id.
    pub id: ClaimId,
    /// The draft it was made from.
    pub draft: ClaimDraft,
    /// Current status (as replaying the op log gives it).
    pub status: ClaimStatus,
    /// External ref (or id) of the source message.
    pub source_ref: String,
    /// When its source message was said.
    pub at: Option<Timestamp>,
    /// The claim it revised, as that claim read (pages show the change).
    pub was: Option<Box<Was>>,
}

/// A revised claim as its revision shows it: its text, the ref of its source and when it was
/// said.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Was {
    /// The earlier claim's text.
    pub text: String,
    /// The ref of its source message.
    pub source_ref: String,
    /// When it was said.
    pub at: Option<Timestamp>,
}

impl Was {
    /// The claim `old` as a revision of it shows it.
    fn of(old: &ClaimEntry) -> Was {
        Was {
            text: old.draft.text.clone(),
            source_ref: old.source_ref.clone(),
            at: old.at,
        }
    }
}

/// A trajectory as the fold keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrajState {
    /// The trajectory's id.
    pub id: TrajectoryId,
    /// What matching knows of it.
    pub features: TrajectoryFeatures,
    /// The running sum of its snapshots' vectors, in order (`features.summary_embedding`, e_sum,
    /// is its normalisation).
    pub sum: Vec<f32>,
    /// Its snapshots, in version order.
    pub snapshots: Vec<SnapshotId>,
    /// Summaries of its last three snapshots.
    pub notes: Vec<String>,
    /// Its claims, in creation order.
    pub claims: Vec<ClaimEntry>,
    /// The full trajectory it continues.
    pub continues: Option<TrajectoryId>,
    /// Whether a newer trajectory continues it (it takes no more snapshots).
    pub continued: bool,
    /// (subject, facet tag) pairs its claims state.
    pub subject_facets: BTreeSet<(String, String)>,
    /// Item terms with their family.
    pub items: BTreeSet<(String, String)>,
    /// Counts mentioned.
    pub counts: BTreeSet<String>,
    /// Its summary, written with the lexicon of its latest update.
    pub summary: String,
    /// Its short label (pages show it), written with the lexicon of its latest update.
    pub label: String,
    /// Keyword stem → the word as first written in the trajectory, for showing keywords.
    pub surfaces: BTreeMap<String, String>,
    /// When its latest snapshot was said (the timestamp of the exchange's first message); no
    /// earlier exchange joins it.
    pub latest_at: Timestamp,
}

/// A trajectory as a fold stored it before late arrival was defined (issue 38): [`TrajState`]
/// without `latest_at`. A fold resumed from such a state takes `latest_at` from the
/// trajectory's latest snapshot ([`TrajStateV1::at`]), which is what the fold would have kept:
/// a memory whose history arrived in time order folds on exactly as if it had been built now.
#[derive(Debug, Clone, Deserialize)]
pub struct TrajStateV1 {
    id: TrajectoryId,
    features: TrajectoryFeatures,
    sum: Vec<f32>,
    snapshots: Vec<SnapshotId>,
    notes: Vec<String>,
    claims: Vec<ClaimEntry>,
    continues: Option<TrajectoryId>,
    continued: bool,
    subject_facets: BTreeSet<(String, String)>,
    items: BTreeSet<(String, String)>,
    counts: BTreeSet<String>,
    summary: String,
    label: String,
    surfaces: BTreeMap<String, String>,
}

impl TrajStateV1 {
    /// Its latest snapshot.
    pub fn latest(&self) -> Option<&SnapshotId> {
        self.snapshots.last()
    }

    /// The state, with its latest snapshot said at `latest_at`.
    pub fn at(self, latest_at: Timestamp) -> TrajState {
        let TrajStateV1 {
            id,
            features,
            sum,
            snapshots,
            notes,
            claims,
            continues,
            continued,
            subject_facets,
            items,
            counts,
            summary,
            label,
            surfaces,
        } = self;
        TrajState {
            id,
            features,
            sum,
            snapshots,
            notes,
            claims,
            continues,
            continued,
            subject_facets,
            items,
            counts,
            summary,
            label,
            surfaces,
            latest_at,
        }
    }
}

impl TrajState {
    /// A trajectory with no snapshot yet: vectors of `dim`, opened at `latest_at`, continuing
    /// `continues` when given.
    pub fn new(
        id: TrajectoryId,
        continues: Option<TrajectoryId>,
        dim: usize,
        latest_at: Timestamp,
    ) -> TrajState {
        TrajState {
            id,
            features: TrajectoryFeatures::default(),
            sum: vec![0.0; dim],
            snapshots: Vec::new(),
            notes: Vec::new(),
            claims: Vec::new(),
            continues,
            continued: false,
            subject_facets: BTreeSet::new(),
            items: BTreeSet::new(),
            counts: BTreeSet::new(),
            summary: String::new(),
            label: String::new(),
            surfaces: BTreeMap::new(),
            latest_at,
        }
    }

    /// A keyword as written (the stem when it was never seen written).
    pub fn surface<'a>(&'a self, keyword: &'a str) -> &'a str {
        self.surfaces.get(keyword).map_or(keyword, String::as_str)
    }
}

impl TrajState {
    /// The stored record of this trajectory.
    pub fn record(&self, ns: &Namespace) -> Trajectory {
        Trajectory {
            id: self.id.clone(),
            namespace: ns.clone(),
            snapshot_ids: self.snapshots.clone(),
            continues: self.continues.clone(),
            summary: self.summary.clone(),
            signals: Signals {
                keywords: self.features.keywords.iter().cloned().collect(),
                entities: self.features.entities.iter().cloned().collect(),
                terms: self.features.terms.iter().cloned().collect(),
                facets: self.features.facets.iter().cloned().collect(),
            },
        }
    }
}

/// Everything of the fold's state but the trajectories: statistics, counters and the candidate
/// index. Small, and bounded by the session window (postings) and the vocabulary (lexicon).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FoldHeader {
    /// Entity statistics of the exchanges folded so far.
    pub lexicon: LexiconStats,
    /// Messages folded.
    pub messages: usize,
    /// Snapshots made.
    pub snapshots: usize,
    /// Claims made.
    pub claims: usize,
    /// Ops in the log.
    pub ops: u64,
    /// ADD ops.
    pub adds: usize,
    /// REVISE ops.
    pub revises: usize,
    /// DEPRECATE ops.
    pub deprecates: usize,
    /// Trajectories opened to continue a full one.
    pub continuations: usize,
    /// Snapshots that continued an existing trajectory.
    pub continued_snapshots: usize,
    /// The latest session seen.
    pub clock: u32,
    /// Live trajectories as (last session, index): open and inside the session window.
    pub live: BTreeSet<(u32, usize)>,
    /// Specific term or entity key → live trajectories holding it.
    pub postings: BTreeMap<String, BTreeSet<usize>>,
}

/// The records one append (or several) produced; trajectories are read from the fold.
#[derive(Debug, Clone, Default)]
pub struct Delta {
    /// New snapshots, in creation order.
    pub snapshots: Vec<Snapshot>,
    /// New claims, in creation order.
    pub claims: Vec<Claim>,
    /// New ops, in seq order.
    pub ops: Vec<ClaimOp>,
}

/// The construction fold of one namespace.
#[derive(Debug, Clone)]
pub struct Fold {
    /// The namespace.
    pub namespace: Namespace,
    /// Statistics, counters, candidate index.
    pub header: FoldHeader,
    /// Every trajectory, in creation order.
    pub trajectories: Vec<TrajState>,
    /// The Memory Wiki over the trajectories.
    pub wiki: Wiki,
    dirty: BTreeSet<usize>,
    /// Every trajectory not continued, as (last session, index): where a late exchange finds
    /// the trajectories of its time. Derived from `trajectories` (not persisted).
    open: BTreeSet<(u32, usize)>,
    /// The claim holding each slot (`subject|attribute|key`), from the slot facets of the
    /// current claims ([`Fold::resume`] reads them back; not persisted on its own).
    slots: BTreeMap<String, Holder>,
}

/// The claim that holds a slot: where it is, its value and when it was said.
#[derive(Debug, Clone, PartialEq)]
struct Holder {
    ti: usize,
    ci: usize,
    value: String,
    at: Timestamp,
}

impl Holder {
    /// The order holders are told apart in: when said, then where the claim stands.
    fn order(&self) -> (Timestamp, usize, usize) {
        (self.at, self.ti, self.ci)
    }
}

/// An op before it gets its id and place in the log.
struct OpDraft {
    kind: OpKind,
    target: Option<ClaimId>,
    new_claim: Option<ClaimId>,
    new_status: Option<ClaimStatus>,
    rationale: String,
}

/// What a slot statement does to the claim holding its slot.
enum SlotEdit {
    /// The same value again: no new claim; the holder gains a source.
    Restated(String, Holder),
    /// A new value: the holder is revised.
    Revise(String, Holder),
    /// A withdrawal: the holder is deprecated.
    Deprecate(String, Holder),
    /// Nothing held (or only a later statement): an ADD, holding `key` unless late.
    Add(Option<String>),
}

/// Plans (and things owned) held per subject: a cancellation or a sale finds one of the latest.
const MANY_VALUED_HELD: usize = 64;

/// The facet tag that records a claim's slot (its value and time in the facet's value).
pub(crate) const SLOT_TAG: &str = "slot:";

/// Normalises a running sum of rows exactly as [`centroid`] does after summing them.
fn normalised(sum: &[f32]) -> Vec<f32> {
    centroid(std::iter::once(sum), sum.len())
}

/// The keys a trajectory is found by: its specific terms and its entity keys.
fn posting_keys<'a>(
    terms: impl IntoIterator<Item = &'a String>,
    entities: impl IntoIterator<Item = &'a String>,
) -> Vec<String> {
    terms
        .into_iter()
        .filter(|t| is_specific(t))
        .map(|t| format!("t:{t}"))
        .chain(entities.into_iter().map(|e| format!("e:{e}")))
        .collect()
}

impl Fold {
    /// An empty fold.
    pub fn new(namespace: Namespace) -> Fold {
        Fold {
            namespace,
            header: FoldHeader::default(),
            trajectories: Vec::new(),
            wiki: Wiki::default(),
            dirty: BTreeSet::new(),
            open: BTreeSet::new(),
            slots: BTreeMap::new(),
        }
    }

    /// A fold resumed from persisted state: e_sum is derived again from the running sums, the
    /// wiki's pages from its groups.
    pub fn resume(
        namespace: Namespace,
        header: FoldHeader,
        mut trajectories: Vec<TrajState>,
        groups: BTreeMap<String, Group>,
        config: &MemoryConfig,
    ) -> Fold {
        for t in &mut trajectories {
            t.features.summary_embedding = normalised(&t.sum);
        }
        let wiki = Wiki::resume(groups, &trajectories, config, header.lexicon.lexicon());
        let open = open_by_session(&trajectories);
        let slots = held_slots(&trajectories);
        Fold {
            namespace,
            header,
            trajectories,
            wiki,
            dirty: BTreeSet::new(),
            open,
            slots,
        }
    }

    /// The lexicon of what was folded so far.
    pub fn lexicon(&self) -> &Lexicon {
        self.header.lexicon.lexicon()
    }

    /// Indices of the trajectories changed since the last [`Fold::take_dirty`].
    pub fn take_dirty(&mut self) -> BTreeSet<usize> {
        std::mem::take(&mut self.dirty)
    }

    /// Removes trajectory `ti` from the candidate index.
    fn retire(&mut self, ti: usize) {
        let t = &self.trajectories[ti];
        self.header.live.remove(&(t.features.last_session, ti));
        for key in posting_keys(&t.features.terms, &t.features.entities) {
            if let Some(set) = self.header.postings.get_mut(&key) {
                set.remove(&ti);
                if set.is_empty() {
                    self.header.postings.remove(&key);
                }
            }
        }
    }

    /// Advances the session clock, retiring trajectories that fell out of the window.
    fn advance(&mut self, session: u32, gap: u32) {
        self.header.clock = self.header.clock.max(session);
        while let Some(&(last, ti)) = self.header.live.first() {
            if last.saturating_add(gap) >= self.header.clock {
                break;
            }
            self.retire(ti);
        }
    }

    /// The trajectories an exchange said at `at` may continue: the live ones sharing a specific
    /// term or a specific entity with `f`, and when the exchange is late (its session behind
    /// the clock) the open ones of its own time sharing one (latest session at most
    /// `late_gap` before its own); of those, only the trajectories whose latest snapshot is not
    /// later than `at`.
    fn candidate_pool(
        &self,
        f: &Features,
        at: Timestamp,
        broad: &BTreeSet<String>,
        late_gap: u32,
    ) -> BTreeSet<usize> {
        let entities = f.entities.iter().filter(|e| !broad.contains(*e));
        let mut pool = BTreeSet::new();
        for key in posting_keys(&f.terms, entities) {
            if let Some(set) = self.header.postings.get(&key) {
                pool.extend(set.iter().copied());
            }
        }
        if f.session < self.header.clock {
            let from = (f.session.saturating_sub(late_gap), 0);
            let own_time = self.open.range(from..=(f.session, usize::MAX));
            pool.extend(
                own_time
                    .map(|&(_, ti)| ti)
                    .filter(|&ti| shares_specific(f, &self.trajectories[ti].features, broad)),
            );
        }
        pool.retain(|&ti| self.trajectories[ti].latest_at <= at);
        pool
    }

    /// Whether `holder` may hold `key`. Plans and things owned are held at most
    /// [`MANY_VALUED_HELD`] per subject, so that the holders do not grow with the history: past
    /// that, the one said first is let go (its claim's slot facet removed, so that a resumed
    /// fold holds what this one holds), or the new one is not held if it is older still.
    fn admit_slot(&mut self, key: &str, holder: &Holder) -> bool {
        let mut parts = key.splitn(3, '|');
        let (Some(subject), Some(attribute)) = (parts.next(), parts.next()) else {
            return true;
        };
        if !matches!(attribute, "plan" | "owns") {
            return true;
        }
        let prefix = format!("{subject}|{attribute}|");
        let mut count = 0;
        let mut oldest: Option<(&String, &Holder)> = None;
        for (k, h) in self.held(&prefix) {
            count += 1;
            if oldest.is_none_or(|(_, o)| h.order() < o.order()) {
                oldest = Some((k, h));
            }
        }
        if count < MANY_VALUED_HELD {
            return true;
        }
        let Some((k, h)) = oldest.map(|(k, h)| (k.clone(), h.clone())) else {
            return true;
        };
        if holder.order() < h.order() {
            return false;
        }
        self.slots.remove(&k);
        let claim = &mut self.trajectories[h.ti].claims[h.ci];
        claim.draft.facets.retain(|f| !f.tag.starts_with(SLOT_TAG));
        self.dirty.insert(h.ti);
        self.wiki.touch(h.ti);
        true
    }

    /// The slots held under `prefix` (`subject|`, `subject|plan|`), in key order.
    fn held<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = (&'a String, &'a Holder)> {
        self.slots
            .range(prefix.to_string()..)
            .take_while(move |(k, _)| k.starts_with(prefix))
    }

    /// Appends `op`, stated by message `source` in snapshot `snap_id`, to the op log: its id,
    /// its seq, the header's counts.
    fn push_op(
        &mut self,
        op: OpDraft,
        source: &trajwiki_core::MessageId,
        snap_id: &SnapshotId,
        delta: &mut Delta,
    ) {
        let seq = self.header.ops + 1;
        delta.ops.push(ClaimOp {
            id: OpId::derive(&self.namespace, &format!("{snap_id}#{}", self.header.ops)),
            namespace: self.namespace.clone(),
            seq,
            op: op.kind,
            target: op.target,
            new_claim: op.new_claim,
            new_status: op.new_status,
            source_message_ids: vec![source.clone()],
            rationale: op.rationale,
            snapshot: snap_id.clone(),
        });
        self.header.ops = seq;
        match op.kind {
            OpKind::Add => self.header.adds += 1,
            OpKind::Revise => self.header.revises += 1,
            OpKind::Deprecate => self.header.deprecates += 1,
        }
    }

    /// Records that `source` states claim `held` again: no new claim, an ADD op naming the held
    /// one with the message as its source (the claim's record is never rewritten).
    fn restate(
        &mut self,
        held: ClaimId,
        source: &trajwiki_core::MessageId,
        rationale: String,
        snap_id: &SnapshotId,
        delta: &mut Delta,
    ) {
        let op = OpDraft {
            kind: OpKind::Add,
            target: None,
            new_claim: Some(held),
            new_status: None,
            rationale,
        };
        self.push_op(op, source, snap_id, delta);
    }

    /// A statement stating no slot may still restate a plan held, spoken of as still on ("still
    /// on for the trip to Japan"), or name in passing where the subject lives or works or a thing
    /// owned ("fixing up my sailboat"): a source of the claim holding it. Else an ADD.
    fn mention_edit(&self, subject: &str, quote: &str, at: Timestamp) -> SlotEdit {
        if slots::keeps_a_plan(quote) {
            let words = slots::plan_words(quote);
            if let Some((k, h)) = self.plan_named(subject, &words, 3) {
                if h.at <= at {
                    return SlotEdit::Restated(k, h);
                }
            }
        }
        // A passing mention of where the subject lives or works, or of a thing owned: a
        // source of the claim holding it (it holds as long as that claim does).
        let prefix = format!("{subject}|");
        let mentioned = self
            .held(&prefix)
            .filter(|(_, h)| h.at <= at)
            .find(|(k, h)| {
                let mut parts = k[prefix.len()..].split('|');
                let attribute = parts.next().unwrap_or("");
                let head = parts.next().unwrap_or("");
                slots::mentions(attribute, head, &h.value, quote)
            });
        if let Some((k, h)) = mentioned {
            return SlotEdit::Restated(k.clone(), h.clone());
        }
        SlotEdit::Add(None)
    }

    /// The plan of `subject` that `words` name best, scoring at least `least` (a plan's own word
    /// counts 2, a word saying only what kind of plan it is 1); the latest of the best.
    fn plan_named(
        &self,
        subject: &str,
        words: &[String],
        least: usize,
    ) -> Option<(String, Holder)> {
        let prefix = format!("{subject}|plan|");
        self.held(&prefix)
            .map(|(k, h)| (slots::plan_score(&h.value, words), k, h))
            .filter(|(n, _, _)| *n >= least)
            .max_by(|a, b| a.0.cmp(&b.0).then(a.2.at.cmp(&b.2.at)))
            .map(|(_, k, h)| (k.clone(), h.clone()))
    }

    /// What slot statement `slot` by `subject`, said at `at`, does: see [`SlotEdit`]. `unique`
    /// names the new claim (multi-valued slots hold one key per claim).
    fn slot_edit(&self, subject: &str, slot: &Slot, at: Timestamp, unique: &str) -> SlotEdit {
        let prefix = format!("{subject}|");
        let latest_of = |attributes: &[&str]| {
            self.held(&prefix)
                .filter(|(k, _)| {
                    let attribute = k[prefix.len()..].split('|').next().unwrap_or("");
                    attributes.contains(&attribute)
                })
                .max_by_key(|(_, h)| h.order())
                .map(|(k, h)| (k.clone(), h.clone()))
        };
        let held = match (slot.attribute, slot.key.as_str(), &slot.value) {
            ("latest", wrong, _) => {
                // The slot holding the value corrected when it is named, else the latest.
                let all = [
                    "home", "work", "pet", "partner", "count", "favorite", "date", "about",
                ];
                let named = (!wrong.is_empty())
                    .then(|| {
                        self.held(&prefix)
                            .filter(|(k, _)| {
                                let attribute = k[prefix.len()..].split('|').next().unwrap_or("");
                                all.contains(&attribute)
                            })
                            .filter(|(_, h)| {
                                h.value == wrong || h.value.split(' ').any(|w| w == wrong)
                            })
                            .max_by_key(|(_, h)| h.order())
                            .map(|(k, h)| (k.clone(), h.clone()))
                    })
                    .flatten();
                named.or_else(|| latest_of(&all))
            }
            ("plan", _, None) => {
                // A cancellation: the subject's plan it names best.
                self.plan_named(subject, &slot.words, 2)
            }
            ("plan", _, Some(_)) => return SlotEdit::Add(Some(format!("{prefix}plan|{unique}"))),
            ("owns", head, None) => {
                latest_of(&["owns"]).filter(|(k, _)| k.split('|').nth(2) == Some(head))
            }
            ("owns", head, Some(_)) => {
                return SlotEdit::Add(Some(format!("{prefix}owns|{head}|{unique}")))
            }
            ("pet", "", _) => latest_of(&["pet"]),
            // "I prefer tea now": the favourite, when the subject holds only one.
            ("favorite", "", _) => {
                let favorites = format!("{prefix}favorite|");
                let mut held = self.held(&favorites);
                match (held.next(), held.next()) {
                    (Some((k, h)), None) if slots::changes_favorite(slot, k, &h.value) => {
                        Some((k.clone(), h.clone()))
                    }
                    _ => None,
                }
            }
            (attribute, key, _) => {
                let k = format!("{prefix}{attribute}|{key}");
                let exact = self.slots.get(&k).map(|h| (k.clone(), h.clone()));
                // "my dog Max" after a rename without the kind: the pet named before.
                exact.or_else(|| {
                    (attribute == "pet")
                        .then(|| {
                            self.slots
                                .get(&format!("{prefix}{attribute}|"))
                                .map(|h| (format!("{prefix}{attribute}|"), h.clone()))
                        })
                        .flatten()
                })
            }
        };
        let Some((key, holder)) = held else {
            let key = match slot.attribute {
                "latest" => None,
                _ if slot.value.is_none() => None,
                attribute => Some(format!("{prefix}{attribute}|{}", slot.key)),
            };
            return SlotEdit::Add(key);
        };
        if holder.at > at {
            // A backfilled statement older than the one holding the slot changes nothing.
            return SlotEdit::Add(None);
        }
        match &slot.value {
            None => SlotEdit::Deprecate(key, holder),
            Some(v) if *v == holder.value => SlotEdit::Restated(key, holder),
            Some(_) => SlotEdit::Revise(key, holder),
        }
    }

    /// Folds one exchange (its messages in order, with their L2-normalised vectors) into the
    /// memory: one snapshot, its claims and ops, appended to a trajectory.
    pub fn append(
        &mut self,
        exchange: &[&SourceMessage],
        vectors: &[&[f32]],
        b: &Builders<'_>,
        delta: &mut Delta,
    ) -> Result<(), BuildError> {
        let c = b.config;
        let ns = self.namespace.clone();
        let Some(first) = exchange.first() else {
            return Ok(());
        };
        if let Some(m) = exchange.iter().find(|m| m.namespace != ns) {
            return Err(BuildError::Namespace(format!("{ns} and {}", m.namespace)));
        }
        if vectors.len() != exchange.len() {
            return Err(BuildError::EmbedCount {
                stage: "messages",
                expected: exchange.len(),
                got: vectors.len(),
            });
        }
        for m in exchange {
            self.header.lexicon.add(m, c.entity_min_count);
        }
        let draft = b
            .extractor
            .extract(exchange, self.header.lexicon.lexicon())?;
        let dim = vectors[0].len();
        let e = centroid(vectors.iter().copied(), dim);
        let session = first.session;
        self.advance(session, c.max_session_gap);

        // Matching against the live trajectories that share something specific.
        let broad = self.lexicon().speakers.clone();
        let f = Features {
            keywords: draft.keywords.clone(),
            entities: draft.entities.clone(),
            terms: draft.terms.clone(),
            facets: draft.facets.clone(),
            embedding: e.clone(),
            session,
        };
        let pool = self.candidate_pool(&f, first.timestamp, &broad, c.late_session_gap);
        let open: Vec<(usize, &TrajectoryFeatures)> = pool
            .iter()
            .map(|&i| (i, &self.trajectories[i].features))
            .collect();
        let mut scores: Vec<_> = candidates(&f, &open, &broad, c)
            .into_iter()
            .map(|i| score(&f, &self.trajectories[i].features, i, &broad, c))
            .collect();
        scores.sort_by(|a, b| b.g.total_cmp(&a.g).then(a.candidate.cmp(&b.candidate)));
        let texts: Vec<&str> = scores
            .iter()
            .map(|m| self.trajectories[m.candidate].summary.as_str())
            .collect();
        let chosen = b
            .decider
            .decide_with_texts(&f, &scores, &draft.summary, &texts)
            .filter(|&k| k < scores.len())
            .map(|k| scores[k].candidate);
        let snap_id = SnapshotId::derive(&ns, first.id.as_str());
        let ti = match chosen {
            Some(t) if self.trajectories[t].snapshots.len() < c.max_trajectory_len => {
                self.header.continued_snapshots += 1;
                self.retire(t);
                t
            }
            full => {
                let continues = full.map(|t| {
                    self.retire(t);
                    let last = self.trajectories[t].features.last_session;
                    self.open.remove(&(last, t));
                    self.trajectories[t].continued = true;
                    self.dirty.insert(t);
                    self.header.continuations += 1;
                    self.trajectories[t].id.clone()
                });
                let id = TrajectoryId::derive(&ns, snap_id.as_str());
                let state = TrajState::new(id, continues, dim, first.timestamp);
                self.trajectories.push(state);
                self.trajectories.len() - 1
            }
        };

        // Claim evolution: a slot statement edits the claim holding its slot, wherever it is;
        // the others are judged against the trajectory's current claims.
        let mut claim_ids = Vec::with_capacity(draft.claims.len());
        for (k, claim) in draft.claims.iter().enumerate() {
            let said = exchange
                .iter()
                .find(|m| m.id == claim.source)
                .map_or(first.timestamp, |m| m.timestamp);
            let mut claim = claim.clone();
            let slot = slots::slot_of(&claim.quote);
            let edit = match &slot {
                Some(slot) => self.slot_edit(&claim.subject, slot, said, &format!("{snap_id}/{k}")),
                None => self.mention_edit(&claim.subject, &claim.quote, said),
            };
            let new_value = slot.as_ref().and_then(|s| s.value.clone());
            let id = ClaimId::derive(&ns, &format!("{snap_id}/{k}"));
            let mut revised_from = None;
            let mut was = None;
            let mut ops: Vec<(OpKind, Option<ClaimId>, Option<ClaimStatus>, String)> = Vec::new();
            let mut holds: Option<(String, String)> = None;
            match edit {
                SlotEdit::Restated(key, h) => {
                    let held = self.trajectories[h.ti].claims[h.ci].id.clone();
                    let why = format!("restated: {} = {}", slot_name(&key), h.value);
                    self.restate(held, &claim.source, why, &snap_id, delta);
                    continue;
                }
                SlotEdit::Revise(key, h) => {
                    let old = &mut self.trajectories[h.ti].claims[h.ci];
                    old.status = ClaimStatus::Deprecated;
                    revised_from = Some(old.id.clone());
                    was = Some(Box::new(Was::of(old)));
                    self.dirty.insert(h.ti);
                    self.wiki.touch(h.ti);
                    let value = new_value.clone().unwrap_or_default();
                    let rationale = format!("{}: {} → {value}", slot_name(&key), h.value);
                    ops.push((OpKind::Revise, revised_from.clone(), None, rationale));
                    holds = Some((key, value));
                }
                SlotEdit::Deprecate(key, h) => {
                    let old = &mut self.trajectories[h.ti].claims[h.ci];
                    old.status = ClaimStatus::Deprecated;
                    self.dirty.insert(h.ti);
                    self.wiki.touch(h.ti);
                    self.slots.remove(&key);
                    let status = Some(ClaimStatus::Deprecated);
                    let rationale = format!("{} withdrawn: {}", slot_name(&key), h.value);
                    ops.push((OpKind::Deprecate, Some(old.id.clone()), status, rationale));
                    let why = "statement after a withdrawal".to_string();
                    ops.push((OpKind::Add, None, None, why));
                }
                SlotEdit::Add(key) => {
                    holds = key.zip(new_value.clone());
                    let t = &self.trajectories[ti];
                    let current: Vec<usize> = (0..t.claims.len())
                        .filter(|&i| t.claims[i].status != ClaimStatus::Deprecated)
                        .collect();
                    let earlier: Vec<EarlierClaim<'_>> = current
                        .iter()
                        .map(|&i| EarlierClaim {
                            draft: &t.claims[i].draft,
                            status: t.claims[i].status,
                        })
                        .collect();
                    match b.judge.judge(&claim, &earlier) {
                        Judgement::Add { rationale } => {
                            ops.push((OpKind::Add, None, None, rationale))
                        }
                        Judgement::Restated { target, rationale } => {
                            let held = self.trajectories[ti].claims[current[target]].id.clone();
                            self.restate(held, &claim.source, rationale, &snap_id, delta);
                            continue;
                        }
                        Judgement::Revise { target, rationale } => {
                            let old = &mut self.trajectories[ti].claims[current[target]];
                            old.status = ClaimStatus::Deprecated;
                            revised_from = Some(old.id.clone());
                            was = Some(Box::new(Was::of(old)));
                            ops.push((OpKind::Revise, revised_from.clone(), None, rationale));
                        }
                        Judgement::Deprecate { target, rationale } => {
                            let old = &mut self.trajectories[ti].claims[current[target]];
                            old.status = ClaimStatus::Deprecated;
                            let status = Some(ClaimStatus::Deprecated);
                            ops.push((OpKind::Deprecate, Some(old.id.clone()), status, rationale));
                            let why = "statement after a withdrawal".to_string();
                            ops.push((OpKind::Add, None, None, why));
                        }
                    }
                }
            }
            if let Some((key, value)) = holds {
                let holder = Holder {
                    ti,
                    ci: self.trajectories[ti].claims.len(),
                    value: value.clone(),
                    at: said,
                };
                if self.admit_slot(&key, &holder) {
                    claim.facets.push(Facet {
                        tag: format!("{SLOT_TAG}{key}"),
                        value: format!("{value}|{}", said.format(trajwiki_core::TIMESTAMP_FORMAT)),
                    });
                    self.slots.insert(key, holder);
                }
            }
            let claim = &claim;
            for (kind, target, new_status, rationale) in ops {
                let new_claim = (kind != OpKind::Deprecate).then(|| id.clone());
                let op = OpDraft {
                    kind,
                    target,
                    new_claim,
                    new_status,
                    rationale,
                };
                self.push_op(op, &claim.source, &snap_id, delta);
            }
            let source_ref = exchange
                .iter()
                .find(|m| m.id == claim.source)
                .map(|m| m.external_ref.clone().unwrap_or_else(|| m.id.to_string()))
                .unwrap_or_else(|| claim.source.to_string());
            delta.claims.push(Claim {
                id: id.clone(),
                namespace: ns.clone(),
                snapshot: snap_id.clone(),
                text: claim.text.clone(),
                status: claim.status,
                source_message_ids: vec![claim.source.clone()],
                quote: claim.quote.clone(),
                revised_from,
            });
            self.trajectories[ti].claims.push(ClaimEntry {
                id: id.clone(),
                draft: claim.clone(),
                status: claim.status,
                source_ref,
                at: Some(said),
                was,
            });
            self.header.claims += 1;
            claim_ids.push(id);
        }

        // Keywords are stems; pages and labels show the words as written.
        let mut surfaces = BTreeMap::new();
        for m in exchange {
            keyword_surfaces(&m.text, &mut surfaces);
            for caption in m.attachments.iter().filter_map(|a| a.caption.as_deref()) {
                keyword_surfaces(caption, &mut surfaces);
            }
        }
        // Fold the snapshot into the trajectory.
        let groups_before: BTreeSet<String> =
            group_keys(&self.trajectories[ti], c).into_iter().collect();
        let t = &mut self.trajectories[ti];
        self.open.remove(&(t.features.last_session, ti));
        t.snapshots.push(snap_id.clone());
        let version = t.snapshots.len() as u32;
        t.features.keywords.extend(draft.keywords.iter().cloned());
        for k in &draft.keywords {
            if let Some(word) = surfaces.get(k) {
                t.surfaces.entry(k.clone()).or_insert_with(|| word.clone());
            }
        }
        t.features.entities.extend(draft.entities.iter().cloned());
        t.features.terms.extend(draft.terms.iter().cloned());
        t.features.facets.extend(draft.facets.iter().cloned());
        t.items.extend(draft.items.iter().cloned());
        t.counts.extend(draft.counts.iter().cloned());
        for claim in &draft.claims {
            for fct in claim.facets.iter().filter(|f| !f.tag.starts_with(SLOT_TAG)) {
                t.subject_facets
                    .insert((claim.subject.clone(), fct.tag.clone()));
            }
        }
        t.sum.iter_mut().zip(&e).for_each(|(s, x)| *s += x);
        t.features.summary_embedding = normalised(&t.sum);
        t.features.latest_embedding = e;
        t.features.last_session = session;
        t.latest_at = first.timestamp;
        self.open.insert((session, ti));
        t.notes.push(draft.summary.clone());
        if t.notes.len() > 3 {
            t.notes.remove(0);
        }
        t.label = trajectory_label(t, self.header.lexicon.lexicon());
        t.summary = summarize(t, self.header.lexicon.lexicon());
        self.header.live.insert((t.features.last_session, ti));
        for key in posting_keys(&t.features.terms, &t.features.entities) {
            self.header.postings.entry(key).or_default().insert(ti);
        }
        self.dirty.insert(ti);
        let joined: Vec<String> = group_keys(&self.trajectories[ti], c)
            .into_iter()
            .filter(|k| !groups_before.contains(k))
            .collect();
        self.wiki.update(
            ti,
            &joined,
            &surfaces,
            &self.trajectories,
            c,
            self.header.lexicon.lexicon(),
        );
        self.header.snapshots += 1;
        self.header.messages += exchange.len();

        delta.snapshots.push(Snapshot {
            id: snap_id,
            namespace: ns.clone(),
            trajectory: self.trajectories[ti].id.clone(),
            version,
            timestamp: first.timestamp,
            summary: draft.summary,
            context: draft.context,
            keywords: draft.keywords.into_iter().collect(),
            claim_ids,
            source_message_ids: exchange.iter().map(|m| m.id.clone()).collect(),
        });
        Ok(())
    }
}

/// The slots held by the current claims of `trajectories`: their slot facets.
fn held_slots(trajectories: &[TrajState]) -> BTreeMap<String, Holder> {
    let mut out = BTreeMap::new();
    for (ti, t) in trajectories.iter().enumerate() {
        for (ci, c) in t.claims.iter().enumerate() {
            if c.status == ClaimStatus::Deprecated {
                continue;
            }
            for f in &c.draft.facets {
                let Some(key) = f.tag.strip_prefix(SLOT_TAG) else {
                    continue;
                };
                let Some((value, at)) = f.value.rsplit_once('|') else {
                    continue;
                };
                let Ok(at) = Timestamp::parse_from_str(at, trajwiki_core::TIMESTAMP_FORMAT) else {
                    continue;
                };
                let holder = Holder {
                    ti,
                    ci,
                    value: value.to_string(),
                    at,
                };
                out.insert(key.to_string(), holder);
            }
        }
    }
    out
}

/// A slot key as a reader sees it: `home`, `pet (dog)`.
pub(crate) fn slot_name(key: &str) -> String {
    let mut parts = key.split('|').skip(1);
    let attribute = parts.next().unwrap_or("");
    match parts.next() {
        Some(k) if !k.is_empty() && !k.contains('/') => format!("{attribute} ({k})"),
        _ => attribute.to_string(),
    }
}

/// Every trajectory not continued, as (last session, index).
fn open_by_session(trajectories: &[TrajState]) -> BTreeSet<(u32, usize)> {
    trajectories
        .iter()
        .enumerate()
        .filter(|(_, t)| !t.continued)
        .map(|(i, t)| (t.features.last_session, i))
        .collect()
}

/// Whether trajectory `t` would be found by one of `f`'s posting keys: a specific term, or an
/// entity that is not broad.
fn shares_specific(f: &Features, t: &TrajectoryFeatures, broad: &BTreeSet<String>) -> bool {
    f.terms
        .iter()
        .any(|x| is_specific(x) && t.terms.contains(x))
        || f.entities
            .iter()
            .any(|e| !broad.contains(e) && t.entities.contains(e))
}

/// The deterministic trajectory summary, in sections (SPEC §7): profile (label, up to 8
/// entities, up to 10 active claims), item sets (up to 16 values), relations (facts and the last
/// 3 snapshot notes), conflicts.
fn summarize(t: &TrajState, lexicon: &Lexicon) -> String {
    let label = trajectory_label(t, lexicon);
    let entities: Vec<&str> = t
        .features
        .entities
        .iter()
        .filter_map(|k| lexicon.entities.get(k).map(String::as_str))
        .take(8)
        .collect();
    let mut out = format!("Profile: {label}");
    if !entities.is_empty() {
        out.push_str(&format!("\nEntities: {}", entities.join(", ")));
    }
    let active: Vec<&str> = t
        .claims
        .iter()
        .rev()
        .filter(|c| c.status == ClaimStatus::Active)
        .take(10)
        .map(|c| c.draft.text.as_str())
        .collect();
    for c in active.iter().rev() {
        out.push_str(&format!("\n- {c}"));
    }
    let mut items: Vec<&str> = t.items.iter().map(|(i, _)| i.as_str()).collect();
    items.extend(t.counts.iter().map(String::as_str));
    items.truncate(16);
    if !items.is_empty() {
        out.push_str(&format!("\nItems: {}", items.join(", ")));
    }
    let facts: Vec<String> = t
        .features
        .facets
        .iter()
        .take(8)
        .map(|f| format!("{}={}", f.tag, f.value))
        .collect();
    if !facts.is_empty() {
        out.push_str(&format!("\nFacts: {}", facts.join("; ")));
    }
    for n in &t.notes {
        out.push_str(&format!("\nNote: {n}"));
    }
    let conflicts = t
        .claims
        .iter()
        .filter(|c| {
            matches!(
                c.status,
                ClaimStatus::Deprecated | ClaimStatus::Contradictory
            )
        })
        .take(5);
    for c in conflicts {
        out.push_str(&format!("\nSuperseded: {}", c.draft.text));
    }
    out
}

/// A short label: the most specific entity, else the top terms, else the top keywords.
pub(crate) fn trajectory_label(t: &TrajState, lexicon: &Lexicon) -> String {
    let specific: Vec<&str> = t
        .features
        .entities
        .iter()
        .filter(|k| !lexicon.speakers.contains(*k))
        .filter_map(|k| lexicon.entities.get(k).map(String::as_str))
        .take(2)
        .collect();
    let terms: Vec<&str> = t
        .features
        .terms
        .iter()
        .map(String::as_str)
        .take(3)
        .collect();
    let speakers: Vec<&str> = t
        .features
        .entities
        .iter()
        .filter(|k| lexicon.speakers.contains(*k))
        .filter_map(|k| lexicon.entities.get(k).map(String::as_str))
        .collect();
    let topic = if !specific.is_empty() {
        specific.join(", ")
    } else if !terms.is_empty() {
        terms.join(", ")
    } else {
        t.features
            .keywords
            .iter()
            .take(3)
            .map(|k| t.surface(k))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if speakers.is_empty() {
        topic
    } else {
        format!("{} — {topic}", speakers.join(" & "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::fold_exchanges;
    use crate::extract::exchanges;
    use crate::{BuildReport, DeterministicDecider, DeterministicExtractor, DeterministicJudge};
    use chrono::NaiveDate;
    use trajwiki_core::{EmbedKind, Embedder, HashingEmbedder};

    /// Six sessions, three days apart, of two exchanges each; Yosemite, Biscuit and the Lisbon
    /// half marathon recur across them.
    fn conversation() -> Vec<SourceMessage> {
        let ns = Namespace::new("late").unwrap();
        let lines = [
            "We're planning a camping trip to Yosemite with Biscuit.",
            "Yosemite with Biscuit sounds fun!",
            "I signed up for the Lisbon half marathon.",
            "The Lisbon half marathon is a great goal.",
        ];
        let mut out = Vec::new();
        for session in 1..=6u32 {
            for (k, text) in lines.iter().enumerate() {
                let seq = k as u32 + 1;
                let at = NaiveDate::from_ymd_opt(2024, 1, 1)
                    .unwrap()
                    .and_hms_opt(9, 0, seq)
                    .unwrap()
                    + chrono::Duration::days(i64::from(session) * 3);
                let speaker = if k % 2 == 0 { "Maya" } else { "Tom" };
                out.push(SourceMessage::new(
                    ns.clone(),
                    session,
                    seq,
                    speaker.to_string(),
                    format!("{text} (session {session})"),
                    at,
                    vec![],
                    Some(format!("D{session}:{seq}")),
                ));
            }
        }
        out
    }

    /// Folds `messages`, one exchange at a time: every delta, in order.
    fn fold_all(messages: &[SourceMessage]) -> Vec<Delta> {
        let mut out = Vec::new();
        fold_each(messages, |_, delta| out.push(delta));
        out
    }

    /// Folds `messages`, one exchange at a time, handing each delta and the fold after it to
    /// `each`; returns the fold.
    fn fold_each(messages: &[SourceMessage], mut each: impl FnMut(&Fold, Delta)) -> Fold {
        let config = MemoryConfig::default();
        let (extractor, decider, judge) = (
            DeterministicExtractor::new(config.clone()),
            DeterministicDecider::new(config.clone()),
            DeterministicJudge::new(config.clone()),
        );
        let b = Builders {
            config: &config,
            extractor: &extractor,
            decider: &decider,
            judge: &judge,
        };
        let embedder = HashingEmbedder::new(64);
        let mut embed = |texts: &[&str]| {
            let rows = embedder.embed(texts, EmbedKind::Document)?;
            Ok(rows.rows().map(<[f32]>::to_vec).collect())
        };
        let mut fold = Fold::new(messages[0].namespace.clone());
        for group in exchanges(messages) {
            let group: Vec<&SourceMessage> = group.into_iter().map(|i| &messages[i]).collect();
            let mut report = BuildReport::default();
            let delta = fold_exchanges(&mut fold, &[group], &mut embed, &b, &mut report).unwrap();
            each(&fold, delta);
        }
        fold
    }

    #[test]
    fn a_value_holds_until_revised_and_a_passing_mention_does_not_revive_it() {
        let ns = Namespace::new("spans").unwrap();
        let turns = [
            "I live in Lisbon, in a flat by the river.",
            "Lisbon is lovely this time of year, I'm glad I live here.",
            "We moved from Lisbon to Porto last month!",
            "I used to live in Lisbon, I miss it sometimes.",
            "I spent the weekend in Lisbon with old friends.",
        ];
        let mut messages = Vec::new();
        for (k, text) in turns.iter().enumerate() {
            let session = k as u32 + 1;
            let at = NaiveDate::from_ymd_opt(2024, 1, 1)
                .unwrap()
                .and_hms_opt(9, 0, 0)
                .unwrap()
                + chrono::Duration::days(i64::from(session) * 7);
            for (seq, (speaker, text)) in [("Ann", *text), ("Ben", "Oh nice, tell me more.")]
                .into_iter()
                .enumerate()
            {
                messages.push(SourceMessage::new(
                    ns.clone(),
                    session,
                    seq as u32 + 1,
                    speaker.to_string(),
                    text.to_string(),
                    at + chrono::Duration::minutes(seq as i64),
                    vec![],
                    Some(format!("D{session}:{}", seq + 1)),
                ));
            }
        }
        let deltas = fold_all(&messages);
        let claims: Vec<&Claim> = deltas.iter().flat_map(|d| &d.claims).collect();
        let ops: Vec<&ClaimOp> = deltas.iter().flat_map(|d| &d.ops).collect();
        let when: BTreeMap<&SnapshotId, Timestamp> = deltas
            .iter()
            .flat_map(|d| &d.snapshots)
            .map(|s| (&s.id, s.timestamp))
            .collect();
        let source = |r: &str| {
            messages
                .iter()
                .find(|m| m.external_ref.as_deref() == Some(r))
        };
        let lisbon = claims
            .iter()
            .find(|c| c.source_message_ids[0] == source("D1:1").unwrap().id)
            .expect("a claim of D1:1");
        // Session 2 is a source of the Lisbon claim, not a claim of its own.
        assert!(ops.iter().any(|o| o.op == OpKind::Add
            && o.new_claim.as_ref() == Some(&lisbon.id)
            && o.source_message_ids[0] == source("D2:1").unwrap().id));
        let edits: Vec<&&ClaimOp> = ops.iter().filter(|o| o.op != OpKind::Add).collect();
        assert_eq!(edits.len(), 1, "{edits:?}");
        assert_eq!(edits[0].op, OpKind::Revise);
        assert_eq!(edits[0].target.as_ref(), Some(&lisbon.id));
        assert_eq!(edits[0].source_message_ids[0], source("D3:1").unwrap().id);
        // As of each session's end: the Lisbon claim holds until the move, and no later mention
        // of Lisbon brings it back.
        let initial: BTreeMap<&ClaimId, ClaimStatus> =
            claims.iter().map(|c| (&c.id, c.status)).collect();
        for (session, held) in [(1, true), (2, true), (3, false), (4, false), (5, false)] {
            let cut = source(&format!("D{session}:2")).unwrap().timestamp;
            let state = trajwiki_core::replay_ops(
                ops.iter().copied().filter(|o| when[&o.snapshot] <= cut),
                |c| initial.get(c).copied(),
            )
            .unwrap();
            assert_eq!(
                state.get(&lisbon.id) != Some(&ClaimStatus::Deprecated),
                held,
                "session {session}: {:?}",
                state.get(&lisbon.id)
            );
        }
    }

    /// Folds the sessions in `order`, one exchange at a time; after each append the index of
    /// open trajectories by session equals the one derived from the trajectories, as a resumed
    /// fold derives it. Returns the fold and its snapshots.
    fn fold_in(order: &[u32]) -> (Fold, Vec<Snapshot>) {
        let all = conversation();
        let arrived: Vec<SourceMessage> = order
            .iter()
            .flat_map(|&s| all.iter().filter(move |m| m.session == s).cloned())
            .collect();
        let mut snapshots = Vec::new();
        let fold = fold_each(&arrived, |fold, delta| {
            snapshots.extend(delta.snapshots);
            assert_eq!(fold.open, open_by_session(&fold.trajectories));
        });
        (fold, snapshots)
    }

    /// The snapshots of each trajectory, in version order.
    fn by_trajectory(snapshots: &[Snapshot]) -> BTreeMap<TrajectoryId, Vec<&Snapshot>> {
        let mut out: BTreeMap<TrajectoryId, Vec<&Snapshot>> = BTreeMap::new();
        for s in snapshots {
            out.entry(s.trajectory.clone()).or_default().push(s);
        }
        out
    }

    #[test]
    fn late_exchanges_never_put_a_trajectory_back_in_time() {
        for order in [[4, 5, 1, 6, 2, 3], [6, 5, 4, 3, 2, 1], [1, 2, 3, 4, 5, 6]] {
            let (fold, snapshots) = fold_in(&order);
            for (t, versions) in by_trajectory(&snapshots) {
                for pair in versions.windows(2) {
                    assert_eq!(pair[1].version, pair[0].version + 1);
                    assert!(
                        pair[0].timestamp <= pair[1].timestamp,
                        "arrival {order:?}: {t} goes back from {} to {}",
                        pair[0].timestamp,
                        pair[1].timestamp
                    );
                }
            }
            for t in &fold.trajectories {
                let latest = snapshots.iter().find(|s| Some(&s.id) == t.snapshots.last());
                assert_eq!(latest.map(|s| s.timestamp), Some(t.latest_at));
            }
        }
    }

    #[test]
    fn a_late_session_continues_the_trajectories_of_its_own_time() {
        // Sessions 1 and 2 arrive after 5 and 6: out of the live window (two sessions) and
        // older than every live trajectory. Session 2's talk of Yosemite continues what session
        // 1's opened, as it does when the sessions arrive in order.
        for order in [[5, 6, 1, 2], [1, 2, 5, 6]] {
            let (_, snapshots) = fold_in(&order);
            assert_eq!(snapshots.len(), 8, "two exchanges a session");
            let at = |session| 2 * order.iter().position(|&s| s == session).unwrap();
            let (first, second) = (&snapshots[at(1)], &snapshots[at(2)]);
            assert!(first.summary.contains("Yosemite"), "{first:?}");
            assert_eq!(first.trajectory, second.trajectory, "arrival {order:?}");
            assert_eq!(second.version, first.version + 1, "arrival {order:?}");
        }
    }
}
