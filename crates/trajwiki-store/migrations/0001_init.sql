-- trajwiki store, schema version 1.
--
-- Raw inputs (messages, runs) and the history of the memory (snapshots, claims, the claim op log,
-- page revisions, compilations, insights) are immutable: triggers below refuse UPDATE always, and
-- DELETE unless the store itself is removing a whole namespace (the `guard` row). Derived state
-- (claim_state, trajectories' summaries and signals, pages' current revision) is recomputed from
-- that history and may change.

CREATE TABLE guard (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    allow_delete INTEGER NOT NULL DEFAULT 0
);
INSERT INTO guard (id, allow_delete) VALUES (1, 0);

CREATE TABLE namespaces (
    id TEXT PRIMARY KEY
) STRICT;

-- Bookkeeping: one row per ingest that added something; its counts are filled in at commit.
CREATE TABLE ingest_batches (
    id INTEGER PRIMARY KEY,
    source TEXT NOT NULL,
    format TEXT NOT NULL,
    added INTEGER NOT NULL,
    unchanged INTEGER NOT NULL,
    ingested_at TEXT NOT NULL
) STRICT;

CREATE TABLE messages (
    id TEXT PRIMARY KEY,
    namespace TEXT NOT NULL REFERENCES namespaces (id),
    session INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    speaker TEXT NOT NULL,
    text TEXT NOT NULL,
    timestamp TEXT NOT NULL,
    attachments TEXT NOT NULL,
    external_ref TEXT,
    content_hash TEXT NOT NULL,
    batch INTEGER NOT NULL REFERENCES ingest_batches (id),
    UNIQUE (namespace, session, seq),
    UNIQUE (namespace, external_ref)
) STRICT;

CREATE TABLE runs (
    id TEXT PRIMARY KEY,
    namespace TEXT NOT NULL REFERENCES namespaces (id),
    external_ref TEXT NOT NULL,
    task TEXT NOT NULL,
    success INTEGER,
    reward REAL,
    metadata TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    batch INTEGER NOT NULL REFERENCES ingest_batches (id),
    UNIQUE (namespace, external_ref)
) STRICT;

CREATE TABLE run_steps (
    run TEXT NOT NULL REFERENCES runs (id),
    position INTEGER NOT NULL,
    action TEXT NOT NULL,
    observation TEXT NOT NULL,
    PRIMARY KEY (run, position)
) STRICT;

CREATE TABLE trajectories (
    id TEXT PRIMARY KEY,
    namespace TEXT NOT NULL REFERENCES namespaces (id),
    continues TEXT REFERENCES trajectories (id),
    summary TEXT NOT NULL,
    signals TEXT NOT NULL
) STRICT;

CREATE TABLE snapshots (
    id TEXT PRIMARY KEY,
    namespace TEXT NOT NULL REFERENCES namespaces (id),
    trajectory TEXT NOT NULL REFERENCES trajectories (id),
    version INTEGER NOT NULL CHECK (version >= 1),
    timestamp TEXT NOT NULL,
    summary TEXT NOT NULL,
    context TEXT NOT NULL,
    keywords TEXT NOT NULL,
    UNIQUE (trajectory, version)
) STRICT;

CREATE TABLE snapshot_messages (
    snapshot TEXT NOT NULL REFERENCES snapshots (id),
    position INTEGER NOT NULL,
    message TEXT NOT NULL REFERENCES messages (id),
    PRIMARY KEY (snapshot, position)
) STRICT;
CREATE INDEX snapshot_messages_by_message ON snapshot_messages (message);

CREATE TABLE claims (
    id TEXT PRIMARY KEY,
    namespace TEXT NOT NULL REFERENCES namespaces (id),
    snapshot TEXT NOT NULL REFERENCES snapshots (id),
    text TEXT NOT NULL CHECK (length(text) > 0),
    status TEXT NOT NULL,
    quote TEXT NOT NULL,
    revised_from TEXT REFERENCES claims (id)
) STRICT;

