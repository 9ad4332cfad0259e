//! Vector files (schema version 3): each namespace's message vectors for a model, as one
//! append-only file of f16 or f32 rows under `vectors/` in the store directory, memory-mapped
//! when the namespace is loaded instead of decoded row by row from SQLite.
//!
//! Row `i` of a file is the vector of the namespace's `i`-th message in ingest order. SQLite
//! records how many rows are committed and the rowid of the message of the last one; an append
//! takes SQLite's write lock, cuts the file back to its committed length (dropping a tail that a
//! crash left between the file write and the commit), writes and syncs the new rows, and only
//! then commits their count. A reader maps the committed rows and never looks past them, and a
//! file is never cut below what was committed, so a mapping stays valid while others append.
//! A file cut by another process reads as zeros past the cut, which the mapping says
//! ([`MappedVectors::intact`], see [`crate::mapped`]) instead of ending the process.
//!
//! On PostgreSQL the rows of a "file" are rows of `vector_chunks`, one per append, written in
//! the transaction that commits their count, and read into memory when the namespace is loaded.
//!
//! Architecture invariant: vector files are derived state. Deleting one loses nothing that the
//! messages and the model cannot give back.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use half::f16;
use half::slice::HalfFloatSliceExt;
use rusqlite::{params, OptionalExtension};

use crate::db::{Begin, Db};
use crate::mapped::Mapped;
use trajwiki_core::Namespace;

use crate::error::{Result, SqlContext, StoreError};
use crate::Store;

/// The folder of a store that holds its vector files.
pub const VECTOR_DIR: &str = "vectors";

/// The element type of a vector file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum VectorDtype {
    /// Half precision: half the size; cosine rankings as with f32 to within f16 rounding.
    #[default]
    F16,
    /// Single precision: the vectors exactly as the model gave them.
    F32,
}

impl VectorDtype {
    /// The name stored and accepted on the command line: `f16` or `f32`.
    pub fn as_str(self) -> &'static str {
        match self {
            VectorDtype::F16 => "f16",
            VectorDtype::F32 => "f32",
        }
    }

    /// Parses [`as_str`](Self::as_str)'s names.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "f16" => Some(VectorDtype::F16),
            "f32" => Some(VectorDtype::F32),
            _ => None,
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            VectorDtype::F16 => 2,
            VectorDtype::F32 => 4,
        }
    }
}

/// What SQLite records of a vector file: its committed extent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VectorFileInfo {
    /// Element type.
    pub dtype: VectorDtype,
    /// Dimension.
    pub dim: usize,
    /// Committed rows.
    pub rows: usize,
    /// Rowid of the message of the last committed row (0 when there is none).
    pub last_rowid: i64,
    /// Rows covered by the approximate index built last (0: none).
    pub ann_rows: usize,
    /// The file.
    pub path: PathBuf,
}

impl VectorFileInfo {
    /// Bytes of one row.
    pub fn row_bytes(&self) -> usize {
        self.dim * self.dtype.size()
    }

    /// Where the approximate index over the file's first rows lives (the file's name with the
    /// extension `hnsw`).
    pub fn ann_path(&self) -> PathBuf {
        self.path.with_extension("hnsw")
    }
}

/// The committed rows of a vector file, memory-mapped (read-only), or read from PostgreSQL.
pub struct MappedVectors {
    info: VectorFileInfo,
    rows: Rows,
}

/// Where the bytes of [`MappedVectors`] are.
enum Rows {
    Empty,
    /// Mapped, guarded against the file shrinking (see [`crate::mapped`]); the mapping may be
    /// shared with other reads of the file and longer than these rows ([`shared_mapping`]).
    Mapped(Arc<Mapped>),
    /// Read into memory; `u32` words, so that the bytes are aligned for f16 and f32.
    Read(Vec<u32>),
}

impl std::fmt::Debug for MappedVectors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedVectors")
            .field("info", &self.info)
            .finish()
    }
}

impl MappedVectors {
    /// What the rows are.
    pub fn info(&self) -> &VectorFileInfo {
        &self.info
    }

