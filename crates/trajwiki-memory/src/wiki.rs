//! The Memory Wiki (SPEC §2.5): an index page, entity and entity-facet pages, inventory pages,
//! topic pages (suppressed when mostly covered), shards of about `page_target` for pages above
//! `page_max`, and rescue pages so that no trajectory is reachable only through the index.

use std::collections::{BTreeMap, BTreeSet};

use trajwiki_core::{ClaimStatus, ItemCount, Namespace, PageId, PageKind, TrajectoryId, WikiPage};

use crate::extract::{is_specific, Lexicon};
use crate::fold::{trajectory_label, TrajState};
use crate::text::cosine;
use crate::MemoryConfig;

/// Everything the wiki is compiled from: the fold's trajectories and lexicon.
struct WikiInput<'a> {
    namespace: &'a Namespace,
    config: &'a MemoryConfig,
    lexicon: &'a Lexicon,
    states: &'a [TrajState],
    /// e_sum of each trajectory.
    embeddings: Vec<&'a [f32]>,
}

/// A page before rendering: kind, key (stable id source), title, member trajectories (indices).
#[derive(Debug, Clone)]
struct Draft {
    kind: PageKind,
    key: String,
    title: String,
    members: Vec<usize>,
}

/// Splits `members` into shards of about `target` by summary-embedding similarity: the first
/// remaining trajectory seeds a shard and takes its nearest remaining neighbours (ties by index).
pub fn shard<E: AsRef<[f32]>>(
    members: &[usize],
    embeddings: &[E],
    target: usize,
) -> Vec<Vec<usize>> {
    let mut remaining: Vec<usize> = members.to_vec();
    remaining.sort_unstable();
    let mut shards = Vec::new();
    // Balance: n members into ceil(n / target) shards of near-equal size.
    let count = remaining.len().div_ceil(target).max(1);
    let base = remaining.len() / count;
    let extra = remaining.len() % count;
    for s in 0..count {
        if remaining.is_empty() {
            break;
        }
        let size = base + usize::from(s < extra);
        let seed = remaining.remove(0);
        let mut by_sim: Vec<(usize, f32)> = remaining
            .iter()
            .map(|&i| (i, cosine(embeddings[seed].as_ref(), embeddings[i].as_ref())))
            .collect();
        by_sim.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut shard_members = vec![seed];
        shard_members.extend(
            by_sim
                .into_iter()
                .take(size.saturating_sub(1))
                .map(|(i, _)| i),
        );
        remaining.retain(|i| !shard_members.contains(i));
        shard_members.sort_unstable();
        shards.push(shard_members);
    }
    shards
}

/// Compiles the Memory Wiki of a namespace's trajectories.
pub(crate) fn compile_wiki(
    namespace: &Namespace,
    config: &MemoryConfig,
    lexicon: &Lexicon,
    states: &[TrajState],
) -> Vec<WikiPage> {
    let w = &WikiInput {
        namespace,
        config,
        lexicon,
        states,
        embeddings: states
            .iter()
            .map(|s| s.features.summary_embedding.as_slice())
            .collect(),
    };
    let c = w.config;
    let n = w.states.len();
    let mut drafts: Vec<Draft> = Vec::new();

    // Entity pages: trajectories sharing a lexicon entity. Broad ones (speakers, or more than
    // `broad_entity` trajectories) become entity-facet pages by the facet tags their subjects
    // state.
    let mut by_entity: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (ti, s) in w.states.iter().enumerate() {
        for e in &s.features.entities {
            by_entity.entry(e.as_str()).or_default().push(ti);
        }
    }
    for (key, members) in &by_entity {
        let surface = w
            .lexicon
            .entities
            .get(*key)
            .cloned()
            .unwrap_or_else(|| key.to_string());
        let broad = w.lexicon.speakers.contains(*key) || members.len() > c.broad_entity;
        if !broad {
            if members.len() >= 2 {
                drafts.push(Draft {
                    kind: PageKind::Entity,
                    key: format!("entity:{key}"),
                    title: surface,
                    members: members.clone(),
                });
            }
            continue;
        }
        let mut by_tag: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for &ti in members {
            for (subject, tag) in &w.states[ti].subject_facets {
                if subject == key {
                    by_tag.entry(tag.as_str()).or_default().push(ti);
                }
            }
        }
        for (tag, members) in by_tag {
            drafts.push(Draft {
                kind: PageKind::Entity,
                key: format!("entity:{key}:{tag}"),
                title: format!("{surface} — {}", tag.replace('_', " ")),
                members,
            });
        }
    }

    // Inventory pages: list-like trajectories (several items or counts), by item family.
    let mut by_family: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (ti, s) in w.states.iter().enumerate() {
        if s.items.len() + s.counts.len() < c.inventory_min_items {
            continue;
        }
        let families: BTreeSet<&str> = s.items.iter().map(|(_, f)| f.as_str()).collect();
        for f in families {
            by_family.entry(f).or_default().push(ti);
        }
        if !s.counts.is_empty() {
            by_family.entry("counts").or_default().push(ti);
        }
    }
    for (family, members) in by_family {
        drafts.push(Draft {
            kind: PageKind::Inventory,
            key: format!("inventory:{family}"),
            title: format!("Inventory: {family}"),
            members,
        });
    }

    // Topic pages: specific keywords shared by several trajectories, chosen greedily by the
    // trajectories they add to what entity and inventory pages (and earlier topics) cover; a
    // topic whose trajectories are `topic_suppression` covered already is dropped.
    let mut covered: BTreeSet<usize> = drafts
        .iter()
        .flat_map(|d| d.members.iter().copied())
        .collect();
    let mut by_keyword: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (ti, s) in w.states.iter().enumerate() {
        for k in &s.features.keywords {
            if is_specific(k) && k.chars().count() >= 4 {
                by_keyword.entry(k.as_str()).or_default().push(ti);
            }
        }
    }
    let mut topics: Vec<(&str, Vec<usize>)> = by_keyword
        .into_iter()
        .filter(|(_, m)| m.len() >= c.topic_min_trajectories && m.len() <= c.broad_entity)
        .collect();
    loop {
        let best = topics
            .iter()
            .enumerate()
            .map(|(i, (k, m))| {
                (
                    i,
                    m.iter().filter(|t| !covered.contains(t)).count(),
                    m.len(),
                    *k,
                )
            })
            .filter(|(_, new, len, _)| {
                *new >= 2 && (*len - *new) as f32 / (*len as f32) < c.topic_suppression
            })
            .max_by(|a, b| a.1.cmp(&b.1).then(a.2.cmp(&b.2)).then(b.3.cmp(a.3)));
        let Some((i, _, _, _)) = best else { break };
        let (keyword, members) = topics.swap_remove(i);
        covered.extend(members.iter().copied());
        drafts.push(Draft {
            kind: PageKind::Topic,
            key: format!("topic:{keyword}"),
            title: format!("Topic: {keyword}"),
            members,
        });
    }

    // Shards.
    let mut pages: Vec<Draft> = Vec::new();
    for d in drafts {
        if d.members.len() <= c.page_max {
            pages.push(d);
            continue;
        }
        let shards = shard(&d.members, &w.embeddings, c.page_target);
        let total = shards.len();
        for (i, members) in shards.into_iter().enumerate() {
            pages.push(Draft {
                kind: d.kind,
                key: format!("{}#{}", d.key, w.states[members[0]].id),
                title: format!("{} ({}/{total})", d.title, i + 1),
                members,
            });
        }
    }

    // Rescue: every trajectory on at least one non-index page.
    let reached: BTreeSet<usize> = pages
        .iter()
        .flat_map(|d| d.members.iter().copied())
        .collect();
    let orphans: Vec<usize> = (0..n).filter(|t| !reached.contains(t)).collect();
    if !orphans.is_empty() {
        for members in shard(&orphans, &w.embeddings, c.page_target) {
            let title = format!(
                "Notes: {}",
                trajectory_label(&w.states[members[0]], w.lexicon)
            );
            pages.push(Draft {
                kind: PageKind::Topic,
                key: format!("rescue#{}", w.states[members[0]].id),
                title,
                members,
            });
        }
    }
    pages.push(Draft {
        kind: PageKind::Index,
        key: "index".into(),
        title: "Index".into(),
        members: (0..n).collect(),
    });

    let mut out: Vec<WikiPage> = pages.iter().map(|d| render(w, d)).collect();
    out.sort_by(|a, b| a.kind.cmp(&b.kind).then(a.id.cmp(&b.id)));
    out.dedup_by(|a, b| a.id == b.id);
    out
}

