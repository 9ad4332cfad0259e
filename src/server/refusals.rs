//! The refusals hyper makes itself, answered as JSON like every other refusal.
//!
//! hyper refuses a request it cannot read before any route sees it: a malformed request line
//! (an HTTP/0.9 one without a version included) or header (a `Content-Length` that is not one
//! number below 2^64, or two that differ), more headers or head bytes than it reads (431), a
//! target over 65,534 bytes (414). It answers with a head of its own and no body, then closes
//! the connection, and it has no hook to answer otherwise. So the connection's IO is wrapped
//! ([`JsonRefusals`]) and that head is replaced, on its way out, by the JSON error with a stable
//! code (`bad_request`, `headers_too_large`, `uri_too_long`) and hyper's status.
//!
//! What tells hyper's own answer from the router's is that no request asked for it. The service
//! hyper calls ([`CountedService`]) notes each request it hands to the router ([`RouterCalls`]),
//! and the IO follows the answers hyper writes: each head, then its body by its
//! `Content-Length` or its chunks (none after `HEAD`, 1xx, 204 or 304). hyper answers one
//! request at a time, in order, and refuses only between answers, so an answer that begins
//! while no noted request waits for one is hyper's own. From its first byte on, what hyper
//! writes is held back and the JSON answer is written instead when hyper flushes or closes.
//! The router's answers pass through as hyper writes them (nothing is buffered or copied), so
//! kept-alive and pipelined requests are served as before, and a refusal comes after the
//! answers to the requests before it. Bytes this module cannot follow (a body that runs to the
//! close, a switched protocol) pass through untouched and end the following.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{ready, Context, Poll};

use axum::http::{Method, Request, StatusCode};
use hyper::rt::{Read, ReadBufCursor, Write};

use super::{Code, ErrorBody, ErrorDetail};

/// The most headers hyper reads in a request (hyper's default, set here so that a refusal can
/// say it).
pub(super) const MAX_HEADERS: usize = 100;

/// The most bytes hyper buffers for a request's head (hyper's default, set here so that a
/// refusal can say it).
pub(super) const MAX_HEAD_BYTES: usize = 8192 + 4096 * 100;

/// The longest request target hyper reads, in bytes (fixed in hyper).
const MAX_TARGET_BYTES: usize = 65_534;

/// The longest answer head followed; a longer one ends the following (the router's heads are a
/// few hundred bytes).
const MAX_FOLLOWED_HEAD: usize = 64 * 1024;

/// The most bytes of hyper's own answer held back (it is one head of about a hundred bytes).
const MAX_HELD: usize = 4096;

/// The requests of one connection that hyper handed to the router and whose answers have not
/// begun, by method, oldest first (hyper answers them in order).
#[derive(Debug, Clone, Default)]
pub(super) struct RouterCalls(Arc<Mutex<VecDeque<Method>>>);

impl RouterCalls {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Method>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes a request handed to the router.
    fn asked(&self, method: Method) {
        self.lock().push_back(method);
    }

    /// Whether a request handed to the router waits for its answer.
    fn waiting(&self) -> bool {
        !self.lock().is_empty()
    }

    /// The method of the request whose (final) answer began, no longer waiting.
    fn answered(&self) -> Option<Method> {
        self.lock().pop_front()
    }
}

/// A hyper service that notes in [`RouterCalls`] each request it hands on to `inner`.
pub(super) struct CountedService<S> {
    inner: S,
    calls: RouterCalls,
}

impl<S> CountedService<S> {
    pub(super) fn new(inner: S, calls: RouterCalls) -> Self {
        CountedService { inner, calls }
    }
}

impl<S, B> hyper::service::Service<Request<B>> for CountedService<S>
where
    S: hyper::service::Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn call(&self, request: Request<B>) -> Self::Future {
        self.calls.asked(request.method().clone());
        self.inner.call(request)
    }
}

/// Where the stream of bytes hyper writes is: in which part of which answer.
#[derive(Debug)]
struct Answers {
    /// The bytes of the stream followed so far.
    seen: u64,
    part: Part,
}

