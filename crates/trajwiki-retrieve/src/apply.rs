//! A loaded index takes what changed in its namespace: the messages that came since, the
//! snapshots, claims, trajectories and pages a build wrote. The work is that of the change, not
//! of the history: an agent's turn (append, build, search) does not reload its namespace.
//!
//! The index after [`Index::apply`] is the one [`Index::new`] builds from all the records now,
//! search for search: the records stand where a whole load puts them (see [`crate::order`]),
//! term ids differ but no score depends on them (a query's terms are scored in the order of
//! their text), and every derived value is computed by the same function on the same inputs.
//! A change that a whole load would put before what the index holds (a backfill of older
//! history) is refused: the caller loads the namespace whole.

use rustc_hash::{FxHashMap, FxHashSet};
use trajwiki_core::{
    Claim, ClaimId, ClaimStatus, MessageId, PageId, PageKind, Snapshot, SourceMessage, Trajectory,
    WikiPage,
};

use half::f16;

use crate::derived::{Derived, Keywords};
use crate::index::{
    add_restated, add_superseded, claim_bytes, keep_centroid, link_revision, message_bytes,
    numbered, page_row, page_trajectories, snapshot_bytes, snapshot_centroid, snapshot_links,
    snapshot_text, superseded_in, trajectory_bytes, trajectory_row, trajectory_snapshots, Index,
    IndexError, Rows,
};
use crate::order::{claim_key, snapshot_key, trajectory_key};
use crate::vectors::MessageVectors;

/// What changed in a namespace since its index was loaded (or last changed), as the store says.
#[derive(Debug, Default)]
pub struct IndexDelta {
    /// The messages that came since, in the index's order (by session, then position).
    pub messages: Vec<SourceMessage>,
    /// New snapshots.
    pub snapshots: Vec<Snapshot>,
    /// Claims new or with a changed status, with their status now.
    pub claims: Vec<(Claim, ClaimStatus)>,
    /// The restatements of those claims now (see [`crate::NamespaceRecords::restatements`]): they
    /// replace the held restatements of each.
    pub restatements: Vec<(ClaimId, MessageId)>,
    /// Trajectories new or changed.
    pub trajectories: Vec<Trajectory>,
    /// The pages that changed, if any.
    pub pages: Option<PageChanges>,
}

/// How the pages changed: pages with a new revision (held ones, and new ones) and pages
/// retired. A page's row is derived from its trajectories' ([`crate::index::page_row`]), so a
/// change carries no vector.
#[derive(Debug, Default)]
pub struct PageChanges {
    /// Pages new or revised.
    pub changed: Vec<WikiPage>,
    /// Pages retired.
    pub retired: Vec<PageId>,
}

/// Sorts `new` records by `key` (an index's order) and says whether they all go after `last`,
/// the last held record of their level.
fn sorted_after<T>(new: &mut [T], last: Option<&T>, key: impl Fn(&T) -> (usize, &str)) -> bool {
    new.sort_by(|a, b| key(a).cmp(&key(b)));
    match (last, new.first()) {
        (Some(last), Some(first)) => key(first) > key(last),
        _ => true,
    }
}

impl IndexDelta {
    /// Approximately the heap bytes an index of dimension `dim` grows by when it takes this
    /// change (the records, their lines, terms and rows; twice the messages' for what a load
    /// keeps of them): what a cache counts without measuring the whole index again.
    pub fn heap_bytes(&self, dim: usize) -> usize {
        let messages: usize = self.messages.iter().map(|m| 3 * message_bytes(m)).sum();
        let snapshots: usize = self
            .snapshots
            .iter()
            .map(|s| snapshot_bytes(s) + 2 * dim)
            .sum();
        let claims: usize = self.claims.iter().map(|(c, _)| claim_bytes(c)).sum();
        let trajectories: usize = self
            .trajectories
            .iter()
            .map(|t| trajectory_bytes(t) + 2 * dim)
            .sum();
        // Held twice: the records' list and the index's per-message map.
        let restatements: usize = self
            .restatements
            .iter()
            .map(|(c, m)| 88 + c.as_str().len() + m.as_str().len())
            .sum();
        messages + snapshots + claims + trajectories + restatements
    }
}

