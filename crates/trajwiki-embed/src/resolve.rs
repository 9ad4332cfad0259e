//! Where models live: `--model <dir>`, or a name looked up in the cache
//! (`$TRAJWIKI_HOME/models/<name>`, `$TRAJWIKI_HOME` defaulting to `~/.cache/trajwiki`).

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use trajwiki_core::embed::EmbedError;

/// Environment variable naming trajwiki's home folder (caches, models).
pub const HOME_ENV: &str = "TRAJWIKI_HOME";

/// Name of the default model, as `trajwiki model fetch` knows it.
pub const DEFAULT_MODEL: &str = "minilm";

/// trajwiki's home folder: `$TRAJWIKI_HOME`, else `~/.cache/trajwiki`.
pub fn trajwiki_home() -> PathBuf {
    match std::env::var_os(HOME_ENV) {
        Some(h) if !h.is_empty() => PathBuf::from(h),
        _ => {
            let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
            home.join(".cache").join("trajwiki")
        }
    }
}

/// The folder holding named models under a home folder.
pub fn models_dir(home: &Path) -> PathBuf {
    home.join("models")
}

/// Resolves `spec` (a model folder, or a model name in the cache of [`trajwiki_home`]) to a folder
/// that holds a `config.json`.
pub fn resolve_model(spec: &str) -> Result<PathBuf, EmbedError> {
    resolve_model_in(spec, &trajwiki_home())
}

/// Like [`resolve_model`] with an explicit home folder.
pub fn resolve_model_in(spec: &str, home: &Path) -> Result<PathBuf, EmbedError> {
    let looks_like_path = spec.contains(std::path::MAIN_SEPARATOR)
        || spec.contains('/')
        || spec.starts_with('.')
        || spec.starts_with('~')
        || Path::new(spec).is_dir();
    let dir = if looks_like_path {
        PathBuf::from(spec)
    } else {
        models_dir(home).join(spec)
    };
    if !dir.join("config.json").is_file() {
        let hint = if crate::fetch::known_model(spec).is_some() {
            format!("run `trajwiki model fetch {spec}` to download it")
        } else if looks_like_path {
            "pass --model a folder with config.json, tokenizer.json and safetensors weights"
                .to_string()
        } else {
            format!(
                "no such model in {}; pass --model <dir>, or run `trajwiki model fetch {DEFAULT_MODEL}` for the default",
                models_dir(home).display()
            )
        };
        return Err(EmbedError::ModelNotFound { path: dir, hint });
    }
    Ok(dir)
}

/// Reads a whole file, naming it on failure.
pub(crate) fn read_file(path: &Path) -> Result<Vec<u8>, EmbedError> {
    std::fs::read(path).map_err(|source| EmbedError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Reads and parses a JSON file, naming it on failure.
pub(crate) fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, EmbedError> {
    let bytes = read_file(path)?;
    serde_json::from_slice(&bytes).map_err(|source| EmbedError::Json {
        path: path.to_path_buf(),
        source,
    })
}

/// A cheap, stable fingerprint of a model folder: the hash of `config.json`, the tokenizer, the
/// safetensors headers and sizes, and 16 samples of 4 KiB spread over each weight file. Two
/// checkpoints that differ anywhere but in bytes none of these see would collide, which for real
/// fine-tunes (every tensor changes) does not happen; hashing gigabytes at every start would.
pub(crate) fn fingerprint(dir: &Path) -> Result<String, EmbedError> {
    let mut h = Sha256::new();
    for name in ["config.json", "tokenizer.json"] {
        h.update(read_file(&dir.join(name))?);
    }
    let mut weight_files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|source| EmbedError::Io {
            path: dir.to_path_buf(),
            source,
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
        .collect();
    weight_files.sort();
    for path in weight_files {
        let io = |source| EmbedError::Io {
            path: path.clone(),
            source,
        };
        let mut f = std::fs::File::open(&path).map_err(io)?;
        let size = f.metadata().map_err(io)?.len();
        h.update(size.to_le_bytes());
        let mut buf = vec![0u8; 4096];
        for i in 0..17u64 {
            let at = if i == 0 {
                0
            } else {
                size.saturating_sub(4096) * i / 16
            };
            f.seek(SeekFrom::Start(at)).map_err(io)?;
            let n = f.read(&mut buf).map_err(io)?;
            h.update(&buf[..n]);
        }
    }
    Ok(hex::encode(&h.finalize()[..6]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_named_model_names_the_fetch_command() {
        let home = tempfile::tempdir().unwrap();
        let err = resolve_model_in("minilm", home.path()).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("trajwiki model fetch minilm"), "{msg}");
        assert!(matches!(err, EmbedError::ModelNotFound { .. }));
    }

    #[test]
    fn missing_dir_is_not_found() {
        let home = tempfile::tempdir().unwrap();
        let p = home.path().join("nope");
        let err = resolve_model_in(p.to_str().unwrap(), home.path()).unwrap_err();
        assert!(matches!(err, EmbedError::ModelNotFound { ref path, .. } if *path == p));
    }

    #[test]
    fn named_model_resolves_in_home() {
        let home = tempfile::tempdir().unwrap();
        let dir = models_dir(home.path()).join("mine");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config.json"), "{}").unwrap();
        assert_eq!(resolve_model_in("mine", home.path()).unwrap(), dir);
    }
}
