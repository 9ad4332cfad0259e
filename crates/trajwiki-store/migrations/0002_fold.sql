-- trajwiki store, schema version 2: living memory.
--
-- Construction is a fold over exchanges in the order their messages were ingested (SPEC §2.6).
-- `memory_builds` records, per namespace, what the memory was built with (model, configuration)
-- and where the fold stands: the rowid of the last message it consumed, the messages of the
-- exchange still open (its reply may yet come), and the fold's state — a header, one row per
-- trajectory and one per wiki group, so that an append writes back only what it changed. All of it is derived state:
-- replaceable, rebuilt from the immutable records by `trajwiki build --rebuild`.

CREATE TABLE memory_builds (
    namespace TEXT PRIMARY KEY REFERENCES namespaces (id),
    model_id TEXT NOT NULL,
    config TEXT NOT NULL,
    cursor INTEGER NOT NULL,
    pending TEXT NOT NULL,
    header BLOB NOT NULL
) STRICT;

CREATE TABLE fold_trajectories (
    namespace TEXT NOT NULL REFERENCES namespaces (id),
    position INTEGER NOT NULL,
    state BLOB NOT NULL,
    PRIMARY KEY (namespace, position)
) STRICT;

-- The wiki's groups of trajectories (an entity, a facet, an item family, a keyword, the rescue
-- list), each with its members in the order they joined; pages are derived from them.
CREATE TABLE fold_groups (
    namespace TEXT NOT NULL REFERENCES namespaces (id),
    key TEXT NOT NULL,
    state BLOB NOT NULL,
    PRIMARY KEY (namespace, key)
) STRICT;

-- Reads by namespace stay cheap in stores holding many namespaces.
CREATE INDEX trajectories_by_namespace ON trajectories (namespace);
CREATE INDEX snapshots_by_namespace ON snapshots (namespace);
CREATE INDEX claims_by_namespace ON claims (namespace);
CREATE INDEX pages_by_namespace ON pages (namespace);
