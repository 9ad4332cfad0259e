//! The run memory an agent reads: first context (every insight tagged with its outcome, the
//! reasons to descend, the similar runs), opening an insight down to its steps, exact search.

use std::collections::BTreeMap;

use trajwiki_core::{InsightId, Namespace, Outcome, Run, RunId, Step};
use trajwiki_trace::{
    ContextOptions, Descent, DeterministicCompiler, MemoryError, OutcomeClass, RunCompiler,
    RunEntry, RunMemory,
};

fn run(id: &str, task: &str, steps: &[(&str, &str)], success: bool, family: &str) -> Run {
    let mut metadata = BTreeMap::new();
    metadata.insert("task_type".into(), serde_json::json!(family));
    Run::new(
        Namespace::new("alfworld").unwrap(),
        id.into(),
        task.into(),
        steps
            .iter()
            .map(|(a, o)| Step {
                action: a.to_string(),
                observation: o.to_string(),
            })
            .collect(),
        Outcome {
            success: Some(success),
            reward: None,
        },
        metadata,
    )
}

fn entry(r: Run) -> RunEntry {
    let c = DeterministicCompiler.compile(&r).unwrap();
    RunEntry {
        run: r,
        compilation: Some(c.compilation),
        insights: c.insights,
    }
}

/// Three runs: two heat tasks (one solved, one failed) and a clean task; task vectors on three
/// axes so that similarity is known exactly.
fn memory() -> RunMemory {
    let entries = vec![
        entry(run(
            "heat-ok",
            "heat some egg and put it in garbagecan.",
            &[
                ("heat egg 1 with microwave 1", "Nothing happens."),
                ("take egg 1 from countertop 1", "You pick up the egg 1."),
                (
                    "heat egg 1 with microwave 1",
                    "You heat the egg 1 using the microwave 1.",
                ),
            ],
            true,
            "pick_heat_then_place",
        )),
        entry(run(
            "heat-fail",
            "heat some mug and put it in cabinet.",
            &[
                ("go to microwave 1", "The microwave 1 is closed."),
                ("look", "Nothing happens."),
            ],
            false,
            "pick_heat_then_place",
        )),
        entry(run(
            "clean-ok",
            "clean some plate and put it in shelf.",
            &[(
                "clean plate 1 with sinkbasin 1",
                "You clean the plate 1 using the sinkbasin 1.",
            )],
            true,
            "pick_clean_then_place",
        )),
    ];
    RunMemory::new(
        entries,
        vec![
            vec![1.0, 0.1, 0.0],
            vec![0.9, 0.0, 0.3],
            vec![0.0, 1.0, 0.0],
        ],
    )
    .unwrap()
}

#[test]
fn the_first_context_holds_every_insight_most_similar_first_with_reasons_to_descend() {
    let m = memory();
    let ctx = m.first_context(
        "heat a potato",
        &[1.0, 0.0, 0.0],
        &ContextOptions::default(),
    );
    assert_eq!(ctx.insights.len(), m.insight_count());
    assert_eq!(ctx.omitted, 0);
    let runs: Vec<&str> = ctx
        .similar
        .iter()
        .map(|s| s.external_ref.as_str())
        .collect();
    assert_eq!(runs, ["heat-ok", "heat-fail", "clean-ok"]);
    // Insights follow their runs' similarity.
    assert_eq!(ctx.insights[0].run, m.entries()[0].run.id);
    assert_eq!(ctx.insights.last().unwrap().run, m.entries()[2].run.id);
    // The failed run's insights ask for a descent, and conflict with the solved heat run's.
    let failed: Vec<_> = ctx
        .insights
        .iter()
        .filter(|i| i.outcome == OutcomeClass::Failure)
        .collect();
    assert!(!failed.is_empty());
    for i in &failed {
        assert!(i.descend.contains(&Descent::FromFailedRun {
            outcome: OutcomeClass::Failure
        }));
        assert!(i
            .descend
            .iter()
            .any(|d| matches!(d, Descent::Conflicts { .. })));
    }
    // ... and the solved heat run's insights conflict with the failed run's.
    assert!(ctx.insights[0]
        .descend
        .iter()
        .any(|d| matches!(d, Descent::Conflicts { with } if failed.iter().any(|f| &f.id == with))));
    let clean = ctx.insights.last().unwrap();
    assert!(clean.descend.is_empty(), "{:?}", clean.descend);
    assert!(ctx.text.contains("[failure]") && ctx.text.contains("[success]"));
    assert!(ctx
        .text
        .contains("descend before trusting it: its run ended in failure"));
    assert!(ctx.text.contains("## Most similar past runs"));
}

