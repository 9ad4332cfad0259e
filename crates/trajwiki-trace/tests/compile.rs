//! The deterministic compiler on small hand-written runs, the validation every compiler is held
//! to, a property test over random runs, and every real run of `../shared/data/runs`.

use std::collections::BTreeMap;
use std::path::Path;

use proptest::prelude::*;
use trajwiki_core::{Namespace, Outcome, Run, Step};
use trajwiki_trace::compile::{citations, insight_id, MAX_INSIGHTS};
use trajwiki_trace::{analyse, validate, DeterministicCompiler, OutcomeClass, RunCompiler};

fn run(task: &str, steps: &[(&str, &str)], success: Option<bool>, reward: Option<f64>) -> Run {
    Run::new(
        Namespace::new("shop").unwrap(),
        format!("r-{task}"),
        task.into(),
        steps
            .iter()
            .map(|(a, o)| Step {
                action: a.to_string(),
                observation: o.to_string(),
            })
            .collect(),
        Outcome { success, reward },
        BTreeMap::new(),
    )
}

const PAGE: &str = "[Back to Search] Page 1 [B01] Blue cotton shirt, size large $12.00 [B02] Red wool scarf $30.00";

#[test]
fn outcomes_are_classified_from_success_and_reward() {
    let of = |success, reward| OutcomeClass::of(&Outcome { success, reward });
    assert_eq!(of(Some(true), None), OutcomeClass::Success);
    assert_eq!(of(None, Some(1.0)), OutcomeClass::Success);
    assert_eq!(
        of(Some(false), Some(0.75)),
        OutcomeClass::Partial { reward: 0.75 }
    );
    assert_eq!(of(Some(false), Some(0.0)), OutcomeClass::Failure);
    assert_eq!(of(Some(false), None), OutcomeClass::Failure);
    assert_eq!(of(None, None), OutcomeClass::Unknown);
}

#[test]
fn a_partial_purchase_names_the_terms_the_chosen_page_never_showed() {
    let r = run(
        "i need a green cotton shirt in size large, price lower than 20.00 dollars",
        &[
            ("search[cotton shirt large]", PAGE),
            ("think[B01 looks right]", "OK."),
            (
                "click[B01]",
                "[Back to Search] size [small][large] Blue cotton shirt $12.00 [Buy Now]",
            ),
            ("click[large]", "You have clicked large."),
            ("click[Buy Now]", "Your score (min 0.0, max 1.0): 0.5"),
        ],
        Some(false),
        Some(0.5),
    );
    let a = analyse(&r);
    assert_eq!(a.key_actions, [1, 3, 4, 5]);
    assert_eq!(a.finishing, Some(5));
    assert_eq!(a.last_view, Some(3));
    // "20.00" is a price limit, not a term a page shows verbatim.
    assert_eq!(a.unmet_terms, ["green"]);
    let c = DeterministicCompiler.compile(&r).unwrap();
    assert!(c.compilation.diagnosis.starts_with("Partial (reward 0.5)"));
    assert!(
        c.insights[0].guideline.contains("\"green\""),
        "{}",
        c.insights[0].guideline
    );
    assert_eq!(citations(&c.insights[0].guideline), [5, 3]);
    assert!(c.insights[1]
        .guideline
        .starts_with("A path that ended in partial"));
    assert!(c.insights[0].applies_when.starts_with("shop tasks like"));
}

#[test]
fn a_run_that_never_finishes_is_told_to_commit() {
    let r = run(
        "a red scarf",
        &[("search[red scarf]", PAGE), ("click[Next >]", PAGE)],
        Some(false),
        Some(0.0),
    );
    let c = DeterministicCompiler.compile(&r).unwrap();
    assert!(c.compilation.diagnosis.contains("It never finished"));
    assert!(c.insights[0].guideline.starts_with("Commit to a choice"));
    assert_eq!(citations(&c.insights[0].guideline), [2]);
}

#[test]
fn no_effect_steps_and_the_recovery_become_a_lesson() {
    let r = run(
        "put a mug in the cabinet",
        &[
            ("put mug 1 in/on cabinet 1", "Nothing happens."),
            ("go to cabinet 1", "The cabinet 1 is closed."),
            ("open cabinet 1", "You open the cabinet 1."),
            (
                "put mug 1 in/on cabinet 1",
                "You put the mug 1 in/on the cabinet 1.",
            ),
        ],
        Some(true),
        None,
    );
    let a = analyse(&r);
    assert_eq!(a.no_effect, [1]);
    assert!(a.loops.is_empty());
    let c = DeterministicCompiler.compile(&r).unwrap();
    assert_eq!(c.insights.len(), 2);
    assert!(c.insights[0]
        .guideline
        .contains("had no effect (\"Nothing happens.\") [step 1]"));
    assert!(c.insights[0]
        .guideline
        .contains("`go to cabinet 1` [step 2]"));
    assert!(c.insights[1]
        .guideline
        .starts_with("A path that solved this task in 4 steps"));
}

#[test]
fn only_a_repeat_without_progress_is_a_loop() {
    // Returning to a place after doing something there is progress; asking the same thing
    // twice in a row for the same answer is not.
    let r = run(
        "find the key",
        &[
            ("go to desk 1", "On the desk 1, you see a pen."),
            ("go to shelf 1", "On the shelf 1, you see a key."),
            ("go to desk 1", "On the desk 1, you see a pen."),
            ("look", "You are facing the desk 1."),
            ("look", "You are facing the desk 1."),
            ("think: still nothing", "OK."),
            ("look", "You are facing the desk 1."),
        ],
        Some(false),
        None,
    );
    let a = analyse(&r);
    assert_eq!(a.loops, vec![vec![4, 5, 7]]);
    let c = DeterministicCompiler.compile(&r).unwrap();
    assert!(c.insights.iter().any(|i| i
        .guideline
        .starts_with("Do not repeat `look`: it returned the same result 3 times [steps 4, 5, 7]")));
}

