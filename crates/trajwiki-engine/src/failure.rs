//! What kind of failure an error is, decided once, here, for every error the engine's
//! operations return. Each face maps a kind its own way — the server to an HTTP status and a
//! stable code, the command line to an exit code (2 for the caller's input), Python to an
//! exception class — so that one failure reads the same through every door.
//!
//! [`kind_of`] looks through the wrappers (an `ApiError` holding a store error, a build that
//! failed after its commit) to the error that decides: a conflicting write is a conflict
//! whether an append, a build or an evaluation met it.

use std::error::Error;

use trajwiki_core::limits::LimitError;
use trajwiki_core::{EmbedError, IdError};
use trajwiki_ingest::IngestError;
use trajwiki_memory::{BuildError, ConfigError};
use trajwiki_retrieve::IndexError;
use trajwiki_store::StoreError;

use crate::api::ApiError;
use crate::eval::EvalError;
use crate::messages::MessagesError;
use crate::pipeline::PipelineError;
use crate::trace::TraceError;

/// A kind of failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// Malformed input: a message, an option, a file, a configuration.
    BadInput,
    /// A namespace name or record id that is not one.
    BadId,
    /// A body, text or count over its limit.
    TooLarge,
    /// No record with that id (in the namespace).
    NotFound,
    /// A namespace without messages.
    UnknownNamespace,
    /// A namespace without agent runs asked for runs.
    NoRuns,
    /// A namespace not built yet.
    NotBuilt,
    /// Runs not compiled yet.
    NotCompiled,
    /// The history of a record that has none.
    NoHistory,
    /// A namespace built with another embedding model than the one asked with.
    ModelMismatch,
    /// A memory built with another model or configuration, which only a rebuild replaces.
    Stale,
    /// A record with a stored one's identity and other content.
    Conflict,
    /// A session that holds a message at its last position.
    SessionFull,
    /// A write to a store opened read only.
    ReadOnly,
    /// No store where one was named.
    NoStore,
    /// A store this build cannot use as asked: another program's database, a schema to
    /// upgrade or newer than this build, a location that is not one, files it may not read.
    UnusableStore,
    /// The store was moved or replaced while it was held open.
    StoreMoved,
    /// The disk holding the store is full.
    StorageFull,
    /// The store failed: its database, its files, a record changed outside trajwiki.
    Store,
    /// No embedding model as named: not found, not one, or a setting it does not take.
    NoModel,
    /// The embedding model failed as it ran, or its device is unusable.
    Model,
    /// A failure of trajwiki's own.
    Internal,
}

/// The exception class a kind is raised as in Python.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureClass {
    /// `InputError`.
    Input,
    /// `NotFoundError`.
    NotFound,
    /// `ModelError`.
    Model,
    /// `StoreError`.
    Store,
    /// `TrajwikiError` itself.
    Other,
}

impl FailureKind {
    /// Whether the caller's input caused it (the command line exits 2).
    pub fn is_input(self) -> bool {
        !matches!(
            self,
            FailureKind::StoreMoved
                | FailureKind::StorageFull
                | FailureKind::Store
                | FailureKind::Model
                | FailureKind::Internal
        )
    }

    /// Its Python exception class.
    pub fn class(self) -> FailureClass {
        use FailureKind::*;
        match self {
            BadInput | BadId | TooLarge | NoHistory | ModelMismatch | Stale | Conflict
            | SessionFull | ReadOnly | UnusableStore => FailureClass::Input,
            NotFound | UnknownNamespace | NoRuns | NotBuilt | NotCompiled | NoStore => {
                FailureClass::NotFound
            }
            NoModel | Model => FailureClass::Model,
            StoreMoved | StorageFull | Store => FailureClass::Store,
            Internal => FailureClass::Other,
        }
    }
}

