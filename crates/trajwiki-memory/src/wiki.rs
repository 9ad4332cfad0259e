//! The Memory Wiki (SPEC §2.5), maintained by the construction fold (SPEC §2.6): one page per
//! thing the conversation knows about — each speaker, each person, pet or place named in more
//! than one trajectory, each item family, each topic several trajectories are mainly about —
//! and index pages linking every trajectory.
//!
//! Pages come from *groups*: the trajectories that share an entity, an item family or a
//! specific keyword (and the rescue list). A group keeps its members in the order they joined
//! and a trajectory never leaves a group (its signals only grow). A group makes at most one
//! page; a page is cut into *sections* of `page_target` members in joining order (a new member
//! changes only the last section), never into pages. An alias ("Mel" beside the speaker
//! Melanie) makes no page of its own: its claims go to the speaker's.
//!
//! A topic page is bounded by the trajectories it holds, not by the keywords there are: each
//! trajectory has one *primary topic*, its specific keyword that the most trajectories share
//! (between `topic_min_trajectories` and `topic_max_trajectories` of them; a topic must read as a noun), and
//! a keyword makes a page when at least `topic_min_trajectories` trajectories have it as their
//! primary topic. So a namespace has at most one topic page per `topic_min_trajectories`
//! trajectories.
//!
//! A claim is shown on the page of its subject ([`Wiki::subject_of`]): the named person, pet or
//! place it is about when that has a page, the person addressed for a "you" statement, else
//! the speaker. An entity page shows current facts (the newest value of each slot), what
//! changed (a revision beside what it revised, with dates), the events of each section in time
//! order, related pages and the linked trajectories.
//!
//! An append re-derives the pages of the groups it changed — and the topic pages whose
//! primary members changed — and marks the pages to render again; only those are rendered and
//! written. Everything a page shows comes from the fold's state (trajectory states, groups,
//! which entities have pages), never from a lexicon newer than the page, so appending in any
//! split gives the same pages: whatever changes what a page shows marks it for rendering.
//! Index pages list trajectories by creation, in chunks of [`INDEX_CHUNK`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use aho_corasick::AhoCorasick;
use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};
use trajwiki_core::{ClaimStatus, ItemCount, Namespace, PageId, PageKind, TrajectoryId, WikiPage};
use trajwiki_text::temporal::fmt_day;
use trajwiki_text::text::{norm, stem, words};

use crate::extract::{is_specific, Lexicon};
use crate::fold::{slot_name, ClaimEntry, TrajState, SLOT_TAG};
use tally::Tally;
use titles::{capitalised, page_title, section_title, topic_phrase, TitleParts};

mod tally;
mod titles;
use crate::MemoryConfig;

/// Trajectories per index page.
pub const INDEX_CHUNK: usize = 32;

/// A group of trajectories that may make a page.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Group {
    /// Members (trajectory positions), in the order they joined.
    pub members: Vec<usize>,
    /// For entity and facet groups: the entity's surface when the group last changed; for a
    /// keyword group, the keyword as first written.
    pub surface: String,
}

/// A page before rendering.
#[derive(Debug, Clone, PartialEq)]
struct Draft {
    kind: PageKind,
    /// What the group fixes of the title ([`page_title`] writes the rest from the members): the
    /// entity's surface for entity pages, the keyword's surface for a topic page, the item
    /// family for an inventory page, nothing for rescue and index pages.
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
/// The terms a page keeps: its members' first, in order.
const PAGE_TERMS: usize = 48;

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
    /// Per trajectory: the topic group of its primary topic.
    primary: Vec<Option<String>>,
    /// Per trajectory: its position in the rescue group.
    rescue_pos: BTreeMap<usize, usize>,
    /// The speakers the pages were derived with.
    speakers: BTreeSet<String>,
    /// Pages to render at the next [`Wiki::take_pages`].
    dirty_pages: BTreeSet<String>,
    /// Pages retired since the last [`Wiki::take_pages`].
    retired: BTreeSet<String>,
    /// Trajectories per section of a page (`page_target`).
    section: usize,
    /// The stems of the entities with a group: no such keyword is a topic (its page would be
    /// titled as the entity's).
    entity_stems: BTreeSet<String>,
    /// The trajectories whose state changed since the last [`Wiki::take_pages`] (each one
    /// [`Wiki::update`]d or [`Wiki::touch`]ed, which also marks every page showing it).
    changed: BTreeSet<usize>,
    /// Per page key, the titles it was last rendered with: the page's own (of the kinds titled
    /// from their members) and each section's. A title is a function of the page's head and of
    /// its members' states alone, so one made from the same head and members, none of which
    /// changed since, is kept. With them, what else the page was last rendered from, member by
    /// member ([`Titles`]). Not persisted: a resumed wiki renders every page again, the same.
    titles: BTreeMap<String, Titles>,
}

/// What a page was last rendered with (see `Wiki::titles`): its titles, what its own title
/// was made from, which claims of each member it showed, how many members hold each of its
/// words, its sections' text and its members' lines — each read again only for what changed,
/// so that a render of a page of thousands of members costs what changed on it.
#[derive(Debug, Clone, Default)]
struct Titles {
    page: Option<Title>,
    /// What the page's title was made from, member by member, for the next.
    page_parts: TitleParts,
    sections: Vec<Option<Title>>,
    /// Which claims of each member the page showed.
    shown: Shown,
    /// How many members hold each keyword, each entity, each item.
    keywords: Tally,
    entities: Tally,
    items: Tally,
    /// Each member's line among the linked trajectories.
    linked: FxHashMap<usize, String>,
    /// Each section's text as last written.
    section_bodies: Vec<Option<SectionBody>>,
}

