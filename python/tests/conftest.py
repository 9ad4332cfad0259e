"""Shared fixtures: the repository's paths, the LoCoMo data and the models, each skipped with a
message when absent (set TRAJWIKI_REQUIRE_MODELS=1 to make a missing MiniLM a failure)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
LOCOMO = REPO.parent / "shared" / "data" / "locomo" / "locomo7.json"


def _home() -> Path:
    home = os.environ.get("TRAJWIKI_HOME")
    return Path(home) if home else Path.home() / ".cache" / "trajwiki"


@pytest.fixture(scope="session")
def locomo_samples() -> list[dict[str, Any]]:
    """The LoCoMo samples of ../shared/data (read in place, never copied into the repository)."""
    if not LOCOMO.is_file():
        pytest.skip(f"LoCoMo data not found at {LOCOMO}")
    with LOCOMO.open(encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="session")
def minilm() -> str:
    """The MiniLM model folder (`trajwiki model fetch minilm` installs it)."""
    path = _home() / "models" / "minilm"
    if not (path / "config.json").is_file():
        message = f"MiniLM not found at {path}; run `target/debug/trajwiki model fetch minilm`"
        if os.environ.get("TRAJWIKI_REQUIRE_MODELS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return str(path)


@pytest.fixture(scope="session")
def cli() -> Path:
    """The `trajwiki` binary of this checkout (`cargo build` makes it)."""
    path = Path(os.environ.get("TRAJWIKI_BIN", REPO / "target" / "debug" / "trajwiki"))
    if not path.is_file():
        if "TRAJWIKI_BIN" in os.environ:
            pytest.fail(f"TRAJWIKI_BIN={path} does not exist")
        pytest.skip(f"no trajwiki binary at {path}; run `cargo build` first")
    return path


def conversation(namespace: str = "ann") -> list[dict[str, Any]]:
    """A small conversation in which a fact changes."""
    return [
        {"speaker": "Ann", "text": "I live in Bergen and work as a nurse.",
         "timestamp": "2024-03-01T09:00:00", "session": 1},
        {"speaker": "Bob", "text": "Bergen is rainy! Do you like the hospital?",
         "timestamp": "2024-03-01T09:01:00", "session": 1},
        {"speaker": "Ann", "text": "I love it, and I go hiking every weekend.",
         "timestamp": "2024-03-01T09:02:00", "session": 1},
        {"speaker": "Ann", "text": "Big news: I moved to Oslo last week.",
         "timestamp": "2024-06-10T18:00:00", "session": 2},
        {"speaker": "Bob", "text": "Congratulations on the move to Oslo!",
         "timestamp": "2024-06-10T18:01:00", "session": 2},
    ]
