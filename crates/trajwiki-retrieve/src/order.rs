//! The order of an index's records: the order in which a live namespace's records arrive.
//!
//! An index lists its records by position, and a search breaks its ties by position, so the
//! order is part of what a search answers. The store lists a namespace's records by id; an index
//! lists them by where they stand in the conversation instead, so that the records an append
//! makes come after those it holds and are added to a loaded index at its end
//! ([`Index::apply`](crate::Index::apply)), where a load of the whole namespace puts them too:
//!
//! - messages by session, then position in it;
//! - snapshots by their last message, then id (an exchange is closed by its last message);
//! - claims by their snapshot, then id;
//! - trajectories by their first snapshot, then id (a trajectory's first snapshot never
//!   changes, so a changed trajectory keeps its place);
//! - pages as the store lists them (they are few, and a load takes them whole).
//!
//! A record that a load would put before one the index holds (a backfill of older history) makes
//! the loaded index unable to take the change in place: the namespace is then loaded whole.

use rustc_hash::FxHashMap;
use trajwiki_core::{Claim, ClaimStatus, MessageId, Snapshot, SnapshotId, Trajectory};

use crate::index::NamespaceRecords;

/// A snapshot's place: the position of its last message (of those in the namespace), then id.
pub(crate) fn snapshot_key(
    s: &Snapshot,
    message: impl Fn(&MessageId) -> Option<usize>,
) -> (usize, &str) {
    let last = s.source_message_ids.iter().filter_map(message).max();
    (last.unwrap_or(0), s.id.as_str())
}

/// A claim's place: its snapshot's position, then id.
pub(crate) fn claim_key(
    c: &Claim,
    snapshot: impl Fn(&SnapshotId) -> Option<usize>,
) -> (usize, &str) {
    (snapshot(&c.snapshot).unwrap_or(usize::MAX), c.id.as_str())
}

/// A trajectory's place: its first snapshot's position, then id.
pub(crate) fn trajectory_key(
    t: &Trajectory,
    snapshot: impl Fn(&SnapshotId) -> Option<usize>,
) -> (usize, &str) {
    let first = t.snapshot_ids.first().and_then(snapshot);
    (first.unwrap_or(usize::MAX), t.id.as_str())
}

impl NamespaceRecords {
    /// Puts the snapshots, claims and trajectories in an index's order (see the module's
    /// documentation); the messages must be in theirs (by session, then position), as a
    /// namespace read lists them for an index.
    pub fn sort_for_index(&mut self) {
        let messages: FxHashMap<&MessageId, usize> = self
            .messages
            .iter()
            .enumerate()
            .map(|(i, m)| (&m.id, i))
            .collect();
        let order = sorted_order(&self.snapshots, |s| {
            snapshot_key(s, |m| messages.get(m).copied())
        });
        permute(&mut self.snapshots, order);
        let position: FxHashMap<&SnapshotId, usize> = self
            .snapshots
            .iter()
            .enumerate()
            .map(|(i, s)| (&s.id, i))
            .collect();
        let order = sorted_order(&self.claims, |(c, _): &(Claim, ClaimStatus)| {
            claim_key(c, |s| position.get(s).copied())
        });
        let trajectories = sorted_order(&self.trajectories, |t| {
            trajectory_key(t, |s| position.get(s).copied())
        });
        drop(position);
        permute(&mut self.claims, order);
        permute(&mut self.trajectories, trajectories);
    }
}

/// The order of `items` by `key` (positions, each key computed once, borrowed from its item).
fn sorted_order<'a, T>(items: &'a [T], key: impl Fn(&'a T) -> (usize, &'a str)) -> Vec<u32> {
    let keys: Vec<(usize, &str)> = items.iter().map(key).collect();
    let mut order: Vec<u32> = (0..items.len() as u32).collect();
    order.sort_unstable_by(|&a, &b| keys[a as usize].cmp(&keys[b as usize]));
    order
}

/// Puts `items` in `order` (a permutation of their positions), moving each once.
fn permute<T>(items: &mut Vec<T>, order: Vec<u32>) {
    let mut slots: Vec<Option<T>> = std::mem::take(items).into_iter().map(Some).collect();
    *items = order
        .into_iter()
        .map(|i| slots[i as usize].take().expect("a permutation"))
        .collect();
}