/// A section's text (its heading and its claims' lines; empty when it shows none), and what it
/// was written from besides its members' states and the claims they show.
#[derive(Debug, Clone)]
struct SectionBody {
    head: String,
    members: Vec<usize>,
    text: String,
}

/// Which of each member's claims a page shows (their positions in its claims), kept between
/// renders of the page: a member's are read again when it changed, and all of them when what
/// else decides them changed ([`Reading`]; and an inventory page's items, which its claims are
/// matched against).
#[derive(Debug, Clone, Default)]
struct Shown {
    /// What they were read with (one reading shared by the pages of a render).
    with: Option<(Arc<Reading>, Vec<String>)>,
    /// Trajectory position → the positions of its claims shown, for the members of the last
    /// render.
    members: FxHashMap<usize, Vec<u32>>,
}

/// What of the wiki besides a trajectory's state decides the subject of its claims
/// ([`Wiki::subject_of`]): the speakers (and so the aliases) and the entities with a page.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Reading {
    speakers: Vec<String>,
    paged: Vec<String>,
}

/// A title and what it was made from.
#[derive(Debug, Clone, PartialEq)]
struct Title {
    head: String,
    members: Vec<usize>,
    title: String,
}

/// The stem an entity's name would have as a keyword ("biscuit"), for a one-word entity.
fn entity_stem(entity: &str) -> Option<String> {
    (!entity.contains(' ')).then(|| stem(entity))
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
        .filter(|k| topic_keyword(k))
        .map(|k| format!("{TOPIC}{k}"))
}

/// Whether keyword `k` makes a topic group: a specific word of four characters or more.
fn topic_keyword(k: &str) -> bool {
    is_specific(k) && k.chars().count() >= 4
}

/// The keyword of `t` whose group is its primary topic: of its keywords whose group
/// `candidate` says is a topic (with its members) and that are not among its own entities, the
/// one with the most members, the first in keyword order among equals.
fn best_topic(t: &TrajState, candidate: impl Fn(&str) -> Option<usize>) -> Option<&str> {
    let mut best: Option<(usize, &str)> = None;
    for k in &t.features.keywords {
        let Some(n) = candidate(k) else {
            continue;
        };
        if t.features.entities.contains(k) {
            continue;
        }
        if best.is_none_or(|(m, _)| n > m) {
            best = Some((n, k));
        }
    }
    best.map(|(_, k)| k)
}

/// Words that open a statement without being its subject ("Wow, …", "On 3 May, …").
const OPENERS: &[&str] = &[
    "oh",
    "wow",
    "yeah",
    "yes",
    "hey",
    "aw",
    "aww",
    "ah",
    "well",
    "so",
    "hi",
    "hello",
    "haha",
    "omg",
    "ok",
    "okay",
    "on",
    "in",
    "last",
    "this",
    "yesterday",
    "today",
];

