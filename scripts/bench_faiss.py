#!/usr/bin/env python3
"""The exact scan against faiss-cpu `IndexFlatIP` (issue 13), side by side on the same vectors
and threads: N unit rows of dimension d (default 250,000 x 384, as a large namespace of MiniLM
vectors), k = 10, query batch 1 and 64. Our numbers come from `cargo bench --bench exact_scan`
(which writes the vectors it scanned); faiss searches those same vectors with as many OpenMP
threads as rayon used. Prints median milliseconds per search and the ratio faiss / trajwiki
(above 1: trajwiki is faster), for our f32 rows, f16 rows, and f16 rows with their int8
sketches (the exact hits; the sketch is read by a single query's scan).

Needs numpy and faiss-cpu, best in a throwaway venv:
    python3 -m venv /tmp/faissenv && /tmp/faissenv/bin/pip install faiss-cpu numpy
    /tmp/faissenv/bin/python scripts/bench_faiss.py [--n 250000] [--dim 384]
"""
import argparse
import json
import statistics
import subprocess
import time
from pathlib import Path

import faiss
import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def median_ms(runs, f):
    f()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        f()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=250_000)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--out", default=str(ROOT / "target" / "bench-faiss"))
    a = p.parse_args()
    out = subprocess.run(
        ["cargo", "bench", "--quiet", "--bench", "exact_scan", "--",
         "--n", str(a.n), "--dim", str(a.dim), "--out", a.out],
        cwd=ROOT, check=True, stdout=subprocess.PIPE, text=True,
    ).stdout
    ours = json.loads(out.strip().splitlines()[-1])
    rows = np.fromfile(Path(a.out) / "rows.f32", dtype="<f4").reshape(a.n, a.dim)
    queries = np.fromfile(Path(a.out) / "queries.f32", dtype="<f4").reshape(64, a.dim)
    faiss.omp_set_num_threads(ours["threads"])
    index = faiss.IndexFlatIP(a.dim)
    index.add(rows)
    k = ours["k"]
    result = dict(ours)
    result["faiss_version"] = faiss.__version__
    for b in (1, 64):
        q = np.ascontiguousarray(queries[:b])
        result[f"faiss_batch{b}_ms"] = median_ms(30 if b == 1 else 5, lambda: index.search(q, k))
        for dtype in ("f32", "f16", "f16_sketched"):
            result[f"ratio_{dtype}_batch{b}"] = (
                result[f"faiss_batch{b}_ms"] / ours[f"trajwiki_{dtype}_batch{b}_ms"]
            )
    print(f"exact top-{k} over {a.n} x {a.dim}, {ours['threads']} threads, faiss {faiss.__version__}")
    print(f"{'batch':>5} {'faiss ms':>9} {'f32 ms':>8} {'f16 ms':>8} {'f16+sk ms':>9} "
          f"{'faiss/f32':>9} {'faiss/f16':>9} {'faiss/sk':>9}")
    for b in (1, 64):
        print(f"{b:>5} {result[f'faiss_batch{b}_ms']:>9.2f} {ours[f'trajwiki_f32_batch{b}_ms']:>8.2f} "
              f"{ours[f'trajwiki_f16_batch{b}_ms']:>8.2f} "
              f"{ours[f'trajwiki_f16_sketched_batch{b}_ms']:>9.2f} "
              f"{result[f'ratio_f32_batch{b}']:>9.2f} {result[f'ratio_f16_batch{b}']:>9.2f} "
              f"{result[f'ratio_f16_sketched_batch{b}']:>9.2f}")
    (Path(a.out) / "result.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
