-- trajwiki store on PostgreSQL, schema version 2: what changed since (the SQLite store's
-- version 7; see its migration for the meaning).
--
-- The clock is a sequence (writers of different namespaces run at once and do not wait for one
-- another on it). Writers of one namespace take turns under its advisory lock, each drawing its
-- generation after taking the lock, so one namespace's generations increase in commit order;
-- CACHE 1 keeps values increasing across sessions too.

CREATE SEQUENCE generation_clock AS BIGINT START WITH 2 MINVALUE 1 CACHE 1 NO CYCLE;

CREATE TABLE namespace_generations (
    namespace TEXT COLLATE "C" PRIMARY KEY REFERENCES namespaces (id) DEFERRABLE,
    generation BIGINT NOT NULL,
    reset BIGINT NOT NULL CHECK (reset <= generation)
);
INSERT INTO namespace_generations (namespace, generation, reset) SELECT id, 1, 1 FROM namespaces;

ALTER TABLE snapshots ADD COLUMN generation BIGINT NOT NULL DEFAULT 0;
ALTER TABLE claims ADD COLUMN generation BIGINT NOT NULL DEFAULT 0;
ALTER TABLE claim_state ADD COLUMN generation BIGINT NOT NULL DEFAULT 0;
ALTER TABLE trajectories ADD COLUMN generation BIGINT NOT NULL DEFAULT 0;
ALTER TABLE pages ADD COLUMN generation BIGINT NOT NULL DEFAULT 0;

CREATE INDEX snapshots_by_generation ON snapshots (namespace, generation);
CREATE INDEX claims_by_generation ON claims (namespace, generation);
CREATE INDEX claim_state_by_generation ON claim_state (namespace, generation);
CREATE INDEX trajectories_by_generation ON trajectories (namespace, generation);
CREATE INDEX pages_by_generation ON pages (namespace, generation);
