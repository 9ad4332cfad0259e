//! The index cache (`trajwiki_engine::cache::BoundedCache`: `quick_cache`'s S3-FIFO with a byte
//! weigher) side by side with the exact LRU by bytes it replaced (kept here as `ExactLru`), on
//! the work a server's cache does: a request for one namespace's index, a load and an insert on a miss. Namespaces
//! are asked for with Zipf-like skew (a few users much more often than most), the cache holds
//! about a tenth of them, every value weighs the same.
//!
//! Prints each cache's hit ratio, then criterion times one request (get, and on a miss insert
//! with evictions) at 1,000, 10,000 and 100,000 namespaces.
//!
//! `cargo bench -p trajwiki-engine --bench cache`

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use trajwiki_core::Namespace;
use trajwiki_engine::cache::BoundedCache;

/// Bytes of every value.
const BYTES: usize = 1 << 20;

/// The cache before `BoundedCache`: exact LRU, a use clock per entry, the oldest found by a
/// scan on each eviction.
struct ExactLru {
    capacity: usize,
    entries: std::collections::HashMap<Namespace, (Arc<u64>, usize, u64)>,
    bytes: usize,
    clock: u64,
}

impl ExactLru {
    fn new(capacity: usize) -> Self {
        ExactLru {
            capacity,
            entries: Default::default(),
            bytes: 0,
            clock: 0,
        }
    }

    fn get(&mut self, ns: &Namespace) -> Option<Arc<u64>> {
        self.clock += 1;
        let clock = self.clock;
        self.entries.get_mut(ns).map(|e| {
            e.2 = clock;
            Arc::clone(&e.0)
        })
    }

    fn insert(&mut self, ns: Namespace, value: Arc<u64>, bytes: usize) -> Vec<Arc<u64>> {
        let mut gone = Vec::new();
        if let Some((v, b, _)) = self.entries.remove(&ns) {
            self.bytes -= b;
            gone.push(v);
        }
        if bytes > self.capacity {
            return gone;
        }
        self.clock += 1;
        self.bytes += bytes;
        self.entries.insert(ns, (value, bytes, self.clock));
        while self.bytes > self.capacity {
            let oldest = self
                .entries
                .iter()
                .min_by_key(|(_, e)| e.2)
                .map(|(ns, _)| ns.clone());
            let Some(ns) = oldest else { break };
            if let Some((v, b, _)) = self.entries.remove(&ns) {
                self.bytes -= b;
                gone.push(v);
            }
        }
        gone
    }
}

/// A request stream over `n` namespaces: rank r asked with weight 1/r (Zipf, s = 1), drawn by
/// a fixed-seed xorshift over the cumulative weights.
fn requests(n: usize, count: usize) -> Vec<usize> {
    let mut cumulative = Vec::with_capacity(n);
    let mut total = 0.0f64;
    for r in 1..=n {
        total += 1.0 / r as f64;
        cumulative.push(total);
    }
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    (0..count)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let x = (state >> 11) as f64 / (1u64 << 53) as f64 * total;
            cumulative.partition_point(|&c| c < x).min(n - 1)
        })
        .collect()
}

fn names(n: usize) -> Vec<Namespace> {
    (0..n)
        .map(|i| Namespace::new(format!("user-{i:06}")).unwrap())
        .collect()
}

fn lru_request(cache: &mut ExactLru, ns: &Namespace, i: usize) -> bool {
    if cache.get(ns).is_some() {
        return true;
    }
    drop(cache.insert(ns.clone(), Arc::new(i as u64), BYTES));
    false
}

fn bounded_request(cache: &mut BoundedCache<u64>, ns: &Namespace, i: usize) -> bool {
    if cache.get(ns).is_some() {
        return true;
    }
    drop(cache.insert(ns.clone(), Arc::new(i as u64), BYTES));
    false
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("cache request");
    for n in [1_000usize, 10_000, 100_000] {
        let names = names(n);
        let stream = requests(n, 200_000);
        let capacity = n / 10 * BYTES;
        let mut lru = ExactLru::new(capacity);
        let mut bounded = BoundedCache::new(capacity);
        // Warmed by the whole stream once; the hit ratio of a second pass.
        for &i in &stream {
            lru_request(&mut lru, &names[i], i);
            bounded_request(&mut bounded, &names[i], i);
        }
        let hits = |f: &mut dyn FnMut(&Namespace, usize) -> bool| {
            stream.iter().filter(|&&i| f(&names[i], i)).count() as f64 / stream.len() as f64
        };
        let lru_hits = hits(&mut |ns, i| lru_request(&mut lru, ns, i));
        let bounded_hits = hits(&mut |ns, i| bounded_request(&mut bounded, ns, i));
        println!(
            "{n} namespaces, a tenth held: hit ratio exact LRU {lru_hits:.3}, BoundedCache (S3-FIFO) {bounded_hits:.3}"
        );
        let mut at = 0usize;
        group.bench_function(BenchmarkId::new("exact LRU", n), |b| {
            b.iter(|| {
                let i = stream[at % stream.len()];
                at += 1;
                lru_request(&mut lru, &names[i], i)
            })
        });
        let mut at = 0usize;
        group.bench_function(BenchmarkId::new("BoundedCache", n), |b| {
            b.iter(|| {
                let i = stream[at % stream.len()];
                at += 1;
                bounded_request(&mut bounded, &names[i], i)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
