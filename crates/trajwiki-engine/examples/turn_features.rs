//! Writes every candidate turn of every LoCoMo question (categories 1–4) with its turn-model
//! features, for fitting the model (`scripts/fit_turns.py`).
//!
//! ```text
//! cargo run --release -p trajwiki-engine --example turn_features -- \
//!     LOCOMO.json STORE MODEL OUT.jsonl
//! ```
//! STORE is a store `trajwiki eval locomo` built from the same file with the same model (its
//! `OUT/store`). One line per question: its sample, index, category, gold refs, and per
//! candidate turn its ref, session, line tokens and features (named in the first line).

use std::io::Write;
use std::path::PathBuf;

use serde_json::json;
use trajwiki_compute::CpuScoring;
use trajwiki_engine::api::load_embedder;
use trajwiki_engine::load::load_index;
use trajwiki_engine::retrieval::embed_query;
use trajwiki_ingest::locomo::read_locomo;
use trajwiki_retrieve::turns::NAMES;
use trajwiki_retrieve::{Derived, Mode, RetrievalConfig};
use trajwiki_store::Store;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [data, store, model, out] = args.as_slice() else {
        return Err("usage: turn_features LOCOMO.json STORE MODEL OUT.jsonl".into());
    };
    let samples = read_locomo(&PathBuf::from(data))?;
    let store = Store::open(PathBuf::from(store))?;
    let embedder = load_embedder(model)?;
    let config = RetrievalConfig {
        turn_features: true,
        ..RetrievalConfig::default()
    };
    let mut out = std::io::BufWriter::new(std::fs::File::create(out)?);
    writeln!(out, "{}", json!({ "features": NAMES }))?;
    for sample in &samples {
        let index = load_index(
            &store,
            &sample.namespace,
            embedder.as_ref(),
            &mut Derived::transient(),
            None,
        )?
        .index;
        for q in sample.qa.iter().filter(|q| q.category != 5) {
            let (qvec, _) = embed_query(embedder.as_ref(), &q.question)?;
            let ranking = index.rank(&q.question, &qvec, Mode::Full, &config, &CpuScoring)?;
            let turns: Vec<_> = ranking
                .turn_features
                .iter()
                .map(|(m, f)| {
                    json!([
                        index.message_ref(*m),
                        index.records.messages[*m].session,
                        index.line_tokens(*m),
                        f
                    ])
                })
                .collect();
            let line = json!({
                "sample_id": sample.namespace.as_str(),
                "qa_index": q.qa_index,
                "category": q.category,
                "gold": q.evidence,
                "order": ranking.messages.iter().map(|&m| index.message_ref(m)).collect::<Vec<_>>(),
                "turns": turns,
            });
            writeln!(out, "{line}")?;
        }
        eprintln!("{}", sample.namespace.as_str());
    }
    Ok(())
}
