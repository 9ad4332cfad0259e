-- trajwiki store, schema version 4: a namespace's lists in one place.
--
-- The list tables (a record's messages, claims, sources and links, in position order) and the
-- derived claim state were keyed by the record id alone. Ids are hashes, so one namespace's
-- rows lay scattered over the whole key space: reading a small namespace in a store that holds
-- a large one touched a page of the tree per record. Each table is rebuilt here WITHOUT ROWID
-- with the namespace first in its key, so a namespace's rows are contiguous, in record then
-- position order, and a namespace read is a range scan. The rows and their meaning are
-- unchanged; the triggers that keep the lists immutable are recreated as they were.


CREATE TABLE snapshot_messages_v4 (
    namespace TEXT NOT NULL REFERENCES namespaces (id),
    snapshot TEXT NOT NULL REFERENCES snapshots (id),
    position INTEGER NOT NULL,
    message TEXT NOT NULL REFERENCES messages (id),
    PRIMARY KEY (namespace, snapshot, position)
) STRICT, WITHOUT ROWID;
INSERT INTO snapshot_messages_v4 (namespace, snapshot, position, message)
    SELECT p.namespace, x.snapshot, x.position, x.message FROM snapshot_messages x JOIN snapshots p ON p.id = x.snapshot;
DROP TABLE snapshot_messages;
ALTER TABLE snapshot_messages_v4 RENAME TO snapshot_messages;

CREATE TRIGGER snapshot_messages_no_update BEFORE UPDATE ON snapshot_messages
BEGIN SELECT RAISE(ABORT, 'immutable record: snapshot_messages rows cannot be updated'); END;
CREATE TRIGGER snapshot_messages_no_delete BEFORE DELETE ON snapshot_messages WHEN (SELECT allow_delete FROM guard) = 0
BEGIN SELECT RAISE(ABORT, 'immutable record: snapshot_messages rows cannot be deleted'); END;

-- Whether a message is in a snapshot yet (what the fold asks of a message).
CREATE INDEX snapshot_messages_by_message ON snapshot_messages (message);

CREATE TABLE claim_sources_v4 (
    namespace TEXT NOT NULL REFERENCES namespaces (id),
    claim TEXT NOT NULL REFERENCES claims (id),
    position INTEGER NOT NULL,
    message TEXT NOT NULL REFERENCES messages (id),
    PRIMARY KEY (namespace, claim, position)
) STRICT, WITHOUT ROWID;
INSERT INTO claim_sources_v4 (namespace, claim, position, message)
    SELECT p.namespace, x.claim, x.position, x.message FROM claim_sources x JOIN claims p ON p.id = x.claim;
DROP TABLE claim_sources;
ALTER TABLE claim_sources_v4 RENAME TO claim_sources;

CREATE TRIGGER claim_sources_no_update BEFORE UPDATE ON claim_sources
BEGIN SELECT RAISE(ABORT, 'immutable record: claim_sources rows cannot be updated'); END;
CREATE TRIGGER claim_sources_no_delete BEFORE DELETE ON claim_sources WHEN (SELECT allow_delete FROM guard) = 0
BEGIN SELECT RAISE(ABORT, 'immutable record: claim_sources rows cannot be deleted'); END;

CREATE TABLE snapshot_claims_v4 (
    namespace TEXT NOT NULL REFERENCES namespaces (id),
    snapshot TEXT NOT NULL REFERENCES snapshots (id),
    position INTEGER NOT NULL,
    claim TEXT NOT NULL REFERENCES claims (id),
    PRIMARY KEY (namespace, snapshot, position)
) STRICT, WITHOUT ROWID;
INSERT INTO snapshot_claims_v4 (namespace, snapshot, position, claim)
    SELECT p.namespace, x.snapshot, x.position, x.claim FROM snapshot_claims x JOIN snapshots p ON p.id = x.snapshot;
DROP TABLE snapshot_claims;
ALTER TABLE snapshot_claims_v4 RENAME TO snapshot_claims;

CREATE TRIGGER snapshot_claims_no_update BEFORE UPDATE ON snapshot_claims
BEGIN SELECT RAISE(ABORT, 'immutable record: snapshot_claims rows cannot be updated'); END;
CREATE TRIGGER snapshot_claims_no_delete BEFORE DELETE ON snapshot_claims WHEN (SELECT allow_delete FROM guard) = 0
BEGIN SELECT RAISE(ABORT, 'immutable record: snapshot_claims rows cannot be deleted'); END;

CREATE TABLE op_sources_v4 (
    namespace TEXT NOT NULL REFERENCES namespaces (id),
    op TEXT NOT NULL REFERENCES claim_ops (id),
    position INTEGER NOT NULL,
    message TEXT NOT NULL REFERENCES messages (id),
    PRIMARY KEY (namespace, op, position)
) STRICT, WITHOUT ROWID;
INSERT INTO op_sources_v4 (namespace, op, position, message)
    SELECT p.namespace, x.op, x.position, x.message FROM op_sources x JOIN claim_ops p ON p.id = x.op;
DROP TABLE op_sources;
ALTER TABLE op_sources_v4 RENAME TO op_sources;

CREATE TRIGGER op_sources_no_update BEFORE UPDATE ON op_sources
BEGIN SELECT RAISE(ABORT, 'immutable record: op_sources rows cannot be updated'); END;
CREATE TRIGGER op_sources_no_delete BEFORE DELETE ON op_sources WHEN (SELECT allow_delete FROM guard) = 0
BEGIN SELECT RAISE(ABORT, 'immutable record: op_sources rows cannot be deleted'); END;

CREATE TABLE page_trajectories_v4 (
    namespace TEXT NOT NULL REFERENCES namespaces (id),
    page TEXT NOT NULL,
    revision INTEGER NOT NULL,
    position INTEGER NOT NULL,
    trajectory TEXT NOT NULL REFERENCES trajectories (id),
    PRIMARY KEY (namespace, page, revision, position),
    FOREIGN KEY (page, revision) REFERENCES page_revisions (page, revision)
) STRICT, WITHOUT ROWID;
INSERT INTO page_trajectories_v4 (namespace, page, revision, position, trajectory)
    SELECT p.namespace, x.page, x.revision, x.position, x.trajectory FROM page_trajectories x JOIN pages p ON p.id = x.page;
DROP TABLE page_trajectories;
ALTER TABLE page_trajectories_v4 RENAME TO page_trajectories;

CREATE TRIGGER page_trajectories_no_update BEFORE UPDATE ON page_trajectories
BEGIN SELECT RAISE(ABORT, 'immutable record: page_trajectories rows cannot be updated'); END;
CREATE TRIGGER page_trajectories_no_delete BEFORE DELETE ON page_trajectories WHEN (SELECT allow_delete FROM guard) = 0
BEGIN SELECT RAISE(ABORT, 'immutable record: page_trajectories rows cannot be deleted'); END;

CREATE TABLE claim_state_v4 (
    namespace TEXT NOT NULL REFERENCES namespaces (id),
    claim TEXT NOT NULL REFERENCES claims (id),
    status TEXT NOT NULL,
    PRIMARY KEY (namespace, claim)
) STRICT, WITHOUT ROWID;
INSERT INTO claim_state_v4 (namespace, claim, status)
    SELECT p.namespace, x.claim, x.status FROM claim_state x JOIN claims p ON p.id = x.claim;
DROP TABLE claim_state;
ALTER TABLE claim_state_v4 RENAME TO claim_state;
