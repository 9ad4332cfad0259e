-- trajwiki store on PostgreSQL, schema version 4: page bodies stored in chunks, each once (the
-- SQLite store's version 9; see its migration for the meaning).
CREATE TABLE page_chunks (
    namespace TEXT COLLATE "C" NOT NULL REFERENCES namespaces (id) DEFERRABLE,
    hash TEXT COLLATE "C" NOT NULL,
    text TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (namespace, hash)
);
ALTER TABLE page_revisions ADD COLUMN chunks TEXT COLLATE "C";

CREATE TRIGGER page_chunks_no_update BEFORE UPDATE ON page_chunks
    FOR EACH ROW EXECUTE FUNCTION trajwiki_refuse_update();
CREATE TRIGGER page_chunks_no_delete BEFORE DELETE ON page_chunks
    FOR EACH ROW EXECUTE FUNCTION trajwiki_guard_delete();