CREATE TABLE claim_sources (
    claim TEXT NOT NULL REFERENCES claims (id),
    position INTEGER NOT NULL,
    message TEXT NOT NULL REFERENCES messages (id),
    PRIMARY KEY (claim, position)
) STRICT;

CREATE TABLE snapshot_claims (
    snapshot TEXT NOT NULL REFERENCES snapshots (id),
    position INTEGER NOT NULL,
    claim TEXT NOT NULL REFERENCES claims (id),
    PRIMARY KEY (snapshot, position)
) STRICT;

CREATE TABLE claim_ops (
    id TEXT PRIMARY KEY,
    namespace TEXT NOT NULL REFERENCES namespaces (id),
    seq INTEGER NOT NULL,
    op TEXT NOT NULL CHECK (op IN ('ADD', 'REVISE', 'DEPRECATE')),
    target TEXT REFERENCES claims (id),
    new_claim TEXT REFERENCES claims (id),
    new_status TEXT,
    rationale TEXT NOT NULL,
    snapshot TEXT NOT NULL REFERENCES snapshots (id),
    UNIQUE (namespace, seq)
) STRICT;

CREATE TABLE op_sources (
    op TEXT NOT NULL REFERENCES claim_ops (id),
    position INTEGER NOT NULL,
    message TEXT NOT NULL REFERENCES messages (id),
    PRIMARY KEY (op, position)
) STRICT;

-- Derived: the current status of each claim, as replaying claim_ops gives it.
CREATE TABLE claim_state (
    claim TEXT PRIMARY KEY REFERENCES claims (id),
    status TEXT NOT NULL
) STRICT;

CREATE TABLE pages (
    id TEXT PRIMARY KEY,
    namespace TEXT NOT NULL REFERENCES namespaces (id),
    kind TEXT NOT NULL CHECK (kind IN ('index', 'entity', 'topic', 'inventory')),
    -- Derived: NULL once the page is retired by a recompile.
    current_revision INTEGER
) STRICT;

CREATE TABLE page_revisions (
    page TEXT NOT NULL REFERENCES pages (id),
    revision INTEGER NOT NULL CHECK (revision >= 1),
    title TEXT NOT NULL,
    body TEXT NOT NULL,
    routing_text TEXT NOT NULL,
    keywords TEXT NOT NULL,
    terms TEXT NOT NULL,
    items TEXT NOT NULL,
    PRIMARY KEY (page, revision)
) STRICT;

CREATE TABLE page_trajectories (
    page TEXT NOT NULL,
    revision INTEGER NOT NULL,
    position INTEGER NOT NULL,
    trajectory TEXT NOT NULL REFERENCES trajectories (id),
    PRIMARY KEY (page, revision, position),
    FOREIGN KEY (page, revision) REFERENCES page_revisions (page, revision)
) STRICT;

CREATE TABLE compilations (
    id TEXT PRIMARY KEY,
    run TEXT NOT NULL REFERENCES runs (id),
    diagnosis TEXT NOT NULL,
    compiler TEXT NOT NULL
) STRICT;

CREATE TABLE insights (
    id TEXT PRIMARY KEY,
    compilation TEXT NOT NULL REFERENCES compilations (id),
    run TEXT NOT NULL REFERENCES runs (id),
    position INTEGER NOT NULL,
    guideline TEXT NOT NULL,
    applies_when TEXT NOT NULL,
    UNIQUE (compilation, position)
) STRICT;

CREATE TABLE embedding_models (
    model_id TEXT PRIMARY KEY,
    dim INTEGER NOT NULL CHECK (dim > 0)
) STRICT;

CREATE TABLE embeddings (
    model_id TEXT NOT NULL REFERENCES embedding_models (model_id),
    text_hash TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (model_id, text_hash)
) STRICT;

