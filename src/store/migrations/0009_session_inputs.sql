-- 0009: inputs queued for a session while a turn runs on it (the HTTP
-- server's on_busy "enqueue"), so that they survive a restart. The holder of
-- the session's lock takes the oldest (lowest position) when its turn ends.
-- `input` is empty for a continuation (continue_turn = 1).
CREATE TABLE session_inputs (
  id            TEXT PRIMARY KEY,
  tenant        TEXT NOT NULL,
  session_id    TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
  position      INTEGER NOT NULL,
  input         TEXT NOT NULL,
  continue_turn INTEGER NOT NULL DEFAULT 0,
  created_at_ms INTEGER NOT NULL,
  UNIQUE (session_id, position)
);
