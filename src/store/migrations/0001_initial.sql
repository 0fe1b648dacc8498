-- 0001: sessions, the event log, session locks, durable pauses, state.
-- Never edit a migration that has shipped: add 0002_*.sql instead.

CREATE TABLE sessions (
  id            TEXT PRIMARY KEY,
  workspace     TEXT NOT NULL,
  provider      TEXT NOT NULL DEFAULT '',
  model         TEXT NOT NULL DEFAULT '',
  command       TEXT NOT NULL DEFAULT 'code',
  title         TEXT NOT NULL DEFAULT '',
  created_at_ms INTEGER NOT NULL,
  updated_at_ms INTEGER NOT NULL,
  last_seq      INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX sessions_by_workspace ON sessions (workspace, updated_at_ms);
CREATE INDEX sessions_by_updated ON sessions (updated_at_ms);

CREATE TABLE events (
  session_id    TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
  seq           INTEGER NOT NULL,
  type          TEXT NOT NULL,
  turn_id       TEXT NOT NULL DEFAULT '',
  json          TEXT NOT NULL,
  created_at_ms INTEGER NOT NULL,
  PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;

CREATE TABLE session_locks (
  session_id      TEXT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
  token           TEXT NOT NULL,
  owner_pid       INTEGER NOT NULL,
  owner_host      TEXT NOT NULL,
  acquired_at_ms  INTEGER NOT NULL,
  heartbeat_at_ms INTEGER NOT NULL
);

CREATE TABLE checkpoints (
  id            TEXT PRIMARY KEY,
  session_id    TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
  turn_id       TEXT NOT NULL DEFAULT '',
  json          TEXT NOT NULL,
  closed        INTEGER NOT NULL DEFAULT 0,
  created_at_ms INTEGER NOT NULL,
  updated_at_ms INTEGER NOT NULL
);
CREATE INDEX checkpoints_open ON checkpoints (session_id, closed);

CREATE TABLE pending_index (
  pending_id    TEXT PRIMARY KEY,
  checkpoint_id TEXT NOT NULL REFERENCES checkpoints (id) ON DELETE CASCADE,
  session_id    TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
  created_at_ms INTEGER NOT NULL
);
CREATE INDEX pending_by_checkpoint ON pending_index (checkpoint_id);
CREATE INDEX pending_by_session ON pending_index (session_id, created_at_ms);

CREATE TABLE session_state (
  session_id    TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
  key           TEXT NOT NULL,
  json          TEXT NOT NULL,
  updated_at_ms INTEGER NOT NULL,
  PRIMARY KEY (session_id, key)
) WITHOUT ROWID;
