"""The change probe (scripts/change_probe.py): its generator, its scorer on a hand-made export,
its errors, and a run end to end against the `trajwiki` binary of this checkout."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO

SCRIPT = REPO / "scripts" / "change_probe.py"


def _load():
    spec = importlib.util.spec_from_file_location("change_probe", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["change_probe"] = module
    spec.loader.exec_module(module)
    return module


probe = _load()


def _probe(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          check=False, timeout=600)


@pytest.mark.parametrize("phrasings", ["base", "heldout", "dev"])
def test_generator_scripts_every_kind_with_refs_that_say_it(phrasings: str):
    kinds: Counter = Counter()
    for seed in (1, 2, 3):
        messages, script = probe.generate(seed, phrasings=phrasings)
        assert (messages, script) == probe.generate(seed, phrasings=phrasings), \
            "not deterministic"
        assert script["phrasings"] == phrasings
        by_ref = {m["ref"]: m for m in messages}
        assert len(by_ref) == len(messages)
        sessions = {m["session"] for m in messages}
        assert 12 <= len(sessions) <= 20
        for ch in script["changes"]:
            kinds[ch["kind"]] += 1
            old, new = by_ref[ch["old_ref"]], by_ref[ch["change_ref"]]
            assert old["speaker"] == new["speaker"] == ch["subject"]
            assert old["timestamp"] == ch["old_timestamp"] < ch["as_of_before"]
            assert ch["as_of_before"] < new["timestamp"] == ch["change_timestamp"]
            assert ch["change_timestamp"] < ch["as_of_after"]
            assert ch["op"] == ("DEPRECATE" if ch["new_value"] is None else "REVISE")
            for r in ch["restatement_refs"]:
                assert old["timestamp"] < by_ref[r]["timestamp"] < new["timestamp"]
            assert old["text"] == ch["old_text"] and new["text"] == ch["change_text"]
            assert probe._matches(old["text"], ch["old_match"]), old["text"]
            if ch["op"] == "REVISE":
                assert probe._matches(new["text"], ch["new_match"]), new["text"]
            assert ch["question"].endswith("?") and ch["subject"] in ch["question"]
        for c in script["controls"]:
            assert by_ref[c["old_ref"]]["speaker"] == c["subject"]
        for d in script["distractors"]:
            assert by_ref[d["ref"]]["text"] == d["text"]
            assert by_ref[d["ref"]]["speaker"] == d["subject"]
    assert len(kinds) >= 10 and min(kinds.values()) >= 2, kinds
    for kind in probe.KINDS.values():
        assert len(kind.old) >= 3 and len(kind.change) >= 3, kind.name


def test_heldout_phrasings_keep_the_values_and_change_the_words():
    """The same seed scripts the same changes (values, subjects, sessions; the refs within a
    session move with the distractors) in both phrasings;
    the held-out wording of every scripted turn is its own, and no held-out template is a base
    one. The held-out set adds distractors (an edit from one is false); the base set has none."""
    heldout = probe.change_probe_heldout
    base_templates = {t for k in probe.KINDS.values() for t in k.old + k.restate + k.change}
    held_templates = {t for k in heldout.TEMPLATES.values() for ts in k.values() for t in ts}
    assert not base_templates & held_templates
    assert set(heldout.TEMPLATES) == set(probe.KINDS)
    for kind in heldout.TEMPLATES.values():
        assert len(kind["old"]) >= 3 and len(kind["change"]) >= 4 and kind["restate"]
        assert kind["other"]
    distractors = 0
    for seed in (1, 2, 3, 4):
        _, base = probe.generate(seed)
        _, held = probe.generate(seed, phrasings="heldout")
        assert base["distractors"] == [] and base["phrasings"] == "base"
        keys = ("kind", "subject", "attribute", "old_value", "new_value", "op", "as_of_before",
                "question")

        def sessions(entry: dict[str, Any]) -> list[str]:
            refs = [entry["old_ref"], entry["change_ref"], *entry["restatement_refs"]]
            return [r.split(":")[0] for r in refs]

        for b, h in zip(base["changes"], held["changes"], strict=True):
            assert {k: b.get(k) for k in keys} == {k: h.get(k) for k in keys}
            assert sessions(b) == sessions(h)
            assert b["old_text"] != h["old_text"] and b["change_text"] != h["change_text"]
        assert len(base["controls"]) == len(held["controls"])
        distractors += len(held["distractors"])
    assert distractors >= 8


def test_dev_phrasings_are_their_own_and_keep_the_values():
    """The development phrasings (change_probe_dev.py, for tuning the slot reader) share no
    template with the base set, cover every kind, and script the same changes as the base."""
    dev = probe.change_probe_dev
    base_templates = {t for k in probe.KINDS.values() for t in k.old + k.restate + k.change}
    dev_templates = {t.split("|", 1)[-1] for k in dev.TEMPLATES.values() for ts in k.values()
                     for t in ts}
    assert not base_templates & dev_templates
    assert set(dev.TEMPLATES) == set(probe.KINDS)
    distractors = 0
    for seed in (1, 2, 3, 4):
        _, base = probe.generate(seed)
        _, d = probe.generate(seed, phrasings="dev")
        assert d["phrasings"] == "dev"
        for b, h in zip(base["changes"], d["changes"], strict=True):
            assert (b["kind"], b["old_value"], b["new_value"]) == \
                (h["kind"], h["old_value"], h["new_value"])
        distractors += len(d["distractors"])
    assert distractors >= 8


def test_generate_refuses_unknown_phrasings(tmp_path: Path):
    done = _probe("generate", "--seed", "1", "--out", str(tmp_path), "--phrasings", "fancy")
    assert done.returncode == 2 and "--phrasings 'fancy'" in done.stderr
    done = _probe("run", "--bin", "trajwiki", "--phrasings", "fancy")
    assert done.returncode == 2 and "--phrasings 'fancy'" in done.stderr
    done = _probe("run", "--bin", "trajwiki", "--budgets", "300,x")
    assert done.returncode == 2 and "'x' is not a budget" in done.stderr


def test_generated_conversation_is_ingest_jsonl(tmp_path: Path):
    done = _probe("generate", "--seed", "4", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    lines = (tmp_path / "conversation.jsonl").read_text().splitlines()
    fields = {"namespace", "session", "seq", "speaker", "text", "timestamp", "ref"}
    assert all(set(json.loads(line)) == fields for line in lines)
    script = json.loads((tmp_path / "script.json").read_text())
    assert script["namespace"] == "probe-4" and script["changes"]


# A hand-made memory: Ann moves (D1:3 -> D3:2, found), Ann's dog is renamed (D1:5 -> D3:4,
# missed: a DEPRECATE where a REVISE was due), Ben's home (D2:3, a control, restated at D2:5)
# wrongly revised by Ann's move message, and an edit between chatter claims.
FAKE_SCRIPT: dict[str, Any] = {
    "changes": [
        {"kind": "move", "subject": "Ann", "attribute": "home city", "old_value": "Bergen",
         "new_value": "Oslo", "op": "REVISE", "old_ref": "D1:3", "restatement_refs": ["D2:1"],
         "change_ref": "D3:2", "as_of_before": "2024-02-01", "as_of_after": "2024-03-02",
         "new_match": ["Oslo"], "old_match": ["Bergen"]},
        {"kind": "pet_renamed", "subject": "Ann", "attribute": "dog's name", "old_value": "Max",
         "new_value": "Buddy", "op": "REVISE", "old_ref": "D1:5", "restatement_refs": [],
         "change_ref": "D3:4", "as_of_before": "2024-02-01", "as_of_after": "2024-03-02",
         "new_match": ["Buddy"], "old_match": ["Max"]},
    ],
    "controls": [
        {"kind": "move", "subject": "Ben", "attribute": "home city", "old_value": "Perth",
         "old_ref": "D2:3", "restatement_refs": ["D2:5"]},
    ],
}


def _export_lines() -> list[str]:
    claims = [("c1", "Ann lives in Bergen.", ["m13", "m21"], "deprecated"),
              ("c2", "Ann moved to Oslo.", ["m32", "m13"], "active"),
              ("c3", "Ann's dog is called Max.", ["m15"], "deprecated"),
              ("c4", "Ben lives in Perth.", ["m23"], "deprecated"),
              ("c5", "Ben lives in Oslo now.", ["m32", "m23"], "active"),
              ("c6", "Ann baked bread.", ["m17"], "deprecated"),
              ("c7", "Ann baked a cake.", ["m18"], "active")]
    ops = [(1, "REVISE", "c1", "c2", ["m32"]), (2, "DEPRECATE", "c3", None, ["m34"]),
           (3, "REVISE", "c4", "c5", ["m32"]), (4, "REVISE", "c6", "c7", ["m18"]),
           (5, "ADD", None, "c1", ["m13"])]
    lines = [json.dumps({"record": "claim", "current_status": st,
                         "value": {"id": i, "text": t, "source_message_ids": src,
                                   "status": "active"}}) for i, t, src, st in claims]
    for seq, op, target, new, src in ops:
        value = {"seq": seq, "op": op, "source_message_ids": src}
        if target:
            value["target"] = target
        if new:
            value["new_claim"] = new
        lines.append(json.dumps({"record": "claim_op", "value": value}))
    return lines


REFS = {"m13": "D1:3", "m15": "D1:5", "m17": "D1:7", "m18": "D1:8", "m21": "D2:1",
        "m23": "D2:3", "m32": "D3:2", "m34": "D3:4"}


def _fake_history(claim: str, as_of: str) -> list[dict[str, Any]]:
    """Before March: every claim active and unrevised; after: the export's ops."""
    if as_of < "2024-03":
        return [{"op": "ADD", "claim": claim, "status": "active"}]
    if claim == "c1":
        return [{"op": "ADD", "claim": "c1", "status": "deprecated"},
                {"op": "REVISE", "claim": "c2", "text": "Ann moved to Oslo.", "status": "active",
                 "target": "c1", "target_status": "deprecated"}]
    if claim == "c3":
        return [{"op": "ADD", "claim": "c3", "status": "deprecated"},
                {"op": "DEPRECATE", "claim": "c3", "status": "deprecated", "target": "c3",
                 "target_status": "deprecated"}]
    return [{"op": "ADD", "claim": claim, "status": "active"}]


