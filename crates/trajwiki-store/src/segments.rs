//! Index segments: a namespace's retrieval index as a load builds it, stored beside its vector
//! file so that a cold load reads it instead of recomputing it from the records.
//!
//! A segment is one file per (namespace, model) under `vectors/`, named as the vector file is
//! (a hash of the two) with the extension `seg`. It holds a header (the namespace, the model,
//! its dimension, the [`Cursor`] of the namespace state it reflects, its message count) and an
//! opaque payload (the engine's encoding of the index), with a CRC-32 over both:
//!
//! ```text
//! magic "TWSEGMT\n" | version u32 | header length u32 | header | payload length u64 | crc32 u32 | payload
//! ```
//!
//! Integers are little-endian; the header's strings are a u32 length then UTF-8 bytes.
//!
//! A segment is written whole to a temporary file beside it, synced, then renamed over the
//! previous one (and the folder synced): a reader sees the old segment or the new one, never a
//! part. A crash leaves at most a temporary file, which no reader opens and the next write of
//! the same segment removes. Segments are derived state, as vector files are: deleting one
//! loses nothing (the next load reads the records, the next build writes it again). `delete`
//! removes a namespace's segments with its vector files; `check` reports a segment it cannot
//! read, whose checksum fails, or whose header names another namespace or model than its file
//! name is for (a missing segment is no problem).
//!
//! A PostgreSQL store has no folder of its own (its vectors are rows): it keeps no segments,
//! and its loads read the records.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};

use std::path::{Path, PathBuf};

use trajwiki_core::Namespace;

use crate::changes::Cursor;
use crate::check::{CheckReport, Problem};
use crate::error::{Result, StoreError};
use crate::mapped::Mapped;
use crate::vectors::{file_stem, remove_files};
use crate::Store;

/// The first bytes of every segment file.
const MAGIC: &[u8; 8] = b"TWSEGMT\n";

/// The segment format this build writes and reads; a segment of another version is left aside
/// (the load reads the records) and replaced by the next build. Version 2: a page's row is
/// derived from its trajectories' rows, no longer its routing text's embedding. Version 3: a
/// message's context line names a photo's content without "a photo of". Version 4: the
/// restatements of deprecated claims, whose messages are marked as the claims' sources are.
pub const SEGMENT_VERSION: u32 = 4;

/// A segment file's extension.
const EXTENSION: &str = "seg";

/// The most bytes a header may claim (a namespace, a model id and a few numbers).
const MAX_HEADER: usize = 64 * 1024;

/// How long a segment's temporary file goes unwritten before a later write takes it for one a
/// crash left, and removes it (a write takes milliseconds to seconds).
const ABANDONED_AFTER: std::time::Duration = std::time::Duration::from_secs(600);

/// Whether the temporary segment file `path` (`<segment>.tmp<pid>-<n>`) is one a crash left:
/// the process that wrote it is gone (where `/proc` tells), or it has not been written for
/// [`ABANDONED_AFTER`].
fn abandoned(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let pid = name
        .rsplit_once(".tmp")
        .and_then(|(_, rest)| rest.split('-').next())
        .and_then(|pid| pid.parse::<u32>().ok());
    let proc = Path::new("/proc");
    if let (Some(pid), true) = (pid, proc.join("self").exists()) {
        if !proc.join(pid.to_string()).exists() {
            return true;
        }
    }
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|at| at.elapsed().ok())
        .is_some_and(|age| age > ABANDONED_AFTER)
}

/// Test hook: milliseconds a segment write sleeps between writing its temporary file and
/// renaming it, so that a test can kill the writer there.
pub const PAUSE_ENV: &str = "TRAJWIKI_SEGMENT_PAUSE_MS";

/// What a segment says of itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentHeader {
    /// The namespace.
    pub namespace: String,
    /// The embedding model.
    pub model: String,
    /// The model's dimension.
    pub dim: usize,
    /// The state of the namespace the segment reflects.
    pub cursor: Cursor,
    /// The namespace's messages at that state.
    pub messages: usize,
}

/// A segment read back whole and checked.
#[derive(Debug)]
pub struct Segment {
    /// The file.
    pub path: PathBuf,
    /// Its header.
    pub header: SegmentHeader,
    /// The payload (the engine's encoding of the index).
    pub payload: Payload,
}

