-- trajwiki store, schema version 3: memory at scale.
--
-- Message vectors live in per-namespace, per-model vector files under `vectors/` in the store
-- directory: append-only rows of f16 or f32, row i for the namespace's i-th message in ingest
-- order, memory-mapped when a namespace is loaded. SQLite is the system of record for how much
-- of each file is committed: `rows` rows, the last for the message at `last_rowid`. A tail past
-- `rows` (a crash between writing the file and committing here) is ignored and overwritten by
-- the next append. A large namespace's file may have an approximate index (an HNSW graph, same
-- name with the extension `hnsw`) over its first `ann_rows` rows. Derived state: a file and its
-- graph can always be rebuilt from the messages.

CREATE TABLE vector_files (
    namespace TEXT NOT NULL REFERENCES namespaces (id),
    model_id TEXT NOT NULL,
    dtype TEXT NOT NULL CHECK (dtype IN ('f16', 'f32')),
    dim INTEGER NOT NULL CHECK (dim > 0),
    file TEXT NOT NULL UNIQUE,
    rows INTEGER NOT NULL CHECK (rows >= 0),
    last_rowid INTEGER NOT NULL,
    ann_rows INTEGER NOT NULL DEFAULT 0 CHECK (ann_rows >= 0 AND ann_rows <= rows),
    PRIMARY KEY (namespace, model_id)
) STRICT;

-- Ingest order within a namespace (the index holds the rowid): an append reads what arrived
-- after a position by a range seek, without scanning the namespace.
CREATE INDEX messages_by_arrival ON messages (namespace);
