#!/usr/bin/env python3
"""Load test of `trajwiki serve` on loopback (issue 17): search latency through HTTP at 1, 8 and
32 concurrent clients on the locomo7 store, then appends interleaved with searches.

    python3 scripts/bench_serve.py [--model minilm] [--requests 320] [--work target/bench-serve]

The store is made in --work (ingest of ../shared/data/locomo/locomo7.json and a build with
--model) unless it is there already. A server is started on a free port; clients are threads
of this process (urllib, one connection per request), asking the LoCoMo questions of each
conversation of their namespace, round robin. Reported per concurrency: requests, failures,
p50/p95/max latency in ms and requests/s. Then 8 clients search while one appends the turns of
one conversation, one message per request, to a new namespace (each append builds): failures of
either, append latency, and whether the namespace holds every appended message afterwards (no
lost message). Results are printed and written to --work/result.json.
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo7.json"
BIN = ROOT / "target" / "release" / "trajwiki"


def sh(*args):
    p = subprocess.run([str(BIN), *map(str, args)], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"failed: trajwiki {' '.join(map(str, args))}\n{p.stderr[-2000:]}")
    return p.stdout


def request(url, body=None, method=None):
    """(status, seconds, parsed body); status 0 when the connection failed."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            payload = r.read()
            status = r.status
    except urllib.error.HTTPError as e:
        payload, status = e.read(), e.code
    except OSError as e:
        return 0, time.perf_counter() - t0, {"error": str(e)}
    elapsed = time.perf_counter() - t0
    try:
        return status, elapsed, json.loads(payload)
    except ValueError:
        return status, elapsed, {"error": payload[:200].decode(errors="replace")}


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def start_server(store, model):
    proc = subprocess.Popen(
        [str(BIN), "serve", "--store", str(store), "--port", "0", "--model", model, "-q"],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    for line in proc.stderr:
        if "http://" in line:
            url = line[line.index("http://"):].strip()
            threading.Thread(target=lambda: proc.stderr.read(), daemon=True).start()
            return proc, url
    sys.exit("the server did not start")


def searches(url, work, clients):
    """Runs `work` (a list of (namespace, question)) on `clients` threads; returns latencies
    and failures."""
    lock = threading.Lock()
    latencies, failures = [], []
    queue = list(work)

    def client():
        while True:
            with lock:
                if not queue:
                    return
                ns, q = queue.pop()
            status, dt, body = request(f"{url}/v1/namespaces/{ns}/search",
                                       {"question": q, "budget": 2700})
            with lock:
                if status == 200:
                    latencies.append(dt * 1000)
                else:
                    failures.append((status, str(body)[:200]))

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, failures, time.perf_counter() - t0


def main():
    global BIN
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="minilm")
    ap.add_argument("--requests", type=int, default=320, help="searches per concurrency")
    ap.add_argument("--appends", type=int, default=100, help="messages appended one by one")
    ap.add_argument("--work", default=str(ROOT / "target" / "bench-serve"))
    ap.add_argument("--bin", default=str(BIN))
    args = ap.parse_args()
    BIN = Path(args.bin)
    if not LOCOMO.exists():
        sys.exit(f"{LOCOMO} is missing")
    work = Path(args.work)
    store = work / f"store-{args.model}"
    if not (store / "trajwiki.db").exists():
        work.mkdir(parents=True, exist_ok=True)
        sh("ingest", "--quiet", "--store", store, LOCOMO)
        t0 = time.perf_counter()
        sh("build", "--quiet", "--store", store, "--model", args.model)
        print(f"built {store} in {time.perf_counter() - t0:.1f} s")
    data = json.loads(LOCOMO.read_text())
    work_items = [(conv["sample_id"], q["question"]) for conv in data for q in conv["qa"]
                  if q.get("category") in (1, 2, 3, 4)]
    random.Random(0).shuffle(work_items)

    proc, url = start_server(store, args.model)
    result = {"model": args.model, "requests": args.requests, "date": time.strftime("%Y-%m-%d"),
              "cores": os.cpu_count(), "binary": str(BIN), "concurrency": []}
    try:
        # Every namespace's index loaded once before timing.
        for ns in sorted({ns for ns, _ in work_items}):
            request(f"{url}/v1/namespaces/{ns}/search", {"question": "warm up"})
        print(f"{'clients':>7} {'requests':>8} {'failed':>6} {'p50 ms':>8} {'p95 ms':>8} "
              f"{'max ms':>8} {'req/s':>7}")
        for clients in (1, 8, 32):
            items = (work_items * (args.requests // len(work_items) + 1))[:args.requests]
            lat, failed, wall = searches(url, items, clients)
            row = {"clients": clients, "requests": len(items), "failed": len(failed),
                   "p50_ms": pct(lat, 50), "p95_ms": pct(lat, 95), "max_ms": max(lat),
                   "per_s": len(lat) / wall, "failures": failed[:5]}
            result["concurrency"].append(row)
            print(f"{clients:>7} {len(items):>8} {len(failed):>6} {row['p50_ms']:>8.1f} "
                  f"{row['p95_ms']:>8.1f} {row['max_ms']:>8.1f} {row['per_s']:>7.1f}")

        # Appends interleaved with searches.
        conv = data[0]
        turns = [t for k in sorted((k for k in conv["conversation"]
                                    if k.startswith("session_") and not k.endswith("date_time")),
                                   key=lambda k: int(k.split("_")[1]))
                 for t in conv["conversation"][k]][:args.appends]
        live = "bench-live"
        request(f"{url}/v1/namespaces/{live}", method="DELETE")
        append_lat, append_fail = [], []
        done = threading.Event()

        def appender():
            for i, t in enumerate(turns):
                msg = {"session": 1, "seq": i + 1, "speaker": t["speaker"], "text": t["text"],
                       "timestamp": "2023-05-08T13:56:00", "ref": t["dia_id"]}
                status, dt, body = request(f"{url}/v1/namespaces/{live}/messages",
                                           {"messages": [msg], "flush": i + 1 == len(turns)})
                if status == 200 and body.get("added") == 1:
                    append_lat.append(dt * 1000)
                else:
                    append_fail.append((status, str(body)[:200]))
            done.set()

        writer = threading.Thread(target=appender)
        writer.start()
        lat, failed, _ = [], [], 0
        while not done.is_set():
            l, f, _ = searches(url, random.Random(len(lat)).sample(work_items, 16), 8)
            lat += l
            failed += f
        writer.join()
        _, _, listing = request(f"{url}/v1/namespaces")
        held = next((n["messages"] for n in listing["namespaces"] if n["namespace"] == live), 0)
        inter = {"appends": len(turns), "append_failed": len(append_fail),
                 "append_p50_ms": pct(append_lat, 50) if append_lat else None,
                 "append_p95_ms": pct(append_lat, 95) if append_lat else None,
                 "searches": len(lat) + len(failed), "search_failed": len(failed),
                 "search_p50_ms": pct(lat, 50) if lat else None,
                 "search_p95_ms": pct(lat, 95) if lat else None,
                 "messages_held": held, "lost": len(turns) - held,
                 "failures": (append_fail + failed)[:5]}
        result["interleaved"] = inter
        print(f"appends interleaved with 8 searching clients: {len(turns)} appends "
              f"({len(append_fail)} failed, p50 {inter['append_p50_ms']:.1f} ms, "
              f"p95 {inter['append_p95_ms']:.1f} ms), {inter['searches']} searches "
              f"({len(failed)} failed, p50 {inter['search_p50_ms']:.1f} ms, "
              f"p95 {inter['search_p95_ms']:.1f} ms); the namespace holds {held} of "
              f"{len(turns)} messages")
        request(f"{url}/v1/namespaces/{live}", method="DELETE")
    finally:
        proc.terminate()
        proc.wait()
    (work / "result.json").write_text(json.dumps(result, indent=2))
    bad = sum(r["failed"] for r in result["concurrency"])
    inter = result["interleaved"]
    if bad or inter["append_failed"] or inter["search_failed"] or inter["lost"]:
        sys.exit("some requests failed or a message was lost (see result.json)")


if __name__ == "__main__":
    main()
