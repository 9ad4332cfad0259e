"""Batch indexing on a local Ray cluster (`ray.init(num_cpus=2)`): 50 synthetic namespaces with 1
and with 2 actors, each namespace exactly once and its memory byte-identical to single-process
indexing; malformed input fails its namespace alone; a failing attempt is retried and a namespace
that keeps failing leaves nothing behind. Skipped when Ray is not installed, a failure instead
with TRAJWIKI_REQUIRE_RAY=1 (scripts/test.sh installs it)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any, Iterator

import pytest

from trajwiki import Memory

if os.environ.get("TRAJWIKI_REQUIRE_RAY") == "1":
    import ray  # noqa: F401 - a missing Ray is then a failure
else:
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'ray[data]')")

from trajwiki.ray import index_namespaces  # noqa: E402

NAMESPACES = 50
CITIES = ["Oslo", "Bergen", "Lima", "Kyoto", "Porto", "Quito", "Hanoi", "Cairo"]
HOBBIES = ["hiking", "chess", "baking", "rowing", "painting", "cycling", "singing"]


def messages(i: int) -> list[dict[str, Any]]:
    """A small conversation of its own for namespace i: a fact, a change of it, a hobby."""
    a, b = CITIES[i % len(CITIES)], CITIES[(i * 3 + 1) % len(CITIES)]
    hobby = HOBBIES[i % len(HOBBIES)]
    day = 1 + i % 27
    return [
        {"speaker": f"User{i}", "text": f"I live in {a} and I work as engineer number {i}.",
         "timestamp": f"2024-03-{day:02d}T09:00:00", "session": 1},
        {"speaker": "Friend", "text": f"{a} sounds lovely! What do you do on weekends?",
         "timestamp": f"2024-03-{day:02d}T09:01:00", "session": 1},
        {"speaker": f"User{i}", "text": f"Mostly {hobby}, every Saturday since {2000 + i}.",
         "timestamp": f"2024-03-{day:02d}T09:02:00", "session": 1},
        {"speaker": f"User{i}", "text": f"Big news: I moved from {a} to {b} last week.",
         "timestamp": f"2024-06-{day:02d}T18:00:00", "session": 2},
        {"speaker": "Friend", "text": f"Congratulations on the move to {b}!",
         "timestamp": f"2024-06-{day:02d}T18:01:00", "session": 2},
    ]


def rows() -> list[dict[str, Any]]:
    return [{"namespace": f"ns-{i:02d}", "messages": messages(i)} for i in range(NAMESPACES)]


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory, cli: Path) -> dict[str, bytes]:
    """Single-process indexing: one Memory adds and builds each namespace in turn."""
    store = tmp_path_factory.mktemp("single") / "store"
    memory = Memory(store, model="hashing")
    for row in rows():
        memory.add(row["messages"], namespace=row["namespace"], source="ray")
        memory.build(namespace=row["namespace"])
    return {row["namespace"]: export(cli, store, row["namespace"]) for row in rows()}


def export(cli: Path, store: Path, namespace: str) -> bytes:
    return subprocess.run(
        [str(cli), "export", "--store", str(store), "--namespace", namespace,
         "--what", "memory"],
        check=True, capture_output=True,
    ).stdout


@pytest.mark.parametrize("actors", [1, 2])
def test_every_namespace_once_and_as_a_single_process_builds_it(
    cluster: None, reference: dict[str, bytes], cli: Path, tmp_path: Path, actors: int
) -> None:
    store = tmp_path / "store"
    seen: list[str] = []
    report = index_namespaces(rows(), f"sqlite://{store}", model="hashing", device="cpu",
                              actors=actors, progress=lambda r: seen.append(r["namespace"]))
    assert report.actors == actors
    assert report.failed == []
    names = [r["namespace"] for r in report.results]
    assert sorted(names) == sorted(reference) and len(set(names)) == NAMESPACES
    assert seen == names
    assert all(r["added"] == 5 and r["attempts"] == 1 for r in report.results)
    assert report.namespaces_per_second > 0
    assert Memory(store, model="hashing").namespaces() == sorted(reference)
    for namespace, expected in reference.items():
        assert expected, namespace
        assert export(cli, store, namespace) == expected, namespace


def test_malformed_namespaces_fail_alone_and_a_failing_one_leaves_nothing(
    cluster: None, reference: dict[str, bytes], cli: Path, tmp_path: Path
) -> None:
    good = rows()[:6]
    no_text = [dict(m) for m in messages(7)]
    del no_text[2]["text"]
    bad = [
        {"namespace": "no-text", "messages": no_text},
        {"namespace": "not-json", "messages": "[{\"speaker\": "},
        {"namespace": "no-file", "path": str(tmp_path / "missing.jsonl")},
        {"namespace": "flaky", "messages": messages(8)},
        {"namespace": "doomed", "messages": messages(9)},
    ]

    def fault(namespace: str, attempt: int) -> None:
        # Fails the first build of `flaky` and every build of `doomed`, after their messages
        # were added: the retry must find them, and giving up must take them out again.
        if namespace == "doomed" or (namespace == "flaky" and attempt == 1):
            raise RuntimeError(f"injected failure of {namespace}, attempt {attempt}")

    store = tmp_path / "store"
    report = index_namespaces(good[:3] + bad + good[3:], str(store), model="hashing",
                              device="cpu", actors=2, retries=2, fault=fault)
    by_name = {r["namespace"]: r for r in report.results}
    assert len(report.results) == len(by_name) == 11
    assert {r["namespace"] for r in report.ok} == {r["namespace"] for r in good} | {"flaky"}
    assert by_name["flaky"]["attempts"] == 2 and by_name["flaky"]["error"] is None
    failed = {r["namespace"]: r for r in report.failed}
    assert set(failed) == {"no-text", "not-json", "no-file", "doomed"}
    assert "InputError" in failed["no-text"]["error"] and "text" in failed["no-text"]["error"]
    assert failed["no-text"]["attempts"] == 1
    assert "not JSON" in failed["not-json"]["error"]
    assert "missing.jsonl" in failed["no-file"]["error"]
    assert failed["doomed"]["attempts"] == 3
    assert "injected failure of doomed, attempt 3" in failed["doomed"]["error"]
    # Nothing of a failed namespace is in the store; the others are whole.
    memory = Memory(store, model="hashing")
    assert memory.namespaces() == sorted(r["namespace"] for r in report.ok)
    for row in good:
        assert export(cli, store, row["namespace"]) == reference[row["namespace"]]


def test_a_file_per_namespace_and_repeated_namespaces(
    cluster: None, reference: dict[str, bytes], cli: Path, tmp_path: Path
) -> None:
    path = tmp_path / "ns-04.jsonl"
    path.write_text("".join(json.dumps(m) + "\n" for m in messages(4)), encoding="utf-8")
    store = tmp_path / "store"
    with pytest.raises(ValueError, match="more than once.*ns-04"):
        index_namespaces([{"namespace": "ns-04", "path": str(path)}] * 2, store,
                         model="hashing", device="cpu")
    assert not store.exists()
    report = index_namespaces(ray.data.from_items([{"namespace": "ns-04", "path": str(path)}]),
                              store, model="hashing", device="cpu")
    assert [r["status"] for r in report.results] == ["ok"]
    assert export(cli, store, "ns-04") == reference["ns-04"]
