//! The Memory Wiki (SPEC §2.5), maintained by the construction fold (SPEC §2.6): entity and
//! entity-facet pages, inventory pages, topic pages (suppressed when mostly covered), rescue pages
//! so that no trajectory is reachable only through the index, and index pages linking every
//! trajectory.
//!
//! Pages come from *groups*: the trajectories that share an entity, an entity and facet tag, an
//! item family, a specific keyword, and the rescue list. A group keeps its members in the order
//! they joined, and a trajectory never leaves a group (its signals only grow), so a group above
//! `page_max` is cut into pages of `page_target` members in joining order: a new member changes
//! only the last one. An append re-derives the pages of the groups it changed — and, through
//! coverage, the topic and rescue pages of the trajectories whose pages changed — and marks the
//! pages to render again; only those are rendered and written. Everything a page shows comes from
//! the fold's state (trajectory states, groups), never from a lexicon newer than the page, so
//! appending in any split gives the same pages. Index pages list trajectories by creation, in
//! chunks of [`INDEX_CHUNK`].
//!
//! Titles are written at rendering from the page's trajectories, as a person would name the
//! page: who it is about and what, "Caroline — adoption agency, support group" (see
//! [`page_title`]). Every word of a title is one of the conversation's as written (entity
//! surfaces, item phrases, the surfaces of keywords, never their stems), the topics are nouns
//! as far as word lists tell (no verb, no adverb, no filler), and no title carries a count.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use trajwiki_core::{ClaimStatus, ItemCount, Namespace, PageId, PageKind, TrajectoryId, WikiPage};

use crate::extract::{is_specific, Lexicon};
use titles::page_title;

mod titles;
use crate::fold::TrajState;
use crate::MemoryConfig;

/// Trajectories per index page.
pub const INDEX_CHUNK: usize = 32;

/// A group of trajectories that may make pages.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Group {
    /// Members (trajectory positions), in the order they joined.
    pub members: Vec<usize>,
    /// For entity and facet groups: the entity's surface when the group last changed.
    pub surface: String,
}

/// A page before rendering.
#[derive(Debug, Clone, PartialEq)]
struct Draft {
    kind: PageKind,
    /// What the group fixes of the title ([`page_title`] writes the rest from the members): the
    /// entity's surface for entity and facet pages, the keyword's surface for a topic page, the
    /// item family for an inventory page, nothing for rescue and index pages.
    head: String,
    members: Vec<usize>,
}

/// Group key prefixes (a tab separates the parts of a key).
const ENTITY: &str = "e\t";
const FACET: &str = "f\t";
const INVENTORY: &str = "i\t";
const TOPIC: &str = "w\t";
const RESCUE: &str = "r";
const INDEX: &str = "x\t";

/// The wiki of a fold: its groups (persisted) and the pages derived from them.
#[derive(Debug, Clone, Default)]
pub struct Wiki {
    groups: BTreeMap<String, Group>,
    dirty_groups: BTreeSet<String>,
    /// Page key → draft.
    pages: BTreeMap<String, Draft>,
    /// Group key (or rescue chunk key) → its page keys.
    group_pages: BTreeMap<String, Vec<String>>,
    /// Per trajectory: the keys of the non-index pages it is on.
    on: Vec<BTreeSet<String>>,
    /// Per trajectory: its position in the rescue group.
    rescue_pos: BTreeMap<usize, usize>,
    /// The speakers the pages were derived with.
    speakers: BTreeSet<String>,
    /// Pages to render at the next [`Wiki::take_pages`].
    dirty_pages: BTreeSet<String>,
    /// Pages retired since the last [`Wiki::take_pages`].
    retired: BTreeSet<String>,
}

/// The groups a trajectory belongs to, given its state (a trajectory's groups only grow).
pub(crate) fn group_keys(t: &TrajState, config: &MemoryConfig) -> Vec<String> {
    let mut keys = Vec::new();
    for e in &t.features.entities {
        keys.push(format!("{ENTITY}{e}"));
    }
    for (subject, tag) in &t.subject_facets {
        if t.features.entities.contains(subject) {
            keys.push(format!("{FACET}{subject}\t{tag}"));
        }
    }
    if t.items.len() + t.counts.len() >= config.inventory_min_items {
        let families: BTreeSet<&str> = t.items.iter().map(|(_, f)| f.as_str()).collect();
        keys.extend(families.into_iter().map(|f| format!("{INVENTORY}{f}")));
        if !t.counts.is_empty() {
            keys.push(format!("{INVENTORY}counts"));
        }
    }
    keys.extend(topic_keys(t));
    keys
}

