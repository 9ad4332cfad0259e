#!/usr/bin/env python3
"""Scale benchmark (issue 13): synthetic stores made from LoCoMo, measured through the CLI.

    python3 scripts/bench_scale.py one --messages 250000
    python3 scripts/bench_scale.py many --messages 1000000 --namespaces 10000
    python3 scripts/bench_scale.py measure target/bench-scale/one-5882 target/bench-scale/one-23528

`one` writes one namespace of N messages (the LoCoMo conversations end to end, repeated, by
../shared/tools/make_long_conv.py); `many` writes N messages over M namespaces (consecutive
LoCoMo turns, N/M per namespace, as many users' small memories). Both then measure, with the
lexical `hashing` model so that embedding is out of the picture:

- ingest and build: wall time, messages/s, peak memory;
- store size (database and vector files);
- cold load: the index load of a fresh process (`query --json`, `timings_ms.index_load`);
- search: the time of one search, analysis + ranking + rendering (`timings_ms`: stages
  `analyse` and `rank`, which holds scan (from commit 10d736f), route, score, select, expand and
  messages, plus `render`),
  per question (`query --questions`, the index loaded once), p50 and p95, and the query
  process's peak memory;
- `many` also loads one small namespace in the big store and in a store of its own, the ratio.

`measure` re-measures stores that `one` left, without building them again: in rounds, each
store's cold load and questions in turn, the medians over rounds and each store's search time
relative to the first store's (the growth target compares 23,528 messages with 5,882).

Results are printed as a table and written as JSON next to the store (--work, default
target/bench-scale). Uses target/release/trajwiki (built if missing). The stores stay there and
are large (about 2 GB for 250,000 messages, 8 GB for 1,000,000 over 10,000 namespaces): check
the free disk first and remove them when done.
"""
import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
LOCOMO = SHARED / "data" / "locomo" / "locomo7.json"
MAKE_LONG = SHARED / "tools" / "make_long_conv.py"
BIN = ROOT / "target" / "release" / "trajwiki"
MODEL = "hashing"


def run(args, stdout=subprocess.PIPE):
    """Runs the CLI under /usr/bin/time; returns (stdout, wall seconds, peak RSS in MiB)."""
    cmd = ["/usr/bin/time", "-f", "%e %M", str(BIN), *map(str, args)]
    p = subprocess.run(cmd, stdout=stdout, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-2000:]}")
    wall, rss_kb = p.stderr.strip().splitlines()[-1].split()
    return p.stdout, float(wall), int(rss_kb) / 1024


def size_mib(store):
    total = sum(f.stat().st_size for f in Path(store).rglob("*") if f.is_file())
    return total / 2**20


def questions(n):
    data = json.loads(LOCOMO.read_text())
    qs = [q["question"] for conv in data for q in conv["qa"] if q.get("category") in (1, 2, 3, 4)]
    random.Random(0).shuffle(qs)
    return qs[:n]


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def ingest_and_build(store, data, n_messages, result, args):
    _, wall, rss = run(["ingest", "--quiet", "--store", store, data])
    result["ingest_s"] = wall
    result["ingest_msgs_per_s"] = n_messages / wall
    result["ingest_peak_mib"] = rss
    _, wall, rss = run(["build", "--quiet", "--store", store, "--model", MODEL, "--flush",
                        *args.build_args])
    result["build_s"] = wall
    result["build_msgs_per_s"] = n_messages / wall
    result["build_peak_mib"] = rss
    result["store_mib"] = size_mib(store)


def cold_loads(store, ns, question, runs=3):
    loads, walls = [], []
    for _ in range(runs):
        out, wall, rss = run(["query", "--store", store, "--namespace", ns, "--model", MODEL,
                              "--json", question])
        loads.append(json.loads(out)["timings_ms"]["index_load"])
        walls.append(wall)
    return statistics.median(loads), statistics.median(walls), rss


def search_times(store, ns, qfile):
    out, _, rss = run(["query", "--store", store, "--namespace", ns, "--model", MODEL,
                       "--questions", qfile])
    times = [search_ms(json.loads(line)["timings_ms"]) for line in out.splitlines()]
    return times, rss


def search_ms(t):
    """One search's time: `rank` already holds its sub-stages (route … messages)."""
    return t["stages"]["analyse"] + t["stages"]["rank"] + t["render"]