    /// The committed rows as bytes (`rows * dim * size`).
    fn bytes(&self) -> &[u8] {
        let n = self.info.rows * self.info.row_bytes();
        match &self.rows {
            Rows::Empty => &[],
            Rows::Mapped(m) => &m[..n],
            Rows::Read(words) => &bytemuck::cast_slice(words)[..n],
        }
    }

    /// Whether every row read so far was the file's: false once a read found the file cut
    /// below its committed rows by another process (the rows read as zeros; see
    /// [`crate::mapped`]). What was computed from the rows is then to be thrown away and the
    /// file mapped again, which finds it short.
    pub fn intact(&self) -> bool {
        match &self.rows {
            Rows::Mapped(m) => m.intact(),
            Rows::Empty | Rows::Read(_) => true,
        }
    }

    /// The rows when the file holds f16.
    pub fn f16(&self) -> Option<&[f16]> {
        (self.info.dtype == VectorDtype::F16).then(|| bytemuck::cast_slice(self.bytes()))
    }

    /// Row `i` as f32, into `out` (`dim` long).
    pub fn row_f32(&self, i: usize, out: &mut [f32]) {
        let r = i * self.info.dim..(i + 1) * self.info.dim;
        match self.info.dtype {
            VectorDtype::F16 => {
                bytemuck::cast_slice::<u8, f16>(self.bytes())[r].convert_to_f32_slice(out)
            }
            VectorDtype::F32 => {
                out.copy_from_slice(&bytemuck::cast_slice::<u8, f32>(self.bytes())[r])
            }
        }
    }

    /// The rows when the file holds f32.
    pub fn f32(&self) -> Option<&[f32]> {
        (self.info.dtype == VectorDtype::F32).then(|| bytemuck::cast_slice(self.bytes()))
    }
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::VectorFile {
        path: path.to_path_buf(),
        source,
    }
}

/// The mappings of vector files this process holds, by path, with their file's identity
/// (device, inode): see [`shared_mapping`].
type Mappings = HashMap<PathBuf, ((u64, u64), Weak<Mapped>)>;

fn mappings() -> &'static Mutex<Mappings> {
    static MAPPINGS: OnceLock<Mutex<Mappings>> = OnceLock::new();
    MAPPINGS.get_or_init(Default::default)
}

/// A mapping of the first `len` bytes of the vector file `file` at `path`: one this process
/// holds already when it is of the same file, intact and long enough, else a new one with room
/// for an eighth more rows (at least 1 MiB). A vector file grows at its end with every build,
/// and a kept index maps it again after each: a new mapping reads every page again through a
/// page fault (~200 in the first search after an append at 23,528 messages, ~550 at 247,044),
/// where a shared one has them mapped already. Both read the same bytes, the file's.
fn shared_mapping(
    path: &Path,
    file: &File,
    metadata: &std::fs::Metadata,
    len: usize,
) -> std::io::Result<Arc<Mapped>> {
    #[cfg(unix)]
    let identity = {
        use std::os::unix::fs::MetadataExt;
        (metadata.dev(), metadata.ino())
    };
    #[cfg(not(unix))]
    let identity = {
        let _ = metadata;
        return Mapped::map(file, len).map(Arc::new);
    };
    let mut held = mappings().lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((of, mapping)) = held.get(path) {
        if let Some(mapping) = mapping.upgrade() {
            if *of == identity && mapping.len() >= len && mapping.intact() {
                return Ok(mapping);
            }
        }
    }
    let room = (len / 8).max(1 << 20);
    let mapping = Arc::new(Mapped::map_with_room(file, len, room)?);
    held.retain(|_, (_, m)| m.strong_count() > 0);
    held.insert(path.to_path_buf(), (identity, Arc::downgrade(&mapping)));
    Ok(mapping)
}

