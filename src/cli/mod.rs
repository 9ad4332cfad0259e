//! Subcommands of the `trajwiki` binary. Each module owns one area and stays thin: the work is
//! done by the library crates.

/// `println!` that reports a closed stdout as an error instead of panicking, and escapes the
/// control characters of what it prints (see [`safe`]).
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let text = format!($($arg)*);
        writeln!(std::io::stdout().lock(), "{}", trajwiki::safe::block(&text))
    }};
}

/// Prints one JSON text (`serde_json::to_string` or `to_string_pretty` of a value) exactly, with
/// the characters serde_json leaves raw that a terminal acts on escaped (see [`safe::json`]).
macro_rules! outjson {
    ($text:expr) => {{
        use std::io::Write as _;
        let text: String = $text;
        writeln!(std::io::stdout().lock(), "{}", trajwiki::safe::json(&text))
    }};
}

mod output;
use trajwiki::safe;

mod ask;
mod delete;
mod device;
mod embed;
mod export;
mod ingest;
mod inspect;
mod markdown;
mod memory;
mod model;
mod query;
mod serve;
mod trace;

use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use trajwiki::store::Store;

/// Long-term memory for LLM agents that never loses the path back to its evidence.
#[derive(Debug, Parser)]
#[command(name = "trajwiki", version, about)]
pub struct Cli {
    /// Print nothing but results and errors.
    #[arg(long, short, global = true)]
    quiet: bool,
    /// Where retrieval scoring and embedding run: cpu, cuda (an error without a usable GPU) or
    /// auto (CUDA when usable, else the CPU). The lexical hashing model always embeds on the
    /// CPU. GPU support needs a build with `--features cuda`.
    #[arg(long, global = true, env = "TRAJWIKI_DEVICE", default_value = "auto",
          value_parser = device::parse_device)]
    device: trajwiki::cuda::Device,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Ingest conversations (LoCoMo JSON, JSONL messages) or agent runs (JSONL) into a store.
    Ingest(ingest::IngestArgs),
    /// Count the records of a store.
    Stats(inspect::StatsArgs),
    /// Print one record by id (message, run, snapshot, claim, op, trajectory, page, compilation,
    /// insight), or a message by its external ref with --namespace.
    Show(inspect::ShowArgs),
    /// Write a namespace as JSONL that `trajwiki ingest` reads back.
    Export(export::ExportArgs),
    /// Delete a namespace for good: its records, files and history, and the freed space
    /// overwritten.
    Delete(delete::DeleteArgs),
    /// Verify a store: SQLite integrity and trajwiki's invariants.
    Check(inspect::CheckArgs),
    /// Build the memory (snapshots, claims, trajectories, wiki) of ingested conversations.
    Build(memory::BuildArgs),
    /// List a namespace's wiki pages, or print one; `wiki export` writes the memory as a folder
    /// of linked markdown files.
    Wiki(memory::WikiArgs),
    /// The claim timeline of a trajectory or a claim (op, claim, status, sources).
    History(memory::HistoryArgs),
    /// Obtain and list embedding models.
    Model(model::ModelArgs),
    /// Embed texts, one per line, to JSON lines or .npy.
    Embed(embed::EmbedArgs),
    /// Retrieve the evidence for a question: context under a budget, and its retrieval path.
    Query(query::QueryArgs),
    /// Answer a question from the memory with a language model (OpenAI-compatible endpoint),
    /// citing the source messages; without a model, the evidence alone.
    Ask(ask::AskArgs),
    /// Evaluate retrieval.
    #[command(subcommand)]
    Eval(query::EvalCommand),
    /// Serve the store's memory over HTTP as JSON (search, pages, records, claim history).
    Serve(serve::ServeArgs),
    /// Serve the store's memory as MCP tools on stdin/stdout, for agents (`serve` has them at /mcp).
    Mcp(serve::McpArgs),
    /// WikiTrace: compile agent runs into insights, the first context for a new task, and
    /// descent to an insight's compilation and raw run.
    #[command(subcommand)]
    Trace(trace::TraceCommand),
}

