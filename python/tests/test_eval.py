"""`python -m trajwiki.eval locomo` reproduces `trajwiki eval locomo`: the same summary numbers
and the same retrieval.jsonl lines (timings aside) on one conversation."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

TIMING = {"build_seconds", "eval_seconds", "latency_p50_ms", "latency_p95_ms", "latency_ms"}


def without_timings(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


def lines(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [without_timings(json.loads(line)) for line in f]


def test_python_eval_reproduces_the_cli(
    locomo_samples: list[dict[str, Any]], cli: Path, tmp_path: Path
) -> None:
    data = tmp_path / "one.json"
    smallest = min(locomo_samples, key=lambda s: len(json.dumps(s["conversation"])))
    data.write_text(json.dumps([smallest]), encoding="utf-8")
    args = ["locomo", "--data", str(data), "--mode", "full", "--mode", "turn-bm25",
            "--budget", "1500", "--budget", "700", "--model", "hashing"]
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    cli_out = subprocess.run(
        [str(cli), "-q", "eval", *args, "--out", str(d1)],
        check=True, capture_output=True, text=True,
    ).stdout
    py = subprocess.run(
        [sys.executable, "-m", "trajwiki.eval", *args, "--out", str(d2), "-q"],
        check=True, capture_output=True, text=True,
    )
    assert py.stdout.splitlines()[0].split() == ["mode", "budget", "cat1", "all", "p50", "ms"]
    s1 = json.loads((d1 / "summary.json").read_text(encoding="utf-8"))
    s2 = json.loads((d2 / "summary.json").read_text(encoding="utf-8"))
    assert s1["cells"]["full"]["1500"]["all"]["questions"] > 0
    assert without_timings(s1) == without_timings(s2)
    r1, r2 = lines(d1 / "retrieval.jsonl"), lines(d2 / "retrieval.jsonl")
    assert len(r1) > 0 and r1 == r2
    # The tables agree apart from the latency column.
    assert [l.split()[:4] for l in cli_out.splitlines()] == [
        l.split()[:4] for l in py.stdout.splitlines()
    ]


def test_bad_input_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{}", encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-m", "trajwiki.eval", "locomo", "--data", str(bad), "--out",
         str(tmp_path / "o"), "--model", "hashing"],
        capture_output=True, text=True,
    )
    assert run.returncode == 2 and "error:" in run.stderr
    run = subprocess.run(
        [sys.executable, "-m", "trajwiki.eval", "locomo", "--data", str(bad), "--out",
         str(tmp_path / "o"), "--budget", "0", "--model", "hashing"],
        capture_output=True, text=True,
    )
    assert run.returncode == 2 and "budget" in run.stderr
