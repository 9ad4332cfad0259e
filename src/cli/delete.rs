//! `trajwiki delete`.

use trajwiki_core::Namespace;

use super::{Global, StoreArg, UsageError};

#[derive(Debug, clap::Args)]
pub(crate) struct DeleteArgs {
    #[command(flatten)]
    store: StoreArg,
    /// The namespace to delete, with everything in it.
    #[arg(long)]
    namespace: String,
    /// Delete without asking: without it, the command says what it would delete and stops.
    #[arg(long)]
    yes: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: &DeleteArgs, global: Global) -> anyhow::Result<()> {
    let mut store = args.store.open()?;
    let ns = Namespace::new(args.namespace.as_str())?;
    let (messages, runs) = store.namespace_counts(&ns)?;
    // A namespace exists while it holds messages or runs.
    if messages == 0 && runs == 0 {
        return Err(UsageError(format!(
            "namespace {ns} does not exist in {}",
            store.dir().display()
        ))
        .into());
    }
    if !args.yes {
        return Err(UsageError(format!(
            "this deletes namespace {ns} ({messages} messages, {runs} runs, its memory, wiki and history) for good; run again with --yes to do it"
        ))
        .into());
    }
    let deleted = store.delete_namespace(&ns)?;
    if args.json {
        outjson!(serde_json::to_string_pretty(&deleted)?)?;
    } else {
        outln!(
            "deleted namespace {ns}: {} messages, {} runs, {} cached embeddings, {} files",
            deleted.messages,
            deleted.runs,
            deleted.embeddings,
            deleted.files
        )?;
    }
    if !deleted.scrubbed {
        global.say(format!(
            "note: the freed space of {} could not be overwritten yet (another process is reading the store); the records are deleted, and the next `trajwiki delete` overwrites it",
            store.dir().display()
        ));
    }
    Ok(())
}
