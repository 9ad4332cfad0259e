#!/usr/bin/env python3
"""Throughput of all-MiniLM-L6-v2 on LoCoMo turns: sentence-transformers (CPU torch) against the
release `trajwiki embed` binary, same texts, same thread count, side by side.

Requirements (a throwaway venv): pip install sentence-transformers==6.2.0 (torch 2.15.0).

Usage:
    cargo build --release
    python scripts/bench_vs_sentence_transformers.py [--n 2000] [--threads 2] [--batch 32]
        [--precisions f32,bf16,int8] [--model ~/.cache/trajwiki/models/minilm]
        [--bin target/release/trajwiki]

Prints texts/s of both (embedding time only: model loading excluded on both sides; trajwiki's
comes from `--stats`), their ratio, and the cosine of each of trajwiki's vectors to
sentence-transformers' (f32), for each precision of trajwiki (`--model DIR@bf16`), with the
kernels it ran on. `TRAJWIKI_CPU_KERNEL=avx2` (or `scalar`) measures another kernel.
"Threads busy" is trajwiki's CPU time over (embedding time × threads): the share of the pool's
time spent working (rayon's brief spinning before a worker sleeps counts as work).
Also prints texts per CPU-second (process CPU time of the embedding, all threads; for trajwiki
the CPU time of a run on empty input is subtracted to remove loading): on a machine shared with
other work, wall-clock rates mostly measure the neighbours, CPU time much less so.
"""

import argparse
import json
import os
import resource
import subprocess
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402


def locomo_turns(path, n):
    with open(path, encoding="utf-8") as f:
        convs = json.load(f)
    out = []
    for conv in convs:
        c = conv["conversation"]
        sessions = sorted(
            (int(k.split("_")[1]), v)
            for k, v in c.items()
            if k.startswith("session_") and k.count("_") == 1 and isinstance(v, list)
        )
        for _, turns in sessions:
            for t in turns:
                out.append(f"{t['speaker']}: {t['text']}".replace("\n", " "))
    return out[:n]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    home = os.environ.get("TRAJWIKI_HOME", os.path.expanduser("~/.cache/trajwiki"))
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--model", default=os.path.join(home, "models", "minilm"))
    ap.add_argument("--bin", default=os.path.join(root, "target", "release", "trajwiki"))
    ap.add_argument("--data", default=os.path.join(root, "..", "shared", "data", "locomo", "locomo7.json"))
    ap.add_argument("--repeat", type=int, default=2, help="timed runs per side; the best is kept")
    ap.add_argument("--precisions", default="f32,bf16,int8", help="trajwiki precisions to run")
    args = ap.parse_args()

    texts = locomo_turns(args.data, args.n)
    print(f"{len(texts)} LoCoMo turns, {args.threads} threads, batch {args.batch}")

    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(args.threads)
    st = SentenceTransformer(args.model, device="cpu")
    st.encode(texts[:64], batch_size=args.batch)  # warm-up
    st_best = st_cpu = float("inf")
    for _ in range(args.repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        ref = st.encode(texts, batch_size=args.batch, normalize_embeddings=True, convert_to_numpy=True)
        st_best = min(st_best, time.perf_counter() - t0)
        st_cpu = min(st_cpu, time.process_time() - c0)

    with tempfile.TemporaryDirectory() as tmp:
        inp = os.path.join(tmp, "texts.txt")
        out = os.path.join(tmp, "out.npy")
        with open(inp, "w", encoding="utf-8") as f:
            f.write("\n".join(texts) + "\n")
        empty = os.path.join(tmp, "empty.txt")
        open(empty, "w").close()

        def run(path, spec):
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            p = subprocess.run(
                [args.bin, "embed", "--model", spec, "--input", path, "--format", "npy",
                 "--output", out, "--threads", str(args.threads), "--stats"],
                check=True, capture_output=True, text=True,
            )
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
            return json.loads(p.stderr.strip().splitlines()[-1]), cpu

        results = []
        for precision in args.precisions.split(","):
            spec = f"{args.model}@{precision}"
            load_cpu = min(run(empty, spec)[1] for _ in range(args.repeat))
            tw_best = tw_cpu = float("inf")
            for _ in range(args.repeat):
                stats, cpu = run(inp, spec)
                tw_best = min(tw_best, stats["embed_s"])
                tw_cpu = min(tw_cpu, cpu - load_cpu)
            results.append((precision, stats.get("kernel"), tw_best, tw_cpu, np.load(out)))

    st_rate = len(texts) / st_best
    st_c = len(texts) / st_cpu
    print(f"sentence-transformers: {st_rate:8.1f} texts/s ({st_best:.2f} s), {st_c:.1f} texts per CPU-second")
    for precision, kernel, tw_best, tw_cpu, ours in results:
        assert ours.shape == ref.shape, (ours.shape, ref.shape)
        cos = np.sum(ours * ref, axis=1) / (np.linalg.norm(ours, axis=1) * np.linalg.norm(ref, axis=1))
        tw_rate = len(texts) / tw_best
        tw_c = len(texts) / tw_cpu
        print(
            f"trajwiki {precision:>4} ({kernel}): {tw_rate:8.1f} texts/s ({tw_best:.2f} s), "
            f"ratio {tw_rate / st_rate:.2f}x wall clock, {tw_c / st_c:.2f}x per CPU-second; "
            f"cosine to sentence-transformers min {float(np.min(cos)):.7f}, "
            f"1st percentile {float(np.percentile(cos, 1)):.7f}; "
            f"threads busy {tw_cpu / (tw_best * args.threads):.2f} of the embedding time"
        )
    print(f"load average now: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
