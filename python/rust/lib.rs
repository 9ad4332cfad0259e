//! The `trajwiki._trajwiki` extension module: trajwiki's memory, embedder and evaluation for
//! Python.
//!
//! The Python package `trajwiki` re-exports everything here. Each class wraps the same library
//! calls the command line makes (`trajwiki_engine::api`, `trajwiki_engine::pipeline`, `trajwiki_engine::eval`), so a
//! result from Python is the result the CLI prints. Every call that does real work releases the
//! GIL; every Rust error becomes one of a small hierarchy of exceptions rooted at
//! `TrajwikiError`, carrying the Rust message and its causes.
//!
//! - `Memory(path, model=, device=)`: `add`, `build`, `search`, `get`, `history`, `wiki`,
//!   `delete`, `namespaces`.
//! - `Embedder(model=, device=)`: `embed(texts, kind=)` into a NumPy array without copying.
//! - `eval_locomo(data, out, ...)`: `trajwiki eval locomo`, file for file.

mod convert;
mod embedder;
mod errors;
mod eval;
mod memory;
mod results;

use pyo3::prelude::*;

/// The extension module.
#[pymodule]
fn _trajwiki(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add(
        "DEFAULT_MODEL",
        trajwiki_engine::layers::embed::DEFAULT_MODEL,
    )?;
    m.add(
        "MODES",
        trajwiki_engine::layers::retrieve::Mode::ALL
            .map(|m| m.name())
            .to_vec(),
    )?;
    m.add("TrajwikiError", py.get_type::<errors::TrajwikiError>())?;
    m.add("InputError", py.get_type::<errors::InputError>())?;
    m.add("NotFoundError", py.get_type::<errors::NotFoundError>())?;
    m.add("ModelError", py.get_type::<errors::ModelError>())?;
    m.add("StoreError", py.get_type::<errors::StoreError>())?;
    m.add_class::<memory::Memory>()?;
    m.add_class::<embedder::Embedder>()?;
    m.add_class::<results::SearchResult>()?;
    m.add_class::<results::Evidence>()?;
    m.add_class::<results::EvidenceClaim>()?;
    m.add_class::<results::PathItem>()?;
    m.add_function(wrap_pyfunction!(eval::eval_locomo, m)?)?;
    Ok(())
}