fn render(w: &WikiInput<'_>, d: &Draft) -> WikiPage {
    let mut members = d.members.clone();
    members.sort_unstable();
    members.dedup();
    let mut keywords: BTreeMap<&str, usize> = BTreeMap::new();
    let mut terms: BTreeSet<&str> = BTreeSet::new();
    let mut items: BTreeMap<String, u32> = BTreeMap::new();
    let mut facts: Vec<String> = Vec::new();
    let mut conflicts: Vec<String> = Vec::new();
    for &ti in &members {
        let s = &w.states[ti];
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
    let snapshot_count: usize = members.iter().map(|&ti| w.states[ti].snapshots.len()).sum();
    let mut body = format!("# {}\n\n## Overview\n", d.title);
    body.push_str(&format!(
        "{} page linking {} trajectories ({} snapshots). Keywords: {}.\n",
        d.kind.as_str(),
        members.len(),
        snapshot_count,
        keywords
            .iter()
            .take(8)
            .cloned()
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
    for &ti in &members {
        body.push_str(&format!(
            "- {}: {} ({} snapshots)\n",
            w.states[ti].id,
            trajectory_label(&w.states[ti], w.lexicon),
            w.states[ti].snapshots.len()
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
    let labels: Vec<String> = members
        .iter()
        .take(12)
        .map(|&ti| trajectory_label(&w.states[ti], w.lexicon))
        .collect();
    let routing_text = format!(
        "{}\n{}\n{}\n{}",
        d.title,
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
        id: PageId::derive(w.namespace, &d.key),
        namespace: w.namespace.clone(),
        kind: d.kind,
        title: d.title.clone(),
        body,
        routing_text,
        keywords,
        trajectory_ids: members
            .iter()
            .map(|&ti| w.states[ti].id.clone())
            .collect::<Vec<TrajectoryId>>(),
        terms,
        items,
        revision: 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_are_balanced_and_cover() {
        let emb: Vec<Vec<f32>> = (0..11)
            .map(|i| {
                if i % 2 == 0 {
                    vec![1.0, 0.0]
                } else {
                    vec![0.0, 1.0]
                }
            })
            .collect();
        let members: Vec<usize> = (0..11).collect();
        let shards = shard(&members, &emb, 4);
        assert_eq!(shards.len(), 3);
        let sizes: Vec<usize> = shards.iter().map(Vec::len).collect();
        assert_eq!(sizes, vec![4, 4, 3]);
        let mut all: Vec<usize> = shards.concat();
        all.sort_unstable();
        assert_eq!(all, members);
        // Similar trajectories land together: the first shard is all even.
        assert!(shards[0].iter().all(|i| i % 2 == 0), "{shards:?}");
    }
}
