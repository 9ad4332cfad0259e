//! The hand-written text analysis side by side with the crates that do the same
//! (issue 41): `stem` against rust-stemmers' Snowball English stemmer, `words` against
//! unicode-segmentation's UAX #29 words, `sentences` against its UAX #29 sentences — on every
//! turn of the LoCoMo conversations. Prints, for each pair, the time over all turns and where
//! they disagree; for the stemmers, what they do for retrieval: the recall of each question's
//! gold evidence turns among the BM25 top 10 and top 25 of its conversation's turns, all else
//! equal (the same words, stopwords and BM25).
//!
//! `cargo run --release -p trajwiki-text --example side_by_side -- ../shared/data/locomo/locomo7.json`

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

use rust_stemmers::{Algorithm, Stemmer};
use trajwiki_text::text::{is_stopword, norm, sentences, stem, words};
use unicode_segmentation::UnicodeSegmentation;

struct Conversation {
    turns: Vec<(String, String)>,
    questions: Vec<(u64, String, Vec<String>)>,
}

fn load(path: &str) -> Result<Vec<Conversation>, Box<dyn std::error::Error>> {
    let data: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path)?)?;
    let mut out = Vec::new();
    for sample in data.as_array().ok_or("a list of samples")? {
        let mut turns = Vec::new();
        let conv = sample["conversation"].as_object().ok_or("a conversation")?;
        let mut sessions: Vec<(u64, &serde_json::Value)> = conv
            .iter()
            .filter_map(|(k, v)| {
                let n = k.strip_prefix("session_")?.parse().ok()?;
                v.is_array().then_some((n, v))
            })
            .collect();
        sessions.sort_by_key(|s| s.0);
        for (_, session) in sessions {
            for turn in session.as_array().into_iter().flatten() {
                let mut text = turn["text"].as_str().unwrap_or_default().to_string();
                if let Some(caption) = turn["blip_caption"].as_str() {
                    text.push_str(" [photo: ");
                    text.push_str(caption);
                    text.push(']');
                }
                turns.push((
                    turn["dia_id"].as_str().unwrap_or_default().to_string(),
                    text,
                ));
            }
        }
        let questions = sample["qa"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|q| {
                let category = q["category"].as_u64()?;
                let evidence = q["evidence"]
                    .as_array()?
                    .iter()
                    .filter_map(|e| e.as_str().map(str::to_string))
                    .collect::<Vec<_>>();
                (category != 5 && !evidence.is_empty()).then(|| {
                    (
                        category,
                        q["question"].as_str().unwrap_or_default().to_string(),
                        evidence,
                    )
                })
            })
            .collect();
        out.push(Conversation { turns, questions });
    }
    Ok(out)
}

/// The terms of a text under `stemmer`: content words of 3+ characters, not stopwords.
fn terms(text: &str, stemmer: &dyn Fn(&str) -> String) -> Vec<String> {
    words(text)
        .into_iter()
        .filter_map(|(_, w)| {
            let w = norm(w);
            (w.chars().count() >= 3 && !is_stopword(&w) && !w.chars().all(|c| c.is_ascii_digit()))
                .then(|| stemmer(&w))
        })
        .collect()
}