/// The keyword groups of a trajectory.
fn topic_keys(t: &TrajState) -> impl Iterator<Item = String> + '_ {
    t.features
        .keywords
        .iter()
        .filter(|k| is_specific(k) && k.chars().count() >= 4)
        .map(|k| format!("{TOPIC}{k}"))
}

/// Pages of `members` under `key`: one page, or pages of `page_target` in joining order above
/// `page_max`.
fn chunked(
    key: &str,
    kind: PageKind,
    head: &str,
    members: &[usize],
    c: &MemoryConfig,
) -> Vec<(String, Draft)> {
    if members.len() <= c.page_max {
        return vec![(
            key.to_string(),
            Draft {
                kind,
                head: head.to_string(),
                members: members.to_vec(),
            },
        )];
    }
    members
        .chunks(c.page_target.max(1))
        .enumerate()
        .map(|(i, m)| {
            (
                format!("{key}#{}", i + 1),
                Draft {
                    kind,
                    head: head.to_string(),
                    members: m.to_vec(),
                },
            )
        })
        .collect()
}

impl Wiki {
    /// The wiki of persisted groups over `states`, its pages derived again.
    pub fn resume(
        groups: BTreeMap<String, Group>,
        states: &[TrajState],
        config: &MemoryConfig,
        lexicon: &Lexicon,
    ) -> Wiki {
        let mut w = Wiki {
            groups,
            on: vec![BTreeSet::new(); states.len()],
            speakers: lexicon.speakers.clone(),
            ..Wiki::default()
        };
        let keys: Vec<String> = w.groups.keys().cloned().collect();
        // Coverage first (entity, facet, inventory pages), then topics, then rescue.
        for key in keys
            .iter()
            .filter(|k| !k.starts_with(TOPIC) && *k != RESCUE)
        {
            w.rederive(key, config);
        }
        for key in keys.iter().filter(|k| k.starts_with(TOPIC)) {
            w.rederive(key, config);
        }
        if let Some(rescue) = w.groups.get(RESCUE) {
            w.rescue_pos = rescue
                .members
                .iter()
                .enumerate()
                .map(|(i, &t)| (t, i))
                .collect();
            let chunks = rescue.members.len().div_ceil(config.page_target.max(1));
            for chunk in 0..chunks {
                w.rederive_rescue(chunk, config);
            }
        }
        for chunk in 0..states.len().div_ceil(INDEX_CHUNK) {
            w.set_index(chunk, states.len());
        }
        w.dirty_pages.clear();
        w.retired.clear();
        w
    }

    /// The groups, for persisting.
    pub fn groups(&self) -> &BTreeMap<String, Group> {
        &self.groups
    }

    /// Keys of the groups changed since the last call.
    pub fn take_dirty_groups(&mut self) -> BTreeSet<String> {
        std::mem::take(&mut self.dirty_groups)
    }

