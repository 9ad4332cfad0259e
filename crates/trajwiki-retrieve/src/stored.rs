//! An index stored and read back (an index segment's payload): everything a load derives —
//! the records in the index's order, the vocabulary, term lists and BM25 postings, the rendered
//! lines, the maps between levels, the lexicon and its counts, the derived levels' rows (f16) —
//! but the message vectors, which stay in the namespace's vector file and are handed back when
//! the index is made again ([`StoredIndex::into_index`]).
//!
//! The encoding is postcard, with the records' optional fields spelled out (postcard does not
//! describe its fields, so a field left out when empty cannot be read back) and the f16 rows as
//! raw bytes. The index read back is the one stored, field for field; the engine's segment
//! tests hold a segment-backed load to a load from the records, search for search.

use half::f16;
use rustc_hash::FxHashMap;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use trajwiki_compute::{Bm25Index, Bm25Params};
use trajwiki_core::{
    Attachment, Claim, ClaimId, ClaimStatus, MessageId, Namespace, Signals, Snapshot, SnapshotId,
    SourceMessage, Timestamp, Trajectory, TrajectoryId, WikiPage,
};
use trajwiki_text::{Lexicon, LexiconStats};

use crate::derived::Derived;
use crate::index::{
    add_restated, Ids, Index, IndexError, NamespaceRecords, Rows, Superseded, Vectors, Vocab,
};
use crate::vectors::MessageVectors;

/// A timestamp as seconds and nanoseconds since the epoch.
type When = (i64, u32);

fn when(t: &Timestamp) -> When {
    let utc = t.and_utc();
    (utc.timestamp(), utc.timestamp_subsec_nanos())
}

fn timestamp(w: When) -> Result<Timestamp, IndexError> {
    chrono::DateTime::from_timestamp(w.0, w.1)
        .map(|d| d.naive_utc())
        .ok_or_else(|| stored(format!("timestamp {}.{:09} out of range", w.0, w.1)))
}

fn stored(reason: impl Into<String>) -> IndexError {
    IndexError::Stored(reason.into())
}

/// A message: id, session, seq, speaker, text, time, attachments (kind, caption, url), ref.
type MessageOut<'a> = (
    &'a MessageId,
    u32,
    u32,
    &'a str,
    &'a str,
    When,
    Vec<(&'a str, &'a Option<String>, &'a Option<String>)>,
    &'a Option<String>,
);
type MessageIn = (
    MessageId,
    u32,
    u32,
    String,
    String,
    When,
    Vec<(String, Option<String>, Option<String>)>,
    Option<String>,
);

/// A claim and its status: id, snapshot, text, status at creation, sources, quote, revised
/// claim, status now.
type ClaimOut<'a> = (
    &'a ClaimId,
    &'a SnapshotId,
    &'a str,
    ClaimStatus,
    &'a [MessageId],
    &'a str,
    &'a Option<ClaimId>,
    ClaimStatus,
);
type ClaimIn = (
    ClaimId,
    SnapshotId,
    String,
    ClaimStatus,
    Vec<MessageId>,
    String,
    Option<ClaimId>,
    ClaimStatus,
);

/// A trajectory: id, snapshots, the trajectory it continues, summary, signals.
type TrajectoryOut<'a> = (
    &'a TrajectoryId,
    &'a [SnapshotId],
    &'a Option<TrajectoryId>,
    &'a str,
    &'a Signals,
);
type TrajectoryIn = (
    TrajectoryId,
    Vec<SnapshotId>,
    Option<TrajectoryId>,
    String,
    Signals,
);

/// A BM25 index: k1, b, document lengths, postings by term.
type Bm25Out<'a> = (f32, f32, &'a [u32], Vec<(u32, &'a [(u32, u32)])>);
type Bm25In = (f32, f32, Vec<u32>, Vec<(u32, Vec<(u32, u32)>)>);

/// f16 rows written as their little-endian bytes.
struct RowsOut<'a>(&'a [f16]);

