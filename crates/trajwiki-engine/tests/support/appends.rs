//! What the tests of a living memory append: a deterministic stream of numbers to draw the
//! appends from, and the speakers and words of the messages (shared by
//! `crates/trajwiki-engine/tests/live_appends.rs` and `tests/live_index.rs`).

/// A deterministic stream of numbers (a linear congruential generator): a case is the same on
/// every run, and a failure names its seed and step.
pub struct Numbers(pub u64);

impl Numbers {
    pub fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as usize % n
    }
}

pub const SPEAKERS: [&str; 3] = ["Maya", "Leo", "Ines"];

pub const WORDS: [&str; 24] = [
    "pottery",
    "workshop",
    "garden",
    "tulips",
    "Lisbon",
    "harbour",
    "painted",
    "books",
    "novel",
    "yesterday",
    "last",
    "week",
    "Oslo",
    "planted",
    "roses",
    "dog",
    "walked",
    "beach",
    "recipe",
    "bread",
    "concert",
    "guitar",
    "moved",
    "job",
];
