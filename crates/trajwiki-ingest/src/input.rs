//! Reading an input once. A file, a pipe (`<(cat f)`, `/dev/stdin`), a FIFO or standard input
//! (`-`) is opened once and read once: the format is told from its first bytes, which stay
//! buffered for the parser, so nothing is read twice and nothing waits for a second writer.
//!
//! Nothing is buffered without bound. A line of JSONL is refused as soon as it is longer than
//! any line holding a record within its limit could be ([`line_bound`]: six bytes per byte of
//! the limit, as each may be written as a `\u` escape, plus [`LINE_FRAMING`]), and a JSON
//! document read whole (a LoCoMo file) is parsed as it streams in and refused past
//! [`limits::DOCUMENT_BYTES`]. An endless input (`/dev/zero`) is therefore an error within a
//! moment and a bounded amount of memory.
//!
//! ```
//! use trajwiki_ingest::{Format, Input};
//!
//! let piped = r#"{"namespace": "me", "session": 1, "speaker": "Ann", "text": "Hi", "timestamp": "2024-03-01"}"#;
//! let mut input = Input::from_reader("piped", piped.as_bytes());
//! assert_eq!(input.detect().unwrap(), Format::Messages);
//! assert_eq!(input.read_messages().unwrap()[0].text, "Hi");
//! ```

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use serde_json::Value;
use trajwiki_core::limits::{self, Limit};
use trajwiki_core::{Namespace, Run, SourceMessage};

use crate::error::{IngestError, Location, Result};
use crate::locomo::LocomoSample;
use crate::Format;

/// The name standard input goes by in errors and reports.
pub const STDIN_NAME: &str = "<stdin>";

/// What a line may hold besides its escaped fields: field names, punctuation, numbers and
/// spacing, in bytes.
pub const LINE_FRAMING: usize = 64 << 10;

/// How much is read at a time.
const CHUNK: usize = 64 << 10;

/// A UTF-8 byte-order mark, as some editors write one: not text.
const BOM: &[u8] = b"\xef\xbb\xbf";

/// The longest line that can hold a record whose fields take `limit` bytes: each byte may be
/// written as a six-byte `\u` escape, and the line has [`LINE_FRAMING`] besides.
pub fn line_bound(limit: usize) -> usize {
    limit.saturating_mul(6).saturating_add(LINE_FRAMING)
}

/// One input, opened once and read once: see the module documentation.
pub struct Input {
    /// The name in errors and reports: the path, or [`STDIN_NAME`].
    name: PathBuf,
    /// The namespace of runs that name none.
    stem: String,
    inner: Box<dyn Read + Send>,
    /// Where each read lands, before it joins `buf`.
    chunk: Box<[u8]>,
    /// Read and not yet consumed: `buf[pos..]`.
    buf: Vec<u8>,
    pos: usize,
    eof: bool,
    /// Whether a leading byte-order mark has been looked for.
    started: bool,
    /// Lines consumed so far.
    line: usize,
    /// A line read to tell the format (its number and text), given to the parser first.
    pending: Option<(usize, String)>,
}

impl Input {
    /// Opens `path` for reading; `-` is standard input.
    pub fn open(path: &Path) -> Result<Input> {
        if path == Path::new("-") {
            return Ok(Input::stdin());
        }
        let file = File::open(path).map_err(|source| IngestError::Io {
            file: path.to_path_buf(),
            source,
        })?;
        Ok(Input::from_reader(path, file))
    }

    /// Standard input, named [`STDIN_NAME`]; its runs' default namespace is `stdin`.
    pub fn stdin() -> Input {
        let mut input = Input::from_reader(STDIN_NAME, std::io::stdin());
        input.stem = "stdin".into();
        input
    }

    /// Any reader, called `name` in errors; runs that name no namespace take `name`'s file stem.
    pub fn from_reader(name: impl Into<PathBuf>, reader: impl Read + Send + 'static) -> Input {
        let name = name.into();
        let stem = name
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("runs")
            .to_string();
        Input {
            name,
            stem,
            inner: Box::new(reader),
            chunk: vec![0; CHUNK].into_boxed_slice(),
            buf: Vec::new(),
            pos: 0,
            eof: false,
            started: false,
            line: 0,
            pending: None,
        }
    }

