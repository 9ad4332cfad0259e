//! The cost of one more message through the store (issue 12): ingests a long namespace
//! (`../shared/tools/make_long_conv.py`) but its last `--last` messages (default 200) into a
//! fresh store and builds it (lexical `hashing` model), then appends the rest one at a time —
//! ingest, then build — the first 10 with `build_namespace` (the fold read back from the store
//! each time, as a CLI call does), the others through the engine's `NamespaceHandle::append`
//! with its build (the fold kept in memory, the messages, the fold's commit and the vector rows
//! one write transaction, as the server's appends are). Prints the median of the read-back
//! appends, and the mean, median and 90th percentile of the kept ones. `--separate` appends as
//! before issue 51 instead: the ingest a transaction of its own, then the build (the fold still
//! kept), for a before/after in one binary.
//!
//! Half the appends close an exchange and build it, half only wait for its reply, so a median
//! over a few appends falls between the two and moves with which ones they are: the mean over
//! many is the cost of a message. The namespaces `make_long_conv.py` writes for different
//! repeats end in the same messages, so their figures compare the same appends.
//!
//! `cargo bench --bench append_store -- /tmp/long4.jsonl [--last N] [--store URL]`
//! (`scripts/bench_postgres.py` runs it on PostgreSQL and SQLite side by side). A measure-a-file
//! tool, not a criterion benchmark: each run is one pass over a long history.
//!
//! `--store` names the store to use instead of a temporary directory: an empty PostgreSQL
//! database (`postgres://user@host/db`) measures that backend.

use std::time::Instant;

use anyhow::Context;

use std::sync::Arc;

use trajwiki::compute::CpuScoring;
use trajwiki::core::HashingEmbedder;
use trajwiki::engine::{Engine, Model};
use trajwiki::memory::MemoryConfig;
use trajwiki::pipeline::{build_namespace, BuildOptions};
use trajwiki::store::{Append, Store};

/// The `q` quantile of `xs` (nearest rank).
fn quantile(xs: &[f64], q: f64) -> f64 {
    let mut xs = xs.to_vec();
    xs.sort_by(f64::total_cmp);
    xs[((xs.len() - 1) as f64 * q).round() as usize]
}

/// The value after `flag`, when given.
fn option(args: &[String], flag: &str) -> anyhow::Result<Option<String>> {
    args.iter()
        .position(|a| a == flag)
        .map(|i| {
            args.get(i + 1)
                .cloned()
                .with_context(|| format!("{flag} needs a value"))
        })
        .transpose()
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let store_at = option(&args, "--store")?;
    let separate = args.iter().any(|a| a == "--separate");
    let last = option(&args, "--last")?;
    let Some(path) = args
        .iter()
        .find(|a| {
            !a.starts_with("--") && Some(*a) != store_at.as_ref() && Some(*a) != last.as_ref()
        })
        .cloned()
    else {
        eprintln!(
            "usage: cargo bench --bench append_store -- MESSAGES.jsonl [--last N] [--store URL] [--separate]"
        );
        return Ok(());
    };
    let last: usize = match last {
        Some(n) => n
            .parse()
            .with_context(|| format!("--last {n}: not a count"))?,
        None => 200,
    };
    anyhow::ensure!(last >= 20, "--last {last}: at least 20 appends");
    let messages = trajwiki::ingest::jsonl::read_messages(path.as_ref())?;
    anyhow::ensure!(
        messages.len() > 2 * last,
        "{path}: {} messages, too few for --last {last}",
        messages.len()
    );
    let ns = messages[0].namespace.clone();
    let dir = tempfile::tempdir()?;
    let mut store = match &store_at {
        Some(url) => Store::open(url)?,
        None => Store::open(dir.path())?,
    };
    let e = HashingEmbedder::new(384);
    let config = MemoryConfig::default();
    let options = BuildOptions::default();
    let (history, last) = messages.split_at(messages.len() - last);
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
    let (first, rest) = last.split_at(10);
    for m in first {
        let t = Instant::now();
        store.ingest_messages("append", std::slice::from_ref(m))?;
        build_namespace(&mut store, &ns, &e, &config, options)?;
        read_back.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let engine = Engine::new(
        store,
        Model::Loaded(Arc::new(HashingEmbedder::new(384))),
        Arc::new(CpuScoring),
        0,
    );
    let handle = engine.namespace(&ns);
    for (i, m) in rest.iter().enumerate() {
        let t = Instant::now();
        let one = [Append::given(m.clone())];
        if separate {
            engine.with_store(|store| {
                store.ingest_messages("append", std::slice::from_ref(m))?;
                anyhow::Ok(handle.build(store, &config, options)?)
            })?;
        } else {
            let appended =
                engine.with_store(|store| handle.append(store, "append", &one, Some(options)))?;
            if let Some(Err(e)) = appended.build {
                anyhow::bail!("append {i}: the build failed: {e}");
            }
        }
        // The first append read the fold back; the others start from the kept one.
        if i > 0 {
            kept_times.push(t.elapsed().as_secs_f64() * 1e3);
        }
    }
    println!(
        "append one message (ingest + build) at {} messages, {}: {:.1} ms with the fold read back (median of {}); with the fold kept, {:.2} ms a message (mean of {}; median {:.2}, p90 {:.2}; {})",
        history.len(),
        if store_at.is_some() { "PostgreSQL" } else { "SQLite" },
        quantile(&read_back, 0.5),
        read_back.len(),
        kept_times.iter().sum::<f64>() / kept_times.len() as f64,
        kept_times.len(),
        quantile(&kept_times, 0.5),
        quantile(&kept_times, 0.9),
        if separate {
            "the ingest and the build each their own transactions"
        } else {
            "ingest and build one transaction"
        },
    );
    Ok(())
}
