//! A PostgreSQL server for tests: Debian's `postgresql` binaries (`initdb`, `postgres`,
//! `createdb`), a cluster in a temporary folder, a loopback port, one database per test. The
//! server is started once per test process, by a shell that stops it and removes its folder when
//! the process ends (the shell's stdin is a pipe from this process, which reads EOF then): no
//! test leaves a server behind, even one that panics.
//!
//! `TRAJWIKI_TEST_POSTGRES=postgres://…` uses that server instead (databases are made there).
//! Where neither is possible, [`server`] says why and the PostgreSQL tests skip, unless
//! `TRAJWIKI_REQUIRE_POSTGRES=1` (CI), which makes that a failure.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// A running server: where to reach it.
pub struct Server {
    /// `postgres://user@127.0.0.1:port`, without a database.
    pub base: String,
    bin: Option<PathBuf>,
    port: u16,
    _shell: Option<Mutex<Child>>,
}

fn bin_dir() -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|b| b.join("initdb").is_file())
        .collect();
    found.sort();
    found.pop()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// `cmd` as the `postgres` user when this process is root (PostgreSQL refuses to run as root).
fn as_server_user(bin: &Path, tool: &str, root: bool) -> Command {
    if root {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bin.join(tool));
        c
    } else {
        Command::new(bin.join(tool))
    }
}

fn start() -> Result<Server, String> {
    if let Ok(url) = std::env::var("TRAJWIKI_TEST_POSTGRES") {
        return Ok(Server {
            base: url.trim_end_matches('/').to_string(),
            bin: bin_dir(),
            port: 0,
            _shell: None,
        });
    }
    let bin = bin_dir()
        .ok_or("no PostgreSQL binaries under /usr/lib/postgresql (apt-get install postgresql)")?;
    let root = is_root();
    let dir = std::env::temp_dir().join(format!(
        "trajwiki-pg-{}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if root {
        let ok = Command::new("chown")
            .args(["postgres:postgres"])
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return Err("cannot hand the cluster folder to the postgres user".into());
        }
    }
    let data = dir.join("data");
    let out = as_server_user(&bin, "initdb", root)
        .arg("-D")
        .arg(&data)
        .args([
            "-A",
            "trust",
            "-U",
            "trajwiki",
            "--no-sync",
            "-E",
            "UTF8",
            "--locale=C",
        ])
        .stdout(Stdio::null())
        .output()
        .map_err(|e| format!("initdb: {e}"))?;
    if !out.status.success() {
        return Err(format!("initdb: {}", String::from_utf8_lossy(&out.stderr)));
    }
    let port = free_port();
    let postgres = bin.join("postgres");
    let run = if root {
        format!("runuser -u postgres -- {}", postgres.display())
    } else {
        postgres.display().to_string()
    };
    // The shell starts the server, says so, waits for EOF on its stdin (this process ending,
    // or dropping it), then stops the server (fast shutdown: SIGINT to the postmaster, whose pid
    // the cluster records; `runuser` would not pass it on) and removes the cluster.
    let script = format!(
        "{run} -D '{data}' -p {port} -k '{dir}' -c listen_addresses=127.0.0.1 -c fsync=off \
         -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 \
         > '{dir}/log' 2>&1 & pid=$!; \
         for i in $(seq 1 300); do \
           if {ready} -h 127.0.0.1 -p {port} -q; then break; fi; sleep 0.1; done; \
         echo started; read _; \
         kill -INT \"$(head -n 1 '{data}/postmaster.pid')\"; wait $pid; rm -rf '{dir}'",
        data = data.display(),
        dir = dir.display(),
        ready = bin.join("pg_isready").display(),
    );
    let mut shell = Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("sh: {e}"))?;
    let mut line = String::new();
    BufReader::new(shell.stdout.take().expect("piped"))
        .read_line(&mut line)
        .map_err(|e| format!("starting the server: {e}"))?;
    let ready = Command::new(bin.join("pg_isready"))
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-q"])
        .status()
        .is_ok_and(|s| s.success());
    if !ready {
        let log = std::fs::read_to_string(dir.join("log")).unwrap_or_default();
        return Err(format!("the server did not start: {log}"));
    }
    Ok(Server {
        base: format!("postgres://trajwiki@127.0.0.1:{port}"),
        bin: Some(bin),
        port,
        _shell: Some(Mutex::new(shell)),
    })
}

/// The test server, started on first use; `None` (after saying why) where none can run.
pub fn server() -> Option<&'static Server> {
    static SERVER: OnceLock<Result<Server, String>> = OnceLock::new();
    match SERVER.get_or_init(start) {
        Ok(s) => Some(s),
        Err(why) => {
            assert!(
                std::env::var("TRAJWIKI_REQUIRE_POSTGRES").as_deref() != Ok("1"),
                "TRAJWIKI_REQUIRE_POSTGRES=1 and no PostgreSQL server: {why}"
            );
            eprintln!("skipping a PostgreSQL test: {why}");
            None
        }
    }
}

impl Server {
    /// A new, empty database: its URL.
    pub fn database(&self) -> String {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "t{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let (host, port) = host_port(&self.base);
        let createdb = self
            .bin
            .as_ref()
            .map_or(PathBuf::from("createdb"), |b| b.join("createdb"));
        let out = Command::new(createdb)
            .args(["-h", &host, "-p", &port, "-U", &user(&self.base), &name])
            .output()
            .expect("createdb runs");
        assert!(
            out.status.success(),
            "createdb {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        format!("{}/{name}", self.base)
    }
}

fn host_port(base: &str) -> (String, String) {
    let authority = base.split("://").nth(1).unwrap_or(base);
    let host_port = authority.rsplit('@').next().unwrap_or(authority);
    match host_port.rsplit_once(':') {
        Some((h, p)) => (h.to_string(), p.to_string()),
        None => (host_port.to_string(), "5432".to_string()),
    }
}

fn user(base: &str) -> String {
    let authority = base.split("://").nth(1).unwrap_or(base);
    match authority.split_once('@') {
        Some((u, _)) => u.split(':').next().unwrap_or(u).to_string(),
        None => std::env::var("USER").unwrap_or_else(|_| "postgres".into()),
    }
}
