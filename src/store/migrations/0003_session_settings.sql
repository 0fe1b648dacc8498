-- 0003: the settings pinned to a session.
--
-- Everything that shapes a turn of the session (workspace, provider, model,
-- command, budgets, permission rules with their sources, sandbox, switches,
-- system prompt, approver), as one JSON object written when the session is
-- created and rewritten, together with a `settings` event, when a later turn
-- changes it. Never a secret: API keys and webhook secrets are stored as the
-- name of the variable they come from. '' (a session created before this
-- migration): nothing is pinned, the opening process's settings apply.
ALTER TABLE sessions ADD COLUMN settings TEXT NOT NULL DEFAULT '';
