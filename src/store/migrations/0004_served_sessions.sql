-- 0004: sessions served over HTTP, and the record of resolved pending items.
--
-- tenant, agent and metadata are set when a server creates a session (the
-- token's tenant, the agent it runs, the client's JSON object); a session of
-- the command line has them empty. Every query of the server filters by
-- tenant.
--
-- A pending item's index row is kept after the item is decided or its batch
-- is closed (resolved = 1), so a late or repeated decision about it can be
-- answered exactly: the same decision again, a different one, or a sibling
-- cancelled by a denial.
ALTER TABLE sessions ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN agent TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN metadata TEXT NOT NULL DEFAULT '';
CREATE INDEX sessions_by_tenant ON sessions (tenant, updated_at_ms);
ALTER TABLE pending_index ADD COLUMN resolved INTEGER NOT NULL DEFAULT 0;