impl Serialize for RowsOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let bytes: Vec<u8> = self.0.iter().flat_map(|v| v.to_le_bytes()).collect();
        s.serialize_bytes(&bytes)
    }
}

/// f16 rows read back from [`RowsOut`]'s bytes.
struct RowsIn(Vec<f16>);

impl<'de> Deserialize<'de> for RowsIn {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Bytes;
        impl<'de> Visitor<'de> for Bytes {
            type Value = RowsIn;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("the bytes of f16 rows")
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<RowsIn, E> {
                if !v.len().is_multiple_of(2) {
                    return Err(E::custom("an odd number of bytes for f16 rows"));
                }
                Ok(RowsIn(
                    v.chunks_exact(2)
                        .map(|b| f16::from_le_bytes([b[0], b[1]]))
                        .collect(),
                ))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RowsIn, A::Error> {
                let mut bytes = Vec::new();
                while let Some(b) = seq.next_element::<u8>()? {
                    bytes.push(b);
                }
                self.visit_bytes(&bytes)
            }
        }
        d.deserialize_bytes(Bytes)
    }
}

/// What is stored of an index beside its records, borrowed from it.
#[derive(Serialize)]
struct Out<'a> {
    entity_min_count: u64,
    dim: u64,
    snapshot_rows: RowsOut<'a>,
    trajectory_rows: RowsOut<'a>,
    page_rows: RowsOut<'a>,
    routed_pages: &'a [usize],
    page_trajs: &'a [Vec<usize>],
    traj_snaps: &'a [Vec<usize>],
    snap_traj: &'a [usize],
    snap_msgs: &'a [Vec<usize>],
    entity_trajectories: Vec<(&'a str, &'a [u32])>,
    vocab_terms: Vec<&'a str>,
    vocab_uses: &'a [u32],
    msg_terms: &'a [Vec<u32>],
    traj_terms: &'a [Vec<u32>],
    page_terms: &'a [Vec<u32>],
    bm25: [Bm25Out<'a>; 4],
    lexicon: &'a Lexicon,
    lexicon_stats: &'a LexiconStats,
    unbuilt: u64,
    update_links: &'a [Vec<usize>],
    superseded: &'a [Vec<Superseded>],
    session_of: &'a [u32],
    speaker_of: &'a [String],
    families_of: &'a [u64],
    lines: &'a [(String, usize)],
    base_len: &'a [(usize, usize)],
    revised_by: Vec<(&'a ClaimId, u32)>,
    msg_snaps: &'a [Vec<usize>],
    msg_claims: &'a [Vec<usize>],
    restatements: &'a [(ClaimId, MessageId)],
}

/// [`Out`] read back: the same fields, owned.
#[derive(Deserialize)]
struct In {
    entity_min_count: u64,
    dim: u64,
    snapshot_rows: RowsIn,
    trajectory_rows: RowsIn,
    page_rows: RowsIn,
    routed_pages: Vec<usize>,
    page_trajs: Vec<Vec<usize>>,
    traj_snaps: Vec<Vec<usize>>,
    snap_traj: Vec<usize>,
    snap_msgs: Vec<Vec<usize>>,
    entity_trajectories: Vec<(String, Vec<u32>)>,
    vocab_terms: Vec<String>,
    vocab_uses: Vec<u32>,
    msg_terms: Vec<Vec<u32>>,
    traj_terms: Vec<Vec<u32>>,
    page_terms: Vec<Vec<u32>>,
    bm25: [Bm25In; 4],
    lexicon: Lexicon,
    lexicon_stats: LexiconStats,
    unbuilt: u64,
    update_links: Vec<Vec<usize>>,
    superseded: Vec<Vec<Superseded>>,
    session_of: Vec<u32>,
    speaker_of: Vec<String>,
    families_of: Vec<u64>,
    lines: Vec<(String, usize)>,
    base_len: Vec<(usize, usize)>,
    revised_by: Vec<(ClaimId, u32)>,
    msg_snaps: Vec<Vec<usize>>,
    msg_claims: Vec<Vec<usize>>,
    restatements: Vec<(ClaimId, MessageId)>,
}

fn bm25_out(b: &Bm25Index) -> Bm25Out<'_> {
    let p = b.params();
    (p.k1, p.b, b.doc_lens(), b.postings().collect())
}

