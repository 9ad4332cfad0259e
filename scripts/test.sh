#!/usr/bin/env bash
# Runs the whole test suite. This is the README's test command, and `.ci/run` calls it.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace --all-targets
cargo test --workspace --doc