def test_scorer_counts_found_missed_and_false_edits():
    memory = probe.parse_memory(_export_lines(), REFS)
    result = probe.score(FAKE_SCRIPT, memory, _fake_history)
    assert result.ops == 4 and result.correct_ops == 1
    assert result.precision == pytest.approx(0.25)
    assert result.recall == pytest.approx(0.5)
    assert dict(result.rows["move"]) == {"expected": 1, "found": 1, "false": 1, "as_of_ok": 1,
                                         "restated": 2, "merged": 1}
    assert dict(result.rows["pet_renamed"]) == {"expected": 1, "missed": 1, "false": 1}
    assert dict(result.rows["(chatter)"]) == {"false": 1}
    assert len(result.missed) == 1 and "pet_renamed" in result.missed[0]
    whys = sorted(x.split(": ", 1)[1] for x in result.false)
    assert whys == ["DEPRECATE where REVISE was expected", "an edit between chatter claims",
                    "the change edits Ben's home city, which never changed"]
    # The renamed dog's claim is deprecated after the change, but no claim names Buddy.
    assert len(result.as_of_wrong) == 1 and "Buddy" in result.as_of_wrong[0]
    # Ann's restatement (D2:1) is a source of the claim of D1:3; Ben's (D2:5) is not.
    assert result.unmerged == ["move Ben D2:3 restated at D2:5"]
    table = probe.format_score(result)
    assert "precision 0.250" in table and "recall 0.500" in table