#[derive(Debug)]
enum Part {
    /// An answer's head: its bytes so far (none at the start of an answer).
    Head(Vec<u8>),
    /// A body of known length: the bytes still to come.
    Body(u64),
    /// The size line of a chunk: its bytes so far.
    ChunkSize(Vec<u8>),
    /// A chunk's data and the line end after it: the bytes still to come.
    Chunk(u64),
    /// A trailer line of a chunked body (an empty one ends the body): its bytes so far.
    Trailer(Vec<u8>),
    /// No longer followed: hyper's own answer, a body that runs to the close, a switched
    /// protocol, or a head that could not be read.
    Unfollowed,
}

impl Answers {
    fn new() -> Self {
        Answers {
            seen: 0,
            part: Part::Head(Vec::new()),
        }
    }

    /// Follows `bytes`, the stream's next ones: the position in the stream where hyper's own
    /// answer begins, when it begins in them (the following stops there).
    fn follow(&mut self, mut bytes: &[u8], calls: &RouterCalls) -> Option<u64> {
        while !bytes.is_empty() {
            let used = match &mut self.part {
                Part::Unfollowed => return None,
                Part::Head(head) => {
                    if head.is_empty() && !calls.waiting() {
                        self.part = Part::Unfollowed;
                        return Some(self.seen);
                    }
                    let (used, whole) = line_until(head, bytes, b"\r\n\r\n");
                    if whole {
                        self.part = after_head(head, calls);
                    } else if head.len() > MAX_FOLLOWED_HEAD {
                        self.part = Part::Unfollowed;
                    }
                    used
                }
                Part::Body(left) | Part::Chunk(left) => {
                    let used = (*left).min(bytes.len() as u64);
                    *left -= used;
                    if *left == 0 {
                        self.part = match self.part {
                            Part::Body(_) => Part::Head(Vec::new()),
                            _ => Part::ChunkSize(Vec::new()),
                        };
                    }
                    used as usize
                }
                Part::ChunkSize(line) => {
                    let (used, whole) = line_until(line, bytes, b"\r\n");
                    if whole {
                        self.part = match chunk_size(line) {
                            Some(0) => Part::Trailer(Vec::new()),
                            Some(size) => Part::Chunk(size.saturating_add(2)),
                            None => Part::Unfollowed,
                        };
                    } else if line.len() > MAX_FOLLOWED_HEAD {
                        self.part = Part::Unfollowed;
                    }
                    used
                }
                Part::Trailer(line) => {
                    let (used, whole) = line_until(line, bytes, b"\r\n");
                    if whole {
                        self.part = if line.len() == 2 {
                            Part::Head(Vec::new())
                        } else {
                            Part::Trailer(Vec::new())
                        };
                    } else if line.len() > MAX_FOLLOWED_HEAD {
                        self.part = Part::Unfollowed;
                    }
                    used
                }
            };
            self.seen += used as u64;
            bytes = &bytes[used..];
        }
        None
    }
}

/// Moves bytes from `bytes` to `line` until `line` ends with `end`: the bytes moved, and whether
/// `line` ends with `end`.
fn line_until(line: &mut Vec<u8>, bytes: &[u8], end: &[u8]) -> (usize, bool) {
    for (i, &b) in bytes.iter().enumerate() {
        line.push(b);
        if line.ends_with(end) {
            return (i + 1, true);
        }
    }
    (bytes.len(), false)
}

/// What follows the answer head `head`: its body, or the next answer.
fn after_head(head: &[u8], calls: &RouterCalls) -> Part {
    let Some(status) = status_of(head) else {
        return Part::Unfollowed;
    };
    // An interim answer (100 Continue) comes before the final one to the same request.
    if (100..200).contains(&status) && status != 101 {
        return Part::Head(Vec::new());
    }
    let method = calls.answered();
    if status == 101 || (method == Some(Method::CONNECT) && (200..300).contains(&status)) {
        return Part::Unfollowed;
    }
    if method == Some(Method::HEAD) || status == 204 || status == 304 {
        return Part::Head(Vec::new());
    }
    let mut chunked = false;
    let mut length = None;
    for line in head.split(|&b| b == b'\n').skip(1) {
        let line = String::from_utf8_lossy(line);
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let (name, value) = (name.trim(), value.trim());
        if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value
                .rsplit(',')
                .next()
                .is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"));
        } else if name.eq_ignore_ascii_case("content-length") {
            length = value.parse::<u64>().ok();
        }
    }
    match (chunked, length) {
        (true, _) => Part::ChunkSize(Vec::new()),
        (false, Some(0)) => Part::Head(Vec::new()),
        (false, Some(n)) => Part::Body(n),
        (false, None) => Part::Unfollowed,
    }
}

