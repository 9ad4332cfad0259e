//! What an index derives from each record on its own, kept between loads of a namespace.
//!
//! Most of a load's work is per record: a message's keywords, item families, speaker key and
//! context line; a level text's keywords; a snapshot's centroid; the lexicon's counts. None of
//! it depends on the other records, so a [`Derived`] kept beside a namespace's index lets the
//! load after an append derive the new and changed records only. The index is the same either
//! way: [`Index::new`](crate::Index::new) assembles it from the records and these parts whether
//! they were derived now or by an earlier load (`tests::a_kept_derivation_gives_what_a_new_one_gives`
//! and the engine's append-then-search property test hold it to that).
//!
//! Every part is checked against the record it was derived from before it is reused (the
//! message itself, the text, the snapshot's sources), so a namespace deleted and made again
//! under the same ids never reuses a stale part.

use std::sync::Arc;

use rayon::prelude::*;
use rustc_hash::FxHashMap;
use trajwiki_core::{MessageId, SnapshotId, SourceMessage};
use trajwiki_text::{entity_key, Lexicon, LexiconStats};

use crate::index::{chunk_keywords, family_bits_all, keyword_chunk_len};
use crate::render::base_line;

/// A text's keywords: each distinct one once, in keyword order (the order in which a text's new
/// keywords are numbered).
pub(crate) type Keywords = Arc<[Arc<str>]>;

/// What a message alone decides of an index.
pub(crate) struct MessagePart {
    /// The keywords of its embedding text.
    pub keywords: Keywords,
    /// Its item families (see `index::family_bits_of`).
    pub families: u64,
    /// Its context line as far as the message decides it, and the line's whitespace tokens.
    pub line: (String, usize),
    /// The normalised key of its speaker.
    pub speaker: String,
}

/// The lexicon's counts over the first messages of a namespace, in the index's order.
struct LexiconFold {
    min_count: usize,
    /// The messages counted, in order.
    counted: Vec<MessageId>,
    stats: LexiconStats,
}

/// Parts of an index derived from single records, kept between loads of one namespace (see the
/// module's documentation). `Derived::default()` keeps what it derives; [`Derived::transient`]
/// keeps nothing, for a load that is the only one (a command that answers once).
pub struct Derived {
    keep: bool,
    messages: FxHashMap<MessageId, (SourceMessage, Arc<MessagePart>)>,
    texts: FxHashMap<String, Keywords>,
    /// Per snapshot: its sources and their centroid, kept when every source's vector came from
    /// the namespace's vector file (whose rows never change).
    centroids: FxHashMap<SnapshotId, (Vec<MessageId>, Arc<[f32]>)>,
    lexicon: Option<LexiconFold>,
}

impl Default for Derived {
    fn default() -> Self {
        Derived {
            keep: true,
            messages: FxHashMap::default(),
            texts: FxHashMap::default(),
            centroids: FxHashMap::default(),
            lexicon: None,
        }
    }
}

impl std::fmt::Debug for Derived {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Derived")
            .field("keep", &self.keep)
            .field("messages", &self.messages.len())
            .field("texts", &self.texts.len())
            .field("centroids", &self.centroids.len())
            .finish()
    }
}

impl Derived {
    /// Derives what a load needs and keeps nothing.
    pub fn transient() -> Self {
        Derived {
            keep: false,
            ..Derived::default()
        }
    }

    /// Whether it keeps what it derives (it is not [`Derived::transient`]).
    pub fn keeps(&self) -> bool {
        self.keep
    }

    /// Forgets what it derived from records by their ids (messages, centroids, the lexicon's
    /// counts), keeping what it keyed by content (texts' keywords): for a
    /// namespace the store says was replaced or made again, whose ids may now name other
    /// records.
    pub fn forget_records(&mut self) {
        self.messages.clear();
        self.centroids.clear();
        self.lexicon = None;
    }

    /// Lets go of what it keeps per record and per text (the most of its bytes), keeping the
    /// lexicon's counts: a loaded index still takes its namespace's
    /// changes in place with them (see [`Index::apply`](crate::Index::apply)); a load after
    /// this derives every record again.
    pub fn shed(&mut self) {
        self.messages = FxHashMap::default();
        self.texts = FxHashMap::default();
        self.centroids = FxHashMap::default();
    }