# The context of "Where does Ann live now?": Ann's old statement marked, her move there; Ben's
# home (a control, another speaker) is not Ann's old value.
CONTEXT_RIGHT = """## 1 February 2024
D1:3 Ann: I live in Bergen. ["these days" = February 2024] (superseded by D3:2)
D2:1 Ann: Still in Bergen, I love it here. (superseded by D3:2)
D2:3 Ben: I live in Perth.
## 1 March 2024
D3:2 Ann: We moved from Bergen to Oslo last week!"""
# Ann's restatement unmarked: the old value is still given as current.
CONTEXT_STALE = CONTEXT_RIGHT.replace("I love it here. (superseded by D3:2)", "I love it here.")
# The move absent (the new value nowhere).
CONTEXT_NO_NEW = "\n".join(CONTEXT_RIGHT.splitlines()[:4])


def test_context_check_wants_the_new_value_and_the_old_one_marked():
    move, renamed = FAKE_SCRIPT["changes"]
    assert probe.check_context(move, CONTEXT_RIGHT) is None
    assert "D2:1 'Still in Bergen, I love it here.'" in probe.check_context(move, CONTEXT_STALE)
    assert "new value 'Oslo' is absent" in probe.check_context(move, CONTEXT_NO_NEW)
    # A withdrawal: the change message, or an old statement marked withdrawn, is enough.
    withdrawn = {**renamed, "op": "DEPRECATE", "new_value": None, "new_match": []}
    assert probe.check_context(withdrawn, "D1:5 Ann: My dog Max snores. (withdrawn later)") is None
    assert probe.check_context(withdrawn, "D3:4 Ann: We gave Max to my aunt.") is None
    assert "unmarked" in probe.check_context(withdrawn, "D1:5 Ann: My dog Max snores.")
    assert "neither" in probe.check_context(withdrawn, "D1:7 Ann: Hello.")
    # A count: its old number in a line about the animals, its new one next to them.
    count = {**move, "kind": "count_grows", "old_value": "four cats", "old_match": ["cats"],
             "new_match": ["five", "fifth", "5"], "new_value": "five cats"}
    assert probe.check_context(count, "D3:2 Ann: We're up to five cats now.\n"
                                      "D2:2 Ann: The shelter had nine cats, so sad.") is None
    assert "D2:1 'The cats are fine, all four of them.'" in probe.check_context(
        count, "D3:2 Ann: We're up to five cats now.\n"
               "D2:1 Ann: The cats are fine, all four of them.")
    # A capitalised value is a word as written: "May" is not "maybe".
    may = {**move, "old_match": ["May"], "new_match": ["June"]}
    assert probe.check_context(may, "D3:2 Ann: It's June, maybe I said May before.\n"
                                    "D1:9 Ann: Maybe later.") is None


