//! A search of a namespace: its index loaded or updated, the ranking, the context and its
//! evidence with provenance.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use serde::Serialize;
use std::sync::PoisonError;
use trajwiki_compute::ScoringBackend;
use trajwiki_core::{
    ClaimId, ClaimStatus, Embedder, Namespace, SnapshotId, SourceMessage, TrajectoryId,
};
use trajwiki_retrieve::{Context, Derived, Index, Mode, Ranking, RetrievalConfig};
use trajwiki_store::{Cursor, Store};

use crate::load::load_index;
use crate::retrieval::{
    embed_query, update_index as update_index_in_place, Earlier, Held, Updated,
};

use super::*;

/// A claim a piece of evidence supports.
#[derive(Debug, Clone, Serialize)]
pub struct EvidenceClaim {
    /// The claim.
    pub id: ClaimId,
    /// Its text.
    pub text: String,
    /// Its current status.
    pub status: ClaimStatus,
}

/// One source message of a context, with the memory records it belongs to.
#[derive(Debug, Clone, Serialize)]
pub struct Evidence {
    /// The ref the context cites it by (its external ref, else its id).
    #[serde(rename = "ref")]
    pub source_ref: String,
    /// The message.
    pub message: SourceMessage,
    /// The snapshot that holds it (a selected one when several do).
    pub snapshot: Option<SnapshotId>,
    /// That snapshot's trajectory.
    pub trajectory: Option<TrajectoryId>,
    /// The claims grounded in it.
    pub claims: Vec<EvidenceClaim>,
}

/// Where the time of a search went, in milliseconds.
#[derive(Debug, Clone, Serialize)]
pub struct SearchTimings {
    /// Reading the records and building the index.
    pub index_load: f64,
    /// The same, by stage: messages, vectors, records, index.
    pub index_load_stages: BTreeMap<String, f64>,
    /// Embedding the question.
    pub query_embedding: f64,
    /// The ranking stages.
    pub stages: BTreeMap<String, f64>,
    /// Packing and rendering the context.
    pub render: f64,
}

/// The answer to [`search`]: the context, its evidence and the retrieval path.
#[derive(Debug, Clone, Serialize)]
pub struct Search {
    /// The question.
    pub question: String,
    /// The budget, in whitespace tokens.
    pub budget: usize,
    /// The rendered context.
    pub context: Context,
    /// The context's source messages, in order of appearance.
    pub evidence: Vec<Evidence>,
    /// How the messages were reached: pages, trajectories, snapshots, shape, universe.
    pub ranking: Ranking,
    /// Timings.
    pub timings: SearchTimings,
    /// Texts that had to be embedded to load the index (not in the cache).
    pub embedded_on_load: usize,
    /// Messages of the namespace not built yet (found through the direct turn routes only).
    pub unbuilt_messages: usize,
}

/// One question to a namespace.
#[derive(Debug, Clone, Copy)]
pub struct Query<'a> {
    /// The question.
    pub question: &'a str,
    /// The retrieval mode.
    pub mode: Mode,
    /// The context budget, in whitespace tokens.
    pub budget: usize,
    /// The retrieval constants.
    pub config: &'a RetrievalConfig,
}

/// A namespace's retrieval index, read from the store once and searched any number of times.
pub struct LoadedIndex {
    /// The index.
    pub index: Index,
    /// What the load derived from single records, for the next load of the namespace to reuse
    /// (see [`Derived`]): taken by [`reopen_index`].
    pub derived: std::sync::Mutex<Derived>,
    /// Each message's ingest position, in the index's order.
    pub rowids: Vec<i64>,
    /// The state of the namespace the index was read at: the next load reads what changed
    /// since.
    pub cursor: Cursor,
    /// Milliseconds spent reading the records and building the index.
    pub load_ms: f64,
    /// The same, by stage (see [`crate::retrieval::Loaded::stages`]).
    pub load_stages: BTreeMap<String, f64>,
    /// Texts that had to be embedded to build it (not in the embedding cache).
    pub embedded_on_load: usize,
    /// Approximate heap bytes (see [`LoadedIndex::fitted_bytes`]).
    bytes: usize,
}

/// Loads the retrieval index of a built namespace, to be searched and dropped (what the load
/// derives is not kept for another).
pub fn open_index(
    store: &Store,
    ns: &Namespace,
    embedder: &dyn Embedder,
) -> Result<LoadedIndex, ApiError> {
    load(store, ns, embedder, Derived::transient(), None)
}