/// What [`Index::apply`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The index took the change.
    InPlace,
    /// The index cannot take the change in place, for the reason given, and is unchanged: the
    /// namespace is to be loaded whole.
    Refused(&'static str),
}

/// Where the records of a change go, checked before the index is touched.
struct Plan {
    snapshots: Vec<Snapshot>,
    new_claims: Vec<(Claim, ClaimStatus)>,
    changed_claims: Vec<(usize, (Claim, ClaimStatus))>,
    new_trajectories: Vec<Trajectory>,
    changed_trajectories: Vec<(usize, Trajectory)>,
}

impl Index {
    /// Applies `delta` to the index in place: `grow` turns the index's message vectors into
    /// those of every message now (the held ones' rows may now come from the vector file a build
    /// grew); `derived` gives the new messages' parts and the lexicon's counts. Returns
    /// [`Applied::Refused`], the index unchanged, when the change cannot be taken in place. On an
    /// error the index is left part-changed and is to be dropped.
    pub fn apply(
        &mut self,
        delta: IndexDelta,
        grow: impl FnOnce(MessageVectors) -> Result<MessageVectors, IndexError>,
        derived: &mut Derived,
    ) -> Result<Applied, IndexError> {
        let IndexDelta {
            messages,
            snapshots,
            claims,
            restatements,
            trajectories,
            pages,
        } = delta;
        // The claims whose restatements the change holds: every claim in it.
        let in_change: FxHashSet<ClaimId> = claims.iter().map(|(c, _)| c.id.clone()).collect();
        let plan = match self.plan(&messages, snapshots, claims, trajectories) {
            Ok(plan) => plan,
            Err(reason) => return Ok(Applied::Refused(reason)),
        };
        let held = self.records.messages.len();
        let refs: Vec<&SourceMessage> = messages.iter().collect();
        let Some((parts, lexicon)) = derived.appended(
            held,
            self.records.messages.last().map(|m| &m.id),
            &refs,
            self.records.entity_min_count,
        ) else {
            return Ok(Applied::Refused(
                "the lexicon's counts of the held messages are not kept",
            ));
        };

        // The messages and their vectors.
        let held_vectors = &self.vectors.messages;
        let from_tail: Vec<usize> = (held_vectors.shared_rows()..held_vectors.len())
            .map(|r| held_vectors.message_of_row(r))
            .collect();
        let placeholder = MessageVectors::owned(self.dim, Vec::new())?;
        let vectors = grow(std::mem::replace(&mut self.vectors.messages, placeholder))?;
        if vectors.len() != held + messages.len() {
            return Err(IndexError::Shape {
                level: "messages (grown)",
                got: vectors.len(),
                rows: held + messages.len(),
                dim: self.dim,
            });
        }
        self.vectors.messages = vectors;
        self.lexicon = lexicon;
        let keywords: Vec<Keywords> = parts.iter().map(|p| p.keywords.clone()).collect();
        for (row, (m, part)) in numbered(&mut self.vocab, &keywords)
            .into_iter()
            .zip(messages.into_iter().zip(parts))
        {
            let i = self.records.messages.len();
            self.ids.messages.insert(m.id.clone(), i as u32);
            self.msg_bm25.push(&row)?;
            self.msg_terms.push(row);
            self.session_of.push(m.session);
            self.speaker_of.push(part.speaker.clone());
            self.families_of.push(part.families);
            self.lines.push(part.line.clone());
            self.base_len.push((part.line.0.len(), part.line.1));
            self.msg_snaps.push(Vec::new());
            self.msg_claims.push(Vec::new());
            self.superseded.push(Vec::new());
            self.records.messages.push(m);
            self.unbuilt += 1;
        }

        // Held snapshots whose messages' rows were embedded at load: a whole load now reads
        // them from the vector file, whose rows may be stored at another precision.
        let mut redo_trajectories: FxHashSet<usize> = FxHashSet::default();
        let redo: FxHashSet<usize> = from_tail
            .iter()
            .flat_map(|&i| self.msg_snaps[i].iter().copied())
            .collect();
        let mut scratch = vec![0.0f32; self.dim];
        let mut centroid = vec![0.0f32; self.dim];
        let mut redo: Vec<usize> = redo.into_iter().collect();
        redo.sort_unstable();
        for si in redo {
            self.snapshot_row(si, derived, &mut centroid, &mut scratch)?;
            redo_trajectories.insert(self.snap_traj[si]);
        }

        // New trajectories are numbered first: new snapshots refer to them.
        let held_trajectories = self.records.trajectories.len();
        for (k, t) in plan.new_trajectories.iter().enumerate() {
            self.ids
                .trajectories
                .insert(t.id.clone(), (held_trajectories + k) as u32);
        }
        let claim_texts: FxHashMap<&ClaimId, &str> = plan
            .new_claims
            .iter()
            .map(|(c, _)| (&c.id, c.text.as_str()))
            .collect();
        for s in plan.snapshots {
            let si = self.records.snapshots.len();
            let (ms, t) = snapshot_links(&s, &self.ids)?;
            for &mi in &ms {
                if self.msg_snaps[mi].is_empty() {
                    self.unbuilt -= 1;
                }
                self.msg_snaps[mi].push(si);
            }
            let text = snapshot_text(&s, |c| {
                claim_texts.get(c).copied().or_else(|| {
                    self.ids
                        .claim(c)
                        .map(|ci| self.records.claims[ci].0.text.as_str())
                })
            });
            let row = numbered(&mut self.vocab, &derived.keywords(&[text]))
                .pop()
                .expect("one text");
            self.snap_bm25.push(&row)?;
            self.ids.snapshots.insert(s.id.clone(), si as u32);
            self.snap_msgs.push(ms);
            self.snap_traj.push(t);
            self.update_links.push(Vec::new());
            self.records.snapshots.push(s);
            self.snapshot_row(si, derived, &mut centroid, &mut scratch)?;
            redo_trajectories.insert(t);
        }

        // Claims: new ones after the held, changed ones in their place; the messages whose
        // superseded statements they change are rendered again.
        let mut affected: FxHashSet<usize> = FxHashSet::default();
        fn touch(index: &Index, c: &Claim, affected: &mut FxHashSet<usize>) {
            affected.extend(
                c.source_message_ids
                    .iter()
                    .filter_map(|m| index.ids.message(m)),
            );
        }
        for (ci, (c, status)) in plan.changed_claims {
            touch(self, &self.records.claims[ci].0, &mut affected);
            touch(self, &c, &mut affected);
            self.records.claims[ci] = (c, status);
        }
        for (c, status) in plan.new_claims {
            let ci = self.records.claims.len();
            self.ids.claims.insert(c.id.clone(), ci as u32);
            for m in &c.source_message_ids {
                if let Some(mi) = self.ids.message(m) {
                    self.msg_claims[mi].push(ci);
                }
            }
            if status == ClaimStatus::Deprecated {
                touch(self, &c, &mut affected);
            }
            if let Some(from) = &c.revised_from {
                self.revised_by.insert(from.clone(), ci as u32);
                if let Some(fi) = self.ids.claim(from) {
                    let revised = self.records.claims[fi].0.clone();
                    touch(self, &revised, &mut affected);
                }
            }
            self.records.claims.push((c, status));
            let c = &self.records.claims[ci].0;
            link_revision(&self.records, &self.ids, c, &mut self.update_links);
        }
        // Restatements: those of a claim in the change replace the held ones (a claim's are
        // all in the change; none while it holds).
        if !in_change.is_empty() {
            let held = std::mem::take(&mut self.records.restatements);
            let (dropped, kept): (Vec<_>, Vec<_>) =
                held.into_iter().partition(|(c, _)| in_change.contains(c));
            for (c, m) in &dropped {
                if let (Some(ci), Some(mi)) = (self.ids.claim(c), self.ids.message(m)) {
                    if let Some(claims) = self.restated_in.get_mut(&mi) {
                        claims.retain(|&x| x != ci);
                        if claims.is_empty() {
                            self.restated_in.remove(&mi);
                        }
                    }
                    affected.insert(mi);
                }
            }
            for (c, m) in &restatements {
                if let (Some(ci), Some(mi)) = (self.ids.claim(c), self.ids.message(m)) {
                    add_restated(&mut self.restated_in, mi, ci);
                    affected.insert(mi);
                }
            }
            let mut all = kept;
            all.extend(restatements);
            all.sort_by(|a, b| a.0.cmp(&b.0));
            self.records.restatements = all;
        }
        for mi in affected {
            let superseded = superseded_in(
                &self.records,
                &self.ids,
                &self.revised_by,
                &self.msg_claims[mi],
                self.restated_in.get(&mi),
            );
            let (bytes, tokens) = self.base_len[mi];
            let line = &mut self.lines[mi];
            line.0.truncate(bytes);
            line.1 = tokens;
            add_superseded(line, &superseded);
            self.superseded[mi] = superseded;
        }

        // Trajectories: changed ones in their place, new ones after the held.
        let added_trajectories = !plan.new_trajectories.is_empty();
        let changed = plan.changed_trajectories.into_iter().chain(
            plan.new_trajectories
                .into_iter()
                .enumerate()
                .map(|(k, t)| (held_trajectories + k, t)),
        );
        for (ti, t) in changed {
            self.set_trajectory(ti, t, derived)?;
            redo_trajectories.insert(ti);
        }
        let mut redo_trajectories: Vec<usize> = redo_trajectories.into_iter().collect();
        redo_trajectories.sort_unstable();
        for &ti in &redo_trajectories {
            self.trajectory_vector(ti, derived)?;
        }

        // Pages: revised ones in their place; the page level is laid out again (from what it
        // holds) when pages came or went. Then the row of every page that is new, revised or
        // links a trajectory whose row changed is derived again.
        let mut pages = pages.unwrap_or_default();
        // A page retired and made again since is there, at its new revision.
        let changed: FxHashSet<&PageId> = pages.changed.iter().map(|p| &p.id).collect();
        let retired: Vec<PageId> = pages
            .retired
            .iter()
            .filter(|id| !changed.contains(id))
            .cloned()
            .collect();
        pages.retired = retired;
        let mut added = Vec::new();
        let mut revised: FxHashSet<PageId> = FxHashSet::default();
        for page in pages.changed {
            revised.insert(page.id.clone());
            if self.records.pages.iter().any(|p| p.id == page.id) {
                self.revise_page(page, derived)?;
            } else {
                added.push(page);
            }
        }
        if !added.is_empty() || !pages.retired.is_empty() {
            self.relay_pages(added, &pages.retired, derived)?;
        } else if added_trajectories {
            self.page_trajs = self
                .pages
                .iter()
                .map(|&pi| page_trajectories(&self.records.pages[pi], &self.ids))
                .collect();
        }
        self.page_rows(&revised, &redo_trajectories)?;
        Ok(Applied::InPlace)
    }

