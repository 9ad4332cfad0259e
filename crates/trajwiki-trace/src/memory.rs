//! The run memory an agent reads: every insight tagged with its run's outcome, the most similar
//! past runs, and the tools to descend from a lesson to its compilation and raw run. The memory is
//! read-only to the agent.

use std::collections::HashMap;

use serde::Serialize;
use trajwiki_core::{Compilation, Insight, InsightId, Run, RunId};

use crate::analyse::{family, OutcomeClass};
use crate::compile::{citations, quote};

/// One past run with what was compiled from it.
#[derive(Debug, Clone)]
pub struct RunEntry {
    /// The raw run.
    pub run: Run,
    /// Its compilation, once compiled.
    pub compilation: Option<Compilation>,
    /// Its insights, in the compiler's order.
    pub insights: Vec<Insight>,
}

impl RunEntry {
    /// How the run ended.
    pub fn outcome(&self) -> OutcomeClass {
        OutcomeClass::of(&self.run.outcome)
    }
}

/// A failure to assemble a run memory.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MemoryError {
    /// The task vectors do not match the runs.
    #[error("{runs} runs but {vectors} task vectors")]
    VectorCount {
        /// Runs.
        runs: usize,
        /// Vectors.
        vectors: usize,
    },
    /// A vector of another dimension.
    #[error("task vector of run {run} has {got} dimensions, expected {expected}")]
    Dimension {
        /// The run.
        run: RunId,
        /// The first vector's dimension.
        expected: usize,
        /// This one's.
        got: usize,
    },
}

/// Why an agent should open an insight's evidence before acting on it (SPEC §4: it comes from a
/// run that did not succeed, it conflicts with another insight, or it lacks detail).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Descent {
    /// The run it comes from did not succeed.
    FromFailedRun {
        /// How that run ended.
        outcome: OutcomeClass,
    },
    /// Another insight for the same kind of task comes from a run that ended differently.
    Conflicts {
        /// The other insight.
        with: InsightId,
    },
    /// It cites no step, so it cannot be checked without opening the run.
    LacksDetail,
}

/// An insight as the first context shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ContextInsight {
    /// The insight.
    pub id: InsightId,
    /// Its run.
    pub run: RunId,
    /// How that run ended.
    pub outcome: OutcomeClass,
    /// Similarity of that run's task to the new task.
    pub score: f32,
    /// What to do.
    pub guideline: String,
    /// When it applies.
    pub applies_when: String,
    /// Reasons to descend before trusting it; empty when none.
    pub descend: Vec<Descent>,
}

/// A past run as the first context shows it.
#[derive(Debug, Clone, Serialize)]
pub struct SimilarRun {
    /// The run.
    pub run: RunId,
    /// Its id in its source.
    pub external_ref: String,
    /// Its task.
    pub task: String,
    /// How it ended.
    pub outcome: OutcomeClass,
    /// Steps it took.
    pub steps: usize,
    /// Similarity of its task to the new task.
    pub score: f32,
    /// Its diagnosis, when compiled.
    pub diagnosis: Option<String>,
}

/// What an agent starting a new task reads first.
#[derive(Debug, Clone, Serialize)]
pub struct FirstContext {
    /// The insights shown, most relevant first.
    pub insights: Vec<ContextInsight>,
    /// Insights left out to keep within the budget.
    pub omitted: usize,
    /// The most similar past runs.
    pub similar: Vec<SimilarRun>,
    /// The rendered context.
    pub text: String,
}

/// How to assemble a first context.
#[derive(Debug, Clone)]
pub struct ContextOptions {
    /// Similar past runs to show (SPEC: 3).
    pub similar_runs: usize,
    /// Whitespace tokens the insights may take; `None` shows every insight.
    pub budget: Option<usize>,
    /// A run to leave out (the run being replayed, in a leave-one-out evaluation).
    pub exclude: Option<RunId>,
}

impl Default for ContextOptions {
    fn default() -> Self {
        ContextOptions {
            similar_runs: 3,
            budget: None,
            exclude: None,
        }
    }
}

/// A match of [`RunMemory::grep`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GrepHit {
    /// The run.
    pub run: RunId,
    /// 1-based step, or 0 for the task statement.
    pub step: usize,
    /// `task`, `action` or `observation`.
    pub field: &'static str,
    /// The matching text around the match.
    pub excerpt: String,
}

/// An insight opened with its evidence.
#[derive(Debug, Clone)]
pub struct OpenedInsight<'a> {
    /// The insight.
    pub insight: &'a Insight,
    /// Its compilation.
    pub compilation: &'a Compilation,
    /// Its run.
    pub entry: &'a RunEntry,
    /// The steps it cites, 1-based.
    pub cited_steps: Vec<usize>,
}

/// The run memory of one namespace.
#[derive(Debug, Clone)]
pub struct RunMemory {
    entries: Vec<RunEntry>,
    /// Unit task vectors, one per entry.
    vectors: Vec<Vec<f32>>,
    /// The kind of task of each entry: its family when the run names one, else its statement.
    kinds: Vec<String>,
    by_run: HashMap<RunId, usize>,
    by_insight: HashMap<InsightId, (usize, usize)>,
}

