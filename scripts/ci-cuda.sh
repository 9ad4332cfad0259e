#!/usr/bin/env bash
# CI for the CUDA path on a machine without a GPU: fetches NVRTC and the CUDA headers from the
# PyPI wheels, lints the crate with the `cuda` feature, and compiles every kernel to PTX for
# sm_80 and sm_90 through the runtime's own NVRTC path (failing on any error or warning).
# `.ci/run` calls this after the main checks.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/fetch-nvrtc.sh)"
export TRAJWIKI_NVRTC_LIB_DIR TRAJWIKI_CUDA_INCLUDE
export LD_LIBRARY_PATH="$TRAJWIKI_NVRTC_LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cargo clippy -p trajwiki-cuda --features cuda --all-targets -- -D warnings
TRAJWIKI_REQUIRE_NVRTC=1 cargo test -p trajwiki-cuda --features cuda --test ptx -- --nocapture
# The twin tests build and run too; without a GPU their CUDA halves skip with a message.
cargo test -p trajwiki-cuda --features cuda --test twins --test qwen3_twin --test bert_twin
# The root crate with the GPU backend compiled in (`--device cuda|auto`).
cargo clippy --all-targets --features cuda -- -D warnings
# The Python extension with it (`device="cuda"|"auto"`).
cargo clippy -p trajwiki-py --features cuda -- -D warnings
