//! What a run did, step by step, read through the rules of [`crate::rules`]: which steps were
//! reasoning, which changed nothing, which repeated an earlier step to no effect, where the run
//! finished, and which terms of the task it never saw before finishing.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};
use trajwiki_core::{Outcome, Run};

use crate::rules;

/// How a run ended, as the memory reports it next to every insight.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum OutcomeClass {
    /// Solved (`success: true`, or a reward of 1).
    Success,
    /// A reward strictly between 0 and 1.
    Partial {
        /// The reward.
        reward: f64,
    },
    /// Not solved (`success: false`, or a reward of 0).
    Failure,
    /// The source recorded no outcome.
    Unknown,
}

impl OutcomeClass {
    /// Classifies a recorded outcome.
    pub fn of(outcome: &Outcome) -> Self {
        match (outcome.success, outcome.reward) {
            (Some(true), _) => OutcomeClass::Success,
            (_, Some(r)) if r >= 1.0 => OutcomeClass::Success,
            (_, Some(r)) if r > 0.0 => OutcomeClass::Partial { reward: r },
            (Some(false), _) | (_, Some(_)) => OutcomeClass::Failure,
            (None, None) => OutcomeClass::Unknown,
        }
    }

    /// Whether a lesson from this run calls for checking the evidence before trusting it.
    pub fn is_doubtful(self) -> bool {
        !matches!(self, OutcomeClass::Success)
    }
}

impl fmt::Display for OutcomeClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OutcomeClass::Success => f.write_str("success"),
            OutcomeClass::Partial { reward } => write!(f, "partial (reward {reward})"),
            OutcomeClass::Failure => f.write_str("failure"),
            OutcomeClass::Unknown => f.write_str("outcome unknown"),
        }
    }
}

/// One step as the rules read it. Positions are 1-based, as runs are cited (`[step 3]`).
#[derive(Debug, Clone, PartialEq)]
pub struct StepView {
    /// 1-based position in the run.
    pub position: usize,
    /// The action's verb: its text before `[`, `:` or the first space, lower-cased.
    pub verb: String,
    /// The agent's own reasoning (a [`rules::REASONING_VERBS`] verb).
    pub reasoning: bool,
    /// The observation says the action changed nothing.
    pub no_effect: bool,
    /// The action finishes the run ([`rules::FINISHING_ACTIONS`]).
    pub finishing: bool,
}

/// A run read step by step.
#[derive(Debug, Clone)]
pub struct RunAnalysis {
    /// How it ended.
    pub outcome: OutcomeClass,
    /// Every step.
    pub steps: Vec<StepView>,
    /// Positions of the actions that acted on the environment and changed something.
    pub key_actions: Vec<usize>,
    /// Positions of actions that had no effect.
    pub no_effect: Vec<usize>,
    /// Actions repeated with the identical observation and no progress in between (only
    /// reasoning or no-effect steps), with every position they occurred at.
    pub loops: Vec<Vec<usize>>,
    /// The first finishing step.
    pub finishing: Option<usize>,
    /// The last step before finishing whose observation showed the environment's state (the
    /// page or room the run decided on).
    pub last_view: Option<usize>,
    /// Terms of the task missing from that last view and from every action (only for runs that
    /// did not succeed).
    pub unmet_terms: Vec<String>,
    /// The environment, from the run's metadata.
    pub env: Option<String>,
    /// The task's family, from the run's metadata.
    pub family: Option<String>,
    /// The source marks the task as unsolvable.
    pub impossible: bool,
}

/// The verb of an action: its text up to `[`, `:` or whitespace, lower-cased.
pub fn verb(action: &str) -> String {
    let a = action.trim();
    let end = a
        .find(|c: char| c == '[' || c == ':' || c.is_whitespace())
        .unwrap_or(a.len());
    a[..end].to_lowercase()
}

fn is_no_effect(observation: &str) -> bool {
    let o = observation.trim().to_lowercase();
    !o.is_empty()
        && rules::NO_EFFECT_OBSERVATIONS
            .iter()
            .any(|p| o == *p || o.starts_with(p))
}

fn is_finishing(action: &str, verb: &str) -> bool {
    let a = action.trim().to_lowercase();
    rules::FINISHING_ACTIONS
        .iter()
        .any(|f| a == *f || verb == *f)
}