/// `v` scaled to unit length (zero stays zero).
fn unit(v: &[f32]) -> Vec<f32> {
    trajwiki_core::centroid([v], v.len())
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

impl RunMemory {
    /// Assembles the memory from its runs and one vector per run's task (any scale; normalised
    /// here).
    pub fn new(entries: Vec<RunEntry>, task_vectors: Vec<Vec<f32>>) -> Result<Self, MemoryError> {
        if entries.len() != task_vectors.len() {
            return Err(MemoryError::VectorCount {
                runs: entries.len(),
                vectors: task_vectors.len(),
            });
        }
        if let Some(first) = task_vectors.first() {
            if let Some((e, v)) = entries
                .iter()
                .zip(&task_vectors)
                .find(|(_, v)| v.len() != first.len())
            {
                return Err(MemoryError::Dimension {
                    run: e.run.id.clone(),
                    expected: first.len(),
                    got: v.len(),
                });
            }
        }
        let by_run = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.run.id.clone(), i))
            .collect();
        let by_insight = entries
            .iter()
            .enumerate()
            .flat_map(|(i, e)| {
                e.insights
                    .iter()
                    .enumerate()
                    .map(move |(j, ins)| (ins.id.clone(), (i, j)))
            })
            .collect();
        let kinds = entries
            .iter()
            .map(|e| match family(&e.run) {
                Some(family) => format!("family {family}"),
                None => format!("task {}", e.run.task.trim().to_lowercase()),
            })
            .collect();
        Ok(RunMemory {
            kinds,
            entries,
            vectors: task_vectors.iter().map(|v| unit(v)).collect(),
            by_run,
            by_insight,
        })
    }

    /// The runs, in the order given.
    pub fn entries(&self) -> &[RunEntry] {
        &self.entries
    }

    /// Insights in all.
    pub fn insight_count(&self) -> usize {
        self.entries.iter().map(|e| e.insights.len()).sum()
    }

    /// Runs ranked by the similarity of their task to `task_vector`, best first, ties by run id.
    pub fn rank_runs(&self, task_vector: &[f32], exclude: Option<&RunId>) -> Vec<(usize, f32)> {
        let q = unit(task_vector);
        let mut scored: Vec<(usize, f32)> = self
            .vectors
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(&self.entries[*i].run.id) != exclude)
            .map(|(i, v)| (i, dot(&q, v)))
            .collect();
        scored.sort_by(|a, b| {
            b.1.total_cmp(&a.1)
                .then_with(|| self.entries[a.0].run.id.cmp(&self.entries[b.0].run.id))
        });
        scored
    }

    /// The first context for a new task whose statement embeds to `task_vector`: every insight
    /// (within the budget), most relevant first, tagged with its run's outcome and with the
    /// reasons to descend; then the most similar past runs.
    pub fn first_context(
        &self,
        task: &str,
        task_vector: &[f32],
        opts: &ContextOptions,
    ) -> FirstContext {
        let ranked = self.rank_runs(task_vector, opts.exclude.as_ref());
        let mut insights: Vec<ContextInsight> = Vec::new();
        let mut kinds: Vec<&str> = Vec::new();
        for &(i, score) in &ranked {
            let e = &self.entries[i];
            for ins in &e.insights {
                let mut descend = Vec::new();
                if e.outcome().is_doubtful() {
                    descend.push(Descent::FromFailedRun {
                        outcome: e.outcome(),
                    });
                }
                if citations(&ins.guideline).is_empty() {
                    descend.push(Descent::LacksDetail);
                }
                kinds.push(&self.kinds[i]);
                insights.push(ContextInsight {
                    id: ins.id.clone(),
                    run: e.run.id.clone(),
                    outcome: e.outcome(),
                    score,
                    guideline: ins.guideline.clone(),
                    applies_when: ins.applies_when.clone(),
                    descend,
                });
            }
        }
        mark_conflicts(&mut insights, &kinds);
        let mut text = format!(
            "# Memory of past runs for: {}\n\n## Insights\n",
            quote(task)
        );
        let mut used = 0usize;
        let mut shown = Vec::new();
        let mut omitted = 0;
        for ins in insights {
            let line = render_insight(&ins);
            let tokens = line.split_whitespace().count();
            // The insights shown are a prefix of the ranking: once one does not fit, the rest
            // (less similar) are left out too, so nothing less relevant jumps the queue.
            if omitted > 0 || opts.budget.is_some_and(|b| used + tokens > b) {
                omitted += 1;
                continue;
            }
            used += tokens;
            text.push_str(&line);
            shown.push(ins);
        }
        if omitted > 0 {
            text.push_str(&format!(
                "({omitted} more insights from less similar runs are not shown; raise the budget to see them.)\n"
            ));
        }
        let similar: Vec<SimilarRun> = ranked
            .iter()
            .take(opts.similar_runs)
            .map(|&(i, score)| {
                let e = &self.entries[i];
                SimilarRun {
                    run: e.run.id.clone(),
                    external_ref: e.run.external_ref.clone(),
                    task: e.run.task.clone(),
                    outcome: e.outcome(),
                    steps: e.run.steps.len(),
                    score,
                    diagnosis: e.compilation.as_ref().map(|c| c.diagnosis.clone()),
                }
            })
            .collect();
        text.push_str("\n## Most similar past runs\n");
        for s in &similar {
            text.push_str(&format!(
                "- {} ({}, {}; {} steps, similarity {:.3}): {}\n",
                s.run,
                s.external_ref,
                s.outcome,
                s.steps,
                s.score,
                quote(&s.task)
            ));
            if let Some(d) = &s.diagnosis {
                text.push_str(&format!("  {d}\n"));
            }
        }
        text.push_str(
            "\nTo check a lesson, open its insight id (its compilation, run and cited steps), open a run id, or search every run's text.\n",
        );
        FirstContext {
            insights: shown,
            omitted,
            similar,
            text,
        }
    }

    /// An insight with its compilation and run.
    pub fn open_insight(&self, id: &InsightId) -> Option<OpenedInsight<'_>> {
        let &(i, j) = self.by_insight.get(id)?;
        let entry = &self.entries[i];
        let insight = &entry.insights[j];
        Some(OpenedInsight {
            insight,
            compilation: entry.compilation.as_ref()?,
            entry,
            cited_steps: citations(&insight.guideline),
        })
    }

    /// A run with its compilation and insights.
    pub fn open_run(&self, id: &RunId) -> Option<&RunEntry> {
        self.by_run.get(id).map(|&i| &self.entries[i])
    }

    /// Case-insensitive exact search of every run's task, actions and observations; at most
    /// `limit` hits, in run order then step order.
    pub fn grep(&self, pattern: &str, limit: usize) -> Vec<GrepHit> {
        let needle = pattern.to_lowercase();
        if needle.trim().is_empty() || limit == 0 {
            return Vec::new();
        }
        let mut out = Vec::new();
        'runs: for e in &self.entries {
            let fields = std::iter::once((0, "task", e.run.task.as_str())).chain(
                e.run.steps.iter().enumerate().flat_map(|(i, s)| {
                    [
                        (i + 1, "action", s.action.as_str()),
                        (i + 1, "observation", s.observation.as_str()),
                    ]
                }),
            );
            for (step, field, text) in fields {
                if let Some(at) = text.to_lowercase().find(&needle) {
                    out.push(GrepHit {
                        run: e.run.id.clone(),
                        step,
                        field,
                        excerpt: excerpt(text, at, needle.len()),
                    });
                    if out.len() >= limit {
                        break 'runs;
                    }
                }
            }
        }
        out
    }
}

