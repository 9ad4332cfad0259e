//! Compiling a run: a diagnosis (why it succeeded or failed) and at most three insights (what to
//! do, when it applies), each citing the steps it rests on as `[step N]` so that a reader can
//! descend to the evidence. [`RunCompiler`] is the interface an LLM compiler implements a second
//! time; [`validate`] is the discipline both are held to.

use trajwiki_core::{Compilation, CompilationId, Insight, InsightId, Run};

use crate::analyse::{analyse, OutcomeClass, RunAnalysis};
use crate::rules;

/// Insights per run at most (SPEC §4).
pub const MAX_INSIGHTS: usize = 3;

/// Characters of a guideline or an applicability condition at most.
pub const MAX_TEXT_CHARS: usize = 800;

/// A run's compilation and its insights, as the store keeps them.
#[derive(Debug, Clone, PartialEq)]
pub struct Compiled {
    /// The diagnosis.
    pub compilation: Compilation,
    /// At most [`MAX_INSIGHTS`] lessons, in the order the compiler ranks them.
    pub insights: Vec<Insight>,
}

/// Why a compilation was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CompileError {
    /// The compilation breaks a rule every compiler must keep.
    #[error("compilation of run {run} ({external_ref}) is invalid: {reason}")]
    Invalid {
        /// The run.
        run: String,
        /// The run's id in its source.
        external_ref: String,
        /// What is wrong.
        reason: String,
    },
}

/// Writes a run's compilation.
pub trait RunCompiler {
    /// The name stored with every compilation (`deterministic`, or a model name).
    fn name(&self) -> &str;

    /// Compiles one run. The result must pass [`validate`], which the caller that stores it
    /// checks (`trajwiki::trace::compile_namespace`), whichever compiler wrote it.
    fn compile(&self, run: &Run) -> Result<Compiled, CompileError>;
}

/// The offline compiler: reads the run through [`crate::rules`] and states what it finds.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeterministicCompiler;

/// The name the deterministic compiler stores.
pub const DETERMINISTIC: &str = "deterministic";

/// The id of the compilation of `run` by `compiler`.
pub fn compilation_id(run: &Run, compiler: &str) -> CompilationId {
    CompilationId::derive(&run.namespace, &format!("{}|{compiler}", run.id))
}

/// The id of the insight at `position` of a compilation.
pub fn insight_id(run: &Run, compilation: &CompilationId, position: usize) -> InsightId {
    InsightId::derive(&run.namespace, &format!("{compilation}|{position}"))
}

/// Text cut to [`rules::QUOTE_CHARS`] characters on one line, with an ellipsis when cut.
pub fn quote(text: &str) -> String {
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= rules::QUOTE_CHARS {
        return one_line;
    }
    let cut: String = one_line.chars().take(rules::QUOTE_CHARS - 1).collect();
    format!("{}…", cut.trim_end())
}

