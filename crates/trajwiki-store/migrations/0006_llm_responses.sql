-- trajwiki store, schema version 6: language-model responses, kept so that a rerun asks nothing.
--
-- A response is stored under a digest of (model, messages, schema) — never under anything that
-- holds a credential — with the namespace it was asked for, so that deleting a namespace deletes
-- what models said about it. Rows are only ever added.
CREATE TABLE llm_responses (
    key TEXT PRIMARY KEY,
    namespace TEXT NOT NULL REFERENCES namespaces (id),
    model TEXT NOT NULL,
    response TEXT NOT NULL
) STRICT;
CREATE INDEX llm_responses_by_namespace ON llm_responses (namespace);
CREATE TRIGGER llm_responses_no_update BEFORE UPDATE ON llm_responses
BEGIN SELECT RAISE(ABORT, 'immutable record: llm_responses rows cannot be updated'); END;