/// Ok when a vector file of `on_disk` bytes holds `info`'s committed rows; corrupt otherwise.
fn holds_committed(info: &VectorFileInfo, on_disk: u64) -> Result<()> {
    let len = info.rows * info.row_bytes();
    if on_disk < len as u64 {
        return Err(StoreError::Corrupt {
            table: "vector_files",
            column: "rows",
            id: info.path.display().to_string(),
            reason: format!("the file holds {on_disk} bytes, {len} are committed"),
        });
    }
    Ok(())
}

/// A `vector_files` row: dtype, dim, rows, last_rowid, file, ann_rows.
type InfoRow = (String, i64, i64, i64, String, i64);

fn read_info(conn: &Db, dir: &Path, ns: &str, model: &str) -> Result<Option<VectorFileInfo>> {
    let row = conn
        .query_row(
            "SELECT dtype, dim, rows, last_rowid, file, ann_rows FROM vector_files WHERE namespace = ?1 AND model_id = ?2",
            [ns, model],
            |r| r.tuple::<InfoRow>(),
        )
        .optional()
        .ctx("reading a vector file record")?;
    row.map(|row| decode_info(row, dir, ns, model)).transpose()
}

/// The record of a `vector_files` row.
fn decode_info(row: InfoRow, dir: &Path, ns: &str, model: &str) -> Result<VectorFileInfo> {
    let (dtype, dim, rows, last_rowid, file, ann_rows) = row;
    let corrupt = |column, reason: String| StoreError::Corrupt {
        table: "vector_files",
        column,
        id: format!("{ns}/{model}"),
        reason,
    };
    Ok(VectorFileInfo {
        dtype: VectorDtype::parse(&dtype)
            .ok_or_else(|| corrupt("dtype", format!("unknown element type {dtype}")))?,
        dim: usize::try_from(dim).map_err(|_| corrupt("dim", format!("{dim}")))?,
        rows: usize::try_from(rows).map_err(|_| corrupt("rows", format!("{rows}")))?,
        last_rowid,
        ann_rows: usize::try_from(ann_rows)
            .map_err(|_| corrupt("ann_rows", format!("{ann_rows}")))?,
        path: dir.join(&file),
    })
}

/// The file name of (namespace, model)'s vectors: a hash, so that any namespace or model name
/// gives a plain name, with the element type as extension.
fn file_name(ns: &str, model: &str, dtype: VectorDtype) -> String {
    format!("{}.{}", file_stem(ns, model), dtype.as_str())
}

/// The name of (namespace, model)'s files without extension: a hash of the two (the vector
/// file, its approximate index and its index segment share it).
pub(crate) fn file_stem(ns: &str, model: &str) -> String {
    let h = trajwiki_core::content_hash([ns, model]);
    h[..32].to_string()
}

impl Store {
    /// The committed extent of the vector file of `ns` for `model`, if there is one.
    pub fn vector_file(&self, ns: &Namespace, model: &str) -> Result<Option<VectorFileInfo>> {
        read_info(&self.conn, &self.files, ns.as_str(), model)
    }

    /// [`Store::vector_file`], checked against what holds the rows without reading them: the
    /// file's length on SQLite, the last chunk on PostgreSQL. Rows missing from the end are
    /// [`StoreError::Corrupt`], as [`Store::map_vectors`] finds them, at a cost that does not
    /// grow with the rows.
    pub fn checked_vector_file(
        &self,
        ns: &Namespace,
        model: &str,
    ) -> Result<Option<VectorFileInfo>> {
        if self.conn.is_postgres() {
            // The record and the end of its last chunk, in one statement.
            let row = self
                .conn
                .query_row(
                    "SELECT dtype, dim, rows, last_rowid, file, ann_rows,
                        (SELECT c.first_row + c.rows FROM vector_chunks c
                         WHERE c.namespace = f.namespace AND c.model_id = f.model_id
                         ORDER BY c.first_row DESC LIMIT 1)
                     FROM vector_files f WHERE namespace = ?1 AND model_id = ?2",
                    params![ns.as_str(), model],
                    |r| Ok((r.tuple::<InfoRow>()?, r.get::<Option<i64>>(6)?)),
                )
                .optional()
                .ctx("reading a vector file record")?;
            let Some((row, end)) = row else {
                return Ok(None);
            };
            let info = decode_info(row, &self.files, ns.as_str(), model)?;
            let held = usize::try_from(end.unwrap_or(0)).unwrap_or(0);
            if held < info.rows {
                return Err(StoreError::Corrupt {
                    table: "vector_chunks",
                    column: "rows",
                    id: format!("{ns}/{model}"),
                    reason: format!("the chunks hold {held} rows, {} are committed", info.rows),
                });
            }
            return Ok(Some(info));
        }
        let Some(info) = self.vector_file(ns, model)? else {
            return Ok(None);
        };
        if info.rows > 0 {
            let on_disk = std::fs::metadata(&info.path).map_err(io_error(&info.path))?;
            holds_committed(&info, on_disk.len())?;
        }
        Ok(Some(info))
    }

