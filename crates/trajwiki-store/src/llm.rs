//! Language-model responses, kept by a digest of what was asked (see migration 6).

use rusqlite::{params, OptionalExtension};
use trajwiki_core::Namespace;

use crate::error::{Result, SqlContext};
use crate::Store;

impl Store {
    /// The response stored under `key`, if any.
    pub fn llm_response(&self, key: &str) -> Result<Option<String>> {
        self.conn
            .query_row(
                "SELECT response FROM llm_responses WHERE key = ?1",
                [key],
                |row| row.get(0),
            )
            .optional()
            .ctx("reading a model response")
    }

    /// Stores a response asked for namespace `ns` under `key`; a response already stored
    /// under it stays.
    pub fn put_llm_response(
        &mut self,
        ns: &Namespace,
        key: &str,
        model: &str,
        response: &str,
    ) -> Result<()> {
        let tx = self.write_tx("storing a model response", &[ns.as_str()])?;
        tx.execute(
            "INSERT INTO llm_responses (key, namespace, model, response)
             VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
            params![key, ns.as_str(), model, response],
        )
        .ctx("storing a model response")?;
        tx.commit().ctx("storing a model response")
    }
}
