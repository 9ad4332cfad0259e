//! WikiTrace: memory of past agent runs (SPEC §4).
//!
//! A compiler reads one run at a time and writes a *compilation* (a diagnosis: why the run
//! succeeded or failed) and at most three *insights* (what to do, when it applies). Every insight
//! cites the steps it rests on (`[step 4]`) and resolves to its compilation and raw run, so an
//! agent can descend to the evidence when a lesson is doubtful: when it comes from a run that did
//! not succeed, conflicts with another insight, or lacks detail.
//!
//! - [`analyse`] reads a run step by step through the rules of [`rules`] (data tables);
//! - [`compile`] turns that reading into a compilation: [`DeterministicCompiler`] offline, behind
//!   the [`RunCompiler`] interface an LLM compiler implements too, both held to [`validate`];
//! - [`memory`] is what an agent reads: [`RunMemory::first_context`] (every insight tagged with
//!   its run's outcome, plus the most similar past runs), [`RunMemory::open_insight`],
//!   [`RunMemory::open_run`] and [`RunMemory::grep`].
//!
//! ```
//! use std::collections::BTreeMap;
//! use trajwiki_core::{Namespace, Outcome, Run, Step};
//! use trajwiki_trace::{DeterministicCompiler, RunCompiler};
//!
//! let step = |a: &str, o: &str| Step { action: a.into(), observation: o.into() };
//! let run = Run::new(
//!     Namespace::new("alfworld").unwrap(),
//!     "demo-1".into(),
//!     "put a clean mug in coffeemachine.".into(),
//!     vec![
//!         step("take mug 1 from countertop 1", "Nothing happens."),
//!         step("go to countertop 1", "On the countertop 1, you see a mug 1."),
//!         step("take mug 1 from countertop 1", "You pick up the mug 1 from the countertop 1."),
//!     ],
//!     Outcome { success: Some(true), reward: None },
//!     BTreeMap::new(),
//! );
//! let compiled = DeterministicCompiler.compile(&run).unwrap();
//! trajwiki_trace::validate(&run, &compiled).unwrap();
//! assert!(compiled.compilation.diagnosis.starts_with("Success"));
//! assert!(compiled.insights[0].guideline.contains("had no effect"));
//! assert!(compiled.insights.iter().all(|i| i.guideline.contains("[step")));
//! ```

pub mod analyse;
pub mod compile;
pub mod memory;
pub mod rules;

pub use analyse::{analyse, OutcomeClass, RunAnalysis};
pub use compile::{validate, CompileError, Compiled, DeterministicCompiler, RunCompiler};
pub use memory::{
    ContextInsight, ContextOptions, Descent, FirstContext, GrepHit, MemoryError, OpenedInsight,
    RunEntry, RunMemory, SimilarRun,
};