    /// Maps the committed rows of the vector file of `ns` for `model`. A file shorter than its
    /// committed rows is [`StoreError::Corrupt`].
    pub fn map_vectors(&self, ns: &Namespace, model: &str) -> Result<Option<MappedVectors>> {
        let Some(info) = self.vector_file(ns, model)? else {
            return Ok(None);
        };
        let len = info.rows * info.row_bytes();
        if len == 0 {
            return Ok(Some(MappedVectors {
                info,
                rows: Rows::Empty,
            }));
        }
        if self.conn.is_postgres() {
            return self.read_chunks(ns, model, info).map(Some);
        }
        let file = File::open(&info.path).map_err(io_error(&info.path))?;
        let metadata = file.metadata().map_err(io_error(&info.path))?;
        holds_committed(&info, metadata.len())?;
        let map =
            shared_mapping(&info.path, &file, &metadata, len).map_err(io_error(&info.path))?;
        Ok(Some(MappedVectors {
            info,
            rows: Rows::Mapped(map),
        }))
    }

    /// The committed rows of a PostgreSQL store's vectors, read in order into memory.
    fn read_chunks(
        &self,
        ns: &Namespace,
        model: &str,
        info: VectorFileInfo,
    ) -> Result<MappedVectors> {
        let len = info.rows * info.row_bytes();
        let mut words = vec![0u32; len.div_ceil(4)];
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut words);
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT first_row, data FROM vector_chunks
                 WHERE namespace = ?1 AND model_id = ?2 AND first_row < ?3 ORDER BY first_row",
            )
            .ctx("reading vectors")?;
        let chunks = stmt
            .query_map(params![ns.as_str(), model, info.rows as i64], |r| {
                Ok((r.get::<i64>(0)?, r.get::<Vec<u8>>(1)?))
            })
            .ctx("reading vectors")?;
        let mut filled = 0;
        for chunk in chunks {
            let (first, data) = chunk.ctx("reading vectors")?;
            let at = first as usize * info.row_bytes();
            let end = (at + data.len()).min(len);
            if at != filled || end <= at {
                break;
            }
            bytes[at..end].copy_from_slice(&data[..end - at]);
            filled = end;
        }
        if filled < len {
            return Err(StoreError::Corrupt {
                table: "vector_chunks",
                column: "data",
                id: format!("{ns}/{model}"),
                reason: format!("the chunks hold {filled} bytes in order, {len} are committed"),
            });
        }
        Ok(MappedVectors {
            info,
            rows: Rows::Read(words),
        })
    }

    /// Appends the vectors of messages that arrived after the file's last row: `rows` are
    /// (message rowid, vector), rowids ascending and above the file's `last_rowid`. The file is
    /// created with `dtype` on the first append and keeps its type after. Holds SQLite's write
    /// lock from reading the committed extent to committing the new one, so appenders in other
    /// processes take turns.
    pub fn append_vectors(
        &mut self,
        ns: &Namespace,
        model: &str,
        dtype: VectorDtype,
        dim: usize,
        rows: &[(i64, &[f32])],
    ) -> Result<VectorFileInfo> {
        self.append_vectors_caching(ns, model, dtype, dim, rows, &[])
    }

    /// [`append_vectors`](Store::append_vectors), and `cache` (text hash, vector: the ones a
    /// caller embedded for these rows) put into the embedding cache in the same transaction, as
    /// [`put_embeddings`](Store::put_embeddings) would: one commit for both.
    pub fn append_vectors_caching(
        &mut self,
        ns: &Namespace,
        model: &str,
        dtype: VectorDtype,
        dim: usize,
        rows: &[(i64, &[f32])],
        cache: &[(&str, &[f32])],
    ) -> Result<VectorFileInfo> {
        self.writable("starting a vector append")?;
        let recorded = !cache.is_empty() && self.check_embeddings(model, dim, cache)?;
        let tx = self
            .conn
            .begin(Begin::Write(&[ns.as_str()]))
            .ctx("starting a vector append")?;
        // A move while this waited for the lock is seen before a file is written.
        self.in_place()?;
        let info = match read_info(&tx, &self.files, ns.as_str(), model)? {
            Some(info) => info,
            None => {
                let file = file_name(ns.as_str(), model, dtype);
                tx.execute(
                    "INSERT INTO vector_files (namespace, model_id, dtype, dim, file, rows, last_rowid)
                     VALUES (?1, ?2, ?3, ?4, ?5, 0, 0)",
                    params![ns.as_str(), model, dtype.as_str(), dim as i64, file],
                )
                .ctx("recording a vector file")?;
                VectorFileInfo {
                    dtype,
                    dim,
                    rows: 0,
                    last_rowid: 0,
                    ann_rows: 0,
                    path: self.files.join(file),
                }
            }
        };
        if let Some((_, v)) = rows.iter().find(|(_, v)| v.len() != info.dim) {
            return Err(StoreError::EmbeddingDimension {
                model: model.to_string(),
                stored: info.dim,
                got: v.len(),
            });
        }
        let mut last = info.last_rowid;
        for &(rowid, _) in rows {
            if rowid <= last {
                return Err(StoreError::Conflict {
                    kind: "vector row",
                    id: format!("{ns}/{model}"),
                    fields: Vec::new(),
                    existing: format!("rows up to message rowid {last}"),
                    incoming: format!("a row for message rowid {rowid}"),
                });
            }
            last = rowid;
        }
        if rows.is_empty() {
            // No rows: no vector file made; the cache on its own.
            drop(tx);
            if !cache.is_empty() {
                self.put_embeddings(model, dim, cache)?;
            }
            return Ok(info);
        }
        if !cache.is_empty() {
            crate::embeddings::write_embeddings(&tx, model, dim, recorded, cache)?;
        }
        let bytes = encode_rows(info.dtype, rows);
        if tx.is_postgres() {
            tx.execute(
                "INSERT INTO vector_chunks (namespace, model_id, first_row, rows, data)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    ns.as_str(),
                    model,
                    info.rows as i64,
                    rows.len() as i64,
                    bytes
                ],
            )
            .ctx("writing vector rows")?;
        } else {
            self.vector_dir()?;
            append_file(&info, &bytes).map_err(|e| self.relocated_or(e))?;
        }
        let info = VectorFileInfo {
            rows: info.rows + rows.len(),
            last_rowid: last,
            ..info
        };
        tx.execute(
            "UPDATE vector_files SET rows = ?3, last_rowid = ?4 WHERE namespace = ?1 AND model_id = ?2",
            params![ns.as_str(), model, info.rows as i64, info.last_rowid],
        )
        .ctx("committing vector rows")?;
        tx.commit().ctx("committing vector rows")?;
        if !cache.is_empty() {
            self.dims.borrow_mut().insert(model.to_string(), dim);
        }
        Ok(info)
    }
}

