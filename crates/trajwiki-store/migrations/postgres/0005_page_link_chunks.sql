-- trajwiki store on PostgreSQL, schema version 5: the trajectories a page revision links stored
-- in chunks, each once (the SQLite store's version 10; see its migration for the meaning).
ALTER TABLE page_revisions ADD COLUMN link_chunks TEXT COLLATE "C";
