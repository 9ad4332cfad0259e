//! The Python exceptions, and how each Rust error maps onto them.
//!
//! Every exception carries the Rust message followed by its causes (`message: cause: cause`),
//! so the Python side reads what the command line would print.

use std::error::Error;

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::PyErr;
use trajwiki_engine::failure::{self, FailureClass};

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

/// The exception of an engine error: its class as the engine decides it for every face
/// ([`trajwiki_engine::failure`]), its message followed by its causes.
fn exception(err: &(dyn Error + 'static)) -> PyErr {
    let kind = match failure::kind(err).class() {
        FailureClass::Input => Kind::Input,
        FailureClass::NotFound => Kind::NotFound,
        FailureClass::Model => Kind::Model,
        FailureClass::Store => Kind::Store,
        FailureClass::Other => Kind::Other,
    };
    raise(kind, failure::chain(err))
}

/// `?` for results whose error is one of the engine's.
pub trait OrRaise<T> {
    /// The value, or the mapped Python exception.
    fn or_raise(self) -> Result<T, PyErr>;
}

impl<T, E: Error + 'static> OrRaise<T> for Result<T, E> {
    fn or_raise(self) -> Result<T, PyErr> {
        self.map_err(|e| exception(&e))
    }
}
