//! What a build is asked to be ([`BuildPlan`]) and what it did ([`Built`]): the settings, a
//! language model when one drives the build, and a progress sink, in; the report and, for a
//! model-driven build, the model's usage and the places it fell back to rules, out. Every face
//! builds through [`crate::Writer::build_with`] with one of these.

use std::collections::HashMap;

use trajwiki_core::{EmbedError, EmbedKind, Embedder, Embeddings};
use trajwiki_llm::{Client, LlmConfig, UsageTable};
use trajwiki_memory::{BuildReport, MemoryConfig};

use crate::llm::extract::LlmExtractor;
use crate::llm::judge::LlmJudge;
use crate::llm::matching::LlmDecider;
use crate::llm::pages::LlmPageWriter;
use crate::pipeline::{BuildOptions, Drivers, Progress};

/// How a build is made.
#[derive(Clone, Copy)]
pub struct BuildPlan<'a> {
    /// The memory's construction settings.
    pub config: &'a MemoryConfig,
    /// Rebuild, flush, the vector file's type, the approximate index's threshold.
    pub options: BuildOptions,
    /// A language model that extracts claims, matches trajectories, judges transitions and
    /// writes pages, each validated and falling back to the rules; the rules alone without one.
    pub llm: Option<&'a LlmConfig>,
    /// Told where the build is as it goes.
    pub progress: Option<&'a (dyn Fn(Progress) + Sync)>,
}

impl<'a> BuildPlan<'a> {
    /// A deterministic build with `config` and `options`, telling nobody.
    pub fn new(config: &'a MemoryConfig, options: BuildOptions) -> Self {
        BuildPlan {
            config,
            options,
            llm: None,
            progress: None,
        }
    }
}

/// What a build did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Built {
    /// The build's report.
    pub report: BuildReport,
    /// The model's part, when a model drove the build.
    pub model: Option<ModelPart>,
}

/// A language model's part in a build.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ModelPart {
    /// The model's name.
    pub model: String,
    /// Exchanges extracted by the rules (the model unreachable or none of its claims valid).
    pub extracted_by_rules: usize,
    /// Trajectory matches left to the rules (the model unreachable or its choice invalid).
    pub matched_by_rules: usize,
    /// Pages that kept their rule-written text (the model unreachable or its page invalid).
    pub pages_by_rules: usize,
    /// Claim transitions that fell back to ADD (the model unreachable or its decision invalid).
    pub judged_by_rules: usize,
    /// Requests, cached answers and tokens, by phase.
    pub usage: UsageTable,
}

/// Runs `build` with the drivers `client`'s model makes (none without one), and returns its
/// report with the model's part.
pub(crate) fn with_drivers<E>(
    plan: &BuildPlan<'_>,
    client: Option<&Client>,
    build: impl FnOnce(Drivers<'_>) -> Result<BuildReport, E>,
) -> Result<Built, E> {
    let drivers = Drivers {
        progress: plan.progress,
        ..Drivers::default()
    };
    let Some(client) = client else {
        return Ok(Built {
            report: build(drivers)?,
            model: None,
        });
    };
    let judge = LlmJudge::new(client);
    let extractor = LlmExtractor::new(client, plan.config.clone());
    let pages = LlmPageWriter::new(client);
    let decider = LlmDecider::new(client, plan.config.clone());
    let report = build(Drivers {
        extractor: Some(&extractor),
        decider: Some(&decider),
        judge: Some(&judge),
        pages: Some(&pages),
        ..drivers
    })?;
    Ok(Built {
        report,
        model: Some(ModelPart {
            model: client.config().model.clone(),
            extracted_by_rules: extractor.fallbacks(),
            matched_by_rules: decider.fallbacks(),
            pages_by_rules: pages.fallbacks(),
            judged_by_rules: judge.fallbacks(),
            usage: client.usage(),
        }),
    })
}

/// An embedder that answers the documents it embedded ahead of time from what it computed
/// then, and asks the model for the rest: an append embeds its messages before its
/// transaction begins, so that the store's write lock is not held while the model runs.
pub(crate) struct EmbeddedAhead<'a> {
    model: &'a dyn Embedder,
    known: HashMap<String, Vec<f32>>,
}