/// Rows as the bytes of a vector file of `dtype`.
fn encode_rows(dtype: VectorDtype, rows: &[(i64, &[f32])]) -> Vec<u8> {
    let dim = rows.first().map_or(0, |r| r.1.len());
    let mut bytes = Vec::with_capacity(rows.len() * dim * dtype.size());
    for (_, v) in rows {
        match dtype {
            VectorDtype::F16 => {
                for x in v.iter() {
                    bytes.extend_from_slice(&f16::from_f32(*x).to_le_bytes());
                }
            }
            VectorDtype::F32 => {
                for x in v.iter() {
                    bytes.extend_from_slice(&x.to_le_bytes());
                }
            }
        }
    }
    bytes
}

/// Writes `bytes` after the committed rows of `info`'s file (dropping a torn tail a crash left)
/// and syncs them, before their count is committed. The file's folder is there
/// ([`Store::vector_dir`]).
fn append_file(info: &VectorFileInfo, bytes: &[u8]) -> Result<()> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&info.path)
        .map_err(io_error(&info.path))?;
    let committed = (info.rows * info.row_bytes()) as u64;
    let on_disk = file.metadata().map_err(io_error(&info.path))?.len();
    if on_disk < committed {
        return Err(StoreError::Corrupt {
            table: "vector_files",
            column: "rows",
            id: info.path.display().to_string(),
            reason: format!("the file holds {on_disk} bytes, {committed} are committed"),
        });
    }
    // A torn tail from a crash after writing and before committing: not ours to keep.
    file.set_len(committed).map_err(io_error(&info.path))?;
    file.seek(SeekFrom::Start(committed))
        .map_err(io_error(&info.path))?;
    file.write_all(bytes).map_err(io_error(&info.path))?;
    file.sync_data().map_err(io_error(&info.path))?;
    Ok(())
}