/// The content terms of a text: lower-cased words of letters, digits, `-`, `.` and `'`, without
/// stopwords and one-letter words, in first-seen order.
pub fn terms(text: &str) -> Vec<String> {
    let mut seen = BTreeSet::new();
    text.split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '.' || c == '\''))
        .map(|w| {
            w.trim_matches(|c: char| c == '.' || c == '-' || c == '\'')
                .to_lowercase()
        })
        .filter(|w| w.chars().count() > 1 && !rules::STOPWORDS.contains(&w.as_str()))
        .filter(|w| seen.insert(w.clone()))
        .collect()
}

fn metadata_str(run: &Run, keys: &[&str]) -> Option<String> {
    keys.iter().find_map(|k| match run.metadata.get(*k) {
        Some(serde_json::Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_string()),
        _ => None,
    })
}

/// The family of a run's task, from its metadata ([`rules::FAMILY_KEYS`]).
pub fn family(run: &Run) -> Option<String> {
    metadata_str(run, rules::FAMILY_KEYS)
}

/// Reads a run through the rules.
pub fn analyse(run: &Run) -> RunAnalysis {
    let steps: Vec<StepView> = run
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let verb = verb(&s.action);
            let reasoning = rules::REASONING_VERBS.contains(&verb.as_str());
            StepView {
                position: i + 1,
                no_effect: !reasoning && is_no_effect(&s.observation),
                finishing: !reasoning && is_finishing(&s.action, &verb),
                verb,
                reasoning,
            }
        })
        .collect();
    let key_actions: Vec<usize> = steps
        .iter()
        .filter(|s| !s.reasoning && !s.no_effect)
        .map(|s| s.position)
        .collect();
    let no_effect = steps
        .iter()
        .filter(|s| s.no_effect)
        .map(|s| s.position)
        .collect();
    // The same action answered by the same observation again, with nothing but reasoning or
    // no-effect steps in between: no progress.
    let mut loops: Vec<Vec<usize>> = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    let same = |a: usize, b: usize| {
        let (x, y) = (&run.steps[a - 1], &run.steps[b - 1]);
        x.action.trim().eq_ignore_ascii_case(y.action.trim())
            && x.observation.trim() == y.observation.trim()
    };
    for s in steps.iter().filter(|s| !s.reasoning) {
        match current.last() {
            Some(&prev) if same(prev, s.position) => current.push(s.position),
            _ if s.no_effect && !current.is_empty() => {}
            _ => {
                if current.len() >= rules::LOOP_REPEATS {
                    loops.push(std::mem::take(&mut current));
                }
                current = vec![s.position];
            }
        }
    }
    if current.len() >= rules::LOOP_REPEATS {
        loops.push(current);
    }
    let finishing = steps.iter().find(|s| s.finishing).map(|s| s.position);
    let end = finishing.unwrap_or(steps.len() + 1);
    let last_view = steps
        .iter()
        .filter(|s| s.position < end && !s.reasoning && !s.no_effect)
        .filter(|s| run.steps[s.position - 1].observation.trim().len() >= 40)
        .map(|s| s.position)
        .next_back();
    let outcome = OutcomeClass::of(&run.outcome);
    let unmet_terms = match (outcome, last_view) {
        (OutcomeClass::Success | OutcomeClass::Unknown, _) | (_, None) => Vec::new(),
        (_, Some(view)) => {
            let mut seen = run.steps[view - 1].observation.to_lowercase();
            for s in &run.steps {
                seen.push('\n');
                seen.push_str(&s.action.to_lowercase());
            }
            terms(&run.task)
                .into_iter()
                // Decimal numbers are prices and limits, which a page states differently.
                .filter(|t| !(t.contains('.') && t.parse::<f64>().is_ok()))
                .filter(|t| !seen.contains(t.as_str()))
                .collect()
        }
    };
    RunAnalysis {
        outcome,
        key_actions,
        no_effect,
        loops,
        finishing,
        last_view,
        unmet_terms,
        env: metadata_str(run, rules::ENV_KEYS),
        family: family(run),
        impossible: rules::IMPOSSIBLE_KEYS
            .iter()
            .any(|k| run.metadata.get(*k) == Some(&serde_json::Value::Bool(true))),
        steps,
    }
}
