//! Activation buffers reused across forward passes.
//!
//! A batch's activation matrices are megabytes each (16,384 tokens × 1,536 values of MiniLM's
//! feed-forward are 100 MB), above the allocator's mapping threshold: allocated fresh for every
//! layer, each was mapped, faulted in page by page, zeroed by the kernel and unmapped again — a
//! fifth of the CPU time of a MiniLM build was the kernel doing that. Buffers taken from here
//! come back after use and keep their pages.

use std::sync::Mutex;

/// Most buffers kept per element type (a forward pass uses six at once).
const KEPT: usize = 12;

/// A free list of vectors of `T`.
pub(crate) struct Scratch<T>(Mutex<Vec<Vec<T>>>);

impl<T: Copy + Default> Scratch<T> {
    /// An empty free list.
    pub(crate) const fn new() -> Self {
        Scratch(Mutex::new(Vec::new()))
    }

    /// A vector of `len` values whose contents are unspecified (what its last use left, or the
    /// default): for outputs that are written in full.
    pub(crate) fn take(&self, len: usize) -> Vec<T> {
        let mut v = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop()
            .unwrap_or_default();
        if v.len() < len {
            v.resize(len, T::default());
        }
        v.truncate(len);
        v
    }

    /// A vector of `len` default values.
    pub(crate) fn take_filled(&self, len: usize, value: T) -> Vec<T> {
        let mut v = self.take(len);
        v.fill(value);
        v
    }

    /// Returns `v` for reuse (dropped when enough are kept).
    pub(crate) fn give(&self, v: Vec<T>) {
        let mut free = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if free.len() < KEPT {
            free.push(v);
        }
    }
}

/// f32 activations.
pub(crate) static F32: Scratch<f32> = Scratch::new();
/// bf16 activations.
pub(crate) static BF16: Scratch<u16> = Scratch::new();
/// int8 activations (offset by 128).
pub(crate) static U8: Scratch<u8> = Scratch::new();
