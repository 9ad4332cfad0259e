//! Fuzzing of every parser of outside input: JSONL messages, JSONL runs, LoCoMo JSON and the
//! memory configuration (TOML), and the reader of inputs that can be read only once (pipes),
//! which must agree with the text parsers. `cargo fuzz` needs a nightly toolchain, which this project does
//! not use; this is a stable harness on proptest instead: random bytes, and JSON and TOML built
//! from the formats' own field names and from values chosen to hit the edges (wrong types,
//! huge and negative numbers, NaN, control characters, deep nesting, empty and long strings).
//! Each parser must answer `Ok` or `Err`, never panic; what parses must keep its invariants;
//! messages must survive a write and a read unchanged. A third kind of input mutates the
//! committed seed corpus (`tests/fuzz-corpus/<target>/`, valid files that each parser must take)
//! byte by byte: flips, cuts, insertions, repeats and tokens that break the grammar.
//!
//! One more target lives beside the engine it drives: `append_patterns_fuzzed` in
//! `crates/trajwiki-engine/tests/live_appends.rs` draws append patterns (sessions new, earlier
//! and current; sizes; builds; two writers, some appends at once) and holds every search after
//! every append to a cold load's, byte for byte.
//!
//! `cargo test --test fuzz` runs each target (parser) for `TRAJWIKI_FUZZ_SECONDS` seconds,
//! split over its kinds of input (default: 6, so that the suite stays quick); the long runs
//! recorded in BENCHMARKS.md set it to 600.

use std::path::Path;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{json, Value};
use trajwiki::ingest::jsonl::{parse_messages, parse_runs, write_messages};
use trajwiki::ingest::locomo::parse_locomo;
use trajwiki::memory::MemoryConfig;

#[path = "common/fuzzing.rs"]
mod fuzzing;
use fuzzing::mutated;

/// A JSON value from the formats' vocabulary.
fn value() -> impl Strategy<Value = Value> {
    fuzzing::json_value(STRINGS, FIELDS)
}

/// Runs `test` on values of `strategy` for its share of the configured time: a target (a
/// parser) gets `TRAJWIKI_FUZZ_SECONDS`, split evenly over its `kinds` kinds of input. Returns
/// how many cases ran.
fn fuzz<S: Strategy>(
    name: &str,
    kinds: u64,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) -> u64