impl<'a> EmbeddedAhead<'a> {
    /// `texts` embedded as documents by `model`, one call.
    pub(crate) fn new(model: &'a dyn Embedder, texts: &[String]) -> Result<Self, EmbedError> {
        let mut unique: Vec<&str> = texts.iter().map(String::as_str).collect();
        unique.sort_unstable();
        unique.dedup();
        let rows = match unique.is_empty() {
            true => None,
            false => Some(model.embed(&unique, EmbedKind::Document)?),
        };
        let known = match &rows {
            Some(rows) if rows.len() == unique.len() && rows.dim() == model.dim() => unique
                .iter()
                .enumerate()
                .map(|(i, t)| (t.to_string(), rows.row(i).to_vec()))
                .collect(),
            // Rows of the wrong shape are left to the build, which says what is wrong.
            _ => HashMap::new(),
        };
        Ok(EmbeddedAhead { model, known })
    }
}

impl Embedder for EmbeddedAhead<'_> {
    fn model_id(&self) -> &str {
        self.model.model_id()
    }

    fn dim(&self) -> usize {
        self.model.dim()
    }

    fn embed(&self, texts: &[&str], kind: EmbedKind) -> Result<Embeddings, EmbedError> {
        let ahead = kind == EmbedKind::Document;
        let missing: Vec<&str> = texts
            .iter()
            .copied()
            .filter(|t| !ahead || !self.known.contains_key(*t))
            .collect();
        if missing.len() == texts.len() {
            return self.model.embed(texts, kind);
        }
        let computed = match missing.is_empty() {
            true => None,
            false => Some(self.model.embed(&missing, kind)?),
        };
        let dim = self.dim();
        let mut data = Vec::with_capacity(texts.len() * dim);
        let mut next = 0;
        for text in texts {
            match self.known.get(*text) {
                Some(row) => data.extend_from_slice(row),
                None => {
                    let computed = computed.as_ref().expect("a text not known was embedded");
                    data.extend_from_slice(computed.row(next));
                    next += 1;
                }
            }
        }
        Embeddings::new(dim, data)
    }

    fn kernel(&self) -> Option<String> {
        self.model.kernel()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use trajwiki_core::HashingEmbedder;

    use super::*;

    /// A model that counts the texts it is asked to embed.
    struct Counted {
        model: HashingEmbedder,
        texts: AtomicUsize,
    }

    impl Embedder for Counted {
        fn model_id(&self) -> &str {
            self.model.model_id()
        }
        fn dim(&self) -> usize {
            self.model.dim()
        }
        fn embed(&self, texts: &[&str], kind: EmbedKind) -> Result<Embeddings, EmbedError> {
            self.texts.fetch_add(texts.len(), Ordering::Relaxed);
            self.model.embed(texts, kind)
        }
    }

    #[test]
    fn texts_embedded_ahead_are_answered_without_the_model_and_in_order() {
        let model = Counted {
            model: HashingEmbedder::new(32),
            texts: AtomicUsize::new(0),
        };
        let ahead = EmbeddedAhead::new(&model, &["b".into(), "a".into(), "b".into()]).unwrap();
        assert_eq!(model.texts.load(Ordering::Relaxed), 2, "each text once");
        let asked = ["a", "new", "b", "a", "other"];
        let got = ahead.embed(&asked, EmbedKind::Document).unwrap();
        assert_eq!(
            model.texts.load(Ordering::Relaxed),
            4,
            "only the two unknown texts"
        );
        let direct = model.model.embed(&asked, EmbedKind::Document).unwrap();
        for (i, text) in asked.iter().enumerate() {
            assert_eq!(got.row(i), direct.row(i), "row {i} ({text})");
        }
        // A query is the model's, whatever was embedded ahead.
        ahead.embed(&["a"], EmbedKind::Query).unwrap();
        assert_eq!(model.texts.load(Ordering::Relaxed), 5);
    }
}
