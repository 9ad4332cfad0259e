//! What the fuzz harnesses (tests/fuzz.rs, tests/fuzz_http.rs) build their inputs from: JSON
//! values from a format's vocabulary with values at the edges, and byte-level mutation of valid
//! inputs (flips, cuts, insertions, repeats and tokens that break the grammar).

#![allow(dead_code)]

use proptest::prelude::*;
use serde_json::{json, Value};

/// A JSON value from a vocabulary (`strings`, and `fields` as object keys), nested up to a few
/// levels, with numbers and strings at the edges (0, 2^32, u64::MAX, long strings).
pub fn json_value(
    strings: &'static [&'static str],
    fields: &'static [&'static str],
) -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        prop_oneof![
            Just(0u64),
            Just(1),
            Just(4_294_967_295),
            Just(4_294_967_296),
            Just(u64::MAX)
        ]
        .prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("JSON has no NaN", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        prop::sample::select(strings).prop_map(|s| json!(s)),
        "\\PC{0,24}".prop_map(Value::String),
        (0usize..70_000).prop_map(|n| json!("y".repeat(n))),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(fields), inner), 0..8).prop_map(|kv| {
                Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            }),
        ]
    })
}

/// One edit: its kind, where, how long, and a byte (flipped in, repeated, or choosing a token).
pub type Edit = (u8, prop::sample::Index, prop::sample::Index, u8);

/// A few edits to apply to one input.
pub fn edits() -> impl Strategy<Value = Vec<Edit>> {
    let edit = (
        0u8..5,
        any::<prop::sample::Index>(),
        any::<prop::sample::Index>(),
        any::<u8>(),
    );
    prop::collection::vec(edit, 1..8)
}

/// `bytes` with `edits` applied.
pub fn mutate(mut bytes: Vec<u8>, edits: Vec<Edit>) -> Vec<u8> {
    const TOKENS: &[&[u8]] = &[
        b"\"",
        b"{",
        b"}",
        b"[",
        b"]",
        b",",
        b":",
        b"\\",
        b"\\u0000",
        b"\\ud800",
        b"-1",
        b"4294967296",
        b"1e999",
        b"null",
        b"true",
        b"\xff",
        b"\n",
        b"\xef\xbb\xbf",
        b"0000-01-01",
    ];
    for (kind, at, len, byte) in edits {
        let i = at.index(bytes.len() + 1);
        let n = len.index(16.min(bytes.len() - i) + 1);
        match kind {
            0 if i < bytes.len() => bytes[i] ^= byte | 1,
            1 => {
                bytes.drain(i..i + n);
            }
            2 => {
                bytes.splice(i..i, std::iter::repeat_n(byte, n));
            }
            3 => {
                let copy = bytes[i..i + n].to_vec();
                bytes.splice(i..i, copy);
            }
            _ => {
                let token = TOKENS[byte as usize % TOKENS.len()];
                bytes.splice(i..i, token.iter().copied());
            }
        }
    }
    bytes
}

/// One of `seeds` with a few edits.
pub fn mutated(seeds: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    (prop::sample::select(seeds), edits()).prop_map(|(bytes, edits)| mutate(bytes, edits))
}