#[test]
fn a_budget_leaves_out_the_least_similar_insights_and_says_so() {
    let m = memory();
    let all = m.first_context("t", &[1.0, 0.0, 0.0], &ContextOptions::default());
    let first = all.text.lines().find(|l| l.starts_with("- [")).unwrap();
    let budget = first.split_whitespace().count();
    let ctx = m.first_context(
        "t",
        &[1.0, 0.0, 0.0],
        &ContextOptions {
            budget: Some(budget),
            ..ContextOptions::default()
        },
    );
    assert_eq!(ctx.insights.len(), 1);
    assert_eq!(ctx.omitted, m.insight_count() - 1);
    // A budget one token short of the first two insights shows the first only, even where a
    // shorter, less similar insight would still fit.
    let lines: Vec<&str> = all.text.lines().filter(|l| l.starts_with("- [")).collect();
    let two = lines[0].split_whitespace().count() + lines[1].split_whitespace().count();
    let shortest = lines[2..]
        .iter()
        .map(|l| l.split_whitespace().count())
        .min()
        .unwrap();
    assert!(shortest < lines[1].split_whitespace().count());
    let ctx = m.first_context(
        "t",
        &[1.0, 0.0, 0.0],
        &ContextOptions {
            budget: Some(two - 1),
            ..ContextOptions::default()
        },
    );
    assert_eq!(ctx.insights.len(), 1);
    assert_eq!(ctx.insights[0].id, all.insights[0].id);
    assert!(ctx
        .text
        .contains(&format!("({} more insights", ctx.omitted)));
}

#[test]
fn a_run_can_be_left_out_of_its_own_context() {
    let m = memory();
    let own = m.entries()[0].run.id.clone();
    let ctx = m.first_context(
        "t",
        &[1.0, 0.0, 0.0],
        &ContextOptions {
            exclude: Some(own.clone()),
            similar_runs: 1,
            ..ContextOptions::default()
        },
    );
    assert!(ctx.insights.iter().all(|i| i.run != own));
    assert_eq!(ctx.similar.len(), 1);
    assert_eq!(ctx.similar[0].external_ref, "heat-fail");
}

#[test]
fn an_insight_opens_to_its_compilation_run_and_cited_steps() {
    let m = memory();
    let ins = &m.entries()[0].insights[0];
    let opened = m.open_insight(&ins.id).unwrap();
    assert_eq!(opened.compilation.id, ins.compilation);
    assert_eq!(opened.entry.run.external_ref, "heat-ok");
    assert_eq!(opened.cited_steps, [1, 2]);
    for &s in &opened.cited_steps {
        assert!(s <= opened.entry.run.steps.len());
    }
    let ns = Namespace::new("alfworld").unwrap();
    assert!(m.open_insight(&InsightId::derive(&ns, "nope")).is_none());
    assert!(m.open_run(&RunId::derive(&ns, "nope")).is_none());
    assert_eq!(
        m.open_run(&m.entries()[2].run.id).unwrap().run.external_ref,
        "clean-ok"
    );
}

#[test]
fn grep_finds_tasks_actions_and_observations_case_insensitively() {
    let m = memory();
    let hits = m.grep("MICROWAVE 1", 10);
    let at: Vec<(&str, usize, &str)> = hits
        .iter()
        .map(|h| {
            let r = &m.open_run(&h.run).unwrap().run;
            (r.external_ref.as_str(), h.step, h.field)
        })
        .collect();
    assert_eq!(
        at,
        [
            ("heat-ok", 1, "action"),
            ("heat-ok", 3, "action"),
            ("heat-ok", 3, "observation"),
            ("heat-fail", 1, "action"),
            ("heat-fail", 1, "observation"),
        ]
    );
    assert!(hits[2].excerpt.contains("using the microwave 1"));
    assert_eq!(m.grep("plate", 1).len(), 1);
    assert_eq!(m.grep("plate", 10)[0].field, "task");
    assert!(m.grep("  ", 10).is_empty());
    assert!(m.grep("zebra", 10).is_empty());
}

#[test]
fn vectors_must_match_the_runs() {
    let e = entry(run("a", "t", &[("look", "x")], true, "f"));
    assert_eq!(
        RunMemory::new(vec![e.clone()], vec![]).unwrap_err(),
        MemoryError::VectorCount {
            runs: 1,
            vectors: 0
        }
    );
    let e2 = entry(run("b", "u", &[("look", "y")], true, "f"));
    let err = RunMemory::new(vec![e, e2], vec![vec![1.0, 0.0], vec![1.0]]).unwrap_err();
    assert!(
        err.to_string().contains("has 1 dimensions, expected 2"),
        "{err}"
    );
}
