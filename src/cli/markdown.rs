//! `trajwiki wiki export` and `trajwiki trace export`: a namespace's memory as a folder of linked
//! markdown files ([`trajwiki::markdown`]). The folder is written whole or not at all: beside
//! its place first, then renamed into it; an existing folder is only ever an empty one, and
//! never one inside a store.

use std::path::{Path, PathBuf};

use trajwiki::markdown::{MarkdownError, MarkdownFile};
use trajwiki_core::Namespace;

use super::{Global, StoreArg, UsageError};

#[derive(Debug, clap::Args)]
pub(crate) struct MarkdownArgs {
    #[command(flatten)]
    store: StoreArg,
    /// The namespace to export.
    #[arg(long)]
    namespace: String,
    /// The folder to write (created; if it exists it must be empty).
    dir: PathBuf,
}

/// Which memory an export writes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Which {
    /// The dialogue memory: wiki pages, trajectories, sources.
    Wiki,
    /// The run memory: insights, compilations, runs.
    Runs,
}

pub(crate) fn run(args: &MarkdownArgs, which: Which, global: Global) -> anyhow::Result<()> {
    let ns = Namespace::new(args.namespace.as_str()).map_err(|e| UsageError(e.to_string()))?;
    // Checked before the work: a refused folder costs nothing.
    let target = Target::check(&args.dir)?;
    let mut store = args.store.open()?;
    let files = match which {
        Which::Wiki => trajwiki::markdown::wiki(&store, &ns),
        Which::Runs => trajwiki::markdown::runs(&mut store, &ns),
    }
    .map_err(|e| match e {
        MarkdownError::Empty { .. } => UsageError(e.to_string()).into(),
        e => anyhow::Error::new(e),
    })?;
    target.write(&files)?;
    global.say(format!(
        "wrote {} markdown files of {ns} to {} (start at index.md)",
        files.len(),
        args.dir.display()
    ));
    Ok(())
}

/// A folder that may be written: absent, or empty; its parent exists and is not in a store.
struct Target {
    dir: PathBuf,
    tmp: PathBuf,
}

impl Target {
    fn check(dir: &Path) -> anyhow::Result<Target> {
        let refuse = |why: String| -> anyhow::Result<Target> {
            Err(UsageError(format!("refusing to write {}: {why}", dir.display())).into())
        };
        let parent = super::output::outside_store(dir)?;
        match std::fs::symlink_metadata(dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return refuse(e.to_string()),
            Ok(meta) if meta.is_dir() => {
                if std::fs::read_dir(dir)?.next().is_some() {
                    return refuse("it exists and is not empty".into());
                }
            }
            Ok(_) => return refuse("it exists and is not a folder".into()),
        }
        let Some(name) = dir.file_name() else {
            return refuse("it names no folder".into());
        };
        let tmp = parent.join(format!(
            ".{}.{}.partial",
            name.to_string_lossy(),
            std::process::id()
        ));
        Ok(Target {
            dir: dir.to_path_buf(),
            tmp,
        })
    }

    /// Writes the files into a folder beside the target, then renames it into place (over an
    /// empty folder, if one is there); on failure nothing is left behind.
    fn write(&self, files: &[MarkdownFile]) -> anyhow::Result<()> {
        let written = (|| -> std::io::Result<()> {
            std::fs::create_dir(&self.tmp)?;
            for f in files {
                let path = self.tmp.join(&f.path);
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                std::fs::write(&path, &f.text)?;
            }
            std::fs::rename(&self.tmp, &self.dir)
        })();
        if let Err(e) = written {
            let _ = std::fs::remove_dir_all(&self.tmp);
            return Err(anyhow::Error::new(e).context(format!("writing {}", self.dir.display())));
        }
        Ok(())
    }
}
