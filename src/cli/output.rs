//! Files the commands write (`export -o`, `embed --output`): never one of a store's files, never
//! a partial file, and into a pipe or a device as written rather than by replacing it.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use trajwiki::store::DB_FILE;

use super::UsageError;

/// The folder `path` goes to, resolved, when it and every folder above it are outside any
/// store (none holds a `trajwiki.db`); a [`UsageError`] naming `path` otherwise, or when the
/// folder cannot be resolved.
pub(crate) fn outside_store(path: &Path) -> anyhow::Result<PathBuf> {
    let refuse = |why: String| -> anyhow::Result<PathBuf> {
        Err(UsageError(format!("refusing to write {}: {why}", path.display())).into())
    };
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let parent = match parent.canonicalize() {
        Ok(p) => p,
        Err(e) => {
            return refuse(format!(
                "its folder {} is not usable: {e}",
                parent.display()
            ))
        }
    };
    if let Some(store) = parent.ancestors().find(|dir| dir.join(DB_FILE).is_file()) {
        return refuse(format!(
            "it is inside the store {}; write outside the store",
            store.display()
        ));
    }
    Ok(parent)
}

/// Where an output goes: a regular file replaced whole once written, or a pipe or a character
/// device (a FIFO, `/dev/stdout`) written in place.
pub(crate) enum Output {
    File { path: PathBuf, tmp: PathBuf },
    Stream(PathBuf),
}

impl Output {
    /// Checks that `path` may be written and says how. Refused, with a [`UsageError`] naming the
    /// path: a directory or anything else that is not a file, pipe or device; any path inside a
    /// store directory (one that holds a `trajwiki.db`, or a folder below it); an existing
    /// SQLite database.
    pub(crate) fn to(path: &Path) -> anyhow::Result<Output> {
        let refuse = |why: String| -> anyhow::Result<Output> {
            Err(UsageError(format!("refusing to write {}: {why}", path.display())).into())
        };
        let parent = outside_store(path)?;
        match std::fs::metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return refuse(e.to_string()),
            Ok(meta) if meta.is_file() => {
                let mut head = [0u8; 16];
                let sqlite = File::open(path)
                    .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
                    .is_ok_and(|()| head == *b"SQLite format 3\0");
                if sqlite {
                    return refuse("it is an SQLite database".into());
                }
            }
            Ok(meta) => {
                let kind = meta.file_type();
                #[cfg(unix)]
                {
                    use std::os::unix::fs::FileTypeExt;
                    if kind.is_fifo() || kind.is_char_device() {
                        return Ok(Output::Stream(path.to_path_buf()));
                    }
                }
                let what = if kind.is_dir() {
                    "it is a directory"
                } else {
                    "it is not a regular file, a pipe or a device"
                };
                return refuse(what.into());
            }
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = parent.join(format!(".{name}.{}.partial", std::process::id()));
        Ok(Output::File {
            path: path.to_path_buf(),
            tmp,
        })
    }

    /// Writes `bytes`: a file is written beside its place and renamed over it, so that a failed
    /// write leaves no partial file and the old one, if any, whole.
    pub(crate) fn write(&self, bytes: &[u8]) -> anyhow::Result<()> {
        match self {
            Output::Stream(path) => {
                let mut f = std::fs::OpenOptions::new().write(true).open(path)?;
                f.write_all(bytes)?;
                f.flush()?;
            }
            Output::File { path, tmp } => {
                let written = (|| -> std::io::Result<()> {
                    let mut f = std::fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(tmp)?;
                    f.write_all(bytes)?;
                    f.sync_all()?;
                    std::fs::rename(tmp, path)
                })();
                if let Err(e) = written {
                    let _ = std::fs::remove_file(tmp);
                    return Err(
                        anyhow::Error::new(e).context(format!("writing {}", path.display()))
                    );
                }
            }
        }
        Ok(())
    }
}