/// The status of an answer head (`HTTP/1.1 200 OK…`).
fn status_of(head: &[u8]) -> Option<u16> {
    let line = head.split(|&b| b == b'\r').next()?;
    let status = line.split(|&b| b == b' ').nth(1)?;
    std::str::from_utf8(status).ok()?.parse().ok()
}

/// The size of a chunk from its size line (hexadecimal, then extensions after `;`).
fn chunk_size(line: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(line).ok()?;
    let size = text.split(';').next()?.trim();
    u64::from_str_radix(size, 16).ok()
}

/// The connection's IO, with hyper's own refusals answered as JSON (see the module's notes).
pub(super) struct JsonRefusals<I> {
    io: I,
    calls: RouterCalls,
    answers: Answers,
    /// The bytes of hyper's stream taken: written through, or held back.
    taken: u64,
    /// Where hyper's own answer begins in its stream, once it has begun.
    own_from: Option<u64>,
    /// hyper's own answer, held back.
    held: Vec<u8>,
    /// The JSON answer written in its place, and how many of its bytes are written.
    answer: Option<(Vec<u8>, usize)>,
}

impl<I> JsonRefusals<I> {
    pub(super) fn new(io: I, calls: RouterCalls) -> Self {
        JsonRefusals {
            io,
            calls,
            answers: Answers::new(),
            taken: 0,
            own_from: None,
            held: Vec::new(),
            answer: None,
        }
    }

    /// Follows the bytes of `bufs` not yet followed (hyper offers again, from the first byte
    /// not taken, what was not written).
    fn follow(&mut self, bufs: &[&[u8]]) {
        let mut at = self.taken;
        for buf in bufs {
            if self.own_from.is_some() {
                return;
            }
            let end = at + buf.len() as u64;
            if end > self.answers.seen {
                let new = (self.answers.seen - at.min(self.answers.seen)) as usize;
                self.own_from = self.answers.follow(&buf[new..], &self.calls);
            }
            at = end;
        }
    }

    /// How many of the next `offered` bytes go through: those before hyper's own answer.
    fn through(&self, offered: usize) -> usize {
        match self.own_from {
            None => offered,
            Some(from) => (from.saturating_sub(self.taken)).min(offered as u64) as usize,
        }
    }

    /// Holds back `bytes` of hyper's own answer.
    fn hold(&mut self, bytes: &[u8]) {
        let room = MAX_HELD.saturating_sub(self.held.len());
        self.held.extend_from_slice(&bytes[..bytes.len().min(room)]);
        self.taken += bytes.len() as u64;
    }
}

