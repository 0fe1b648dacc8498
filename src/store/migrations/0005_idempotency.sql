-- 0005: the HTTP server's idempotency keys, kept in the store so that a
-- repeated POST is recognised after a restart (and, on a shared store, by
-- another instance).
--
-- One row per (tenant, key): the hash of the request that claimed it, its
-- answer once there is one (NULL while it is being run), and when it was
-- claimed (old rows are deleted as keys are claimed).
CREATE TABLE idempotency_keys (
  tenant TEXT NOT NULL,
  key TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  response TEXT,
  created_at_ms INTEGER NOT NULL,
  PRIMARY KEY (tenant, key)
);
CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at_ms);
