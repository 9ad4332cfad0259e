"""``python -m trajwiki.eval locomo``: the LoCoMo retrieval evaluation through the bindings.

It takes the options of ``trajwiki eval locomo`` and runs the same Rust evaluation, so it writes
the same ``retrieval.jsonl``, ``summary.json`` and ``report.md`` and prints the same table.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from trajwiki._trajwiki import (
    DEFAULT_MODEL,
    InputError,
    NotFoundError,
    TrajwikiError,
    eval_locomo,
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m trajwiki.eval", description="Evaluate retrieval."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    locomo = commands.add_parser(
        "locomo", help="Gold source-reference coverage on a file in LoCoMo layout."
    )
    locomo.add_argument("--data", required=True, help="The LoCoMo-layout JSON file.")
    locomo.add_argument(
        "--out", required=True, help="Output folder (retrieval.jsonl, summary.json, report.md)."
    )
    locomo.add_argument("--store", help="Store to reuse (default: OUT/store).")
    locomo.add_argument(
        "--budget",
        dest="budgets",
        type=int,
        action="append",
        default=[],
        help="Context budget (repeatable).",
    )
    locomo.add_argument(
        "--mode", dest="modes", action="append", default=[], help="Mode (repeatable; default: all)."
    )
    locomo.add_argument("--model", default=DEFAULT_MODEL, help="Embedding model.")
    locomo.add_argument("--config", help="Memory configuration (TOML).")
    locomo.add_argument(
        "--device", default="auto", help="cpu, cuda or auto (a GPU when one is usable)."
    )
    locomo.add_argument("-q", "--quiet", action="store_true", help="Print only the results.")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit code (2 for bad input, 1 for other failures)."""
    args = _parser().parse_args(argv)
    try:
        summary, table = eval_locomo(
            args.data,
            args.out,
            store=args.store,
            budgets=args.budgets,
            modes=args.modes,
            model=args.model,
            config=args.config,
            device=args.device,
        )
    except (InputError, NotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except TrajwikiError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(table, end="")
    if not args.quiet:
        print(
            f"wrote {args.out}/retrieval.jsonl, summary.json, report.md "
            f"(build {summary['build_seconds']:.1f} s, retrieval {summary['eval_seconds']:.1f} s)",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
