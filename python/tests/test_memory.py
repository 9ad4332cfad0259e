"""Memory end to end with the lexical `hashing` model: add, build, search with provenance, get,
history, wiki, delete, and the exceptions bad input raises."""

from __future__ import annotations

import datetime
import threading
from pathlib import Path

import pytest

import trajwiki
from trajwiki import InputError, Memory, ModelError, NotFoundError, TrajwikiError

from conftest import conversation


@pytest.fixture()
def memory(tmp_path: Path) -> Memory:
    m = Memory(tmp_path / "store", model="hashing")
    assert m.add(conversation(), namespace="ann")["added"] == 5
    m.build(flush=True)
    return m


def test_add_is_idempotent_by_ref_or_seq_and_continues_sessions(tmp_path: Path) -> None:
    m = Memory(tmp_path / "store", model="hashing")
    with_refs = [{**c, "ref": f"A:{i}"} for i, c in enumerate(conversation()[:3])]
    first = m.add(with_refs, namespace="ann")
    assert first == {"added": 3, "unchanged": 0, "new_namespaces": ["ann"]}
    assert m.add(with_refs, namespace="ann") == {
        "added": 0,
        "unchanged": 3,
        "new_namespaces": [],
    }
    # mem0-style role/content; session 1 continues after its third message. A retry is
    # recognised by its ref, never by its words.
    later = {"role": "Ann", "content": "Bergen again.", "timestamp": "2024-03-02T10:00:00"}
    assert m.add([{**later, "ref": "later"}], namespace="ann")["added"] == 1
    assert m.add([{**later, "ref": "later"}], namespace="ann")["unchanged"] == 1
    assert m.add([{**later, "seq": 9}], namespace="ann")["added"] == 1
    assert m.add([{**later, "seq": 9}], namespace="ann")["unchanged"] == 1
    # Without a ref or seq: a new message, after the last one (position 10).
    assert m.add([later], namespace="ann")["added"] == 1
    with pytest.raises(InputError, match="field `ref` differs"):
        m.add([{**later, "seq": 10, "ref": "other"}], namespace="ann")
    assert m.namespaces() == ["ann"]


def test_equal_messages_are_each_a_message(tmp_path: Path) -> None:
    # People say "lol" many times: without a seq or a ref every message is a new one.
    m = Memory(tmp_path / "store", model="hashing")
    lol = {"speaker": "Bob", "text": "lol", "timestamp": "2024-03-01T09:00:00"}
    assert m.add([lol, lol], namespace="b")["added"] == 2
    assert m.add([lol, lol], namespace="b")["added"] == 2
    assert m.add([lol], namespace="b")["added"] == 1
    (report,) = m.build("b")
    assert report["messages"] == 5


def test_search_returns_context_with_provenance(memory: Memory) -> None:
    hit = memory.search("Where does Ann live now?", namespace="ann", budget=200)
    assert isinstance(hit, trajwiki.SearchResult)
    assert hit.mode == "full" and hit.budget == 200
    assert 0 < hit.context_tokens <= 200
    assert [e.ref for e in hit.evidence] == hit.source_refs
    assert any("Oslo" in e.text for e in hit.evidence)
    for e in hit.evidence:
        assert e.ref in hit.context
        message = memory.get(e.message_id)
        assert message["kind"] == "message" and message["text"] == e.text
        assert e.timestamp.startswith("2024-")
        assert e.snapshot is not None and e.trajectory is not None
        snapshot = memory.get(e.snapshot)
        assert e.message_id in snapshot["source_message_ids"]
        assert snapshot["trajectory"] == e.trajectory
        for c in e.claims:
            claim = memory.get(c.id)
            assert e.message_id in claim["source_message_ids"]
            assert claim["current_status"] == c.status
    assert hit.trajectories and all(t.id.startswith("trj_") for t in hit.trajectories)
    assert all(p.id.startswith("pg_") for p in hit.pages)
    d = hit.diagnostics
    assert d["candidate_universe"] >= len(hit.trajectories)
    assert d["candidates"]["trajectories"] == d["candidate_universe"]
    assert set(d["candidates"]) == {"pages", "trajectories", "snapshots", "messages"}
    assert set(d["timings_ms"]) >= {"index_load", "query_embedding", "render", "stages"}


