//! A store's cache of language-model responses.

use trajwiki_core::Namespace;
use trajwiki_store::Store;

use super::*;

/// A store's cache of model responses for one namespace, on a connection of its own (so that a
/// client can use it from any thread). Nothing is written to a store opened read only.
pub struct StoreResponses {
    store: std::sync::Mutex<Store>,
    namespace: std::sync::Mutex<Namespace>,
}

impl StoreResponses {
    /// The cache of `ns` in the store at `dir`, opened as `read_only` says.
    pub fn open(dir: &std::path::Path, ns: &Namespace, read_only: bool) -> Result<Self, ApiError> {
        let store = if read_only {
            Store::open_read_only(dir)?
        } else {
            Store::open_existing(dir)?
        };
        Ok(Self::on(store, ns))
    }

    /// The cache of `ns` on the connection `store` (one of its own: see
    /// [`Opened::connect`](trajwiki_store::Opened::connect)).
    pub fn on(store: Store, ns: &Namespace) -> Self {
        StoreResponses {
            store: std::sync::Mutex::new(store),
            namespace: std::sync::Mutex::new(ns.clone()),
        }
    }

    /// Keeps the responses stored from now on under namespace `ns` (an evaluation goes from one
    /// namespace to the next).
    pub fn set_namespace(&self, ns: &Namespace) {
        *self.namespace.lock().unwrap_or_else(|e| e.into_inner()) = ns.clone();
    }
}

impl trajwiki_llm::ResponseCache for StoreResponses {
    fn get(&self, key: &str) -> Option<String> {
        let store = self.store.lock().unwrap_or_else(|e| e.into_inner());
        store.llm_response(key).ok().flatten()
    }

    fn put(&self, key: &str, model: &str, response: &str) -> Result<(), String> {
        let mut store = self.store.lock().unwrap_or_else(|e| e.into_inner());
        if store.is_read_only() {
            return Ok(());
        }
        let ns = self
            .namespace
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        store
            .put_llm_response(&ns, key, model, response)
            .map_err(|e| e.to_string())
    }
}
