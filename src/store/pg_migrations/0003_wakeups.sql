-- 0003: waking the instance that continues a session. A decision that
-- completes a paused batch inserts a row here and sends
-- NOTIFY agentloop_wakeup in the same transaction; a server claims due rows
-- (moving not_before_ms ahead while it tries) and continues the session; the
-- claim of the decided batch (ClaimDecided) deletes the row. NOTIFY is only
-- a hint: servers also poll this table.
CREATE TABLE session_wakeups (
  session_id    text PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
  tenant        text NOT NULL,
  not_before_ms bigint NOT NULL,
  created_at_ms bigint NOT NULL
);
CREATE INDEX session_wakeups_due ON session_wakeups (not_before_ms);

-- Held leases by age of their heartbeat: finding the sessions whose holder
-- stopped renewing (crashed) is an index range scan.
CREATE INDEX sessions_held_leases ON sessions (lease_heartbeat_at_ms)
  WHERE lease_token IS NOT NULL;