/// Two insights for the same kind of task (`kinds`: the same family, or the same statement) from
/// runs that ended differently (one solved, one not) conflict: each is marked for descent, naming
/// the most relevant insight on the other side.
fn mark_conflicts(insights: &mut [ContextInsight], kinds: &[&str]) {
    let mut first_by_kind: HashMap<(&str, bool), usize> = HashMap::new();
    for (i, ins) in insights.iter().enumerate() {
        let solved = ins.outcome == OutcomeClass::Success;
        first_by_kind.entry((kinds[i], solved)).or_insert(i);
    }
    let mut pairs = Vec::new();
    for (i, ins) in insights.iter().enumerate() {
        let solved = ins.outcome == OutcomeClass::Success;
        if let Some(&j) = first_by_kind.get(&(kinds[i], !solved)) {
            pairs.push((i, j));
        }
    }
    for (i, j) in pairs {
        let with = insights[j].id.clone();
        insights[i].descend.push(Descent::Conflicts { with });
    }
}

fn render_insight(ins: &ContextInsight) -> String {
    let mut line = format!(
        "- [{}] {} — when: {} ({}, {})",
        ins.outcome, ins.guideline, ins.applies_when, ins.id, ins.run
    );
    if !ins.descend.is_empty() {
        let why: Vec<String> = ins
            .descend
            .iter()
            .map(|d| match d {
                Descent::FromFailedRun { outcome } => format!("its run ended in {outcome}"),
                Descent::Conflicts { with } => format!("conflicts with {with}"),
                Descent::LacksDetail => "cites no step".to_string(),
            })
            .collect();
        line.push_str(&format!(
            " — descend before trusting it: {}",
            why.join("; ")
        ));
    }
    line.push('\n');
    line
}

fn excerpt(text: &str, at: usize, len: usize) -> String {
    // `at` indexes the lower-cased text; map through char positions so that multi-byte case
    // changes cannot split a character.
    let lower = text.to_lowercase();
    let char_at = lower[..at].chars().count();
    let char_len = lower[at..at + len].chars().count();
    let chars: Vec<char> = text.chars().collect();
    let start = char_at.saturating_sub(40);
    let end = (char_at + char_len + 40).min(chars.len());
    let mut s: String = chars[start..end].iter().collect();
    s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    format!(
        "{}{}{}",
        if start > 0 { "…" } else { "" },
        s,
        if end < chars.len() { "…" } else { "" }
    )
}