def test_the_index_is_loaded_once_and_follows_every_write(memory: Memory, tmp_path: Path) -> None:
    first = memory.search("Where does Ann live now?", namespace="ann")
    again = memory.search("Where does Ann live now?", namespace="ann")
    assert first.diagnostics["timings_ms"]["index_load"] > 0
    assert again.diagnostics["timings_ms"]["index_load"] == 0
    assert again.context == first.context
    # This memory's own write is seen by the next search.
    fact = {"speaker": "Ann", "text": "I adopted a cat named Pixel.",
            "timestamp": "2024-06-01T10:00:00", "session": 3}
    memory.add([fact], namespace="ann")
    memory.build(rebuild=True)
    assert "Pixel" in memory.search("What is Ann's cat called?", namespace="ann").context
    # So is a write through another connection to the same store.
    other = Memory(memory.path, model="hashing")
    other.add([dict(fact, text="I also adopted a parrot named Kiwi.", timestamp="2024-06-02T10:00:00")],
              namespace="ann")
    other.build(rebuild=True)
    assert "Kiwi" in memory.search("What is Ann's parrot called?", namespace="ann").context
    other.delete("ann")
    with pytest.raises(NotFoundError):
        memory.search("Kiwi", namespace="ann")


def test_the_index_cache_is_bounded_by_bytes(tmp_path: Path) -> None:
    m = Memory(tmp_path / "store", model="hashing")
    for ns in ("ann", "bob"):
        m.add(conversation(), namespace=ns)
    m.build(flush=True)
    q = "Where does Ann live now?"
    m.search(q, namespace="ann")
    one = m.index_cache["bytes"]
    assert m.index_cache["namespaces"] == ["ann"] and one > 0
    # Room for one index only: the least recently used goes.
    small = Memory(m.path, model="hashing", index_cache_bytes=one + one // 2)
    small.search(q, namespace="ann")
    small.search(q, namespace="bob")
    assert small.index_cache["namespaces"] == ["bob"]
    assert small.search(q, namespace="ann").diagnostics["timings_ms"]["index_load"] > 0
    # No room at all: every search loads.
    none = Memory(m.path, model="hashing", index_cache_bytes=0)
    none.search(q, namespace="ann")
    assert none.search(q, namespace="ann").diagnostics["timings_ms"]["index_load"] > 0
    assert none.index_cache == {"namespaces": [], "bytes": 0, "capacity": 0}


def test_search_options(memory: Memory) -> None:
    one = memory.search("hiking", namespace="ann", k=1, mode="no-wiki", budget=50)
    assert len(one.trajectories) <= 1 and one.mode == "no-wiki"
    assert one.context_tokens <= 50
    for mode in trajwiki.MODES:
        assert memory.search("hiking", namespace="ann", mode=mode).mode == mode


def test_history_wiki_and_get(memory: Memory) -> None:
    hit = memory.search("Oslo", namespace="ann")
    trajectory = hit.evidence[0].trajectory
    assert trajectory is not None
    rows = memory.history(trajectory)
    assert rows and all(r["op"] in ("ADD", "REVISE", "DEPRECATE") for r in rows)
    assert [r["seq"] for r in rows] == sorted(r["seq"] for r in rows)
    assert all(s["ref"] for r in rows for s in r["sources"])
    early = memory.history(trajectory, as_of=datetime.date(2024, 3, 2))
    assert all(r["at"] < "2024-03-02" for r in early)
    assert memory.history(trajectory, as_of="2024-03-02") == early
    assert len(early) < len(rows) or all(r["at"] < "2024-03-02" for r in rows)
    claim = rows[0]["claim"]
    assert memory.history(claim)[0]["claim"] == claim
    pages = memory.wiki("ann")
    assert pages and all(p["namespace"] == "ann" for p in pages)
    assert memory.get(pages[0]["id"])["kind"] == "page"
    assert memory.get(trajectory)["kind"] == "trajectory"
    # Scoped to a namespace, another namespace's ids are not found.
    assert memory.get(trajectory, namespace="ann")["kind"] == "trajectory"
    memory.add(conversation(), namespace="bob")
    with pytest.raises(NotFoundError):
        memory.get(trajectory, namespace="bob")


def test_delete_removes_the_namespace(memory: Memory) -> None:
    hit = memory.search("Oslo", namespace="ann")
    assert memory.delete("ann") is True
    assert memory.delete("ann") is False
    assert memory.namespaces() == []
    with pytest.raises(NotFoundError):
        memory.get(hit.evidence[0].message_id)
    with pytest.raises(NotFoundError):
        memory.search("Oslo", namespace="ann")
    with pytest.raises(NotFoundError):
        memory.wiki("ann")


def test_errors_map_to_the_hierarchy(memory: Memory, tmp_path: Path) -> None:
    cases = [
        (lambda: memory.get("nonsense"), InputError, "not a trajwiki id"),
        (lambda: memory.get("trj_0123456789abcdef"), NotFoundError, "no trajectory"),
        (lambda: memory.get(42), InputError, "id must be a str"),
        (lambda: memory.search("x", namespace="nobody"), NotFoundError, "no messages"),
        (lambda: memory.search("x", namespace="ann", mode="magic"), InputError, "unknown mode"),
        (lambda: memory.search("x", namespace="ann", budget=0), InputError, "budget"),
        (lambda: memory.search(["x"], namespace="ann"), InputError, "query must be a str"),
        (lambda: memory.history(memory.wiki("ann")[0]["id"]), InputError, "not a wiki page"),
        (lambda: memory.history("trj_0123456789abcdef", as_of="soon"), InputError, "as_of"),
        (lambda: memory.add("hello"), InputError, "list of message dicts"),
        (lambda: memory.add([{"speaker": "A", "text": "x"}], namespace="ann"), InputError,
         "timestamp"),
        (lambda: memory.add([{"speaker": "A", "text": "x", "timestamp": "2024-01-01"}]),
         InputError, "namespace"),
        (lambda: memory.add([{"namespace": "other", "speaker": "A", "text": "x",
                              "timestamp": "2024-01-01"}], namespace="ann"),
         InputError, "namespace"),
        # Other content under a stored identity (session 1, position 1).
        (lambda: memory.add([{"speaker": "Ann", "text": "changed", "seq": 1,
                              "timestamp": "2024-03-01T09:00:00"}], namespace="ann"),
         InputError, "conflicting message"),
        (lambda: Memory(tmp_path / "s2", device="tpu"), InputError, "unknown device"),
        (lambda: Memory(tmp_path / "s2", config=tmp_path / "none.toml"), InputError,
         "cannot read configuration .*none.toml: No such file"),
        (lambda: Memory(tmp_path / "s3", device="cuda"), ModelError, "cuda"),
        (lambda: Memory(tmp_path / "s4", model="no-such-model").build(), ModelError,
         "no-such-model"),
        (lambda: Memory(tmp_path / "s5", model="hashing").build(), NotFoundError,
         "no namespace"),
    ]
    for call, kind, text in cases:
        with pytest.raises(kind, match=text) as info:
            call()
        assert isinstance(info.value, TrajwikiError)


def test_build_again_after_new_messages(memory: Memory) -> None:
    more = [{"speaker": "Ann", "text": "Oslo has great museums.", "session": 3,
             "timestamp": "2024-07-01T12:00:00"}]
    assert memory.add(more, namespace="ann")["added"] == 1
    (report,) = memory.build("ann")
    assert report["messages"] == 6
    hit = memory.search("museums", namespace="ann", mode="turn-bm25", budget=30)
    assert any("museums" in e.text for e in hit.evidence)
    (again,) = memory.build("ann", rebuild=True)
    assert again["snapshots"] == report["snapshots"]
    assert memory.search("museums", namespace="ann").source_refs == memory.search(
        "museums", namespace="ann"
    ).source_refs


def test_build_tells_its_progress(tmp_path: Path) -> None:
    m = Memory(tmp_path / "store", model="hashing")
    m.add(conversation(), namespace="ann")
    told: list[tuple[str, str, int, int]] = []
    (report,) = m.build("ann", flush=True, progress=lambda *p: told.append(p))
    stages = ["loading", "embedding", "folding", "pages", "committing", "vectors"]
    seen = [stage for _, stage, _, _ in told]
    assert sorted(set(seen), key=stages.index) == stages, seen
    assert seen == sorted(seen, key=stages.index), "stages in the order a build passes them"
    assert {ns for ns, _, _, _ in told} == {"ann"}
    folding = [(done, total) for _, stage, done, total in told if stage == "folding"]
    assert folding[-1] == (report["messages"], report["messages"]), folding

    # An exception the callback raises comes out once the build is done: the memory is built.
    m.add([{"speaker": "Ann", "text": "Oslo next.", "session": 3,
            "timestamp": "2024-07-01T12:00:00"}], namespace="ann")

    def fail(*_: object) -> None:
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"):
        m.build("ann", flush=True, progress=fail)
    (again,) = m.build("ann")
    assert again["appended"] == 0 and again["messages"] == report["messages"] + 1
    with pytest.raises(InputError, match="progress: expected a callable"):
        m.build("ann", progress=3)


def test_concurrent_searches_agree(memory: Memory) -> None:
    """Searches on several threads of one Memory all finish with the same answer."""
    results: list[list[str]] = []

    def run() -> None:
        results.append(memory.search("Where does Ann live?", namespace="ann").source_refs)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(results) == 4 and all(r == results[0] for r in results)


def test_add_accepts_datetimes_and_locomo_lists(tmp_path: Path) -> None:
    m = Memory(tmp_path / "store", model="hashing")
    when = datetime.datetime(2024, 1, 1, 9, 30)
    msg = {"speaker": "Ann", "text": "Hello.", "timestamp": when, "ref": "A:1"}
    assert m.add([msg], namespace="ann")["added"] == 1
    assert m.add([{**msg, "timestamp": "2024-01-01T09:30:00"}], namespace="ann")["added"] == 0
    sample = {"sample_id": "s1", "conversation": {
        "speaker_a": "Ann", "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "Hi Bob!"}],
    }, "qa": []}
    with pytest.raises(InputError, match="renames one LoCoMo sample"):
        m.add([sample, {**sample, "sample_id": "s2"}], namespace="x")
    report = m.add([sample, {**sample, "sample_id": "s2"}])
    assert report["new_namespaces"] == ["s1", "s2"]
    assert m.add(sample, namespace="renamed")["new_namespaces"] == ["renamed"]
    assert m.namespaces() == ["ann", "renamed", "s1", "s2"]


def test_device_selects_the_scoring_backend(tmp_path: Path) -> None:
    cpu = Memory(tmp_path / "a", model="hashing", device="cpu")
    assert cpu.device == "cpu" and cpu.scoring_backend == "cpu"
    auto = Memory(tmp_path / "b", model="hashing")
    # `auto` takes the GPU only where one is usable (and the wheel was built with `cuda`).
    assert auto.device == "auto" and auto.scoring_backend in ("cpu", "cuda")


def test_adding_one_message_at_a_time_builds_the_same_memory(tmp_path: Path) -> None:
    """Memory.add(..., build=True) folds what arrived; message by message equals at once."""
    once = Memory(tmp_path / "once", model="hashing")
    once.add(conversation(), namespace="ann")
    (at_once,) = once.build(flush=True)
    stream = Memory(tmp_path / "stream", model="hashing")
    for message in conversation():
        report = stream.add([message], namespace="ann", build=True)
        assert report["added"] == 1 and len(report["built"]) == 1
    (streamed,) = stream.build(flush=True)
    for key in ("messages", "snapshots", "claims", "trajectories", "revises", "pending_messages"):
        assert streamed[key] == at_once[key], key
    question = "Where does Ann live now?"
    assert stream.search(question, namespace="ann").context == once.search(
        question, namespace="ann"
    ).context


def test_ask_without_a_model_returns_the_evidence(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TRAJWIKI_LLM_BASE_URL", raising=False)
    monkeypatch.delenv("TRAJWIKI_LLM_MODEL", raising=False)
    out = memory.ask("Where does Ann live now?", namespace="ann", budget=200)
    assert out["status"] == "no_answer_model"
    assert "no answer model configured" in out["answer"]["abstain_reason"]
    assert out["evidence"] and out["llm"] is None
    with pytest.raises(InputError):
        memory.ask("Where?", namespace="ann", llm_model="m")


def test_ask_with_a_model_checks_its_refs(memory: Memory) -> None:
    """A scripted OpenAI-compatible endpoint on 127.0.0.1 answers, citing one ref of the context
    and one that is not in it."""
    import http.server
    import json

    seen: list[dict] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the http.server API)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(body)
            prompt = body["messages"][1]["content"]
            first_ref = next(
                line.split()[0] for line in prompt.splitlines() if line.startswith("msg_")
            )
            answer = {
                "can_answer": True, "answer_type": "fact", "final_answer": "Oslo",
                "supporting_facts": [], "supporting_source_refs": [first_ref, "X9:9"],
                "counted_events": [], "excluded_events": [], "uncertainties": [],
                "abstain_reason": "",
            }
            reply = json.dumps({"choices": [{"message": {"content": json.dumps(answer)}}]})
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply.encode())

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        out = memory.ask(
            "Where does Ann live now?", namespace="ann", llm_base_url=url, llm_model="scripted"
        )
        assert out["status"] == "answered", out
        assert out["answer"]["final_answer"] == "Oslo"
        assert out["answer"]["removed_refs"] == ["X9:9"]
        assert out["answer"]["supporting_source_refs"][0] in out["source_refs"]
        again = memory.ask(
            "Where does Ann live now?", namespace="ann", llm_base_url=url, llm_model="scripted"
        )
        assert again["answer"] == out["answer"] and len(seen) == 1
        assert again["llm"]["usage"]["answer"]["cached"] == 1
    finally:
        server.shutdown()
