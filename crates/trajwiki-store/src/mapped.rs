//! Memory-mapped files that may shrink under their reader.
//!
//! trajwiki never cuts a vector file below its committed rows nor writes inside a named
//! segment, but a process outside it may (`truncate`, an editor, a full restore): reading a
//! mapped page that the file no longer has raises `SIGBUS`, which ends the whole process —
//! every namespace a server holds — unless it is handled. So every mapping the store makes is a
//! [`Mapped`]: its address range is registered with a `SIGBUS` handler (installed once, on the
//! first mapping), which, for a fault inside a registered range, maps zero pages over the rest
//! of the range and marks the mapping *faulted*, so the read goes on and sees zeros. A reader
//! asks [`Mapped::intact`] after using the bytes and throws away what it computed from a
//! faulted mapping (the engine loads the namespace again, and the load finds the file short and
//! leaves it aside). A fault outside every registered range is handed to the disposition that
//! was there before, as if this handler did not exist.
//!
//! The handler only reads atomics and calls `mmap`, a system call, so it is safe to run in a
//! signal handler. The registry is a fixed table; a mapping that finds it full is not mapped
//! at all but read into memory ([`Mapped::read`]), so no mapping is ever unguarded.

#![allow(unsafe_code)]

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use memmap2::Mmap;

/// The first `len` bytes of a file: mapped and guarded, or read into memory.
pub(crate) struct Mapped {
    // Declared first, so dropped first: the range is no longer claimed before it is unmapped.
    guard: Option<Guard>,
    bytes: Bytes,
}

enum Bytes {
    Map(Mmap),
    /// `u64` words, so that the bytes are aligned for f16 and f32 as a mapping's are.
    Read(Vec<u64>, usize),
}

impl std::ops::Deref for Mapped {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.bytes {
            Bytes::Map(m) => m,
            Bytes::Read(words, len) => &bytemuck::cast_slice(words)[..*len],
        }
    }
}

impl Mapped {
    /// Maps the first `len` bytes (more than 0) of `file`, read only, guarded; read into
    /// memory when the guard's table is full.
    pub(crate) fn map(file: &File, len: usize) -> std::io::Result<Mapped> {
        Mapped::map_with_room(file, len, 0)
    }

    /// [`Mapped::map`] of `len` bytes and `room` bytes past them, for a file that grows at its
    /// end (a vector file): once the file holds them, the bytes of the room read as the file's
    /// through this mapping, whose pages read so far stay mapped. A read of the room before the
    /// file holds it reads zeros, and the mapping is no longer intact. Read into memory (`len`
    /// bytes, no room) when the guard's table is full.
    pub(crate) fn map_with_room(file: &File, len: usize, room: usize) -> std::io::Result<Mapped> {
        // SAFETY: a read-only shared mapping. The bytes may change or vanish under it only by
        // another process's hand (trajwiki never writes inside what it maps, only past it); a
        // vanished page, or one of the room the file does not hold yet, reads as zeros through
        // the guard, and `intact` tells the reader.
        let map = unsafe { memmap2::MmapOptions::new().len(len + room).map(file) }?;
        match Guard::claim(map.as_ptr() as usize, map.len()) {
            Some(guard) => Ok(Mapped {
                guard: Some(guard),
                bytes: Bytes::Map(map),
            }),
            None => {
                drop(map);
                Mapped::read(file, len)
            }
        }
    }

    /// The first `len` bytes of `file`, read into memory.
    pub(crate) fn read(file: &File, len: usize) -> std::io::Result<Mapped> {
        let mut words = vec![0u64; len.div_ceil(8)];
        let mut reader = file;
        reader.seek(SeekFrom::Start(0))?;
        reader.read_exact(&mut bytemuck::cast_slice_mut(&mut words)[..len])?;
        Ok(Mapped {
            guard: None,
            bytes: Bytes::Read(words, len),
        })
    }

    /// Whether every byte read so far was the file's: false once a read touched a page the
    /// file no longer had (it read zeros). Ask it after using the bytes.
    pub(crate) fn intact(&self) -> bool {
        self.guard.as_ref().is_none_or(Guard::intact)
    }
}

/// The most mappings guarded at once (a namespace's vector file and, while it loads, its
/// segment: a server with thousands of loaded namespaces reads the rest into memory).
const SLOTS: usize = 4096;