    /// Pages by kind.
    pub fn page_counts(&self) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for d in self.pages.values() {
            *out.entry(d.kind.as_str().to_string()).or_default() += 1;
        }
        out
    }

    /// Whether trajectory `t` is on an entity, facet or inventory page.
    fn covered(&self, t: usize) -> bool {
        self.on[t]
            .iter()
            .any(|k| k.starts_with(ENTITY) || k.starts_with(FACET) || k.starts_with(INVENTORY))
    }

    /// Whether trajectory `t` is on no entity, facet, inventory or topic page.
    fn orphan(&self, t: usize) -> bool {
        !self.covered(t) && !self.on[t].iter().any(|k| k.starts_with(TOPIC))
    }

    fn broad(&self, entity: &str, c: &MemoryConfig) -> bool {
        self.speakers.contains(entity)
            || self
                .groups
                .get(&format!("{ENTITY}{entity}"))
                .is_some_and(|g| g.members.len() > c.broad_entity)
    }

    /// The kind and title head ([`Draft::head`]) of the pages group `key` makes now, or `None`
    /// when it makes none.
    fn shape(&self, key: &str, c: &MemoryConfig) -> Option<(PageKind, String)> {
        let g = self.groups.get(key)?;
        let m = &g.members;
        if let Some(entity) = key.strip_prefix(ENTITY) {
            return (!self.broad(entity, c) && m.len() >= 2)
                .then(|| (PageKind::Entity, g.surface.clone()));
        }
        if let Some(rest) = key.strip_prefix(FACET) {
            let entity = rest.split_once('\t').map_or(rest, |(e, _)| e);
            return self
                .broad(entity, c)
                .then(|| (PageKind::Entity, g.surface.clone()));
        }
        if let Some(family) = key.strip_prefix(INVENTORY) {
            return Some((PageKind::Inventory, family.to_string()));
        }
        if key.starts_with(TOPIC) {
            if m.len() < c.topic_min_trajectories || m.len() > c.broad_entity {
                return None;
            }
            let new = m.iter().filter(|&&t| !self.covered(t)).count();
            let covered = (m.len() - new) as f32 / m.len() as f32;
            return (new >= 2 && covered < c.topic_suppression)
                .then(|| (PageKind::Topic, g.surface.clone()));
        }
        None
    }

    /// The pages group `key` makes now.
    fn derive(&self, key: &str, c: &MemoryConfig) -> Vec<(String, Draft)> {
        match (self.shape(key, c), self.groups.get(key)) {
            (Some((kind, head)), Some(g)) => chunked(key, kind, &head, &g.members, c),
            _ => Vec::new(),
        }
    }

    /// Replaces the pages of `owner` by `drafts`, updating which pages each trajectory is on.
    /// Returns the trajectories whose pages changed.
    fn set_pages(&mut self, owner: &str, drafts: Vec<(String, Draft)>) -> BTreeSet<usize> {
        let mut changed = BTreeSet::new();
        let old = self.group_pages.remove(owner).unwrap_or_default();
        let new_keys: BTreeSet<&str> = drafts.iter().map(|(k, _)| k.as_str()).collect();
        for key in &old {
            if new_keys.contains(key.as_str()) {
                continue;
            }
            if let Some(d) = self.pages.remove(key) {
                for &t in &d.members {
                    if d.kind != PageKind::Index {
                        self.on[t].remove(key);
                    }
                    changed.insert(t);
                }
            }
            self.dirty_pages.remove(key);
            self.retired.insert(key.clone());
        }
        let mut keys = Vec::with_capacity(drafts.len());
        for (key, draft) in drafts {
            keys.push(key.clone());
            changed.extend(self.put_page(key, draft));
        }
        if !keys.is_empty() {
            self.group_pages.insert(owner.to_string(), keys);
        }
        changed
    }

    /// Makes `draft` the page `key` (new or changed); returns the trajectories it gained or lost.
    fn put_page(&mut self, key: String, draft: Draft) -> BTreeSet<usize> {
        if self.pages.get(&key) == Some(&draft) {
            return BTreeSet::new();
        }
        let before: BTreeSet<usize> = self
            .pages
            .get(&key)
            .map(|d| d.members.iter().copied().collect())
            .unwrap_or_default();
        let after: BTreeSet<usize> = draft.members.iter().copied().collect();
        if draft.kind != PageKind::Index {
            for &t in before.difference(&after) {
                self.on[t].remove(&key);
            }
            for &t in after.difference(&before) {
                self.on[t].insert(key.clone());
            }
        }
        self.retired.remove(&key);
        self.dirty_pages.insert(key.clone());
        self.pages.insert(key, draft);
        before.symmetric_difference(&after).copied().collect()
    }

    /// A member joined group `key` at its end: when the group was already cut into pages of
    /// `page_target` and keeps its kind and title, only its last page changes. Returns `None`
    /// when the group's pages must be derived again.
    fn join_last_page(
        &mut self,
        key: &str,
        surface_before: &str,
        c: &MemoryConfig,
    ) -> Option<BTreeSet<usize>> {
        if key.starts_with(TOPIC) {
            return None; // small, and whether they make a page depends on coverage
        }
        let size = c.page_target.max(1);
        let (kind, head) = self.shape(key, c)?;
        let g = self.groups.get(key)?;
        let n = g.members.len();
        let pages_before = self.group_pages.get(key).map_or(0, Vec::len);
        if n - 1 <= c.page_max
            || pages_before != (n - 1).div_ceil(size)
            || g.surface != surface_before
        {
            return None;
        }
        let chunk = (n - 1) / size;
        let page = format!("{key}#{}", chunk + 1);
        let draft = Draft {
            kind,
            head,
            members: g.members[chunk * size..].to_vec(),
        };
        if chunk == pages_before {
            self.group_pages.get_mut(key)?.push(page.clone());
        }
        Some(self.put_page(page, draft))
    }

    fn rederive(&mut self, key: &str, c: &MemoryConfig) -> BTreeSet<usize> {
        let drafts = self.derive(key, c);
        self.set_pages(key, drafts)
    }

    /// Rescue pages are cut from the rescue group by position, each chunk its own owner, and
    /// show the members of the chunk that are orphans now.
    fn rederive_rescue(&mut self, chunk: usize, c: &MemoryConfig) {
        let size = c.page_target.max(1);
        let members: Vec<usize> = self
            .groups
            .get(RESCUE)
            .map(|g| {
                g.members
                    .iter()
                    .skip(chunk * size)
                    .take(size)
                    .copied()
                    .filter(|&t| self.orphan(t))
                    .collect()
            })
            .unwrap_or_default();
        let key = format!("{RESCUE}\t{}", chunk + 1);
        let drafts = if members.is_empty() {
            Vec::new()
        } else {
            vec![(
                key.clone(),
                Draft {
                    kind: PageKind::Topic,
                    head: String::new(),
                    members,
                },
            )]
        };
        self.set_pages(&key, drafts);
    }

    fn set_index(&mut self, chunk: usize, trajectories: usize) {
        let key = format!("{INDEX}{}", chunk + 1);
        let members: Vec<usize> =
            (chunk * INDEX_CHUNK..trajectories.min((chunk + 1) * INDEX_CHUNK)).collect();
        let draft = Draft {
            kind: PageKind::Index,
            head: String::new(),
            members,
        };
        self.set_pages(&key.clone(), vec![(key, draft)]);
    }

    /// Takes trajectory `t`'s new state into the wiki: joins it to the groups it entered
    /// (`joined`, from [`group_keys`] after minus before), re-derives the pages that depend on
    /// them and marks every page showing `t` for rendering. `surfaces` maps the stems of the
    /// exchange's words to the words as written (a new topic is titled with its surface).
    pub fn update(
        &mut self,
        t: usize,
        joined: &[String],
        surfaces: &BTreeMap<String, String>,
        states: &[TrajState],
        c: &MemoryConfig,
        lexicon: &Lexicon,
    ) {
        while self.on.len() < states.len() {
            self.on.push(BTreeSet::new());
            let n = self.on.len();
            self.set_index((n - 1) / INDEX_CHUNK, n);
        }
        let mut changed_groups: BTreeSet<String> = BTreeSet::new();
        let mut affected: BTreeSet<usize> = BTreeSet::from([t]);
        // New speakers make their entity broad: their entity and facet groups change pages.
        let speakers: Vec<String> = lexicon
            .speakers
            .difference(&self.speakers)
            .cloned()
            .collect();
        for s in speakers {
            self.speakers.insert(s.clone());
            changed_groups.extend(self.entity_groups(&s));
        }
        for key in joined {
            let entity = key
                .strip_prefix(ENTITY)
                .or_else(|| key.strip_prefix(FACET).and_then(|r| r.split('\t').next()));
            let broad_before = key.strip_prefix(ENTITY).map(|e| self.broad(e, c));
            let g = self.groups.entry(key.clone()).or_default();
            if g.members.last() == Some(&t) {
                continue; // listed twice
            }
            let surface_before = std::mem::take(&mut g.surface);
            g.members.push(t);
            g.surface = match (entity, key.strip_prefix(TOPIC)) {
                (Some(e), _) => lexicon
                    .entities
                    .get(e)
                    .cloned()
                    .unwrap_or_else(|| e.to_string()),
                (None, Some(stem)) if surface_before.is_empty() => surfaces
                    .get(stem)
                    .cloned()
                    .unwrap_or_else(|| stem.to_string()),
                _ => surface_before.clone(),
            };
            self.dirty_groups.insert(key.clone());
            if let Some(entity) = key.strip_prefix(ENTITY) {
                if broad_before != Some(self.broad(entity, c)) {
                    changed_groups.extend(self.entity_groups(entity));
                }
            }
            match self.join_last_page(key, &surface_before, c) {
                Some(changed) => affected.extend(changed),
                None => {
                    changed_groups.insert(key.clone());
                }
            }
        }
        // Coverage pages, then the topics of every trajectory whose coverage may have changed.
        let mut topics: BTreeSet<String> = BTreeSet::new();
        for key in &changed_groups {
            if key.starts_with(TOPIC) {
                topics.insert(key.clone());
            } else {
                affected.extend(self.rederive(key, c));
            }
        }
        for &x in &affected {
            topics.extend(topic_keys(&states[x]));
        }
        for key in &topics {
            affected.extend(self.rederive(key, c));
        }
        // Orphans join the rescue list; the rescue chunks of affected trajectories follow.
        let size = c.page_target.max(1);
        let mut chunks = BTreeSet::new();
        for &x in &affected {
            if self.orphan(x) && !self.rescue_pos.contains_key(&x) {
                let g = self.groups.entry(RESCUE.to_string()).or_default();
                self.rescue_pos.insert(x, g.members.len());
                g.members.push(x);
                self.dirty_groups.insert(RESCUE.to_string());
            }
            if let Some(&pos) = self.rescue_pos.get(&x) {
                chunks.insert(pos / size);
            }
        }
        for chunk in chunks {
            self.rederive_rescue(chunk, c);
        }
        // Every page showing t renders again (its claims, summary or label changed).
        let showing: Vec<String> = self.on[t].iter().cloned().collect();
        self.dirty_pages.extend(showing);
        self.dirty_pages
            .insert(format!("{INDEX}{}", t / INDEX_CHUNK + 1));
    }

    /// The entity group of `entity` and its facet groups.
    fn entity_groups(&self, entity: &str) -> Vec<String> {
        let prefix = format!("{FACET}{entity}\t");
        let mut keys: Vec<String> = self
            .groups
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .map(|(k, _)| k.clone())
            .collect();
        keys.push(format!("{ENTITY}{entity}"));
        keys
    }

    /// Renders the pages changed since the last call; returns them (sorted by kind, then id)
    /// and the ids of the pages retired.
    pub fn take_pages(
        &mut self,
        ns: &Namespace,
        states: &[TrajState],
    ) -> (Vec<WikiPage>, Vec<PageId>) {
        let (pages, retired) = self.take_pages_with_members(ns, states);
        (pages.into_iter().map(|(p, _)| p).collect(), retired)
    }

    /// [`Wiki::take_pages`], each page with the positions in `states` of the trajectories it
    /// links (aligned with its `trajectory_ids`).
    pub fn take_pages_with_members(
        &mut self,
        ns: &Namespace,
        states: &[TrajState],
    ) -> (Vec<(WikiPage, Vec<usize>)>, Vec<PageId>) {
        let dirty = std::mem::take(&mut self.dirty_pages);
        let mut pages: Vec<(WikiPage, Vec<usize>)> = dirty
            .iter()
            .filter_map(|key| {
                self.pages.get(key).map(|d| {
                    let members = d.linked();
                    (render(ns, states, key, d, &members), members)
                })
            })
            .collect();
        pages.sort_by(|(a, _), (b, _)| a.kind.cmp(&b.kind).then(a.id.cmp(&b.id)));
        let retired = std::mem::take(&mut self.retired)
            .iter()
            .map(|key| PageId::derive(ns, key))
            .collect();
        (pages, retired)
    }
}

