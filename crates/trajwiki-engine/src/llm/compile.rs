//! The model-driven run compiler of WikiTrace (SPEC §4): a language model reads a run and writes
//! a diagnosis and at most 3 insights citing `[step N]`, held to the same [`validate`] as the
//! deterministic compiler, and besides to a diagnosis that cites a step and at least one insight
//! (a small model's "1" with no insight is valid to `validate`, and teaches nothing). Invalid output is asked for again once with the validation errors;
//! when that fails too, or the model cannot be reached, the run gets the deterministic
//! compilation, and the fallback is recorded (the compilation names the deterministic compiler,
//! and [`LlmCompiler::fallbacks`] says which runs and why).

use std::sync::Mutex;

use serde_json::{json, Map, Value};
use trajwiki_core::{Compilation, Insight, Run};
use trajwiki_llm::{Client, JsonRequest, LlmError, Message, Phase};
use trajwiki_trace::compile::{compilation_id, insight_id, MAX_INSIGHTS, MAX_TEXT_CHARS};
use trajwiki_trace::{validate, CompileError, Compiled, DeterministicCompiler, RunCompiler};

/// The longest action or observation quoted to the model, in characters.
const STEP_CHARS: usize = 400;

/// The most tokens a compilation may have: a diagnosis and three insights.
const COMPILATION_TOKENS: u32 = 1200;

/// A run compiler backed by a language model, falling back to [`DeterministicCompiler`].
pub struct LlmCompiler<'a> {
    client: &'a Client,
    name: String,
    fallbacks: Mutex<Vec<(String, String)>>,
}

impl<'a> LlmCompiler<'a> {
    /// A compiler asking `client`'s model; it stores its compilations as `llm:<model>`.
    pub fn new(client: &'a Client) -> Self {
        LlmCompiler {
            client,
            name: format!("llm:{}", client.config().model),
            fallbacks: Mutex::new(Vec::new()),
        }
    }

    /// The runs (external refs) that got the deterministic compilation instead, and why, in the
    /// order they were compiled.
    pub fn fallbacks(&self) -> Vec<(String, String)> {
        self.fallbacks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn fall_back(&self, run: &Run, reason: String) -> Result<Compiled, CompileError> {
        self.fallbacks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((run.external_ref.clone(), reason));
        DeterministicCompiler.compile(run)
    }

    /// The compilation a reply describes, with this compiler's ids.
    fn compiled(&self, run: &Run, reply: &Map<String, Value>) -> Result<Compiled, String> {
        let diagnosis = reply
            .get("diagnosis")
            .and_then(Value::as_str)
            .ok_or("diagnosis is missing or not a string")?;
        let items = reply
            .get("insights")
            .and_then(Value::as_array)
            .ok_or("insights is missing or not a list")?;
        // What `validate` allows any compiler and a model's compilation must do besides: say
        // where in the run its diagnosis comes from, and teach something.
        if !run.steps.is_empty() {
            if trajwiki_trace::compile::citations(diagnosis).is_empty() {
                return Err("the diagnosis cites no step as [step N]".into());
            }
            if items.is_empty() {
                return Err("no insight: write at least one".into());
            }
        }
        let id = compilation_id(run, &self.name);
        let mut insights = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let field = |name: &str| {
                item.get(name)
                    .and_then(Value::as_str)
                    .map(str::trim)
                    .map(str::to_string)
                    .ok_or(format!("insight {}: {name} is missing", i + 1))
            };
            insights.push(Insight {
                id: insight_id(run, &id, i),
                compilation: id.clone(),
                run: run.id.clone(),
                guideline: field("guideline")?,
                applies_when: field("applies_when")?,
            });
        }
        Ok(Compiled {
            compilation: Compilation {
                id,
                run: run.id.clone(),
                diagnosis: diagnosis.trim().to_string(),
                compiler: self.name.clone(),
            },
            insights,
        })
    }
}

/// The reply's JSON schema.
fn schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["diagnosis", "insights"],
        "properties": {
            "diagnosis": {"type": "string"},
            "insights": {
                "type": "array",
                "maxItems": MAX_INSIGHTS,
                "items": {
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["guideline", "applies_when"],
                    "properties": {
                        "guideline": {"type": "string"},
                        "applies_when": {"type": "string"},
                    },
                },
            },
        },
    })
}

fn instructions() -> String {
    format!(
        "You study one run of an agent and write what a later agent should learn from it. \
         Write a diagnosis: why the run succeeded or failed, citing the steps it rests on as \
         [step N]. Then at most {MAX_INSIGHTS} insights, each a guideline (what to do, citing at \
         least one step as [step N]) and when it applies. Cite only steps the run has. Each \
         text at most {MAX_TEXT_CHARS} characters; no two guidelines alike."
    )
}

/// Text cut to `n` characters on one line.
fn cut(text: &str, n: usize) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out: String = one_line.chars().take(n).collect();
    if one_line.chars().count() > n {
        out.push('…');
    }
    out
}

/// The run as the model reads it.
fn render(run: &Run) -> String {
    let outcome = match (run.outcome.success, run.outcome.reward) {
        (Some(true), _) => "solved".to_string(),
        (Some(false), _) => "failed".to_string(),
        (None, Some(r)) => format!("reward {r}"),
        (None, None) => "unknown".to_string(),
    };
    let mut text = format!(
        "Task: {}\nOutcome: {outcome}\nSteps ({}):\n",
        cut(&run.task, 1000),
        run.steps.len()
    );
    for (i, step) in run.steps.iter().enumerate() {
        text.push_str(&format!(
            "[step {}] action: {}\n  observation: {}\n",
            i + 1,
            cut(&step.action, STEP_CHARS),
            cut(&step.observation, STEP_CHARS)
        ));
    }
    text
}

impl RunCompiler for LlmCompiler<'_> {
    fn name(&self) -> &str {
        &self.name
    }

    fn compile(&self, run: &Run) -> Result<Compiled, CompileError> {
        let schema = schema();
        let mut messages = vec![Message::system(instructions()), Message::user(render(run))];
        let mut problem = String::new();
        for attempt in 0..2 {
            let request = JsonRequest {
                phase: if attempt == 0 {
                    Phase::Compilation
                } else {
                    Phase::Repair
                },
                messages: &messages,
                schema_name: "compilation",
                schema: &schema,
                max_tokens: COMPILATION_TOKENS,
            };
            let (reply, text) = match self.client.json(&request) {
                Ok(object) => {
                    let text = Value::Object(object.clone()).to_string();
                    (Some(object), text)
                }
                Err(LlmError::BadOutput { reason, excerpt }) => {
                    problem = reason;
                    (None, excerpt)
                }
                Err(e) => return self.fall_back(run, e.to_string()),
            };
            if let Some(object) = reply {
                match self.compiled(run, &object) {
                    Ok(compiled) => match validate(run, &compiled) {
                        Ok(()) => return Ok(compiled),
                        Err(CompileError::Invalid { reason, .. }) => problem = reason,
                    },
                    Err(reason) => problem = reason,
                }
            }
            messages.push(Message::assistant(text));
            messages.push(Message::user(format!(
                "That compilation is invalid: {problem}. Write it again, keeping every rule."
            )));
        }
        self.fall_back(
            run,
            format!("the model's compilation stayed invalid: {problem}"),
        )
    }
}
