//! The server's perimeter: what a request must show before a handler sees it, and how long a
//! client may hold a connection.
//!
//! - **Host and Origin** ([`AllowedHosts`], [`check_host`]): a web page the user visits can
//!   rebind its own DNS name to 127.0.0.1 and then read and write a loopback server as its own
//!   origin. Every route therefore answers only requests whose `Host` names this server: a
//!   loopback name (`localhost`, `127.0.0.1`, `::1`), the address it is bound to (any IP
//!   address when bound to `0.0.0.0` or `::`), or a name given with `--allowed-host`. An
//!   `Origin`, when a browser sends one, must be the request's own (its `Host`) or an allowed
//!   name; `null` is refused. Refusals are 403 with the stable codes `forbidden_host` and
//!   `forbidden_origin`.
//! - **Bodies from other sites** ([`require_json`]): a form on any web site may POST
//!   `text/plain`, `application/x-www-form-urlencoded` or `multipart/form-data` without a CORS
//!   preflight. Every POST, PUT and PATCH needs `Content-Type: application/json` (415 otherwise),
//!   which a cross-site page can only send after a preflight this server never grants.
//! - **Slow clients** ([`serve`], [`deadline`]): a connection has `header_timeout` to send its
//!   request headers (idle keep-alive connections included), each request has a deadline for
//!   the rest (its body and its answer; 503 `timeout` after it), and at most `max_connections`
//!   are served at once (the others wait in the listen queue), so slow or idle clients cannot
//!   exhaust the process's descriptors and `/health` answers again once they time out.
//! - **Requests that cannot be read** ([`serve`], `super::refusals`): hyper refuses a malformed
//!   request line or header (400), too many headers or head bytes (431) and too long a target
//!   (414) before any route sees the request, with an answer of its own that has no body. The
//!   connection's IO replaces that answer with the JSON error every other refusal has
//!   (`bad_request`, `headers_too_large`, `uri_too_long`); the router's answers pass untouched.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;

use super::refusals::{self, CountedService, JsonRefusals, RouterCalls};
use super::{Code, Failure};

/// How long clients may take and how many are served at once.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The time a connection has to send a request's headers (and the longest a kept-alive
    /// connection waits idle for its next request).
    pub header_timeout: Duration,
    /// The time a request has, after its headers, for its body and its answer.
    pub request_timeout: Duration,
    /// The time `POST …/ask` has: an answer from a language model may take several calls.
    pub ask_timeout: Duration,
    /// The most connections served at once.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(60),
            ask_timeout: Duration::from_secs(600),
            max_connections: 256,
        }
    }
}

/// An `--allowed-host` entry that is not a host name or address.
#[derive(Debug, thiserror::Error)]
#[error("--allowed-host {given:?}: expected a host name or address, optionally with :port (such as memory.example.com or memory.example.com:8700), or *")]
pub struct AllowedHostError {
    /// The entry as given.
    pub given: String,
}

/// One allowed host: a name (lowercase, IPv6 without brackets), and a port when the entry
/// pinned one.
#[derive(Debug, Clone, PartialEq, Eq)]
struct HostName {
    host: String,
    port: Option<u16>,
}

impl HostName {
    /// `host[:port]` as a `Host` header or an `--allowed-host` entry writes it.
    fn parse(text: &str) -> Option<HostName> {
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        // A bare IPv6 address (`::1`) is not an authority; as an entry it means that address.
        if let Ok(ip) = text.parse::<IpAddr>() {
            return Some(HostName {
                host: ip.to_string(),
                port: None,
            });
        }
        let authority = text.parse::<axum::http::uri::Authority>().ok()?;
        if authority.as_str().contains('@') {
            return None;
        }
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        if host.is_empty() {
            return None;
        }
        // An IP address in its canonical form, so that `[0:0:0:0:0:0:0:1]` is `::1`.
        let host = host.parse::<IpAddr>().map_or(host, |ip| ip.to_string());
        Some(HostName {
            host,
            port: authority.port_u16(),
        })
    }

    /// The port, the scheme's default when none is written.
    fn port_or(&self, default: u16) -> u16 {
        self.port.unwrap_or(default)
    }
}

/// The host names a server answers to (see the module's notes).
#[derive(Debug, Clone)]
pub struct AllowedHosts {
    /// The address the server is bound to.
    bound: IpAddr,
    /// `--allowed-host *`: every host (the bearer token is then the only guard).
    any: bool,
    /// The `--allowed-host` names.
    names: Vec<HostName>,
}

/// The loopback names every server answers to.
const LOOPBACK: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

