#!/usr/bin/env python3
"""What an append costs the wiki pages of a long conversation's speakers, binaries side by side.

    python3 scripts/bench_pages.py target/bench-scale/one-23528/store --bin A --bin B \
        [--turns 30] [--rounds 3] [--speakers Caroline,Melanie]

Each store (made by `scripts/bench_scale.py one --messages N`, lexical `hashing` model) is
copied to a scratch folder and served by each binary in turn (alternating, `--rounds` times).
Then `--turns` messages are appended one at a time with `build: true`, in a new session after
the history's, the speakers alternating between two of the conversation's: every other append
closes an exchange, whose trajectory joins those speakers' pages, which are rendered again.
Reported per store and binary: the p50 of the closing appends after the first (wall time over
HTTP and the build's `wiki_ms`), the p50 of the others, and each binary's closing-append p50
over the first binary's. The first append of a run reads the fold and is left out. The first
closing append is reported apart (median over rounds): with `--speakers` new to the namespace
(say `Ann,Bob`) it is the one whose build adds them to the namespace's speakers.
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_live  # noqa: E402


def measure(binary, store, turns, speakers):
    scratch = Path(tempfile.mkdtemp(prefix="trajwiki-bench-pages-"))
    try:
        copy = scratch / "store"
        shutil.copytree(store, copy)
        # The copy written out first: the cold load measures the load, not the disk's writeback.
        os.sync()
        proc, url = bench_live.serve(binary, copy)
        try:
            ns = bench_live.namespace_of(url)
            append = f"{url}/v1/namespaces/{ns}/messages"
            walls, wikis = [], []
            for t in range(turns):
                msg = {"session": 1_000_000, "speaker": speakers[t % 2],
                       "text": f"Turn {t}: I planted {t + 3} tulips by the lake today with my kids.",
                       "timestamp": "2031-01-01T10:00:00"}
                ms, body = bench_live.call(append, {"messages": [msg], "build": True})
                walls.append(ms)
                wikis.append(body.get("built", {}).get("wiki_ms", float("nan")))
        finally:
            proc.terminate()
            proc.wait()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    closing = range(2, turns, 2)
    return {
        "first_closing_ms": walls[2],
        "first_closing_wiki_ms": wikis[2],
        "closing_ms": statistics.median(walls[i] for i in closing),
        "closing_wiki_ms": statistics.median(wikis[i] for i in closing),
        "other_ms": statistics.median(walls[i] for i in range(1, turns, 2)),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stores", nargs="+")
    ap.add_argument("--bin", action="append", required=True,
                    help="a trajwiki binary (give two or more to compare them)")
    ap.add_argument("--turns", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--speakers", default="Caroline,Melanie")
    args = ap.parse_args()
    speakers = args.speakers.split(",")
    if len(speakers) != 2 or args.turns < 4:
        sys.exit("--speakers takes two names, --turns at least 4")
    print("| store | binary | first closing append (wiki_ms) | closing append p50 | its wiki_ms p50 "
          "| other appends p50 | closing / first binary's |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for store in args.stores:
        runs = {b: [] for b in args.bin}
        for _ in range(args.rounds):
            for b in args.bin:
                runs[b].append(measure(b, store, args.turns, speakers))
        base = statistics.median(r["closing_ms"] for r in runs[args.bin[0]])
        for b in args.bin:
            closing = statistics.median(r["closing_ms"] for r in runs[b])
            wiki = statistics.median(r["closing_wiki_ms"] for r in runs[b])
            other = statistics.median(r["other_ms"] for r in runs[b])
            each = ", ".join(f"{r['closing_ms']:.0f}" for r in runs[b])
            first = statistics.median(r["first_closing_ms"] for r in runs[b])
            first_wiki = statistics.median(r["first_closing_wiki_ms"] for r in runs[b])
            print(f"| {Path(store).parent.name} | {b} | {first:.0f} ms ({first_wiki:.0f} ms) | "
                  f"{closing:.1f} ms ({each}) | {wiki:.1f} ms | {other:.1f} ms | {closing / base:.2f} |")


if __name__ == "__main__":
    main()
