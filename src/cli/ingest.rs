//! `trajwiki ingest`.

use std::path::PathBuf;

use anyhow::Context;
use clap::ValueEnum;
use trajwiki::engine::Engine;
use trajwiki::ingest::{Format, Input};
use trajwiki::store::{IngestReport, Store};
use trajwiki_core::Namespace;

use super::{Global, UsageError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum FormatArg {
    /// Tell by extension and first record.
    Auto,
    /// LoCoMo JSON.
    Locomo,
    /// JSONL, one message per line.
    Messages,
    /// JSONL, one agent run per line.
    Runs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct IngestArgs {
    /// Store: a directory (created when absent), or a PostgreSQL URL (postgres://user@host/db;
    /// the schema is created in an empty database).
    #[arg(long, env = "TRAJWIKI_STORE", default_value = "trajwiki-store")]
    store: PathBuf,
    /// Input format.
    #[arg(long, value_enum, default_value = "auto")]
    format: FormatArg,
    /// Namespace for agent runs (default: each run's `namespace`, else `env`, else the file stem; `stdin` for standard input).
    #[arg(long)]
    namespace: Option<String>,
    /// Input files (a file, a pipe or a FIFO; `-` is standard input, named `<stdin>`); each is
    /// read once and committed as one batch.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Build the memory of the namespaces that received messages (appending what arrived).
    #[arg(long)]
    build: bool,
    #[command(flatten)]
    flags: super::memory::BuildFlags,
}

pub(crate) fn run(args: &IngestArgs, global: Global) -> anyhow::Result<()> {
    let namespace = args.namespace.as_deref().map(Namespace::new).transpose()?;
    if !args.build && (args.flags.rebuild || args.flags.flush || args.flags.config.is_some()) {
        return Err(UsageError("--rebuild, --flush and --config apply with --build".into()).into());
    }
    super::check_store_path(&args.store)?;
    if args.files.iter().filter(|f| f.as_os_str() == "-").count() > 1 {
        return Err(UsageError(
            "`-` (standard input) is given more than once; it can be read only once".into(),
        )
        .into());
    }
    // Read and validate every input, each read once, before touching the store.
    let mut inputs = Vec::new();
    for file in &args.files {
        let mut input = Input::open(file)?;
        let format = match args.format {
            FormatArg::Auto => input.detect()?,
            FormatArg::Locomo => Format::Locomo,
            FormatArg::Messages => Format::Messages,
            FormatArg::Runs => Format::Runs,
        };
        let name = input.name().display().to_string();
        if namespace.is_some() && format != Format::Runs {
            return Err(UsageError(format!(
                "--namespace applies to agent runs; {name} is a conversation file whose lines name their namespace"
            ))
            .into());
        }
        let spinner = global.spinner(format!("reading {name}"));
        let records = match format {
            Format::Locomo => Records::Messages(
                input
                    .read_locomo()?
                    .into_iter()
                    .flat_map(|s| s.messages)
                    .collect(),
            ),
            Format::Messages => Records::Messages(input.read_messages()?),
            Format::Runs => Records::Runs(input.read_runs(namespace.as_ref())?),
        };
        spinner.finish_and_clear();
        inputs.push((name, records));
    }
    let engine = Engine::for_records(Store::open(&args.store)?);
    // One bar that follows each file's records as they are stored.
    let bar = global.bar(0, "ingesting");
    let mut reports = Vec::new();
    for (i, (source, records)) in inputs.iter().enumerate() {
        let which = Global::which(i, inputs.len());
        let progress = global.follow(&bar, format!("{source}{which}"));
        let report = match records {
            Records::Messages(m) => {
                engine.with_store(|s| engine.ingest_messages(s, source, m, Some(&progress)))
            }
            Records::Runs(r) => {
                engine.with_store(|s| engine.ingest_runs(s, source, r, Some(&progress)))
            }
        }
        .with_context(|| format!("ingesting {source}"))?;
        reports.push((source, records.kind(), report));
    }
    bar.finish_and_clear();
    if args.json {
        let rows: Vec<_> = reports
            .iter()
            .map(|(file, kind, r)| serde_json::json!({"file": file, "kind": kind, "added": r.added, "unchanged": r.unchanged, "new_namespaces": r.new_namespaces}))
            .collect();
        outjson!(serde_json::to_string_pretty(&rows)?)?;
    } else if !global.quiet {
        for (file, kind, r) in &reports {
            outln!("{}", describe(file, kind, r))?;
        }
    }
    if args.build {
        let namespaces =
            trajwiki::api::namespaces_of(inputs.iter().flat_map(|(_, records)| match records {
                Records::Messages(messages) => messages.as_slice(),
                Records::Runs(_) => &[],
            }));
        if !namespaces.is_empty() {
            super::memory::build_and_report(
                engine.connect()?,
                &namespaces,
                &args.flags,
                args.json,
                global,
            )?;
        }
    }
    Ok(())
}

fn describe(file: &str, kind: &str, r: &IngestReport) -> String {
    if r.added == 0 {
        format!(
            "{file}: 0 new {kind} ({} already stored), nothing to do",
            r.unchanged
        )
    } else {
        format!(
            "{file}: {} new {kind}, {} already stored, {} new namespace(s)",
            r.added,
            r.unchanged,
            r.new_namespaces.len()
        )
    }
}

/// What one input holds.
enum Records {
    Messages(Vec<trajwiki_core::SourceMessage>),
    Runs(Vec<trajwiki_core::Run>),
}

impl Records {
    fn kind(&self) -> &'static str {
        match self {
            Records::Messages(_) => "messages",
            Records::Runs(_) => "runs",
        }
    }
}
