#!/usr/bin/env python3
"""GPU check of the Python bindings (run by scripts/gpu-check.sh with the `cuda` wheel that
scripts/build-gpu-bins.sh built, unpacked on sys.path): `Memory(device="cuda")` scores on the GPU
and answers every question of the bundled demo conversation, in every mode, exactly as
`device="cpu"` does (the same context, refs and trajectories), and `Embedder(device="cuda")` on
the tiny Qwen3 fixture runs on CUDA and matches the CPU vectors. Prints RESULT lines; exit status
1 on any difference.

    python3 scripts/gpu_python_check.py WHEEL_DIR REPO_ROOT [QWEN3_FIXTURE]
"""

import json
import sys
import tempfile
from pathlib import Path


def result(name, value, unit):
    print(f"RESULT|{name}|{value}|{unit}", flush=True)


def main():
    sys.path.insert(0, sys.argv[1])
    import numpy as np
    from trajwiki import MODES, Embedder, Memory

    repo = Path(sys.argv[2])
    messages = [json.loads(l) for l in (repo / "tests/fixtures/demo.jsonl").open(encoding="utf-8")]
    questions = [
        "What pieces did Maya keep from the pottery workshop?",
        "When did Maya make her first bowl?",
        "Who teaches the Saturday class?",
        "What did Tom and Maya both do?",
        "How many weeks is the workshop?",
    ]
    failures = 0
    with tempfile.TemporaryDirectory() as d:
        cpu = Memory(Path(d) / "store", model="hashing", device="cpu")
        cpu.add(messages)
        cpu.build()
        gpu = Memory(Path(d) / "store", model="hashing", device="cuda")
        result("python_scoring_backend", gpu.scoring_backend, "")
        if gpu.scoring_backend != "cuda":
            failures += 1
        compared = differ = 0
        for ns in cpu.namespaces():
            for q in questions:
                for mode in MODES:
                    for budget in (60, 400):
                        a = cpu.search(q, namespace=ns, mode=mode, budget=budget)
                        b = gpu.search(q, namespace=ns, mode=mode, budget=budget)
                        compared += 1
                        same = (a.context == b.context and a.source_refs == b.source_refs
                                and [t.id for t in a.trajectories] == [t.id for t in b.trajectories])
                        if not same:
                            differ += 1
                            print(f"differs: {ns} {mode} {budget} {q!r}", file=sys.stderr)
        result("python_cuda_searches_equal_to_cpu", compared - differ, f"of {compared}")
        failures += differ
    if len(sys.argv) > 3:
        texts = ["hello world", "a longer sentence about pottery on Saturday mornings", "x"]
        e_gpu = Embedder(sys.argv[3], device="cuda")
        e_cpu = Embedder(sys.argv[3], device="cpu")
        result("python_qwen3_backend", e_gpu.backend, "")
        diff = float(np.abs(e_gpu.embed(texts) - e_cpu.embed(texts)).max())
        result("python_qwen3_max_abs_diff_vs_cpu", f"{diff:.2e}", "")
        if e_gpu.backend != "cuda" or diff > 2e-2:
            failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
