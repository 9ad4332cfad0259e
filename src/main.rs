//! The `trajwiki` command line.

mod cli;

use clap::{Parser, Subcommand};

/// Long-term memory for LLM agents.
#[derive(Debug, Parser)]
#[command(name = "trajwiki", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Obtain and list embedding models.
    Model(cli::model::ModelArgs),
    /// Embed texts, one per line, to JSON lines or .npy.
    Embed(cli::embed::EmbedArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match &cli.command {
        Command::Model(a) => cli::model::run(a),
        Command::Embed(a) => cli::embed::run(a),
    }
}
