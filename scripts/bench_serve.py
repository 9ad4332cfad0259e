#!/usr/bin/env python3
"""Load test of `trajwiki serve` on loopback (issue 17): search latency through HTTP at 1, 8 and
32 concurrent clients on the locomo7 store, then appends interleaved with searches.

    python3 scripts/bench_serve.py [--model minilm] [--requests 320] [--work target/bench-serve]
                                   [--postgres] [--servers N]

The store is made in --work (ingest of ../shared/data/locomo/locomo7.json and a build with
--model) unless it is there already. A server is started on a free port; clients are threads
of this process (urllib, one connection per request), asking the LoCoMo questions of each
conversation of their namespace, round robin. Reported per concurrency: requests, failures,
p50/p95/max latency in ms and requests/s. Then 8 clients search while one appends the turns of
one conversation, one message per request, to a new namespace (each append builds): failures of
either, append latency, and whether the namespace holds every appended message afterwards (no
lost message). Results are printed and written to --work/result.json.

With --postgres the store is a PostgreSQL database of a throwaway cluster this script starts
(Debian's `postgresql`: initdb in a temporary folder, a loopback port; stopped and removed at the
end), and --servers N starts N servers over it: each request goes to the next server in turn, the
appends to the first while the searches go to all.
"""
import argparse
import json
import os
import glob
import random
import shutil
import socket
import statistics
import subprocess
import tempfile
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


def start_postgres():
    """A throwaway PostgreSQL cluster: (database URL, stop function)."""
    bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not bins:
        sys.exit("--postgres needs Debian's postgresql package (apt-get install postgresql)")
    bin_dir = Path(bins[-1]).parent
    root = Path(tempfile.mkdtemp(prefix="trajwiki-bench-pg-"))
    data = root / "data"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # initdb refuses to run as root: the cluster belongs to the postgres user then.
    as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if as_user:
        shutil.chown(root, "postgres")
    def pg(*cmd):
        p = subprocess.run([*as_user, *map(str, cmd)], capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"failed: {' '.join(map(str, cmd))}\n{p.stderr[-2000:]}")
    pg(bin_dir / "initdb", "-D", data, "-A", "trust", "-U", "postgres", "--locale=C", "-E", "UTF8")
    pg(bin_dir / "pg_ctl", "-D", data, "-l", root / "log", "-w", "start", "-o",
       f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=on")
    pg(bin_dir / "createdb", "-h", "127.0.0.1", "-p", port, "-U", "postgres", "bench")

    def stop():
        subprocess.run([*as_user, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "stop"],
                       capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
    return f"postgres://postgres@127.0.0.1:{port}/bench", stop


def searches(urls, work, clients):
    """Runs `work` (a list of (namespace, question)) on `clients` threads, each request to the
    next of `urls` in turn; returns latencies and failures."""
    lock = threading.Lock()
    latencies, failures = [], []
    queue = list(work)

    def client():
        while True:
            with lock:
                if not queue:
                    return
                ns, q = queue.pop()
                url = urls[len(queue) % len(urls)]
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
    ap.add_argument("--postgres", action="store_true",
                    help="the store in a PostgreSQL cluster started for the run")
    ap.add_argument("--servers", type=int, default=1, help="servers over the store")
    ap.add_argument("--data", default=str(LOCOMO), help="LoCoMo JSON to ingest")
    args = ap.parse_args()
    BIN = Path(args.bin)
    locomo = Path(args.data)
    if not locomo.exists():
        sys.exit(f"{locomo} is missing")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    stop_postgres = None
    if args.postgres:
        store, stop_postgres = start_postgres()
    else:
        store = work / f"store-{args.model}"
    try:
        run(args, store, locomo, work)
    finally:
        if stop_postgres:
            stop_postgres()


def run(args, store, locomo, work):
    if args.postgres or not (store / "trajwiki.db").exists():
        sh("ingest", "--quiet", "--store", store, locomo)
        t0 = time.perf_counter()
        sh("build", "--quiet", "--store", store, "--model", args.model)
        print(f"built {store} in {time.perf_counter() - t0:.1f} s")
    data = json.loads(locomo.read_text())
    work_items = [(conv["sample_id"], q["question"]) for conv in data for q in conv["qa"]
                  if q.get("category") in (1, 2, 3, 4)]
    random.Random(0).shuffle(work_items)

    servers = [start_server(store, args.model) for _ in range(args.servers)]
    urls = [url for _, url in servers]
    url = urls[0]
    result = {"model": args.model, "requests": args.requests, "date": time.strftime("%Y-%m-%d"),
              "cores": os.cpu_count(), "binary": str(BIN), "concurrency": [],
              "store": "postgres" if args.postgres else "sqlite", "servers": args.servers}
    print(f"store: {result['store']}, {args.servers} server(s)")
    try:
        # Every namespace's index loaded once in every server before timing.
        for u in urls:
            for ns in sorted({ns for ns, _ in work_items}):
                request(f"{u}/v1/namespaces/{ns}/search", {"question": "warm up"})
        print(f"{'clients':>7} {'requests':>8} {'failed':>6} {'p50 ms':>8} {'p95 ms':>8} "
              f"{'max ms':>8} {'req/s':>7}")
        for clients in (1, 8, 32):
            items = (work_items * (args.requests // len(work_items) + 1))[:args.requests]
            lat, failed, wall = searches(urls, items, clients)
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
            l, f, _ = searches(urls, random.Random(len(lat)).sample(work_items, 16), 8)
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
        for proc, _ in servers:
            proc.terminate()
            proc.wait()
    (work / "result.json").write_text(json.dumps(result, indent=2))
    bad = sum(r["failed"] for r in result["concurrency"])
    inter = result["interleaved"]
    if bad or inter["append_failed"] or inter["search_failed"] or inter["lost"]:
        sys.exit("some requests failed or a message was lost (see result.json)")


if __name__ == "__main__":
    main()
