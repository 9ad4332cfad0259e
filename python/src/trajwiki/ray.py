"""Batch indexing of many namespaces on a Ray cluster (optional dependency: ``ray[data]``).

``index_namespaces`` builds the memory of every namespace of a Ray Dataset through
``map_batches`` with a pool of stateful actors. Each actor opens its own ``Memory`` on the store
(the engine is created inside the actor: PyO3 objects are not picklable, so only the store URI,
the model name and the configuration travel), adds one namespace's messages in one transaction
and builds it. The memory is the one a single process builds: construction is per namespace and
deterministic, and the embedding cache is keyed by model and text, so neither the number of
actors nor the order in which they take namespaces changes a byte of it.

A row of the dataset names one namespace::

    {"namespace": "conv-26", "messages": "[{\\"speaker\\": ...}, ...]"}   # JSON text
    {"namespace": "conv-26", "path": "/data/conv-26.jsonl"}            # a file

``messages`` is JSON text of what ``Memory.add`` takes (a list of message dicts, or a LoCoMo
sample); ``path`` a JSONL file of messages or a JSON file of that. A plain list of such dicts is
accepted in place of a Dataset (its ``messages`` may then be Python lists).

Failures are per namespace. Malformed input fails that namespace alone, at once (retrying cannot
mend it), and nothing of it is written: its messages are checked before the one transaction that
adds them. Any other failure is retried up to ``retries`` times; a namespace that still fails is
deleted again if this run created it, so the store never holds half of one. The report names
every namespace exactly once::

    import ray
    from trajwiki.ray import index_namespaces

    ray.init()
    rows = ray.data.from_items([{"namespace": "conv-26", "path": "/data/conv-26.jsonl"}, ...])
    report = index_namespaces(rows, "sqlite:///srv/memory", model="minilm", actors=8)
    print(report.summary())
    for row in report.failed:
        print(row["namespace"], row["error"])
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Optional, Union

import ray

__all__ = ["IndexReport", "index_namespaces"]

log = logging.getLogger(__name__)

#: The columns of a result row.
RESULT_FIELDS = ("namespace", "status", "added", "attempts", "seconds", "error")


@dataclass
class IndexReport:
    """What ``index_namespaces`` did: one result row per namespace, in completion order.

    A row has ``namespace``, ``status`` (``"ok"`` or ``"failed"``), ``added`` (messages added),
    ``attempts``, ``seconds`` (wall time in the actor) and ``error`` (the last error, or None).
    """

    results: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    actors: int = 1

    @property
    def ok(self) -> list[dict[str, Any]]:
        """The namespaces built."""
        return [r for r in self.results if r["status"] == "ok"]

    @property
    def failed(self) -> list[dict[str, Any]]:
        """The namespaces that failed, with their errors."""
        return [r for r in self.results if r["status"] != "ok"]

    @property
    def namespaces_per_second(self) -> float:
        """Namespaces built per second of the whole run (start-up included)."""
        return len(self.ok) / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> str:
        """One line: counts, time and rate."""
        return (
            f"{len(self.ok)} namespaces built, {len(self.failed)} failed, in {self.seconds:.1f} s "
            f"with {self.actors} actor(s) ({self.namespaces_per_second:.2f} namespaces/s)"
        )


class InputRowError(ValueError):
    """A dataset row that does not describe a namespace's messages."""


def _plain(value: Any) -> Any:
    """A value of a NumPy batch as plain Python (arrays to lists, bytes to text)."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    return value


def _given(value: Any) -> Any:
    """A cell's value, or None for an absent one (a column null: None, or NaN from NumPy)."""
    value = _plain(value)
    if value is None or (isinstance(value, float) and value != value):
        return None
    return value


