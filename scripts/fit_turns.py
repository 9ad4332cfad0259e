#!/usr/bin/env python3
"""Fits the turn model of retrieval (crates/trajwiki-retrieve/src/turns.rs) and measures it.

usage: fit_turns.py DUMP.jsonl [--train conv-26,conv-30,...] [--budgets 700,2700] [--beta B]
                    [--drop FEATURE,...] [--ablate]

DUMP is written by `cargo run --release -p trajwiki-engine --example turn_features`: per LoCoMo
question its candidate turns with their features. The script fits a logistic regression of "the
turn is gold evidence" on the training conversations only, then packs every question's context
as `Index::render` does (turns by value per token: logit(p) ... see --beta; a session's heading
costs its tokens once; the pages header when it fits in a tenth of the budget) and prints gold
coverage per conversation and budget for the current order (the dump's `order`) and the fitted
one, marking the conversations it was fitted on. It prints the weights as Rust. --ablate refits
without each group of features in turn (their rows: what each group adds, on the same dump).
Needs numpy and scikit-learn (a throwaway venv)."""
import argparse
import collections
import json
import math

import numpy as np
from sklearn.linear_model import LogisticRegression

HEADING = 4  # "## 8 May 2023"

# Groups of features, for --ablate.
GROUPS = {
    "neighbours": ["rr_beside", "nb_dense_gap", "nb_bm25", "nb2_dense_gap"],
    "sessions": ["session_dense_gap", "session_bm25"],
    "structure": ["rr_evidence", "snapshot", "claims"],
    "speakers": ["rr_own_dense", "rr_own_bm25", "own_speaker", "other_speaker"],
    "length and form": ["log_tokens", "question", "caption"],
}


def load(path):
    qs = []
    with open(path) as f:
        names = json.loads(f.readline())["features"]
        for line in f:
            qs.append(json.loads(line))
    return names, qs


def pack(q, order, budget, heading=HEADING):
    """The refs Index::render keeps, taking turns in `order` (indices into q['turns'])."""
    used = 0
    sessions = set()
    chosen = set()
    for i in order:
        ref, session, tokens, _ = q["turns"][i]
        if used + tokens > budget:
            continue
        cost = tokens + (0 if session in sessions else heading)
        if used + cost > budget:
            continue
        used += cost
        chosen.add(ref)
        sessions.add(session)
    return chosen


def coverage(q, chosen):
    gold = set(q["gold"])
    return len(gold & chosen) / len(gold)


def table(qs, orders, budgets, train, label):
    by = collections.defaultdict(list)
    for q, order in zip(qs, orders):
        if not q["gold"]:
            continue
        for b in budgets:
            c = coverage(q, pack(q, order, b))
            for part in (q["sample_id"], "unseen" if q["sample_id"] not in train else "fitted", "all"):
                by[(part, b, "1")].append(c) if q["category"] == 1 else None
                by[(part, b, "3")].append(c) if q["category"] == 3 else None
                by[(part, b, "all")].append(c)
    parts = sorted({k[0] for k in by}, key=lambda p: (p in ("fitted", "unseen", "all"), p))
    print(f"{label}")
    print(f"  {'part':<10}" + "".join(f" | @{b}: cat1   cat3    all" for b in budgets))
    for p in parts:
        row = f"  {p + ('*' if p in train else ''):<10}"
        for b in budgets:
            row += " | " + " ".join(f"{np.mean(by[(p, b, c)]):.3f}" if by[(p, b, c)] else "  -  " for c in ("1", "3", "all")).rjust(20)
        print(row)
    return by


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dump")
    ap.add_argument("--train", default="conv-26,conv-30,conv-41,conv-42")
    ap.add_argument("--budgets", default="700,2700")
    ap.add_argument("--beta", type=float, default=None)
    ap.add_argument("--C", type=float, default=1.0)
    ap.add_argument("--drop", default="", help="features left out, comma-separated")
    ap.add_argument("--ablate", action="store_true", help="refit without each group of features")
    args = ap.parse_args()
    names, qs = load(args.dump)
    train = set(args.train.split(","))
    budgets = [int(b) for b in args.budgets.split(",")]
    qs = [q for q in qs if q["gold"]]
    drop = {names.index(d) for d in args.drop.split(",") if d}

    # The current order, as the dump holds it.
    orders = []
    for q in qs:
        pos = {t[0]: i for i, t in enumerate(q["turns"])}
        orders.append([pos[r] for r in q["order"] if r in pos])
    table(qs, orders, budgets, train, "current order")

    def fit(drop):
        keep = [i for i in range(len(names)) if i not in drop and names[i] != "bias"]
        X, y = [], []
        for q in qs:
            if q["sample_id"] not in train:
                continue
            gold = set(q["gold"])
            for ref, _, _, f in q["turns"]:
                X.append([f[i] for i in keep])
                y.append(1 if ref in gold else 0)
        model = LogisticRegression(C=args.C, max_iter=5000)
        model.fit(np.array(X), np.array(y))
        w = np.zeros(len(names))
        w[keep] = model.coef_[0]
        w[names.index("bias")] = model.intercept_[0]
        return w

    def ordered(w, beta):
        orders = []
        for q in qs:
            F = np.array([t[3] for t in q["turns"]])
            logit = F @ w
            logp = -np.logaddexp(0, -logit)
            key = logp - beta * F[:, tok]
            orders.append(list(np.lexsort((np.arange(len(key)), -key))))
        return orders

    tok = names.index("log_tokens")
    w = fit(drop)
    for n, v in zip(names, w):
        print(f"  {n:<16} {v:+.4f}")
    betas = [args.beta] if args.beta is not None else [0.0, 0.25, 0.5, 0.75, 1.0]
    for beta in betas:
        table(qs, ordered(w, beta), budgets, train, f"fitted, value per token^{beta}")
    if args.ablate:
        for group, members in GROUPS.items():
            wg = fit(drop | {names.index(m) for m in members})
            table(qs, ordered(wg, betas[0]), budgets, train, f"fitted without {group}: {', '.join(members)}")
    print("const WEIGHTS: [f32; FEATURES] = [" + ", ".join(f"{v:.5}" for v in w) + "];")


if __name__ == "__main__":
    main()