#[test]
fn a_run_without_steps_gets_a_diagnosis_and_no_insight() {
    let mut r = run("Craft an item of type: andesite", &[], None, None);
    r.metadata
        .insert("impossible".into(), serde_json::Value::Bool(true));
    let c = DeterministicCompiler.compile(&r).unwrap();
    assert!(c.insights.is_empty());
    assert!(c
        .compilation
        .diagnosis
        .contains("its source marks the task as impossible"));
}

#[test]
fn validation_refuses_what_no_compiler_may_write() {
    let r = run(
        "put a mug in the cabinet",
        &[
            ("put mug 1 in/on cabinet 1", "Nothing happens."),
            (
                "put mug 1 in/on cabinet 1",
                "You put the mug 1 in/on the cabinet 1.",
            ),
        ],
        Some(true),
        None,
    );
    let good = DeterministicCompiler.compile(&r).unwrap();
    validate(&r, &good).unwrap();
    let broken = |f: &dyn Fn(&mut trajwiki_trace::Compiled)| {
        let mut c = good.clone();
        f(&mut c);
        validate(&r, &c).unwrap_err().to_string()
    };
    assert!(broken(&|c| c.insights[0].guideline = "see [step 3]".into())
        .contains("cites step 3, but the run has 2 steps"));
    assert!(broken(&|c| c.insights[0].guideline = "see [step 0]".into()).contains("cites step 0"));
    assert!(broken(&|c| c.insights[0].guideline = "be careful".into()).contains("cites no step"));
    assert!(broken(&|c| c.insights[0].applies_when = " ".into()).contains("empty applies_when"));
    assert!(broken(&|c| c.compilation.diagnosis = String::new()).contains("diagnosis is empty"));
    assert!(broken(&|c| {
        let extra = c.insights[0].clone();
        c.insights = vec![extra.clone(), extra.clone(), extra.clone(), extra];
    })
    .contains("4 insights (at most 3)"));
    assert!(broken(&|c| {
        let mut copy = c.insights[0].clone();
        copy.id = insight_id(&r, &c.compilation.id, 1);
        c.insights = vec![c.insights[0].clone(), copy];
    })
    .contains("repeats an earlier insight"));
    let other = run("another task", &[("look", "x")], Some(true), None);
    assert!(
        broken(&|c| c.insights[0].run = other.id.clone()).contains("another compilation or run")
    );
    let err = validate(&other, &good).unwrap_err().to_string();
    assert!(
        err.contains(&format!("run {} (r-another task)", other.id)),
        "{err}"
    );
}

fn arb_run() -> impl Strategy<Value = Run> {
    let actions = prop::sample::select(vec![
        "search[blue shirt]",
        "click[B01]",
        "click[Buy Now]",
        "think[hmm]",
        "go to desk 1",
        "look",
        "take pen 1 from desk 1",
    ]);
    let observations = prop::sample::select(vec![
        "OK.",
        "Nothing happens.",
        "Invalid action!",
        "",
        PAGE,
        "On the desk 1, you see a pen 1 and a blue shirt.",
    ]);
    (
        prop::collection::vec((actions, observations), 0..20),
        prop::option::of(any::<bool>()),
        prop::option::of(0.0f64..=1.0),
    )
        .prop_map(|(steps, success, reward)| {
            let steps: Vec<(&str, &str)> = steps.into_iter().collect();
            run("buy a green shirt for the desk", &steps, success, reward)
        })
}

proptest! {
    #[test]
    fn every_compilation_is_valid_bounded_cited_and_deterministic(r in arb_run()) {
        let c = DeterministicCompiler.compile(&r).unwrap();
        prop_assert!(c.insights.len() <= MAX_INSIGHTS);
        validate(&r, &c).unwrap();
        for i in &c.insights {
            let cited = citations(&i.guideline);
            prop_assert!(!cited.is_empty());
            prop_assert!(cited.iter().all(|&p| p >= 1 && p <= r.steps.len()));
        }
        prop_assert_eq!(DeterministicCompiler.compile(&r).unwrap(), c);
    }
}

#[test]
fn every_real_run_compiles_validly() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/runs");
    if !dir.is_dir() {
        eprintln!("skipping: {} is absent", dir.display());
        return;
    }
    let mut runs = 0;
    let mut insights = 0;
    for f in [
        "react_webshop_500.jsonl",
        "alfworld_react_demos.jsonl",
        "plancraft_val_small_oracle.jsonl",
    ] {
        for r in trajwiki_ingest::jsonl::read_runs(&dir.join(f), None).unwrap() {
            let c = DeterministicCompiler.compile(&r).unwrap();
            validate(&r, &c).unwrap();
            runs += 1;
            insights += c.insights.len();
            // Every run that took a step leaves at least one lesson.
            assert!(
                r.steps.is_empty() || !c.insights.is_empty(),
                "{}",
                r.external_ref
            );
        }
    }
    assert_eq!(runs, 646);
    assert!(insights >= runs - 20, "{insights} insights");
}