where
    S::Value: std::fmt::Debug,
{
    let seconds: u64 = std::env::var("TRAJWIKI_FUZZ_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6)
        / kinds;
    let until = Instant::now() + Duration::from_secs(seconds);
    let mut cases = 0;
    while Instant::now() < until {
        let mut runner = TestRunner::new(Config {
            cases: 256,
            failure_persistence: None,
            ..Config::default()
        });
        if let Err(e) = runner.run(&strategy, &test) {
            panic!("{name}: {e}");
        }
        cases += 256;
    }
    eprintln!("{name}: {cases} cases in {seconds} s, no failure");
    cases
}

/// The seed files of a target, each of which must parse.
fn seeds(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz-corpus")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files.iter().map(|f| std::fs::read(f).unwrap()).collect()
}

const FIELDS: &[&str] = &[
    "namespace",
    "session",
    "seq",
    "speaker",
    "text",
    "timestamp",
    "ref",
    "attachments",
    "kind",
    "caption",
    "url",
    "id",
    "env",
    "task",
    "steps",
    "action",
    "observation",
    "success",
    "reward",
    "sample_id",
    "conversation",
    "speaker_a",
    "speaker_b",
    "session_1",
    "session_1_date_time",
    "session_2",
    "session_2_date_time",
    "dia_id",
    "qa",
    "blip_caption",
    "img_url",
    "question",
    "answer",
    "evidence",
    "category",
];

const STRINGS: &[&str] = &[
    "",
    " ",
    "demo",
    "Ann",
    "I live in Oslo.",
    "2024-01-01T10:00:00",
    "0000-01-01T00:00:00",
    "9999-12-31T23:59:59",
    "+262144-01-01T00:00:00",
    "2024-02-30",
    "1:56 pm on 8 May, 2023",
    "D1:1",
    "D1:1",
    "msg_0123456789abcdef",
    "\u{1b}[2J",
    "a\0b",
    "\u{202e}",
    "\r\n",
    "../x",
    "'; DROP TABLE messages; --",
    "名前",
    "image",
];

/// A record that is mostly well formed: every field of a message and a run present with a
/// plausible value, then a few fields replaced by arbitrary values or removed.
fn record() -> impl Strategy<Value = Value> {
    let base = json!({
        "namespace": "fz", "session": 1, "speaker": "Ann", "text": "I live in Oslo.",
        "timestamp": "2024-01-01T10:00:00", "ref": "A1", "id": "r1", "task": "buy a mug",
        "steps": [{"action": "search[mug]", "observation": "3 results"}], "success": true,
        "reward": 1.0,
    });
    prop::collection::vec(
        (prop::sample::select(FIELDS), prop::option::of(value())),
        0..4,
    )
    .prop_map(move |edits| {
        let mut v = base.clone();
        for (k, new) in edits {
            match new {
                Some(x) => v[k] = x,
                None => {
                    v.as_object_mut().unwrap().remove(k);
                }
            }
        }
        v
    })
}

/// Lines of JSON text: records, arbitrary values, and now and then a cut or a stray byte.
fn jsonl() -> impl Strategy<Value = String> {
    let line = prop_oneof![
        4 => record().prop_map(|v| v.to_string()),
        1 => value().prop_map(|v| v.to_string()),
        1 => (record(), any::<prop::sample::Index>()).prop_map(|(v, i)| {
            let t = v.to_string();
            let cut = i.index(t.len() + 1);
            t.get(..cut).unwrap_or(&t).to_string()
        }),
        1 => "\\PC{0,40}",
    ];
    prop::collection::vec(line, 0..6).prop_map(|lines| lines.join("\n"))
}

fn check_messages(text: &str) -> Result<(), TestCaseError> {
    let file = Path::new("fuzz.jsonl");
    if let Ok(messages) = parse_messages(file, text) {
        for m in &messages {
            prop_assert!(!m.namespace.as_str().is_empty());
            prop_assert!(m.seq >= 1);
            let year = chrono::Datelike::year(&m.timestamp);
            prop_assert!((1..=9999).contains(&year), "year {year}");
        }
        // What was read is written and read back unchanged.
        let mut out = Vec::new();
        write_messages(&mut out, &messages).unwrap();
        match parse_messages(file, std::str::from_utf8(&out).unwrap()) {
            Ok(back) => prop_assert_eq!(back, messages),
            Err(e) => {
                return Err(TestCaseError::fail(format!(
                    "written messages do not read back: {e}"
                )))
            }
        }
    }
    Ok(())
}

#[test]
fn jsonl_messages() {
    for seed in seeds("messages") {
        let text = String::from_utf8(seed).unwrap();
        assert!(
            parse_messages(Path::new("seed.jsonl"), &text).is_ok(),
            "{text}"
        );
    }
    fuzz("messages (structured)", 3, jsonl(), |text| {
        check_messages(&text)
    });
    fuzz(
        "messages (seeds mutated)",
        3,
        mutated(seeds("messages")),
        |bytes| check_messages(&String::from_utf8_lossy(&bytes)),
    );
    fuzz(
        "messages (bytes)",
        3,
        prop::collection::vec(any::<u8>(), 0..400),
        |bytes| check_messages(&String::from_utf8_lossy(&bytes)),
    );
}

#[test]
fn jsonl_runs() {
    let check = |text: &str| -> Result<(), TestCaseError> {
        if let Ok(runs) = parse_runs(Path::new("fuzz.jsonl"), text, None) {
            for r in &runs {
                prop_assert!(!r.external_ref.trim().is_empty());
                prop_assert!(r.outcome.reward.is_none_or(f64::is_finite));
            }
        }
        Ok(())
    };
    for seed in seeds("runs") {
        let text = String::from_utf8(seed).unwrap();
        assert!(
            parse_runs(Path::new("seed.jsonl"), &text, None).is_ok(),
            "{text}"
        );
    }
    fuzz("runs (structured)", 3, jsonl(), |text| check(&text));
    fuzz("runs (seeds mutated)", 3, mutated(seeds("runs")), |bytes| {
        check(&String::from_utf8_lossy(&bytes))
    });
    fuzz(
        "runs (bytes)",
        3,
        prop::collection::vec(any::<u8>(), 0..400),
        |bytes| check(&String::from_utf8_lossy(&bytes)),
    );
}

#[test]
fn locomo_json() {
    let turn = || {
        prop::collection::vec((prop::sample::select(FIELDS), value()), 0..5).prop_map(|kv| {
            let mut t = json!({"speaker": "A", "dia_id": "D1:1", "text": "hi"});
            for (k, v) in kv {
                t[k] = v;
            }
            t
        })
    };
    let sample = (
        prop::collection::vec(turn(), 0..4),
        prop::collection::vec((prop::sample::select(FIELDS), value()), 0..4),
    )
        .prop_map(|(turns, edits)| {
            let mut s = json!({
                "sample_id": "fz",
                "conversation": {
                    "speaker_a": "A", "speaker_b": "B",
                    "session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": turns,
                },
                "qa": [{"question": "q", "answer": "a", "evidence": ["D1:1"], "category": 1}],
            });
            for (k, v) in edits {
                s["conversation"][k] = v;
            }
            json!([s]).to_string()
        });
    let text =
        prop_oneof![3 => sample, 1 => value().prop_map(|v| v.to_string()), 1 => "\\PC{0,60}"];
    let check = |text: &str| -> Result<(), TestCaseError> {
        if let Ok(samples) = parse_locomo(Path::new("fuzz.json"), text) {
            for s in &samples {
                for m in &s.messages {
                    prop_assert!(m
                        .external_ref
                        .as_deref()
                        .is_some_and(|r| !r.trim().is_empty()));
                }
            }
        }
        Ok(())
    };
    for seed in seeds("locomo") {
        let text = String::from_utf8(seed).unwrap();
        assert!(
            parse_locomo(Path::new("seed.json"), &text).is_ok(),
            "{text}"
        );
    }
    fuzz("locomo (structured)", 2, text, |text| check(&text));
    fuzz(
        "locomo (seeds mutated)",
        2,
        mutated(seeds("locomo")),
        |bytes| check(&String::from_utf8_lossy(&bytes)),
    );
}

/// A reader that hands its bytes out in pieces of the given sizes (cycled), as a pipe may.
struct Pieces {
    bytes: std::io::Cursor<Vec<u8>>,
    sizes: Vec<usize>,
    next: usize,
}

impl std::io::Read for Pieces {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let size = self.sizes[self.next % self.sizes.len()].max(1);
        self.next += 1;
        let n = size.min(out.len());
        self.bytes.read(&mut out[..n])
    }
}

