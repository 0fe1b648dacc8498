-- 0007: the HTTP server's notification outbox, so that a webhook is
-- delivered at least once across restarts.
--
-- One row per notification: the delivery id, what is POSTed, and when it is
-- due for the next claim (NULL once delivered). A claim moves due_at_ms
-- ahead while its claimer delivers; old rows are deleted as rows are claimed.
CREATE TABLE notification_outbox (
  id            TEXT PRIMARY KEY,
  session_id    TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
  agent         TEXT NOT NULL,
  event         TEXT NOT NULL,
  body          TEXT NOT NULL,
  created_at_ms INTEGER NOT NULL,
  due_at_ms     INTEGER
);
CREATE INDEX notification_outbox_due ON notification_outbox (due_at_ms)
  WHERE due_at_ms IS NOT NULL;
CREATE INDEX notification_outbox_by_age ON notification_outbox (created_at_ms);
CREATE INDEX notification_outbox_by_session ON notification_outbox (session_id);