    /// The input's name in errors and reports.
    pub fn name(&self) -> &Path {
        &self.name
    }

    /// Tells the format: a `.json` name, or a first byte `[`, is LoCoMo; otherwise the first
    /// record's fields tell (`steps` or `task`: runs; `speaker` and `text`: messages). What is
    /// read to tell stays for the `read_*` call that follows.
    pub fn detect(&mut self) -> Result<Format> {
        let ext = self.name.extension().and_then(|e| e.to_str()).unwrap_or("");
        if ext.eq_ignore_ascii_case("json") {
            return Ok(Format::Locomo);
        }
        let unknown = |file: &Path, reason: String| IngestError::UnknownFormat {
            file: file.to_path_buf(),
            reason,
        };
        // The first line is read against the larger bound of the two JSONL formats.
        let runs = self.limit(limits::RUN_BYTES)?;
        let messages = self.limit(limits::MESSAGE_BYTES)?;
        let (limit, value) = if messages > runs {
            (limits::MESSAGE_BYTES, messages)
        } else {
            (limits::RUN_BYTES, runs)
        };
        let max = line_bound(value);
        match self.peek_nonblank(max, limit, value)? {
            None => return Err(unknown(&self.name, "the file is empty".into())),
            Some(b'[') => return Ok(Format::Locomo),
            Some(b'{') => {}
            Some(b) => {
                let first = if b.is_ascii_graphic() {
                    format!("`{}`", b as char)
                } else {
                    format!("byte 0x{b:02x}")
                };
                return Err(unknown(
                    &self.name,
                    format!(
                        "line {} starts with {first}, neither `{{` (JSONL records) nor `[` (a LoCoMo document)",
                        self.line + 1
                    ),
                ));
            }
        }
        let Some((line, text)) = self.next_nonblank(max, limit, value)? else {
            return Err(unknown(&self.name, "the file is empty".into()));
        };
        let parsed = parse_line(&self.name, line, &text);
        self.pending = Some((line, text));
        let (_, record) = parsed?;
        let has = |k: &str| record.get(k).is_some();
        if has("steps") || has("task") {
            Ok(Format::Runs)
        } else if has("speaker") && has("text") {
            Ok(Format::Messages)
        } else {
            Err(unknown(
                &self.name,
                "its first record has neither `steps`/`task` nor `speaker`/`text`".into(),
            ))
        }
    }

    /// Reads JSONL messages (see [`crate::jsonl`]), each line bounded by the message limit.
    pub fn read_messages(mut self) -> Result<Vec<SourceMessage>> {
        let name = self.name.clone();
        let records = self.records(limits::MESSAGE_BYTES)?;
        crate::jsonl::messages_from(&name, records)
    }

    /// Reads JSONL runs (see [`crate::jsonl`]), each line bounded by the run limit. `namespace`
    /// overrides the namespace of every run.
    pub fn read_runs(mut self, namespace: Option<&Namespace>) -> Result<Vec<Run>> {
        let (name, stem) = (self.name.clone(), self.stem.clone());
        let records = self.records(limits::RUN_BYTES)?;
        crate::jsonl::runs_from(&name, &stem, records, namespace)
    }

    /// Reads a LoCoMo document (see [`crate::locomo`]), parsed as it streams in and bounded by
    /// [`limits::DOCUMENT_BYTES`].
    pub fn read_locomo(mut self) -> Result<Vec<LocomoSample>> {
        self.start()?;
        let max = self.limit(limits::DOCUMENT_BYTES)?;
        // Lines consumed before the document (blank, or read to tell the format) are given back
        // as line numbers in errors.
        let (base, head) = match self.pending.take() {
            Some((line, text)) => (line - 1, [text.as_bytes(), b"\n"].concat()),
            None => (self.line, Vec::new()),
        };
        let head = [head, self.buf.split_off(self.pos)].concat();
        let mut doc = Bounded {
            head,
            at: 0,
            inner: &mut self.inner,
            read: 0,
            max,
            over: false,
        };
        let parsed: std::result::Result<Value, _> =
            serde_json::from_reader(BufReader::with_capacity(CHUNK, &mut doc));
        let root = match parsed {
            Ok(root) => root,
            Err(_) if doc.over => {
                return Err(IngestError::DocumentTooLarge {
                    file: self.name,
                    max,
                    limit: limits::DOCUMENT_BYTES,
                })
            }
            Err(e) if e.is_io() => {
                return Err(IngestError::Io {
                    file: self.name,
                    source: e.into(),
                })
            }
            Err(e) => {
                return Err(IngestError::Syntax {
                    file: self.name,
                    at: Location::Line {
                        line: base + e.line(),
                        column: Some(e.column()),
                    },
                    message: e.to_string(),
                })
            }
        };
        crate::locomo::samples_of(&self.name, &root)
    }