fn bm25_in((k1, b, doc_len, postings): Bm25In) -> Result<Bm25Index, IndexError> {
    Ok(Bm25Index::from_parts(
        Bm25Params { k1, b },
        doc_len,
        postings,
    )?)
}

impl Index {
    /// The index as stored (see the [module documentation](self)), appended to `out`: all but
    /// the message vectors. The lexicon's counts are `derived`'s when it kept them for these
    /// messages, else counted now.
    pub fn store_into(&self, derived: &Derived, out: &mut Vec<u8>) -> Result<(), IndexError> {
        let r = &self.records;
        let counted;
        let lexicon_stats = match derived.lexicon_stats(&r.messages, r.entity_min_count) {
            Some(stats) => stats,
            None => {
                let mut stats = LexiconStats::default();
                for m in &r.messages {
                    stats.add(m, r.entity_min_count);
                }
                counted = stats;
                &counted
            }
        };
        let mut entity_trajectories: Vec<(&str, &[u32])> = self
            .entity_trajectories
            .iter()
            .map(|(e, ts)| (e.as_str(), ts.as_slice()))
            .collect();
        entity_trajectories.sort_unstable();
        let (terms, uses) = self.vocab.parts();
        let v = &self.vectors;
        let messages: Vec<MessageOut<'_>> = r
            .messages
            .iter()
            .map(|m| {
                (
                    &m.id,
                    m.session,
                    m.seq,
                    m.speaker.as_str(),
                    m.text.as_str(),
                    when(&m.timestamp),
                    m.attachments
                        .iter()
                        .map(|a| (a.kind.as_str(), &a.caption, &a.url))
                        .collect(),
                    &m.external_ref,
                )
            })
            .collect();
        let trajectories: Vec<TrajectoryOut<'_>> = r
            .trajectories
            .iter()
            .map(|t| {
                (
                    &t.id,
                    t.snapshot_ids.as_slice(),
                    &t.continues,
                    t.summary.as_str(),
                    &t.signals,
                )
            })
            .collect();
        let claims: Vec<ClaimOut<'_>> = r
            .claims
            .iter()
            .map(|(c, status)| {
                (
                    &c.id,
                    &c.snapshot,
                    c.text.as_str(),
                    c.status,
                    c.source_message_ids.as_slice(),
                    c.quote.as_str(),
                    &c.revised_from,
                    *status,
                )
            })
            .collect();
        let wire = Out {
            entity_min_count: r.entity_min_count as u64,
            dim: self.dim as u64,
            snapshot_rows: RowsOut(&v.snapshots.data),
            trajectory_rows: RowsOut(&v.trajectories.data),
            page_rows: RowsOut(&v.pages.data),
            routed_pages: &self.pages,
            page_trajs: &self.page_trajs,
            traj_snaps: &self.traj_snaps,
            snap_traj: &self.snap_traj,
            snap_msgs: &self.snap_msgs,
            entity_trajectories,
            vocab_terms: terms.iter().map(|t| &**t).collect(),
            vocab_uses: uses,
            msg_terms: &self.msg_terms,
            traj_terms: &self.traj_terms,
            page_terms: &self.page_terms,
            bm25: [
                bm25_out(&self.msg_bm25),
                bm25_out(&self.snap_bm25),
                bm25_out(&self.traj_bm25),
                bm25_out(&self.page_bm25),
            ],
            lexicon: &self.lexicon,
            lexicon_stats,
            unbuilt: self.unbuilt as u64,
            update_links: &self.update_links,
            superseded: &self.superseded,
            session_of: &self.session_of,
            speaker_of: &self.speaker_of,
            families_of: &self.families_of,
            lines: &self.lines,
            base_len: &self.base_len,
            revised_by: self.revised_by.iter().map(|(c, &i)| (c, i)).collect(),
            msg_snaps: &self.msg_snaps,
            msg_claims: &self.msg_claims,
            restatements: &r.restatements,
        };
        // Sections, each with its length, so that a reader decodes them side by side.
        let sections = [
            postcard::to_allocvec(&messages),
            postcard::to_allocvec(&r.snapshots),
            postcard::to_allocvec(&claims),
            postcard::to_allocvec(&(&trajectories, &r.pages)),
            postcard::to_allocvec(&wire),
        ];
        for section in sections {
            let bytes = section.map_err(|e| stored(format!("encoding: {e}")))?;
            out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
            out.extend_from_slice(&bytes);
        }
        Ok(())
    }
}