/// A segment's payload, memory-mapped.
pub struct Payload {
    map: Option<Mapped>,
    at: usize,
}

impl Payload {
    /// Whether every byte read so far was the file's (see [`crate::mapped`]): false when
    /// another process cut the file while it was read, and what was decoded is to be thrown
    /// away.
    pub fn intact(&self) -> bool {
        self.map.as_ref().is_none_or(Mapped::intact)
    }
}

impl std::ops::Deref for Payload {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.map.as_ref().map_or(&[], |m| &m[self.at..])
    }
}

impl std::fmt::Debug for Payload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Payload({} bytes)", self.len())
    }
}

/// Maps `file` (of `len` bytes), read only: trajwiki never writes inside a segment file once
/// it is named (a segment is written whole under a temporary name and renamed over the old one,
/// which leaves the old file's pages alive for a mapping of it); a process outside trajwiki that
/// cuts the file is caught by the guard ([`Payload::intact`]), one that writes into it by the
/// checksum, verified over the mapped bytes before they are decoded.
fn map(file: &File, len: u64) -> std::io::Result<Option<Mapped>> {
    if len == 0 {
        return Ok(None);
    }
    Mapped::map(file, len as usize).map(Some)
}

fn damaged(path: &Path, reason: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        table: "index segment",
        column: "file",
        id: path.display().to_string(),
        reason: reason.into(),
    }
}

/// A read that ended early is a damaged file (`reason`); any other failure is the operating
/// system's (a directory in the file's place, a disk error), told with its reason.
fn short_or_io<'a>(
    path: &'a Path,
    reason: &'a str,
) -> impl FnOnce(std::io::Error) -> StoreError + 'a {
    move |e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            damaged(path, reason)
        } else {
            io_error(path)(e)
        }
    }
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::VectorFile {
        path: path.to_path_buf(),
        source,
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn encode_header(h: &SegmentHeader) -> Vec<u8> {
    let mut out = Vec::new();
    put_str(&mut out, &h.namespace);
    put_str(&mut out, &h.model);
    out.extend_from_slice(&(h.dim as u64).to_le_bytes());
    out.extend_from_slice(&h.cursor.generation().to_le_bytes());
    out.extend_from_slice(&h.cursor.last_message().to_le_bytes());
    out.extend_from_slice(&(h.messages as u64).to_le_bytes());
    out
}

/// Reads the fields of an encoded header, in order.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn string(&mut self) -> Option<String> {
        let n = self.u32()? as usize;
        String::from_utf8(self.take(n)?.to_vec()).ok()
    }
}

fn decode_header(bytes: &[u8]) -> Option<SegmentHeader> {
    let mut f = Fields(bytes);
    let namespace = f.string()?;
    let model = f.string()?;
    let dim = usize::try_from(f.u64()?).ok()?;
    let generation = f.u64()? as i64;
    let last_message = f.u64()? as i64;
    let messages = usize::try_from(f.u64()?).ok()?;
    f.0.is_empty().then(|| SegmentHeader {
        namespace,
        model,
        dim,
        cursor: Cursor::from_parts(generation, last_message),
        messages,
    })
}