impl AllowedHosts {
    /// The hosts a server bound to `bound` answers to: the loopback names, `bound` (any IP
    /// address when it is unspecified) and `extra` (`--allowed-host` entries; `*` allows every
    /// host).
    pub fn new(bound: IpAddr, extra: &[String]) -> Result<AllowedHosts, AllowedHostError> {
        let mut any = false;
        let mut names = Vec::new();
        for entry in extra {
            if entry.trim() == "*" {
                any = true;
                continue;
            }
            names.push(HostName::parse(entry).ok_or_else(|| AllowedHostError {
                given: entry.clone(),
            })?);
        }
        Ok(AllowedHosts { bound, any, names })
    }

    /// Whether every host is allowed (`--allowed-host *`).
    pub fn allows_any(&self) -> bool {
        self.any
    }

    /// Whether a request naming `host` is one for this server.
    fn allows(&self, host: &HostName) -> bool {
        if self.any || LOOPBACK.contains(&host.host.as_str()) {
            return true;
        }
        if let Ok(ip) = host.host.parse::<IpAddr>() {
            if ip == self.bound || self.bound.is_unspecified() {
                return true;
            }
        }
        self.listed(host)
    }

    /// Whether `host` is one of the `--allowed-host` names (with its port when one was given).
    fn listed(&self, host: &HostName) -> bool {
        self.names.iter().any(|allowed| {
            allowed.host == host.host && allowed.port.is_none_or(|p| host.port_or(80) == p)
        })
    }
}

/// Refuses a request whose `Host` is not one of this server's names, or whose `Origin` is
/// neither the request's own nor an allowed name (403, `forbidden_host` / `forbidden_origin`).
pub(super) async fn check_host(
    State(allowed): State<Arc<AllowedHosts>>,
    request: Request,
    next: Next,
) -> Response {
    match admitted(&allowed, request.headers()) {
        Ok(()) => next.run(request).await,
        Err(refusal) => refusal.into_response(),
    }
}

/// The Host and Origin rules over a request's headers.
fn admitted(allowed: &AllowedHosts, headers: &HeaderMap) -> Result<(), Failure> {
    let forbidden_host =
        |message: String| Failure::new(StatusCode::FORBIDDEN, Code::ForbiddenHost, message);
    let Some(raw) = headers.get(header::HOST) else {
        return Err(forbidden_host(
            "a request needs a Host header naming this server".into(),
        ));
    };
    let host = raw
        .to_str()
        .ok()
        .and_then(HostName::parse)
        .ok_or_else(|| forbidden_host("the Host header is not a host name".into()))?;
    if !allowed.allows(&host) {
        return Err(forbidden_host(format!(
            "this server does not answer to the host {}: it answers to localhost, its own address and the names given with --allowed-host",
            shown(&host.host)
        )));
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let forbidden_origin =
        |message: String| Failure::new(StatusCode::FORBIDDEN, Code::ForbiddenOrigin, message);
    let origin = origin
        .to_str()
        .ok()
        .and_then(origin_host)
        .ok_or_else(|| {
            forbidden_origin("a request from a web page must come from this server's own origin or an --allowed-host".into())
        })?;
    let same = origin.host == host.host && origin.port_or(80) == host.port_or(80);
    if same || allowed.any || allowed.listed(&origin) {
        return Ok(());
    }
    Err(forbidden_origin(format!(
        "requests from web pages of {} are refused: only this server's own pages and the names given with --allowed-host may call it",
        shown(&origin.host)
    )))
}

/// The host and port of an `Origin` (`http://host[:port]`; `null` and other schemes are none).
fn origin_host(origin: &str) -> Option<HostName> {
    let (scheme, rest) = origin.trim().split_once("://")?;
    let default = match scheme.to_ascii_lowercase().as_str() {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let mut host = HostName::parse(rest)?;
    host.port = Some(host.port_or(default));
    Some(host)
}

/// A client-given name as an error message shows it: at most 100 characters.
fn shown(name: &str) -> String {
    let mut out: String = name.chars().take(100).collect();
    if out.len() < name.len() {
        out.push('…');
    }
    format!("{out:?}")
}

/// Refuses a POST, PUT or PATCH without `Content-Type: application/json` (415): the bodies a
/// page of another site can send without a CORS preflight are not JSON.
pub(super) async fn require_json(request: Request, next: Next) -> Response {
    let writes = [Method::POST, Method::PUT, Method::PATCH].contains(request.method());
    if writes && !is_json(request.headers()) {
        return Failure::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Code::BadRequest,
            "this route takes a JSON body: send `Content-Type: application/json` (and `{}` for no options)",
        )
        .into_response();
    }
    next.run(request).await
}

/// Whether the request's `Content-Type` is `application/json` (parameters such as a charset
/// allowed).
pub(super) fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

/// Answers 503 `timeout` to a request not answered within the deadline in the state (its body
/// read included). Work already handed to a blocking thread finishes there; its answer is
/// dropped.
pub(super) async fn deadline(
    State(limit): State<Duration>,
    request: Request,
    next: Next,
) -> Response {
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => {
            let mut response = Failure::new(
                StatusCode::SERVICE_UNAVAILABLE,
                Code::Timeout,
                format!(
                    "the request was not done within {} s (the server's --request-timeout-secs, --ask-timeout-secs for ask)",
                    limit.as_secs_f64()
                ),
            )
            .into_response();
            response.headers_mut().insert(
                header::CONNECTION,
                header::HeaderValue::from_static("close"),
            );
            response
        }
    }
}

