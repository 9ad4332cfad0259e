//! The LoCoMo evaluation, exactly as `trajwiki eval locomo` runs it.

use std::path::PathBuf;

use pyo3::prelude::*;
use trajwiki_engine::eval::{grid, run_locomo, summary_table, EvalOptions};
use trajwiki_engine::layers::retrieve::RetrievalConfig;

use crate::convert::{device, memory_config, to_python};
use crate::errors::OrRaise;
use crate::memory::parse_mode;

/// Runs `trajwiki eval locomo` with the same options: writes `retrieval.jsonl`, `summary.json`
/// and `report.md` to `out` (the store defaults to `out/store`) and returns the summary and the
/// table the command line prints. `budgets` and `modes` default to those of the command line.
#[pyfunction]
#[pyo3(signature = (data, out, *, store = None, budgets = None, modes = None, model = "minilm", config = None, device = "auto"))]
#[allow(clippy::too_many_arguments)]
pub fn eval_locomo(
    py: Python<'_>,
    data: PathBuf,
    out: PathBuf,
    store: Option<PathBuf>,
    budgets: Option<Vec<usize>>,
    modes: Option<Vec<String>>,
    model: &str,
    config: Option<PathBuf>,
    device: &str,
) -> PyResult<(Py<PyAny>, String)> {
    let device = self::device(device)?;
    let scoring = crate::convert::scoring(device)?;
    let modes = modes
        .unwrap_or_default()
        .iter()
        .map(|m| parse_mode(m))
        .collect::<PyResult<Vec<_>>>()?;
    let (budgets, modes) = grid(&budgets.unwrap_or_default(), &modes).or_raise()?;
    let memory = memory_config(config)?;
    let summary = py.detach(|| -> PyResult<_> {
        let embedder = crate::convert::load_model(model, device)
            .or_raise()?
            .embedder;
        run_locomo(&EvalOptions {
            data,
            store: store.unwrap_or_else(|| out.join("store")),
            out,
            budgets: budgets.clone(),
            modes: modes.clone(),
            memory,
            vectors: Default::default(),
            retrieval: RetrievalConfig::default(),
            embedder: embedder.as_ref(),
            scoring: scoring.as_ref(),
            progress: &|_, _| {},
            answers: None,
        })
        .or_raise()
    })?;
    let table = summary_table(&summary, &modes, &budgets);
    Ok((to_python(py, &summary)?, table))
}