impl Store {
    /// Records that the approximate index at [`VectorFileInfo::ann_path`] now covers the first
    /// `rows` rows (the index file is written first, then this).
    pub fn set_ann_rows(&mut self, ns: &Namespace, model: &str, rows: usize) -> Result<()> {
        self.writable("recording an approximate index")?;
        self.conn
            .execute(
                "UPDATE vector_files SET ann_rows = ?3 WHERE namespace = ?1 AND model_id = ?2 AND rows >= ?3",
                params![ns.as_str(), model, rows as i64],
            )
            .ctx("recording an approximate index")
            .map(|_| ())
    }

    /// Forgets the vector file of `ns` for `model` and removes it, so that the next append
    /// writes it again from the first message: the repair for a damaged file (derived state).
    pub fn reset_vectors(&mut self, ns: &Namespace, model: &str) -> Result<()> {
        let Some(info) = self.vector_file(ns, model)? else {
            return Ok(());
        };
        let tx = self.write_tx("forgetting a vector file", &[ns.as_str()])?;
        if tx.is_postgres() {
            tx.execute(
                "DELETE FROM vector_chunks WHERE namespace = ?1 AND model_id = ?2",
                [ns.as_str(), model],
            )
            .ctx("forgetting a vector file")?;
        }
        tx.execute(
            "DELETE FROM vector_files WHERE namespace = ?1 AND model_id = ?2",
            [ns.as_str(), model],
        )
        .ctx("forgetting a vector file")?;
        tx.commit().ctx("forgetting a vector file")?;
        let segment = self.segment_path(ns, model);
        remove_files(&[info.path.clone(), info.ann_path()])?;
        remove_files(segment.as_slice())
    }

    /// The vector files of a namespace (any model), for removal with it.
    pub(crate) fn vector_paths(&self, ns: &Namespace) -> Result<Vec<PathBuf>> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT file FROM vector_files WHERE namespace = ?1")
            .ctx("listing vector files")?;
        let files = stmt
            .query_map([ns.as_str()], |r| r.get::<String>(0))
            .ctx("listing vector files")?
            .collect::<rusqlite::Result<Vec<_>>>()
            .ctx("listing vector files")?;
        Ok(files
            .into_iter()
            .flat_map(|f| {
                let path = self.files.join(f);
                [path.with_extension("hnsw"), path]
            })
            .collect())
    }
}

/// Removes files that may be absent.
pub(crate) fn remove_files(paths: &[PathBuf]) -> Result<()> {
    for path in paths {
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(StoreError::VectorFile {
                    path: path.clone(),
                    source: e,
                });
            }
            _ => {}
        }
    }
    Ok(())
}