/// Second-person words: a statement that opens with one is about the person addressed.
const YOU: &[&str] = &[
    "you", "your", "you're", "you've", "you'll", "you'd", "yours",
];

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
            primary: vec![None; states.len()],
            speakers: lexicon.speakers.clone(),
            section: config.page_target.max(1),
            ..Wiki::default()
        };
        w.entity_stems = w
            .groups
            .keys()
            .filter_map(|k| k.strip_prefix(ENTITY).and_then(entity_stem))
            .collect();
        // Every trajectory's primary topic, its keywords' groups judged once each (keywords recur
        // across trajectories: a namespace of 77,000 trajectories has far fewer of them).
        let candidates: FxHashMap<&str, Option<usize>> = states
            .iter()
            .flat_map(|s| s.features.keywords.iter())
            .map(String::as_str)
            .collect::<FxHashSet<&str>>()
            .into_iter()
            .map(|k| (k, w.topic_candidate(k, config)))
            .collect();
        let primary: Vec<Option<String>> = states
            .par_iter()
            .map(|s| {
                best_topic(s, |k| candidates.get(k).copied().flatten())
                    .map(|k| format!("{TOPIC}{k}"))
            })
            .collect();
        w.primary = primary;
        let keys: Vec<String> = w.groups.keys().cloned().collect();
        for key in keys.iter().filter(|k| *k != RESCUE) {
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

    /// Marks every page showing trajectory `t` for rendering (a claim of `t` changed status).
    pub fn touch(&mut self, t: usize) {
        self.changed.insert(t);
        if let Some(on) = self.on.get(t) {
            self.dirty_pages.extend(on.iter().cloned());
        }
    }

    /// Whether trajectory `t` is on no page but the index.
    fn orphan(&self, t: usize) -> bool {
        self.on[t].is_empty()
    }

    /// The speaker `entity` is a short form of ("mel" of "melanie"): the one speaker whose
    /// first name starts with it, when it is not a speaker itself.
    fn alias_of(&self, entity: &str) -> Option<&str> {
        alias_among(&self.speakers, entity)
    }

    /// Whether `entity` has a page of its own.
    fn paged(&self, entity: &str) -> bool {
        self.pages.contains_key(&format!("{ENTITY}{entity}"))
    }

    /// The primary topic of trajectory `t`: its topical keyword group with the most members
    /// (then the first key).
    fn primary_of(&self, t: usize, states: &[TrajState], c: &MemoryConfig) -> Option<String> {
        best_topic(&states[t], |k| self.topic_candidate(k, c)).map(|k| format!("{TOPIC}{k}"))
    }

    /// Whether keyword `k`'s group can be a trajectory's primary topic, whatever the trajectory
    /// (which must not have `k` among its entities, [`best_topic`]): a [`topic_keyword`], not
    /// the name of an entity with a group, whose group is a noun-like
    /// phrase shared by between `topic_min_trajectories` and `topic_max_trajectories`
    /// trajectories — and then the group's members.
    fn topic_candidate(&self, k: &str, c: &MemoryConfig) -> Option<usize> {
        if !topic_keyword(k) {
            return None;
        }
        let g = self.groups.get(&format!("{TOPIC}{k}"))?;
        ((c.topic_min_trajectories..=c.topic_max_trajectories).contains(&g.members.len())
            && !self.entity_stems.contains(k)
            && topic_phrase(&g.surface).is_some())
        .then_some(g.members.len())
    }

    /// The kind and title head ([`Draft::head`]) of the page group `key` makes now, or `None`
    /// when it makes none.
    fn shape(&self, key: &str, c: &MemoryConfig) -> Option<(PageKind, String)> {
        let g = self.groups.get(key)?;
        let m = &g.members;
        if let Some(entity) = key.strip_prefix(ENTITY) {
            if self.alias_of(entity).is_some() {
                return None;
            }
            return (self.speakers.contains(entity) || m.len() >= 2)
                .then(|| (PageKind::Entity, g.surface.clone()));
        }
        if let Some(family) = key.strip_prefix(INVENTORY) {
            return (m.len() >= c.topic_min_trajectories)
                .then(|| (PageKind::Inventory, family.to_string()));
        }
        if key.starts_with(TOPIC) {
            let primary = self.topic_members(key).len();
            return (primary >= c.topic_min_trajectories)
                .then(|| (PageKind::Topic, g.surface.clone()));
        }
        None
    }

    /// The members of topic group `key` whose primary topic it is, in joining order.
    fn topic_members(&self, key: &str) -> Vec<usize> {
        self.groups.get(key).map_or_else(Vec::new, |g| {
            g.members
                .iter()
                .copied()
                .filter(|&t| self.primary.get(t).and_then(Option::as_deref) == Some(key))
                .collect()
        })
    }

    /// The page group `key` makes now.
    fn derive(&self, key: &str, c: &MemoryConfig) -> Vec<(String, Draft)> {
        let Some((kind, head)) = self.shape(key, c) else {
            return Vec::new();
        };
        let members = if key.starts_with(TOPIC) {
            self.topic_members(key)
        } else {
            self.groups[key].members.clone()
        };
        vec![(
            key.to_string(),
            Draft {
                kind,
                head,
                members,
            },
        )]
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

    /// Trajectory `t` joined entity or inventory group `key` at its end: when the group's page
    /// keeps its kind and title, `t` is appended to it (its last section changes). Returns
    /// `None` when the page must be derived again.
    fn join_page(
        &mut self,
        key: &str,
        t: usize,
        before: &Option<(PageKind, String)>,
        c: &MemoryConfig,
    ) -> Option<()> {
        let now = self.shape(key, c);
        if now.is_none() || now != *before || key.starts_with(TOPIC) {
            return None;
        }
        let draft = self.pages.get_mut(key)?;
        draft.members.push(t);
        self.on[t].insert(key.to_string());
        self.dirty_pages.insert(key.to_string());
        Some(())
    }

    fn rederive(&mut self, key: &str, c: &MemoryConfig) -> BTreeSet<usize> {
        let drafts = self.derive(key, c);
        self.set_pages(key, drafts)
    }

    /// Rescue pages are cut from the rescue group by position, each chunk its own owner, and
    /// show the members of the chunk that are orphans now.
    fn rederive_rescue(&mut self, chunk: usize, c: &MemoryConfig) {
        let size = c.page_target.max(1);
        let key = format!("{RESCUE}\t{}", chunk + 1);
        // The chunk's own page does not make its members covered.
        let mine = |w: &Wiki, t: usize| w.on[t].iter().all(|k| *k == key);
        let members: Vec<usize> = self
            .groups
            .get(RESCUE)
            .map(|g| {
                g.members
                    .iter()
                    .skip(chunk * size)
                    .take(size)
                    .copied()
                    .filter(|&t| mine(self, t))
                    .collect()
            })
            .unwrap_or_default();
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
        self.section = c.page_target.max(1);
        self.changed.insert(t);
        while self.on.len() < states.len() {
            self.on.push(BTreeSet::new());
            self.primary.push(None);
            let n = self.on.len();
            self.set_index((n - 1) / INDEX_CHUNK, n);
        }
        let mut changed_groups: BTreeSet<String> = BTreeSet::new();
        let mut affected: BTreeSet<usize> = BTreeSet::from([t]);
        // Entities whose page came or went: their claims move between pages.
        let mut moved: BTreeSet<String> = BTreeSet::new();
        // A new speaker changes whom "you" addresses when there were two or fewer (every entity
        // page is derived again and every page renders again); past that, which words name a
        // speaker and which entities are aliases, for the names `renamed` gives: their entity
        // pages are derived again, and every page showing a trajectory that mentions one of
        // them renders again.
        let speakers: Vec<String> = lexicon
            .speakers
            .difference(&self.speakers)
            .cloned()
            .collect();
        if !speakers.is_empty() {
            let before = std::mem::take(&mut self.speakers);
            self.speakers = before.iter().chain(&speakers).cloned().collect();
            if before.len() <= 2 {
                changed_groups.extend(
                    self.groups
                        .keys()
                        .filter(|k| k.starts_with(ENTITY))
                        .cloned(),
                );
                let all: Vec<String> = self.pages.keys().cloned().collect();
                self.dirty_pages.extend(all);
            } else {
                let names = renamed(&before, &self.speakers, &speakers);
                changed_groups.extend(
                    names
                        .iter()
                        .map(|n| format!("{ENTITY}{n}"))
                        .filter(|k| self.groups.contains_key(k)),
                );
                for (x, state) in states.iter().enumerate() {
                    if mentions(state, &names) {
                        self.touch(x);
                    }
                }
            }
        }
        let mut topics: BTreeSet<String> = BTreeSet::new();
        for key in joined {
            let entity = key
                .strip_prefix(ENTITY)
                .or_else(|| key.strip_prefix(FACET).and_then(|r| r.split('\t').next()));
            let before = self.shape(key, c);
            if let Some(named) = key.strip_prefix(ENTITY).and_then(entity_stem) {
                // A new entity's name is no topic any more: its keyword group's members choose
                // their primary topic again.
                if self.entity_stems.insert(named.clone()) {
                    topics.insert(format!("{TOPIC}{named}"));
                }
            }
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
            if key.starts_with(FACET) {
                continue;
            }
            if key.starts_with(TOPIC) {
                topics.insert(key.clone());
                continue;
            }
            let shape_before = before.as_ref().map(|(k, _)| *k);
            if self.join_page(key, t, &before, c).is_none() {
                changed_groups.insert(key.clone());
            }
            if let Some(e) = key.strip_prefix(ENTITY) {
                if shape_before.is_some() != self.shape(key, c).is_some() {
                    moved.insert(e.to_string());
                }
            }
        }
        for key in &changed_groups {
            affected.extend(self.rederive(key, c));
        }
        // Primary topics: of t, and of the members of every topical group t joined (its size,
        // so their choice, changed).
        let mut recheck: BTreeSet<usize> = BTreeSet::from([t]);
        for key in &topics {
            if let Some(g) = self.groups.get(key) {
                if g.members.len() <= c.topic_max_trajectories + 1 {
                    recheck.extend(g.members.iter().copied());
                }
            }
        }
        let mut topic_pages: BTreeSet<String> = BTreeSet::new();
        for x in recheck {
            let now = self.primary_of(x, states, c);
            if now != self.primary[x] {
                topic_pages.extend(self.primary[x].take());
                topic_pages.extend(now.clone());
                self.primary[x] = now;
            }
        }
        for key in &topic_pages {
            affected.extend(self.rederive(key, c));
        }
        // A page that came or went moves claims: every page showing its members renders again.
        for e in &moved {
            let members = self
                .groups
                .get(&format!("{ENTITY}{e}"))
                .map(|g| g.members.clone())
                .unwrap_or_default();
            for m in members {
                self.touch(m);
            }
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
        self.touch(t);
        self.dirty_pages
            .insert(format!("{INDEX}{}", t / INDEX_CHUNK + 1));
    }

    /// The entity a claim of trajectory `t` is about, by the page it goes on: the first named
    /// entity of the statement (the thing a possessive names, "Andrew's dog Toby" → Toby, when
    /// that has a page), the person addressed for a "you" statement, else who said it. An entity
    /// without a page gives way to the speaker; an alias is its speaker.
    fn subject_of(&self, claim: &ClaimEntry, t: &TrajState) -> String {
        let speaker = self.canonical(&claim.draft.subject);
        let text = claim.draft.text.as_str();
        let (body, quoted) = match text.split_once(": ") {
            Some((who, rest)) if norm(who) == claim.draft.subject => (rest, true),
            _ => (text, false),
        };
        let ws: Vec<String> = words(body).into_iter().map(|(_, w)| norm(w)).collect();
        let start = ws
            .iter()
            .position(|w| !OPENERS.contains(&w.as_str()) && !w.chars().all(|c| c.is_ascii_digit()))
            .unwrap_or(0);
        let known = |w: &str| self.speakers.contains(w) || t.features.entities.contains(w);
        let entity_at = |i: usize| -> Option<String> {
            let two = ws.get(i..i + 2).map(|p| p.join(" "));
            if let Some(two) = two.filter(|p| known(p)) {
                return Some(two);
            }
            let w = ws.get(i)?;
            let w = w.strip_suffix("'s").unwrap_or(w);
            known(w).then(|| w.to_string())
        };
        let first = ws.get(start).map(String::as_str).unwrap_or("");
        if quoted && YOU.contains(&first) {
            let mut others = self.speakers.iter().filter(|s| **s != speaker);
            if let (Some(other), None) = (others.next(), others.next()) {
                return other.clone();
            }
        }
        // The first entity among the statement's opening words.
        let window = if quoted {
            start + 1
        } else {
            (start + 4).min(ws.len())
        };
        for i in start..window {
            if let Some(e) = entity_at(i) {
                let e = self.canonical(&e);
                // "Andrew's dog Toby": the thing named after a possessive.
                if ws[i].ends_with("'s") {
                    for j in i + 1..(i + 4).min(ws.len()) {
                        if let Some(owned) = entity_at(j).map(|o| self.canonical(&o)) {
                            if self.paged(&owned) {
                                return owned;
                            }
                        }
                    }
                }
                if self.paged(&e) {
                    return e;
                }
                break;
            }
        }
        speaker
    }

    /// The speaker an alias stands for, else `entity`.
    fn canonical(&self, entity: &str) -> String {
        self.alias_of(entity).unwrap_or(entity).to_string()
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
        let changed = std::mem::take(&mut self.changed);
        let mut titles = std::mem::take(&mut self.titles);
        let reading = Arc::new(Reading {
            speakers: self.speakers.iter().cloned().collect(),
            paged: self
                .pages
                .keys()
                .filter(|k| k.starts_with(ENTITY))
                .cloned()
                .collect(),
        });
        let mut pages: Vec<(WikiPage, Vec<usize>)> = dirty
            .iter()
            .filter_map(|key| {
                self.pages.get(key).map(|d| {
                    let members = d.linked();
                    let kept = Kept {
                        titles: titles.entry(key.clone()).or_default(),
                        changed: &changed,
                        states,
                        reading: &reading,
                    };
                    (self.render(ns, states, key, d, &members, kept), members)
                })
            })
            .collect();
        pages.sort_by(|(a, _), (b, _)| a.kind.cmp(&b.kind).then(a.id.cmp(&b.id)));
        let retired: BTreeSet<String> = std::mem::take(&mut self.retired);
        for key in &retired {
            titles.remove(key);
        }
        self.titles = titles;
        let retired = retired.iter().map(|key| PageId::derive(ns, key)).collect();
        (pages, retired)
    }
}

/// A page's kept titles, and the trajectories changed since they were made.
struct Kept<'a> {
    titles: &'a mut Titles,
    changed: &'a BTreeSet<usize>,
    states: &'a [TrajState],
    /// The wiki as the pages are rendered now.
    reading: &'a Arc<Reading>,
}

impl Kept<'_> {
    /// `kept` when it was made from `head` and `members` and none of them changed since, else
    /// `make()`, kept in its place.
    fn reuse(
        kept: &mut Option<Title>,
        changed: &BTreeSet<usize>,
        head: &str,
        members: &[usize],
        make: impl FnOnce() -> String,
    ) -> String {
        if let Some(k) = kept {
            if k.head == head
                && k.members == members
                && !members.iter().any(|m| changed.contains(m))
            {
                return k.title.clone();
            }
        }
        let title = make();
        *kept = Some(Title {
            head: head.to_string(),
            members: members.to_vec(),
            title: title.clone(),
        });
        title
    }

    /// The page's title (see [`page_title`]).
    fn page(&mut self, key: &str, head: &str, members: &[usize]) -> String {
        let (states, changed) = (self.states, self.changed);
        let parts = &mut self.titles.page_parts;
        Self::reuse(&mut self.titles.page, changed, head, members, || {
            page_title(key, head, states, members, parts, changed)
        })
    }

    /// The title of section `i` (see [`section_title`]).
    fn section(&mut self, i: usize, head: &str, members: &[usize]) -> String {
        let sections = &mut self.titles.sections;
        if sections.len() <= i {
            sections.resize(i + 1, None);
        }
        let states = self.states;
        Self::reuse(&mut sections[i], self.changed, head, members, || {
            section_title(head, states, members)
        })
    }
}

