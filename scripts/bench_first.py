#!/usr/bin/env python3
"""The first search of a namespace over HTTP (the cold load), side by side: each store served by
each binary in turn, a fresh server each time.

    python3 scripts/bench_first.py target/bench-scale/one-5882/store \
        target/bench-scale/one-23528/store --bin A --bin B [--rounds 6]

Per round, store and binary: `trajwiki serve` started on the store, one search sent (the index
is loaded for it), the server stopped. The stores are served in place: a search writes nothing,
and the files are in the page cache after the first round, so what is measured is the load, not
the disk. Reported per store and binary: the medians over rounds of the search's time over HTTP,
the index load the server reports and each of its load stages; then, per store, each binary's
HTTP median over the first binary's. The targets of issue 51: at most 100 ms at 23,528 messages,
at most 1 s at 250,000.
"""

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_live as live  # noqa: E402


def first_search(binary, store, question):
    """(HTTP ms, index load ms, {stage: ms}) of a fresh server's first search."""
    proc, url = live.serve(binary, store)
    try:
        search = f"{url}/v1/namespaces/{live.namespace_of(url)}/search"
        ms, body = live.call(search, {"question": question, "budget": 2700})
    finally:
        proc.terminate()
        proc.wait()
    timings = body["timings"]
    return ms, timings["index_load"], timings.get("index_load_stages", {})


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stores", nargs="+")
    ap.add_argument("--bin", action="append", required=True)
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args()
    question = live.questions()[0]
    results = {}
    for _ in range(args.rounds):
        for store in args.stores:
            for binary in args.bin:
                ms, load, stages = first_search(binary, store, question)
                r = results.setdefault((store, binary), {"http": [], "load": [], "stages": {}})
                r["http"].append(ms)
                r["load"].append(load)
                for stage, v in stages.items():
                    r["stages"].setdefault(stage, []).append(v)
    print("| store | binary | first search (HTTP) | index load | load stages (medians, ms) |")
    print("|---|---|---:|---:|---|")
    for (store, binary), r in results.items():
        stages = ", ".join(
            f"{k} {statistics.median(v):.1f}" for k, v in sorted(r["stages"].items())
        )
        print(
            f"| {Path(store).parent.name} | {binary} | {statistics.median(r['http']):.1f} ms "
            f"| {statistics.median(r['load']):.1f} ms | {stages} |"
        )
    for store in args.stores:
        base = statistics.median(results[(store, args.bin[0])]["http"])
        for binary in args.bin[1:]:
            ratio = statistics.median(results[(store, binary)]["http"]) / base
            print(f"{Path(store).parent.name}: {binary} over {args.bin[0]}: {ratio:.2f}")


if __name__ == "__main__":
    main()
