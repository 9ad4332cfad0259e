//! `trajwiki serve`: the memory of a store over HTTP, and `trajwiki mcp`: its MCP tools on
//! stdio ([`trajwiki::server`]).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use trajwiki::server::{AllowedHosts, Limits, McpOptions, ServerConfig};
use trajwiki::store::Store;
use trajwiki_core::Namespace;

use super::ask::LlmArgs;
use super::device::scoring;
use super::memory::load_embedder_on;
use super::{Global, UsageError};

#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// Store: a directory, or a PostgreSQL URL (postgres://user@host/db).
    #[arg(long, env = "TRAJWIKI_STORE", default_value = "trajwiki-store")]
    store: PathBuf,
    /// The address to listen on. Anything but a loopback address needs --token.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// The port (0: any free port; the one chosen is printed).
    #[arg(long, default_value_t = 8700)]
    port: u16,
    /// A bearer token the API routes require (`Authorization: Bearer <token>`).
    #[arg(long, env = "TRAJWIKI_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Embedding model (the one the namespaces were built with).
    #[arg(long, env = "TRAJWIKI_MODEL", default_value = trajwiki::embed::DEFAULT_MODEL)]
    model: String,
    /// The largest request body accepted, in bytes.
    #[arg(long, default_value_t = 1 << 20)]
    max_body_bytes: usize,
    /// The bytes of loaded namespace indexes kept between requests (S3-FIFO eviction: see `trajwiki_engine::cache`).
    #[arg(long, default_value_t = 2 << 30)]
    index_cache_bytes: usize,
    /// Offer the MCP tool `add_messages` at /mcp (the JSON API appends regardless).
    #[arg(long)]
    mcp_allow_write: bool,
    /// Scope the MCP tools at /mcp to this namespace: calls naming another find nothing.
    #[arg(long)]
    mcp_namespace: Option<String>,
    /// A host name (optionally host:port) requests may carry in `Host` and `Origin`, beside
    /// localhost and the bound address; repeatable. `*` allows every host (only with --token).
    #[arg(long = "allowed-host", value_name = "HOST")]
    allowed_hosts: Vec<String>,
    /// Seconds a connection has to send a request's headers (idle kept-alive connections are
    /// closed after as long).
    #[arg(long, default_value_t = 10.0)]
    header_timeout_secs: f64,
    /// Seconds a request has, after its headers, for its body and its answer (503 after).
    #[arg(long, default_value_t = 60.0)]
    request_timeout_secs: f64,
    /// Seconds `POST …/ask` has (an answer may take several language model calls).
    #[arg(long, default_value_t = 600.0)]
    ask_timeout_secs: f64,
    /// The most connections served at once; more wait to be accepted.
    #[arg(long, default_value_t = 256)]
    max_connections: usize,
    /// The language model `POST …/ask` answers with (an OpenAI-compatible server).
    #[command(flatten)]
    llm: LlmArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct McpArgs {
    /// Store: a directory, or a PostgreSQL URL (postgres://user@host/db).
    #[arg(long, env = "TRAJWIKI_STORE", default_value = "trajwiki-store")]
    store: PathBuf,
    /// Serve this namespace alone: a tool call without one works in it, a call naming another
    /// finds nothing (without it: every namespace, a call without one in the store's only one).
    #[arg(long)]
    namespace: Option<String>,
    /// Offer the tool `add_messages`, which appends to the memory and builds.
    #[arg(long)]
    allow_write: bool,
    /// Embedding model (the one the namespaces were built with).
    #[arg(long, env = "TRAJWIKI_MODEL", default_value = trajwiki::embed::DEFAULT_MODEL)]
    model: String,
    /// The bytes of loaded namespace indexes kept between calls (S3-FIFO eviction: see `trajwiki_engine::cache`).
    #[arg(long, default_value_t = 2 << 30)]
    index_cache_bytes: usize,
}

/// Serves the MCP tools on stdin and stdout until the client closes them.
pub(crate) fn mcp(args: &McpArgs, global: Global) -> anyhow::Result<()> {
    let namespace = args
        .namespace
        .as_deref()
        .map(Namespace::new)
        .transpose()
        .map_err(|e| UsageError(format!("--namespace: {e}")))?;
    super::check_store_path(&args.store)?;
    drop(Store::open_existing(&args.store)?);
    let backend = scoring(global.device)?;
    let model = load_embedder_on(&args.model, global)?;
    trajwiki::server::serve_mcp_stdio(ServerConfig {
        store: args.store.clone(),
        embedder: Arc::from(model.embedder),
        backend,
        token: None,
        max_body_bytes: 1 << 20,
        index_cache_bytes: args.index_cache_bytes,
        mcp: McpOptions {
            namespace,
            allow_write: args.allow_write,
        },
        llm: None,
        // Not over HTTP: no host is ever checked, no connection timed.
        allowed_hosts: AllowedHosts::new(IpAddr::from([127, 0, 0, 1]), &[])?,
        limits: Limits::default(),
    })?;
    Ok(())
}

