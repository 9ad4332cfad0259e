//! `trajwiki export`.

use std::io::Write;
use std::path::PathBuf;

use clap::ValueEnum;
use trajwiki::ingest::jsonl;
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
    let store = args.store.open()?;
    // Checked before the work: a refused path costs nothing.
    let output = args.output.as_deref().map(Output::to).transpose()?;
    let ns = Namespace::new(args.namespace.as_str())?;
    let (messages, runs) = store.namespace_counts(&ns)?;
    if messages == 0 && runs == 0 {
        return Err(UsageError(format!(
            "namespace {ns} is empty or does not exist in {}",
            store.dir().display()
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
    let mut buf = Vec::new();
    let n = match what {
        What::Memory => trajwiki::export::write_memory(&store, &ns, &mut buf)?,
        What::Runs => {
            let runs = store.runs(&ns)?;
            jsonl::write_runs(&mut buf, &runs)?;
            runs.len()
        }
        _ => {
            let messages = store.messages(&ns)?;
            jsonl::write_messages(&mut buf, &messages)?;
            messages.len()
        }
    };
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
