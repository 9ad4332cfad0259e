"""The README's Python example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import REPO


def test_readme_example(minilm: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    (code,) = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), namespace)
    assert (tmp_path / "my-store").is_dir()
    assert namespace["vectors"].shape == (1, 384)  # type: ignore[attr-defined]
    assert "Oslo" in namespace["hit"].context  # type: ignore[attr-defined]
