//! A cache of loaded namespace indexes for long-lived callers (the Python `Memory`, a server),
//! bounded by bytes. Eviction is `quick_cache`'s S3-FIFO with a byte weigher: a value asked for
//! once waits in a small probationary queue, one asked for again is kept in the main one, so a
//! burst of one-off namespaces does not push out the ones in steady use (`benches/cache.rs`:
//! a higher hit ratio than exact LRU on skewed requests, and a constant cost per request where
//! LRU's scan for the oldest grew with the namespaces held). Each value is kept with the
//! [`IndexState`] of its namespace it was made at ([`AtState`]), and [`current_or_made`] makes
//! it again when that state moved, whoever wrote (this process, another one, another server over
//! the same PostgreSQL store): a write to one namespace leaves the others' values in place.
//!
//! ```
//! use std::sync::Arc;
//! use trajwiki_engine::cache::BoundedCache;
//! use trajwiki_core::Namespace;
//!
//! let mut cache: BoundedCache<&str> = BoundedCache::new(100);
//! let (a, b) = (Namespace::new("a").unwrap(), Namespace::new("b").unwrap());
//! cache.insert(a.clone(), Arc::new("index of a"), 60);
//! cache.insert(b.clone(), Arc::new("index of b"), 60); // over 100 bytes: `a` goes
//! assert!(cache.get(&a).is_none() && cache.get(&b).is_some());
//! ```

use std::sync::{mpsc, Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use quick_cache::unsync::Cache;
use quick_cache::{DefaultHashBuilder, Lifecycle, Weighter};
use trajwiki_core::Namespace;
use trajwiki_store::IndexState;

/// A value and its bytes, as its owner measured them.
type Held<T> = (Arc<T>, usize);

/// Weighs a held value by its bytes.
#[derive(Clone, Copy)]
struct ByBytes;

impl<T> Weighter<Namespace, Held<T>> for ByBytes {
    fn weight(&self, _: &Namespace, held: &Held<T>) -> u64 {
        held.1 as u64
    }
}

/// Hands the values an insert evicts back to its caller.
#[derive(Clone, Copy)]
struct HandBack;

impl<T> Lifecycle<Namespace, Held<T>> for HandBack {
    type RequestState = Vec<Arc<T>>;

    fn on_evict(&self, gone: &mut Vec<Arc<T>>, _: Namespace, held: Held<T>) {
        gone.push(held.0);
    }
}

/// Values by namespace, at most `capacity` bytes in all (as their owners measured them). A
/// value larger than the whole capacity is not kept.
pub struct BoundedCache<T> {
    capacity: usize,
    entries: Cache<Namespace, Held<T>, ByBytes, DefaultHashBuilder, HandBack>,
}

impl<T> BoundedCache<T> {
    /// An empty cache of `capacity` bytes.
    pub fn new(capacity: usize) -> Self {
        BoundedCache {
            capacity,
            // The bytes bound what is held; the number of values it may hold, estimated for
            // indexes of about a MiB (a few thousand messages), sizes its tables and the queue
            // that remembers values recently let go.
            entries: Cache::with(
                (capacity >> 20).clamp(64, 1 << 16),
                capacity as u64,
                ByBytes,
                DefaultHashBuilder::default(),
                HandBack,
            ),
        }
    }

    /// The value of `ns`, marked as used.
    pub fn get(&mut self, ns: &Namespace) -> Option<Arc<T>> {
        self.entries.get(ns).map(|held| Arc::clone(&held.0))
    }

    /// Keeps `value` for `ns` (replacing an older one), evicting until the cache fits its
    /// capacity. Returns the values it let go of, for the caller to drop where that costs no one
    /// a wait (see [`drop_later`]).
    pub fn insert(&mut self, ns: Namespace, value: Arc<T>, bytes: usize) -> Vec<Arc<T>> {
        let mut gone: Vec<Arc<T>> = self.take(&ns).map(|(v, _)| v).into_iter().collect();
        if bytes > self.capacity {
            return gone;
        }
        self.entries
            .insert_with_lifecycle(ns, (value, bytes), &mut gone);
        gone
    }

    /// Whether a value of `ns` is held (not marking it as used).
    pub fn holds(&self, ns: &Namespace) -> bool {
        self.entries.contains_key(ns)
    }

    /// Takes the value of `ns` out of the cache, with its bytes.
    pub fn take(&mut self, ns: &Namespace) -> Option<(Arc<T>, usize)> {
        self.entries.remove(ns).map(|(_, held)| held)
    }

    /// Forgets everything (after a write to the store).
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// The capacity in bytes.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.entries.weight() as usize
    }

    /// The namespaces held, sorted.
    pub fn namespaces(&self) -> Vec<Namespace> {
        let mut out: Vec<Namespace> = self.entries.iter().map(|(ns, _)| ns.clone()).collect();
        out.sort();
        out
    }

    /// Namespaces held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// A value made from a namespace at one of its index states.
pub struct AtState<T> {
    /// The namespace's state when the value was made.
    pub state: IndexState,
    /// The value.
    pub value: T,
}

/// The value `cache` holds for `ns` when it was made at state `current`; else the one `make`
/// makes now (with its size in bytes; given the value held for an older state, if any, to
/// reuse what it can of it), kept in its place. Says whether it was made now. The
/// cache is not held while `make` runs: other namespaces are served meanwhile. Read `current`
/// before the store is read for `make`: a commit in between makes the kept state older than the
/// value, which costs one remake, never a stale value.
pub fn current_or_made<T: Send + Sync + 'static, E>(
    cache: &Mutex<BoundedCache<AtState<T>>>,
    ns: &Namespace,
    current: IndexState,
    make: impl FnOnce(Option<&T>) -> Result<(T, usize), E>,
) -> Result<(Arc<AtState<T>>, bool), E> {
    let found = lock(cache).get(ns);
    if let Some(found) = &found {
        if found.state == current {
            return Ok((Arc::clone(found), false));
        }
    }
    let (value, bytes) = make(found.as_deref().map(|f| &f.value))?;
    let made = Arc::new(AtState {
        state: current,
        value,
    });
    let gone = lock(cache).insert(ns.clone(), Arc::clone(&made), bytes);
    drop_later((found, gone));
    Ok((made, true))
}