    /// Derives again the row of every non-index page that is in `revised` or links one of the
    /// trajectories `moved` (sorted), as a load derives it.
    fn page_rows(
        &mut self,
        revised: &FxHashSet<PageId>,
        moved: &[usize],
    ) -> Result<(), IndexError> {
        let dim = self.dim;
        let mut row = vec![f16::ZERO; dim];
        for (r, &pi) in self.pages.iter().enumerate() {
            let members = &self.page_trajs[r];
            let due = revised.contains(&self.records.pages[pi].id)
                || members.iter().any(|t| moved.binary_search(t).is_ok());
            if due {
                page_row(&mut row, members, &self.vectors.trajectories.data);
                self.vectors.pages.set_row(r, &row)?;
            }
        }
        Ok(())
    }

    /// Checks where the records of a change go; the reason when the index cannot take it.
    fn plan(
        &self,
        messages: &[SourceMessage],
        snapshots: Vec<Snapshot>,
        claims: Vec<(Claim, ClaimStatus)>,
        trajectories: Vec<Trajectory>,
    ) -> Result<Plan, &'static str> {
        let held = self.records.messages.len();
        let order = |m: &SourceMessage| (m.session, m.seq);
        if messages.windows(2).any(|w| order(&w[0]) >= order(&w[1])) {
            return Err("the new messages are not in the index's order");
        }
        if let (Some(last), Some(first)) = (self.records.messages.last(), messages.first()) {
            if order(first) <= order(last) {
                return Err("a new message goes before a held one (a backfill)");
            }
        }
        let new_messages: FxHashMap<_, usize> = messages
            .iter()
            .enumerate()
            .map(|(k, m)| (&m.id, held + k))
            .collect();
        if new_messages.keys().any(|id| self.ids.message(id).is_some()) {
            return Err("a new message is held already");
        }
        let message = |id: &_| {
            self.ids
                .message(id)
                .or_else(|| new_messages.get(id).copied())
        };

