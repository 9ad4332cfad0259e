//! `trajwiki ingest`.

use std::path::PathBuf;

use anyhow::Context;
use clap::ValueEnum;
use trajwiki_core::Namespace;
use trajwiki_ingest::{jsonl, locomo, Format};
use trajwiki_store::{IngestReport, Store};

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
    /// Namespace for agent runs (default: each run's `namespace`, else `env`, else the file stem).
    #[arg(long)]
    namespace: Option<String>,
    /// Input files; each is committed as one batch.
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
    // Read and validate every file before touching the store.
    let mut inputs = Vec::new();
    for file in &args.files {
        let format = match args.format {
            FormatArg::Auto => Format::detect(file)?,
            FormatArg::Locomo => Format::Locomo,
            FormatArg::Messages => Format::Messages,
            FormatArg::Runs => Format::Runs,
        };
        if namespace.is_some() && format != Format::Runs {
            return Err(UsageError(format!(
                "--namespace applies to agent runs; {} is a conversation file whose lines name their namespace",
                file.display()
            ))
            .into());
        }
        let spinner = global.spinner(format!("reading {}", file.display()));
        let input = match format {
            Format::Locomo => Input::Messages(
                locomo::read_locomo(file)?
                    .into_iter()
                    .flat_map(|s| s.messages)
                    .collect(),
            ),
            Format::Messages => Input::Messages(jsonl::read_messages(file)?),
            Format::Runs => Input::Runs(jsonl::read_runs(file, namespace.as_ref())?),
        };
        spinner.finish_and_clear();
        inputs.push((file, input));
    }
    let mut store = Store::open(&args.store)?;
    let bar = global.bar(inputs.len() as u64, "ingesting");
    let mut reports = Vec::new();
    for (file, input) in &inputs {
        let source = file.display().to_string();
        let report = match input {
            Input::Messages(m) => store.ingest_messages(&source, m),
            Input::Runs(r) => store.ingest_runs(&source, r),
        }
        .with_context(|| format!("ingesting {}", file.display()))?;
        bar.inc(1);
        reports.push((source, input.kind(), report));
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
            trajwiki::api::namespaces_of(inputs.iter().flat_map(|(_, input)| match input {
                Input::Messages(messages) => messages.as_slice(),
                Input::Runs(_) => &[],
            }));
        if !namespaces.is_empty() {
            super::memory::build_and_report(
                &mut store,
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

enum Input {
    Messages(Vec<trajwiki_core::SourceMessage>),
    Runs(Vec<trajwiki_core::Run>),
}

impl Input {
    fn kind(&self) -> &'static str {
        match self {
            Input::Messages(_) => "messages",
            Input::Runs(_) => "runs",
        }
    }
}