impl<I: Write + Unpin> JsonRefusals<I> {
    /// Writes the JSON answer in place of hyper's own, once its head is whole (or the
    /// connection closes).
    fn poll_answer(&mut self, cx: &mut Context<'_>, closing: bool) -> Poll<io::Result<()>> {
        let whole = self.held.windows(4).any(|w| w == b"\r\n\r\n");
        if self.answer.is_none() && self.own_from.is_some() && (whole || closing) {
            self.answer = Some((json_answer(&self.held), 0));
        }
        if let Some((bytes, written)) = &mut self.answer {
            while *written < bytes.len() {
                let n = ready!(Pin::new(&mut self.io).poll_write(cx, &bytes[*written..]))?;
                if n == 0 {
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                *written += n;
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<I: Read + Unpin> Read for JsonRefusals<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<I: Write + Unpin> Write for JsonRefusals<I> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.follow(&[buf]);
        let through = this.through(buf.len());
        if through == 0 {
            this.hold(buf);
            return Poll::Ready(Ok(buf.len()));
        }
        let n = ready!(Pin::new(&mut this.io).poll_write(cx, &buf[..through]))?;
        this.taken += n as u64;
        Poll::Ready(Ok(n))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let slices: Vec<&[u8]> = bufs.iter().map(|b| &**b).collect();
        this.follow(&slices);
        let offered: usize = slices.iter().map(|b| b.len()).sum();
        let through = this.through(offered);
        if through == 0 {
            for slice in slices {
                this.hold(slice);
            }
            return Poll::Ready(Ok(offered));
        }
        let io = Pin::new(&mut this.io);
        let n = if through == offered {
            ready!(io.poll_write_vectored(cx, bufs))?
        } else {
            // hyper's own answer begins inside these buffers: what comes before it, from the
            // first buffer with bytes (the rest is offered again).
            let first = slices
                .iter()
                .find(|b| !b.is_empty())
                .copied()
                .unwrap_or(&[]);
            ready!(io.poll_write(cx, &first[..through.min(first.len())]))?
        };
        this.taken += n as u64;
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_answer(cx, false))?;
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_answer(cx, true))?;
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}

/// The stable code and message of hyper's refusal with `status`.
fn refusal(status: StatusCode) -> (Code, String) {
    match status {
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => (
            Code::HeadersTooLarge,
            format!(
                "the request's head is over this server's limits: at most {MAX_HEADERS} headers and {MAX_HEAD_BYTES} bytes are read (a Content-Length of 2^64 - 2 or more is refused as too large too)"
            ),
        ),
        StatusCode::URI_TOO_LONG => (
            Code::UriTooLong,
            format!("the request's target (its path and query) is over {MAX_TARGET_BYTES} bytes"),
        ),
        _ => (
            Code::BadRequest,
            "the request cannot be read as HTTP/1.1: its request line (method, target, HTTP version) or one of its headers is malformed, such as a Content-Length that is not one number below 2^64, or two Content-Lengths that differ".into(),
        ),
    }
}

/// The JSON answer in place of hyper's own answer `held` (its head): hyper's status and `Date`,
/// the error's code and message, and the connection closed, as hyper closes it.
fn json_answer(held: &[u8]) -> Vec<u8> {
    let status = status_of(held)
        .and_then(|s| StatusCode::from_u16(s).ok())
        .filter(|s| s.is_client_error() || s.is_server_error())
        .unwrap_or(StatusCode::BAD_REQUEST);
    let (code, message) = refusal(status);
    let body = serde_json::to_vec(&ErrorBody {
        error: ErrorDetail { code, message },
    })
    .unwrap_or_default();
    let mut head = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        body.len()
    );
    let date = String::from_utf8_lossy(held)
        .split("\r\n")
        .find(|line| {
            line.split_once(':')
                .is_some_and(|(name, _)| name.trim().eq_ignore_ascii_case("date"))
        })
        .map(str::to_string);
    if let Some(date) = date {
        head.push_str(&date);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    out.extend_from_slice(&body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// hyper's own refusal, as hyper writes it.
    const OWN: &[u8] =
        b"HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\ncontent-length: 0\r\ndate: Sun, 06 Dec 2026 07:22:22 GMT\r\n\r\n";

    /// Writes `writes` through a [`JsonRefusals`] over a buffer, each as one write (its
    /// slices vectored), with `asked` noted as the requests handed to the router first, then
    /// flushes and shuts it down: the bytes that reached the buffer.
    fn through(asked: &[Method], writes: &[&[&[u8]]]) -> Vec<u8> {
        let calls = RouterCalls::default();
        for method in asked {
            calls.asked(method.clone());
        }
        let mut io = JsonRefusals::new(hyper_util::rt::TokioIo::new(Vec::new()), calls);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        for write in writes {
            let slices: Vec<io::IoSlice<'_>> = write.iter().map(|b| io::IoSlice::new(b)).collect();
            let mut done = 0;
            let total: usize = write.iter().map(|b| b.len()).sum();
            // Offered again from the first byte not taken, as hyper does.
            while done < total {
                let rest: Vec<u8> = write.concat()[done..].to_vec();
                let n = if done == 0 {
                    Pin::new(&mut io).poll_write_vectored(&mut cx, &slices)
                } else {
                    Pin::new(&mut io).poll_write(&mut cx, &rest)
                };
                let Poll::Ready(Ok(n)) = n else {
                    panic!("the write did not go through")
                };
                assert!(n > 0);
                done += n;
            }
        }
        assert!(Pin::new(&mut io).poll_flush(&mut cx).is_ready());
        assert!(Pin::new(&mut io).poll_shutdown(&mut cx).is_ready());
        io.io.into_inner()
    }

    fn answer(status: &str, headers: &str, body: &str) -> Vec<u8> {
        format!("HTTP/1.1 {status}\r\n{headers}\r\n{body}").into_bytes()
    }

    /// The JSON body at the end of `out` after `before`.
    fn replaced(out: &[u8], before: &[u8]) -> serde_json::Value {
        assert!(out.starts_with(before), "{}", String::from_utf8_lossy(out));
        let rest = String::from_utf8_lossy(&out[before.len()..]).into_owned();
        assert!(rest.starts_with("HTTP/1.1 431 "), "{rest}");
        assert!(
            rest.contains("content-type: application/json\r\n"),
            "{rest}"
        );
        assert!(
            rest.contains("date: Sun, 06 Dec 2026 07:22:22 GMT\r\n"),
            "{rest}"
        );
        let (_, body) = rest.split_once("\r\n\r\n").unwrap();
        serde_json::from_str(body).unwrap()
    }

    #[test]
    fn the_routers_answers_pass_and_hypers_own_is_json() {
        let fixed = answer("200 OK", "content-length: 5\r\n", "hello");
        let chunked = answer(
            "200 OK",
            "transfer-encoding: chunked\r\n",
            "5\r\nhello\r\n10\r\n0123456789abcdef\r\n0\r\n\r\n",
        );
        let trailers = answer(
            "200 OK",
            "transfer-encoding: chunked\r\n",
            "1\r\nx\r\n0\r\nx-sum: 1\r\n\r\n",
        );
        let head = answer("200 OK", "content-length: 33\r\n", "");
        let interim = answer("100 Continue", "", "");
        let empty = answer("204 No Content", "", "");
        let get = Method::GET;
        // Alone, and after answers of every framing: the router's pass as they are, hyper's
        // own becomes JSON.
        let mut stream = Vec::new();
        for part in [&fixed, &interim, &chunked, &trailers, &head, &empty] {
            stream.extend_from_slice(part);
        }
        let asked = [
            get.clone(),
            Method::POST,
            get.clone(),
            Method::HEAD,
            get.clone(),
        ];
        for writes in [
            vec![&[&stream[..], OWN][..]],
            vec![&[&stream[..]][..], &[OWN][..]],
        ] {
            let out = through(&asked, &writes);
            let body = replaced(&out, &stream);
            assert_eq!(body["error"]["code"], "headers_too_large", "{body}");
        }
        // Written a byte at a time.
        let mut all = stream.clone();
        all.extend_from_slice(OWN);
        let bytes: Vec<&[u8]> = all.chunks(1).collect();
        let writes: Vec<&[&[u8]]> = bytes.iter().map(std::slice::from_ref).collect();
        let out = through(&asked, &writes);
        replaced(&out, &stream);
        // An answer to a request the router was handed is never replaced, whatever its status.
        let router = answer(
            "431 Request Header Fields Too Large",
            "content-length: 0\r\n",
            "",
        );
        assert_eq!(through(std::slice::from_ref(&get), &[&[&router]]), router);
        // A body that runs to the close is not followed: nothing after it is replaced.
        let unframed = answer("200 OK", "connection: close\r\n", "HTTP/1.1 400 x\r\n\r\n");
        assert_eq!(through(&[get], &[&[&unframed]]), unframed);
    }

    #[test]
    fn each_status_has_its_code() {
        for (status, code) in [
            ("400 Bad Request", "bad_request"),
            ("414 URI Too Long", "uri_too_long"),
            ("431 Request Header Fields Too Large", "headers_too_large"),
        ] {
            let out = json_answer(&answer(status, "content-length: 0\r\n", ""));
            let text = String::from_utf8(out).unwrap();
            assert!(
                text.starts_with(&format!("HTTP/1.1 {status}\r\n")),
                "{text}"
            );
            let (head, body) = text.split_once("\r\n\r\n").unwrap();
            assert!(
                head.contains(&format!("content-length: {}", body.len())),
                "{text}"
            );
            let body: serde_json::Value = serde_json::from_str(body).unwrap();
            assert_eq!(body["error"]["code"], code);
        }
    }
}