/// Reads a segment file's header (and checks magic and version); with `whole`, its payload
/// too, checked against the checksum. `Ok(None)` when the file does not exist.
fn read_file(path: &Path, whole: bool) -> Result<Option<(SegmentHeader, Payload)>> {
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error(path)(e)),
    };
    let mut fixed = [0u8; 16];
    file.read_exact(&mut fixed)
        .map_err(short_or_io(path, "shorter than a segment's header"))?;
    if &fixed[..8] != MAGIC {
        return Err(damaged(path, "not an index segment (wrong magic bytes)"));
    }
    let version = u32::from_le_bytes(fixed[8..12].try_into().expect("4 bytes"));
    if version != SEGMENT_VERSION {
        return Err(damaged(
            path,
            format!("segment version {version}, this build reads version {SEGMENT_VERSION}"),
        ));
    }
    let header_len = u32::from_le_bytes(fixed[12..16].try_into().expect("4 bytes")) as usize;
    if header_len > MAX_HEADER {
        return Err(damaged(
            path,
            format!("a header of {header_len} bytes claimed"),
        ));
    }
    let mut header = vec![0u8; header_len + 12];
    file.read_exact(&mut header)
        .map_err(short_or_io(path, "the header is cut short"))?;
    let payload_len = u64::from_le_bytes(header[header_len..header_len + 8].try_into().expect("8"));
    let crc = u32::from_le_bytes(header[header_len + 8..].try_into().expect("4 bytes"));
    header.truncate(header_len);
    let decoded = decode_header(&header).ok_or_else(|| damaged(path, "the header is malformed"))?;
    if !whole {
        return Ok(Some((decoded, Payload { map: None, at: 0 })));
    }
    let on_disk = file.metadata().map_err(io_error(path))?.len();
    let expected = 16 + header_len as u64 + 12 + payload_len;
    if on_disk != expected {
        return Err(damaged(
            path,
            format!("{on_disk} bytes on disk, the header says {expected}"),
        ));
    }
    let payload = Payload {
        map: map(&file, on_disk).map_err(io_error(path))?,
        at: (expected - payload_len) as usize,
    };
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&header);
    hasher.update(&payload);
    let found = hasher.finalize();
    if found != crc {
        return Err(damaged(
            path,
            format!("checksum {found:08x}, the header says {crc:08x}"),
        ));
    }
    Ok(Some((decoded, payload)))
}

/// Whether `name` is a segment file's (`*.seg`) or a segment's temporary file's: one being
/// written (`*.seg.tmp*`) or one a delete set aside (`*.seg.aside*`, see
/// [`Store::set_segments_aside`]); the second is `true` for a temporary file, which no load
/// opens and `check` does not examine.
fn segment_name(name: &str) -> Option<bool> {
    if name.ends_with(".seg") {
        Some(false)
    } else {
        (name.contains(".seg.tmp") || name.contains(".seg.aside")).then_some(true)
    }
}

/// The segments a delete set aside (see [`Store::set_segments_aside`]).
#[derive(Debug, Default)]
pub(crate) struct SetAside {
    /// Each segment's path and the name it was renamed to.
    moved: Vec<(PathBuf, PathBuf)>,
    /// Temporary files removed.
    removed: usize,
}

impl SetAside {
    /// Removes the segments set aside: the delete was committed. Returns the files the delete
    /// took (temporary ones included).
    pub(crate) fn remove(self) -> Result<usize> {
        let aside: Vec<PathBuf> = self.moved.iter().map(|(_, a)| a.clone()).collect();
        remove_files(&aside)?;
        Ok(self.removed + aside.len())
    }

    /// Puts the segments set aside back in their places: the delete failed, and the namespace
    /// stays as it was. A segment a build wrote in a place meanwhile is newer and stays (the
    /// one set aside is removed). A segment that cannot be put back stays aside, a temporary
    /// file that nothing reads; it is derived state, and the next build writes it again.
    pub(crate) fn restore(self) {
        for (path, aside) in self.moved {
            let _ = if path.exists() {
                std::fs::remove_file(&aside)
            } else {
                std::fs::rename(&aside, &path)
            };
        }
    }
}

impl Store {
    /// Where the segment of `ns` for `model` lives; `None` on PostgreSQL (no segments).
    pub fn segment_path(&self, ns: &Namespace, model: &str) -> Option<PathBuf> {
        (!self.conn.is_postgres()).then(|| {
            self.files
                .join(format!("{}.{EXTENSION}", file_stem(ns.as_str(), model)))
        })
    }

    /// The header of the segment of `ns` for `model`, without reading its payload: `None`
    /// when there is none; [`StoreError::Corrupt`] when it is not a segment of this version.
    pub fn segment_header(&self, ns: &Namespace, model: &str) -> Result<Option<SegmentHeader>> {
        let Some(path) = self.segment_path(ns, model) else {
            return Ok(None);
        };
        Ok(read_file(&path, false)?.map(|(h, _)| h))
    }

    /// The segment of `ns` for `model`, read whole and checked (magic, version, checksum, the
    /// namespace and model it names): `None` when there is none; [`StoreError::Corrupt`]
    /// naming the file when it is damaged.
    pub fn read_segment(&self, ns: &Namespace, model: &str) -> Result<Option<Segment>> {
        let Some(path) = self.segment_path(ns, model) else {
            return Ok(None);
        };
        let Some((header, payload)) = read_file(&path, true)? else {
            return Ok(None);
        };
        if header.namespace != ns.as_str() || header.model != model {
            return Err(damaged(
                &path,
                format!(
                    "it is the segment of {:?} for {:?}",
                    header.namespace, header.model
                ),
            ));
        }
        Ok(Some(Segment {
            path,
            header,
            payload,
        }))
    }

