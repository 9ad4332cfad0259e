//! A search and the answer written from its context.

use serde::Serialize;
use trajwiki_compute::ScoringBackend;
use trajwiki_core::Embedder;

use super::*;

/// A search and the answer written from its context.
#[derive(Debug, Clone, Serialize)]
pub struct Asked {
    /// The retrieval.
    pub search: Search,
    /// The checked answer (see [`crate::answer`]).
    pub answer: crate::answer::Answer,
}

impl Asked {
    /// As `trajwiki ask --json` prints it and `POST …/ask` answers: the question, the answer and
    /// its status, the context, its evidence and route, and the model's identity and usage.
    pub fn to_json(&self, client: Option<&trajwiki_llm::Client>) -> serde_json::Value {
        let (answer, search) = (&self.answer, &self.search);
        serde_json::json!({
            "question": search.question,
            "status": answer.status,
            "answer": answer,
            "context": search.context.text,
            "source_refs": search.context.source_refs,
            "context_tokens": search.context.tokens,
            "evidence": search.evidence,
            "pages": search.ranking.pages,
            "trajectories": search.ranking.trajectories,
            "llm": client.map(|c| serde_json::json!({
                "model": c.config().model,
                "base_url": c.config().base_url,
                "usage": c.usage(),
            })),
        })
    }
}

/// Answers a question from a loaded index: the search of [`search_index`] (its selected
/// trajectories reordered by the model first when `rerank`, one more call), then an answer from
/// its context by `client`'s model, checked (see [`crate::answer`]). Without a client the answer
/// is [`crate::answer::AnswerStatus::NoAnswerModel`] and the evidence is all there is.
pub fn ask_index(
    loaded: &LoadedIndex,
    loaded_now: bool,
    embedder: &dyn Embedder,
    query: &Query<'_>,
    backend: &dyn ScoringBackend,
    client: Option<&trajwiki_llm::Client>,
    rerank_selected: bool,
) -> Result<Asked, ApiError> {
    use crate::answer::{answer_searching, rerank, Answer, AnswerStatus, NO_MODEL};
    let Some(client) = client else {
        let search = search_index(loaded, loaded_now, embedder, query, backend)?;
        let answer = Answer::without_model(AnswerStatus::NoAnswerModel, NO_MODEL.to_string());
        return Ok(Asked { search, answer });
    };
    // The model reorders the routed pages and the selected trajectories.
    let reranker = |what, texts: &[&str]| {
        rerank_selected
            .then(|| rerank(client, query.question, what, texts))
            .flatten()
    };
    let first = search_index_reranked(loaded, loaded_now, embedder, query, backend, &reranker)?;
    let (mut search, answer) = answer_searching(
        client,
        query.question,
        query.mode,
        first,
        |s: &Search| (s.context.text.as_str(), s.context.source_refs.as_slice()),
        |question, mode| {
            let again = Query {
                question,
                mode,
                ..*query
            };
            search_index(loaded, false, embedder, &again, backend)
        },
    )?;
    // A later route searched other words for the same question.
    search.question = query.question.to_string();
    Ok(Asked { search, answer })
}
