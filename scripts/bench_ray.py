#!/usr/bin/env python3
"""Namespaces per second through `trajwiki.ray.index_namespaces` on a local Ray cluster, against
one process indexing the same namespaces in turn.

Each LoCoMo session becomes a namespace of its own (its sample cut to that one session), so the
run has many small namespaces, as a store of many users does. One line per configuration:

    python scripts/bench_ray.py --data ../shared/data/locomo/locomo7.json --limit 60 \
        --model minilm --actors 1 2

needs `trajwiki` (a release wheel: `maturin build --release --manifest-path python/Cargo.toml`)
and `ray[data]` installed. Every configuration writes a fresh store in a temporary folder; the
last one's memory is compared with the single process's, namespace by namespace.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def namespaces(data: Path, limit: int) -> list[dict[str, Any]]:
    rows = []
    for sample in json.loads(data.read_text(encoding="utf-8")):
        conv = sample["conversation"]
        sessions = sorted(
            (int(k.split("_")[1]) for k in conv if k.startswith("session_")
             and not k.endswith("date_time") and conv[k]),
        )
        for s in sessions:
            one = {"speaker_a": conv["speaker_a"], "speaker_b": conv["speaker_b"],
                   f"session_{s}_date_time": conv[f"session_{s}_date_time"],
                   f"session_{s}": conv[f"session_{s}"]}
            rows.append({"namespace": f"{sample['sample_id']}-s{s}",
                         "messages": {"sample_id": sample["sample_id"], "conversation": one}})
    return rows[:limit]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="LoCoMo JSON")
    ap.add_argument("--limit", type=int, default=60, help="namespaces (LoCoMo sessions)")
    ap.add_argument("--model", default="minilm")
    ap.add_argument("--actors", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--cpus", type=int, default=os.cpu_count(), help="the local cluster's CPUs")
    ap.add_argument("--cli", type=Path, default=Path("target/release/trajwiki"),
                    help="trajwiki binary for comparing the memories (skipped when absent)")
    args = ap.parse_args()

    import ray

    from trajwiki import Memory
    from trajwiki.ray import index_namespaces

    rows = namespaces(args.data, args.limit)
    messages = sum(len(r["messages"]["conversation"][k]) for r in rows
                   for k in r["messages"]["conversation"]
                   if k.startswith("session_") and not k.endswith("date_time"))
    print(f"{len(rows)} namespaces, {messages} messages, model {args.model}, "
          f"{args.cpus} CPUs", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="bench-ray-"))

    # The model is loaded before the clock starts, as an actor's is in its constructor.
    single = tmp / "single"
    memory = Memory(single, model=args.model, device="cpu")
    memory.add(rows[0]["messages"], namespace="warm-up")
    memory.build(namespace="warm-up")
    memory.delete("warm-up")
    started = time.perf_counter()
    for r in rows:
        memory.add(r["messages"], namespace=r["namespace"], source="ray")
        memory.build(namespace=r["namespace"])
    base = time.perf_counter() - started
    print(f"single process: {len(rows) / base:.2f} namespaces/s ({messages / base:.1f} msg/s, "
          f"{base:.1f} s)", flush=True)

    ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    store = single
    for actors in args.actors:
        store = tmp / f"ray-{actors}"
        report = index_namespaces(rows, f"sqlite://{store}", model=args.model, device="cpu",
                                  actors=actors)
        if report.failed:
            print(f"{len(report.failed)} failed: {report.failed[:3]}", file=sys.stderr)
            return 1
        busy = sum(r["seconds"] for r in report.results) / report.seconds / actors
        print(f"ray, {actors} actor(s) x {max(1, args.cpus // actors)} thread(s): "
              f"{report.namespaces_per_second:.2f} namespaces/s "
              f"({messages / report.seconds:.1f} msg/s, {report.seconds:.1f} s incl. actor "
              f"start-up; actors busy {busy:.2f}; x{base / report.seconds:.2f} of one process)",
              flush=True)
    ray.shutdown()

    if args.cli.is_file():
        def export(at: Path, ns: str) -> bytes:
            return subprocess.run([str(args.cli), "export", "--store", str(at), "--namespace",
                                   ns, "--what", "memory"], check=True,
                                  capture_output=True).stdout
        same = sum(export(single, r["namespace"]) == export(store, r["namespace"]) for r in rows)
        print(f"memory identical to the single process's: {same} of {len(rows)} namespaces")
        if same != len(rows):
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