/// Recall of gold turns in BM25's top `ks` over each conversation, per question, averaged.
fn bm25_recall(convs: &[Conversation], stemmer: &dyn Fn(&str) -> String, ks: &[usize]) -> Vec<f64> {
    let mut sums = vec![0.0; ks.len()];
    let mut n = 0usize;
    for conv in convs {
        let docs: Vec<Vec<String>> = conv.turns.iter().map(|(_, t)| terms(t, stemmer)).collect();
        let mut df: HashMap<&str, usize> = HashMap::new();
        for d in &docs {
            for t in d.iter().collect::<HashSet<_>>() {
                *df.entry(t.as_str()).or_default() += 1;
            }
        }
        let avg = docs.iter().map(Vec::len).sum::<usize>() as f64 / docs.len() as f64;
        let (k1, b, count) = (1.2, 0.75, docs.len() as f64);
        for (_, question, gold) in &conv.questions {
            let q: HashSet<String> = terms(question, stemmer).into_iter().collect();
            let mut scored: Vec<(f64, usize)> = docs
                .iter()
                .enumerate()
                .map(|(i, d)| {
                    let mut tf: HashMap<&str, f64> = HashMap::new();
                    for t in d {
                        *tf.entry(t.as_str()).or_default() += 1.0;
                    }
                    let s: f64 = q
                        .iter()
                        .filter_map(|t| {
                            let f = *tf.get(t.as_str())?;
                            let n = df[t.as_str()] as f64;
                            let idf = ((count - n + 0.5) / (n + 0.5) + 1.0).ln();
                            Some(
                                idf * f * (k1 + 1.0)
                                    / (f + k1 * (1.0 - b + b * d.len() as f64 / avg)),
                            )
                        })
                        .sum();
                    (s, i)
                })
                .collect();
            scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            let gold: HashSet<&str> = gold.iter().map(String::as_str).collect();
            for (j, &k) in ks.iter().enumerate() {
                let found = scored
                    .iter()
                    .take(k)
                    .filter(|(s, i)| *s > 0.0 && gold.contains(conv.turns[*i].0.as_str()))
                    .count();
                sums[j] += found as f64 / gold.len() as f64;
            }
            n += 1;
        }
    }
    sums.into_iter().map(|s| s / n as f64).collect()
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let t = Instant::now();
    let out = f();
    (out, t.elapsed().as_secs_f64() * 1000.0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: side_by_side LOCOMO.json")?;
    let convs = load(&path)?;
    let texts: Vec<&str> = convs
        .iter()
        .flat_map(|c| c.turns.iter().map(|(_, t)| t.as_str()))
        .collect();
    let questions: usize = convs.iter().map(|c| c.questions.len()).sum();
    println!(
        "{} turns, {} questions (categories 1-4 with evidence)",
        texts.len(),
        questions
    );

    // Words.
    let (ours, ms_ours) = timed(|| texts.iter().map(|t| words(t).len()).sum::<usize>());
    let (theirs, ms_theirs) = timed(|| {
        texts
            .iter()
            .map(|t| t.unicode_words().count())
            .sum::<usize>()
    });
    let mut differ = 0;
    let mut examples: BTreeMap<String, usize> = BTreeMap::new();
    for t in &texts {
        let a: Vec<&str> = words(t).into_iter().map(|(_, w)| w).collect();
        let b: Vec<&str> = t.unicode_words().collect();
        if a != b {
            differ += 1;
            let sa: HashSet<&str> = a.iter().copied().collect();
            for w in b.iter().filter(|w| !sa.contains(*w)) {
                *examples.entry(format!("UAX29 {w:?}")).or_default() += 1;
            }
            let sb: HashSet<&str> = b.iter().copied().collect();
            for w in a.iter().filter(|w| !sb.contains(*w)) {
                *examples.entry(format!("ours {w:?}")).or_default() += 1;
            }
        }
    }
    let mut top: Vec<(&String, &usize)> = examples.iter().collect();
    top.sort_by(|a, b| b.1.cmp(a.1));
    println!(
        "words: ours {ours} in {ms_ours:.1} ms, unicode_words {theirs} in {ms_theirs:.1} ms; {differ} of {} turns cut differently; most frequent differences: {:?}",
        texts.len(),
        &top[..top.len().min(12)]
    );

    // Sentences, of the turns' own text (a photo's caption is not a sentence of it).
    let texts: Vec<&str> = texts
        .iter()
        .map(|t| t.split(" [photo: ").next().unwrap_or(t))
        .collect();
    let (ours, ms_ours) = timed(|| texts.iter().map(|t| sentences(t).len()).sum::<usize>());
    let (theirs, ms_theirs) = timed(|| {
        texts
            .iter()
            .map(|t| t.unicode_sentences().count())
            .sum::<usize>()
    });
    let mut differ = Vec::new();
    for t in &texts {
        let a: Vec<&str> = sentences(t);
        let b: Vec<&str> = t
            .unicode_sentences()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        if a != b {
            differ.push((a, b));
        }
    }
    println!(
        "sentences: ours {ours} in {ms_ours:.1} ms, unicode_sentences {theirs} in {ms_theirs:.1} ms; {} of {} turns cut differently",
        differ.len(),
        texts.len()
    );
    for (a, b) in differ.iter().take(8) {
        println!("  ours {a:?}\n  UAX29 {b:?}");
    }

    // Stems.
    let snowball = Stemmer::create(Algorithm::English);
    let vocabulary: HashSet<String> = texts
        .iter()
        .flat_map(|t| words(t).into_iter().map(|(_, w)| norm(w)))
        .filter(|w| w.chars().count() >= 3 && !is_stopword(w))
        .collect();
    let vocabulary: Vec<String> = vocabulary.into_iter().collect();
    let (_, ms_ours) = timed(|| vocabulary.iter().map(|w| stem(w).len()).sum::<usize>());
    let (_, ms_theirs) = timed(|| {
        vocabulary
            .iter()
            .map(|w| snowball.stem(w).len())
            .sum::<usize>()
    });
    let classes = |f: &dyn Fn(&str) -> String| {
        vocabulary
            .iter()
            .map(|w| f(w))
            .collect::<HashSet<_>>()
            .len()
    };
    println!(
        "stems of {} distinct words: ours {ms_ours:.1} ms, {} classes; Snowball {ms_theirs:.1} ms, {} classes",
        vocabulary.len(),
        classes(&|w| stem(w)),
        classes(&|w| snowball.stem(w).into_owned())
    );
    let ks = [10, 25];
    let ours = bm25_recall(&convs, &|w| stem(w), &ks);
    let theirs = bm25_recall(&convs, &|w| snowball.stem(w).into_owned(), &ks);
    let none = bm25_recall(&convs, &|w| w.to_string(), &ks);
    println!(
        "BM25 recall of gold turns @10 / @25: no stemming {:.3} / {:.3}, ours {:.3} / {:.3}, Snowball {:.3} / {:.3}",
        none[0], none[1], ours[0], ours[1], theirs[0], theirs[1]
    );
    Ok(())
}
