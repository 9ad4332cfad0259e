#!/usr/bin/env python3
"""Late arrival (issue 38): LoCoMo coverage of a store built from sessions streamed in a shuffled
order against the batch build of the same conversation, and `trajwiki check` of the shuffled store.

    python3 scripts/bench_late.py [--conv conv-26 --conv conv-30 ...] [--seed 38]
                                  [--bin target/debug/trajwiki] [--work target/bench-late]
                                  [--model hashing] [--mode full] [--budget 2700]
                                  [--config memory.toml]

Per conversation (default: conv-26, conv-30, conv-43 of ../shared/data/locomo/locomo7.json):
- batch: `trajwiki eval locomo` on a file holding that conversation alone (ingest in file order,
  one build);
- shuffled: its sessions in an order shuffled with --seed (random.Random(seed + k) for the k-th
  conversation given), each written to a LoCoMo file of its own, ingested and built (not
  flushed: the last exchange stays open, as when a conversation streams in); then
  `trajwiki check --json` on that store and `trajwiki eval locomo --store` on it (the ingest is
  a no-op, the build flushes the open exchange).
Prints, per conversation and over all of them (questions pooled), the coverage of category 1
and of categories 1-4 of both builds, the difference, and the check's verdict; writes
--work/result.json. Exits 1 when a check fails. `../shared/tools/check_retrieval.py`, when
present, recomputes each coverage from retrieval.jsonl; a disagreement is an error.
"""
import argparse
import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo7.json"
CHECKER = ROOT.parent / "shared" / "tools" / "check_retrieval.py"


def run(args, **kw):
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"{' '.join(map(str, args))} failed ({r.returncode}):\n{r.stderr}")
    return r.stdout


def sessions(conv):
    """The session numbers of a LoCoMo conversation, ascending."""
    return sorted(
        int(k[len("session_"):])
        for k in conv
        if k.startswith("session_") and not k.endswith("_date_time")
    )


def one_session(sample, n):
    """A LoCoMo file body holding session n of sample alone, without questions."""
    conv = sample["conversation"]
    keep = {k: conv[k] for k in ("speaker_a", "speaker_b")}
    keep[f"session_{n}"] = conv[f"session_{n}"]
    keep[f"session_{n}_date_time"] = conv[f"session_{n}_date_time"]
    return [{"sample_id": sample["sample_id"], "conversation": keep, "qa": []}]


def cell(out, mode, budget):
    """(category 1, categories 1-4) coverage and question counts from summary.json."""
    s = json.load(open(out / "summary.json"))
    cells = s["cells"][mode][str(budget)]
    return {k: (v["coverage"], v["questions"]) for k, v in cells.items()}


def checked(data, out, mode, budget, got):
    """(category 1, categories 1-4) coverage as check_retrieval.py recomputes it from
    retrieval.jsonl; exits when it finds the file inconsistent or disagrees with `got`."""
    if not CHECKER.exists():
        return None
    r = subprocess.run([sys.executable, str(CHECKER), str(data), str(out / "retrieval.jsonl")],
                       capture_output=True, text=True)
    last = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
    words = last.split()
    if r.returncode != 0 or words[:2] != ["ok", f"{mode}@{budget}:"]:
        sys.exit(f"check_retrieval.py on {out}: {r.stdout}{r.stderr}")
    cat1, every = float(words[3]), float(words[5])
    if abs(cat1 - got["1"][0]) > 5e-4 or abs(every - got["all"][0]) > 5e-4:
        sys.exit(f"check_retrieval.py on {out}: cat1 {cat1} all {every}, eval said {got}")
    return cat1, every


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--conv", action="append")
    ap.add_argument("--seed", type=int, default=38)
    ap.add_argument("--bin", default=str(ROOT / "target" / "debug" / "trajwiki"))
    ap.add_argument("--work", default=str(ROOT / "target" / "bench-late"))
    ap.add_argument("--model", default="hashing")
    ap.add_argument("--mode", default="full")
    ap.add_argument("--budget", type=int, default=2700)
    ap.add_argument("--data", default=str(LOCOMO))
    ap.add_argument("--config", help="memory configuration (TOML) of every build")
    a = ap.parse_args()
    convs = a.conv or ["conv-26", "conv-30", "conv-43"]
    data = {s["sample_id"]: s for s in json.load(open(a.data))}
    work = Path(a.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    tw = a.bin
    config = ["--config", a.config] if a.config else []
    grid = ["--model", a.model, "--mode", a.mode, "--budget", str(a.budget), *config]
    rows, failed = [], False
    for k, name in enumerate(convs):
        sample = data[name]
        d = work / name
        d.mkdir()
        whole = d / "conversation.json"
        whole.write_text(json.dumps([sample]))
        run([tw, "eval", "locomo", "--data", whole, "--out", d / "batch", *grid])
        order = sessions(sample["conversation"])
        random.Random(a.seed + k).shuffle(order)
        store = d / "shuffled-store"
        for n in order:
            f = d / f"session_{n}.json"
            f.write_text(json.dumps(one_session(sample, n)))
            run([tw, "ingest", "--store", store, f, "-q"])
            run([tw, "build", "--store", store, "--namespace", name, "--model", a.model, "-q",
                 *config])
        check = subprocess.run(
            [tw, "check", "--store", str(store), "--json"], capture_output=True, text=True
        )
        problems = json.loads(check.stdout)["problems"] if check.stdout.strip() else None
        run([tw, "eval", "locomo", "--data", whole, "--out", d / "shuffled", "--store", store,
             *grid])
        batch = cell(d / "batch", a.mode, a.budget)
        shuf = cell(d / "shuffled", a.mode, a.budget)
        row = {
            "conversation": name,
            "sessions": order,
            "check_ok": check.returncode == 0,
            "check_problems": len(problems) if problems is not None else None,
            "batch": batch,
            "shuffled": shuf,
            "checker": {
                "batch": checked(whole, d / "batch", a.mode, a.budget, batch),
                "shuffled": checked(whole, d / "shuffled", a.mode, a.budget, shuf),
            },
        }
        failed |= check.returncode != 0
        rows.append(row)
        print(
            f"{name}: check {'ok' if row['check_ok'] else 'FAILED'} "
            f"({row['check_problems']} problems); "
            + "; ".join(
                f"{cat} batch {batch[cat][0]:.3f} shuffled {shuf[cat][0]:.3f} "
                f"(Δ {shuf[cat][0] - batch[cat][0]:+.3f}, {batch[cat][1]} questions)"
                for cat in sorted(batch)
            ),
            flush=True,
        )
    pooled = {}
    for which in ("batch", "shuffled"):
        for cat in sorted({c for r in rows for c in r[which]}):
            cells = [r[which][cat] for r in rows if cat in r[which]]
            q = sum(n for _, n in cells)
            cov = sum(v * n for v, n in cells) / q
            pooled.setdefault(cat, {})[which] = (cov, q)
    print(
        "overall: "
        + "; ".join(
            f"{cat} batch {v['batch'][0]:.3f} shuffled {v['shuffled'][0]:.3f} "
            f"(Δ {v['shuffled'][0] - v['batch'][0]:+.3f}, {v['batch'][1]} questions)"
            for cat, v in sorted(pooled.items())
        )
    )
    json.dump({"rows": rows, "overall": pooled, "seed": a.seed, "mode": a.mode,
               "budget": a.budget, "model": a.model}, open(work / "result.json", "w"), indent=1)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
