-- trajwiki store, schema version 8: the statements that restate a claim, found by the claim.
--
-- A message that states a held claim again ("still living in Austin") makes no claim of its own:
-- the fold records it as an ADD op naming the held claim, with the message as the op's source.
-- When that claim is later revised or withdrawn, a reader marks each message that stated it, the
-- restatements too, so it finds a claim's ADD ops by the claim (and a reader of changes finds
-- them for the claims whose status changed, without a pass over the namespace's ops).
CREATE INDEX claim_ops_by_new_claim ON claim_ops (namespace, new_claim);
