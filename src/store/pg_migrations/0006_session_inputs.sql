-- 0006: inputs queued for a session while a turn runs on it (the HTTP
-- server's on_busy "enqueue"), as SQLite's 0009. The instance holding the
-- session's lease takes the oldest (lowest position) when its turn ends;
-- enqueueing also leaves a row in session_wakeups (and NOTIFY), which stays
-- while inputs remain, so that another instance claims the session when its
-- holder stopped. `input` is empty for a continuation.
CREATE TABLE session_inputs (
  id            text PRIMARY KEY,
  tenant        text NOT NULL,
  session_id    text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
  position      bigint NOT NULL,
  input         text NOT NULL,
  continue_turn boolean NOT NULL DEFAULT false,
  created_at_ms bigint NOT NULL,
  UNIQUE (session_id, position)
);
