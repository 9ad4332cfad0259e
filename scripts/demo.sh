#!/usr/bin/env bash
# The main job on the embedded defaults (offline, no API keys): build trajwiki, ingest the bundled
# demo conversation (and LoCoMo and the agent runs when ../shared/data is present), verify the
# store and print its statistics.
set -euo pipefail
cd "$(dirname "$0")/.."
store="${TRAJWIKI_STORE:-target/demo-store}"
cargo build --release --quiet
tw=target/release/trajwiki
$tw ingest --store "$store" tests/fixtures/demo.jsonl
if [ -f ../shared/data/locomo/locomo7.json ]; then
  $tw ingest --store "$store" ../shared/data/locomo/locomo7.json
  $tw ingest --store "$store" ../shared/data/runs/*.jsonl
fi
$tw check --store "$store"
$tw stats --store "$store"
$tw show --store "$store" --namespace demo S1:3
