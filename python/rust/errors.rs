//! The Python exceptions, and how each Rust error maps onto them.
//!
//! Every exception carries the Rust message followed by its causes (`message: cause: cause`),
//! so the Python side reads what the command line would print.

use std::error::Error;

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::PyErr;
use trajwiki_core::{EmbedError, IdError};
use trajwiki_engine::api::ApiError;
use trajwiki_engine::eval::EvalError;
use trajwiki_engine::messages::MessagesError;
use trajwiki_engine::pipeline::PipelineError;
use trajwiki_engine::trace::TraceError;
use trajwiki_ingest::IngestError;
use trajwiki_memory::{BuildError, ConfigError};
use trajwiki_store::StoreError as RustStoreError;

create_exception!(
    _trajwiki,
    TrajwikiError,
    PyException,
    "Base class of every error trajwiki raises."
);
create_exception!(
    _trajwiki,
    InputError,
    TrajwikiError,
    "Bad input: malformed messages, ids or options, a conflicting re-ingest, wrong types."
);
create_exception!(
    _trajwiki,
    NotFoundError,
    TrajwikiError,
    "An id, namespace, store or wiki that does not exist (or is not built yet)."
);
create_exception!(
    _trajwiki,
    ModelError,
    TrajwikiError,
    "The embedding model could not be found, loaded or run, or the device is unusable."
);
create_exception!(
    _trajwiki,
    StoreError,
    TrajwikiError,
    "The store failed: the database, its files, or a record changed outside trajwiki."
);

/// Which exception an error becomes.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// [`InputError`].
    Input,
    /// [`NotFoundError`].
    NotFound,
    /// [`ModelError`].
    Model,
    /// [`StoreError`].
    Store,
    /// [`TrajwikiError`] itself.
    Other,
}

/// The message of an error and its causes, each once.
fn chain(err: &dyn Error) -> String {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(c) = cause {
        let part = c.to_string();
        if !text.ends_with(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        cause = c.source();
    }
    text
}

/// Raises `kind` with `message`.
pub fn raise(kind: Kind, message: impl Into<String>) -> PyErr {
    let message = message.into();
    match kind {
        Kind::Input => InputError::new_err(message),
        Kind::NotFound => NotFoundError::new_err(message),
        Kind::Model => ModelError::new_err(message),
        Kind::Store => StoreError::new_err(message),
        Kind::Other => TrajwikiError::new_err(message),
    }
}

/// A Rust error that has its place in the hierarchy.
pub trait Classify: Error {
    /// Its exception class.
    fn kind(&self) -> Kind;

    /// The Python exception.
    fn into_py_err(self) -> PyErr
    where
        Self: Sized,
    {
        raise(self.kind(), chain(&self))
    }
}

impl Classify for RustStoreError {
    fn kind(&self) -> Kind {
        match self {
            RustStoreError::Conflict { .. }
            | RustStoreError::Dangling { .. }
            | RustStoreError::TooManyInsights { .. }
            | RustStoreError::Foreign { .. }
            | RustStoreError::NeedsUpgrade { .. }
            | RustStoreError::ReadOnly { .. }
            | RustStoreError::Location { .. } => Kind::Input,
            RustStoreError::NotAStore { .. } => Kind::NotFound,
            _ => Kind::Store,
        }
    }
}

impl Classify for EmbedError {
    fn kind(&self) -> Kind {
        Kind::Model
    }
}

impl Classify for IngestError {
    fn kind(&self) -> Kind {
        Kind::Input
    }
}

impl Classify for MessagesError {
    fn kind(&self) -> Kind {
        match self {
            MessagesError::Shape(_) => Kind::Input,
            MessagesError::Ingest(e) => e.kind(),
            MessagesError::Key { .. } => Kind::Input,
        }
    }
}

impl Classify for ConfigError {
    fn kind(&self) -> Kind {
        Kind::Input
    }
}

impl Classify for IdError {
    fn kind(&self) -> Kind {
        Kind::Input
    }
}

impl Classify for PipelineError {
    fn kind(&self) -> Kind {
        match self {
            PipelineError::Store(e) => e.kind(),
            PipelineError::Build(BuildError::Embed { .. } | BuildError::EmbedCount { .. }) => {
                Kind::Model
            }
            PipelineError::Build(_) | PipelineError::Index(_) => Kind::Other,
            PipelineError::Empty(_) => Kind::NotFound,
            PipelineError::Stale { .. } | PipelineError::ModelMismatch { .. } => Kind::Input,
            // The memory is committed; what failed after it decides the kind.
            PipelineError::Unfinished { source, .. } => source.kind(),
        }
    }
}

impl Classify for ApiError {
    fn kind(&self) -> Kind {
        match self {
            ApiError::Id(_) | ApiError::NoHistory(_) | ApiError::Limit(_) => Kind::Input,
            ApiError::NotFound { .. }
            | ApiError::UnknownNamespace { .. }
            | ApiError::NotBuilt(_) => Kind::NotFound,
            ApiError::Store(e) => e.kind(),
            ApiError::Pipeline(e) => e.kind(),
            ApiError::Retrieve(_) | ApiError::Panicked { .. } => Kind::Other,
            ApiError::Replay(_) | ApiError::StoredConfig { .. } => Kind::Store,
            ApiError::Model(_) => Kind::Model,
        }
    }
}

impl Classify for EvalError {
    fn kind(&self) -> Kind {
        match self {
            EvalError::Input(_) | EvalError::ZeroBudget | EvalError::NoSamples => Kind::Input,
            EvalError::Pipeline(e) => e.kind(),
            EvalError::Api(e) => e.kind(),
            EvalError::Store(e) => e.kind(),
            EvalError::Retrieve(_) | EvalError::Io { .. } => Kind::Other,
        }
    }
}

impl Classify for TraceError {
    fn kind(&self) -> Kind {
        match self {
            TraceError::Pipeline(e) => e.kind(),
            TraceError::Partial { source, .. } => source.kind(),
            TraceError::Compile(_) | TraceError::Memory(_) => Kind::Other,
            TraceError::NoRuns(_)
            | TraceError::NotCompiled(_)
            | TraceError::NotInNamespace { .. }
            | TraceError::Unknown { .. } => Kind::NotFound,
        }
    }
}

/// `?` for results whose error is classified.
pub trait OrRaise<T> {
    /// The value, or the mapped Python exception.
    fn or_raise(self) -> Result<T, PyErr>;
}

impl<T, E: Classify> OrRaise<T> for Result<T, E> {
    fn or_raise(self) -> Result<T, PyErr> {
        self.map_err(Classify::into_py_err)
    }
}