pub(crate) fn run(args: &ServeArgs, global: Global) -> anyhow::Result<()> {
    let ip: IpAddr = args.host.parse().map_err(|_| {
        UsageError(format!(
            "--host {:?}: expected an IP address such as 127.0.0.1 or ::1",
            args.host
        ))
    })?;
    let token = args
        .token
        .as_deref()
        .map(|t| checked_token(t, ip))
        .transpose()?;
    if !ip.is_loopback() && token.is_none() {
        return Err(UsageError(format!(
            "--host {ip} is reachable from other machines: give --token (or TRAJWIKI_TOKEN) so that only those who hold it are served"
        ))
        .into());
    }
    let allowed_hosts =
        AllowedHosts::new(ip, &args.allowed_hosts).map_err(|e| UsageError(e.to_string()))?;
    if allowed_hosts.allows_any() && token.is_none() {
        return Err(UsageError(
            "--allowed-host '*' turns off the Host check against DNS rebinding: give --token too, so that a web page cannot use the server"
                .into(),
        )
        .into());
    }
    let limits = Limits {
        header_timeout: seconds("--header-timeout-secs", args.header_timeout_secs)?,
        request_timeout: seconds("--request-timeout-secs", args.request_timeout_secs)?,
        ask_timeout: seconds("--ask-timeout-secs", args.ask_timeout_secs)?,
        max_connections: args.max_connections,
    };
    if limits.max_connections == 0 {
        return Err(UsageError("--max-connections: must be at least 1".into()).into());
    }
    let mcp_namespace = args
        .mcp_namespace
        .as_deref()
        .map(Namespace::new)
        .transpose()
        .map_err(|e| UsageError(format!("--mcp-namespace: {e}")))?;
    let llm = args.llm.config()?;
    // The store is checked (and brought to the current schema) before the model is loaded.
    super::check_store_path(&args.store)?;
    drop(Store::open_existing(&args.store)?);
    let backend = scoring(global.device)?;
    let model = load_embedder_on(&args.model, global)?;
    let router = trajwiki::server::router(ServerConfig {
        store: args.store.clone(),
        embedder: Arc::from(model.embedder),
        backend,
        token,
        max_body_bytes: args.max_body_bytes,
        index_cache_bytes: args.index_cache_bytes,
        mcp: McpOptions {
            namespace: mcp_namespace,
            allow_write: args.mcp_allow_write,
        },
        llm,
        allowed_hosts,
        limits,
    })?;
    let addr = SocketAddr::new(ip, args.port);
    let listener = std::net::TcpListener::bind(addr)
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
    let bound = listener.local_addr()?;
    // Always said, even with --quiet: a caller that asked for port 0 needs it.
    eprintln!(
        "trajwiki serving {} on http://{bound}",
        args.store.display()
    );
    trajwiki::server::serve(listener, router, limits)?;
    Ok(())
}

/// The shortest token a server reachable from other machines takes.
const MIN_REMOTE_TOKEN: usize = 16;

/// The fewest different characters a token of a server reachable from other machines holds.
/// It refuses what is guessed at once (one character, or a few, over and over) and almost
/// never a random token: 16 random hex digits hold fewer than 5 different ones once in about
/// 2.5 million draws (fewer than 8 once in 90, which is why the bar is not 8), 32 (`openssl
/// rand -hex 16`) once in 10^16.
const MIN_REMOTE_DISTINCT: usize = 5;

/// `token` when it can guard a server bound to `ip`: not empty, no whitespace (a header's
/// surrounding spaces are not kept, so such a token could never match), and on an address
/// other machines reach at least [`MIN_REMOTE_TOKEN`] characters, of which at least
/// [`MIN_REMOTE_DISTINCT`] differ.
fn checked_token(token: &str, ip: IpAddr) -> Result<String, UsageError> {
    if token.is_empty() {
        return Err(UsageError("--token: the token is empty".into()));
    }
    if token.chars().any(char::is_whitespace) {
        return Err(UsageError(
            "--token: the token holds whitespace; give one without (such as 32 random hex digits)"
                .into(),
        ));
    }
    let length = token.chars().count();
    if !ip.is_loopback() && length < MIN_REMOTE_TOKEN {
        return Err(UsageError(format!(
            "--token: {length} characters is too short for --host {ip}, which other machines reach; give at least {MIN_REMOTE_TOKEN} (such as `openssl rand -hex 16`)"
        )));
    }
    let distinct = token
        .chars()
        .collect::<std::collections::HashSet<_>>()
        .len();
    if !ip.is_loopback() && distinct < MIN_REMOTE_DISTINCT {
        let characters = if distinct == 1 {
            "character"
        } else {
            "characters"
        };
        return Err(UsageError(format!(
            "--token: the token holds only {distinct} different {characters}, over and over, which is guessed at once, and --host {ip} is reached by other machines; give one of at least {MIN_REMOTE_DISTINCT} different characters, random ones (such as `openssl rand -hex 16`)"
        )));
    }
    Ok(token.to_string())
}

/// A duration flag: a positive, finite number of seconds.
fn seconds(flag: &str, value: f64) -> Result<Duration, UsageError> {
    Duration::try_from_secs_f64(value)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            UsageError(format!(
                "{flag} {value}: expected a positive number of seconds"
            ))
        })
}
