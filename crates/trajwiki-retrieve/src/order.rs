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
        let snapshots = std::mem::take(&mut self.snapshots);
        self.snapshots = sorted(snapshots, |s| {
            let (at, id) = snapshot_key(s, |m| messages.get(m).copied());
            (at, id.to_string())
        });
        let position: FxHashMap<&SnapshotId, usize> = self
            .snapshots
            .iter()
            .enumerate()
            .map(|(i, s)| (&s.id, i))
            .collect();
        let claims = std::mem::take(&mut self.claims);
        self.claims = sorted(claims, |(c, _): &(Claim, ClaimStatus)| {
            let (at, id) = claim_key(c, |s| position.get(s).copied());
            (at, id.to_string())
        });
        let trajectories = std::mem::take(&mut self.trajectories);
        self.trajectories = sorted(trajectories, |t| {
            let (at, id) = trajectory_key(t, |s| position.get(s).copied());
            (at, id.to_string())
        });
    }
}

/// `items` sorted by `key`, each key computed once.
fn sorted<T>(mut items: Vec<T>, key: impl Fn(&T) -> (usize, String)) -> Vec<T> {
    items.sort_by_cached_key(key);
    items
}
