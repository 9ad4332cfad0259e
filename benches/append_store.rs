//! The cost of one more message through the store (issue 12): ingests a long namespace
//! (`../shared/tools/make_long_conv.py`) but its last 20 messages into a fresh store and builds
//! it (lexical `hashing` model), then appends the last messages one at a time — ingest, then
//! build — twice over: 10 with `build_namespace` (the fold read back from the store each time, as
//! a CLI call does) and 10 with `build_namespace_kept` (the fold kept in memory, as the Python
//! `Memory` does). Prints the median milliseconds of each.
//!
//! `cargo bench --bench append_store -- /tmp/long5.jsonl [--store URL]`
//!
//! `--store` names the store to use instead of a temporary directory: an empty PostgreSQL
//! database (`postgres://user@host/db`) measures that backend.

use std::time::Instant;

use anyhow::Context;

use trajwiki::core::HashingEmbedder;
use trajwiki::memory::MemoryConfig;
use trajwiki::pipeline::{build_namespace, build_namespace_kept, BuildOptions};
use trajwiki::store::Store;

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let store_at = args
        .iter()
        .position(|a| a == "--store")
        .map(|i| args.get(i + 1).cloned().context("--store needs a URL"))
        .transpose()?;
    let Some(path) = args
        .iter()
        .find(|a| !a.starts_with("--") && Some(*a) != store_at.as_ref())
        .cloned()
    else {
        eprintln!("usage: cargo bench --bench append_store -- MESSAGES.jsonl [--store URL]");
        return Ok(());
    };
    let messages = trajwiki::ingest::jsonl::read_messages(path.as_ref())?;
    anyhow::ensure!(messages.len() > 40, "{path}: too few messages");
    let ns = messages[0].namespace.clone();
    let dir = tempfile::tempdir()?;
    let mut store = match &store_at {
        Some(url) => Store::open(url)?,
        None => Store::open(dir.path())?,
    };
    let e = HashingEmbedder::new(384);
    let config = MemoryConfig::default();
    let options = BuildOptions::default();
    let (history, last) = messages.split_at(messages.len() - 20);
    store.ingest_messages("history", history)?;
    let t0 = Instant::now();
    build_namespace(&mut store, &ns, &e, &config, options)?;
    println!(
        "{path}: built {} messages in {:.1} s",
        history.len(),
        t0.elapsed().as_secs_f64()
    );
    let mut read_back = Vec::new();
    let mut kept_times = Vec::new();
    let mut kept = None;
    for (i, m) in last.iter().enumerate() {
        let t = Instant::now();
        store.ingest_messages("append", std::slice::from_ref(m))?;
        if i < 10 {
            build_namespace(&mut store, &ns, &e, &config, options)?;
            read_back.push(t.elapsed().as_secs_f64() * 1e3);
        } else {
            build_namespace_kept(&mut store, &ns, &e, &config, options, &mut kept)?;
            if i > 10 {
                // The first kept build read the fold back; the others start from the kept one.
                kept_times.push(t.elapsed().as_secs_f64() * 1e3);
            }
        }
    }
    println!(
        "append one message (ingest + build) at {} messages, {}: {:.1} ms with the fold read back, {:.1} ms with the fold kept (medians)",
        history.len(),
        if store_at.is_some() { "PostgreSQL" } else { "SQLite" },
        median(read_back),
        median(kept_times)
    );
    Ok(())
}
