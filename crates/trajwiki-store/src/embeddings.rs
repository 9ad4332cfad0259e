//! The embedding cache: vectors keyed by (model id, text hash), the model's dimension recorded
//! once and enforced on every read and write.

use std::collections::HashMap;

use rusqlite::{params, OptionalExtension, ToSql};

use crate::db::{id_lists, insert_rows_returning, numbered, Tx};
use crate::error::{Result, SqlContext, StoreError};
use crate::Store;

fn encode(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn decode(bytes: &[u8], dim: usize, model: &str, hash: &str) -> Result<Vec<f32>> {
    if bytes.len() != dim * 4 {
        return Err(StoreError::Corrupt {
            table: "embeddings",
            column: "vector",
            id: format!("{model}/{hash}"),
            reason: format!(
                "{} bytes, expected {} for dimension {dim}",
                bytes.len(),
                dim * 4
            ),
        });
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

const INSERT_EMBEDDING: &str = "INSERT INTO embeddings (model_id, text_hash, vector) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING";

/// Writes `items` (text hash, vector of `model`, checked to be of dimension `dim`) into the
/// cache inside `tx`, recording the model's dimension first unless it is `recorded`; how many
/// were new.
pub(crate) fn write_embeddings(
    tx: &Tx<'_>,
    model: &str,
    dim: usize,
    recorded: bool,
    items: &[(&str, &[f32])],
) -> Result<usize> {
    if !recorded {
        tx.execute(
            "INSERT INTO embedding_models (model_id, dim) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
            params![model, dim as i64],
        )
        .ctx("recording an embedding model")?;
    }
    let vectors: Vec<Vec<u8>> = items.iter().map(|(_, v)| encode(v)).collect();
    let rows: Vec<Vec<&dyn ToSql>> = items
        .iter()
        .zip(&vectors)
        .map(|((hash, _), v)| vec![&model as &dyn ToSql, hash, v])
        .collect();
    let added = insert_rows_returning(
        tx,
        "embeddings (model_id, text_hash, vector)",
        3,
        "ON CONFLICT DO NOTHING RETURNING text_hash",
        &rows,
        "writing embeddings",
    )?;
    Ok(added.len())
}

impl Store {
    /// The dimension recorded for `model`, if it has any cached vectors.
    pub fn embedding_dim(&self, model: &str) -> Result<Option<usize>> {
        if let Some(&dim) = self.dims.borrow().get(model) {
            return Ok(Some(dim));
        }
        let dim: Option<i64> = self
            .conn
            .query_row(
                "SELECT dim FROM embedding_models WHERE model_id = ?1",
                [model],
                |row| row.get(0),
            )
            .optional()
            .ctx("reading an embedding model")?;
        let dim = dim.map(|d| d as usize);
        if let Some(dim) = dim {
            self.dims.borrow_mut().insert(model.to_string(), dim);
        }
        Ok(dim)
    }

    fn expect_dim(&self, model: &str, dim: usize) -> Result<()> {
        match self.embedding_dim(model)? {
            Some(stored) if stored != dim => Err(StoreError::EmbeddingDimension {
                model: model.to_string(),
                stored,
                got: dim,
            }),
            _ => Ok(()),
        }
    }

    /// Looks up cached vectors of `model` (of dimension `dim`) for each text hash; `None` where
    /// the text was never embedded with this model.
    pub fn cached_embeddings(
        &self,
        model: &str,
        dim: usize,
        hashes: &[&str],
    ) -> Result<Vec<Option<Vec<f32>>>> {
        self.expect_dim(model, dim)?;
        let found = self.cached(model, hashes, "text_hash, vector")?;
        // A hash asked for twice gets its vector twice.
        hashes
            .iter()
            .map(|hash| match found.get(*hash) {
                Some(Some(bytes)) => decode(bytes, dim, model, hash).map(Some),
                _ => Ok(None),
            })
            .collect()
    }

    /// Whether the cache holds a vector of `model` for each text hash (without reading the
    /// vectors).
    pub fn has_embeddings(&self, model: &str, hashes: &[&str]) -> Result<Vec<bool>> {
        let found = self.cached(model, hashes, "text_hash, NULL")?;
        Ok(hashes
            .iter()
            .map(|hash| found.contains_key(*hash))
            .collect())
    }

    /// The cache's rows of `model` among `hashes`, by hash, with `columns` (the hash and the
    /// vector or `NULL`): a statement for each run of up to 256 hashes, not one a hash.
    fn cached(
        &self,
        model: &str,
        hashes: &[&str],
        columns: &str,
    ) -> Result<HashMap<String, Option<Vec<u8>>>> {
        let mut found = HashMap::with_capacity(hashes.len());
        for list in id_lists(hashes) {
            let mut params: Vec<&dyn ToSql> = vec![&model];
            params.extend(list.iter().map(|h| h as &dyn ToSql));
            let mut stmt = self
                .conn
                .prepare_cached(&format!(
                    "SELECT {columns} FROM embeddings WHERE model_id = ?1 AND text_hash IN ({})",
                    numbered(2, list.len())
                ))
                .ctx("preparing an embedding lookup")?;
            let rows = stmt
                .query_map(&params[..], |row| {
                    Ok((row.get::<String>(0)?, row.get::<Option<Vec<u8>>>(1)?))
                })
                .ctx("reading embeddings")?;
            for row in rows {
                let (hash, vector) = row.ctx("reading embeddings")?;
                found.insert(hash, vector);
            }
        }
        Ok(found)
    }

    /// [`StoreError::EmbeddingDimension`] unless `items` are vectors of dimension `dim` and that
    /// is `model`'s (when recorded); whether it is recorded.
    pub(crate) fn check_embeddings(
        &self,
        model: &str,
        dim: usize,
        items: &[(&str, &[f32])],
    ) -> Result<bool> {
        self.expect_dim(model, dim)?;
        if let Some((_, v)) = items.iter().find(|(_, v)| v.len() != dim) {
            return Err(StoreError::EmbeddingDimension {
                model: model.to_string(),
                stored: dim,
                got: v.len(),
            });
        }
        Ok(self.dims.borrow().contains_key(model))
    }

    /// Caches vectors of `model`, in one transaction. Returns how many were new. The first write
    /// records the model's dimension; vectors of another dimension are refused.
    pub fn put_embeddings(
        &mut self,
        model: &str,
        dim: usize,
        items: &[(&str, &[f32])],
    ) -> Result<usize> {
        let recorded = self.check_embeddings(model, dim, items)?;
        // One vector of a recorded model: one statement, atomic alone.
        if let ([(hash, v)], true) = (items, recorded) {
            self.writable("starting an embedding write")?;
            return self
                .conn
                .execute(INSERT_EMBEDDING, params![model, hash, encode(v)])
                .ctx("writing an embedding");
        }
        let tx = self.write_tx("starting an embedding write", &[])?;
        let added = write_embeddings(&tx, model, dim, recorded, items)?;
        tx.commit().ctx("committing embeddings")?;
        self.dims.borrow_mut().insert(model.to_string(), dim);
        Ok(added)
    }
}
