-- trajwiki store on PostgreSQL, schema version 3: the statements that restate a claim, found by
-- the claim (the SQLite store's version 8; see its migration for the meaning).
CREATE INDEX claim_ops_by_new_claim ON claim_ops (namespace, new_claim);
