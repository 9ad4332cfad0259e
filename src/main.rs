//! The `trajwiki` command line. Exit codes: 0 success, 1 runtime failure, 2 usage or input error.

mod cli;

use std::process::ExitCode;

use clap::Parser;

/// mimalloc rather than the system's allocator: a cold load decodes a namespace's records into
/// many small strings on several threads, where glibc's per-thread arenas grow a page range at a
/// time (BENCHMARKS.md, "The cold load's allocations").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args = match cli::Cli::try_parse() {
        Ok(args) => args,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match cli::run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if cli::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            cli::report(&e);
            ExitCode::from(cli::exit_code(&e))
        }
    }
}
