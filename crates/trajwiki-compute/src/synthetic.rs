//! Deterministic synthetic data for tests and benchmarks: a seeded generator and random unit
//! rows, so that the CPU and device runs of a twin test, or two benchmark runs, see the same
//! inputs on every machine.

/// A fixed-seed xorshift64* generator (Vigna, 2016): fast, and good enough for test data.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (0 is taken as 1: xorshift never leaves the zero state).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `[-1, 1)`, on a grid of 2⁻²³.
    pub fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }

    /// Uniform in `0..n` (`n > 0`; modulo bias is negligible for test sizes).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// `n` random L2-normalised rows of dimension `d`, row-major.
pub fn unit_rows(rng: &mut Rng, n: usize, d: usize) -> Vec<f32> {
    let mut v: Vec<f32> = (0..n * d).map(|_| rng.unit()).collect();
    for row in v.chunks_exact_mut(d.max(1)) {
        let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
        row.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_data_and_rows_are_unit() {
        let a = unit_rows(&mut Rng::new(3), 5, 7);
        assert_eq!(a, unit_rows(&mut Rng::new(3), 5, 7));
        assert_ne!(a, unit_rows(&mut Rng::new(4), 5, 7));
        for row in a.chunks_exact(7) {
            let norm: f32 = row.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-6);
        }
        let mut r = Rng::new(0);
        assert!((0..1000).all(|_| (-1.0..1.0).contains(&r.unit()) && r.below(10) < 10));
    }
}