/// The sections of a stored index: messages, snapshots, claims, trajectories and pages, the
/// rest.
const SECTIONS: usize = 5;

/// A section decoded whole: nothing may follow its value.
fn whole<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, IndexError> {
    let (value, rest) =
        postcard::take_from_bytes(bytes).map_err(|e| stored(format!("decoding: {e}")))?;
    if !rest.is_empty() {
        return Err(stored(format!("{} bytes past a section", rest.len())));
    }
    Ok(value)
}

fn decode_messages(bytes: &[u8], ns: &Namespace) -> Result<Vec<SourceMessage>, IndexError> {
    whole::<Vec<MessageIn>>(bytes)?
        .into_iter()
        .map(
            |(id, session, seq, speaker, text, at, attachments, external_ref)| {
                Ok(SourceMessage {
                    id,
                    namespace: ns.clone(),
                    session,
                    seq,
                    speaker,
                    text,
                    timestamp: timestamp(at)?,
                    attachments: attachments
                        .into_iter()
                        .map(|(kind, caption, url)| Attachment { kind, caption, url })
                        .collect(),
                    external_ref,
                })
            },
        )
        .collect()
}

fn decode_claims(bytes: &[u8], ns: &Namespace) -> Result<Vec<(Claim, ClaimStatus)>, IndexError> {
    Ok(whole::<Vec<ClaimIn>>(bytes)?
        .into_iter()
        .map(
            |(id, snapshot, text, status, source_message_ids, quote, revised_from, now)| {
                let claim = Claim {
                    id,
                    namespace: ns.clone(),
                    snapshot,
                    text,
                    status,
                    source_message_ids,
                    quote,
                    revised_from,
                };
                (claim, now)
            },
        )
        .collect())
}

fn decode_trajectories_and_pages(
    bytes: &[u8],
    ns: &Namespace,
) -> Result<(Vec<Trajectory>, Vec<WikiPage>), IndexError> {
    let (trajectories, pages) = whole::<(Vec<TrajectoryIn>, Vec<WikiPage>)>(bytes)?;
    let trajectories = trajectories
        .into_iter()
        .map(
            |(id, snapshot_ids, continues, summary, signals)| Trajectory {
                id,
                namespace: ns.clone(),
                snapshot_ids,
                continues,
                summary,
                signals,
            },
        )
        .collect();
    Ok((trajectories, pages))
}

/// An index read back from storage ([`Index::store_into`]), waiting for its message vectors.
pub struct StoredIndex {
    records: NamespaceRecords,
    rest: In,
}

