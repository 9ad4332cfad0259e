//! The glue between store, embedder and memory construction: embedding with the store's cache,
//! building a namespace and committing it in one transaction.

use trajwiki_core::{EmbedError, EmbedKind, Embedder, Namespace};
use trajwiki_memory::{
    build, BuildError, BuildReport, Builders, BuiltMemory, DeterministicDecider,
    DeterministicExtractor, DeterministicJudge, MemoryConfig,
};
use trajwiki_store::{MemoryBatch, Store, StoreError};

/// A failure of [`build_namespace`].
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Construction failed.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// The retrieval index could not be built.
    #[error(transparent)]
    Index(Box<trajwiki_retrieve::IndexError>),
    /// The namespace has no messages.
    #[error("namespace {0} has no messages to build from (ingest a conversation first)")]
    Empty(Namespace),
    /// The namespace was built before from other messages or another configuration.
    #[error("namespace {namespace} already holds a memory built differently ({detail}); rebuild it with `trajwiki build --rebuild`")]
    Stale {
        /// The namespace.
        namespace: Namespace,
        /// The conflict found.
        detail: String,
    },
}

/// Embeds texts as documents through the store's cache: cached vectors are reused, the rest is
/// embedded in one batch and cached. Returns the rows and how many were computed.
pub fn embed_cached(
    store: &mut Store,
    embedder: &dyn Embedder,
    texts: &[&str],
) -> Result<(Vec<Vec<f32>>, usize), PipelineError> {
    let model = embedder.model_id().to_string();
    let dim = embedder.dim();
    let hashes: Vec<String> = texts.iter().map(|t| trajwiki_core::text_hash(t)).collect();
    let hash_refs: Vec<&str> = hashes.iter().map(String::as_str).collect();
    let mut rows = store.cached_embeddings(&model, dim, &hash_refs)?;
    let missing: Vec<usize> = (0..texts.len()).filter(|&i| rows[i].is_none()).collect();
    if !missing.is_empty() {
        // Unique texts only.
        let mut unique: Vec<usize> = Vec::new();
        let mut seen = std::collections::HashMap::new();
        for &i in &missing {
            seen.entry(hashes[i].as_str()).or_insert_with(|| {
                unique.push(i);
                unique.len() - 1
            });
        }
        let batch: Vec<&str> = unique.iter().map(|&i| texts[i]).collect();
        let vectors = embedder
            .embed(&batch, EmbedKind::Document)
            .map_err(|source| BuildError::Embed {
                stage: "documents",
                source,
            })?;
        if vectors.len() != batch.len() || vectors.dim() != dim {
            return Err(BuildError::Embed {
                stage: "documents",
                source: EmbedError::WrongDimension {
                    expected: dim,
                    got: vectors.dim(),
                },
            }
            .into());
        }
        let items: Vec<(&str, &[f32])> = unique
            .iter()
            .zip(vectors.rows())
            .map(|(&i, v)| (hashes[i].as_str(), v))
            .collect();
        store.put_embeddings(&model, dim, &items)?;
        for &i in &missing {
            let k = seen[hashes[i].as_str()];
            rows[i] = Some(vectors.row(k).to_vec());
        }
        return Ok((
            rows.into_iter().map(|r| r.expect("filled")).collect(),
            unique.len(),
        ));
    }
    Ok((rows.into_iter().map(|r| r.expect("cached")).collect(), 0))
}

/// Builds the memory of `ns` from its stored messages with the deterministic builders and commits
/// it in one transaction. With `rebuild`, the namespace's derived memory is cleared first (in the
/// same way a fresh store would start); without it, a memory built differently before is an error.
pub fn build_namespace(
    store: &mut Store,
    ns: &Namespace,
    embedder: &dyn Embedder,
    config: &MemoryConfig,
    rebuild: bool,
) -> Result<(BuiltMemory, BuildReport), PipelineError> {
    let messages = store.messages(ns)?;
    if messages.is_empty() {
        return Err(PipelineError::Empty(ns.clone()));
    }
    let extractor = DeterministicExtractor::new(config.clone());
    let decider = DeterministicDecider::new(config.clone());
    let judge = DeterministicJudge::new(config.clone());
    let builders = Builders {
        config,
        extractor: &extractor,
        decider: &decider,
        judge: &judge,
    };
    let mut computed = 0;
    let built = {
        let mut embed = |texts: &[&str]| -> Result<Vec<Vec<f32>>, EmbedError> {
            match embed_cached(store, embedder, texts) {
                Ok((rows, n)) => {
                    computed += n;
                    Ok(rows)
                }
                Err(PipelineError::Build(BuildError::Embed { source, .. })) => Err(source),
                Err(e) => Err(EmbedError::Backend {
                    stage: "embedding cache",
                    source: Box::new(e),
                }),
            }
        };
        build(&messages, &mut embed, &builders)?
    };
    let batch = MemoryBatch {
        namespace: ns.clone(),
        trajectories: built.trajectories.clone(),
        snapshots: built.snapshots.clone(),
        claims: built.claims.clone(),
        ops: built.ops.clone(),
        pages: Some(built.pages.clone()),
        replace: rebuild,
    };
    match store.commit_memory(&batch) {
        Ok(()) => {}
        Err(StoreError::Conflict { kind, id, .. }) if !rebuild => {
            return Err(PipelineError::Stale {
                namespace: ns.clone(),
                detail: format!("{kind} {id} differs"),
            });
        }
        Err(e) => return Err(e.into()),
    }
    let mut report = built.report.clone();
    report.embedded_texts = computed;
    Ok((built, report))
}