/// `[step 3]`, `[steps 3, 5]`.
pub fn cite(positions: &[usize]) -> String {
    match positions {
        [p] => format!("[step {p}]"),
        _ => format!(
            "[steps {}]",
            positions
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The step positions a text cites (`[step N]`, `[steps N, M]`), in order of appearance.
pub fn citations(text: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("[step") {
        rest = &rest[i + 5..];
        let inner = rest.strip_prefix('s').unwrap_or(rest);
        let Some(end) = inner.find(']') else { break };
        for part in inner[..end].split(',') {
            if let Ok(p) = part.trim().parse() {
                out.push(p);
            }
        }
    }
    out
}

fn path(run: &Run, positions: &[usize]) -> String {
    let mut shown: Vec<usize> = positions.to_vec();
    let hidden = shown.len().saturating_sub(rules::MAX_KEY_ACTIONS);
    if hidden > 0 {
        // Keep the start and the end of a long path.
        let head = rules::MAX_KEY_ACTIONS / 2;
        shown = positions[..head]
            .iter()
            .chain(&positions[positions.len() - (rules::MAX_KEY_ACTIONS - head)..])
            .copied()
            .collect();
    }
    let mut parts: Vec<String> = shown
        .iter()
        .map(|&p| format!("{} `{}`", cite(&[p]), quote(&run.steps[p - 1].action)))
        .collect();
    if hidden > 0 {
        parts.insert(
            rules::MAX_KEY_ACTIONS / 2,
            format!("… {hidden} more actions …"),
        );
    }
    parts.join(" → ")
}

fn applies_when(run: &Run, a: &RunAnalysis) -> String {
    let env = a
        .env
        .clone()
        .unwrap_or_else(|| run.namespace.as_str().to_string());
    match &a.family {
        Some(family) => format!(
            "{env} tasks of type {family} (like \"{}\")",
            quote(&run.task)
        ),
        None => format!("{env} tasks like \"{}\"", quote(&run.task)),
    }
}

fn diagnosis(run: &Run, a: &RunAnalysis) -> String {
    let reasoning = a.steps.iter().filter(|s| s.reasoning).count();
    let mut out = format!(
        "{} on \"{}\" after {} ({} acting, {} reasoning).",
        capitalise(&a.outcome.to_string()),
        quote(&run.task),
        steps(a.steps.len()),
        a.steps.len() - reasoning,
        reasoning
    );
    if a.steps.is_empty() {
        out.push_str(" The run recorded no steps");
        if a.impossible {
            out.push_str("; its source marks the task as impossible");
        }
        out.push('.');
        return out;
    }
    out.push_str(&format!(" Path: {}.", path(run, &a.key_actions)));
    match a.finishing {
        Some(f) => out.push_str(&format!(
            " Finished {} with `{}`{}.",
            cite(&[f]),
            quote(&run.steps[f - 1].action),
            match run.steps[f - 1].observation.trim() {
                "" => String::new(),
                o => format!(" (\"{}\")", quote(o)),
            }
        )),
        None if a.outcome.is_doubtful() => out.push_str(&format!(
            " It never finished: the last action was `{}` {}.",
            quote(run.steps.last().map(|s| s.action.as_str()).unwrap_or("")),
            cite(&[a.steps.len()])
        )),
        None => {}
    }
    if !a.no_effect.is_empty() {
        out.push_str(&format!(
            " {} action(s) had no effect {}.",
            a.no_effect.len(),
            cite(&a.no_effect)
        ));
    }
    for positions in &a.loops {
        out.push_str(&format!(
            " `{}` was repeated with the same result {}.",
            quote(&run.steps[positions[0] - 1].action),
            cite(positions)
        ));
    }
    if let (false, Some(view)) = (a.unmet_terms.is_empty(), a.last_view) {
        out.push_str(&format!(
            " Terms of the task not seen in what it chose from {}: {}.",
            cite(&[view]),
            a.unmet_terms.join(", ")
        ));
    }
    out
}

fn steps(n: usize) -> String {
    if n == 1 {
        "1 step".into()
    } else {
        format!("{n} steps")
    }
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// Candidate lessons, most useful first: what went wrong, what was recovered from, how it was
/// solved.
fn lessons(run: &Run, a: &RunAnalysis) -> Vec<String> {
    let mut out = Vec::new();
    let step = |p: usize| &run.steps[p - 1];
    if a.outcome.is_doubtful() && a.outcome != OutcomeClass::Unknown {
        match (a.finishing, a.last_view) {
            (Some(f), Some(view)) if !a.unmet_terms.is_empty() => out.push(format!(
                "Before `{}`, check the choice against every term of the task: this run finished {} with {} while what it chose from {} never showed {}.",
                quote(&step(f).action),
                cite(&[f]),
                a.outcome,
                cite(&[view]),
                a.unmet_terms.iter().map(|t| format!("\"{t}\"")).collect::<Vec<_>>().join(", ")
            )),
            (Some(f), _) => out.push(format!(
                "Finishing with `{}` {} ended in {}: verify the choice before committing to it.",
                quote(&step(f).action),
                cite(&[f]),
                a.outcome
            )),
            (None, _) if !a.steps.is_empty() => out.push(format!(
                "Commit to a choice before the step limit: this run ended in {} after {} without finishing (last `{}` {}).",
                a.outcome,
                steps(a.steps.len()),
                quote(&step(a.steps.len()).action),
                cite(&[a.steps.len()])
            )),
            _ => {}
        }
    }
    for positions in &a.loops {
        out.push(format!(
            "Do not repeat `{}`: it returned the same result {} times {}; change the action instead.",
            quote(&step(positions[0]).action),
            positions.len(),
            cite(positions)
        ));
    }
    if let Some(&p) = a.no_effect.first() {
        let recovered = a.key_actions.iter().find(|&&k| k > p);
        out.push(match recovered {
            Some(&k) => format!(
                "`{}` had no effect (\"{}\") {}; the run went on with `{}` {}.",
                quote(&step(p).action),
                quote(&step(p).observation),
                cite(&[p]),
                quote(&step(k).action),
                cite(&[k])
            ),
            None => format!(
                "`{}` had no effect (\"{}\") {}.",
                quote(&step(p).action),
                quote(&step(p).observation),
                cite(&[p])
            ),
        });
    }
    if !a.key_actions.is_empty()
        && matches!(
            a.outcome,
            OutcomeClass::Success | OutcomeClass::Partial { .. }
        )
    {
        out.push(format!(
            "A path that {} this task in {}: {}.",
            match a.outcome {
                OutcomeClass::Success => "solved".to_string(),
                other => format!("ended in {other} on"),
            },
            steps(a.steps.len()),
            path(run, &a.key_actions)
        ));
    }
    out
}

impl RunCompiler for DeterministicCompiler {
    fn name(&self) -> &str {
        DETERMINISTIC
    }

    fn compile(&self, run: &Run) -> Result<Compiled, CompileError> {
        let a = analyse(run);
        let id = compilation_id(run, DETERMINISTIC);
        let when = applies_when(run, &a);
        let insights = lessons(run, &a)
            .into_iter()
            .take(MAX_INSIGHTS)
            .enumerate()
            .map(|(i, guideline)| Insight {
                id: insight_id(run, &id, i),
                compilation: id.clone(),
                run: run.id.clone(),
                guideline,
                applies_when: when.clone(),
            })
            .collect();
        Ok(Compiled {
            compilation: Compilation {
                id,
                run: run.id.clone(),
                diagnosis: diagnosis(run, &a),
                compiler: DETERMINISTIC.to_string(),
            },
            insights,
        })
    }
}

/// The rules every compilation must keep: it is of this run; at most [`MAX_INSIGHTS`] insights,
/// each of this compilation and run, with a non-empty guideline and condition of at most
/// [`MAX_TEXT_CHARS`], no two alike; every `[step N]` cited exists; and, when the run has
/// steps, every insight cites at least one (an insight must lead back to its evidence).
pub fn validate(run: &Run, compiled: &Compiled) -> Result<(), CompileError> {
    let fail = |reason: String| CompileError::Invalid {
        run: run.id.to_string(),
        external_ref: run.external_ref.clone(),
        reason,
    };
    let c = &compiled.compilation;
    if c.run != run.id {
        return Err(fail(format!("the compilation names run {}", c.run)));
    }
    if c.diagnosis.trim().is_empty() {
        return Err(fail("the diagnosis is empty".into()));
    }
    if compiled.insights.len() > MAX_INSIGHTS {
        return Err(fail(format!(
            "{} insights (at most {MAX_INSIGHTS})",
            compiled.insights.len()
        )));
    }
    let n = run.steps.len();
    let check_cites = |what: &str, text: &str| -> Result<usize, CompileError> {
        let cited = citations(text);
        if let Some(bad) = cited.iter().find(|&&p| p == 0 || p > n) {
            return Err(fail(format!(
                "{what} cites step {bad}, but the run has {n} steps"
            )));
        }
        Ok(cited.len())
    };
    check_cites("the diagnosis", &c.diagnosis)?;
    for (i, insight) in compiled.insights.iter().enumerate() {
        let what = format!("insight {}", i + 1);
        if insight.compilation != c.id || insight.run != run.id {
            return Err(fail(format!(
                "{what} belongs to another compilation or run"
            )));
        }
        for (field, text) in [
            ("guideline", &insight.guideline),
            ("applies_when", &insight.applies_when),
        ] {
            if text.trim().is_empty() {
                return Err(fail(format!("{what} has an empty {field}")));
            }
            if text.chars().count() > MAX_TEXT_CHARS {
                return Err(fail(format!(
                    "{what}'s {field} is longer than {MAX_TEXT_CHARS} characters"
                )));
            }
        }
        if check_cites(&what, &insight.guideline)? == 0 && n > 0 {
            return Err(fail(format!("{what} cites no step of the run")));
        }
        if compiled.insights[..i]
            .iter()
            .any(|o| o.guideline == insight.guideline)
        {
            return Err(fail(format!("{what} repeats an earlier insight")));
        }
    }
    Ok(())
}
