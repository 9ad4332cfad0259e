//! Errors of the scoring primitives. Bad input is reported, never panicked on.

/// What can go wrong when scoring.
#[derive(Debug, thiserror::Error)]
pub enum ComputeError {
    /// A vector or buffer whose length does not match the dimension it should have.
    #[error("wrong dimension for {what}: expected {expected}, got {got}")]
    WrongDimension {
        /// Which input (e.g. "queries", "matrix rows").
        what: &'static str,
        /// The expected length (or a multiple of it for row-major buffers).
        expected: usize,
        /// The length found.
        got: usize,
    },
    /// A dimension of zero, which would make every row empty.
    #[error("the embedding dimension must be positive")]
    ZeroDimension,
    /// A row or candidate index that does not exist.
    #[error("index {index} out of range for {what} of length {len}")]
    IndexOutOfRange {
        /// Which input the index points into.
        what: &'static str,
        /// The index found.
        index: u64,
        /// The length of the indexed collection.
        len: usize,
    },
    /// A term set that is not strictly increasing (sorted and free of duplicates).
    #[error("term set {which} is not strictly increasing at position {position}")]
    UnsortedSet {
        /// Which set (0 = the first argument, 1 = the second, or the document number).
        which: usize,
        /// The first position whose value is not greater than its predecessor.
        position: usize,
    },
    /// A parameter outside its valid range.
    #[error("invalid parameter {name} = {value}: {expected}")]
    InvalidParameter {
        /// The parameter's name.
        name: &'static str,
        /// The value given.
        value: f64,
        /// What is allowed.
        expected: &'static str,
    },
    /// Two batch inputs disagree on the number of queries.
    #[error("batch size mismatch for {what}: expected {expected}, got {got}")]
    BatchMismatch {
        /// Which input.
        what: &'static str,
        /// The number of queries.
        expected: usize,
        /// The number found.
        got: usize,
    },
    /// A request the backend cannot serve (e.g. a `k` larger than its kernels support); callers
    /// may fall back to the CPU backend.
    #[error("{backend} backend does not support this request: {reason}")]
    Unsupported {
        /// The backend's name.
        backend: &'static str,
        /// Why.
        reason: String,
    },
    /// The backend's device cannot be used (no driver, built without CUDA, …).
    #[error("device unavailable: {reason}")]
    DeviceUnavailable {
        /// Why.
        reason: String,
    },
    /// A failure inside a backend (driver, kernel compilation, launch).
    #[error("{backend} backend failed during {stage}")]
    Backend {
        /// The backend's name.
        backend: &'static str,
        /// What it was doing.
        stage: &'static str,
        /// The underlying error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}
