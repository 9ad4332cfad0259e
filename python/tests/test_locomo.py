"""One LoCoMo conversation through the bindings with MiniLM: every ref a search returns exists in
the source file, and evidence points at the memory records built from it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trajwiki import Memory


def dia_ids(sample: dict[str, Any]) -> set[str]:
    conv = sample["conversation"]
    return {
        turn["dia_id"]
        for key, turns in conv.items()
        if key.startswith("session_") and isinstance(turns, list)
        for turn in turns
    }


def test_locomo_conversation_refs_exist(
    locomo_samples: list[dict[str, Any]], minilm: str, tmp_path: Path
) -> None:
    sample = min(locomo_samples, key=lambda s: len(dia_ids(s)))
    refs = dia_ids(sample)
    ns = sample["sample_id"]
    memory = Memory(tmp_path / "store", model=minilm, device="cpu")
    report = memory.add(sample)
    assert report["added"] == len(refs) and report["new_namespaces"] == [ns]
    assert memory.add(sample)["added"] == 0
    (built,) = memory.build(flush=True)
    assert built["namespace"] == ns and built["messages"] == len(refs)
    questions = [q for q in sample["qa"] if q.get("category") != 5][:12]
    found = 0
    for q in questions:
        hit = memory.search(q["question"], namespace=ns, budget=1500)
        assert hit.source_refs and hit.context_tokens <= 1500
        assert set(hit.source_refs) <= refs, set(hit.source_refs) - refs
        for e in hit.evidence:
            assert e.ref in refs and f"{e.ref} {e.speaker}:" in hit.context
            assert e.snapshot is not None
        gold = set(q.get("evidence", []))
        found += len(gold & set(hit.source_refs))
    # Retrieval works at all: a good share of the gold evidence is in the contexts.
    gold_total = sum(len(set(q.get("evidence", []))) for q in questions)
    assert found >= gold_total // 2