/// The value held for an older state of a namespace, as [`current_or_updated`] hands it over.
pub enum Stale<'a, T> {
    /// None is held.
    None,
    /// The held value, which no one else holds any longer: it may be changed into the new one.
    Owned(T),
    /// The held value while a caller still uses it (a search in flight): to be read, not changed.
    Shared(&'a T),
}

/// [`current_or_made`] for values that can be changed into the new one: when the value held for
/// `ns` was made at an older state, it is taken out of the cache and handed to `make` whole
/// ([`Stale::Owned`]) unless a caller still holds it ([`Stale::Shared`]). One caller at a time
/// makes the value of a namespace (`making` is the namespace's lock): the others wait for it,
/// then take what it made.
pub fn current_or_updated<T: Send + Sync + 'static, E>(
    cache: &Mutex<BoundedCache<AtState<T>>>,
    ns: &Namespace,
    current: IndexState,
    making: &Mutex<()>,
    make: impl FnOnce(Stale<'_, T>) -> Result<(T, usize), E>,
) -> Result<(Arc<AtState<T>>, bool), E> {
    if let Some(found) = lock(cache).get(ns) {
        if found.state == current {
            return Ok((found, false));
        }
    }
    let _one = lock(making);
    let found = lock(cache).take(ns);
    let (value, bytes) = match found {
        // Made by the caller this one waited for.
        Some((found, bytes)) if found.state == current => {
            let gone = lock(cache).insert(ns.clone(), Arc::clone(&found), bytes);
            drop_later(gone);
            return Ok((found, false));
        }
        None => make(Stale::None)?,
        Some((found, _)) => match owned_soon(found) {
            Ok(held) => make(Stale::Owned(held.value))?,
            Err(shared) => {
                let made = make(Stale::Shared(&shared.value));
                drop_later(shared);
                made?
            }
        },
    };
    let made = Arc::new(AtState {
        state: current,
        value,
    });
    let gone = lock(cache).insert(ns.clone(), Arc::clone(&made), bytes);
    drop_later(gone);
    Ok((made, true))
}