impl Draft {
    /// The trajectories the page links: its members in creation order, each once.
    fn linked(&self) -> Vec<usize> {
        let mut members = self.members.clone();
        members.sort_unstable();
        members.dedup();
        members
    }
}

/// Renders a page from the trajectories it links (in creation order): markdown in five sections,
/// routing text, keywords, terms, items.
fn render(
    ns: &Namespace,
    states: &[TrajState],
    key: &str,
    d: &Draft,
    members: &[usize],
) -> WikiPage {
    let title = page_title(key, &d.head, states, members);
    let mut keywords: BTreeMap<&str, usize> = BTreeMap::new();
    let mut terms: BTreeSet<&str> = BTreeSet::new();
    let mut items: BTreeMap<String, u32> = BTreeMap::new();
    let mut facts: Vec<String> = Vec::new();
    let mut conflicts: Vec<String> = Vec::new();
    for &ti in members {
        let s = &states[ti];
        for k in &s.features.keywords {
            *keywords.entry(k.as_str()).or_default() += 1;
        }
        terms.extend(s.features.terms.iter().map(String::as_str));
        for (item, _) in &s.items {
            *items.entry(item.clone()).or_default() += 1;
        }
        for cnt in &s.counts {
            *items.entry(cnt.clone()).or_default() += 1;
        }
        for claim in s.claims.iter().rev() {
            match claim.status {
                ClaimStatus::Active if facts.len() < 12 && (d.kind != PageKind::Index) => {
                    facts.push(format!("- {} ({})", claim.draft.text, claim.source_ref));
                }
                ClaimStatus::Deprecated
                | ClaimStatus::Contradictory
                | ClaimStatus::NeedsConfirmation
                    if conflicts.len() < 8 =>
                {
                    conflicts.push(format!(
                        "- [{}] {} ({})",
                        claim.status.as_str(),
                        claim.draft.text,
                        claim.source_ref
                    ));
                }
                _ => {}
            }
        }
    }
    let mut top: Vec<(&str, usize)> = keywords.into_iter().collect();
    top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let keywords: Vec<String> = top.iter().take(24).map(|(k, _)| k.to_string()).collect();
    let terms: Vec<String> = terms.into_iter().take(48).map(str::to_string).collect();
    let items: Vec<ItemCount> = items
        .into_iter()
        .map(|(item, count)| ItemCount { item, count })
        .collect();
    let snapshot_count: usize = members.iter().map(|&ti| states[ti].snapshots.len()).sum();
    let mut body = format!("# {title}\n\n## Overview\n");
    body.push_str(&format!(
        "{} page linking {} trajectories ({} snapshots). Keywords: {}.\n",
        d.kind.as_str(),
        members.len(),
        snapshot_count,
        keywords
            .iter()
            .take(8)
            .map(|k| {
                // The word as written by the first member that wrote it.
                members
                    .iter()
                    .find_map(|&ti| states[ti].surfaces.get(k))
                    .map_or(k.as_str(), String::as_str)
            })
            .collect::<Vec<_>>()
            .join(", ")
    ));
    body.push_str("\n## Key facts\n");
    if facts.is_empty() {
        body.push_str("- (see linked trajectories)\n");
    }
    for f in &facts {
        body.push_str(f);
        body.push('\n');
    }
    body.push_str("\n## Items and counts\n");
    if items.is_empty() {
        body.push_str("- none recorded\n");
    }
    for i in items.iter().take(32) {
        body.push_str(&format!("- {} ×{}\n", i.item, i.count));
    }
    body.push_str("\n## Linked trajectories\n");
    for &ti in members {
        body.push_str(&format!(
            "- {}: {} ({} snapshots)\n",
            states[ti].id,
            states[ti].label,
            states[ti].snapshots.len()
        ));
    }
    body.push_str("\n## Conflicts and uncertainty\n");
    if conflicts.is_empty() {
        body.push_str("- none\n");
    }
    for c in &conflicts {
        body.push_str(c);
        body.push('\n');
    }
    let labels: Vec<&str> = members
        .iter()
        .take(12)
        .map(|&ti| states[ti].label.as_str())
        .collect();
    let routing_text = format!(
        "{}\n{}\n{}\n{}",
        title,
        keywords.join(" "),
        terms
            .iter()
            .take(24)
            .cloned()
            .collect::<Vec<_>>()
            .join("; "),
        labels.join("; ")
    );
    WikiPage {
        id: PageId::derive(ns, key),
        namespace: ns.clone(),
        kind: d.kind,
        title: title.clone(),
        body,
        routing_text,
        keywords,
        trajectory_ids: members
            .iter()
            .map(|&ti| states[ti].id.clone())
            .collect::<Vec<TrajectoryId>>(),
        terms,
        items,
        revision: 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(i: usize, entities: &[&str]) -> TrajState {
        let id = TrajectoryId::derive(&Namespace::new("w").unwrap(), &format!("t{i}"));
        let mut t = TrajState::new(id, None, 0, Default::default());
        t.features.entities = entities.iter().map(|e| e.to_string()).collect();
        t.label = format!("t{i}");
        t
    }

    /// Trajectories 0..n all mention "oslo"; each is added as the fold adds them.
    fn grown(n: usize, c: &MemoryConfig) -> (Wiki, Vec<TrajState>) {
        let lexicon = Lexicon::default();
        let mut wiki = Wiki::default();
        let mut states = Vec::new();
        for i in 0..n {
            states.push(state(i, &["oslo"]));
            let joined = group_keys(&states[i], c);
            wiki.update(i, &joined, &BTreeMap::new(), &states, c, &lexicon);
        }
        (wiki, states)
    }

    #[test]
    fn a_large_group_grows_page_by_page_and_resumes_to_the_same_pages() {
        let c = MemoryConfig::default();
        let (mut wiki, states) = grown(11, &c);
        let ns = Namespace::new("w").unwrap();
        let (with_members, _) = wiki.take_pages_with_members(&ns, &states);
        // Each page comes with the positions of the trajectories it links, in its order.
        for (page, members) in &with_members {
            let ids: Vec<&TrajectoryId> = members.iter().map(|&t| &states[t].id).collect();
            assert_eq!(ids, page.trajectory_ids.iter().collect::<Vec<_>>());
        }
        let pages: Vec<WikiPage> = with_members.into_iter().map(|(p, _)| p).collect();
        let mut entity: Vec<&WikiPage> = pages
            .iter()
            .filter(|p| p.kind == PageKind::Entity)
            .collect();
        let first = |p: &WikiPage| {
            let id = &p.trajectory_ids[0];
            states.iter().position(|s| &s.id == id)
        };
        entity.sort_by_key(|p| first(p));
        // 11 members above page_max 6: pages of 4, 4, 3 in joining order, titled by their
        // entity alone (no "(N)").
        let sizes: Vec<usize> = entity.iter().map(|p| p.trajectory_ids.len()).collect();
        assert_eq!(sizes, vec![4, 4, 3]);
        for p in &entity {
            assert_eq!(p.title, "oslo");
        }
        // One more member changes the last page only (and its index page).
        let mut states = states;
        states.push(state(11, &["oslo"]));
        let joined = group_keys(&states[11], &c);
        wiki.update(
            11,
            &joined,
            &BTreeMap::new(),
            &states,
            &c,
            &Lexicon::default(),
        );
        let (changed, retired) = wiki.take_pages(&ns, &states);
        assert!(retired.is_empty());
        let mut kinds: Vec<(PageKind, usize)> = changed
            .iter()
            .map(|p| (p.kind, p.trajectory_ids.len()))
            .collect();
        kinds.sort();
        assert_eq!(kinds, vec![(PageKind::Index, 12), (PageKind::Entity, 4)]);
        let last = changed.iter().find(|p| p.kind == PageKind::Entity).unwrap();
        assert_eq!(last.trajectory_ids[0], states[8].id);
        // Derived again from the groups alone, the wiki has the same pages.
        let resumed = Wiki::resume(wiki.groups().clone(), &states, &c, &Lexicon::default());
        assert_eq!(resumed.pages, wiki.pages);
        assert_eq!(resumed.on, wiki.on);
    }
}
