//! `trajwiki serve`: the memory of a store over HTTP, and `trajwiki mcp`: its MCP tools on
//! stdio ([`trajwiki::server`]).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use trajwiki::server::{McpOptions, ServerConfig};
use trajwiki_core::Namespace;
use trajwiki_store::Store;

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
    #[arg(long, env = "TRAJWIKI_MODEL", default_value = trajwiki_embed::DEFAULT_MODEL)]
    model: String,
    /// The largest request body accepted, in bytes.
    #[arg(long, default_value_t = 1 << 20)]
    max_body_bytes: usize,
    /// The bytes of loaded namespace indexes kept between requests (least recently used out).
    #[arg(long, default_value_t = 1 << 30)]
    index_cache_bytes: usize,
    /// Offer the MCP tool `add_messages` at /mcp (the JSON API appends regardless).
    #[arg(long)]
    mcp_allow_write: bool,
    /// The language model `POST …/ask` answers with (an OpenAI-compatible server).
    #[command(flatten)]
    llm: LlmArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct McpArgs {
    /// Store: a directory, or a PostgreSQL URL (postgres://user@host/db).
    #[arg(long, env = "TRAJWIKI_STORE", default_value = "trajwiki-store")]
    store: PathBuf,
    /// The namespace a tool call without one works in (else the store's only namespace).
    #[arg(long)]
    namespace: Option<String>,
    /// Offer the tool `add_messages`, which appends to the memory and builds.
    #[arg(long)]
    allow_write: bool,
    /// Embedding model (the one the namespaces were built with).
    #[arg(long, env = "TRAJWIKI_MODEL", default_value = trajwiki_embed::DEFAULT_MODEL)]
    model: String,
    /// The bytes of loaded namespace indexes kept between calls (least recently used out).
    #[arg(long, default_value_t = 1 << 30)]
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
    let token = args.token.clone().filter(|t| !t.is_empty());
    if args.token.is_some() && token.is_none() {
        return Err(UsageError("--token: the token is empty".into()).into());
    }
    if !ip.is_loopback() && token.is_none() {
        return Err(UsageError(format!(
            "--host {ip} is reachable from other machines: give --token (or TRAJWIKI_TOKEN) so that only those who hold it are served"
        ))
        .into());
    }
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
            namespace: None,
            allow_write: args.mcp_allow_write,
        },
        llm,
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
    trajwiki::server::serve(listener, router)?;
    Ok(())
}
