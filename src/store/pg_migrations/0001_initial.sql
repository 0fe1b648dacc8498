-- 0001: the PostgreSQL schema of the session store (docs/storage.md,
-- "PostgreSQL"). Never edit a migration that has shipped: add 0002_*.sql.
--
-- Every row carries the tenant of its session (copied when the row is
-- written), so a tenant's data can be found, exported or deleted by tenant
-- alone. Times are Unix epoch milliseconds from the writing instance's clock,
-- as in the SQLite store. Event and checkpoint bodies are text, not jsonb:
-- they are kept byte for byte as written (an export prints them verbatim,
-- and a corrupt row is reported, not refused or reformatted).

-- The order of last activity (ListSessions, run --continue): a sequence
-- value taken by each commit that appends to a session.
CREATE SEQUENCE session_activity;

CREATE TABLE sessions (
  id            text PRIMARY KEY,
  tenant        text NOT NULL DEFAULT '',
  workspace     text NOT NULL,
  provider      text NOT NULL DEFAULT '',
  model         text NOT NULL DEFAULT '',
  command       text NOT NULL DEFAULT 'code',
  title         text NOT NULL DEFAULT '',
  agent         text NOT NULL DEFAULT '',
  metadata      text NOT NULL DEFAULT '',
  settings      text NOT NULL DEFAULT '',
  created_at_ms bigint NOT NULL,
  updated_at_ms bigint NOT NULL,
  -- The highest stored event seq. Appends lock this row, so a session's
  -- events commit in seq order: a reader that sees seq N has seen every
  -- stored seq below N.
  last_seq      bigint NOT NULL DEFAULT 0,
  activity      bigint NOT NULL DEFAULT nextval('session_activity'),
  -- The lease of the process running a turn on the session (NULL token:
  -- free). The epoch grows with every new holder.
  lease_token           text,
  lease_pid             bigint,
  lease_host            text,
  lease_epoch           bigint NOT NULL DEFAULT 0,
  lease_acquired_at_ms  bigint,
  lease_heartbeat_at_ms bigint
);
CREATE INDEX sessions_by_activity ON sessions (activity);
CREATE INDEX sessions_by_tenant ON sessions (tenant, activity);
CREATE INDEX sessions_by_workspace ON sessions (workspace, activity);

CREATE TABLE session_events (
  tenant        text NOT NULL,
  session_id    text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
  seq           bigint NOT NULL,
  type          text NOT NULL,
  turn_id       text NOT NULL DEFAULT '',
  json          text NOT NULL,
  created_at_ms bigint NOT NULL,
  PRIMARY KEY (session_id, seq)
);

-- A paused batch. state: 0 open (items outstanding), 1 closed, 2 decided
-- (every item decided, the turn not yet continued).
CREATE TABLE checkpoints (
  id            text PRIMARY KEY,
  tenant        text NOT NULL,
  session_id    text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
  turn_id       text NOT NULL DEFAULT '',
  json          text NOT NULL,
  state         smallint NOT NULL DEFAULT 0 CHECK (state IN (0, 1, 2)),
  created_at_ms bigint NOT NULL,
  updated_at_ms bigint NOT NULL,
  ord           bigserial
);
CREATE INDEX checkpoints_by_session ON checkpoints (session_id, state);
CREATE INDEX checkpoints_decided ON checkpoints (updated_at_ms, ord) WHERE state = 2;

-- Every pending item ever paused on; resolved once decided or its batch is
-- closed. Resolving is one conditional UPDATE of this row (resolved = false
-- -> true) under the checkpoint's row lock: of any number of concurrent
-- deciders exactly one changes it.
CREATE TABLE pending_index (
  pending_id    text PRIMARY KEY,
  tenant        text NOT NULL,
  checkpoint_id text NOT NULL REFERENCES checkpoints (id) ON DELETE CASCADE,
  session_id    text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
  created_at_ms bigint NOT NULL,
  resolved      boolean NOT NULL DEFAULT false,
  ord           bigserial
);
CREATE INDEX pending_outstanding ON pending_index (created_at_ms, ord) WHERE NOT resolved;
CREATE INDEX pending_by_checkpoint ON pending_index (checkpoint_id);
CREATE INDEX pending_by_session ON pending_index (session_id);

CREATE TABLE session_state (
  tenant        text NOT NULL,
  session_id    text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
  key           text NOT NULL,
  json          text NOT NULL,
  updated_at_ms bigint NOT NULL,
  PRIMARY KEY (session_id, key)
);

CREATE TABLE idempotency_keys (
  tenant        text NOT NULL,
  key           text NOT NULL,
  fingerprint   text NOT NULL,
  response      text,
  created_at_ms bigint NOT NULL,
  PRIMARY KEY (tenant, key)
);
CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at_ms);