def test_scorer_counts_contexts_per_budget():
    memory = probe.parse_memory(_export_lines(), REFS)
    asked: list[tuple[list[str], int]] = []

    def ask(questions: list[str], budget: int) -> list[str]:
        asked.append((questions, budget))
        context = CONTEXT_RIGHT if budget == 700 else CONTEXT_STALE
        return [context] * len(questions)

    result = probe.score(FAKE_SCRIPT, memory, _fake_history, ask=ask, budgets=[300, 700])
    assert [b for _, b in asked] == [300, 700]
    assert asked[0][0][0] == "Where does Ann live now?"
    assert result.context[300]["asked"] == 2 and result.context[300]["right"] == 0
    assert dict(result.context[700]) == {"asked": 2, "right": 1}
    assert result.rows["move"]["ctx700"] == 1 and result.rows["move"]["ctx300"] == 0
    assert result.context_share(700) == pytest.approx(0.5)
    assert any("'Where does Ann live now?' @300" in x for x in result.context_wrong[300])
    assert probe.floors_met(result, None, None, False, 0.5) == [
        "current-fact contexts at 300 tokens 0.000 < 0.5"]
    table = probe.format_score(result)
    assert "ctx@300" in table and "0.500 at 700 tokens (1 of 2" in table
    assert probe.score_json(result)["context"]["700"]["share"] == pytest.approx(0.5)


def test_scorer_as_of_needs_the_old_claim_held_before_the_change():
    memory = probe.parse_memory(_export_lines(), REFS)

    def late(claim: str, as_of: str) -> list[dict[str, Any]]:
        return [] if as_of < "2024-03" else _fake_history(claim, as_of)

    result = probe.score(FAKE_SCRIPT, memory, late)
    assert result.total("as_of_ok") == 0
    assert "is absent" in result.as_of_wrong[0]


def test_scorer_as_of_needs_every_claim_of_the_old_value_deprecated():
    script = json.loads(json.dumps(FAKE_SCRIPT))
    script["changes"][0]["restatement_refs"].append("D2:2")
    stale = {"record": "claim", "current_status": "active",
             "value": {"id": "c8", "text": "Ann still lives in Bergen.",
                       "source_message_ids": ["m22"], "status": "active"}}
    memory = probe.parse_memory(_export_lines() + [json.dumps(stale)], {**REFS, "m22": "D2:2"})
    result = probe.score(script, memory, _fake_history)
    assert result.rows["move"]["found"] == 1 and result.rows["move"]["as_of_ok"] == 0
    assert "c8 'Ann still lives in Bergen.' still holds the old value" in result.as_of_wrong[0]


