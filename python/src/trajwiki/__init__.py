"""trajwiki: long-term memory for LLM agents that never loses the path back to its evidence.

The classes are implemented in Rust (the ``trajwiki._trajwiki`` extension) and run the same code
as the ``trajwiki`` command line::

    from trajwiki import Memory

    memory = Memory("my-store", model="minilm")
    memory.add(
        [{"role": "Ann", "content": "I moved to Oslo in May.", "timestamp": "2024-06-01T09:00:00"}],
        namespace="ann",
    )
    memory.build()
    hit = memory.search("Where does Ann live?", namespace="ann", budget=500)
    for e in hit.evidence:
        print(e.ref, e.timestamp, e.speaker, e.text, e.snapshot, [c.text for c in e.claims])
"""

from trajwiki._trajwiki import (
    DEFAULT_MODEL,
    MODES,
    Embedder,
    Evidence,
    EvidenceClaim,
    InputError,
    Memory,
    ModelError,
    NotFoundError,
    PathItem,
    SearchResult,
    StoreError,
    TrajwikiError,
    __version__,
    eval_locomo,
)

__all__ = [
    "DEFAULT_MODEL",
    "MODES",
    "Embedder",
    "Evidence",
    "EvidenceClaim",
    "InputError",
    "Memory",
    "ModelError",
    "NotFoundError",
    "PathItem",
    "SearchResult",
    "StoreError",
    "TrajwikiError",
    "__version__",
    "eval_locomo",
]
