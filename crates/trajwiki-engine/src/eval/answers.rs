//! Answer metrics on LoCoMo (SPEC §6): each question of categories 1–4 answered by a model from
//! the context at one (mode, budget), on the path `ask` takes (an abstention followed by a
//! reflection and a rescue, [`answer_searching`]), scored against the gold answer by token F1 and BLEU-1
//! ([`crate::metrics`]) and by a judge model's CORRECT/WRONG verdict (the generous protocol of the
//! mem0 and Zep evaluations: an answer that names the same thing, or the same date in another
//! format, is correct). The answer and judge models are named in every report.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{json, Value};
use trajwiki_compute::ScoringBackend;
use trajwiki_core::Embedder;
use trajwiki_ingest::locomo::LocomoSample;
use trajwiki_llm::{Client, JsonRequest, LlmConfig, Message, Phase, ResponseCache, UsageTable};
use trajwiki_retrieve::{Context, Index, Mode, RetrievalConfig};

use super::{mean, EvalError};
use crate::answer::{answer_searching, AnswerStatus};
use crate::api::StoreResponses;
use crate::metrics::{bleu1, token_f1};
use crate::retrieval::embed_query;

/// How answers are evaluated.
#[derive(Debug, Clone)]
pub struct AnswerOptions {
    /// The answer model's endpoint.
    pub llm: LlmConfig,
    /// The judge model, on the same endpoint (the answer model when `None`).
    pub judge_model: Option<String>,
    /// The retrieval mode of the contexts answered from.
    pub mode: Mode,
    /// Their budget, in whitespace tokens.
    pub budget: usize,
}

/// Answer metrics of one category (or "all", 1–4).
#[derive(Debug, Clone, Default, Serialize)]
pub struct AnswerCell {
    /// Questions answered or abstained on.
    pub questions: usize,
    /// Mean token F1.
    pub f1: f64,
    /// Mean BLEU-1.
    pub bleu1: f64,
    /// Share of answers the judge found correct.
    pub judge_correct: f64,
    /// Share of questions abstained on (no model answer, or no supported one).
    pub abstained: f64,
}

/// The answer evaluation's result.
#[derive(Debug, Clone, Serialize)]
pub struct AnswerSummary {
    /// The answer model.
    pub answer_model: String,
    /// The judge model.
    pub judge_model: String,
    /// The mode and budget answered from.
    pub mode: String,
    /// The budget.
    pub budget: usize,
    /// Category → metrics ("all" is 1–4).
    pub cells: BTreeMap<String, AnswerCell>,
    /// Model calls and tokens per model and phase.
    pub usage: BTreeMap<String, UsageTable>,
}

/// The most tokens a verdict may have: a sentence and a label.
const VERDICT_TOKENS: u32 = 200;

/// The judge's reply schema.
fn verdict_schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["reasoning", "label"],
        "properties": {
            "reasoning": {"type": "string"},
            "label": {"type": "string", "enum": ["CORRECT", "WRONG"]},
        },
    })
}

const JUDGE: &str = "You grade an answer to a question about a conversation against the gold \
answer. Be generous: the answer is CORRECT when it refers to the same thing as the gold answer, \
even when it is longer or phrased differently, and a date or time period is CORRECT when it \
names the same date or period in any format (for example \"May 7th\" for \"7 May\"). It is WRONG \
when it names something else, misses the point, or gives no answer. Reason in one sentence, then \
give the label.";

/// The judge's verdict: whether the answer is correct, and why (a failed judge call is WRONG,
/// with the error as its reason).
pub fn judge(client: &Client, question: &str, gold: &str, answer: &str) -> (bool, String) {
    let messages = [
        Message::system(JUDGE),
        Message::user(format!(
            "Question: {question}\nGold answer: {gold}\nAnswer: {}",
            if answer.is_empty() {
                "(no answer)"
            } else {
                answer
            }
        )),
    ];
    let schema = verdict_schema();
    let request = JsonRequest {
        phase: Phase::Judge,
        messages: &messages,
        schema_name: "verdict",
        schema: &schema,
        max_tokens: VERDICT_TOKENS,
    };
    match client.json(&request) {
        Ok(object) => {
            let label = object.get("label").and_then(Value::as_str).unwrap_or("");
            let reasoning = object
                .get("reasoning")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            match label {
                "CORRECT" => (true, reasoning),
                "WRONG" => (false, reasoning),
                other => (false, format!("the judge gave no label (got {other:?})")),
            }
        }
        Err(e) => (false, format!("the judge failed: {e}")),
    }
}