/// The store a command works on.
#[derive(Debug, clap::Args)]
pub(crate) struct StoreArg {
    /// Store: a directory, or a PostgreSQL URL (postgres://user@host/db).
    #[arg(long, env = "TRAJWIKI_STORE", default_value = "trajwiki-store")]
    store: PathBuf,
    /// Open the store read only: nothing is written to it (a store whose files are
    /// write-protected is always opened so).
    #[arg(long)]
    read_only: bool,
}

impl StoreArg {
    /// Opens an existing store, read only with `--read-only`.
    pub(crate) fn open(&self) -> anyhow::Result<Store> {
        check_store_path(&self.store)?;
        Ok(if self.read_only {
            Store::open_read_only(&self.store)?
        } else {
            Store::open_existing(&self.store)?
        })
    }

    /// The engine over the existing store, for commands that read and write records without a
    /// model.
    pub(crate) fn engine(&self) -> anyhow::Result<trajwiki::Engine> {
        Ok(trajwiki::Engine::for_records(self.open()?))
    }
}

/// Refuses a `--store` directory that is a file, or lies under one, naming it: the store would
/// otherwise fail later with an I/O error, or say that no store is there and suggest creating one
/// where none can be. Store URIs are the store's to check.
pub(crate) fn check_store_path(store: &Path) -> Result<(), UsageError> {
    match trajwiki::store::store_location(store) {
        Ok(trajwiki::store::StoreLocation::Dir(dir)) => check_dir_arg(
            "--store",
            store,
            &dir,
            "a store is a directory (created when absent) or a postgres:// URL",
        ),
        _ => Ok(()),
    }
}

/// Refuses a directory argument (`flag` given `arg`, naming `dir`) that is a file or lies under
/// one; `hint` says what is expected.
pub(crate) fn check_dir_arg(
    flag: &str,
    arg: &Path,
    dir: &Path,
    hint: &str,
) -> Result<(), UsageError> {
    let nearest = dir
        .ancestors()
        .filter(|a| !a.as_os_str().is_empty())
        .find_map(|a| std::fs::metadata(a).ok().map(|m| (a, m)));
    match nearest {
        Some((at, meta)) if !meta.is_dir() => Err(UsageError(format!(
            "{flag} {}: {} is a file, not a directory; {hint}",
            arg.display(),
            if at == dir {
                "it".to_string()
            } else {
                at.display().to_string()
            }
        ))),
        _ => Ok(()),
    }
}

/// Options every command sees.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Global {
    pub quiet: bool,
    /// `--device`.
    pub device: trajwiki::cuda::Device,
}

