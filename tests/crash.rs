//! Crash safety: a child `trajwiki ingest` killed with SIGKILL at several points leaves a store
//! that passes `check` and holds each batch (file) either whole or not at all.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{bin, ok, stats};

const FILES: usize = 4;
const PER_FILE: usize = 25_000;

fn generate(dir: &Path) -> Vec<PathBuf> {
    (0..FILES)
        .map(|f| {
            let path = dir.join(format!("batch{f}.jsonl"));
            let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
            for i in 0..PER_FILE {
                let session = 1 + i / 100;
                writeln!(
                    out,
                    r#"{{"namespace": "crash-{f}", "session": {session}, "speaker": "S{}", "text": "Message {i} of batch {f}: the quick brown fox jumps over the lazy dog.", "timestamp": "2024-01-01T10:00:00", "ref": "R{i}"}}"#,
                    i % 2
                )
                .unwrap();
            }
            path
        })
        .collect()
}

fn per_namespace(store: &Path) -> Vec<u64> {
    let st = stats(store);
    (0..FILES)
        .map(|f| {
            st["per_namespace"]
                .as_array()
                .unwrap()
                .iter()
                .find(|row| row["namespace"] == format!("crash-{f}"))
                .map_or(0, |row| row["messages"].as_u64().unwrap())
        })
        .collect()
}

#[test]
fn sigkill_leaves_whole_batches() {
    let dir = tempfile::tempdir().unwrap();
    let files = generate(dir.path());
    let mut args: Vec<String> = vec!["ingest".into(), "--quiet".into(), "--store".into()];
    let file_args: Vec<String> = files
        .iter()
        .map(|f| f.to_str().unwrap().to_string())
        .collect();

    // Time one complete run to place the kills inside it.
    let reference = dir.path().join("reference");
    let started = Instant::now();
    let mut full = args.clone();
    full.push(reference.to_str().unwrap().into());
    full.extend(file_args.iter().cloned());
    let status = bin().args(&full).status().unwrap();
    assert!(status.success());
    let total = started.elapsed();
    assert_eq!(per_namespace(&reference), vec![PER_FILE as u64; FILES]);

    let store = dir.path().join("store");
    args.push(store.to_str().unwrap().into());
    args.extend(file_args);
    let mut saw_partial_progress = false;
    for fraction in [0.15, 0.35, 0.55, 0.75, 0.9] {
        let mut child = bin().args(&args).spawn().unwrap();
        std::thread::sleep(total.mul_f64(fraction).max(Duration::from_millis(5)));
        let _ = child.kill(); // SIGKILL on Unix
        let _ = child.wait();
        if !store.join(trajwiki::store::DB_FILE).exists() {
            continue; // killed before the store was created
        }
        ok(&["check", "--store", store.to_str().unwrap()]);
        let counts = per_namespace(&store);
        for (f, n) in counts.iter().enumerate() {
            assert!(
                *n == 0 || *n == PER_FILE as u64,
                "batch {f} is partial after a kill at {fraction}: {n} messages"
            );
        }
        if counts.iter().any(|n| *n > 0) && counts.contains(&0) {
            saw_partial_progress = true;
        }
    }
    // Finishing the ingest completes the store, whatever state the kills left.
    bin().args(&args).status().unwrap();
    assert_eq!(per_namespace(&store), vec![PER_FILE as u64; FILES]);
    ok(&["check", "--store", store.to_str().unwrap()]);
    eprintln!("full ingest took {total:?}; a kill fell between batches: {saw_partial_progress}");
}
