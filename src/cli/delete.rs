//! `trajwiki delete`.

use trajwiki::api::ApiError;
use trajwiki::store::NotScrubbed;
use trajwiki_core::Namespace;

use super::{Global, StoreArg, UsageError};

#[derive(Debug, clap::Args)]
pub(crate) struct DeleteArgs {
    #[command(flatten)]
    store: StoreArg,
    /// The namespace to delete, with everything in it.
    #[arg(long, required_unless_present = "scrub")]
    namespace: Option<String>,
    /// Delete without asking: without it, the command says what it would delete and stops.
    #[arg(long)]
    yes: bool,
    /// Only overwrite the space earlier deletes freed (what a delete does after its records are
    /// gone), when a delete could not: the disk was full, another process was reading.
    #[arg(long, conflicts_with_all = ["namespace", "yes"])]
    scrub: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// A delete whose records are gone but whose text is still in the store's files.
#[derive(Debug, thiserror::Error)]
#[error("deleted namespace {namespace}, but its text is still in the files of {store}: the freed space could not be overwritten because {why}; {next}")]
pub(crate) struct NotScrubbedError {
    namespace: String,
    store: String,
    why: NotScrubbed,
    next: String,
}

pub(crate) fn run(args: &DeleteArgs, global: Global) -> anyhow::Result<()> {
    let engine = args.store.engine()?;
    let shown = engine.dir().display().to_string();
    let again = format!("run `trajwiki delete --store {shown} --scrub` to finish");
    let Some(name) = args.namespace.as_deref() else {
        // `--scrub`.
        return match engine.with_store(|store| Ok::<_, ApiError>(engine.scrub(store)))? {
            Ok(()) => {
                global.say(format!(
                    "the space freed in {shown} is overwritten: no file of the store holds deleted text"
                ));
                Ok(())
            }
            Err(why) => Err(anyhow::anyhow!(
                "the space freed in {shown} could not be overwritten: {why}"
            )),
        };
    };
    let ns = Namespace::new(name)?;
    let listed = engine.with_store(|store| engine.namespace(&ns).counts(store))?;
    let (messages, runs) = (listed.messages, listed.runs);
    if !listed.exists() {
        return Err(UsageError(format!("namespace {ns} does not exist in {shown}")).into());
    }
    if !args.yes {
        return Err(UsageError(format!(
            "this deletes namespace {ns} ({messages} messages, {runs} runs, its memory, wiki and history) for good; run again with --yes to do it"
        ))
        .into());
    }
    let deleted = engine.with_store(|store| engine.namespace(&ns).delete(store))?;
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
    match deleted.not_scrubbed {
        None => Ok(()),
        // Not ours to overwrite: said, not failed.
        Some(why @ NotScrubbed::Postgres) => {
            global.say(format!("note: {why}"));
            Ok(())
        }
        Some(why) => {
            let next = match why {
                NotScrubbed::StorageFull => format!("free space on its disk, then {again}"),
                NotScrubbed::Busy => format!("when the other process is done, {again}"),
                _ => again,
            };
            Err(NotScrubbedError {
                namespace: ns.to_string(),
                store: shown,
                why,
                next,
            }
            .into())
        }
    }
}
