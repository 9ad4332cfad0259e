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

/// A generated conversation of `sessions` sessions for namespace `ns`, one file per session.
fn conversation(dir: &Path, ns: &str, sessions: usize) -> Vec<PathBuf> {
    const CITIES: [&str; 6] = ["Oslo", "Lisbon", "Kyoto", "Quito", "Perth", "Tunis"];
    const HOBBIES: [&str; 5] = ["pottery", "climbing", "chess", "sailing", "baking"];
    const PEOPLE: [&str; 4] = ["Nora", "Ivan", "Leila", "Tomas"];
    (0..sessions)
        .map(|k| {
            let path = dir.join(format!("{ns}-{k}.jsonl"));
            let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
            for i in 0..40 {
                let n = k * 40 + i;
                let text = match n % 4 {
                    0 => format!("I moved to {} last month.", CITIES[n % 6]),
                    1 => format!("{} started {} in week {}.", PEOPLE[n % 4], HOBBIES[n % 5], n),
                    2 => format!("Do you still go {} with {}?", HOBBIES[(n / 3) % 5], PEOPLE[(n / 2) % 4]),
                    _ => format!("Not anymore, I gave up {} and now I live in {}.", HOBBIES[n % 5], CITIES[(n / 4) % 6]),
                };
                writeln!(
                    out,
                    r#"{{"namespace": "{ns}", "session": {}, "speaker": "{}", "text": "{text}", "timestamp": "2024-{:02}-{:02}T10:{:02}:00", "ref": "D{}:{}"}}"#,
                    k + 1,
                    ["Ann", "Bo"][i % 2],
                    1 + k / 28,
                    1 + k % 28,
                    i,
                    k + 1,
                    i + 1
                )
                .unwrap();
            }
            path
        })
        .collect()
}

/// 100 SIGKILLs at pseudo-random points of ingests and builds. After each kill the store
/// passes `check` and holds every batch whole or not at all; resuming (the same commands run
/// to the end) gives the memory a store that was never killed builds, byte for byte.
#[test]
fn a_hundred_kills_across_ingest_and_build() {
    let dir = tempfile::tempdir().unwrap();
    let names = ["k0", "k1"];
    let files: Vec<Vec<PathBuf>> = names
        .iter()
        .map(|ns| conversation(dir.path(), ns, 12))
        .collect();
    let ingest = |store: &Path, file: &Path| -> Vec<String> {
        [
            "ingest",
            "-q",
            "--store",
            store.to_str().unwrap(),
            file.to_str().unwrap(),
        ]
        .map(String::from)
        .to_vec()
    };
    let build = |store: &Path, ns: &str| -> Vec<String> {
        [
            "build",
            "-q",
            "--store",
            store.to_str().unwrap(),
            "--namespace",
            ns,
            "--model",
            "hashing",
        ]
        .map(String::from)
        .to_vec()
    };
    let export = |store: &Path, ns: &str| {
        ok(&[
            "export",
            "--store",
            store.to_str().unwrap(),
            "--namespace",
            ns,
            "--what",
            "memory",
        ])
    };

    // The reference, and how long its steps take.
    let reference = dir.path().join("reference");
    let started = Instant::now();
    for (ns, fs) in names.iter().zip(&files) {
        for f in fs {
            assert!(bin()
                .args(ingest(&reference, f))
                .status()
                .unwrap()
                .success());
        }
        assert!(bin()
            .args(build(&reference, ns))
            .status()
            .unwrap()
            .success());
    }
    let step = started.elapsed() / (names.len() * 13) as u32;
    let expected: Vec<String> = names.iter().map(|ns| export(&reference, ns)).collect();

    // 100 killed steps: ingests of the files in order (a killed one is tried again) with a
    // build of the namespace after every third file.
    let store = dir.path().join("store");
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = |bound: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % bound
    };
    let mut cursor = [0usize; 2];
    let mut kills = 0;
    let mut finished = 0;
    while kills < 100 {
        let which = next(2) as usize;
        let (ns, fs) = (names[which], &files[which]);
        // A namespace is built once its first file is in.
        let args = if cursor[which] == 0 || (cursor[which] < fs.len() && next(3) != 0) {
            ingest(&store, &fs[cursor[which]])
        } else {
            build(&store, ns)
        };
        let mut child = bin()
            .args(&args)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let wait = step.mul_f64(next(1000) as f64 / 500.0);
        std::thread::sleep(wait);
        let killed = child.try_wait().unwrap().is_none();
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        if killed {
            kills += 1;
        } else {
            assert!(
                out.status.success(),
                "{args:?} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            finished += 1;
            if args[0] == "ingest" {
                cursor[which] += 1;
            }
        }
        if store.join(trajwiki::store::DB_FILE).exists() {
            ok(&["check", "--store", store.to_str().unwrap()]);
            let st = stats(&store);
            for row in st["per_namespace"].as_array().unwrap() {
                let n = row["messages"].as_u64().unwrap();
                assert_eq!(n % 40, 0, "a partial batch after a kill: {row}");
            }
        }
    }
    // Resume: everything run to its end.
    for (ns, fs) in names.iter().zip(&files) {
        for f in fs {
            assert!(bin().args(ingest(&store, f)).status().unwrap().success());
        }
        assert!(bin().args(build(&store, ns)).status().unwrap().success());
    }
    ok(&["check", "--store", store.to_str().unwrap()]);
    for (ns, want) in names.iter().zip(&expected) {
        assert_eq!(
            &export(&store, ns),
            want,
            "namespace {ns} differs after the kills"
        );
    }
    eprintln!("100 kills, {finished} steps finished between them (a step takes ~{step:?})");
}