/// Serves `router` on `listener` with `limits` until the process is interrupted (Ctrl-C):
/// HTTP/1.1, each connection with a deadline for its request headers, at most
/// `max_connections` at once. On Ctrl-C it stops accepting and lets the open requests finish
/// (for at most the request timeout).
pub fn serve(
    listener: std::net::TcpListener,
    router: Router,
    limits: Limits,
) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("trajwiki-serve")
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let permits = Arc::new(tokio::sync::Semaphore::new(limits.max_connections.max(1)));
        let graceful = hyper_util::server::graceful::GracefulShutdown::new();
        let mut http = hyper::server::conn::http1::Builder::new();
        http.timer(TokioTimer::new())
            .header_read_timeout(limits.header_timeout)
            .max_headers(refusals::MAX_HEADERS)
            .max_buf_size(refusals::MAX_HEAD_BYTES);
        let stop = tokio::signal::ctrl_c();
        tokio::pin!(stop);
        loop {
            let permit = tokio::select! {
                permit = Arc::clone(&permits).acquire_owned() => permit.map_err(std::io::Error::other)?,
                _ = &mut stop => break,
            };
            let (stream, _peer): (tokio::net::TcpStream, SocketAddr) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    // Out of descriptors, or the client gave up: wait a little, go on.
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                _ = &mut stop => break,
            };
            // What hyper refuses itself is answered as JSON too (see `refusals`).
            let calls = RouterCalls::default();
            let service = CountedService::new(TowerToHyperService::new(router.clone()), calls.clone());
            let io = JsonRefusals::new(TokioIo::new(stream), calls);
            let connection = graceful.watch(http.serve_connection(io, service));
            tokio::spawn(async move {
                // A connection's failure (a client gone, headers too slow) ends that connection.
                let _ = connection.await;
                drop(permit);
            });
        }
        let _ = tokio::time::timeout(limits.request_timeout, graceful.shutdown()).await;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    fn code(allowed: &AllowedHosts, pairs: &[(&'static str, &str)]) -> Option<&'static str> {
        admitted(allowed, &headers(pairs))
            .err()
            .map(|f| f.code.name())
    }

    #[test]
    fn hosts_and_origins() {
        let loopback = AllowedHosts::new("127.0.0.1".parse().unwrap(), &[]).unwrap();
        for ok in [
            "127.0.0.1:8700",
            "localhost:8700",
            "LOCALHOST",
            "[::1]:9",
            "localhost.",
        ] {
            assert_eq!(code(&loopback, &[("host", ok)]), None, "{ok}");
        }
        for bad in [
            "evil.example.com",
            "evil.example.com:8700",
            "10.0.0.1",
            "user@localhost",
        ] {
            assert_eq!(
                code(&loopback, &[("host", bad)]),
                Some("forbidden_host"),
                "{bad}"
            );
        }
        assert_eq!(code(&loopback, &[]), Some("forbidden_host"));
        let same = [
            ("host", "127.0.0.1:8700"),
            ("origin", "http://127.0.0.1:8700"),
        ];
        assert_eq!(code(&loopback, &same), None);
        for bad in [
            "null",
            "http://evil.example.com",
            "http://localhost:3000",
            "file://x",
        ] {
            let pairs = [("host", "127.0.0.1:8700"), ("origin", bad)];
            assert_eq!(code(&loopback, &pairs), Some("forbidden_origin"), "{bad}");
        }

        let named = AllowedHosts::new(
            "0.0.0.0".parse().unwrap(),
            &["Memory.Example.com".into(), "app.example.com:3000".into()],
        )
        .unwrap();
        for ok in [
            "memory.example.com",
            "memory.example.com:8700",
            "192.168.1.5:8700",
        ] {
            assert_eq!(code(&named, &[("host", ok)]), None, "{ok}");
        }
        assert_eq!(
            code(&named, &[("host", "app.example.com:4000")]),
            Some("forbidden_host")
        );
        let from_app = [
            ("host", "memory.example.com"),
            ("origin", "http://app.example.com:3000"),
        ];
        assert_eq!(code(&named, &from_app), None);
        assert!(AllowedHosts::new("127.0.0.1".parse().unwrap(), &["a b".into()]).is_err());
        let any = AllowedHosts::new("127.0.0.1".parse().unwrap(), &["*".into()]).unwrap();
        assert_eq!(code(&any, &[("host", "evil.example.com")]), None);
    }
}
