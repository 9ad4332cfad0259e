//! Byte-level mutation of valid inputs, shared by the fuzz harnesses (tests/fuzz.rs,
//! tests/fuzz_http.rs): flips, cuts, insertions, repeats and tokens that break the grammar.

#![allow(dead_code)]

use proptest::prelude::*;

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