def _messages_of(row: Mapping[str, Any]) -> Any:
    """The messages a row names, parsed from its JSON text or read from its file."""
    text = _given(row.get("messages"))
    path = _given(row.get("path"))
    if text is not None and path is not None:
        raise InputRowError("a row has both `messages` and `path`; give one")
    if path is not None:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise InputRowError(f"path {path!r}: {e.strerror or e}") from e
        if str(path).endswith(".jsonl"):
            items = []
            for number, line in enumerate(text.splitlines(), 1):
                if line.strip():
                    try:
                        items.append(json.loads(line))
                    except json.JSONDecodeError as e:
                        raise InputRowError(f"{path}:{number}: not JSON: {e.msg}") from e
            return items
    if text is None:
        raise InputRowError("a row needs `messages` (JSON text) or `path`")
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputRowError(
            f"messages: not JSON at line {e.lineno} column {e.colno}: {e.msg}"
        ) from e


class _Indexer:
    """The actor: one ``Memory`` on the store for its lifetime, one namespace per row."""

    def __init__(
        self,
        store_uri: str,
        model: str,
        device: str,
        config: Optional[str],
        threads: Optional[int],
        retries: int,
        flush: bool,
        source: str,
        fault: Optional[Callable[[str, int], None]],
    ) -> None:
        if threads:
            # Read by the engine's thread pools when they start, i.e. on first use.
            os.environ["RAYON_NUM_THREADS"] = str(threads)
        from trajwiki import Memory

        self.memory = Memory(store_uri, model=model, device=device, config=config)
        self.retries = retries
        self.flush = flush
        self.source = source
        self.fault = fault

    def __call__(self, batch: Mapping[str, Any]) -> dict[str, list[Any]]:
        rows = len(batch["namespace"])
        out: dict[str, list[Any]] = {name: [] for name in RESULT_FIELDS}
        for i in range(rows):
            result = self.index({name: column[i] for name, column in batch.items()})
            for name in RESULT_FIELDS:
                out[name].append(result[name])
        return out

    def index(self, row: Mapping[str, Any]) -> dict[str, Any]:
        from trajwiki import InputError

        namespace = str(_plain(row["namespace"]))
        started = time.perf_counter()
        result: dict[str, Any] = {"namespace": namespace, "added": 0, "attempts": 0}

        def done(status: str, error: Optional[BaseException]) -> dict[str, Any]:
            result["status"] = status
            result["error"] = None if error is None else f"{type(error).__name__}: {error}"
            result["seconds"] = time.perf_counter() - started
            return result

        try:
            messages = _messages_of(row)
        except InputRowError as e:
            result["attempts"] = 1
            return done("failed", e)
        created = False
        error: Optional[BaseException] = None
        for attempt in range(1, self.retries + 2):
            result["attempts"] = attempt
            try:
                report = self.memory.add(messages, namespace=namespace, source=self.source)
                created = created or bool(report["new_namespaces"])
                result["added"] += report["added"]
                if self.fault is not None:
                    self.fault(namespace, attempt)
                self.memory.build(namespace=namespace, flush=self.flush)
                return done("ok", None)
            except InputError as e:
                # Malformed messages: nothing was added, and another try reads the same input.
                error = e
                break
            except Exception as e:  # noqa: BLE001 - any other failure is worth another try
                error = e
                log.warning("namespace %s: attempt %d failed: %s", namespace, attempt, e)
        if created:
            # The messages of a namespace this run created, without their memory: take them
            # out again so that a failed namespace leaves nothing behind.
            try:
                self.memory.delete(namespace)
            except Exception as e:  # noqa: BLE001
                error = RuntimeError(f"{error}; deleting the half-built namespace failed: {e}")
        return done("failed", error)


def _dataset(rows: Union["ray.data.Dataset", Iterable[Mapping[str, Any]]]) -> "ray.data.Dataset":
    if isinstance(rows, ray.data.Dataset):
        return rows
    items = []
    for row in rows:
        messages = row.get("messages")
        if messages is not None and not isinstance(messages, str):
            messages = json.dumps(messages, default=str)
        # Every row gets both columns, so that one schema holds them all.
        items.append({"namespace": row.get("namespace"), "messages": messages,
                      "path": row.get("path")})
    return ray.data.from_items(items)


def _store_dir(store_uri: str) -> str:
    """The URI every actor opens; a relative path is made absolute here, where it was meant."""
    if "://" in store_uri:
        scheme, rest = store_uri.split("://", 1)
        if scheme.lower() in ("sqlite", "file"):
            return f"{scheme}://{os.path.abspath(rest)}" if rest else store_uri
        return store_uri
    return os.path.abspath(store_uri)