/// Loads the retrieval index of a namespace whose index is kept and loaded again after each
/// write (a server's, a Python `Memory`'s): `earlier`, the namespace's previous load, gives its
/// records, to which only what changed since is read and merged
/// ([`trajwiki_store::Store::namespace_changes`]), and what it derived from single records,
/// which is taken and reused, so that the load after an append derives the new and changed
/// records only; what this load derives is kept in the result for the next.
pub fn reopen_index(
    store: &Store,
    ns: &Namespace,
    embedder: &dyn Embedder,
    earlier: Option<&LoadedIndex>,
) -> Result<LoadedIndex, ApiError> {
    let derived = earlier
        .map(|e| std::mem::take(&mut *e.derived.lock().unwrap_or_else(PoisonError::into_inner)))
        .unwrap_or_default();
    let earlier = earlier.map(|e| Earlier {
        records: &e.index.records,
        rowids: &e.rowids,
        cursor: &e.cursor,
    });
    load(store, ns, embedder, derived, earlier)
}

/// Applies what changed in `ns` since `held` was loaded (or last updated) to it in place (see
/// [`crate::retrieval::update_index`]); `false`, `held` unchanged, when it cannot take the
/// change (a backfill, a rebuild): the namespace is then loaded again. On an error `held` is to
/// be dropped.
pub fn update_index(
    store: &Store,
    ns: &Namespace,
    embedder: &dyn Embedder,
    held: &mut LoadedIndex,
) -> Result<bool, ApiError> {
    let t0 = Instant::now();
    let derived = held
        .derived
        .get_mut()
        .unwrap_or_else(PoisonError::into_inner);
    let updated = update_index_in_place(
        store,
        ns,
        embedder,
        Held {
            index: &mut held.index,
            rowids: &mut held.rowids,
            cursor: &mut held.cursor,
            derived,
        },
    )?;
    match updated {
        Updated::InPlace {
            stages,
            embedded,
            grown,
        } => {
            held.bytes += grown;
            held.load_ms = t0.elapsed().as_secs_f64() * 1000.0;
            held.load_stages = stages;
            held.embedded_on_load = embedded;
            Ok(true)
        }
        Updated::Refused(_) => Ok(false),
    }
}

impl LoadedIndex {
    /// With its bytes counted.
    fn counted(mut self) -> Self {
        self.bytes = self.heap_bytes();
        self
    }

    /// Its approximate heap bytes once it fits in `capacity` bytes: what it keeps for the next
    /// load is let go of when the index fits only without it — first what it keeps per record
    /// and text (the index still takes its namespace's changes in place), then all of it (a
    /// reload then derives every record again, as a cold one does) — but the index is kept and
    /// its searches stay warm. The bytes are counted once per load and grown by each change
    /// taken in place, not counted again.
    pub fn fitted_bytes(&mut self, capacity: usize) -> usize {
        if self.bytes <= capacity {
            return self.bytes;
        }
        let derived = self
            .derived
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        derived.shed();
        self.bytes = self.heap_bytes();
        if self.bytes > capacity {
            let derived = std::mem::take(
                self.derived
                    .get_mut()
                    .unwrap_or_else(PoisonError::into_inner),
            );
            crate::cache::drop_later(derived);
            self.bytes = self.heap_bytes();
        }
        self.bytes
    }

    /// Approximate heap bytes: the index's and what it keeps for the next load.
    pub fn heap_bytes(&self) -> usize {
        self.index.heap_bytes()
            + self
                .derived
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .heap_bytes()
    }
}

fn load(
    store: &Store,
    ns: &Namespace,
    embedder: &dyn Embedder,
    mut derived: Derived,
    earlier: Option<Earlier<'_>>,
) -> Result<LoadedIndex, ApiError> {
    if store.namespace_counts(ns)?.0 == 0 {
        return Err(ApiError::UnknownNamespace {
            namespace: ns.clone(),
            store: store.dir().to_path_buf(),
        });
    }
    // Built once is enough: what arrived since (or waits for its reply) is reached through the
    // direct turn routes, and the answer says how much that is.
    if store.built_with(ns)?.is_none() && store.pages(ns)?.is_empty() {
        return Err(ApiError::NotBuilt(ns.clone()));
    }
    let t0 = Instant::now();
    let loaded = load_index(store, ns, embedder, &mut derived, earlier)?;
    Ok(LoadedIndex {
        index: loaded.index,
        derived: std::sync::Mutex::new(derived),
        rowids: loaded.rowids,
        cursor: loaded.cursor,
        load_ms: t0.elapsed().as_secs_f64() * 1000.0,
        load_stages: loaded.stages,
        embedded_on_load: loaded.embedded,
        bytes: 0,
    }
    .counted())
}