/// The speaker of `speakers` that `entity` is a short form of (see [`Wiki::alias_of`]).
fn alias_among<'s>(speakers: &'s BTreeSet<String>, entity: &str) -> Option<&'s str> {
    if speakers.contains(entity) || entity.chars().count() < 3 || entity.contains(' ') {
        return None;
    }
    let mut hits = speakers.iter().filter(|s| {
        let first = s.split(' ').next().unwrap_or(s);
        first.len() > entity.len() && first.starts_with(entity)
    });
    match (hits.next(), hits.next()) {
        (Some(s), None) => Some(s.as_str()),
        _ => None,
    }
}

/// The names whose reading changes when `new` speakers join `before` (making `after`), past
/// two speakers: the new speakers (words that now name a speaker), the short forms of their
/// first names (three characters or more: entities that may become or stop being aliases), and
/// the speakers any of these stood for before or stand for now.
fn renamed(
    before: &BTreeSet<String>,
    after: &BTreeSet<String>,
    new: &[String],
) -> BTreeSet<String> {
    let mut names: BTreeSet<String> = BTreeSet::new();
    for speaker in new {
        names.insert(speaker.clone());
        let first = speaker.split(' ').next().unwrap_or(speaker);
        for (end, _) in first.char_indices().skip(3) {
            names.insert(first[..end].to_string());
        }
    }
    let stood_for: Vec<String> = names
        .iter()
        .flat_map(|n| [alias_among(before, n), alias_among(after, n)])
        .flatten()
        .map(str::to_string)
        .collect();
    names.extend(stood_for);
    names
}

