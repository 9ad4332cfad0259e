#!/usr/bin/env bash
# The web viewer's browser test: headless Chromium driven by Selenium through /view of a running
# `trajwiki serve` (tests/browser). Installs Debian's chromium and chromium-driver when absent
# and Selenium into a virtual environment under target/. `.ci/run` calls this.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium chromium-driver
fi
venv=target/browser-venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" 2>/dev/null || {
    rm -rf "$venv"
    python3 -m pip install --quiet --user virtualenv
    python3 -m virtualenv --quiet "$venv"
  }
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "selenium>=4.20,<5" pytest
# The binary as `scripts/test.sh` built it (its units already built in CI; see there).
cargo test --workspace --all-targets --no-run --quiet
TRAJWIKI_REQUIRE_BROWSER=1 TRAJWIKI_BIN="$PWD/target/debug/trajwiki" "$venv/bin/python" -m pytest tests/browser -q
