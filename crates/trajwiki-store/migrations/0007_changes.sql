-- trajwiki store, schema version 7: what changed since.
--
-- Every write that changes a namespace's memory records draws the next value of a store-wide
-- clock (`generation_clock`, one row: SQLite has one writer at a time) and stamps it on the rows
-- it inserts or changes: snapshots and claims as they are inserted, trajectories whose summary or
-- signals change, claim states whose status changes, pages that get a new current revision or are
-- retired. `namespace_generations` holds, per namespace, the generation of its last such write
-- and the generation of its last reset (its creation, a rebuild that replaced its memory, a
-- clear): a reader holding a generation reads what changed after it by the (namespace,
-- generation) indexes, and reloads when a reset came after it. Values are never reused, so a
-- namespace deleted and created again starts past every generation its old readers hold.
-- Rows written before this version keep generation 0; existing namespaces start at 1, so a
-- reader that holds nothing (generation 0) reloads them.

CREATE TABLE generation_clock (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    generation INTEGER NOT NULL
) STRICT;
INSERT INTO generation_clock (id, generation) VALUES (1, 1);

CREATE TABLE namespace_generations (
    namespace TEXT PRIMARY KEY REFERENCES namespaces (id),
    generation INTEGER NOT NULL,
    reset INTEGER NOT NULL CHECK (reset <= generation)
) STRICT;
INSERT INTO namespace_generations (namespace, generation, reset) SELECT id, 1, 1 FROM namespaces;

ALTER TABLE snapshots ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;
ALTER TABLE claims ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;
ALTER TABLE claim_state ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;
ALTER TABLE trajectories ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;
ALTER TABLE pages ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;

CREATE INDEX snapshots_by_generation ON snapshots (namespace, generation);
CREATE INDEX claims_by_generation ON claims (namespace, generation);
CREATE INDEX claim_state_by_generation ON claim_state (namespace, generation);
CREATE INDEX trajectories_by_generation ON trajectories (namespace, generation);
CREATE INDEX pages_by_generation ON pages (namespace, generation);
