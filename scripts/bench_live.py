#!/usr/bin/env python3
"""An agent's turn against a long history (issue 38): append what was said, then search.

    python3 scripts/bench_live.py target/bench-scale/one-5882 target/bench-scale/one-23528 \
        [--turns 30] [--bin B]

Each store (made by `scripts/bench_scale.py one --messages N`, lexical `hashing` model) is
copied to a scratch folder (the appends must not change it) and served by `trajwiki serve`.
Then, per turn: one message appended to the namespace with `build: true` (a new session after
the history's, as a live conversation goes on), the same question searched right after it, and
searched once more (warm: nothing changed in between); --pause waits between the calls, as an
agent thinks between its turns (work a server does off the request path then has time to end). Reported per store: the first search
(the cold load), p50 and p95 of each step, and the ratio the target is about, search right after
an append over a warm search (p50 and p95). The questions are LoCoMo's, one per turn, in turn.
Results are printed as a table and written as JSON to --out.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo7.json"
BIN = ROOT / "target" / "release" / "trajwiki"


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def call(url, body):
    """(milliseconds, parsed body); exits naming the call when it fails."""
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="POST")
    req.add_header("Content-Type", "application/json")
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            payload = r.read()
    except urllib.error.HTTPError as e:
        sys.exit(f"POST {url} answered {e.code}: {e.read()[:500]!r}")
    return (time.perf_counter() - t0) * 1000, json.loads(payload)


def serve(binary, store):
    proc = subprocess.Popen(
        [str(binary), "serve", "--store", str(store), "--port", "0", "--model", "hashing", "-q"],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    for line in proc.stderr:
        if "http://" in line:
            url = line[line.index("http://"):].strip()
            threading.Thread(target=lambda: proc.stderr.read(), daemon=True).start()
            return proc, url
    sys.exit(f"the server over {store} did not start")


def namespace_of(url):
    with urllib.request.urlopen(f"{url}/v1/namespaces", timeout=60) as r:
        listed = json.loads(r.read())
    names = [n["namespace"] if isinstance(n, dict) else n for n in listed.get("namespaces", listed)]
    if len(names) != 1:
        sys.exit(f"{url}: expected one namespace, found {names}")
    return names[0]


def questions():
    qs = []
    for conv in json.loads(LOCOMO.read_text()):
        qs += [q["question"] for q in conv["qa"] if q.get("category") != 5]
    return qs


def measure(binary, store, turns, qs, pause):
    scratch = Path(tempfile.mkdtemp(prefix="trajwiki-bench-live-"))
    try:
        copy = scratch / "store"
        shutil.copytree(store, copy)
        # The copy written out first: the cold load measures the load, not the disk's writeback.
        os.sync()
        proc, url = serve(binary, copy)
        try:
            ns = namespace_of(url)
            search = f"{url}/v1/namespaces/{ns}/search"
            append = f"{url}/v1/namespaces/{ns}/messages"
            cold, first = call(search, {"question": qs[0], "budget": 2700})
            steps = {"append": [], "after": [], "warm": []}
            for t in range(turns):
                q = {"question": qs[(t + 1) % len(qs)], "budget": 2700}
                msg = {"session": 1_000_000, "speaker": ("Ann", "Bob")[t % 2],
                       "text": f"Turn {t}: I planted {t + 3} tulips by the lake today.",
                       "timestamp": "2031-01-01T10:00:00"}
                steps["append"].append(call(append, {"messages": [msg], "build": True})[0])
                time.sleep(pause)
                steps["after"].append(call(search, q)[0])
                time.sleep(pause)
                steps["warm"].append(call(search, q)[0])
                time.sleep(pause)
        finally:
            proc.terminate()
            proc.wait()
        return {
            "store": str(store),
            "messages": first.get("stats", {}).get("messages"),
            "cold_first_search_ms": cold,
            **{f"{k}_p50_ms": statistics.median(v) for k, v in steps.items()},
            **{f"{k}_p95_ms": pct(v, 95) for k, v in steps.items()},
            "after_over_warm_p50": statistics.median(steps["after"]) / statistics.median(steps["warm"]),
            "after_over_warm_p95": pct(steps["after"], 95) / pct(steps["warm"], 95),
        }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stores", nargs="+")
    ap.add_argument("--turns", type=int, default=30)
    ap.add_argument("--pause", type=float, default=0.0,
                    help="seconds between calls (an agent thinks between its turns)")
    ap.add_argument("--bin", default=str(BIN))
    ap.add_argument("--out", default=str(ROOT / "target" / "bench-live.json"))
    args = ap.parse_args()
    qs = questions()
    rows = [measure(args.bin, s, args.turns, qs, args.pause) for s in args.stores]
    print("| store | cold first search | append p50 | after p50 / p95 | warm p50 / p95 | after / warm p50, p95 |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        p = Path(r["store"])
        name = p.parent.name if p.name == "store" else p.name
        print(f"| {name} | {r['cold_first_search_ms']:.0f} ms | {r['append_p50_ms']:.1f} ms"
              f" | {r['after_p50_ms']:.1f} / {r['after_p95_ms']:.1f} ms"
              f" | {r['warm_p50_ms']:.1f} / {r['warm_p95_ms']:.1f} ms"
              f" | {r['after_over_warm_p50']:.2f}, {r['after_over_warm_p95']:.2f} |")
    Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