    /// Approximate heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        let keywords = |k: &Keywords| 16 * k.len() + k.iter().map(|w| w.len()).sum::<usize>();
        let messages: usize = self
            .messages
            .values()
            .map(|(m, p)| {
                200 + m.text.len()
                    + m.speaker.len()
                    + keywords(&p.keywords)
                    + p.line.0.len()
                    + p.speaker.len()
            })
            .sum();
        let texts: usize = self
            .texts
            .iter()
            .map(|(t, k)| 48 + t.len() + keywords(k))
            .sum();
        let centroids: usize = self
            .centroids
            .values()
            .map(|(ids, c)| 64 + 32 * ids.len() + 4 * c.len())
            .sum();
        messages + texts + centroids
    }

    /// The part of each of `messages` and their lexicon, side by side. The lexicon continues
    /// the kept counts with the messages after those counted when the counted ones are still
    /// the first messages, unchanged; else the messages are counted again from the start.
    pub(crate) fn messages_and_lexicon(
        &mut self,
        messages: &[&SourceMessage],
        min_count: usize,
    ) -> (Vec<Arc<MessagePart>>, Lexicon) {
        let Derived {
            keep,
            messages: kept,
            lexicon: fold,
            ..
        } = self;
        let keep = *keep;
        let found = kept_parts(kept, messages);
        let continues = fold.as_ref().is_some_and(|f| {
            f.min_count == min_count
                && f.counted.len() <= messages.len()
                && f.counted
                    .iter()
                    .zip(messages.iter().zip(&found))
                    .all(|(id, (m, same))| *id == m.id && same.is_some())
        });
        if !continues {
            *fold = None;
        }
        rayon::join(
            || message_parts(kept, keep, messages, found),
            || lexicon(fold, keep, messages, min_count),
        )
    }

    /// The parts of `messages`, which come after the `held` first messages of a namespace
    /// (in the index's order, the last of them `last`), and the lexicon of all of them: `None`
    /// when the kept lexicon counts are not those of the held messages (nothing is changed then).
    pub(crate) fn appended(
        &mut self,
        held: usize,
        last: Option<&MessageId>,
        messages: &[&SourceMessage],
        min_count: usize,
    ) -> Option<(Vec<Arc<MessagePart>>, Lexicon)> {
        let fold = self.lexicon.as_ref()?;
        if fold.min_count != min_count
            || fold.counted.len() != held
            || fold.counted.last() != last
            || !self.keep
        {
            return None;
        }
        let found = kept_parts(&self.messages, messages);
        let parts = message_parts(&mut self.messages, true, messages, found);
        let fold = self.lexicon.as_mut().expect("checked above");
        for m in messages {
            fold.stats.add(m, min_count);
            fold.counted.push(m.id.clone());
        }
        Some((parts, fold.stats.lexicon().clone()))
    }

    /// The lexicon's counts, when they are kept for exactly `messages` (the namespace's, in
    /// the index's order) with `min_count` (for storing an index with them).
    pub(crate) fn lexicon_stats(
        &self,
        messages: &[SourceMessage],
        min_count: usize,
    ) -> Option<&LexiconStats> {
        let fold = self.lexicon.as_ref()?;
        (fold.min_count == min_count
            && fold.counted.len() == messages.len()
            && fold.counted.iter().zip(messages).all(|(id, m)| *id == m.id))
        .then_some(&fold.stats)
    }

    /// Keeps `stats` as the lexicon's counts over `messages` with `min_count` (an index read
    /// back from storage with them), so that the index takes appends in place (unless this
    /// keeps nothing).
    pub(crate) fn keep_lexicon(
        &mut self,
        messages: &[SourceMessage],
        min_count: usize,
        stats: LexiconStats,
    ) {
        if self.keep {
            self.lexicon = Some(LexiconFold {
                min_count,
                counted: messages.iter().map(|m| m.id.clone()).collect(),
                stats,
            });
        }
    }

    /// The keywords of each of `texts`, found now where none are kept for it.
    pub(crate) fn keywords(&mut self, texts: &[String]) -> Vec<Keywords> {
        let missing: Vec<String> = texts
            .iter()
            .filter(|t| !self.texts.contains_key(t.as_str()))
            .cloned()
            .collect();
        let found = keywords_of(&missing);
        let mut fresh: FxHashMap<String, Keywords> = FxHashMap::default();
        for (t, k) in missing.into_iter().zip(found) {
            fresh.insert(t, k);
        }
        let out = texts
            .iter()
            .map(|t| {
                self.texts
                    .get(t.as_str())
                    .or_else(|| fresh.get(t.as_str()))
                    .map(Arc::clone)
                    .expect("every text's keywords were found")
            })
            .collect();
        if self.keep {
            self.texts.extend(fresh);
        }
        out
    }

    /// The kept centroid of `snapshot` when its sources are `sources`.
    pub(crate) fn centroid(&self, snapshot: &SnapshotId, sources: &[MessageId]) -> Option<&[f32]> {
        match self.centroids.get(snapshot) {
            Some((seen, c)) if seen.as_slice() == sources => Some(c),
            _ => None,
        }
    }

    /// Keeps the centroid of `snapshot` (whose sources' vectors are all the vector file's).
    pub(crate) fn keep_centroid(
        &mut self,
        snapshot: &SnapshotId,
        sources: &[MessageId],
        centroid: &[f32],
    ) {
        if self.keep && self.centroid(snapshot, sources).is_none() {
            self.centroids
                .insert(snapshot.clone(), (sources.to_vec(), centroid.into()));
        }
    }
}