    /// The value of `limit` in force, or the error naming its variable.
    fn limit(&self, limit: Limit) -> Result<usize> {
        limit.value().map_err(|limit| IngestError::Setting {
            file: self.name.clone(),
            limit,
        })
    }

    /// The non-blank lines as JSON values, each line bounded by [`line_bound`] of `limit`.
    fn records(
        &mut self,
        limit: Limit,
    ) -> Result<impl Iterator<Item = Result<(usize, Value)>> + '_> {
        let value = self.limit(limit)?;
        let max = line_bound(value);
        let mut pending = self.pending.take();
        Ok(std::iter::from_fn(move || {
            let next = match pending.take() {
                Some(line) => Ok(Some(line)),
                None => self.next_nonblank(max, limit, value),
            };
            match next {
                Ok(Some((line, text))) => Some(parse_line(&self.name, line, &text)),
                Ok(None) => None,
                Err(e) => Some(Err(e)),
            }
        }))
    }

    /// Skips a byte-order mark at the very start.
    fn start(&mut self) -> Result<()> {
        if !self.started {
            self.started = true;
            while self.buf.len() - self.pos < BOM.len() && self.fill()? {}
            if self.buf[self.pos..].starts_with(BOM) {
                self.pos += BOM.len();
            }
        }
        Ok(())
    }

    /// Reads more into the buffer; `false` at the end of the input.
    fn fill(&mut self) -> Result<bool> {
        if self.eof {
            return Ok(false);
        }
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        loop {
            match self.inner.read(&mut self.chunk[..]) {
                Ok(n) => {
                    self.buf.extend_from_slice(&self.chunk[..n]);
                    self.eof = n == 0;
                    return Ok(n > 0);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(IngestError::Io {
                        file: self.name.clone(),
                        source,
                    });
                }
            }
        }
    }

    /// The error of a line past `max` bytes.
    fn too_long(&self, max: usize, limit: Limit, value: usize) -> IngestError {
        IngestError::LineTooLong {
            file: self.name.clone(),
            line: self.line + 1,
            max,
            limit,
            limit_value: value,
        }
    }

    /// The first byte that is not JSON whitespace, left unread; blank lines before it are
    /// consumed. `None` at the end of the input.
    fn peek_nonblank(&mut self, max: usize, limit: Limit, value: usize) -> Result<Option<u8>> {
        self.start()?;
        let mut i = self.pos;
        loop {
            while i < self.buf.len() {
                match self.buf[i] {
                    b'\n' => {
                        i += 1;
                        self.pos = i;
                        self.line += 1;
                    }
                    b' ' | b'\t' | b'\r' => i += 1,
                    b => return Ok(Some(b)),
                }
            }
            let scanned = i - self.pos;
            if scanned > max {
                return Err(self.too_long(max, limit, value));
            }
            if !self.fill()? {
                return Ok(None);
            }
            i = self.pos + scanned;
        }
    }

    /// The next line that is not blank: its number and text, without its end.
    fn next_nonblank(
        &mut self,
        max: usize,
        limit: Limit,
        value: usize,
    ) -> Result<Option<(usize, String)>> {
        while let Some((line, text)) = self.next_line(max, limit, value)? {
            if !text.trim().is_empty() {
                return Ok(Some((line, text)));
            }
        }
        Ok(None)
    }

    /// The next line, without its end (`\n` or `\r\n`); an error as soon as it is past `max`
    /// bytes, or when it is not UTF-8 text.
    fn next_line(
        &mut self,
        max: usize,
        limit: Limit,
        value: usize,
    ) -> Result<Option<(usize, String)>> {
        self.start()?;
        // Bytes of `buf[pos..]` known to hold no line end.
        let mut scanned = 0;
        let end = loop {
            let rest = &self.buf[self.pos..];
            if let Some(i) = rest[scanned..].iter().position(|&b| b == b'\n') {
                break scanned + i;
            }
            scanned = rest.len();
            if scanned > max {
                return Err(self.too_long(max, limit, value));
            }
            if !self.fill()? {
                if scanned == 0 {
                    return Ok(None);
                }
                break scanned;
            }
        };
        if end > max {
            return Err(self.too_long(max, limit, value));
        }
        let mut bytes = &self.buf[self.pos..self.pos + end];
        if end < self.buf.len() - self.pos {
            bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        }
        self.line += 1;
        let line = self.line;
        let text = match std::str::from_utf8(bytes) {
            Ok(text) => text.to_string(),
            Err(e) => {
                let at = e.valid_up_to();
                return Err(IngestError::Syntax {
                    file: self.name.clone(),
                    at: Location::Line {
                        line,
                        column: Some(at + 1),
                    },
                    message: format!("not UTF-8 text (byte 0x{:02x})", bytes[at]),
                });
            }
        };
        self.pos = (self.pos + end + 1).min(self.buf.len());
        Ok(Some((line, text)))
    }
}

