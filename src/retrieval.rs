//! Retrieval over a store: loading a namespace's index (embeddings through the store's cache)
//! and answering questions with a context under a budget.

use std::time::Instant;

use trajwiki_core::{EmbedKind, Embedder, Namespace};
use trajwiki_retrieve::{Index, LevelVectors, NamespaceRecords};
use trajwiki_store::Store;

use crate::pipeline::{embed_cached, PipelineError};

/// Reads a namespace's records and builds its retrieval index, embedding what the cache lacks.
/// Returns the index and how many texts had to be embedded.
pub fn load_index(
    store: &mut Store,
    ns: &Namespace,
    embedder: &dyn Embedder,
) -> Result<(Index, usize), PipelineError> {
    let messages = store.messages(ns)?;
    if messages.is_empty() {
        return Err(PipelineError::Empty(ns.clone()));
    }
    // One configuration: the build's model and settings apply at query time.
    let config: trajwiki_memory::MemoryConfig = match store.built_with(ns)? {
        Some((model_id, config)) => {
            if model_id != embedder.model_id() {
                return Err(PipelineError::ModelMismatch {
                    namespace: ns.clone(),
                    built: model_id,
                    asked: embedder.model_id().to_string(),
                });
            }
            serde_json::from_str(&config).map_err(|e| {
                PipelineError::Store(trajwiki_store::StoreError::Corrupt {
                    table: "memory_builds",
                    column: "config",
                    id: ns.to_string(),
                    reason: e.to_string(),
                })
            })?
        }
        None => trajwiki_memory::MemoryConfig::default(),
    };
    let mut claims = Vec::new();
    for c in store.claims(ns)? {
        let status = store.claim_status(&c.id)?.unwrap_or(c.status);
        claims.push((c, status));
    }
    let records = NamespaceRecords {
        messages,
        snapshots: store.snapshots(ns)?,
        trajectories: store.trajectories(ns)?,
        pages: store.pages(ns)?,
        claims,
        entity_min_count: config.entity_min_count,
    };
    let texts = Index::level_texts(&records);
    let mut computed = 0;
    let mut level = |t: &[String]| -> Result<Vec<f32>, PipelineError> {
        let refs: Vec<&str> = t.iter().map(String::as_str).collect();
        let (rows, n) = embed_cached(store, embedder, &refs)?;
        computed += n;
        Ok(rows.into_iter().flatten().collect())
    };
    let vectors = LevelVectors {
        dim: embedder.dim(),
        messages: level(&texts.messages)?,
        pages: level(&texts.pages)?,
    };
    let index =
        Index::new(records, vectors, &texts).map_err(|e| PipelineError::Index(Box::new(e)))?;
    Ok((index, computed))
}

/// Embeds one question as a query, returning the vector and the milliseconds it took.
pub fn embed_query(
    embedder: &dyn Embedder,
    question: &str,
) -> Result<(Vec<f32>, f64), PipelineError> {
    let t0 = Instant::now();
    let e = embedder
        .embed(&[question], EmbedKind::Query)
        .map_err(|source| trajwiki_memory::BuildError::Embed {
            stage: "query",
            source,
        })?;
    Ok((e.row(0).to_vec(), t0.elapsed().as_secs_f64() * 1000.0))
}
