//! `trajwiki embed`: embed texts, one per line, to JSON lines or `.npy`.

use std::io::{BufRead, BufWriter, Write};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use clap::{Args, ValueEnum};
use trajwiki::embed::output::{write_jsonl, write_npy};
use trajwiki::embed::{EmbedKind, EmbedOptions, Embeddings, DEFAULT_MODEL};

use super::device::load_model;
use super::output::Output;
use super::{Global, UsageError};

/// Whether texts are queries or documents.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum KindArg {
    /// Search queries (instruction-tuned models prefix them).
    Query,
    /// Documents.
    Document,
}

/// Output formats.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Format {
    /// One JSON array per line.
    Jsonl,
    /// A NumPy float32 matrix.
    Npy,
}

/// Arguments of `trajwiki embed`.
#[derive(Debug, Args)]
pub struct EmbedArgs {
    /// Model folder, or a model name under $TRAJWIKI_HOME/models.
    #[arg(long, default_value = DEFAULT_MODEL)]
    pub model: String,
    /// Embed the texts as queries or as documents.
    #[arg(long, value_enum, default_value = "document")]
    pub kind: KindArg,
    /// Input file with one text per line; `-` for standard input.
    #[arg(long, default_value = "-")]
    pub input: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value = "jsonl")]
    pub format: Format,
    /// Output file (standard output when absent; required for npy).
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Truncate vectors to this dimension (Matryoshka models) and renormalise.
    #[arg(long)]
    pub dim: Option<usize>,
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Task of the query instruction (Qwen3-Embedding).
    #[arg(long)]
    pub task: Option<String>,
    /// Print timing (and the backend, cpu or cuda) as one JSON object on standard error.
    #[arg(long)]
    pub stats: bool,
}

fn read_lines(input: &PathBuf) -> anyhow::Result<Vec<String>> {
    let reader: Box<dyn BufRead> = if input.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        let f = std::fs::File::open(input)
            .with_context(|| format!("cannot open input {}", input.display()))?;
        Box::new(std::io::BufReader::new(f))
    };
    reader
        .lines()
        .enumerate()
        .map(|(i, l)| {
            l.map(|s| s.strip_suffix('\r').map(str::to_string).unwrap_or(s))
                .with_context(|| format!("{}: line {}: not UTF-8 text", input.display(), i + 1))
        })
        .collect()
}

/// Runs `trajwiki embed`.
pub(crate) fn run(args: &EmbedArgs, global: Global) -> anyhow::Result<()> {
    if args.output.is_none() && matches!(args.format, Format::Npy) {
        anyhow::bail!(UsageError("--format npy needs --output FILE".into()));
    }
    let output = args.output.as_deref().map(Output::to).transpose()?;
    let t0 = Instant::now();
    let opts = EmbedOptions {
        threads: args.threads,
        dim: args.dim,
        task: args.task.clone(),
        ..Default::default()
    };
    let loaded = load_model(&args.model, &opts, global.device, global)
        .with_context(|| format!("loading model {}", args.model))?;
    let (embedder, backend) = (loaded.embedder, loaded.backend);
    let load_s = t0.elapsed().as_secs_f64();
    let lines = read_lines(&args.input)?;
    let texts: Vec<&str> = lines.iter().map(String::as_str).collect();
    let kind = match args.kind {
        KindArg::Query => EmbedKind::Query,
        KindArg::Document => EmbedKind::Document,
    };
    let t1 = Instant::now();
    let vectors: Embeddings = embedder.embed(&texts, kind).context("embedding")?;
    let embed_s = t1.elapsed().as_secs_f64();

    let write = |sink: &mut dyn Write| match args.format {
        Format::Jsonl => write_jsonl(sink, &vectors),
        Format::Npy => write_npy(sink, &vectors),
    };
    match output {
        Some(output) => {
            let mut buf = Vec::new();
            write(&mut buf).context("writing embeddings")?;
            output.write(&buf)?;
        }
        None => {
            let mut sink = BufWriter::new(std::io::stdout().lock());
            write(&mut sink)
                .and_then(|()| sink.flush())
                .context("writing embeddings")?;
        }
    }
    if args.stats {
        eprintln!(
            "{}",
            serde_json::json!({
                "model_id": embedder.model_id(),
                "backend": backend,
                "kernel": embedder.kernel(),
                "texts": texts.len(),
                "dim": vectors.dim(),
                "load_s": load_s,
                "embed_s": embed_s,
                "texts_per_s": texts.len() as f64 / embed_s.max(1e-9),
            })
        );
    }
    Ok(())
}
