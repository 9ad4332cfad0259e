#!/usr/bin/env bash
# The approximate index (faiss HNSW, `--features faiss`): its recall against the exact scan
# (recall@10 >= 0.95) and the store round trip through it. faiss is built from source, which
# needs cmake and a BLAS; they are installed here when absent (Debian packages).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cmake >/dev/null || ! ldconfig -p | grep -q libopenblas; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq cmake libopenblas-dev
fi
cargo clippy -p trajwiki-ann --features faiss --all-targets -- -D warnings
cargo test -p trajwiki-ann --features faiss -- --nocapture
cargo test --features faiss --test vectors