/// Answers a question from a built namespace: a context of at most `budget` whitespace tokens,
/// each of its source messages with its snapshot, trajectory and claims, and the retrieval path.
/// Loads the index first; [`search_index`] answers from one already loaded.
pub fn search(
    store: &Store,
    ns: &Namespace,
    embedder: &dyn Embedder,
    query: &Query<'_>,
    backend: &dyn ScoringBackend,
) -> Result<Search, ApiError> {
    let loaded = open_index(store, ns, embedder)?;
    search_index(&loaded, true, embedder, query, backend)
}

/// [`search`] on a loaded index. `loaded_now` says whether the index was loaded for this search:
/// its load time and embedded texts are then reported in the answer, else they are zero.
/// `embedder` must be the model the index was loaded with.
pub fn search_index(
    loaded: &LoadedIndex,
    loaded_now: bool,
    embedder: &dyn Embedder,
    query: &Query<'_>,
    backend: &dyn ScoringBackend,
) -> Result<Search, ApiError> {
    search_index_reranked(loaded, loaded_now, embedder, query, backend, &|_, _| None)
}

/// [`search_index`] with the routed pages and the selected trajectories reordered by `rerank`
/// (see `trajwiki_retrieve::Index::rank_reranked`).
pub fn search_index_reranked(
    loaded: &LoadedIndex,
    loaded_now: bool,
    embedder: &dyn Embedder,
    query: &Query<'_>,
    backend: &dyn ScoringBackend,
    rerank: &trajwiki_retrieve::Rerank<'_>,
) -> Result<Search, ApiError> {
    let index = &loaded.index;
    let Query {
        question,
        mode,
        budget,
        config,
    } = *query;
    trajwiki_core::limits::QUESTION_BYTES.check(question.len())?;
    let (qvec, query_embedding) = embed_query(embedder, question)?;
    let ranking = index.rank_reranked(question, &qvec, mode, config, backend, rerank)?;
    let t1 = Instant::now();
    let context = index.render(&ranking, budget);
    let render = t1.elapsed().as_secs_f64() * 1000.0;

    // Only the context's messages are looked at: the maps from a message to its snapshots and
    // claims were built with the index.
    let records = &index.records;
    let selected: BTreeSet<&str> = ranking.snapshots.iter().map(|s| s.id.as_str()).collect();
    let evidence = context
        .source_refs
        .iter()
        .zip(&context.messages)
        .map(|(r, &i)| {
            let held_by = index.snapshots_of(i);
            let snapshot = held_by
                .iter()
                .find(|&&s| selected.contains(records.snapshots[s].id.as_str()))
                .or(held_by.first())
                .map(|&s| &records.snapshots[s]);
            Evidence {
                source_ref: r.clone(),
                message: records.messages[i].clone(),
                snapshot: snapshot.map(|s| s.id.clone()),
                trajectory: snapshot.map(|s| s.trajectory.clone()),
                claims: index
                    .claims_of(i)
                    .iter()
                    .map(|&c| {
                        let (claim, status) = &records.claims[c];
                        EvidenceClaim {
                            id: claim.id.clone(),
                            text: claim.text.clone(),
                            status: *status,
                        }
                    })
                    .collect(),
            }
        })
        .collect();
    let stages = ranking.timings.clone();
    Ok(Search {
        question: question.to_string(),
        budget,
        context,
        evidence,
        ranking,
        timings: SearchTimings {
            index_load: if loaded_now { loaded.load_ms } else { 0.0 },
            index_load_stages: if loaded_now {
                loaded.load_stages.clone()
            } else {
                BTreeMap::new()
            },
            query_embedding,
            stages,
            render,
        },
        embedded_on_load: if loaded_now {
            loaded.embedded_on_load
        } else {
            0
        },
        unbuilt_messages: index.unbuilt,
    })
}