        // Snapshots: all new, after the held ones.
        if snapshots.iter().any(|s| self.ids.snapshot(&s.id).is_some()) {
            return Err("a snapshot changed");
        }
        let mut snapshots = snapshots;
        if !sorted_after(&mut snapshots, self.records.snapshots.last(), |s| {
            snapshot_key(s, message)
        }) {
            return Err("a new snapshot goes before a held one");
        }
        let new_snapshots: FxHashMap<_, usize> = snapshots
            .iter()
            .enumerate()
            .map(|(k, s)| (&s.id, self.records.snapshots.len() + k))
            .collect();
        let snapshot = |id: &_| {
            self.ids
                .snapshot(id)
                .or_else(|| new_snapshots.get(id).copied())
        };

        // Claims: new ones after the held ones.
        let (changed_claims, mut new_claims): (Vec<_>, Vec<_>) = claims
            .into_iter()
            .partition(|(c, _)| self.ids.claim(&c.id).is_some());
        let changed_claims: Vec<(usize, (Claim, ClaimStatus))> = changed_claims
            .into_iter()
            .map(|c| (self.ids.claim(&c.0.id).expect("partitioned"), c))
            .collect();
        if !sorted_after(&mut new_claims, self.records.claims.last(), |(c, _)| {
            claim_key(c, snapshot)
        }) {
            return Err("a new claim goes before a held one");
        }