def index_namespaces(
    dataset: Union["ray.data.Dataset", Iterable[Mapping[str, Any]]],
    store_uri: Union[str, os.PathLike],
    *,
    model: str = "minilm",
    device: str = "auto",
    config: Optional[Union[str, os.PathLike]] = None,
    actors: Optional[int] = None,
    cpus_per_actor: Optional[float] = None,
    gpus_per_actor: Optional[float] = None,
    retries: int = 2,
    flush: bool = False,
    source: str = "ray",
    progress: Optional[Callable[[dict[str, Any]], None]] = None,
    fault: Optional[Callable[[str, int], None]] = None,
) -> IndexReport:
    """Builds the memory of every namespace of ``dataset`` into the store at ``store_uri``.

    ``actors`` is the size of the actor pool (default: the cluster's CPUs divided by
    ``cpus_per_actor``); ``cpus_per_actor`` the CPUs each reserves (default: the cluster's CPUs
    shared among the actors), which also sets the engine's threads (``RAYON_NUM_THREADS``);
    ``gpus_per_actor`` the GPUs each reserves (default: 1 when the cluster has GPUs and
    ``device`` is not ``"cpu"``, else none). ``model``, ``device`` and ``config`` are those of
    ``Memory``; ``flush`` that of ``Memory.build``. ``progress`` is called with each result row
    as it arrives. ``fault(namespace, attempt)`` runs before each build (for tests: raising in it
    is a failure of that attempt).

    Namespaces must be unique in the dataset (a ``ValueError`` naming the repeated ones, before
    anything is written). Returns an ``IndexReport``; failures are in it, not raised.
    """
    if not ray.is_initialized():
        ray.init()
    if retries < 0:
        raise ValueError(f"retries must be 0 or more, got {retries}")
    store = _store_dir(os.fspath(store_uri))
    ds = _dataset(dataset)
    names = [str(_plain(r["namespace"])) for r in ds.select_columns(["namespace"]).take_all()]
    seen: set[str] = set()
    repeated: set[str] = set()
    for name in names:
        (repeated if name in seen else seen).add(name)
    repeated = sorted(repeated)
    if repeated:
        shown = ", ".join(repeated[:5]) + (" ..." if len(repeated) > 5 else "")
        raise ValueError(f"namespaces appear more than once in the dataset: {shown}")

    resources = ray.cluster_resources()
    cluster_cpus = max(1, int(resources.get("CPU", 1)))
    if gpus_per_actor is None:
        gpus_per_actor = 1.0 if resources.get("GPU", 0) >= 1 and device != "cpu" else 0.0
    if actors is None:
        per = cpus_per_actor or 1
        actors = max(1, int(cluster_cpus // per))
        if gpus_per_actor:
            actors = min(actors, max(1, int(resources.get("GPU", 1) // gpus_per_actor)))
    actors = max(1, min(actors, max(1, len(names))))
    if cpus_per_actor is None:
        cpus_per_actor = max(1.0, float(cluster_cpus // actors))
    threads = max(1, int(cpus_per_actor))

    started = time.perf_counter()
    results = ds.map_batches(
        _Indexer,
        batch_size=1,
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=actors),
        num_cpus=cpus_per_actor,
        num_gpus=gpus_per_actor or None,
        fn_constructor_kwargs={
            "store_uri": store,
            "model": model,
            "device": device,
            "config": None if config is None else os.path.abspath(os.fspath(config)),
            "threads": threads,
            "retries": retries,
            "flush": flush,
            "source": source,
            "fault": fault,
        },
    )
    report = IndexReport(actors=actors)
    for row in results.iter_rows():
        row = {name: _plain(row[name]) for name in RESULT_FIELDS}
        report.results.append(row)
        if row["status"] != "ok":
            log.error("namespace %s failed: %s", row["namespace"], row["error"])
        if progress is not None:
            progress(row)
    report.seconds = time.perf_counter() - started
    log.info("%s", report.summary())
    return report
