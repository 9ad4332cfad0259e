//! What a build is asked to be ([`BuildPlan`]) and what it did ([`Built`]): the settings, a
//! language model when one drives the build, and a progress sink, in; the report and, for a
//! model-driven build, the model's usage and the places it fell back to rules, out. Every face
//! builds through [`crate::Writer::build_with`] with one of these.

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