        // Trajectories: changed ones keep their first snapshot (and so their place), new ones
        // go after the held ones.
        let (changed, mut new_trajectories): (Vec<_>, Vec<_>) = trajectories
            .into_iter()
            .partition(|t| self.ids.trajectory(&t.id).is_some());
        let mut changed_trajectories = Vec::with_capacity(changed.len());
        for t in changed {
            let ti = self.ids.trajectory(&t.id).expect("partitioned");
            if self.records.trajectories[ti].snapshot_ids.first() != t.snapshot_ids.first() {
                return Err("a trajectory's first snapshot changed");
            }
            changed_trajectories.push((ti, t));
        }
        if !sorted_after(
            &mut new_trajectories,
            self.records.trajectories.last(),
            |t| trajectory_key(t, snapshot),
        ) {
            return Err("a new trajectory goes before a held one");
        }
        Ok(Plan {
            snapshots,
            new_claims,
            changed_claims,
            new_trajectories,
            changed_trajectories,
        })
    }

    /// Computes snapshot `si`'s centroid and sets its row (the next row for a new snapshot).
    fn snapshot_row(
        &mut self,
        si: usize,
        derived: &mut Derived,
        centroid: &mut [f32],
        scratch: &mut [f32],
    ) -> Result<(), IndexError> {
        let s = &self.records.snapshots[si];
        let ms = &self.snap_msgs[si];
        snapshot_centroid(derived, &self.vectors.messages, s, ms, centroid, scratch);
        keep_centroid(derived, &self.vectors.messages, s, ms, centroid);
        let row: Vec<f16> = centroid.iter().map(|&x| f16::from_f32(x)).collect();
        self.vectors.snapshots.set_row(si, &row)
    }

    /// Puts trajectory `t` at position `ti` (a held one's, or the next): its snapshots, terms,
    /// entities. Its vector is set by [`Index::trajectory_vector`].
    fn set_trajectory(
        &mut self,
        ti: usize,
        t: Trajectory,
        derived: &mut Derived,
    ) -> Result<(), IndexError> {
        let snaps = trajectory_snapshots(&t, &self.ids)?;
        let terms = numbered(
            &mut self.vocab,
            &derived.keywords(std::slice::from_ref(&t.summary)),
        )
        .pop()
        .expect("one text");
        let held = ti < self.records.trajectories.len();
        if held {
            let old = std::mem::replace(&mut self.records.trajectories[ti], t);
            self.traj_bm25
                .replace(ti as u32, &self.traj_terms[ti], &terms)?;
            self.vocab.release(&self.traj_terms[ti]);
            self.traj_terms[ti] = terms;
            self.traj_snaps[ti] = snaps;
            for e in &old.signals.entities {
                if let Some(list) = self.entity_trajectories.get_mut(e.as_str()) {
                    list.retain(|&x| x as usize != ti);
                    if list.is_empty() {
                        self.entity_trajectories.remove(e.as_str());
                    }
                }
            }
        } else {
            self.traj_bm25.push(&terms)?;
            self.traj_terms.push(terms);
            self.traj_snaps.push(snaps);
            self.records.trajectories.push(t);
        }
        for e in &self.records.trajectories[ti].signals.entities {
            let list = self.entity_trajectories.entry(e.clone()).or_default();
            if let Err(at) = list.binary_search(&(ti as u32)) {
                list.insert(at, ti as u32);
            }
        }
        Ok(())
    }

    /// Sets trajectory `ti`'s row from its snapshots' centroids, as a whole load computes it.
    fn trajectory_vector(&mut self, ti: usize, derived: &Derived) -> Result<(), IndexError> {
        let dim = self.dim;
        let snaps = &self.traj_snaps[ti];
        let mut centroids: FxHashMap<usize, Vec<f32>> = FxHashMap::default();
        let mut scratch = vec![0.0f32; dim];
        for &si in snaps {
            centroids.entry(si).or_insert_with(|| {
                let mut c = vec![0.0f32; dim];
                snapshot_centroid(
                    derived,
                    &self.vectors.messages,
                    &self.records.snapshots[si],
                    &self.snap_msgs[si],
                    &mut c,
                    &mut scratch,
                );
                c
            });
        }
        let mut row = vec![f16::ZERO; dim];
        let mut c = vec![0.0f32; dim];
        trajectory_row(&mut row, snaps, &mut c, &mut scratch, |i, out| {
            out.copy_from_slice(&centroids[&i])
        });
        self.vectors.trajectories.set_row(ti, &row)
    }

    /// Puts a held page's new revision in its place (its row is derived by
    /// [`Index::page_rows`]).
    fn revise_page(&mut self, page: WikiPage, derived: &mut Derived) -> Result<(), IndexError> {
        let missing = || IndexError::Dangling {
            what: "a revised page".into(),
            missing: page.id.to_string(),
        };
        let pi = self
            .records
            .pages
            .iter()
            .position(|p| p.id == page.id)
            .ok_or_else(missing)?;
        if (self.records.pages[pi].kind == PageKind::Index) != (page.kind == PageKind::Index) {
            return Err(IndexError::Dangling {
                what: format!("page {} changed kind", page.id),
                missing: page.kind.as_str().to_string(),
            });
        }
        if let Ok(row) = self.pages.binary_search(&pi) {
            let terms = numbered(
                &mut self.vocab,
                &derived.keywords(std::slice::from_ref(&page.routing_text)),
            )
            .pop()
            .expect("one text");
            self.page_bm25
                .replace(row as u32, &self.page_terms[row], &terms)?;
            self.vocab.release(&self.page_terms[row]);
            self.page_terms[row] = terms;
            self.page_trajs[row] = page_trajectories(&page, &self.ids);
        }
        self.records.pages[pi] = page;
        Ok(())
    }

    /// Lays the page level out again with `added` pages and without the `retired` ones, in the
    /// store's order (kind, then id): the held pages keep their terms and rows, a new non-index
    /// page takes a zero row until [`Index::page_rows`] derives it.
    fn relay_pages(
        &mut self,
        added: Vec<WikiPage>,
        retired: &[PageId],
        derived: &mut Derived,
    ) -> Result<(), IndexError> {
        let dim = self.dim;
        // Each held page with what the level holds of it (its row's terms, trajectories and
        // vector), less the retired ones.
        type Laid = (WikiPage, Option<(Vec<u32>, Vec<f16>)>);
        let mut rows_of: FxHashMap<usize, usize> = FxHashMap::default();
        for (row, &pi) in self.pages.iter().enumerate() {
            rows_of.insert(pi, row);
        }
        let old_terms = std::mem::take(&mut self.page_terms);
        let mut old_terms: Vec<Option<Vec<u32>>> = old_terms.into_iter().map(Some).collect();
        let mut laid: Vec<Laid> = Vec::with_capacity(self.records.pages.len() + added.len());
        for (pi, page) in std::mem::take(&mut self.records.pages)
            .into_iter()
            .enumerate()
        {
            let held = rows_of.get(&pi).map(|&row| {
                let terms = old_terms[row].take().expect("one row per page");
                let vector = self.vectors.pages.data[row * dim..(row + 1) * dim].to_vec();
                (terms, vector)
            });
            if retired.contains(&page.id) {
                if let Some((terms, _)) = held {
                    self.vocab.release(&terms);
                }
                continue;
            }
            laid.push((page, held));
        }
        for page in added {
            let held = (page.kind != PageKind::Index).then(|| {
                let terms = numbered(
                    &mut self.vocab,
                    &derived.keywords(std::slice::from_ref(&page.routing_text)),
                )
                .pop()
                .expect("one text");
                (terms, vec![f16::ZERO; dim])
            });
            laid.push((page, held));
        }
        laid.sort_by(|(a, _), (b, _)| {
            (a.kind.as_str(), a.id.as_str()).cmp(&(b.kind.as_str(), b.id.as_str()))
        });
        let mut pages = Vec::new();
        let mut terms = Vec::new();
        let mut rows = Vec::new();
        let mut records = Vec::with_capacity(laid.len());
        for (pi, (page, held)) in laid.into_iter().enumerate() {
            if let Some((t, v)) = held {
                pages.push(pi);
                terms.push(t);
                rows.extend(v);
            }
            records.push(page);
        }
        let docs: Vec<&[u32]> = terms.iter().map(Vec::as_slice).collect();
        self.page_bm25 = trajwiki_compute::Bm25Index::build(&docs, self.page_bm25.params())?;
        self.page_trajs = pages
            .iter()
            .map(|&pi| page_trajectories(&records[pi], &self.ids))
            .collect();
        self.vectors.pages = Rows::new(rows, dim)?;
        self.page_terms = terms;
        self.pages = pages;
        self.records.pages = records;
        Ok(())
    }
}