/// Answers and scores every question of categories 1–4 of `samples` (their indexes given by
/// `index_of`), writing one JSON line per question to `out`; the model responses are kept in
/// the store at `store` (a rerun asks nothing).
#[allow(clippy::too_many_arguments)]
pub(crate) fn run(
    samples: &[LocomoSample],
    index_of: &dyn Fn(&LocomoSample) -> Result<Index, EvalError>,
    o: &AnswerOptions,
    store: &std::path::Path,
    retrieval: &RetrievalConfig,
    embedder: &dyn Embedder,
    scoring: &dyn ScoringBackend,
    out: &mut dyn Write,
    io: &dyn Fn(std::io::Error) -> EvalError,
) -> Result<AnswerSummary, EvalError> {
    let Some(first) = samples.first() else {
        return Err(EvalError::NoSamples);
    };
    let cache = Arc::new(
        StoreResponses::open(store, &first.namespace, false)
            .map_err(|e| EvalError::Api(Box::new(e)))?,
    );
    let client = Client::new(
        o.llm.clone(),
        Some(Arc::clone(&cache) as Arc<dyn ResponseCache>),
    );
    let judge_client = o.judge_model.as_ref().map(|model| {
        let mut config = o.llm.clone();
        config.model = model.clone();
        Client::new(config, Some(Arc::clone(&cache) as Arc<dyn ResponseCache>))
    });
    let judging = judge_client.as_ref().unwrap_or(&client);
    let mut acc: BTreeMap<String, [Vec<f64>; 4]> = BTreeMap::new();
    for sample in samples {
        cache.set_namespace(&sample.namespace);
        let index = index_of(sample)?;
        for q in sample.qa.iter().filter(|q| q.category != 5) {
            let Some(gold) = q.answer.as_deref() else {
                continue;
            };
            // The context of a search for `text` in `mode`: the question first, then what an
            // abstention's recovery searches for (the path `ask` takes).
            let search = |text: &str, mode: Mode| -> Result<Context, EvalError> {
                let (qvec, _) = embed_query(embedder, text)?;
                let ranking = index.rank(text, &qvec, mode, retrieval, scoring)?;
                Ok(index.render(&ranking, o.budget))
            };
            let (ctx, a) = answer_searching(
                &client,
                &q.question,
                o.mode,
                search(&q.question, o.mode)?,
                |c: &Context| (c.text.as_str(), c.source_refs.as_slice()),
                search,
            )?;
            let given = if a.status == AnswerStatus::Answered {
                a.final_answer.as_str()
            } else {
                ""
            };
            let (f1, b1) = (token_f1(given, gold), bleu1(given, gold));
            let (correct, reasoning) = judge(judging, &q.question, gold, given);
            let line = json!({
                "sample_id": sample.namespace.as_str(),
                "qa_index": q.qa_index,
                "category": q.category,
                "question": q.question,
                "gold": gold,
                "answer": given,
                "status": a.status,
                "supporting_source_refs": a.supporting_source_refs,
                "removed_refs": a.removed_refs,
                "abstain_reason": a.abstain_reason,
                "route": a.route,
                "hints": a.hints,
                "f1": f1,
                "bleu1": b1,
                "judge": if correct { "CORRECT" } else { "WRONG" },
                "judge_reasoning": reasoning,
                "context_tokens": ctx.tokens,
            });
            serde_json::to_writer(&mut *out, &line).map_err(|e| io(e.into()))?;
            out.write_all(b"\n").map_err(io)?;
            let abstained = if a.status == AnswerStatus::Answered {
                0.0
            } else {
                1.0
            };
            for cat in [q.category.to_string(), "all".to_string()] {
                let [f, b, j, ab] = acc.entry(cat).or_default();
                f.push(f1);
                b.push(b1);
                j.push(if correct { 1.0 } else { 0.0 });
                ab.push(abstained);
            }
        }
    }
    let cells = acc
        .into_iter()
        .map(|(cat, [f, b, j, ab])| {
            (
                cat,
                AnswerCell {
                    questions: f.len(),
                    f1: mean(&f),
                    bleu1: mean(&b),
                    judge_correct: mean(&j),
                    abstained: mean(&ab),
                },
            )
        })
        .collect();
    let mut usage = BTreeMap::new();
    usage.insert(client.config().model.clone(), client.usage());
    if let Some(j) = &judge_client {
        usage.insert(j.config().model.clone(), j.usage());
    }
    Ok(AnswerSummary {
        answer_model: client.config().model.clone(),
        judge_model: judging.config().model.clone(),
        mode: o.mode.name().to_string(),
        budget: o.budget,
        cells,
        usage,
    })
}