/// How long [`current_or_updated`] waits for the searches still holding a value to end before
/// it reads the value instead of changing it: a search takes milliseconds, a reload of a long
/// history hundreds.
const IN_FLIGHT_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

/// `value` itself once no one else holds it, waiting up to [`IN_FLIGHT_WAIT`] for the callers
/// that still do (no one takes a new hold: it is out of the cache, and the namespace's makers
/// wait on its lock); else the shared value back.
fn owned_soon<T>(mut value: Arc<T>) -> Result<T, Arc<T>> {
    let deadline = std::time::Instant::now() + IN_FLIGHT_WAIT;
    loop {
        match Arc::try_unwrap(value) {
            Ok(owned) => return Ok(owned),
            Err(shared) if std::time::Instant::now() < deadline => {
                value = shared;
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            Err(shared) => return Err(shared),
        }
    }
}

/// Drops `value` on a thread of its own: a namespace's index is a great many allocations, and
/// freeing the one an append made stale would otherwise hold up the search that replaced it.
pub fn drop_later<T: Send + 'static>(value: T) {
    static DROPPER: OnceLock<mpsc::Sender<Box<dyn Send>>> = OnceLock::new();
    let sender = DROPPER.get_or_init(|| {
        let (sender, receiver) = mpsc::channel::<Box<dyn Send>>();
        // Without the thread the receiver is gone, and a send hands the value back to drop here.
        let _ = std::thread::Builder::new()
            .name("trajwiki-drop".into())
            .spawn(move || receiver.into_iter().for_each(drop));
        sender
    });
    if let Err(mpsc::SendError(value)) = sender.send(Box::new(value)) {
        drop(value);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(s: &str) -> Namespace {
        Namespace::new(s).unwrap()
    }

    #[test]
    fn a_value_is_owned_once_the_searches_holding_it_end() {
        // Held by a search that ends soon: owned.
        let value = Arc::new(7u32);
        let search = Arc::clone(&value);
        let ends = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            drop(search);
        });
        assert_eq!(owned_soon(value).ok(), Some(7));
        ends.join().unwrap();
        // Held past the wait: shared back, still whole.
        let value = Arc::new(8u32);
        let _held = Arc::clone(&value);
        let shared = owned_soon(value).expect_err("still held");
        assert_eq!(*shared, 8);
    }

    #[test]
    fn evicts_until_it_fits_keeping_what_is_used_again() {
        let mut c: BoundedCache<u32> = BoundedCache::new(100);
        c.insert(ns("a"), Arc::new(1), 40);
        c.insert(ns("b"), Arc::new(2), 40);
        assert!(c.get(&ns("a")).is_some()); // `a` is used again, `b` was used once
        c.insert(ns("c"), Arc::new(3), 40);
        assert!(c.get(&ns("b")).is_none());
        assert_eq!(c.len(), 2);
        assert_eq!(c.bytes(), 80);
        // Replacing a value counts its new size once.
        c.insert(ns("a"), Arc::new(4), 50);
        assert_eq!((c.len(), c.bytes()), (2, 90));
        assert_eq!(*c.get(&ns("a")).unwrap(), 4);
        // Too large for the whole cache: not kept, and nothing else is evicted for it.
        c.insert(ns("d"), Arc::new(5), 101);
        assert!(c.get(&ns("d")).is_none());
        assert_eq!(c.len(), 2);
    }
}