/// The same text read once from a pipe, in pieces, as [`Input`] reads it, and parsed whole by
/// the text parsers (the HTTP API's and Python's): the same records, or an error from both, and
/// for JSONL the same error.
#[test]
fn input_read_once_agrees_with_text() {
    use trajwiki::ingest::Input;
    let sizes = || prop::collection::vec(1usize..70, 1..6);
    let piped = |text: &str, sizes: Vec<usize>| {
        let bytes = std::io::Cursor::new(text.as_bytes().to_vec());
        Input::from_reader(
            "fuzz.jsonl",
            Pieces {
                bytes,
                sizes,
                next: 0,
            },
        )
    };
    let file = Path::new("fuzz.jsonl");
    let same = |text: &str, sizes: Vec<usize>| -> Result<(), TestCaseError> {
        // A byte-order mark is text to the text parsers; a reader skips it.
        if text.starts_with('\u{feff}') {
            return Ok(());
        }
        let (a, b) = (
            piped(text, sizes.clone()).read_messages(),
            parse_messages(file, text),
        );
        match (&a, &b) {
            (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
            (Err(a), Err(b)) => prop_assert_eq!(a.to_string(), b.to_string()),
            _ => prop_assert!(false, "messages: read {a:?}, parsed {b:?}"),
        }
        let (a, b) = (
            piped(text, sizes.clone()).read_runs(None),
            parse_runs(file, text, None),
        );
        match (&a, &b) {
            (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
            (Err(a), Err(b)) => prop_assert_eq!(a.to_string(), b.to_string()),
            _ => prop_assert!(false, "runs: read {a:?}, parsed {b:?}"),
        }
        let (a, b) = (piped(text, sizes).read_locomo(), parse_locomo(file, text));
        match (&a, &b) {
            (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
            (Err(_), Err(_)) => {}
            _ => prop_assert!(false, "locomo: read {a:?}, parsed {b:?}"),
        }
        Ok(())
    };
    for target in ["messages", "runs", "locomo"] {
        for seed in seeds(target) {
            same(&String::from_utf8(seed).unwrap(), vec![7]).unwrap();
        }
    }
    let all_seeds = || {
        ["messages", "runs", "locomo"]
            .into_iter()
            .flat_map(seeds)
            .collect::<Vec<_>>()
    };
    fuzz(
        "read once (structured)",
        2,
        (jsonl(), sizes()),
        |(text, sizes)| same(&text, sizes),
    );
    fuzz(
        "read once (seeds mutated)",
        2,
        (mutated(all_seeds()), sizes()),
        |(bytes, sizes)| same(&String::from_utf8_lossy(&bytes), sizes),
    );
}

#[test]
fn memory_configuration() {
    let keys = toml::to_string(&MemoryConfig::default())
        .unwrap()
        .lines()
        .filter_map(|l| l.split(" = ").next().map(str::to_string))
        .collect::<Vec<_>>();
    let values = prop::sample::select(vec![
        "nan",
        "inf",
        "-inf",
        "-1",
        "0",
        "1",
        "0.5",
        "1e30",
        "-0.0",
        "3",
        "18446744073709551616",
        "\"text\"",
        "true",
        "[]",
        "{}",
        "0x10",
    ]);
    let text = prop_oneof![
        3 => prop::collection::vec((prop::sample::select(keys), values), 0..6).prop_map(|kv| {
            kv.into_iter()
                .map(|(k, v)| format!("{k} = {v}\n"))
                .collect::<String>()
        }),
        1 => "\\PC{0,80}",
    ];
    let check = |text: &str| -> Result<(), TestCaseError> {
        if let Ok(config) = MemoryConfig::from_toml(text) {
            if config.validate().is_ok() {
                prop_assert!(config.delta.is_finite() && (0.0..=1.0).contains(&config.delta));
                prop_assert!(config.max_trajectory_len >= 1);
            }
        }
        Ok(())
    };
    for seed in seeds("config") {
        let text = String::from_utf8(seed).unwrap();
        let config = MemoryConfig::from_toml(&text).unwrap();
        assert_eq!(config.validate(), Ok(()));
    }
    fuzz("memory configuration (structured)", 2, text, |text| {
        check(&text)
    });
    fuzz(
        "memory configuration (seeds mutated)",
        2,
        mutated(seeds("config")),
        |bytes| check(&String::from_utf8_lossy(&bytes)),
    );
}

/// Found by `jsonl_messages` (seeds mutated): a timestamp with fractional seconds was written
/// without them, so a message exported and ingested again was another message.
#[test]
fn fractional_seconds_are_written_and_read_back() {
    let line = r#"{"namespace": "e", "session": 1, "seq": 1, "speaker": "A", "text": "last", "timestamp": "9999-12-31T23:59:05.900"}"#;
    check_messages(line).unwrap();
}