impl Global {
    /// A spinner on stderr (hidden when quiet or not a terminal).
    pub(crate) fn spinner(&self, msg: String) -> ProgressBar {
        if self.quiet {
            return ProgressBar::hidden();
        }
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} [{elapsed}]").expect("valid template"),
        );
        bar.enable_steady_tick(std::time::Duration::from_millis(120));
        bar.set_message(msg);
        bar
    }

    /// A progress bar over `len` items.
    pub(crate) fn bar(&self, len: u64, what: &str) -> ProgressBar {
        if self.quiet {
            return ProgressBar::hidden();
        }
        let bar = ProgressBar::new(len);
        self.restyle(&bar, true);
        bar.set_message(what.to_string());
        bar
    }

    /// ` (i+1 of n)` for the `i`th of `n` items when there are several, else nothing: which one
    /// a progress line is at.
    pub(crate) fn which(i: usize, n: usize) -> String {
        if n > 1 {
            format!(" ({} of {n})", i + 1)
        } else {
            String::new()
        }
    }

    /// An engine operation's `progress` shown on `bar`: `what`, then the stage's words and unit;
    /// a stage that counts shows a bar with its count, one that counts nothing its time alone.
    pub(crate) fn follow<'a>(
        &'a self,
        bar: &'a ProgressBar,
        what: String,
    ) -> impl Fn(trajwiki::pipeline::Progress) + Sync + 'a {
        let shown = std::sync::Mutex::new(None);
        move |p| {
            let mut shown = shown.lock().unwrap_or_else(|e| e.into_inner());
            if *shown != Some(p.stage) {
                *shown = Some(p.stage);
                self.restyle(bar, p.stage.unit().is_some());
                let unit = p.stage.unit().map_or(String::new(), |u| format!(" ({u})"));
                bar.set_message(format!("{what}: {}{unit}", p.stage.label()));
            }
            bar.set_length(p.total as u64);
            bar.set_position(p.done as u64);
        }
    }

    /// Shows `bar` as a bar with counts, or (`counted` false) as its message and the time alone.
    pub(crate) fn restyle(&self, bar: &ProgressBar, counted: bool) {
        let template = if counted {
            "{msg} [{bar:30}] {pos}/{len} [{elapsed}]"
        } else {
            "{msg} [{elapsed}]"
        };
        bar.set_style(
            ProgressStyle::with_template(template)
                .expect("valid template")
                .progress_chars("=> "),
        );
    }

    /// Prints a status line unless quiet.
    pub(crate) fn say(&self, line: impl std::fmt::Display) {
        if !self.quiet {
            eprintln!("{}", safe::block(&line.to_string()));
        }
    }
}

/// An error in how the command was used (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct UsageError(pub String);

/// Prints an error and its causes on standard error, escaped like everything else printed. A
/// cause whose text ends the line before it (an error that tells its operating system's reason,
/// `…: Permission denied (os error 13)`) is not printed again.
pub fn report(err: &anyhow::Error) {
    let mut told = err.to_string();
    eprintln!("error: {}", safe::block(&told));
    for cause in err.chain().skip(1) {
        let text = cause.to_string();
        if !told.ends_with(&text) {
            eprintln!("  caused by: {}", safe::block(&text));
        }
        told = text;
    }
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    let global = Global {
        quiet: cli.quiet,
        device: cli.device,
    };
    match cli.command {
        Command::Ingest(args) => ingest::run(&args, global),
        Command::Stats(args) => inspect::stats(&args, global),
        Command::Show(args) => inspect::show(&args),
        Command::Export(args) => export::run(&args, global),
        Command::Delete(args) => delete::run(&args, global),
        Command::Check(args) => inspect::check(&args, global),
        Command::Build(args) => memory::build(&args, global),
        Command::Wiki(args) => memory::wiki(&args, global),
        Command::History(args) => memory::history(&args),
        Command::Model(args) => model::run(&args),
        Command::Embed(args) => embed::run(&args, global),
        Command::Query(args) => query::query(&args, global),
        Command::Ask(args) => ask::ask(&args, global),
        Command::Eval(cmd) => query::eval(&cmd, global),
        Command::Serve(args) => serve::run(&args, global),
        Command::Mcp(args) => serve::mcp(&args, global),
        Command::Trace(cmd) => trace::run(&cmd, global),
    }
}

/// Whether the error is a closed standard output (`trajwiki ... | head`): not a failure.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// 2 for errors in the input or the command line, 1 for everything else: the first link of the
/// chain that is the command line's own usage error or one of the engine's errors decides (the
/// engine's kind, [`trajwiki::failure`], is the one every face maps).
pub fn exit_code(err: &anyhow::Error) -> u8 {
    let decided = err.chain().find_map(|cause| {
        if cause.is::<UsageError>() {
            return Some(true);
        }
        trajwiki::failure::kind_of(cause).map(|kind| kind.is_input())
    });
    if decided == Some(true) {
        2
    } else {
        1
    }
}
