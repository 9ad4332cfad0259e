//! `trajwiki ask`: a question answered from a namespace's memory by a language model, with the
//! evidence it rests on; without a model, the evidence alone and a status that says so.

use std::mem::ManuallyDrop;
use std::time::Duration;

use trajwiki::answer::AnswerStatus;
use trajwiki::api::Query;
use trajwiki::engine::Model;
use trajwiki::llm::{ApiKey, LlmConfig};
use trajwiki::retrieve::RetrievalConfig;
use trajwiki::Engine;
use trajwiki_core::Namespace;

use super::device::scoring;
use super::memory::load_embedder_on;
use super::query::RetrievalArgs;
use super::{Global, StoreArg, UsageError};
use trajwiki::safe::line;

/// Where the language model is: flags, else the environment.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct LlmArgs {
    /// Base URL of an OpenAI-compatible endpoint, up to and including `/v1`.
    #[arg(long, env = trajwiki::llm::ENV_BASE_URL)]
    llm_base_url: Option<String>,
    /// Model name sent to the endpoint.
    #[arg(long, env = trajwiki::llm::ENV_MODEL)]
    llm_model: Option<String>,
    /// API key (sent as a bearer token; never stored or printed).
    #[arg(long, env = trajwiki::llm::ENV_API_KEY, hide_env_values = true)]
    llm_api_key: Option<String>,
    /// Seconds a request may take.
    #[arg(long, default_value_t = 60.0)]
    llm_timeout: f64,
    /// Retries after a 429, a 5xx or a transport failure.
    #[arg(long, default_value_t = 3)]
    llm_retries: u32,
}

impl LlmArgs {
    /// The configuration, or `None` when no endpoint and model are given.
    pub(crate) fn config(&self) -> anyhow::Result<Option<LlmConfig>> {
        let given = |v: &Option<String>| v.clone().filter(|s| !s.trim().is_empty());
        let (url, model) = match (given(&self.llm_base_url), given(&self.llm_model)) {
            (Some(url), Some(model)) => (url, model),
            (None, None) => return Ok(None),
            (Some(_), None) => {
                return Err(UsageError(
                    "--llm-base-url needs --llm-model (or TRAJWIKI_LLM_MODEL)".into(),
                )
                .into())
            }
            (None, Some(_)) => {
                return Err(UsageError(
                    "--llm-model needs --llm-base-url (or TRAJWIKI_LLM_BASE_URL)".into(),
                )
                .into())
            }
        };
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(UsageError(format!(
                "--llm-base-url {}: expected an http:// or https:// URL",
                line(&url)
            ))
            .into());
        }
        if !(self.llm_timeout.is_finite() && self.llm_timeout > 0.0) {
            return Err(UsageError(format!(
                "--llm-timeout {}: expected a positive number of seconds",
                self.llm_timeout
            ))
            .into());
        }
        let mut config = LlmConfig::new(url, model);
        config.api_key = given(&self.llm_api_key).map(ApiKey::new);
        config.timeout = Duration::from_secs_f64(self.llm_timeout);
        config.retries = self.llm_retries;
        Ok(Some(config))
    }
}

#[derive(Debug, clap::Args)]
pub(crate) struct AskArgs {
    #[command(flatten)]
    store: StoreArg,
    /// The namespace to ask.
    #[arg(long)]
    namespace: String,
    /// The question.
    question: String,
    #[command(flatten)]
    retrieval: RetrievalArgs,
    #[command(flatten)]
    llm: LlmArgs,
    /// Have the model reorder the routed wiki pages and the selected trajectories before their
    /// evidence is gathered (two more calls; the fused order where it fails).
    #[arg(long)]
    rerank: bool,
    /// Print JSON: the answer, its status, the context and its evidence, model usage.
    #[arg(long)]
    json: bool,
}

pub(crate) fn ask(args: &AskArgs, global: Global) -> anyhow::Result<()> {
    trajwiki_core::limits::QUESTION_BYTES.check(args.question.len())?;
    let llm = args.llm.config()?;
    let store = args.store.open()?;
    let ns = Namespace::new(args.namespace.as_str())?;
    let backend = scoring(global.device)?;
    let loaded = load_embedder_on(&args.retrieval.model, global)?;
    // The process ends with this command: freeing a large index would only delay the exit, so
    // the engine holding it is never dropped.
    let engine = ManuallyDrop::new(
        Engine::new(
            store,
            Model::Loaded(loaded.embedder.into()),
            backend,
            usize::MAX,
        )
        .answering_once(),
    );
    let config = RetrievalConfig::default();
    let query = Query {
        question: &args.question,
        mode: args.retrieval.mode,
        budget: args.retrieval.budget,
        config: &config,
    };
    let (asked, client) =
        engine.with_store(|store| engine.namespace(&ns).ask(store, &query, llm, args.rerank))?;
    let (answer, search) = (&asked.answer, &asked.search);
    match answer.status {
        AnswerStatus::NoAnswerModel | AnswerStatus::ModelUnavailable => global.say(format!(
            "warning: {}; the evidence is printed without an answer",
            answer.abstain_reason.as_deref().unwrap_or_default()
        )),
        AnswerStatus::Answered | AnswerStatus::Abstained => {}
    }
    if args.json {
        let value = asked.to_json(client.as_ref());
        outjson!(serde_json::to_string_pretty(&value)?)?;
        return Ok(());
    }
    match answer.status {
        AnswerStatus::Answered => {
            outln!(
                "Answer: {} [{}]",
                answer.final_answer,
                answer.supporting_source_refs.join(", ")
            )?;
        }
        status => {
            let name = serde_json::to_value(status)?;
            outln!(
                "No answer ({}): {}",
                name.as_str().unwrap_or_default(),
                answer.abstain_reason.as_deref().unwrap_or_default()
            )?;
        }
    }
    for c in &answer.corrections {
        outln!("note: {c}")?;
    }
    outln!("\n--- evidence ({} tokens) ---", search.context.tokens)?;
    outln!("{}", search.context.text)?;
    Ok(())
}