def one(args):
    work = Path(args.work) / f"one-{args.messages}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    conv = work / "conv.jsonl"
    per_copy = sum(1 for _ in open(make_long(work, 1)))
    repeats = -(-args.messages // per_copy)
    full = make_long(work, repeats)
    with open(full) as src, open(conv, "w") as dst:
        for i, line in enumerate(src):
            if i >= args.messages:
                break
            dst.write(line)
    ns = json.loads(conv.open().readline())["namespace"]
    store = work / "store"
    result = {"kind": "one", "messages": args.messages, "namespaces": 1,
              "binary": str(BIN), "build_args": " ".join(args.build_args)}
    ingest_and_build(store, conv, args.messages, result, args)
    qs = questions(args.questions)
    qfile = work / "questions.txt"
    qfile.write_text("\n".join(qs) + "\n")
    result["cold_load_ms"], result["cold_query_wall_s"], _ = cold_loads(store, ns, qs[0])
    times, rss = search_times(store, ns, qfile)
    result["search_p50_ms"] = pct(times, 50)
    result["search_p95_ms"] = pct(times, 95)
    result["query_peak_mib"] = rss
    report(result, work)


def make_long(work, repeats):
    path = work / f"long{repeats}.jsonl"
    if not path.exists():
        subprocess.run([sys.executable, MAKE_LONG, LOCOMO, str(repeats), path], check=True,
                       stdout=subprocess.DEVNULL)
    return path


def many(args):
    work = Path(args.work) / f"many-{args.messages}-{args.namespaces}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    pool = [json.loads(l) for l in open(make_long(work, 1))]
    per_ns = args.messages // args.namespaces
    data = work / "messages.jsonl"
    start = datetime(2023, 1, 1)
    with open(data, "w") as out:
        for j in range(args.namespaces):
            base = (j * per_ns) % len(pool)
            for i in range(per_ns):
                src = pool[(base + i) % len(pool)]
                out.write(json.dumps({
                    "namespace": f"u{j:06d}",
                    "session": 1 + i // 20,
                    "seq": 1 + i % 20,
                    "speaker": src["speaker"],
                    "text": src["text"],
                    "timestamp": (start + timedelta(hours=i)).isoformat(),
                    "ref": f"D{1 + i // 20}:{1 + i % 20}",
                }) + "\n")
    n = per_ns * args.namespaces
    store = work / "store"
    result = {"kind": "many", "messages": n, "namespaces": args.namespaces,
              "messages_per_namespace": per_ns, "binary": str(BIN)}
    ingest_and_build(store, data, n, result, args)
    qs = questions(args.questions)
    # One small namespace: in the big store, and alone in a store of its own.
    small = work / "small.jsonl"
    with open(data) as src, open(small, "w") as dst:
        for line in src:
            if not line.startswith('{"namespace": "u000000"'):
                break
            dst.write(line)
    alone = work / "alone"
    run(["ingest", "--quiet", "--store", alone, small])
    run(["build", "--quiet", "--store", alone, "--model", MODEL, "--flush"])
    big_load, _, _ = cold_loads(store, "u000000", qs[0], runs=5)
    alone_load, _, _ = cold_loads(alone, "u000000", qs[0], runs=5)
    result["small_load_in_big_store_ms"] = big_load
    result["small_load_alone_ms"] = alone_load
    result["small_load_ratio"] = big_load / alone_load
    # Searches over namespaces picked at random, one process each (a fresh load every time).
    rng = random.Random(1)
    times = []
    for q in qs[: args.samples]:
        ns = f"u{rng.randrange(args.namespaces):06d}"
        out, _, rss = run(["query", "--store", store, "--namespace", ns, "--model", MODEL,
                           "--json", q])
        times.append(search_ms(json.loads(out)["timings_ms"]))
        result["query_peak_mib"] = max(result.get("query_peak_mib", 0), rss)
    result["search_p50_ms"] = pct(times, 50)
    result["search_p95_ms"] = pct(times, 95)
    report(result, work)


def measure(args):
    """Re-measures stores that `one` left (no ingest, no build): `rounds` rounds, each a cold
    load and the questions on every store in turn, so that a slow moment of the machine falls
    on all of them; prints the medians over rounds and the ratio of each store's search to the
    first's."""
    stores = [Path(w) for w in args.stores]
    rows = {w: {"load": [], "p50": [], "p95": []} for w in stores}
    for _ in range(args.rounds):
        for w in stores:
            ns = json.loads((w / "conv.jsonl").open().readline())["namespace"]
            qfile = w / "questions.txt"
            first = qfile.read_text().splitlines()[0]
            load, _, _ = cold_loads(w / "store", ns, first, runs=1)
            times, _ = search_times(w / "store", ns, qfile)
            rows[w]["load"].append(load)
            rows[w]["p50"].append(pct(times, 50))
            rows[w]["p95"].append(pct(times, 95))
    med = statistics.median
    base = rows[stores[0]]
    print(f"binary {BIN}, {args.rounds} rounds, {time.strftime('%Y-%m-%d')}, "
          f"{os.cpu_count()} cores (medians over rounds)")
    print(f"{'store':<28} {'cold load':>10} {'p50':>8} {'p95':>8} {'p50 ratio':>10} {'p95 ratio':>10}")
    for w, r in rows.items():
        print(f"{w.name:<28} {med(r['load']):>8.0f}ms {med(r['p50']):>6.2f}ms {med(r['p95']):>6.2f}ms"
              f" {med(r['p50']) / med(base['p50']):>10.2f} {med(r['p95']) / med(base['p95']):>10.2f}")


def report(result, work):
    result["date"] = time.strftime("%Y-%m-%d")
    result["machine"] = f"{os.cpu_count()} cores"
    (work / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    width = max(map(len, result))
    for k, v in result.items():
        print(f"{k:<{width}}  {v:.2f}" if isinstance(v, float) else f"{k:<{width}}  {v}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("one", "many"):
        s = sub.add_parser(name)
        s.add_argument("--messages", type=int, required=True)
        s.add_argument("--questions", type=int, default=100)
        s.add_argument("--work", default=str(ROOT / "target" / "bench-scale"))
        s.add_argument("--bin", default=str(BIN),
                       help="the trajwiki binary (e.g. one built with --features faiss)")
        s.add_argument("--build-arg", dest="build_args", action="append", default=[],
                       help="an extra argument to `trajwiki build` (repeatable)")
        if name == "many":
            s.add_argument("--namespaces", type=int, required=True)
            s.add_argument("--samples", type=int, default=40)
    s = sub.add_parser("measure", help="re-measure the stores `one` left, in alternating rounds")
    s.add_argument("stores", nargs="+", help="work directories of `one` (e.g. target/bench-scale/one-5882)")
    s.add_argument("--rounds", type=int, default=4)
    s.add_argument("--bin", default=str(BIN))
    args = p.parse_args()
    globals()["BIN"] = Path(args.bin)
    if not LOCOMO.exists():
        sys.exit(f"LoCoMo data not found at {LOCOMO}")
    if not Path(args.bin).exists():
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    {"one": one, "many": many, "measure": measure}[args.cmd](args)


if __name__ == "__main__":
    main()
