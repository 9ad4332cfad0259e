//! Conversions at the language boundary: records to Python objects, and the arguments that
//! Python callers may pass in more than one shape.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyString;
use serde::Serialize;
use trajwiki_core::EmbedError;
use trajwiki_engine::api::LoadedModel;
use trajwiki_engine::layers::compute::ScoringBackend;
use trajwiki_engine::layers::cuda::Device;
use trajwiki_engine::layers::embed::EmbedOptions;
use trajwiki_engine::layers::memory::MemoryConfig;

use crate::errors::{raise, Kind, OrRaise};

/// A serializable value as plain Python data (dicts, lists, str, int, float, None), through
/// its JSON form.
pub fn to_python(py: Python<'_>, value: &impl Serialize) -> PyResult<Py<PyAny>> {
    let text = serde_json::to_string(value)
        .map_err(|e| raise(Kind::Other, format!("cannot convert a result: {e}")))?;
    Ok(py.import("json")?.call_method1("loads", (text,))?.unbind())
}

/// Plain Python data (dicts, lists, str, numbers; dates and other objects as their `str`) as
/// JSON text.
pub fn to_json_text(value: &Bound<'_, PyAny>, what: &str) -> PyResult<String> {
    let py = value.py();
    let json = py.import("json")?;
    let kwargs = pyo3::types::PyDict::new(py);
    kwargs.set_item("default", py.get_type::<PyString>())?;
    json.call_method("dumps", (value,), Some(&kwargs))
        .and_then(|s| s.extract::<String>())
        .map_err(|e| {
            raise(
                Kind::Input,
                format!("{what} must be JSON-like data (dicts, lists, str, numbers): {e}"),
            )
        })
}

/// A list of strings; a bare `str` (which Python would iterate by character) is refused.
pub fn strings(value: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<String>> {
    if value.is_instance_of::<PyString>() {
        return Err(raise(
            Kind::Input,
            format!("{what} must be a list of str, not a single str"),
        ));
    }
    value.extract::<Vec<String>>().map_err(|_| {
        raise(
            Kind::Input,
            format!("{what} must be a list of str, got {}", type_name(value)),
        )
    })
}

/// A `str` argument.
pub fn string(value: &Bound<'_, PyAny>, what: &str) -> PyResult<String> {
    value.extract::<String>().map_err(|_| {
        raise(
            Kind::Input,
            format!("{what} must be a str, got {}", type_name(value)),
        )
    })
}

fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "an unknown type".into())
}

/// The device to run on: `cpu`, `cuda` or `auto` (a GPU when one is usable, else the CPU).
pub fn device(spec: &str) -> PyResult<Device> {
    Device::from_str(spec).map_err(|e| raise(Kind::Input, e))
}

/// The scoring backend of `device`; `cuda` that cannot run (no GPU, or a wheel built without the
/// `cuda` feature) raises `ModelError` naming why.
pub fn scoring(device: Device) -> PyResult<Arc<dyn ScoringBackend>> {
    trajwiki_engine::layers::cuda::scoring_backend(device).map_err(|e| {
        raise(
            Kind::Model,
            format!("device \"{device}\": {e}; use device=\"cpu\" or \"auto\""),
        )
    })
}

/// Loads `model` for `device` (see `trajwiki_engine::api::load_model`), without the GIL held by the
/// caller.
pub fn load_model(model: &str, device: Device) -> Result<LoadedModel, EmbedError> {
    trajwiki_engine::api::load_model(model, &EmbedOptions::default(), device)
}

/// The memory configuration in a TOML file, or the defaults.
pub fn memory_config(path: Option<PathBuf>) -> PyResult<MemoryConfig> {
    match path {
        Some(p) => MemoryConfig::from_file(&p).or_raise(),
        None => Ok(MemoryConfig::default()),
    }
}
