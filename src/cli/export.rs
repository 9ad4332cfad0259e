//! `trajwiki export`.

use std::io::Write;
use std::path::PathBuf;

use clap::ValueEnum;
use trajwiki::export::Export;
use trajwiki_core::Namespace;

use super::output::Output;
use super::{Global, StoreArg, UsageError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum What {
    /// Whatever the namespace holds (an error when it holds both messages and runs).
    Auto,
    /// Source messages.
    Messages,
    /// Agent runs.
    Runs,
    /// The derived memory: trajectories, snapshots, claims (with current status), the op log and
    /// the current wiki pages, one JSON record a line in a fixed order, so that two builds can be
    /// compared byte for byte.
    Memory,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ExportArgs {
    #[command(flatten)]
    store: StoreArg,
    /// The namespace to export.
    #[arg(long)]
    namespace: String,
    /// What to export.
    #[arg(long, value_enum, default_value = "auto")]
    what: What,
    /// Output file (default: standard output).
    #[arg(long, short)]
    output: Option<PathBuf>,
}

pub(crate) fn run(args: &ExportArgs, global: Global) -> anyhow::Result<()> {
    let engine = args.store.engine()?;
    // Checked before the work: a refused path costs nothing.
    let output = args.output.as_deref().map(Output::to).transpose()?;
    let ns = Namespace::new(args.namespace.as_str())?;
    let listed = engine.with_store(|store| engine.namespace(&ns).counts(store))?;
    let (messages, runs) = (listed.messages, listed.runs);
    if !listed.exists() {
        return Err(UsageError(format!(
            "namespace {ns} is empty or does not exist in {}",
            engine.dir().display()
        ))
        .into());
    }
    let what = match args.what {
        What::Auto if messages > 0 && runs > 0 => {
            return Err(UsageError(format!(
                "namespace {ns} holds {messages} messages and {runs} runs; choose one with --what messages|runs"
            ))
            .into())
        }
        What::Auto if messages > 0 => What::Messages,
        What::Auto => What::Runs,
        What::Messages if messages == 0 => {
            return Err(UsageError(format!(
                "namespace {ns} holds no messages ({runs} runs); export them with --what runs"
            ))
            .into())
        }
        What::Runs if runs == 0 => {
            return Err(UsageError(format!(
                "namespace {ns} holds no runs ({messages} messages); export them with --what messages"
            ))
            .into())
        }
        other => other,
    };
    let what = match what {
        What::Memory => Export::Memory,
        What::Runs => Export::Runs,
        What::Auto | What::Messages => Export::Messages,
    };
    let bar = global.bar(0, "exporting");
    let progress = global.follow(&bar, ns.to_string());
    let mut buf = Vec::new();
    let n = engine.with_store(|store| {
        engine
            .namespace(&ns)
            .export(store, what, &mut buf, Some(&progress))
    })?;
    bar.finish_and_clear();
    match (&output, &args.output) {
        (Some(output), Some(path)) => {
            output.write(&buf)?;
            global.say(format!("wrote {n} records of {ns} to {}", path.display()));
        }
        _ => {
            // JSON lines: escaped for a terminal the way `--json` output is, still exact.
            let text = String::from_utf8(buf).expect("JSON is UTF-8");
            std::io::stdout()
                .lock()
                .write_all(trajwiki::safe::json(&text).as_bytes())?
        }
    }
    Ok(())
}
