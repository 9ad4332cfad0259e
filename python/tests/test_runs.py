"""WikiTrace through the bindings: add runs, compile them, read the first context for a new task,
descend from an insight to its compilation, run and cited steps, and search the runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import trajwiki
from conftest import REPO

RUNS = REPO / "tests" / "fixtures" / "runs.jsonl"


def runs() -> list[dict[str, Any]]:
    return [json.loads(line) for line in RUNS.read_text(encoding="utf-8").splitlines()]


@pytest.fixture()
def memory(tmp_path: Path) -> trajwiki.Memory:
    m = trajwiki.Memory(tmp_path / "store", model="hashing", device="cpu")
    added = m.add_runs(runs())
    assert (added["added"], added["new_namespaces"]) == (3, ["kitchen"])
    assert m.add_runs(runs())["added"] == 0
    return m


def test_compile_then_first_context_then_descend(memory: trajwiki.Memory) -> None:
    with pytest.raises(trajwiki.NotFoundError, match="not compiled yet"):
        memory.first_context("heat a potato", namespace="kitchen")
    (report,) = memory.compile_runs()
    assert (report["runs"], report["success"], report["partial"], report["failure"]) == (3, 1, 1, 1)
    assert memory.compile_runs("kitchen")[0]["insights"] == report["insights"]

    ctx = memory.first_context("heat some potato and put it in the bin.", namespace="kitchen")
    assert len(ctx["insights"]) == report["insights"]
    assert ctx["similar"][0]["external_ref"] == "heat-1"
    assert ctx["insights"][0]["outcome"] == {"kind": "success"}
    doubtful = [i for i in ctx["insights"] if i["outcome"]["kind"] != "success"]
    assert doubtful and all(
        any(d["reason"] == "from_failed_run" for d in i["descend"]) for i in doubtful
    )
    assert "## Most similar past runs" in ctx["text"]

    first = ctx["insights"][0]
    opened = memory.open_insight(first["id"])
    assert opened["insight"]["guideline"] == first["guideline"]
    assert opened["compilation"]["id"] == opened["insight"]["compilation"]
    assert [s["step"] for s in opened["cited_steps"]] == [1, 2]
    assert opened["cited_steps"][0]["observation"] == "Nothing happens."

    run = memory.open_run(opened["run"]["id"])
    assert run["run"]["external_ref"] == "heat-1"
    assert len(run["run"]["steps"]) == 4
    assert run["compilation"]["diagnosis"].startswith("Success")

    left_out = memory.first_context(
        "heat some potato", namespace="kitchen", exclude=opened["run"]["id"], similar=1
    )
    assert [s["external_ref"] for s in left_out["similar"]] == ["heat-2"]


def test_compile_tells_each_run_committed(memory: trajwiki.Memory) -> None:
    told: list[tuple[str, str, int, int]] = []
    (report,) = memory.compile_runs("kitchen", progress=lambda *p: told.append(p))
    assert told == [("kitchen", "compiling", done, 3) for done in range(4)]
    assert report["runs"] == 3

    # An exception the callback raises comes out once the runs are compiled.
    def fail(*_: object) -> None:
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"):
        memory.compile_runs(progress=fail)
    with pytest.raises(trajwiki.InputError, match="progress: expected a callable"):
        memory.compile_runs(progress=3)


def test_grep_runs_exact_and_semantic(memory: trajwiki.Memory) -> None:
    memory.compile_runs()
    hits = memory.grep_runs("facing the MICROWAVE", namespace="kitchen")
    assert [(h["step"], h["field"]) for h in hits] == [(2, "observation"), (3, "observation")]
    (best,) = memory.grep_runs("search cotton shirt", namespace="kitchen", semantic=True, limit=1)
    assert best["action"] == "search[cotton shirt]"


def test_bad_run_input_and_unknown_ids(memory: trajwiki.Memory) -> None:
    with pytest.raises(trajwiki.InputError, match="list of dicts"):
        memory.add_runs({"task": "x"})  # type: ignore[arg-type]
    with pytest.raises(trajwiki.InputError, match="task"):
        memory.add_runs([{"id": "x", "steps": []}])
    memory.compile_runs()
    with pytest.raises(trajwiki.NotFoundError, match="no insight ins_0000000000000000"):
        memory.open_insight("ins_0000000000000000")
    with pytest.raises(trajwiki.InputError):
        memory.open_run("clm_0000000000000000")
    with pytest.raises(trajwiki.NotFoundError, match="no agent runs"):
        memory.first_context("x", namespace="nowhere")