    /// Writes the segment of `header.namespace` for `header.model` (replacing the one there):
    /// to a temporary file, synced, renamed over the old one, the folder synced. Nothing on
    /// PostgreSQL (`None`); else the file written.
    pub fn write_segment(
        &self,
        ns: &Namespace,
        header: &SegmentHeader,
        payload: &[u8],
    ) -> Result<Option<PathBuf>> {
        self.writable("writing an index segment")?;
        let Some(path) = self.segment_path(ns, &header.model) else {
            return Ok(None);
        };
        if header.namespace != ns.as_str() {
            return Err(StoreError::Conflict {
                kind: "index segment",
                id: path.display().to_string(),
                fields: vec!["namespace".into()],
                existing: ns.to_string(),
                incoming: header.namespace.clone(),
            });
        }
        let dir = self.vector_dir()?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // Temporary files a crash left of this segment: never read, removed now — not those
        // another writer (a process, or an engine of this one) is writing now.
        let stale = self.segment_files(|file| file.starts_with(&format!("{name}.tmp")))?;
        let abandoned: Vec<PathBuf> = stale.into_iter().filter(|f| abandoned(f)).collect();
        remove_files(&abandoned)?;
        // A name of this write's own: two writers of one segment never write into one file.
        static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let write = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = dir.join(format!("{name}.tmp{}-{write}", std::process::id()));
        let head = encode_header(header);
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(&head);
        hasher.update(payload);
        let mut bytes = Vec::with_capacity(28 + head.len());
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&SEGMENT_VERSION.to_le_bytes());
        bytes.extend_from_slice(&(head.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&head);
        bytes.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&hasher.finalize().to_le_bytes());
        let written = (|| {
            let mut file = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&tmp)?;
            file.write_all(&bytes)?;
            file.write_all(payload)?;
            file.sync_all()
        })();
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(self.relocated_or(io_error(&tmp)(e)));
        }
        if let Some(ms) = std::env::var(PAUSE_ENV)
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
        {
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
        if let Err(e) = std::fs::rename(&tmp, &path) {
            let _ = std::fs::remove_file(&tmp);
            return Err(self.relocated_or(io_error(&path)(e)));
        }
        // The rename is durable once the folder is.
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io_error(dir))?;
        Ok(Some(path))
    }

    /// The files in the segment folder whose names `keep` accepts.
    fn segment_files(&self, keep: impl Fn(&str) -> bool) -> Result<Vec<PathBuf>> {
        let entries = match std::fs::read_dir(&self.files) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_error(&self.files)(e)),
        };
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry.map_err(io_error(&self.files))?;
            let name = entry.file_name();
            if keep(&name.to_string_lossy()) {
                out.push(entry.path());
            }
        }
        out.sort();
        Ok(out)
    }

    /// The segments of `ns` (any model) and their temporary files: those named for one of its
    /// vector files, and any other whose header names it.
    pub(crate) fn segment_paths(&self, ns: &Namespace) -> Result<Vec<PathBuf>> {
        if self.conn.is_postgres() {
            return Ok(Vec::new());
        }
        let stems: Vec<String> = self
            .vector_paths(ns)?
            .iter()
            .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
            .collect();
        self.segment_files(|name| {
            segment_name(name).is_some() && stems.iter().any(|s| name.starts_with(s.as_str()))
        })
        .and_then(|mut named| {
            for path in self.segment_files(|name| segment_name(name).is_some())? {
                let ours = matches!(read_file(&path, false), Ok(Some((h, _))) if h.namespace == ns.as_str());
                if ours && !named.contains(&path) {
                    named.push(path);
                }
            }
            Ok(named)
        })
    }

    /// Sets the segments of `ns` aside before its delete's transaction: each renamed to a name
    /// no load opens (`<name>.aside<pid>`), so that no reader takes up the index of a namespace
    /// being deleted, while its bytes stay for [`SetAside::restore`] should the transaction
    /// fail. Temporary files (a write a crash cut short, an earlier delete's leftovers) are
    /// removed now: nothing reads them.
    pub(crate) fn set_segments_aside(&self, ns: &Namespace) -> Result<SetAside> {
        let mut set = SetAside::default();
        for path in self.segment_paths(ns)? {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            if name.as_deref().and_then(segment_name) != Some(false) {
                remove_files(std::slice::from_ref(&path))?;
                set.removed += 1;
                continue;
            }
            let mut aside = path.clone().into_os_string();
            aside.push(format!(".aside{}", std::process::id()));
            let aside = PathBuf::from(aside);
            match std::fs::rename(&path, &aside) {
                Ok(()) => set.moved.push((path, aside)),
                // Removed meanwhile (another delete, a reset): nothing to set aside.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    set.restore();
                    return Err(self.relocated_or(io_error(&path)(e)));
                }
            }
        }
        Ok(set)
    }

    /// Removes the segments of `ns` (any model) and their temporary files; returns how many.
    pub fn remove_segments(&self, ns: &Namespace) -> Result<usize> {
        let paths = self.segment_paths(ns)?;
        remove_files(&paths)?;
        Ok(paths.len())
    }

    /// Each segment file reads back whole with its checksum, and is the segment its name is
    /// for: the file name is the hash of a namespace and a model, and a load of that namespace
    /// leaves aside a file whose header names others (one namespace's segment copied over
    /// another's). A temporary file a crash left is no problem: nothing reads it.
    pub(crate) fn check_segments(&self, report: &mut CheckReport) -> Result<()> {
        if self.conn.is_postgres() {
            return Ok(());
        }
        let files = self.segment_files(|name| segment_name(name) == Some(false))?;
        report
            .examined
            .push(("index_segments".to_string(), files.len() as u64));
        let consequence = "the next load reads the records, the next build writes it again";
        for path in files {
            let header = match read_file(&path, true) {
                Ok(Some((header, _))) => header,
                // Removed since it was listed (a delete, a reset): nothing to check.
                Ok(None) => continue,
                Err(e) => {
                    report.problems.push(Problem {
                        invariant: "index segment reads back whole (magic, version, checksum)",
                        id: path.display().to_string(),
                        detail: format!("{e}; {consequence}"),
                    });
                    continue;
                }
            };
            let stem = file_stem(&header.namespace, &header.model);
            let named = path
                .file_stem()
                .is_some_and(|s| s.to_string_lossy() == stem);
            if !named {
                report.problems.push(Problem {
                    invariant: "index segment is the one its file name is for (namespace and model)",
                    id: path.display().to_string(),
                    detail: format!(
                        "it holds the segment of namespace {:?} for model {:?}, whose file is {stem}.{EXTENSION}; {consequence}",
                        header.namespace, header.model
                    ),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(ns: &str) -> SegmentHeader {
        SegmentHeader {
            namespace: ns.into(),
            model: "hashing-64".into(),
            dim: 64,
            cursor: Cursor::from_parts(7, 42),
            messages: 3,
        }
    }

    #[test]
    fn a_segment_reads_back_and_a_flipped_byte_is_caught() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let ns = Namespace::new("alice").unwrap();
        assert!(store.read_segment(&ns, "hashing-64").unwrap().is_none());
        let path = store
            .write_segment(&ns, &header("alice"), b"the payload")
            .unwrap()
            .unwrap();
        let read = store.read_segment(&ns, "hashing-64").unwrap().unwrap();
        assert_eq!(read.header, header("alice"));
        assert_eq!(&*read.payload, b"the payload");
        let mut report = CheckReport::default();
        store.check_segments(&mut report).unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);

        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 2;
        bytes[last] ^= 0x20;
        std::fs::write(&path, &bytes).unwrap();
        let err = store.read_segment(&ns, "hashing-64").unwrap_err();
        assert!(err.to_string().contains("checksum"), "{err}");
        store.check_segments(&mut report).unwrap();
        assert_eq!(report.problems.len(), 1);
        assert!(report.problems[0].id.ends_with(".seg"));

        // A temporary file (a crash between write and rename) is no problem, and goes with the
        // namespace.
        std::fs::write(path.with_extension("seg.tmp99"), b"TWSEG").unwrap();
        let mut report = CheckReport::default();
        std::fs::remove_file(&path).unwrap();
        store.check_segments(&mut report).unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        // A write removes temporary files left long ago, not one another writer is writing.
        std::fs::File::options()
            .write(true)
            .open(path.with_extension("seg.tmp99"))
            .unwrap()
            .set_modified(std::time::SystemTime::now() - 2 * super::ABANDONED_AFTER)
            .unwrap();
        let live = path.with_extension(format!("seg.tmp{}-99", std::process::id()));
        std::fs::write(&live, b"TWSEG").unwrap();
        store
            .write_segment(&ns, &header("alice"), b"again")
            .unwrap();
        assert!(!path.with_extension("seg.tmp99").exists());
        assert!(live.exists());
        assert_eq!(store.remove_segments(&ns).unwrap(), 1);
        assert!(store.read_segment(&ns, "hashing-64").unwrap().is_none());
    }

    #[test]
    fn a_segment_under_another_namespaces_name_is_a_problem() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let (alice, bob) = (
            Namespace::new("alice").unwrap(),
            Namespace::new("bob").unwrap(),
        );
        let ours = store
            .write_segment(&alice, &header("alice"), b"alice's")
            .unwrap()
            .unwrap();
        let theirs = store
            .write_segment(&bob, &header("bob"), b"bob's")
            .unwrap()
            .unwrap();
        let mut report = CheckReport::default();
        store.check_segments(&mut report).unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);

        std::fs::copy(&theirs, &ours).unwrap();
        assert!(store.read_segment(&alice, "hashing-64").is_err());
        store.check_segments(&mut report).unwrap();
        assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
        let problem = &report.problems[0];
        assert_eq!(problem.id, ours.display().to_string());
        assert!(problem.detail.contains("namespace \"bob\""), "{problem:?}");
    }

    #[test]
    fn a_segment_set_aside_is_put_back_whole_or_removed() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let ns = Namespace::new("alice").unwrap();
        let path = store
            .write_segment(&ns, &header("alice"), b"the payload")
            .unwrap()
            .unwrap();
        let bytes = std::fs::read(&path).unwrap();

        // Aside, no load finds it and `check` does not count it; a failed delete puts it back.
        let aside = store.set_segments_aside(&ns).unwrap();
        assert!(store.read_segment(&ns, "hashing-64").unwrap().is_none());
        let mut report = CheckReport::default();
        store.check_segments(&mut report).unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        assert!(report.examined.contains(&("index_segments".into(), 0)));
        aside.restore();
        assert_eq!(std::fs::read(&path).unwrap(), bytes);

        // A segment a build wrote meanwhile is newer: it stays.
        let aside = store.set_segments_aside(&ns).unwrap();
        store
            .write_segment(&ns, &header("alice"), b"newer")
            .unwrap();
        aside.restore();
        let read = store.read_segment(&ns, "hashing-64").unwrap().unwrap();
        assert_eq!(&*read.payload, b"newer");
        assert_eq!(store.segment_paths(&ns).unwrap(), vec![path.clone()]);

        // A committed delete removes it.
        let aside = store.set_segments_aside(&ns).unwrap();
        assert_eq!(aside.remove().unwrap(), 1);
        assert!(store.segment_paths(&ns).unwrap().is_empty());
    }

    #[test]
    fn a_segment_the_system_refuses_is_told_with_its_reason() {
        let refused = StoreError::VectorFile {
            path: "st/vectors/a.seg".into(),
            source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        };
        assert_eq!(
            refused.to_string(),
            "cannot use vector file st/vectors/a.seg: permission denied"
        );

        // A directory in the segment's place, and a link that leads to itself: each problem
        // `check` reports, and each load's error, says what the system answered.
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let ns = Namespace::new("alice").unwrap();
        let path = store.segment_path(&ns, "hashing-64").unwrap();
        std::fs::create_dir_all(&path).unwrap();
        let err = store.read_segment(&ns, "hashing-64").unwrap_err();
        assert!(matches!(err, StoreError::VectorFile { .. }), "{err:?}");
        assert!(err.to_string().ends_with("(os error 21)"), "{err}");
        std::fs::remove_dir(&path).unwrap();
        std::os::unix::fs::symlink(&path, &path).unwrap();
        let mut report = CheckReport::default();
        store.check_segments(&mut report).unwrap();
        assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
        let detail = &report.problems[0].detail;
        assert!(detail.contains("(os error 40)"), "{detail}");
    }
}