-- Immutability: no UPDATE ever; DELETE only while the store removes a namespace.
CREATE TRIGGER namespaces_no_update BEFORE UPDATE ON namespaces
BEGIN SELECT RAISE(ABORT, 'immutable record: namespaces rows cannot be updated'); END;
CREATE TRIGGER namespaces_no_delete BEFORE DELETE ON namespaces WHEN (SELECT allow_delete FROM guard) = 0
BEGIN SELECT RAISE(ABORT, 'immutable record: namespaces rows cannot be deleted'); END;
CREATE TRIGGER ingest_batches_no_delete BEFORE DELETE ON ingest_batches WHEN (SELECT allow_delete FROM guard) = 0
BEGIN SELECT RAISE(ABORT, 'immutable record: ingest_batches rows cannot be deleted'); END;
CREATE TRIGGER messages_no_update BEFORE UPDATE ON messages
BEGIN SELECT RAISE(ABORT, 'immutable record: messages rows cannot be updated'); END;
CREATE TRIGGER messages_no_delete BEFORE DELETE ON messages WHEN (SELECT allow_delete FROM guard) = 0
BEGIN SELECT RAISE(ABORT, 'immutable record: messages rows cannot be deleted'); END;
CREATE TRIGGER runs_no_update BEFORE UPDATE ON runs
BEGIN SELECT RAISE(ABORT, 'immutable record: runs rows cannot be updated'); END;
CREATE TRIGGER runs_no_delete BEFORE DELETE ON runs WHEN (SELECT allow_delete FROM guard) = 0
BEGIN SELECT RAISE(ABORT, 'immutable record: runs rows cannot be deleted'); END;
CREATE TRIGGER run_steps_no_update BEFORE UPDATE ON run_steps
BEGIN SELECT RAISE(ABORT, 'immutable record: run_steps rows cannot be updated'); END;
CREATE TRIGGER run_steps_no_delete BEFORE DELETE ON run_steps WHEN (SELECT allow_delete FROM guard) = 0
BEGIN SELECT RAISE(ABORT, 'immutable record: run_steps rows cannot be deleted'); END;
CREATE TRIGGER snapshots_no_update BEFORE UPDATE ON snapshots
BEGIN SELECT RAISE(ABORT, 'immutable record: snapshots rows cannot be updated'); END;
CREATE TRIGGER snapshots_no_delete BEFORE DELETE ON snapshots WHEN (SELECT allow_delete FROM guard) = 0
BEGIN SELECT RAISE(ABORT, 'immutable record: snapshots rows cannot be deleted'); END;
CREATE TRIGGER snapshot_messages_no_update BEFORE UPDATE ON snapshot_messages
BEGIN SELECT RAISE(ABORT, 'immutable record: snapshot_messages rows cannot be updated'); END;
CREATE TRIGGER snapshot_messages_no_delete BEFORE DELETE ON snapshot_messages WHEN (SELECT allow_delete FROM guard) = 0
BEGIN SELECT RAISE(ABORT, 'immutable record: snapshot_messages rows cannot be deleted'); END;
CREATE TRIGGER claims_no_update BEFORE UPDATE ON claims
BEGIN SELECT RAISE(ABORT, 'immutable record: claims rows cannot be updated'); END;
CREATE TRIGGER claims_no_delete BEFORE DELETE ON claims WHEN (SELECT allow_delete FROM guard) = 0
BEGIN SELECT RAISE(ABORT, 'immutable record: claims rows cannot be deleted'); END;
CREATE TRIGGER claim_sources_no_update BEFORE UPDATE ON claim_sources
BEGIN SELECT RAISE(ABORT, 'immutable record: claim_sources rows cannot be updated'); END;
CREATE TRIGGER claim_sources_no_delete BEFORE DELETE ON claim_sources WHEN (SELECT allow_delete FROM guard) = 0
BEGIN SELECT RAISE(ABORT, 'immutable record: claim_sources rows cannot be deleted'); END;
CREATE TRIGGER snapshot_claims_no_update BEFORE UPDATE ON snapshot_claims
BEGIN SELECT RAISE(ABORT, 'immutable record: snapshot_claims rows cannot be updated'); END;
CREATE TRIGGER snapshot_claims_no_delete BEFORE DELETE ON snapshot_claims WHEN (SELECT allow_delete FROM guard) = 0
BEGIN SELECT RAISE(ABORT, 'immutable record: snapshot_claims rows cannot be deleted'); END;
CREATE TRIGGER claim_ops_no_update BEFORE UPDATE ON claim_ops
BEGIN SELECT RAISE(ABORT, 'immutable record: claim_ops rows cannot be updated'); END;
CREATE TRIGGER claim_ops_no_delete BEFORE DELETE ON claim_ops WHEN (SELECT allow_delete FROM guard) = 0
BEGIN SELECT RAISE(ABORT, 'immutable record: claim_ops rows cannot be deleted'); END;
CREATE TRIGGER op_sources_no_update BEFORE UPDATE ON op_sources
BEGIN SELECT RAISE(ABORT, 'immutable record: op_sources rows cannot be updated'); END;
CREATE TRIGGER op_sources_no_delete BEFORE DELETE ON op_sources WHEN (SELECT allow_delete FROM guard) = 0
BEGIN SELECT RAISE(ABORT, 'immutable record: op_sources rows cannot be deleted'); END;
CREATE TRIGGER page_revisions_no_update BEFORE UPDATE ON page_revisions
BEGIN SELECT RAISE(ABORT, 'immutable record: page_revisions rows cannot be updated'); END;
CREATE TRIGGER page_revisions_no_delete BEFORE DELETE ON page_revisions WHEN (SELECT allow_delete FROM guard) = 0
BEGIN SELECT RAISE(ABORT, 'immutable record: page_revisions rows cannot be deleted'); END;
CREATE TRIGGER page_trajectories_no_update BEFORE UPDATE ON page_trajectories
BEGIN SELECT RAISE(ABORT, 'immutable record: page_trajectories rows cannot be updated'); END;
CREATE TRIGGER page_trajectories_no_delete BEFORE DELETE ON page_trajectories WHEN (SELECT allow_delete FROM guard) = 0
BEGIN SELECT RAISE(ABORT, 'immutable record: page_trajectories rows cannot be deleted'); END;
CREATE TRIGGER compilations_no_update BEFORE UPDATE ON compilations
BEGIN SELECT RAISE(ABORT, 'immutable record: compilations rows cannot be updated'); END;
CREATE TRIGGER compilations_no_delete BEFORE DELETE ON compilations WHEN (SELECT allow_delete FROM guard) = 0
BEGIN SELECT RAISE(ABORT, 'immutable record: compilations rows cannot be deleted'); END;
CREATE TRIGGER insights_no_update BEFORE UPDATE ON insights
BEGIN SELECT RAISE(ABORT, 'immutable record: insights rows cannot be updated'); END;
CREATE TRIGGER insights_no_delete BEFORE DELETE ON insights WHEN (SELECT allow_delete FROM guard) = 0
BEGIN SELECT RAISE(ABORT, 'immutable record: insights rows cannot be deleted'); END;
CREATE TRIGGER embedding_models_no_update BEFORE UPDATE ON embedding_models
BEGIN SELECT RAISE(ABORT, 'immutable record: embedding_models rows cannot be updated'); END;
CREATE TRIGGER embedding_models_no_delete BEFORE DELETE ON embedding_models WHEN (SELECT allow_delete FROM guard) = 0
BEGIN SELECT RAISE(ABORT, 'immutable record: embedding_models rows cannot be deleted'); END;
CREATE TRIGGER embeddings_no_update BEFORE UPDATE ON embeddings
BEGIN SELECT RAISE(ABORT, 'immutable record: embeddings rows cannot be updated'); END;
CREATE TRIGGER embeddings_no_delete BEFORE DELETE ON embeddings WHEN (SELECT allow_delete FROM guard) = 0
BEGIN SELECT RAISE(ABORT, 'immutable record: embeddings rows cannot be deleted'); END;
