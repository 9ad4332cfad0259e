"""Type stubs of the Rust extension; tests/test_stubs.py keeps them in sync with it."""

from __future__ import annotations

import datetime
import os
import pathlib
from typing import Any, Callable, Sequence

import numpy as np
import numpy.typing as npt

__version__: str
DEFAULT_MODEL: str
MODES: list[str]

class TrajwikiError(Exception):
    """Base class of every error trajwiki raises."""

class InputError(TrajwikiError):
    """Bad input: malformed messages, ids or options, a conflicting re-ingest, wrong types."""

class NotFoundError(TrajwikiError):
    """An id, namespace, store or wiki that does not exist (or is not built yet)."""

class ModelError(TrajwikiError):
    """The embedding model could not be found, loaded or run, or the device is unusable."""

class StoreError(TrajwikiError):
    """The store failed: the database, its files, or a record changed outside trajwiki."""

class EvidenceClaim:
    """A claim grounded in a piece of evidence."""

    @property
    def id(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def status(self) -> str: ...

class Evidence:
    """One source message of a context, with the snapshot, trajectory and claims resting on it."""

    @property
    def ref(self) -> str: ...
    @property
    def message_id(self) -> str: ...
    @property
    def session(self) -> int: ...
    @property
    def speaker(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def timestamp(self) -> str: ...
    @property
    def snapshot(self) -> str | None: ...
    @property
    def trajectory(self) -> str | None: ...
    @property
    def claims(self) -> list[EvidenceClaim]: ...

class PathItem:
    """A page, trajectory or snapshot on the retrieval path, with its fused score."""

    @property
    def id(self) -> str: ...
    @property
    def label(self) -> str: ...
    @property
    def score(self) -> float: ...

class SearchResult:
    """The answer to `Memory.search`."""

    @property
    def question(self) -> str: ...
    @property
    def mode(self) -> str: ...
    @property
    def budget(self) -> int: ...
    @property
    def context(self) -> str: ...
    @property
    def source_refs(self) -> list[str]: ...
    @property
    def context_tokens(self) -> int: ...
    @property
    def evidence(self) -> list[Evidence]: ...
    @property
    def pages(self) -> list[PathItem]: ...
    @property
    def trajectories(self) -> list[PathItem]: ...
    @property
    def snapshots(self) -> list[PathItem]: ...
    @property
    def diagnostics(self) -> dict[str, Any]: ...

class Memory:
    """A long-term memory in a store directory (created when absent)."""

    def __new__(
        cls,
        path: str | os.PathLike[str],
        model: str = "minilm",
        device: str = "auto",
        config: str | os.PathLike[str] | None = None,
        index_cache_bytes: int = 2147483648,
    ) -> Memory: ...
    @property
    def path(self) -> pathlib.Path: ...
    @property
    def model(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def scoring_backend(self) -> str: ...
    @property
    def index_cache(self) -> dict[str, Any]: ...
    def namespaces(self) -> list[str]: ...
    def add(
        self,
        messages: Sequence[dict[str, Any]] | dict[str, Any],
        namespace: str | None = None,
        source: str = "python",
        build: bool = False,
    ) -> dict[str, Any]: ...
    def build(
        self,
        namespace: str | None = None,
        rebuild: bool = False,
        flush: bool = False,
        vectors: str = "f16",
        progress: Callable[[str, str, int, int], object] | None = None,
    ) -> list[dict[str, Any]]: ...
    def search(
        self,
        query: str,
        namespace: str,
        k: int | None = None,
        budget: int = 2700,
        mode: str = "full",
    ) -> SearchResult: ...
    def ask(
        self,
        query: str,
        namespace: str,
        budget: int = 2700,
        mode: str = "full",
        llm_base_url: str | None = None,
        llm_model: str | None = None,
        llm_api_key: str | None = None,
        timeout: float = 60.0,
        rerank: bool = False,
    ) -> dict[str, Any]: ...
    def get(self, id: str, namespace: str | None = None) -> dict[str, Any]: ...
    def history(
        self, id: str, as_of: datetime.date | datetime.datetime | str | None = None
    ) -> list[dict[str, Any]]: ...
    def wiki(self, namespace: str) -> list[dict[str, Any]]: ...
    def delete(self, namespace: str) -> bool: ...
    def add_runs(
        self,
        runs: Sequence[dict[str, Any]],
        namespace: str | None = None,
        source: str = "python",
    ) -> dict[str, Any]: ...
    def compile_runs(
        self,
        namespace: str | None = None,
        progress: Callable[[str, str, int, int], object] | None = None,
    ) -> list[dict[str, Any]]: ...
    def first_context(
        self,
        task: str,
        namespace: str,
        budget: int | None = None,
        similar: int = 3,
        exclude: str | None = None,
    ) -> dict[str, Any]: ...
    def open_insight(self, id: str) -> dict[str, Any]: ...
    def open_run(self, id: str) -> dict[str, Any]: ...
    def grep_runs(
        self, text: str, namespace: str, semantic: bool = False, limit: int = 20
    ) -> list[dict[str, Any]]: ...

class Embedder:
    """An embedding model."""

    def __new__(cls, model: str = "minilm", device: str = "auto") -> Embedder: ...
    def embed(
        self, texts: Sequence[str], kind: str = "document"
    ) -> npt.NDArray[np.float32]: ...
    @property
    def dim(self) -> int: ...
    @property
    def model_id(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def backend(self) -> str: ...

def eval_locomo(
    data: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    store: str | os.PathLike[str] | None = None,
    budgets: Sequence[int] | None = None,
    modes: Sequence[str] | None = None,
    model: str = "minilm",
    config: str | os.PathLike[str] | None = None,
    device: str = "auto",
) -> tuple[dict[str, Any], str]: ...