/// The kind of `err`, when it is one of the errors the engine's operations return (or one of
/// the crates' beneath them); `None` for any other (a face's own, an I/O error of its own).
pub fn kind_of(err: &(dyn Error + 'static)) -> Option<FailureKind> {
    macro_rules! try_kind {
        ($($ty:ty => $f:expr),+ $(,)?) => {
            $(if let Some(e) = err.downcast_ref::<$ty>() {
                return Some($f(e));
            })+
        };
    }
    try_kind!(
        ApiError => api,
        PipelineError => pipeline,
        StoreError => store,
        TraceError => trace,
        EvalError => eval,
        MessagesError => |_: &MessagesError| FailureKind::BadInput,
        IngestError => |_: &IngestError| FailureKind::BadInput,
        ConfigError => |_: &ConfigError| FailureKind::BadInput,
        IdError => |_: &IdError| FailureKind::BadId,
        LimitError => |_: &LimitError| FailureKind::TooLarge,
        EmbedError => embed,
        BuildError => build,
        IndexError => |_: &IndexError| FailureKind::Internal,
    );
    None
}

/// The kind of `err`, or [`FailureKind::Internal`] for an error the engine does not know.
pub fn kind(err: &(dyn Error + 'static)) -> FailureKind {
    kind_of(err).unwrap_or(FailureKind::Internal)
}

/// An error's message followed by its causes, each once: `what: why: …`.
pub fn chain(err: &dyn Error) -> String {
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

fn api(e: &ApiError) -> FailureKind {
    match e {
        ApiError::Id(_) => FailureKind::BadId,
        ApiError::NotFound { .. } => FailureKind::NotFound,
        ApiError::UnknownNamespace { .. } => FailureKind::UnknownNamespace,
        ApiError::NotBuilt(_) => FailureKind::NotBuilt,
        ApiError::NoHistory(_) => FailureKind::NoHistory,
        ApiError::Limit(_) => FailureKind::TooLarge,
        ApiError::Store(e) => store(e),
        ApiError::Pipeline(e) => pipeline(e),
        ApiError::Model(e) => embed(e),
        ApiError::Replay(_) | ApiError::StoredConfig { .. } => FailureKind::Store,
        ApiError::Retrieve(_) | ApiError::Panicked { .. } => FailureKind::Internal,
    }
}

fn pipeline(e: &PipelineError) -> FailureKind {
    match e {
        PipelineError::Store(e) => store(e),
        PipelineError::Build(e) => build(e),
        PipelineError::Index(_) => FailureKind::Internal,
        PipelineError::ModelMismatch { .. } => FailureKind::ModelMismatch,
        // Nothing to build from: the namespace holds no messages (yet).
        PipelineError::Empty(_) => FailureKind::UnknownNamespace,
        PipelineError::Stale { .. } => FailureKind::Stale,
        // The memory is committed; what failed after it decides.
        PipelineError::Unfinished { source, .. } => pipeline(source),
    }
}

fn build(e: &BuildError) -> FailureKind {
    match e {
        BuildError::Embed { .. } | BuildError::EmbedCount { .. } => FailureKind::Model,
        _ => FailureKind::Internal,
    }
}

fn store(e: &StoreError) -> FailureKind {
    if e.is_storage_full() {
        return FailureKind::StorageFull;
    }
    match e {
        StoreError::Conflict { .. } => FailureKind::Conflict,
        StoreError::SessionFull { .. } => FailureKind::SessionFull,
        StoreError::ReadOnly { .. } => FailureKind::ReadOnly,
        StoreError::Dangling { .. } | StoreError::TooManyInsights { .. } => FailureKind::BadInput,
        StoreError::NotAStore { .. } => FailureKind::NoStore,
        StoreError::Foreign { .. }
        | StoreError::NeedsUpgrade { .. }
        | StoreError::NewerSchema { .. }
        | StoreError::Location { .. }
        | StoreError::Access { .. } => FailureKind::UnusableStore,
        StoreError::Relocated { .. } => FailureKind::StoreMoved,
        _ => FailureKind::Store,
    }
}

fn trace(e: &TraceError) -> FailureKind {
    match e {
        TraceError::Pipeline(e) => pipeline(e),
        // What was committed before the failure is in its message; the failure decides.
        TraceError::Partial { source, .. } => trace(source),
        TraceError::NoRuns(_) => FailureKind::NoRuns,
        TraceError::NotCompiled(_) => FailureKind::NotCompiled,
        TraceError::NotInNamespace { .. } | TraceError::Unknown { .. } => FailureKind::NotFound,
        TraceError::Compile(_) | TraceError::Memory(_) => FailureKind::Internal,
    }
}

fn eval(e: &EvalError) -> FailureKind {
    match e {
        EvalError::Input(_) | EvalError::ZeroBudget | EvalError::NoSamples => FailureKind::BadInput,
        EvalError::Pipeline(e) => pipeline(e),
        EvalError::Store(e) => store(e),
        EvalError::Api(e) => api(e),
        EvalError::Retrieve(_) | EvalError::Io { .. } => FailureKind::Internal,
    }
}

fn embed(e: &EmbedError) -> FailureKind {
    match e {
        EmbedError::ModelNotFound { .. }
        | EmbedError::InvalidModel { .. }
        | EmbedError::Setting { .. }
        | EmbedError::Json { .. } => FailureKind::NoModel,
        EmbedError::Limit(_) => FailureKind::TooLarge,
        _ => FailureKind::Model,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trajwiki_core::Namespace;

    #[test]
    fn a_wrapped_error_is_the_kind_of_what_it_wraps() {
        let ns = Namespace::new("a").unwrap();
        let conflict = || StoreError::Conflict {
            kind: "message",
            id: "m".into(),
            fields: vec!["text".into()],
            existing: "x".into(),
            incoming: "y".into(),
        };
        let cases: Vec<(Box<dyn Error + 'static>, FailureKind)> = vec![
            (Box::new(conflict()), FailureKind::Conflict),
            (Box::new(ApiError::Store(conflict())), FailureKind::Conflict),
            (
                Box::new(ApiError::Pipeline(PipelineError::Store(conflict()))),
                FailureKind::Conflict,
            ),
            (
                Box::new(EvalError::Api(Box::new(ApiError::Pipeline(
                    PipelineError::Empty(ns.clone()),
                )))),
                FailureKind::UnknownNamespace,
            ),
            (
                Box::new(TraceError::Pipeline(PipelineError::Stale {
                    namespace: ns.clone(),
                    detail: "d".into(),
                })),
                FailureKind::Stale,
            ),
            (Box::new(TraceError::NoRuns(ns)), FailureKind::NoRuns),
        ];
        for (err, want) in cases {
            assert_eq!(kind_of(err.as_ref()), Some(want), "{err}");
        }
        let io = std::io::Error::other("x");
        assert_eq!(kind_of(&io), None);
        assert_eq!(kind(&io), FailureKind::Internal);
    }

    #[test]
    fn input_kinds_are_those_a_caller_mends() {
        assert!(FailureKind::Conflict.is_input());
        assert!(FailureKind::NoModel.is_input());
        assert!(!FailureKind::StorageFull.is_input());
        assert!(!FailureKind::Internal.is_input());
        assert_eq!(FailureKind::NotBuilt.class(), FailureClass::NotFound);
        assert_eq!(FailureKind::StoreMoved.class(), FailureClass::Store);
    }
}