/// Whether trajectory `t` mentions one of `names` (lower case): among its entities, as a
/// claim's subject, or as a word or two of a claim's text, as [`Wiki::subject_of`] reads them
/// (only the texts that hold a name's first word are split into words).
fn mentions(t: &TrajState, names: &BTreeSet<String>) -> bool {
    let named =
        |w: &str| names.contains(w) || w.strip_suffix("'s").is_some_and(|w| names.contains(w));
    t.features.entities.iter().any(|e| names.contains(e))
        || t.claims.iter().any(|c| {
            if names.contains(&c.draft.subject) {
                return true;
            }
            // Each word `norm` gives is in the text normalised whole; a name's first word is in
            // any text that names it.
            let text = norm(&c.draft.text);
            if !names
                .iter()
                .any(|n| text.contains(n.split(' ').next().unwrap_or(n)))
            {
                return false;
            }
            let ws: Vec<String> = words(&c.draft.text)
                .into_iter()
                .map(|(_, w)| norm(w))
                .collect();
            ws.iter().any(|w| named(w)) || ws.windows(2).any(|p| names.contains(&p.join(" ")))
        })
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

/// Whether a text (lower case) names one of an inventory page's items (lower case).
enum ItemMatcher {
    /// All the items at once, in one pass over the text.
    Automaton(AhoCorasick),
    /// Each in turn: for item lists past the automaton's limits (billions of bytes).
    Each(Vec<String>),
}

impl ItemMatcher {
    fn new(items: &[ItemCount]) -> ItemMatcher {
        let lower: Vec<String> = items.iter().map(|i| i.item.to_lowercase()).collect();
        match AhoCorasick::new(&lower) {
            Ok(automaton) => ItemMatcher::Automaton(automaton),
            Err(_) => ItemMatcher::Each(lower),
        }
    }

    /// Whether `text` holds one of the items.
    fn named_in(&self, text: &str) -> bool {
        match self {
            ItemMatcher::Automaton(a) => a.is_match(text),
            ItemMatcher::Each(items) => items.iter().any(|i| text.contains(i.as_str())),
        }
    }
}

/// A claim's date as pages show it ("8 May 2023"), or nothing when the fold kept none.
fn dated(at: Option<trajwiki_core::Timestamp>) -> String {
    at.map(|t| fmt_day(t.date())).unwrap_or_default()
}

/// One line of a page for a claim: its date, its text and its source ref; a claim no longer
/// current says so.
fn claim_line(claim: &ClaimEntry) -> String {
    let date = dated(claim.at);
    let mark = match claim.status {
        ClaimStatus::Active => "",
        ClaimStatus::Deprecated => " [no longer current]",
        ClaimStatus::Contradictory => " [contradicted]",
        ClaimStatus::NeedsConfirmation => " [unconfirmed]",
    };
    if date.is_empty() {
        format!("- {}{mark} ({})", claim.draft.text, claim.source_ref)
    } else {
        format!(
            "- {date}: {}{mark} ({})",
            claim.draft.text, claim.source_ref
        )
    }
}

/// The slot a claim holds ("home city"), when it holds one.
fn slot_of(claim: &ClaimEntry) -> Option<String> {
    claim
        .draft
        .facets
        .iter()
        .find_map(|f| f.tag.strip_prefix(SLOT_TAG).map(slot_name))
}

impl Wiki {
    /// Renders a page from the trajectories it links (`members`, in creation order).
    fn render(
        &self,
        ns: &Namespace,
        states: &[TrajState],
        key: &str,
        d: &Draft,
        members: &[usize],
        mut kept: Kept<'_>,
    ) -> WikiPage {
        let title = if key.starts_with(INDEX) {
            format!(
                "Index of trajectories {}–{}",
                members.first().map_or(0, |m| m + 1),
                members.last().map_or(0, |m| m + 1)
            )
        } else if key.starts_with(ENTITY) {
            d.head.clone()
        } else if key.starts_with(TOPIC) {
            // A topic page is named by its keyword as written: one page per keyword.
            capitalised(&d.head)
        } else {
            kept.page(key, &d.head, members)
        };
        // The keywords counted over the members, as the last render left them counted (the
        // members of a large page hold many times the distinct words they count).
        let tally = &mut kept.titles.keywords;
        tally.update(members, kept.changed, |ti| {
            states[ti].features.keywords.iter().map(String::as_str)
        });
        let mut top: Vec<(&str, usize)> = tally.counted().collect();
        top.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let keywords: Vec<String> = top.iter().take(24).map(|(k, _)| k.to_string()).collect();
        // The first terms in order: each member's are in order, so a member is read only up to
        // the last of those found so far.
        let mut terms: BTreeSet<&str> = BTreeSet::new();
        for &ti in members {
            for t in &states[ti].features.terms {
                if terms.len() == PAGE_TERMS && terms.last().is_some_and(|last| t.as_str() >= *last)
                {
                    break;
                }
                if terms.insert(t.as_str()) && terms.len() > PAGE_TERMS {
                    terms.pop_last();
                }
            }
        }
        let terms: Vec<String> = terms.into_iter().map(str::to_string).collect();
        // The items (of the page's family, for an inventory page) and counts its members hold.
        let family = key.strip_prefix(INVENTORY);
        let tally = &mut kept.titles.items;
        tally.update(members, kept.changed, |ti| {
            let s = &states[ti];
            let items = s
                .items
                .iter()
                .filter(|(_, f)| family.is_none_or(|fam| fam == f))
                .map(|(item, _)| item.as_str());
            let counts = s
                .counts
                .iter()
                .filter(|_| family.is_none_or(|f| f == "counts"))
                .map(String::as_str);
            items.chain(counts)
        });
        let mut items: Vec<(&str, usize)> = tally.counted().collect();
        items.sort_unstable();
        let items: Vec<ItemCount> = items
            .into_iter()
            .map(|(item, count)| ItemCount {
                item: item.to_string(),
                count: count as u32,
            })
            .collect();
        // An inventory page's items as its claims are matched against them: all at once, in
        // one pass over a claim's text (a page of counts holds thousands of distinct items).
        let items_lower = family.map(|_| ItemMatcher::new(&items));

        let mut body = format!("# {title}\n");
        let entity = key.strip_prefix(ENTITY);
        // Which claims of a member the page shows: an entity page its subject's, a topic page
        // those with its keyword, an inventory page those naming its items, a rescue page all.
        let shows = |claim: &ClaimEntry, t: &TrajState| -> bool {
            if let Some(e) = entity {
                return self.subject_of(claim, t) == e;
            }
            if let Some(stem) = key.strip_prefix(TOPIC) {
                return claim.draft.keywords.contains(stem);
            }
            if let Some(items) = &items_lower {
                return items.named_in(&claim.draft.text.to_lowercase());
            }
            !key.starts_with(INDEX)
        };
        if d.kind != PageKind::Index {
            // Each member's shown claims as the last render found them, unless it changed or
            // what else decides them did.
            let with = (
                kept.reading.clone(),
                match family {
                    Some(_) => items.iter().map(|i| i.item.clone()).collect(),
                    None => Vec::new(),
                },
            );
            let memo = &mut kept.titles.shown;
            let mut before = std::mem::take(&mut memo.members);
            let reread = memo.with.as_ref() != Some(&with);
            if reread {
                before.clear();
                memo.with = Some(with);
            }
            let mut shown: Vec<(usize, &ClaimEntry)> = Vec::new();
            for &ti in members {
                let claims = &states[ti].claims;
                let positions = match before.remove(&ti) {
                    Some(p) if !kept.changed.contains(&ti) => p,
                    _ => (0..claims.len() as u32)
                        .filter(|&i| shows(&claims[i as usize], &states[ti]))
                        .collect(),
                };
                shown.extend(positions.iter().map(|&i| (ti, &claims[i as usize])));
                memo.members.insert(ti, positions);
            }
            if entity.is_some() {
                // Current facts: the newest active claim of each slot.
                let mut current: BTreeMap<String, &ClaimEntry> = BTreeMap::new();
                for (_, claim) in &shown {
                    if claim.status == ClaimStatus::Active {
                        if let Some(slot) = slot_of(claim) {
                            let newer = current.get(&slot).is_none_or(|c| c.at <= claim.at);
                            if newer {
                                current.insert(slot, claim);
                            }
                        }
                    }
                }
                body.push_str("\n## Current facts\n");
                if current.is_empty() {
                    body.push_str("No slot facts recorded (see the events below).\n");
                }
                for (slot, claim) in &current {
                    body.push_str(&format!(
                        "{}\n",
                        claim_line(claim).replacen("- ", &format!("- {slot}: "), 1)
                    ));
                }
                let mut changes: Vec<&ClaimEntry> = shown
                    .iter()
                    .map(|(_, c)| *c)
                    .filter(|c| c.was.is_some())
                    .collect();
                changes.sort_by_key(|c| c.at);
                if !changes.is_empty() {
                    body.push_str("\n## What changed\n");
                    for claim in changes {
                        let was = claim.was.as_deref().expect("filtered");
                        let until = dated(claim.at);
                        body.push_str(&format!(
                            "- until {until}: {} ({}); since {until}: {} ({})\n",
                            was.text, was.source_ref, claim.draft.text, claim.source_ref
                        ));
                    }
                }
            }
            // Events, section by section (the members in joining order, `page_target` each),
            // in time order within a section.
            body.push_str(if entity.is_some() {
                "\n## Events\n"
            } else {
                "\n## Facts\n"
            });
            let size = self.section.max(1);
            let chunks: Vec<&[usize]> = d.members.chunks(size).collect();
            // Each section as the last render wrote it, unless its members are others, one of
            // them changed or what decides the claims shown did.
            kept.titles.section_bodies.resize(chunks.len(), None);
            let mut any = false;
            for (i, section) in chunks.iter().enumerate() {
                let written = !reread
                    && kept.titles.section_bodies[i]
                        .as_ref()
                        .is_some_and(|b| b.head == d.head && b.members == *section)
                    && !section.iter().any(|m| kept.changed.contains(m));
                if !written {
                    // The claims shown of its trajectories (each once, in the page's order),
                    // in time order.
                    let mut of: Vec<usize> = section.to_vec();
                    of.sort_unstable();
                    of.dedup();
                    let mut lines: Vec<&ClaimEntry> = Vec::new();
                    for ti in of {
                        if let Some(shown) = kept.titles.shown.members.get(&ti) {
                            let claims = &states[ti].claims;
                            lines.extend(shown.iter().map(|&p| &claims[p as usize]));
                        }
                    }
                    let mut text = String::new();
                    if !lines.is_empty() {
                        lines.sort_by_key(|c| c.at);
                        text = format!("\n### {}\n", kept.section(i, &d.head, section));
                        for claim in lines {
                            text.push_str(&claim_line(claim));
                            text.push('\n');
                        }
                    }
                    kept.titles.section_bodies[i] = Some(SectionBody {
                        head: d.head.clone(),
                        members: section.to_vec(),
                        text,
                    });
                }
                let text = kept.titles.section_bodies[i]
                    .as_ref()
                    .map_or("", |b| b.text.as_str());
                any |= !text.is_empty();
                body.push_str(text);
            }
            if !any {
                body.push_str("- (see linked trajectories)\n");
            }
            if !items.is_empty() && !key.starts_with(TOPIC) {
                body.push_str("\n## Items and counts\n");
                for i in items.iter().take(32) {
                    body.push_str(&format!("- {}: {}\n", i.item, i.count));
                }
            }
            // Related pages: the other entities with pages these trajectories name, counted
            // over the members as the last render left them counted, each judged once (ranked
            // below by count, then name).
            let tally = &mut kept.titles.entities;
            tally.update(members, kept.changed, |ti| {
                states[ti].features.entities.iter().map(String::as_str)
            });
            let mut related: Vec<(&str, usize)> = tally
                .counted()
                .filter(|&(e, _)| Some(e) != entity && self.alias_of(e).is_none() && self.paged(e))
                .collect();
            if !related.is_empty() {
                related.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
                body.push_str("\n## Related pages\n");
                for (e, n) in related.iter().take(8) {
                    let surface = self
                        .groups
                        .get(&format!("{ENTITY}{e}"))
                        .map_or(*e, |g| g.surface.as_str());
                    body.push_str(&format!("- [[{surface}]] — in {n} of these trajectories\n"));
                }
            }
        }
        body.push_str("\n## Linked trajectories\n");
        // Each member's line as the last render wrote it, unless it changed (a member that
        // left is forgotten: it may change before it comes back).
        let lines = &mut kept.titles.linked;
        lines.retain(|ti, _| members.binary_search(ti).is_ok());
        for &ti in members {
            if kept.changed.contains(&ti) {
                lines.remove(&ti);
            }
            let line = lines.entry(ti).or_insert_with(|| {
                let s = &states[ti];
                format!(
                    "- {}: {} ({} snapshots)\n",
                    s.id,
                    s.label,
                    s.snapshots.len()
                )
            });
            body.push_str(line);
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
            title,
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

    /// An inventory page shows a claim when its text holds one of the page's items: the
    /// automaton over all of them answers as the items one by one do — an item inside a word,
    /// overlapping items, an empty item (in every text), none.
    #[test]
    fn an_inventory_page_matches_its_items_as_each_item_does() {
        let item = |i: &str| ItemCount {
            item: i.to_string(),
            count: 1,
        };
        let texts = [
            "i planted 3 tulips by the lake",
            "we adopted two cats last year",
            "caroline's cat ate the tulip bulbs",
            "",
            "nothing to see",
        ];
        let lists: [&[&str]; 5] = [
            &["3 Tulips", "lake"],
            &["cat", "cats", "at"],
            &["tulip bulbs", "two cats"],
            &[],
            &["", "zebra"],
        ];
        for items in lists {
            let items: Vec<ItemCount> = items.iter().map(|i| item(i)).collect();
            let each = ItemMatcher::Each(items.iter().map(|i| i.item.to_lowercase()).collect());
            let automaton = ItemMatcher::new(&items);
            assert!(matches!(automaton, ItemMatcher::Automaton(_)));
            for text in texts {
                assert_eq!(
                    automaton.named_in(text),
                    each.named_in(text),
                    "{text:?} against {:?}",
                    items.iter().map(|i| &i.item).collect::<Vec<_>>()
                );
            }
        }
        let found = |items: &[&str], text: &str| {
            let items: Vec<ItemCount> = items.iter().map(|i| item(i)).collect();
            ItemMatcher::new(&items).named_in(text)
        };
        assert!(found(&["3 Tulips"], "i planted 3 tulips"));
        assert!(!found(&["zebra"], "i planted 3 tulips"));
        assert!(found(&[""], "anything"));
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
    fn a_large_group_is_one_page_that_grows_and_resumes_to_the_same_pages() {
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
        let entity: Vec<&WikiPage> = pages
            .iter()
            .filter(|p| p.kind == PageKind::Entity)
            .collect();
        // 11 members above page_max 6: still one page, titled by its entity alone.
        assert_eq!(entity.len(), 1);
        assert_eq!(entity[0].trajectory_ids.len(), 11);
        assert_eq!(entity[0].title, "oslo");
        // One more member changes that page (and its index page) only.
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
        assert_eq!(kinds, vec![(PageKind::Index, 12), (PageKind::Entity, 12)]);
        // Derived again from the groups alone, the wiki has the same pages.
        let resumed = Wiki::resume(wiki.groups().clone(), &states, &c, &Lexicon::default());
        assert_eq!(resumed.pages, wiki.pages);
        assert_eq!(resumed.on, wiki.on);
    }
}
