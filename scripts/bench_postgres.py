#!/usr/bin/env python3
"""PostgreSQL against SQLite on the same work, side by side (issue 41's 2x targets).

Runs the `append_store` bench (`cargo bench --bench append_store`) on one long namespace
(`../shared/tools/make_long_conv.py LOCOMO.json R out.jsonl`) against a fresh PostgreSQL database
and a fresh SQLite store, alternated for `--rounds` rounds, so that both sides see the same
machine at nearly the same time; prints each round, then the medians and the ratios
PostgreSQL / SQLite of the initial build and of one append with the fold kept (mean, median and
90th percentile of the appends of a round), each ratio the median of the rounds' ratios.

    python3 scripts/bench_postgres.py /tmp/long1.jsonl \\
        --postgres postgres://postgres@127.0.0.1:55432/postgres [--rounds 5] [--bin PATH]

`--postgres` names a server and a database to connect to; each round creates a database of its
own there with `psql` (and drops it after). `--bin` is the bench binary (default: built with
`cargo bench --bench append_store --no-run`).
"""

import argparse
import json
import re
import statistics
import subprocess
import sys
import uuid
from urllib.parse import urlsplit, urlunsplit

LINE = re.compile(
    r"built (?P<msgs>\d+) messages in (?P<build>[\d.]+) s.*?"
    r"with the fold kept, (?P<mean>[\d.]+) ms a message \(mean of \d+; "
    r"median (?P<median>[\d.]+), p90 (?P<p90>[\d.]+)[;)]",
    re.S,
)


def bench_binary() -> str:
    out = subprocess.run(
        ["cargo", "bench", "--bench", "append_store", "--no-run", "--message-format", "json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    for line in out.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg.get("executable") and \
                msg["target"]["name"] == "append_store":
            return msg["executable"]
    sys.exit("bench_postgres: cargo did not name the append_store binary")


# Flags passed on to every run of the bench.
EXTRA: list[str] = []


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


def psql(url: str, sql: str) -> None:
    subprocess.run(["psql", url, "-qXc", sql], check=True)


def run(binary: str, messages: str, store: list[str]) -> dict:
    out = subprocess.run(
        [binary, messages, *store, *EXTRA], check=True, capture_output=True, text=True
    ).stdout
    m = LINE.search(out)
    if not m:
        sys.exit(f"bench_postgres: unexpected bench output:\n{out}")
    return {k: float(v) for k, v in m.groupdict().items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("messages", help="one namespace's messages, JSON lines")
    ap.add_argument("--postgres", required=True, help="postgres://… of a server")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--bin", help="the append_store bench binary")
    ap.add_argument("--separate", action="store_true",
                    help="append as before issue 51: the ingest, then the build, each its own "
                         "transactions (the bench's --separate)")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds: at least 1")
    binary = args.bin or bench_binary()
    if args.separate:
        EXTRA.append("--separate")
    rows = {"postgres": [], "sqlite": []}
    for r in range(1, args.rounds + 1):
        name = f"trajwiki_bench_{uuid.uuid4().hex[:12]}"
        psql(args.postgres, f"CREATE DATABASE {name}")
        try:
            pg = run(binary, args.messages, ["--store", with_database(args.postgres, name)])
        finally:
            psql(args.postgres, f"DROP DATABASE IF EXISTS {name}")
        lite = run(binary, args.messages, [])
        rows["postgres"].append(pg)
        rows["sqlite"].append(lite)
        print(
            f"round {r}: build {pg['build']:.1f} s / {lite['build']:.1f} s, "
            f"append mean {pg['mean']:.2f} / {lite['mean']:.2f} ms, "
            f"median {pg['median']:.2f} / {lite['median']:.2f} ms, "
            f"p90 {pg['p90']:.2f} / {lite['p90']:.2f} ms (PostgreSQL / SQLite)",
            flush=True,
        )
    msgs = int(rows["sqlite"][0]["msgs"])
    print(f"\n{args.rounds} rounds, initial build of {msgs} messages, then appends with the fold kept:")
    print(f"{'':24}{'PostgreSQL':>12}{'SQLite':>12}{'ratio':>8}")
    for key, label, unit in [
        ("build", "initial build", "s"),
        ("mean", "append, mean", "ms"),
        ("median", "append, median", "ms"),
        ("p90", "append, p90", "ms"),
    ]:
        pg = statistics.median(x[key] for x in rows["postgres"])
        lite = statistics.median(x[key] for x in rows["sqlite"])
        ratio = statistics.median(
            p[key] / s[key] for p, s in zip(rows["postgres"], rows["sqlite"])
        )
        print(f"{label:24}{pg:>10.2f} {unit:2}{lite:>10.2f} {unit:2}{ratio:>7.2f}x")


if __name__ == "__main__":
    main()
