//! What the faces read, through the door: the store's namespaces and their counts, its totals
//! and its check, a namespace's wiki pages and index state. Each is an operation of the
//! [`Engine`] or of a [`NamespaceHandle`], run on the connection [`Engine::with_store`] lends,
//! and fails as one [`ApiError`] (a namespace that does not exist as
//! [`ApiError::UnknownNamespace`]), which a face maps once. The records themselves open with
//! [`crate::api::get`] / [`crate::api::get_in`], and read as text with [`crate::render`].

use serde::Serialize;
use trajwiki_core::{Namespace, PageId, SourceMessage, WikiPage};
use trajwiki_store::{CheckReport, IndexState, NotScrubbed, Stats, Store};

use crate::api::ApiError;
use crate::engine::{Engine, NamespaceHandle};

/// A namespace as a listing shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Listed {
    /// The namespace.
    pub namespace: Namespace,
    /// Its messages.
    pub messages: u64,
    /// Its agent runs.
    pub runs: u64,
}

impl Listed {
    /// Whether the namespace exists: it does while it holds messages or runs.
    pub fn exists(&self) -> bool {
        self.messages > 0 || self.runs > 0
    }
}

impl Engine {
    /// The store's namespaces, by name.
    pub fn namespace_names(&self, store: &Store) -> Result<Vec<Namespace>, ApiError> {
        Ok(store.namespaces()?)
    }

    /// The store's namespaces, by name, with their counts.
    pub fn namespaces(&self, store: &Store) -> Result<Vec<Listed>, ApiError> {
        self.namespace_names(store)?
            .into_iter()
            .map(|ns| listed(store, ns))
            .collect()
    }

    /// The store's totals, by record kind.
    pub fn stats(&self, store: &Store) -> Result<Stats, ApiError> {
        Ok(store.stats()?)
    }

    /// The store's consistency check (see [`Store::check`]).
    pub fn check(&self, store: &Store) -> Result<CheckReport, ApiError> {
        Ok(store.check()?)
    }

    /// Overwrites the space deleted records freed in the store's files (see [`Store::scrub`]).
    pub fn scrub(&self, store: &mut Store) -> Result<(), NotScrubbed> {
        store.scrub()
    }

    /// Page `id` as it is now, or at `revision`; `None` when the store has no such page.
    pub fn page(
        &self,
        store: &Store,
        id: &PageId,
        revision: Option<u32>,
    ) -> Result<Option<WikiPage>, ApiError> {
        Ok(match revision {
            Some(r) => store.page_revision(id, r)?,
            None => store.page(id)?,
        })
    }
}

impl NamespaceHandle<'_> {
    /// The namespace's counts (zero for a namespace the store does not hold).
    pub fn counts(&self, store: &Store) -> Result<Listed, ApiError> {
        listed(store, self.name().clone())
    }

    /// The error that says the namespace holds no messages in this store.
    pub fn unknown(&self) -> ApiError {
        ApiError::UnknownNamespace {
            namespace: self.name().clone(),
            store: self.engine().dir().to_path_buf(),
        }
    }

    /// The namespace's counts, or [`ApiError::UnknownNamespace`] when it does not exist (holds
    /// neither messages nor runs).
    pub fn existing(&self, store: &Store) -> Result<Listed, ApiError> {
        let counts = self.counts(store)?;
        counts
            .exists()
            .then_some(counts)
            .ok_or_else(|| self.unknown())
    }

    /// The namespace's counts, or [`ApiError::UnknownNamespace`] when it holds no messages
    /// (what a dialogue memory is built from).
    pub fn with_messages(&self, store: &Store) -> Result<Listed, ApiError> {
        let counts = self.counts(store)?;
        (counts.messages > 0)
            .then_some(counts)
            .ok_or_else(|| self.unknown())
    }

    /// The namespace's current wiki pages.
    pub fn pages(&self, store: &Store) -> Result<Vec<WikiPage>, ApiError> {
        Ok(store.pages(self.name())?)
    }

    /// The message whose external ref (such as `D3:12`) is `external_ref`, if there is one.
    pub fn message_by_ref(
        &self,
        store: &Store,
        external_ref: &str,
    ) -> Result<Option<SourceMessage>, ApiError> {
        Ok(store.message_by_ref(self.name(), external_ref)?)
    }

    /// The state a loaded index of the namespace is kept at (its last message and build).
    pub fn state(&self, store: &Store) -> Result<IndexState, ApiError> {
        Ok(store.index_state(self.name())?)
    }
}

/// `ns` with its counts.
fn listed(store: &Store, namespace: Namespace) -> Result<Listed, ApiError> {
    let (messages, runs) = store.namespace_counts(&namespace)?;
    Ok(Listed {
        namespace,
        messages,
        runs,
    })
}