/// The part `kept` holds for each of `messages`, where it was derived from that message as it
/// is now.
fn kept_parts(
    kept: &FxHashMap<MessageId, (SourceMessage, Arc<MessagePart>)>,
    messages: &[&SourceMessage],
) -> Vec<Option<Arc<MessagePart>>> {
    messages
        .iter()
        .map(|m| match kept.get(&m.id) {
            Some((seen, part)) if seen == *m => Some(Arc::clone(part)),
            _ => None,
        })
        .collect()
}

/// The part of each of `messages`: the one `found` in `kept`, else derived now (and kept when
/// `keep`).
fn message_parts(
    kept: &mut FxHashMap<MessageId, (SourceMessage, Arc<MessagePart>)>,
    keep: bool,
    messages: &[&SourceMessage],
    found: Vec<Option<Arc<MessagePart>>>,
) -> Vec<Arc<MessagePart>> {
    let missing: Vec<&SourceMessage> = messages
        .iter()
        .zip(&found)
        .filter(|(_, k)| k.is_none())
        .map(|(m, _)| *m)
        .collect();
    let mut made = derive_messages(&missing).into_iter();
    let mut parts = Vec::with_capacity(messages.len());
    for (m, f) in messages.iter().zip(found) {
        let part = match f {
            Some(part) => part,
            None => {
                let part = Arc::new(made.next().expect("one part per missing message"));
                if keep {
                    kept.insert(m.id.clone(), ((*m).clone(), Arc::clone(&part)));
                }
                part
            }
        };
        parts.push(part);
    }
    parts
}

/// The lexicon of `messages` (in the index's order) with `min_count`: the counts of `fold`
/// (which holds those of the first messages, or nothing) continued with the messages after
/// those it counted. `fold` keeps the counts when `keep`.
fn lexicon(
    fold: &mut Option<LexiconFold>,
    keep: bool,
    messages: &[&SourceMessage],
    min_count: usize,
) -> Lexicon {
    let f = fold.get_or_insert_with(|| LexiconFold {
        min_count,
        counted: Vec::new(),
        stats: LexiconStats::default(),
    });
    for m in &messages[f.counted.len()..] {
        f.stats.add(m, min_count);
        f.counted.push(m.id.clone());
    }
    let lexicon = f.stats.lexicon().clone();
    if !keep {
        *fold = None;
    }
    lexicon
}

