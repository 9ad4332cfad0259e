//! Tokenisation with a model's `tokenizer.json`, without the padding and truncation settings the
//! file may carry (we pack sequences unpadded and truncate to the model's own limit).

use std::path::Path;

use rayon::prelude::*;
use tokenizers::{Tokenizer, TruncationParams};
use trajwiki_core::embed::EmbedError;

/// A loaded tokenizer that truncates to `max_len` tokens, special tokens included.
pub(crate) struct Tok {
    inner: Tokenizer,
    max_len: usize,
}

impl Tok {
    /// Loads `dir/tokenizer.json`.
    pub(crate) fn open(dir: &Path, max_len: usize) -> Result<Tok, EmbedError> {
        let path = dir.join("tokenizer.json");
        if !path.is_file() {
            return Err(EmbedError::InvalidModel {
                path,
                what: "tokenizer.json is missing".into(),
            });
        }
        let mut inner = Tokenizer::from_file(&path).map_err(|e| EmbedError::InvalidModel {
            path: path.clone(),
            what: format!("unreadable tokenizer: {e}"),
        })?;
        inner.with_padding(None);
        inner
            .with_truncation(Some(TruncationParams {
                max_length: max_len,
                ..Default::default()
            }))
            .map_err(|source| EmbedError::Backend {
                stage: "configuring the tokenizer",
                source,
            })?;
        Ok(Tok { inner, max_len })
    }

    /// The id of a token, if the vocabulary has it.
    pub(crate) fn token_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// Token ids of each text, with the tokenizer's special tokens, truncated to the limit. When
    /// `end` is given, every sequence ends with that id (appended, after truncating one more
    /// token, where the tokenizer did not add it).
    pub(crate) fn encode(
        &self,
        texts: &[&str],
        end: Option<u32>,
    ) -> Result<Vec<Vec<u32>>, EmbedError> {
        texts
            .par_iter()
            .map(|t| {
                let enc =
                    self.inner
                        .encode_fast(*t, true)
                        .map_err(|source| EmbedError::Backend {
                            stage: "tokenizing",
                            source,
                        })?;
                let mut ids = enc.get_ids().to_vec();
                if let Some(end) = end {
                    if ids.last() != Some(&end) {
                        ids.truncate(self.max_len.saturating_sub(1));
                        ids.push(end);
                    }
                }
                Ok(ids)
            })
            .collect()
    }
}
