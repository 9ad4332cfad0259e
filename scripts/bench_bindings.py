#!/usr/bin/env python3
"""Binding overhead of `trajwiki.Embedder.embed`: the same texts embedded through Python and by
`trajwiki embed --stats` (whose `embed_s` is the Rust embedding call alone, no file I/O), and the
lexical `hashing` model through Python, whose time is almost all argument conversion and array
hand-over (an upper bound on what the binding adds to any model).

    target/py-venv/bin/python scripts/bench_bindings.py [--n 10000] [--cli target/release/trajwiki]

Prints one JSON object; `overhead` is (Python - Rust) / Rust for MiniLM, minimum of the repeats.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from trajwiki import Embedder

WORDS = ["we", "hiked", "near", "Bergen", "with", "the", "kids", "and", "painted", "a",
         "sunset", "after", "pottery", "class"]


def texts(n: int) -> list[str]:
    return [
        f"note {i}: " + " ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(2 + i % 10))
        for i in range(n)
    ]


def best(f, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    repo = Path(__file__).resolve().parents[1]
    home = Path(os.environ.get("TRAJWIKI_HOME", Path.home() / ".cache" / "trajwiki"))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=10_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--model", default=str(home / "models" / "minilm"))
    p.add_argument("--cli", default=str(repo / "target" / "release" / "trajwiki"))
    a = p.parse_args()
    xs = texts(a.n)
    minilm = Embedder(a.model, device="cpu")
    minilm.embed(xs[:64])  # warm the thread pool
    py_s = best(lambda: minilm.embed(xs), a.repeat)
    hashing = Embedder("hashing-384", device="cpu")
    hashing_s = best(lambda: hashing.embed(xs), a.repeat)
    with tempfile.TemporaryDirectory() as d:
        inp, out = Path(d) / "in.txt", Path(d) / "out.npy"
        inp.write_text("\n".join(xs) + "\n", encoding="utf-8")
        rust = []
        for _ in range(a.repeat):
            r = subprocess.run(
                [a.cli, "embed", "--model", a.model, "--input", str(inp), "--format", "npy",
                 "--output", str(out), "--stats"],
                check=True, capture_output=True, text=True,
            )
            rust.append(json.loads(r.stderr.strip().splitlines()[-1])["embed_s"])
    rust_s = min(rust)
    print(json.dumps({
        "texts": a.n,
        "python_minilm_s": round(py_s, 3),
        "rust_minilm_s": round(rust_s, 3),
        "overhead": round((py_s - rust_s) / rust_s, 4),
        "python_hashing_s": round(hashing_s, 3),
        "hashing_share_of_minilm": round(hashing_s / rust_s, 4),
    }))


if __name__ == "__main__":
    main()
