-- 0002: subagent sessions. A session started by a subagent tool names the
-- session that started it (empty for a root session), so a tree of
-- sessions can be listed from its root (`agentloop sessions show --tree`).
ALTER TABLE sessions ADD COLUMN parent_id TEXT NOT NULL DEFAULT '';
CREATE INDEX sessions_by_parent ON sessions (tenant, parent_id) WHERE parent_id != '';
