//! How the cost of construction grows with the history (issue 12): folds one long namespace
//! (`../shared/tools/make_long_conv.py LOCOMO.json R out.jsonl`) exchange by exchange with the
//! lexical `hashing` model, so that embedding is out of the picture, and prints
//!
//! - the fold's per-message time over the first and the last 10 % of the messages, and their
//!   ratio (a flat cost gives about 1);
//! - the latency of appending one more exchange to the whole history: the fold step (with the
//!   wiki's update), rendering the pages it changed, and both together.
//!
//! `cargo bench --bench fold_scale -- /tmp/long4.jsonl` (any file of JSONL messages of one
//! namespace). Not a criterion benchmark: each run is one pass over a long history.

use std::time::Instant;

use trajwiki::core::{EmbedKind, Embedder, HashingEmbedder, SourceMessage};
use trajwiki::memory::{
    exchanges, wiki, BuildReport, Builders, Delta, DeterministicDecider, DeterministicExtractor,
    DeterministicJudge, Fold, MemoryConfig,
};

fn main() -> anyhow::Result<()> {
    let Some(path) = std::env::args().skip(1).find(|a| !a.starts_with("--")) else {
        eprintln!("usage: cargo bench --bench fold_scale -- MESSAGES.jsonl");
        return Ok(());
    };
    let messages = trajwiki::ingest::jsonl::read_messages(path.as_ref())?;
    let config = MemoryConfig::default();
    let extractor = DeterministicExtractor::new(config.clone());
    let decider = DeterministicDecider::new(config.clone());
    let judge = DeterministicJudge::new(config.clone());
    let b = Builders {
        config: &config,
        extractor: &extractor,
        decider: &decider,
        judge: &judge,
    };
    let embedder = HashingEmbedder::new(384);
    let texts: Vec<String> = messages.iter().map(SourceMessage::embedding_text).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let vectors = embedder.embed(&refs, EmbedKind::Document)?;
    let groups = exchanges(&messages);

    let mut fold = Fold::new(messages[0].namespace.clone());
    let mut delta = Delta::default();
    // (messages so far, seconds for this exchange)
    let mut times: Vec<(usize, usize, f64)> = Vec::with_capacity(groups.len());
    let mut done = 0;
    let (last, history) = groups.split_last().expect("messages");
    let started = Instant::now();
    for g in history {
        let ms: Vec<&SourceMessage> = g.iter().map(|&i| &messages[i]).collect();
        let rows: Vec<&[f32]> = g.iter().map(|&i| vectors.row(i)).collect();
        let t0 = Instant::now();
        fold.append(&ms, &rows, &b, &mut delta)?;
        times.push((done, g.len(), t0.elapsed().as_secs_f64()));
        done += g.len();
    }
    let total = started.elapsed().as_secs_f64();
    let tenth = messages.len() / 10;
    let per_message = |range: &dyn Fn(usize) -> bool| {
        let (n, s) = times
            .iter()
            .filter(|(at, _, _)| range(*at))
            .fold((0, 0.0), |(n, s), (_, len, t)| (n + len, s + t));
        s / n as f64 * 1e6
    };
    let first = per_message(&|at| at < tenth);
    let last10 = per_message(&|at| at >= messages.len() - tenth);
    println!(
        "{}: {} messages, {} exchanges, {} trajectories; fold {total:.2} s",
        path,
        messages.len(),
        groups.len(),
        fold.trajectories.len()
    );
    println!(
        "per-message fold time: first 10 % {first:.1} µs, last 10 % {last10:.1} µs, ratio {:.2}",
        last10 / first
    );
    // The pages of the whole history, rendered once (what the build before this append wrote).
    let mut report = BuildReport::default();
    let t0 = Instant::now();
    let (all, _) = wiki(&mut fold, &mut report);
    let render_all = t0.elapsed().as_secs_f64() * 1e3;
    // One more exchange on top of the whole history: the fold step (with the wiki's update), then
    // rendering the pages it changed.
    let ms: Vec<&SourceMessage> = last.iter().map(|&i| &messages[i]).collect();
    let rows: Vec<&[f32]> = last.iter().map(|&i| vectors.row(i)).collect();
    let t0 = Instant::now();
    fold.append(&ms, &rows, &b, &mut delta)?;
    let append = t0.elapsed().as_secs_f64() * 1e3;
    let t1 = Instant::now();
    let (changed, retired) = wiki(&mut fold, &mut report);
    let render = t1.elapsed().as_secs_f64() * 1e3;
    println!(
        "rendering all {} pages of the history: {render_all:.1} ms",
        all.len()
    );
    println!(
        "append one exchange at {} messages: fold with wiki update {append:.2} ms, rendering the {} changed pages ({} retired) {render:.2} ms, total {:.2} ms",
        messages.len() - last.len(),
        changed.len(),
        retired.len(),
        append + render
    );
    Ok(())
}