/// A registered range: `[start, end)`, 0 when free; `faulted` once a read in it faulted.
struct Slot {
    start: AtomicUsize,
    end: AtomicUsize,
    faulted: AtomicBool,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE: Slot = Slot {
    start: AtomicUsize::new(0),
    end: AtomicUsize::new(0),
    faulted: AtomicBool::new(false),
};

static TABLE: [Slot; SLOTS] = [FREE; SLOTS];

/// A claimed slot of [`TABLE`], freed when dropped.
struct Guard(usize);

impl Guard {
    /// Claims a slot for `[start, start + len)`, installing the handler first; `None` when the
    /// table is full or the handler cannot be installed.
    fn claim(start: usize, len: usize) -> Option<Guard> {
        if !handler::installed() {
            return None;
        }
        for (i, slot) in TABLE.iter().enumerate() {
            if slot
                .start
                .compare_exchange(0, start, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                slot.faulted.store(false, Ordering::Release);
                slot.end.store(start + len, Ordering::Release);
                return Some(Guard(i));
            }
        }
        None
    }

    fn intact(&self) -> bool {
        !TABLE[self.0].faulted.load(Ordering::Acquire)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let slot = &TABLE[self.0];
        slot.end.store(0, Ordering::Release);
        slot.faulted.store(false, Ordering::Release);
        slot.start.store(0, Ordering::Release);
    }
}

#[cfg(unix)]
mod handler {
    use super::{Ordering, TABLE};
    use std::sync::OnceLock;

    /// The disposition of `SIGBUS` before ours, for faults that are not in a guarded range.
    static PREVIOUS: OnceLock<Option<libc::sigaction>> = OnceLock::new();

    /// Installs the handler once; whether it is installed.
    pub(super) fn installed() -> bool {
        PREVIOUS
            .get_or_init(|| {
                // SAFETY: a zeroed `sigaction` is a valid value to fill; the handler is an
                // `extern "C"` function of the signature SA_SIGINFO asks for.
                unsafe {
                    let mut ours: libc::sigaction = std::mem::zeroed();
                    ours.sa_sigaction = on_sigbus as *const () as usize;
                    ours.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                    libc::sigemptyset(&mut ours.sa_mask);
                    let mut before: libc::sigaction = std::mem::zeroed();
                    (libc::sigaction(libc::SIGBUS, &ours, &mut before) == 0).then_some(before)
                }
            })
            .is_some()
    }

    extern "C" fn on_sigbus(_: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
        // SAFETY: the kernel passes a valid siginfo for a SA_SIGINFO handler.
        let addr = unsafe { (*info).si_addr() } as usize;
        for slot in &TABLE {
            let start = slot.start.load(Ordering::Acquire);
            let end = slot.end.load(Ordering::Acquire);
            if start == 0 || !(start..end).contains(&addr) {
                continue;
            }
            // SAFETY: sysconf and mmap are system calls, safe in a signal handler; the new
            // mapping replaces pages of a read-only mapping this process made and still holds
            // (the slot is freed before it is unmapped).
            unsafe {
                let page = libc::sysconf(libc::_SC_PAGESIZE) as usize;
                let from = addr & !(page - 1);
                let to = end.div_ceil(page) * page;
                let zeros = libc::mmap(
                    from as *mut libc::c_void,
                    to - from,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                );
                if zeros != libc::MAP_FAILED {
                    slot.faulted.store(true, Ordering::Release);
                    return;
                }
            }
            break;
        }
        // Not a guarded range (or it could not be patched): the disposition before ours takes
        // it when the faulting read runs again.
        if let Some(Some(before)) = PREVIOUS.get() {
            // SAFETY: restoring a disposition the kernel gave us.
            unsafe {
                libc::sigaction(libc::SIGBUS, before, std::ptr::null_mut());
            }
        }
    }
}

#[cfg(not(unix))]
mod handler {
    /// No `SIGBUS` here: mappings are read into memory instead.
    pub(super) fn installed() -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::Mapped;
    use std::io::Write;

    /// A mapped file cut to a page under its reader: the pages past the cut read as zeros, the
    /// mapping says it is not intact, and the process goes on.
    #[test]
    fn a_file_cut_under_its_mapping_reads_zeros_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows");
        let page = 4096;
        std::fs::File::create(&path)
            .unwrap()
            .write_all(&vec![7u8; 4 * page])
            .unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let mapped = Mapped::map(&file, 4 * page).unwrap();
        assert_eq!(mapped[0], 7);
        assert!(mapped.intact());
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(page as u64)
            .unwrap();
        assert_eq!(mapped[page - 1], 7, "a page the file still has");
        assert_eq!(
            mapped[3 * page + 5],
            0,
            "a page the file lost reads as zeros"
        );
        assert!(!mapped.intact());
        assert_eq!(mapped[2 * page], 0);
        // A mapping made now of the short file is intact.
        let again = Mapped::map(&file, page).unwrap();
        assert_eq!(again[page - 1], 7);
        assert!(again.intact());
        drop(mapped);
        assert!(again.intact());
    }
}
