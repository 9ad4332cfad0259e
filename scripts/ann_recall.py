#!/usr/bin/env python3
"""How much of a namespace's message vectors an inverted-file index (IVF: spherical k-means
lists, the nearest `nprobe` lists scanned exactly) must read to find the exact top-k, measured
on a store's vector file (issue 51, item 3: the dense levels through an approximate index).

    target/py-venv/bin/python scripts/ann_recall.py STORE/vectors/<namespace hash>.f16 [--k 300]

The file is the namespace's raw rows (f16 or f32 by its suffix, `--dim` wide). Queries are
`--queries` rows of the file itself, picked at random (seed 1): a row is its own best hit, which
flatters recall a little. Prints, for √n and 4√n lists and each nprobe, recall@k against the
exact scan and the share of rows read. Needs NumPy (the project's Python venv has it).
"""
import argparse

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("vectors")
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--k", type=int, default=300)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--iterations", type=int, default=10)
    args = ap.parse_args()
    dtype = np.float16 if args.vectors.endswith(".f16") else np.float32
    rows = np.fromfile(args.vectors, dtype=dtype).astype(np.float32).reshape(-1, args.dim)
    n = len(rows)
    rng = np.random.default_rng(1)
    queries = rows[rng.choice(n, args.queries, replace=False)]
    exact = np.argsort(-(queries @ rows.T), axis=1)[:, : args.k]
    nonzero = (np.abs(rows) > 1e-6).sum(1).mean()
    print(f"{n} rows of {args.dim} ({nonzero:.0f} non-zero on average), recall@{args.k}")
    print(f"{'lists':>6} {'nprobe':>6} {'recall':>7} {'read':>6}")
    for lists in (int(np.sqrt(n)), int(4 * np.sqrt(n))):
        centroids = rows[rng.choice(n, lists, replace=False)].copy()
        for _ in range(args.iterations):
            assigned = np.argmax(rows @ centroids.T, axis=1)
            for c in range(lists):
                members = rows[assigned == c]
                if len(members):
                    v = members.sum(0)
                    centroids[c] = v / (np.linalg.norm(v) + 1e-9)
        assigned = np.argmax(rows @ centroids.T, axis=1)
        near = np.argsort(-(queries @ centroids.T), axis=1)
        for nprobe in (4, 8, 16, 32, 64):
            recall, read = [], []
            for qi, q in enumerate(queries):
                candidates = np.where(np.isin(assigned, near[qi, :nprobe]))[0]
                top = candidates[np.argsort(-(rows[candidates] @ q))[: args.k]]
                recall.append(len(set(top) & set(exact[qi])) / args.k)
                read.append(len(candidates) / n)
            print(f"{lists:>6} {nprobe:>6} {np.mean(recall):>7.3f} {np.mean(read):>6.1%}")


if __name__ == "__main__":
    main()
