-- trajwiki store, schema version 9: page bodies stored in chunks, each once.
--
-- A person's page lists every fact of theirs, so its body grows with the history, and every
-- append that adds a fact gave the page a new revision holding the whole body again (about
-- 140 KB written per appended message at 4,000 messages). A revision now lists its body's
-- chunks (`chunks`: their hashes, comma-separated, in order; `body` is then empty); a chunk is
-- stored once per namespace, so an append writes the chunks it changed and a list of hashes.
-- Revisions written before this version keep their body in `body` (`chunks` NULL).
CREATE TABLE page_chunks (
    namespace TEXT NOT NULL REFERENCES namespaces (id),
    hash TEXT NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (namespace, hash)
) STRICT, WITHOUT ROWID;
ALTER TABLE page_revisions ADD COLUMN chunks TEXT;

CREATE TRIGGER page_chunks_no_update BEFORE UPDATE ON page_chunks
BEGIN SELECT RAISE(ABORT, 'immutable record: page_chunks rows cannot be updated'); END;
CREATE TRIGGER page_chunks_no_delete BEFORE DELETE ON page_chunks WHEN (SELECT allow_delete FROM guard) = 0
BEGIN SELECT RAISE(ABORT, 'immutable record: page_chunks rows cannot be deleted'); END;
