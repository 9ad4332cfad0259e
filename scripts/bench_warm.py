#!/usr/bin/env python3
"""Warm searches over HTTP, side by side: each store served by each binary, in turn.

Each of LoCoMo's first `--questions` questions is searched twice in a row and the second search
timed (the namespace's index loaded and the question's own work warm; no write in between), over
`--rounds` passes. Per store and binary: p50, p90 and p95 over HTTP and the stage medians the
server reports; then, per binary, the ratio of each store's p50 and p95 to the first store's (the
history's growth: `one-23528` over `one-5882` is the 4x / 1x of issue 51) and, per store, each
binary's p50 and p95 over the first binary's. The stores are served in place: nothing is
written to them.

    python3 scripts/bench_warm.py target/bench-scale/one-5882/store \
        target/bench-scale/one-23528/store --bin A --bin B [--rounds 3] [--alternations 2]
"""

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_live as live  # noqa: E402

STAGES = ["scan", "route", "score", "select", "expand", "messages", "rank"]


def pct(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def measure(binary, store, qs, rounds):
    proc, url = live.serve(binary, store)
    try:
        search = f"{url}/v1/namespaces/{live.namespace_of(url)}/search"
        live.call(search, {"question": qs[0], "budget": 2700})  # the cold load
        times, stages = [], {k: [] for k in STAGES}
        for _ in range(rounds):
            for q in qs:
                live.call(search, {"question": q, "budget": 2700})
                ms, body = live.call(search, {"question": q, "budget": 2700})
                times.append(ms)
                for k in STAGES:
                    stages[k].append(body.get("timings", {}).get("stages", {}).get(k, 0.0))
        return times, stages
    finally:
        proc.terminate()
        proc.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stores", nargs="+")
    ap.add_argument("--bin", action="append", required=True)
    ap.add_argument("--questions", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--alternations", type=int, default=1,
                    help="times each binary serves each store, alternated (the samples pooled)")
    args = ap.parse_args()
    qs = live.questions()[: args.questions]
    got = {(b, s): ([], {k: [] for k in STAGES}) for b in args.bin for s in args.stores}
    for _ in range(args.alternations):
        for store in args.stores:
            for binary in args.bin:
                times, stages = measure(binary, store, qs, args.rounds)
                got[(binary, store)][0].extend(times)
                for k in STAGES:
                    got[(binary, store)][1][k].extend(stages[k])

    def name(store):
        p = Path(store)
        return p.parent.name if p.name == "store" else p.name

    print("| store | binary | p50 | p90 | p95 | stage medians (ms) |")
    print("|---|---|---:|---:|---:|---|")
    for store in args.stores:
        for binary in args.bin:
            t, st = got[(binary, store)]
            stages = ", ".join(f"{k} {statistics.median(st[k]):.2f}" for k in STAGES)
            print(f"| {name(store)} | {binary} | {statistics.median(t):.2f} ms | {pct(t, 90):.2f} ms"
                  f" | {pct(t, 95):.2f} ms | {stages} |")
    first = args.stores[0]
    for binary in args.bin:
        base = got[(binary, first)][0]
        for store in args.stores[1:]:
            t = got[(binary, store)][0]
            print(f"{binary}: {name(store)} over {name(first)}: p50 "
                  f"{statistics.median(t) / statistics.median(base):.2f}, p95 "
                  f"{pct(t, 95) / pct(base, 95):.2f}")
    for store in args.stores:
        base = got[(args.bin[0], store)][0]
        for binary in args.bin[1:]:
            t = got[(binary, store)][0]
            print(f"{name(store)}: {binary} over {args.bin[0]}: p50 "
                  f"{statistics.median(t) / statistics.median(base):.2f}, p95 "
                  f"{pct(t, 95) / pct(base, 95):.2f}")


if __name__ == "__main__":
    main()