/// The parts of `messages`, derived in parallel.
fn derive_messages(messages: &[&SourceMessage]) -> Vec<MessagePart> {
    let texts: Vec<String> = messages.par_iter().map(|m| m.embedding_text()).collect();
    let (keywords, (families, lines)) = rayon::join(
        || keywords_of(&texts),
        || {
            rayon::join(
                || family_bits_all(&texts),
                || {
                    messages
                        .par_iter()
                        .map(|m| {
                            let line = base_line(m);
                            let tokens = line.split_whitespace().count();
                            (line, tokens)
                        })
                        .collect::<Vec<_>>()
                },
            )
        },
    );
    keywords
        .into_iter()
        .zip(families)
        .zip(lines)
        .zip(messages)
        .map(|(((keywords, families), line), m)| MessagePart {
            keywords,
            families,
            line,
            speaker: entity_key(&m.speaker),
        })
        .collect()
}

/// The keywords of each text, found in parallel chunks (a chunk's keywords are made once and
/// shared by its texts).
fn keywords_of(texts: &[String]) -> Vec<Keywords> {
    texts
        .par_chunks(keyword_chunk_len(texts.len()))
        .flat_map_iter(|chunk| {
            let c = chunk_keywords(chunk);
            let words: Vec<Arc<str>> = c.keywords.into_iter().map(Arc::from).collect();
            c.texts
                .into_iter()
                .map(move |row| {
                    row.iter()
                        .map(|&k| Arc::clone(&words[k as usize]))
                        .collect::<Keywords>()
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use trajwiki_core::Namespace;

    fn msg(session: u32, seq: u32, speaker: &str, text: &str) -> SourceMessage {
        let ts: trajwiki_core::Timestamp = "2023-05-08T13:56:00".parse().unwrap();
        SourceMessage::new(
            Namespace::new("t").unwrap(),
            session,
            seq,
            speaker.into(),
            text.into(),
            ts,
            vec![],
            Some(format!("D{session}:{seq}")),
        )
    }

    fn refs(ms: &[SourceMessage]) -> Vec<&SourceMessage> {
        ms.iter().collect()
    }

    #[test]
    fn a_kept_derivation_gives_what_a_new_one_gives() {
        let early = [
            msg(2, 1, "Ines", "We went to see Tom Waits in Oslo."),
            msg(2, 2, "Leo", "Oslo was cold, and Tom Waits was late."),
        ];
        // A backfill (an older session, before the counted messages) and a continuation; the
        // backfill names an entity often enough to enter the lexicon, and a message is edited
        // under its id (a namespace deleted and made again).
        let later = [
            msg(
                1,
                1,
                "Ines",
                "We met Zed today. Then Zed left, and later Zed came back.",
            ),
            early[0].clone(),
            msg(2, 2, "Leo", "Oslo was cold, and Bergen was colder."),
            msg(3, 1, "Ines", "I painted the harbour of Bergen."),
        ];
        let mut kept = Derived::default();
        kept.messages_and_lexicon(&refs(&early), 2);
        kept.keywords(&["Oslo trip with Tom".to_string()]);
        for stage in [&later[1..], &later[..]] {
            let (parts, lexicon) = kept.messages_and_lexicon(&refs(stage), 2);
            let (fresh_parts, fresh_lexicon) =
                Derived::transient().messages_and_lexicon(&refs(stage), 2);
            assert_eq!(lexicon, fresh_lexicon);
            assert_eq!(lexicon, Lexicon::build(stage.iter(), 2));
            for (a, b) in parts.iter().zip(&fresh_parts) {
                assert_eq!(a.keywords, b.keywords);
                assert_eq!(
                    (a.families, &a.line, &a.speaker),
                    (b.families, &b.line, &b.speaker)
                );
            }
        }
        assert!(kept
            .lexicon
            .as_ref()
            .unwrap()
            .stats
            .lexicon()
            .entities
            .contains_key("zed"));
        let texts = [
            "Oslo trip with Tom".to_string(),
            "Bergen harbour".to_string(),
        ];
        assert_eq!(kept.keywords(&texts), Derived::transient().keywords(&texts));
    }
}