/// One line as JSON, or the error naming its line and column.
pub(crate) fn parse_line(file: &Path, line: usize, text: &str) -> Result<(usize, Value)> {
    serde_json::from_str(text)
        .map(|v| (line, v))
        .map_err(|e| IngestError::Syntax {
            file: file.to_path_buf(),
            at: Location::Line {
                line,
                column: Some(e.column()),
            },
            message: e.to_string(),
        })
}

/// A document's bytes: the buffered head, then the rest of the input, refused past `max`.
struct Bounded<'a> {
    head: Vec<u8>,
    at: usize,
    inner: &'a mut Box<dyn Read + Send>,
    read: usize,
    max: usize,
    /// Set when the document went past `max`.
    over: bool,
}

impl Read for Bounded<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        // One byte past the limit is asked for, to tell a document of exactly `max` bytes from a
        // longer one.
        let room = (self.max + 1).saturating_sub(self.read).min(out.len());
        let n = if self.at < self.head.len() {
            let n = room.min(self.head.len() - self.at);
            out[..n].copy_from_slice(&self.head[self.at..self.at + n]);
            self.at += n;
            n
        } else {
            self.inner.read(&mut out[..room])?
        };
        self.read += n;
        if self.read > self.max {
            self.over = true;
            return Err(std::io::Error::other("the document is past its limit"));
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MESSAGE: &str = r#"{"namespace": "a", "session": 1, "speaker": "Ann", "text": "Hi", "timestamp": "2024-03-01"}"#;

    /// A reader that hands out one byte at a time, as a slow pipe may.
    struct Trickle(std::io::Cursor<Vec<u8>>);

    impl Read for Trickle {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = out.len().min(1);
            self.0.read(&mut out[..n])
        }
    }

    fn trickle(bytes: impl Into<Vec<u8>>) -> Input {
        Input::from_reader("piped", Trickle(std::io::Cursor::new(bytes.into())))
    }

    #[test]
    fn detects_from_what_it_reads_once() {
        let text = format!(
            "\u{feff}\n  \r\n{MESSAGE}\r\n\n{}\n",
            MESSAGE.replace("Hi", "Yo")
        );
        let mut input = trickle(text);
        assert_eq!(input.detect().unwrap(), Format::Messages);
        let messages = input.read_messages().unwrap();
        assert_eq!(messages.len(), 2);
        assert_eq!((messages[0].text.as_str(), messages[1].seq), ("Hi", 2));

        let runs = r#"{"id": "r1", "task": "buy", "steps": []}"#;
        let mut input = Input::from_reader("dir/shop.jsonl", runs.as_bytes());
        assert_eq!(input.detect().unwrap(), Format::Runs);
        assert_eq!(input.read_runs(None).unwrap()[0].namespace.as_str(), "shop");

        let mut input = trickle("\n\n  [{\"sample_id\": 7}]");
        assert_eq!(input.detect().unwrap(), Format::Locomo);
        let err = input.read_locomo().unwrap_err().to_string();
        assert!(
            err.contains("record [0]") && err.contains("sample_id"),
            "{err}"
        );
    }

    #[test]
    fn unknown_and_empty_inputs_say_why() {
        for (text, reason) in [
            ("", "the file is empty"),
            ("\u{feff} \n\t\n", "the file is empty"),
            ("\n\0\0\0", "line 2 starts with byte 0x00"),
            ("hello", "line 1 starts with `h`"),
            ("{\"a\": 1}", "neither `steps`/`task` nor `speaker`/`text`"),
        ] {
            let err = trickle(text).detect().unwrap_err();
            assert!(
                matches!(err, IngestError::UnknownFormat { .. })
                    && err.to_string().contains(reason),
                "{text:?}: {err}"
            );
        }
    }

    #[test]
    fn lines_are_bounded_before_they_are_whole() {
        // An endless line: refused once the bound is read, not read to its end.
        struct Endless(u64);
        impl Read for Endless {
            fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
                self.0 += out.len() as u64;
                assert!(self.0 < 64 << 20, "read far past the bound");
                out.fill(b'x');
                Ok(out.len())
            }
        }
        let max = line_bound(limits::MESSAGE_BYTES.default);
        let err = Input::from_reader(
            "endless",
            std::io::Read::chain(MESSAGE.as_bytes(), Endless(0)),
        )
        .read_messages()
        .unwrap_err();
        match err {
            IngestError::LineTooLong {
                line,
                max: m,
                limit,
                limit_value,
                ..
            } => {
                assert_eq!(
                    (line, m, limit, limit_value),
                    (1, max, limits::MESSAGE_BYTES, limits::MESSAGE_BYTES.default)
                );
            }
            other => panic!("{other}"),
        }
        // The second line, just past the bound; the first and a line of exactly the bound are
        // read (and refused as JSON, not as too long).
        let long = |n: usize| "x".repeat(n);
        let err = trickle(format!("{MESSAGE}\n{}\n", long(max + 1)))
            .read_messages()
            .unwrap_err();
        assert!(
            matches!(err, IngestError::LineTooLong { line: 2, .. }),
            "{err}"
        );
        let err = trickle(format!("{MESSAGE}\n{}", long(max)))
            .read_messages()
            .unwrap_err();
        assert!(
            matches!(
                err,
                IngestError::Syntax {
                    at: Location::Line { line: 2, .. },
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn bad_bytes_are_named_by_line_and_column() {
        let text = [MESSAGE.as_bytes(), b"\n{\"a\": \"\xff\"}\n"].concat();
        let err = trickle(text).read_messages().unwrap_err();
        assert!(
            matches!(&err, IngestError::Syntax { at: Location::Line { line: 2, column: Some(8) }, message, .. } if message.contains("0xff")),
            "{err}"
        );
    }

    #[test]
    fn documents_are_bounded_and_errors_keep_their_lines() {
        let err = trickle("\n\n[1,\n}").read_locomo().unwrap_err();
        assert!(
            matches!(
                err,
                IngestError::Syntax {
                    at: Location::Line {
                        line: 4,
                        column: Some(1)
                    },
                    ..
                }
            ),
            "{err}"
        );
        // A document of exactly the limit is read; one byte more is refused.
        let doc = "[]";
        let mut bounded = Bounded {
            head: doc.as_bytes().to_vec(),
            at: 0,
            inner: &mut (Box::new(std::io::empty()) as Box<dyn Read + Send>),
            read: 0,
            max: 2,
            over: false,
        };
        let mut all = Vec::new();
        bounded.read_to_end(&mut all).unwrap();
        assert_eq!(all, doc.as_bytes());
        let mut rest: Box<dyn Read + Send> = Box::new(std::io::repeat(b' '));
        let mut bounded = Bounded {
            head: doc.as_bytes().to_vec(),
            at: 0,
            inner: &mut rest,
            read: 0,
            max: 1000,
            over: false,
        };
        assert!(bounded.read_to_end(&mut Vec::new()).is_err() && bounded.over);
    }
}
