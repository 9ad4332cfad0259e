//! Content hashing: the basis of content addressing and of the embedding cache.

use sha2::{Digest, Sha256};

/// Hex SHA-256 of a text, used as the embedding-cache key (together with the model id).
pub fn text_hash(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// Hex SHA-256 over a sequence of fields, each length-prefixed so that field boundaries cannot
/// be forged by concatenation (`["ab", "c"]` and `["a", "bc"]` hash differently).
pub fn content_hash<'a>(fields: impl IntoIterator<Item = &'a str>) -> String {
    let mut hasher = Sha256::new();
    for field in fields {
        hasher.update((field.len() as u64).to_le_bytes());
        hasher.update(field.as_bytes());
    }
    hex::encode(hasher.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_boundaries_matter() {
        assert_ne!(content_hash(["ab", "c"]), content_hash(["a", "bc"]));
        assert_eq!(content_hash(["a", "b"]), content_hash(["a", "b"]));
    }

    #[test]
    fn text_hash_is_sha256() {
        assert_eq!(
            text_hash(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
