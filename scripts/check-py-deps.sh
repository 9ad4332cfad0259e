#!/usr/bin/env bash
# The Python extension links the engine and the crates under it, not the server stack or the
# plotting of the root crate: no axum, hyper, rmcp or plotters in its tree, and tokio only as the
# runtime inside the store's PostgreSQL client (postgres, tokio-postgres). Exits 1 naming what
# is linked otherwise; names the shared crates a wheel's build would compile again (a note).
# `scripts/test.sh` runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
tree=$(cargo tree -p trajwiki-py -e normal --prefix none)
found=$(grep -E '^(axum|hyper|hyper-util|rmcp|plotters)( |$)' <<<"$tree" | sed 's/ (\*)$//' | sort -u || true)
if [ -n "$found" ]; then
  echo "the Python extension links the server stack or plotting:" >&2
  echo "$found" >&2
  exit 1
fi
# Who depends on tokio directly: only the PostgreSQL client, and trajwiki-py's own entry, which
# only asks for the workspace's features (build sharing, see python/Cargo.toml): its code names
# no tokio.
if grep -rnw tokio python/rust; then
  echo "the Python extension's code uses tokio" >&2
  exit 1
fi
parents=$(cargo tree -p trajwiki-py -e normal -i tokio --depth 1 --prefix none 2>/dev/null | tail -n +2 | cut -d' ' -f1 | sort -u || true)
others=$(grep -vE '^(postgres|tokio-postgres|tokio-util|trajwiki-py)$' <<<"$parents" || true)
if [ -n "$others" ]; then
  echo "the Python extension links tokio through something else than the PostgreSQL client:" >&2
  echo "$others" >&2
  exit 1
fi
echo "trajwiki-py links no axum, hyper, rmcp or plotters; tokio only through postgres"
# Build sharing (python/Cargo.toml): the shared crates' features as the workspace's test build
# resolves them, so that the wheel's build reuses its units. A difference only costs build time
# (those crates and everything above them compiled again for the wheel): named, not fatal.
features() { cargo tree -f '{p} {f}' --prefix none "$@" 2>/dev/null | sed 's/ (\*)$//' | sort -u; }
python3 - <(features --workspace -e normal,build,dev) <(features -p trajwiki-py -e normal,build --features trajwiki-py/extension-module) <<'PY'
import sys
def load(path):
    seen = {}
    for line in open(path):
        parts = line.split()
        if len(parts) >= 2:
            seen.setdefault(" ".join(parts[:2]), set()).add(line.strip())
    return seen
workspace, wheel = load(sys.argv[1]), load(sys.argv[2])
by_design = ("pyo3 ", "pyo3-ffi ", "pyo3-build-config ", "trajwiki-py ")
differ = sorted(k for k, v in wheel.items()
                if not k.startswith(by_design) and not v <= workspace.get(k, set()))
if differ:
    print("note: the wheel's build compiles these again (features unlike the workspace's; see "
          "python/Cargo.toml): " + ", ".join(differ), file=sys.stderr)
PY