def _oracle(script: dict[str, Any]):
    """The memory a perfect build would make of a script: a claim per fact (restatements as its
    sources), a REVISE or DEPRECATE per change, and the history that follows from them."""
    claims: dict[str, dict[str, Any]] = {}
    ops: list[dict[str, Any]] = []
    added: dict[str, str] = {}  # claim -> when it was said
    changed: dict[str, tuple[str, str | None]] = {}  # old claim -> (when, new claim)
    for i, entry in enumerate(script["changes"] + script["controls"]):
        old = f"old{i}"
        claims[old] = {"text": entry["old_text"], "refs": {entry["old_ref"],
                                                           *entry["restatement_refs"]},
                       "status": "active"}
        added[old] = entry["old_timestamp"]
        if "change_ref" not in entry:
            continue
        new = f"new{i}" if entry["op"] == "REVISE" else None
        if new:
            claims[new] = {"text": entry["change_text"],
                           "refs": {entry["change_ref"], entry["old_ref"]}, "status": "active"}
        claims[old]["status"] = "deprecated"
        ops.append({"seq": len(ops) + 1, "op": entry["op"], "target": old, "new_claim": new,
                    "refs": {entry["change_ref"]}})
        changed[old] = (entry["change_timestamp"], new)

    def history(claim: str, as_of: str) -> list[dict[str, Any]]:
        if claim not in added or added[claim] > as_of:
            return []
        entries = [{"op": "ADD", "claim": claim, "status": "active"}]
        when, new = changed.get(claim, ("9999", None))
        if when <= as_of:
            entries[0]["status"] = "deprecated"
            entries.append({"op": "REVISE" if new else "DEPRECATE", "claim": new or claim,
                            "text": claims[new]["text"] if new else None, "status": "active"
                            if new else "deprecated", "target": claim,
                            "target_status": "deprecated"})
        return entries

    return probe.Memory(claims, ops), history


@pytest.mark.parametrize("phrasings", ["base", "heldout"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_perfect_memory_scores_full_marks(seed: int, phrasings: str):
    _, script = probe.generate(seed, phrasings=phrasings)
    memory, history = _oracle(script)
    result = probe.score(script, memory, history)
    assert (result.precision, result.recall) == (1.0, 1.0), probe.format_score(result)
    assert result.total("as_of_ok") == len(script["changes"]), result.as_of_wrong
    assert result.total("merged") == result.total("restated") > 0


def test_score_names_a_missing_script_field(tmp_path: Path):
    bad = json.loads(json.dumps(FAKE_SCRIPT))
    del bad["changes"][1]["change_ref"]
    path = tmp_path / "script.json"
    path.write_text(json.dumps(bad))
    done = _probe("score", "--bin", "trajwiki", "--store", str(tmp_path), "--namespace", "x",
                  "--script", str(path))
    assert done.returncode == 2
    assert "changes[1] has no field 'change_ref'" in done.stderr and str(path) in done.stderr


def test_run_refuses_bad_input():
    done = _probe("run", "--bin", "trajwiki", "--seeds", "1,x")
    assert done.returncode == 2 and "'x' is not a seed" in done.stderr
    done = _probe("run", "--bin", "/nonexistent/trajwiki")
    assert done.returncode == 2 and "no such program" in done.stderr


def test_run_scores_every_scripted_change(cli: Path, tmp_path: Path):
    done = _probe("run", "--bin", str(cli), "--seeds", "2", "--json", "--keep", str(tmp_path))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    script = json.loads((tmp_path / "seed-2" / "script.json").read_text())
    assert result["expected"] == len(script["changes"])
    assert sum(k.get("expected", 0) for k in result["kinds"].values()) == result["expected"]
    assert result["ops"] >= result["correct_ops"]
    assert script["phrasings"] == "base"
    assert {b: result["context"][b]["asked"] for b in ("300", "700")} == {
        "300": result["expected"], "700": result["expected"]}


def test_run_heldout_records_its_phrasings_and_the_context_floor(cli: Path, tmp_path: Path):
    done = _probe("run", "--bin", str(cli), "--seeds", "3", "--phrasings", "heldout",
                  "--budgets", "300", "--min-context", "0", "--json", "--keep", str(tmp_path))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    script = json.loads((tmp_path / "seed-3" / "script.json").read_text())
    assert script["phrasings"] == "heldout" and script["distractors"]
    assert list(result["context"]) == ["300"]
    assert result["context"]["300"]["asked"] == len(script["changes"])


def test_change_probe_meets_the_floors(cli: Path):
    """Issue 39's edit targets on the change probe (seeds 1, 2, 3): REVISE/DEPRECATE precision at
    least 0.9 and recall at least 0.8; and issue 50's current facts first: at least 0.9 of the
    contexts asked about a changed fact right at 300 and 700 tokens (40 and 42 of 42 since the
    restatements of a changed fact are marked too; BENCHMARKS.md "The change probe")."""
    done = _probe("run", "--bin", str(cli), "--seeds", "1,2,3", "--min-precision", "0.9",
                  "--min-recall", "0.8", "--min-context", "0.9")
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