impl StoredIndex {
    /// Reads a stored index of namespace `ns` from the front of `bytes`; returns it and the
    /// bytes after it.
    pub fn decode<'b>(bytes: &'b [u8], ns: &Namespace) -> Result<(Self, &'b [u8]), IndexError> {
        let mut sections: [&[u8]; SECTIONS] = [&[]; SECTIONS];
        let mut after = bytes;
        for section in &mut sections {
            let (len, rest) = after
                .split_first_chunk::<8>()
                .ok_or_else(|| stored("cut short before a section's length"))?;
            let len = usize::try_from(u64::from_le_bytes(*len))
                .ok()
                .filter(|&l| l <= rest.len())
                .ok_or_else(|| stored("a section runs past the end"))?;
            (*section, after) = rest.split_at(len);
        }
        let [messages, snapshots, claims, trajectories, rest] = sections;
        // The sections are read side by side, the longest (the rest, then the snapshots) first,
        // so that the last to start are short.
        let (rest, ((snapshots, messages), (trajectories, claims))) = rayon::join(
            || whole::<In>(rest),
            || {
                rayon::join(
                    || {
                        rayon::join(
                            || whole::<Vec<Snapshot>>(snapshots),
                            || decode_messages(messages, ns),
                        )
                    },
                    || {
                        rayon::join(
                            || decode_trajectories_and_pages(trajectories, ns),
                            || decode_claims(claims, ns),
                        )
                    },
                )
            },
        );
        let (messages, snapshots, claims) = (messages?, snapshots?, claims?);
        let ((trajectories, pages), mut rest) = (trajectories?, rest?);
        let foreign = |what: &str, of: &Namespace| {
            (of != ns).then(|| stored(format!("a {what} of namespace {of} in {ns}'s index")))
        };
        if let Some(e) = snapshots
            .iter()
            .find_map(|s| foreign("snapshot", &s.namespace))
            .or_else(|| pages.iter().find_map(|p| foreign("page", &p.namespace)))
        {
            return Err(e);
        }
        let records = NamespaceRecords {
            messages,
            snapshots,
            trajectories,
            pages,
            claims,
            restatements: std::mem::take(&mut rest.restatements),
            entity_min_count: usize::try_from(rest.entity_min_count)
                .map_err(|_| stored("entity_min_count out of range"))?,
        };
        Ok((StoredIndex { records, rest }, after))
    }

    /// The messages, in the index's order.
    pub fn messages(&self) -> &[SourceMessage] {
        &self.records.messages
    }

    /// The embedding dimension the index was stored with.
    pub fn dim(&self) -> usize {
        self.rest.dim as usize
    }

    /// The index, with `messages` as its message vectors (one per message, in the index's
    /// order, as the load that stored it had them). `derived` takes the lexicon's counts, so
    /// that the index takes appends in place as a loaded one does. Parts that do not fit one
    /// another (lengths, positions out of range) are [`IndexError::Stored`].
    pub fn into_index(
        self,
        messages: MessageVectors,
        derived: &mut Derived,
    ) -> Result<Index, IndexError> {
        let StoredIndex { records, rest: r } = self;
        let dim = r.dim as usize;
        let n = records.messages.len();
        let (snapshots, trajectories) = (records.snapshots.len(), records.trajectories.len());
        let (claims, routed) = (records.claims.len(), r.routed_pages.len());
        let lengths = [
            ("message vectors", messages.len(), n),
            ("message terms", r.msg_terms.len(), n),
            ("sessions", r.session_of.len(), n),
            ("speakers", r.speaker_of.len(), n),
            ("item families", r.families_of.len(), n),
            ("lines", r.lines.len(), n),
            ("line lengths", r.base_len.len(), n),
            ("superseded statements", r.superseded.len(), n),
            ("message snapshots", r.msg_snaps.len(), n),
            ("message claims", r.msg_claims.len(), n),
            ("snapshot messages", r.snap_msgs.len(), snapshots),
            ("snapshot trajectories", r.snap_traj.len(), snapshots),
            ("update links", r.update_links.len(), snapshots),
            ("trajectory snapshots", r.traj_snaps.len(), trajectories),
            ("trajectory terms", r.traj_terms.len(), trajectories),
            ("page trajectories", r.page_trajs.len(), routed),
            ("page terms", r.page_terms.len(), routed),
            ("snapshot rows", r.snapshot_rows.0.len(), snapshots * dim),
            (
                "trajectory rows",
                r.trajectory_rows.0.len(),
                trajectories * dim,
            ),
            ("page rows", r.page_rows.0.len(), routed * dim),
            ("message BM25 documents", r.bm25[0].2.len(), n),
            ("snapshot BM25 documents", r.bm25[1].2.len(), snapshots),
            ("trajectory BM25 documents", r.bm25[2].2.len(), trajectories),
            ("page BM25 documents", r.bm25[3].2.len(), routed),
        ];
        if let Some((what, got, want)) = lengths.iter().find(|(_, got, want)| got != want) {
            return Err(stored(format!("{got} {what} for {want}")));
        }
        if !messages.is_empty() && dim == 0 {
            return Err(stored("dimension 0"));
        }
        let in_range = |lists: &[Vec<usize>], len: usize| lists.iter().flatten().all(|&i| i < len);
        let positions = [
            ("page trajectories", in_range(&r.page_trajs, trajectories)),
            ("trajectory snapshots", in_range(&r.traj_snaps, snapshots)),
            ("snapshot messages", in_range(&r.snap_msgs, n)),
            ("update links", in_range(&r.update_links, snapshots)),
            ("message snapshots", in_range(&r.msg_snaps, snapshots)),
            ("message claims", in_range(&r.msg_claims, claims)),
            (
                "snapshot trajectories",
                r.snap_traj.iter().all(|&t| t < trajectories),
            ),
            (
                "routed pages",
                r.routed_pages.iter().all(|&p| p < records.pages.len()),
            ),
            (
                "entity trajectories",
                r.entity_trajectories
                    .iter()
                    .flat_map(|(_, ts)| ts)
                    .all(|&t| (t as usize) < trajectories),
            ),
            (
                "revised claims",
                r.revised_by.iter().all(|&(_, c)| (c as usize) < claims),
            ),
            (
                "terms",
                r.msg_terms
                    .iter()
                    .chain(&r.traj_terms)
                    .chain(&r.page_terms)
                    .flatten()
                    .all(|&t| (t as usize) < r.vocab_terms.len()),
            ),
        ];
        if let Some((what, _)) = positions.iter().find(|(_, ok)| !ok) {
            return Err(stored(format!("{what} point past the records")));
        }
        let [msg, snap, traj, page] = r.bm25;
        let (ids, (vocab, bm25)) = rayon::join(
            || Ids::of(&records),
            || {
                let bm25 = [msg, snap, traj, page].map(bm25_in);
                (Vocab::from_parts(r.vocab_terms, r.vocab_uses), bm25)
            },
        );
        let vocab = vocab.ok_or_else(|| stored("the vocabulary's terms and uses do not match"))?;
        let [msg_bm25, snap_bm25, traj_bm25, page_bm25] = bm25;
        let vectors = Vectors {
            messages,
            snapshots: Rows::new(r.snapshot_rows.0, dim)?,
            trajectories: Rows::new(r.trajectory_rows.0, dim)?,
            pages: Rows::new(r.page_rows.0, dim)?,
        };
        derived.keep_lexicon(&records.messages, records.entity_min_count, r.lexicon_stats);
        let mut restated_in = FxHashMap::default();
        for (c, m) in &records.restatements {
            let (Some(ci), Some(mi)) = (ids.claim(c), ids.message(m)) else {
                return Err(stored(format!(
                    "a restatement of {c} in {m}, past the records"
                )));
            };
            add_restated(&mut restated_in, mi, ci);
        }
        Ok(Index {
            dim,
            vectors,
            pages: r.routed_pages,
            page_trajs: r.page_trajs,
            traj_snaps: r.traj_snaps,
            snap_traj: r.snap_traj,
            snap_msgs: r.snap_msgs,
            entity_trajectories: r.entity_trajectories.into_iter().collect(),
            vocab,
            msg_terms: r.msg_terms,
            traj_terms: r.traj_terms,
            page_terms: r.page_terms,
            msg_bm25: msg_bm25?,
            snap_bm25: snap_bm25?,
            traj_bm25: traj_bm25?,
            page_bm25: page_bm25?,
            lexicon: r.lexicon,
            unbuilt: r.unbuilt as usize,
            update_links: r.update_links,
            superseded: r.superseded,
            session_of: r.session_of,
            speaker_of: r.speaker_of,
            families_of: r.families_of,
            lines: r.lines,
            base_len: r.base_len,
            ids,
            revised_by: r.revised_by.into_iter().collect(),
            msg_snaps: r.msg_snaps,
            msg_claims: r.msg_claims,
            restated_in,
            records,
        })
    }
}