/// Published LLM-judge scores on LoCoMo (share of questions judged CORRECT, %), per category
/// 1–4 and over them: Table 1 of the Mem0 paper (Chhikara et al., 2025, arXiv:2504.19413), answers
/// by gpt-4o-mini. Its evaluation code names LoCoMo's category 1 "single-hop", 2 "temporal",
/// 3 "multi-hop" and 4 "open-domain" (SPEC §6 calls 1 multi-hop and 4 single-hop): the scores are
/// matched here by category number, which both count the same questions of.
const PUBLISHED: [(&str, [f64; 5]); 3] = [
    ("Mem0", [67.13, 55.51, 51.15, 72.93, 66.88]),
    ("Mem0 (graph)", [65.71, 58.13, 47.19, 75.71, 68.44]),
    ("Zep", [61.70, 49.31, 41.35, 76.60, 65.99]),
];

/// Our judge's CORRECT share beside the published ones ([`PUBLISHED`]).
fn published(s: &AnswerSummary) -> String {
    let mut md = format!(
        "\nBeside published judge scores (Mem0 paper, Table 1; answers by gpt-4o-mini; categories matched by number, see the source). Ours: answers by `{}`, judged by `{}` — other models and judges, so a guide, not a ranking.\n\n| category | ours |",
        s.answer_model, s.judge_model
    );
    for (system, _) in PUBLISHED {
        md.push_str(&format!(" {system} |"));
    }
    md.push_str("\n|---|---:|");
    md.push_str(&"---:|".repeat(PUBLISHED.len()));
    md.push('\n');
    for (k, cat) in ["1", "2", "3", "4", "all"].iter().enumerate() {
        let ours = s.cells.get(*cat).map_or("–".to_string(), |c| {
            format!("{:.1}", 100.0 * c.judge_correct)
        });
        md.push_str(&format!("| {cat} | {ours} |"));
        for (_, scores) in PUBLISHED {
            md.push_str(&format!(" {:.2} |", scores[k]));
        }
        md.push('\n');
    }
    md
}

/// The report's section on answers.
pub fn report(s: &AnswerSummary) -> String {
    let mut md = format!(
        "\n## Answers ({} mode, {} tokens)\n\nAnswer model `{}`, judge `{}`. Token F1 and BLEU-1 with the mem0/A-Mem conventions; the judge's CORRECT share (the generous protocol of mem0 and Zep); abstentions score 0.\n\n| category | questions | F1 | BLEU-1 | judge | abstained |\n|---|---:|---:|---:|---:|---:|\n",
        s.mode, s.budget, s.answer_model, s.judge_model
    );
    for (cat, c) in &s.cells {
        md.push_str(&format!(
            "| {cat} | {} | {:.3} | {:.3} | {:.3} | {:.3} |\n",
            c.questions, c.f1, c.bleu1, c.judge_correct, c.abstained
        ));
    }
    md.push_str(&published(s));
    md.push_str("\n| calls | requests | cached | prompt tokens | completion tokens | failed |\n|---|---:|---:|---:|---:|---:|\n");
    for (who, table) in &s.usage {
        for (phase, u) in table {
            md.push_str(&format!(
                "| {who}: {} | {} | {} | {} | {} | {} |\n",
                serde_json::to_value(phase)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                u.requests,
                u.cached,
                u.prompt_tokens,
                u.completion_tokens,
                u.failed
            ));
        }
    }
    md
}
